//! The UI's own sign-in with the bearer token (`/ui/login`), which sets its session cookie.

use askama::Template;
use axum::extract::{Form, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{Ui, page};

#[derive(Template)]
#[template(path = "ui/login.html")]
struct LoginPage {
    failed: bool,
}

#[derive(Deserialize)]
pub(in super::super) struct SignInQuery {
    code: Option<String>,
}

pub(in super::super) async fn sign_in_page(
    State(ui): State<Ui>,
    Query(query): Query<SignInQuery>,
) -> Response {
    let Some(token) = ui.inner.token.as_ref() else {
        return Redirect::to("/ui").into_response();
    };
    if let Some(code) = query.code {
        if ui.redeem(&code) {
            return signed_in(token);
        }
        let mut response = page(LoginPage { failed: true }.render());
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        return response;
    }
    page(LoginPage { failed: false }.render())
}

/// Sets the UI's session cookie and opens the dashboard.
fn signed_in(token: &crate::auth::Secret) -> Response {
    let cookie = format!(
        "{}={}; Path=/ui; HttpOnly; SameSite=Strict",
        crate::access::TOKEN_COOKIE,
        crate::access::ui_session(token)
    );
    ([(header::SET_COOKIE, cookie)], Redirect::to("/ui")).into_response()
}

#[derive(Deserialize)]
pub(in super::super) struct SignInForm {
    token: String,
}

pub(in super::super) async fn sign_in(
    State(ui): State<Ui>,
    Form(form): Form<SignInForm>,
) -> Response {
    let Some(token) = ui.inner.token.as_ref() else {
        return Redirect::to("/ui").into_response();
    };
    use std::sync::atomic::Ordering;
    if !crate::access::constant_time_eq(form.token.as_bytes(), token.expose().as_bytes()) {
        // After a few wrong tokens in a row each further one waits longer (up to 2 s).
        let n = ui.inner.failures.fetch_add(1, Ordering::SeqCst) + 1;
        if n > 5 {
            let ms = (50u64 << (n - 5).min(6)).min(2000);
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        let mut response = page(LoginPage { failed: true }.render());
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        return response;
    }
    ui.inner.failures.store(0, Ordering::SeqCst);
    signed_in(token)
}
