//! An app's sign-in from the credentials page (`/ui/credentials/login`, and
//! `/ui/credentials/mcp-login` for a remote MCP server): OAuth 2 or MCP authorization.

use std::collections::HashMap;

use aai_descriptor::Auth;
use askama::Template;
use axum::extract::{Form, State};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::credentials::auth_of;
use super::{AppForm, Chrome, Ui, forbidden_csrf, page};
use crate::auth::store::Credential;

/// The URL of a remote MCP server that signs in the MCP way (no descriptor `auth`).
pub(super) fn mcp_url(entry: &crate::registry::Entry) -> Option<&str> {
    match (&entry.binding().executor, &entry.binding().auth) {
        (aai_descriptor::Executor::Mcp(aai_descriptor::McpServer::Http { url, .. }), None) => {
            Some(url)
        }
        _ => None,
    }
}

/// The app id, name and URL of a served remote MCP server that signs in the MCP way.
async fn mcp_app(ui: &Ui, app: &str) -> Option<(String, String)> {
    let snapshot = ui.gateway().snapshot().await;
    let entry = snapshot.entries.iter().find(|e| e.app.id == app)?;
    Some((snapshot.name(entry).to_owned(), mcp_url(entry)?.to_owned()))
}

/// The page that names a remote MCP server's origin and its authorization server's before
/// a sign-in (the admin's on the credentials page, a person's on their sign-ins page).
#[derive(Template)]
#[template(path = "ui/mcp_sign_in.html")]
pub(super) struct McpSignInPage {
    pub(super) c: Chrome,
    pub(super) app: String,
    pub(super) name: String,
    pub(super) server: String,
    pub(super) issuer: String,
    pub(super) issuer_origin: String,
    /// Where the form goes on to, and where "Cancel" goes back to.
    pub(super) action: &'static str,
    pub(super) cancel: &'static str,
}

/// Starts the OAuth sign-in of an app and sends the browser to the provider; the tokens
/// are stored when the provider redirects back to the gateway's loopback listener. A
/// remote MCP server first gets a page that shows its origin and its authorization
/// server's (discovery asked only the server) and asks to go on.
pub(in super::super) async fn login(State(ui): State<Ui>, Form(form): Form<AppForm>) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    if let Some((name, url)) = mcp_app(&ui, &form.app).await {
        let plan = match crate::auth::mcp::prepare(&url).await {
            Ok(p) => p,
            Err(e) => {
                return ui.flash("/ui/credentials", format!("Cannot sign in: {e}."), false);
            }
        };
        return page(
            McpSignInPage {
                c: Chrome::new(&ui, "Sign in", "/ui/credentials", None),
                app: form.app,
                name,
                server: crate::auth::mcp::origin(&url),
                issuer_origin: crate::auth::mcp::origin(&plan.issuer),
                issuer: plan.issuer,
                action: "/ui/credentials/mcp-login",
                cancel: "/ui/credentials",
            }
            .render(),
        );
    }
    let Some(Auth::OAuth2(oauth)) = auth_of(&ui, &form.app).await else {
        return ui.flash(
            "/ui/credentials",
            "That app does not sign in with OAuth 2.",
            false,
        );
    };
    let Some(client_id) = ui.pipeline().authenticator().client_id(&form.app, &oauth) else {
        return ui.flash(
            "/ui/credentials",
            format!(
                "No OAuth client id for `{}`: set \"apps\": {{\"{}\": {{\"clientId\": \"…\"}}}} in config.json.",
                form.app, form.app
            ),
            false,
        );
    };
    let (url_tx, url_rx) = tokio::sync::oneshot::channel::<String>();
    let app = form.app.clone();
    let task_ui = ui.clone();
    set_login(&ui, &app, "waiting for the provider…");
    tokio::spawn(async move {
        let signed_in = crate::auth::oauth::login(
            &oauth,
            &client_id,
            move |url| {
                let _ = url_tx.send(url.to_owned());
            },
            crate::peer::of_callback,
        )
        .await;
        let outcome = match signed_in {
            Ok(tokens) => match task_ui
                .pipeline()
                .authenticator()
                .store()
                .set(&app, Credential::OAuth(tokens))
                .await
            {
                Ok(()) => "signed in".to_owned(),
                Err(e) => format!("signed in, but the tokens could not be stored: {e}"),
            },
            Err(e) => format!("failed: {e}"),
        };
        set_login(&task_ui, &app, &outcome);
    });
    to_sign_in(&ui, url_rx).await
}

#[derive(Debug, Deserialize)]
pub(in super::super) struct McpLoginForm {
    csrf: Option<String>,
    app: String,
    /// The authorization server the user agreed to.
    issuer: String,
}

/// A remote MCP server's sign-in, after the user agreed to its origins: discovery again
/// (the authorization server must be the one shown), then `auth::mcp::sign_in` in the
/// background; the browser goes to the first authorization URL.
pub(in super::super) async fn mcp_login(
    State(ui): State<Ui>,
    Form(form): Form<McpLoginForm>,
) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    let Some((_, url)) = mcp_app(&ui, &form.app).await else {
        return ui.flash(
            "/ui/credentials",
            "That app is not a remote MCP server.",
            false,
        );
    };
    let plan = match crate::auth::mcp::prepare(&url).await {
        Ok(p) if p.issuer == form.issuer => p,
        Ok(_) => {
            return ui.flash(
                "/ui/credentials",
                "The server now names another authorization server; start the sign-in again.",
                false,
            );
        }
        Err(e) => return ui.flash("/ui/credentials", format!("Cannot sign in: {e}."), false),
    };
    let (url_tx, url_rx) = tokio::sync::oneshot::channel::<String>();
    let url_tx = std::sync::Mutex::new(Some(url_tx));
    let app = form.app.clone();
    let task_ui = ui.clone();
    set_login(&ui, &app, "waiting for the authorization server…");
    ui.inner
        .login_links
        .lock()
        .expect("links lock")
        .remove(&app);
    tokio::spawn(async move {
        let store = task_ui.pipeline().authenticator().store().clone();
        let before = match store.get(&app).await {
            Ok(Some(Credential::McpOAuth(g))) => Some(g),
            _ => None,
        };
        let document = task_ui.gateway().config().oauth_client_metadata_url.clone();
        let sign_in = crate::auth::mcp::SignIn {
            app: &app,
            plan: &plan,
            before: before.as_ref(),
            client_document: document.as_deref(),
            owner_of: crate::peer::of_callback,
        };
        // The first URL is where this page's browser goes; a step-up's is shown.
        let open = |link: &str| match url_tx.lock().expect("url lock").take() {
            Some(tx) => {
                let _ = tx.send(link.to_owned());
            }
            None => {
                task_ui
                    .inner
                    .login_links
                    .lock()
                    .expect("links lock")
                    .insert(app.clone(), link.to_owned());
            }
        };
        let step_up = || {
            set_login(
                &task_ui,
                &app,
                "the server wants more scope: open the link below to sign in again",
            );
        };
        let outcome = match crate::auth::mcp::sign_in(sign_in, &open, &step_up).await {
            Ok(grant) => match store.set(&app, Credential::McpOAuth(grant)).await {
                Ok(()) => "signed in".to_owned(),
                Err(e) => format!("signed in, but the tokens could not be stored: {e}"),
            },
            Err(e) => format!("failed: {e}"),
        };
        task_ui
            .inner
            .login_links
            .lock()
            .expect("links lock")
            .remove(&app);
        set_login(&task_ui, &app, &outcome);
    });
    to_sign_in(&ui, url_rx).await
}

/// Sends the browser to the first authorization URL of a sign-in started in the
/// background, or back to the credentials page when it could not start.
async fn to_sign_in(ui: &Ui, url: tokio::sync::oneshot::Receiver<String>) -> Response {
    match url.await {
        Ok(url) => Redirect::to(&url).into_response(),
        Err(_) => ui.flash(
            "/ui/credentials",
            "The sign-in could not start; see the credentials page.",
            false,
        ),
    }
}

fn set_login(ui: &Ui, app: &str, what: &str) {
    let mut logins: std::sync::MutexGuard<'_, HashMap<String, String>> =
        ui.inner.logins.lock().expect("logins lock");
    logins.insert(app.to_owned(), what.to_owned());
}
