//! Signing in to the UI through the team's authorization server (`web.auth`): the
//! authorization code flow with PKCE, as the client `web.auth.clientId`.
//!
//! * `GET /ui/signin?next=…` keeps a random state and PKCE verifier in a short-lived
//!   cookie (HttpOnly, `SameSite=Lax`, ten minutes) and sends the browser to the
//!   authorization endpoint, asking for this server's resource and its scopes.
//! * `GET /ui/callback` takes the code only with the state of that cookie, redeems it,
//!   checks the access token like any bearer token (issuer, audience, expiry, scopes),
//!   and keeps it in the person cookie ([`crate::access::PERSON_COOKIE`]) until it
//!   expires. Nothing is kept on the server: any replica serves the next request.
//! * `POST /ui/signout` forgets the cookie.

use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::Ui;

/// The cookie of a sign-in in progress: `state.verifier.next`.
const SIGNIN_COOKIE: &str = "aai_signin";
/// How long a sign-in may take.
const SIGNIN_SECS: u64 = 600;

#[derive(Debug, Deserialize)]
pub(super) struct StartQuery {
    next: Option<String>,
}

/// `GET /ui/signin`: to the authorization server.
pub(super) async fn start(State(ui): State<Ui>, Query(q): Query<StartQuery>) -> Response {
    let Some(team) = ui.team() else {
        return Redirect::to("/ui/login").into_response();
    };
    let Some(client) = team.client() else {
        return refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "The UI cannot sign you in: `web.auth.clientId` is not set. Clients with a token of the team's authorization server can still call /mcp.",
        );
    };
    let server = match team.server().await {
        Ok(server) => server,
        Err(e) => return refused(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    let state = crate::auth::oauth::random_token(32);
    let verifier = crate::auth::oauth::random_token(64);
    let next = safe_next(q.next.as_deref());
    let Ok(mut url) = reqwest::Url::parse(&server.authorization_endpoint) else {
        return refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "The authorization server's authorization endpoint is not a URL.",
        );
    };
    let mut scopes = vec!["openid".to_owned()];
    scopes.extend(team.config().scopes.iter().cloned());
    scopes.extend(team.config().scope_access.scopes().map(str::to_owned));
    scopes.push(team.config().admin_scope.clone());
    scopes.dedup();
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &client.id)
        .append_pair("redirect_uri", &redirect_uri(team))
        .append_pair("state", &state)
        .append_pair("code_challenge", &crate::auth::oauth::challenge(&verifier))
        .append_pair("code_challenge_method", "S256")
        .append_pair("resource", &team.config().audience)
        .append_pair("scope", &scopes.join(" "));
    let cookie = format!(
        "{SIGNIN_COOKIE}={state}.{verifier}.{}; Path=/ui; HttpOnly; SameSite=Lax; Max-Age={SIGNIN_SECS}{}",
        url::form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>(),
        secure(team)
    );
    ([(header::SET_COOKIE, cookie)], Redirect::to(url.as_str())).into_response()
}

#[derive(Debug, Deserialize)]
pub(super) struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// `GET /ui/callback`: the code, redeemed and checked, becomes the person cookie.
pub(super) async fn callback(
    State(ui): State<Ui>,
    Query(q): Query<CallbackQuery>,
    req: axum::extract::Request,
) -> Response {
    let Some(team) = ui.team() else {
        return Redirect::to("/ui/login").into_response();
    };
    if let Some(error) = q.error {
        return refused(
            StatusCode::UNAUTHORIZED,
            &format!(
                "The authorization server did not sign you in ({}).",
                crate::auth::oauth::printable(&error, 80)
            ),
        );
    }
    let pending = crate::access::cookie(&req, SIGNIN_COOKIE).map(str::to_owned);
    let Some((state, verifier, next)) = pending.as_deref().and_then(|c| {
        let mut parts = c.splitn(3, '.');
        Some((parts.next()?, parts.next()?, parts.next()?))
    }) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "No sign-in is in progress in this browser; start again at /ui.",
        );
    };
    let (Some(code), Some(given)) = (q.code, q.state) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "The callback lacks a code or state.",
        );
    };
    if !crate::access::constant_time_eq(given.as_bytes(), state.as_bytes()) {
        return refused(
            StatusCode::BAD_REQUEST,
            "This sign-in was not started in this browser: refused.",
        );
    }
    let (Some(client), Ok(server)) = (team.client(), team.server().await) else {
        return refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "The authorization server cannot be reached.",
        );
    };
    let tokens = match crate::auth::mcp::redeem(
        &server,
        &client,
        code,
        &redirect_uri(team),
        verifier.to_owned(),
        &team.config().audience,
    )
    .await
    {
        Ok(tokens) => tokens,
        Err(e) => {
            return refused(
                StatusCode::UNAUTHORIZED,
                &format!("The sign-in failed: {e}"),
            );
        }
    };
    let token = tokens.access_token.expose().to_owned();
    if let Err(refusal) = team.person(&token).await {
        return refused(
            StatusCode::FORBIDDEN,
            &format!("The authorization server's token is not taken here: {refusal}"),
        );
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let max_age = if tokens.expires_at > now {
        tokens.expires_at - now
    } else {
        3600
    };
    let next: String = url::form_urlencoded::parse(format!("n={next}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let person = format!(
        "{}={token}; Path=/ui; HttpOnly; SameSite=Lax; Max-Age={max_age}{}",
        crate::access::PERSON_COOKIE,
        secure(team)
    );
    let done = format!("{SIGNIN_COOKIE}=; Path=/ui; HttpOnly; SameSite=Lax; Max-Age=0");
    let mut response = Redirect::to(&safe_next(Some(&next))).into_response();
    for cookie in [person, done] {
        if let Ok(value) = header::HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

#[derive(Debug, Deserialize)]
pub(super) struct SignOutForm {
    csrf: Option<String>,
}

/// `POST /ui/signout`: the person cookie is forgotten (the token itself stays valid at
/// the authorization server until it expires).
pub(super) async fn sign_out(
    State(ui): State<Ui>,
    axum::extract::Form(form): axum::extract::Form<SignOutForm>,
) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return super::forbidden_csrf();
    }
    let cookie = format!(
        "{}=; Path=/ui; HttpOnly; SameSite=Lax; Max-Age=0",
        crate::access::PERSON_COOKIE
    );
    ([(header::SET_COOKIE, cookie)], Redirect::to("/ui")).into_response()
}

/// Where the authorization server sends the browser back: this server's public origin.
fn redirect_uri(team: &crate::access::resource::Resource) -> String {
    format!("{}/ui/callback", team.public_origin())
}

/// `; Secure` when the public origin is https.
fn secure(team: &crate::access::resource::Resource) -> &'static str {
    if team.public_origin().starts_with("https://") {
        "; Secure"
    } else {
        ""
    }
}

/// A page of the UI to go on to: only a path under `/ui` (never another site).
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if (n == "/ui" || n.starts_with("/ui/") || n.starts_with("/ui?"))
                && !n.contains("//")
                && !n.contains('\\')
                && !n.starts_with("/ui/signin")
                && !n.starts_with("/ui/callback") =>
        {
            n.to_owned()
        }
        _ => "/ui".to_owned(),
    }
}

fn refused(status: StatusCode, message: &str) -> Response {
    (status, format!("{message}\n")).into_response()
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn only_pages_of_the_ui_are_gone_on_to() {
        assert_eq!(safe_next(Some("/ui/history?app=x")), "/ui/history?app=x");
        assert_eq!(safe_next(Some("/ui")), "/ui");
        for hostile in [
            "https://evil.example",
            "//evil.example/ui",
            "/ui//evil.example",
            "/uix",
            "/ui\\evil",
            "/ui/signin?next=/ui",
            "",
        ] {
            assert_eq!(safe_next(Some(hostile)), "/ui", "{hostile}");
        }
        assert_eq!(safe_next(None), "/ui");
    }
}
