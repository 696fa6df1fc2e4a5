//! A person's own sign-ins to remote MCP servers, in team mode (`/ui/sign-ins`): each
//! person signs in upstream for themselves, from their own browser, and the grant is
//! stored as theirs (`auth::store::account`). An app whose sign-in is shared
//! (`apps.<id>.signIn`) is listed as such, with no button.
//!
//! * `POST /ui/sign-ins/start` asks only the server (discovery) and shows its origin and
//!   its authorization server's.
//! * `POST /ui/sign-ins/confirm` asks the same authorization server again, registers a
//!   client for the UI's public callback (or uses the one an admin stored), keeps the
//!   client as the person's pending sign-in in the credential store (so any replica can
//!   finish it), keeps the state and PKCE verifier in a ten-minute cookie bound to the
//!   person, and links the
//!   authorization URL (a link, not a redirect: the UI's `form-action 'self'` forbids a
//!   form from leading to another site).
//! * `GET /ui/sign-ins/callback` takes the code only with that cookie's state, for the
//!   person signed in to the UI, whose pending sign-in it redeems; the grant is stored once
//!   the server accepts its token.
//! * `POST /ui/sign-ins/remove` forgets the person's own sign-in.

use askama::Template;
use axum::extract::{Form, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::app_sign_in::{McpSignInPage, mcp_url};
use super::{AppForm, Chrome, Ui, Viewer, forbidden_csrf, page};
use crate::auth::mcp;
use crate::auth::store::{Credential, PENDING, account};
use crate::identity::Who;

/// The cookie of a sign-in in progress: `state.verifier.person.app`, `person` a digest of
/// the subject of who started it (a browser someone else signed in to since cannot finish
/// it).
const COOKIE: &str = "aai_upstream";
/// How long a sign-in may take.
const SIGN_IN_SECS: u64 = 600;
const HERE: &str = "/ui/sign-ins";

/// One remote MCP server on the page.
#[derive(Debug)]
struct SignInRow {
    id: String,
    name: String,
    /// Everyone uses the admin's sign-in.
    shared: bool,
    /// "signed in at https://…", "not signed in", or what the store said.
    state: String,
    signed_in: bool,
}

#[derive(Template)]
#[template(path = "ui/sign_ins.html")]
struct SignInsPage {
    c: Chrome,
    person: String,
    apps: Vec<SignInRow>,
    /// One app was asked for: a link to all.
    only: bool,
}

#[derive(Template)]
#[template(path = "ui/sign_in_go.html")]
struct GoPage {
    c: Chrome,
    name: String,
    issuer_origin: String,
    url: String,
}

/// The signed-in person, or the way to the team's sign-in (or the credentials page
/// without a team).
fn signed_in(
    ui: &Ui,
    viewer: &Viewer,
) -> Result<std::sync::Arc<crate::identity::Person>, Redirect> {
    match (&viewer.0, ui.team()) {
        (Some(person), Some(_)) => Ok(person.clone()),
        (None, Some(_)) => Err(Redirect::to("/ui/signin?next=/ui/sign-ins")),
        (_, None) => Err(Redirect::to("/ui/credentials")),
    }
}

/// `(name, url)` of `app` when the viewer sees it and signs in to it for themselves.
async fn personal_app(ui: &Ui, viewer: &Viewer, app: &str) -> Option<(String, String)> {
    let snapshot = viewer.snapshot(ui).await;
    let entry = snapshot.entries.iter().find(|e| e.app.id == app)?;
    let shared = ui.pipeline().settings().shared_sign_ins.contains(app);
    let url = mcp_url(entry).filter(|_| !shared)?;
    Some((snapshot.name(entry).to_owned(), url.to_owned()))
}

#[derive(Debug, Deserialize)]
pub(in super::super) struct SignInsQuery {
    flash: Option<u64>,
    /// Only this app (the link of an AUTH_REQUIRED), when the viewer sees it.
    app: Option<String>,
}

/// `GET /ui/sign-ins`: the viewer's own sign-in to each remote MCP server they see.
pub(in super::super) async fn sign_ins(
    State(ui): State<Ui>,
    viewer: Viewer,
    Query(q): Query<SignInsQuery>,
) -> Response {
    let person = match signed_in(&ui, &viewer) {
        Ok(p) => p,
        Err(elsewhere) => return elsewhere.into_response(),
    };
    let snapshot = viewer.snapshot(&ui).await;
    let store = ui.pipeline().authenticator().store();
    let who = Who::Person(person.subject.as_str().into());
    let mut apps = Vec::new();
    let only = q.app.filter(|app| {
        snapshot
            .entries
            .iter()
            .any(|e| e.app.id == *app && mcp_url(e).is_some())
    });
    let shown = |e: &&crate::registry::Entry| {
        mcp_url(e).is_some() && only.as_ref().is_none_or(|app| e.app.id == *app)
    };
    for entry in snapshot.entries.iter().filter(shown) {
        let shared = ui
            .pipeline()
            .settings()
            .shared_sign_ins
            .contains(&entry.app.id);
        let (state, signed_in) = if shared {
            (String::new(), false)
        } else {
            match store.get(&account(&entry.app.id, &who)).await {
                Ok(Some(Credential::McpOAuth(g))) if g.tokens.is_some() => {
                    (format!("signed in at {}", mcp::origin(&g.issuer)), true)
                }
                Ok(_) => ("not signed in".to_owned(), false),
                Err(e) => (format!("unknown: {e}"), false),
            }
        };
        apps.push(SignInRow {
            id: entry.app.id.clone(),
            name: snapshot.name(entry).to_owned(),
            shared,
            state,
            signed_in,
        });
    }
    page(
        SignInsPage {
            c: Chrome::new(&ui, "Your sign-ins", HERE, q.flash),
            person: person.subject.clone(),
            apps,
            only: only.is_some(),
        }
        .render(),
    )
}

/// `POST /ui/sign-ins/start`: the server's origin and its authorization server's, to
/// agree to (only the server was asked).
pub(in super::super) async fn start(
    State(ui): State<Ui>,
    viewer: Viewer,
    Form(form): Form<AppForm>,
) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    if let Err(elsewhere) = signed_in(&ui, &viewer) {
        return elsewhere.into_response();
    }
    let Some((name, url)) = personal_app(&ui, &viewer, &form.app).await else {
        return ui.flash(HERE, "You do not sign in to that app yourself.", false);
    };
    let plan = match mcp::prepare(&url).await {
        Ok(p) => p,
        Err(e) => return ui.flash(HERE, format!("Cannot sign in: {e}."), false),
    };
    page(
        McpSignInPage {
            c: Chrome::new(&ui, "Sign in", HERE, None),
            app: form.app,
            name,
            server: mcp::origin(&url),
            issuer_origin: mcp::origin(&plan.issuer),
            issuer: plan.issuer,
            action: "/ui/sign-ins/confirm",
            cancel: HERE,
        }
        .render(),
    )
}

#[derive(Debug, Deserialize)]
pub(in super::super) struct ConfirmForm {
    csrf: Option<String>,
    app: String,
    /// The authorization server the person agreed to.
    issuer: String,
}

/// `POST /ui/sign-ins/confirm`: the client registered (or reused), kept as the person's
/// pending sign-in, and the link to the authorization server.
pub(in super::super) async fn confirm(
    State(ui): State<Ui>,
    viewer: Viewer,
    Form(form): Form<ConfirmForm>,
) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    let person = match signed_in(&ui, &viewer) {
        Ok(p) => p,
        Err(elsewhere) => return elsewhere.into_response(),
    };
    let Some(team) = ui.team() else {
        return Redirect::to("/ui/credentials").into_response();
    };
    let Some((name, url)) = personal_app(&ui, &viewer, &form.app).await else {
        return ui.flash(HERE, "You do not sign in to that app yourself.", false);
    };
    let app = form.app;
    let who = Who::Person(person.subject.as_str().into());
    let mine = account(&app, &who).into_owned();
    let failed = |e: &dyn std::fmt::Display| ui.flash(HERE, format!("Cannot sign in: {e}."), false);
    let plan = match mcp::prepare(&url).await {
        Ok(p) if p.issuer == form.issuer => p,
        Ok(_) => {
            return ui.flash(
                HERE,
                "The server now names another authorization server; start the sign-in again.",
                false,
            );
        }
        Err(e) => return failed(&e),
    };
    let server = match mcp::authorization_server(&plan).await {
        Ok(s) if s.pkce => s,
        Ok(_) => return failed(&mcp::Error::NoPkce),
        Err(e) => return failed(&e),
    };
    let redirect_uri = callback_uri(team);
    let store = ui.pipeline().authenticator().store();
    let stored = |account: String| async move {
        match store.get(&account).await {
            Ok(Some(Credential::McpOAuth(g))) => Some(g),
            _ => None,
        }
    };
    // Scopes a call was refused for since (the person's pending or last sign-in), and
    // the client: an admin's for the app, else one registered for this callback.
    let earlier = match stored(format!("{mine}{PENDING}")).await {
        Some(pending) => Some(pending),
        None => stored(mine.clone()).await,
    };
    let admins = stored(app.clone()).await.filter(|g| g.preregistered);
    let document = ui.gateway().config().oauth_client_metadata_url.clone();
    let client = mcp::client_for(
        &server,
        &app,
        admins.as_ref(),
        document.as_deref(),
        &redirect_uri,
    )
    .await;
    let client = match client {
        Ok(c) => c,
        Err(e) => return failed(&e),
    };
    let scopes = mcp::scopes_for(
        mcp::named_scopes(&plan, earlier.as_ref()).as_deref(),
        &server,
    );
    let (state, verifier) = (
        crate::auth::oauth::random_token(32),
        crate::auth::oauth::random_token(64),
    );
    let link = mcp::Authorization {
        client: &client,
        redirect_uri: &redirect_uri,
        state: &state,
        verifier: &verifier,
        resource: &plan.resource,
        scopes: scopes.as_deref(),
    }
    .url(&server);
    let link = match link {
        Ok(link) => link,
        Err(e) => return failed(&e),
    };
    let pending = mcp::Grant::of(client, server, plan.resource, scopes, None);
    let pending_account = format!("{mine}{PENDING}");
    if let Err(e) = store
        .set(&pending_account, Credential::McpOAuth(pending))
        .await
    {
        return failed(&e);
    }
    let cookie = format!(
        "{COOKIE}={state}.{verifier}.{}.{app}; Path={HERE}; HttpOnly; SameSite=Lax; Max-Age={SIGN_IN_SECS}{}",
        tag(&person.subject),
        secure(team)
    );
    let go = page(
        GoPage {
            c: Chrome::new(&ui, "Sign in", HERE, None),
            name,
            issuer_origin: mcp::origin(&plan.issuer),
            url: link.to_string(),
        }
        .render(),
    );
    with_cookie(go, &cookie)
}

#[derive(Debug, Deserialize)]
pub(in super::super) struct CallbackQuery {
    state: Option<String>,
}

/// `GET /ui/sign-ins/callback`: the code redeemed for the person signed in to the UI,
/// with the state their own browser kept; the grant stored once the server takes it.
pub(in super::super) async fn callback(
    State(ui): State<Ui>,
    viewer: Viewer,
    Query(q): Query<CallbackQuery>,
    req: axum::extract::Request,
) -> Response {
    let person = match signed_in(&ui, &viewer) {
        Ok(p) => p,
        Err(elsewhere) => return elsewhere.into_response(),
    };
    let Some(team) = ui.team() else {
        return Redirect::to("/ui/credentials").into_response();
    };
    let done = format!("{COOKIE}=; Path={HERE}; HttpOnly; SameSite=Lax; Max-Age=0");
    let kept = crate::access::cookie(&req, COOKIE).map(str::to_owned);
    let Some((state, verifier, started_by, app)) = kept.as_deref().and_then(|c| {
        let mut parts = c.splitn(4, '.');
        Some((parts.next()?, parts.next()?, parts.next()?, parts.next()?))
    }) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "No sign-in is in progress in this browser; start again at /ui/sign-ins.",
        );
    };
    if !crate::access::constant_time_eq(started_by.as_bytes(), tag(&person.subject).as_bytes()) {
        return with_cookie(
            refused(
                StatusCode::BAD_REQUEST,
                "This sign-in was started by someone else signed in to this browser: refused.",
            ),
            &done,
        );
    }
    if !q
        .state
        .as_deref()
        .is_some_and(|given| crate::access::constant_time_eq(given.as_bytes(), state.as_bytes()))
    {
        return refused(
            StatusCode::BAD_REQUEST,
            "This sign-in was not started in this browser: refused.",
        );
    }
    let Some((name, url)) = personal_app(&ui, &viewer, app).await else {
        return refused(
            StatusCode::BAD_REQUEST,
            "You do not sign in to that app yourself.",
        );
    };
    let who = Who::Person(person.subject.as_str().into());
    let mine = account(app, &who).into_owned();
    let pending_account = format!("{mine}{PENDING}");
    let store = ui.pipeline().authenticator().store();
    let Ok(Some(Credential::McpOAuth(pending))) = store.get(&pending_account).await else {
        return refused(
            StatusCode::BAD_REQUEST,
            "No sign-in of yours to that app is in progress; start again at /ui/sign-ins.",
        );
    };
    let failed = |e: &dyn std::fmt::Display| {
        with_cookie(
            ui.flash(HERE, format!("The sign-in to {name} failed: {e}."), false),
            &done,
        )
    };
    let server = match mcp::prepare(&url).await {
        Ok(plan) => match mcp::authorization_server(&plan).await {
            Ok(server) if server.issuer == pending.issuer => server,
            Ok(_) => return failed(&"the server now names another authorization server"),
            Err(e) => return failed(&e),
        },
        Err(e) => return failed(&e),
    };
    // The answer: this sign-in's state, from the authorization server it went to (RFC
    // 9207), with a code.
    let expected = crate::auth::oauth::Expected {
        state,
        issuer: &server.answers_as,
        authorization_url: "",
        owner_of: crate::peer::of_callback,
    };
    let code = match crate::auth::oauth::judge(req.uri().query().unwrap_or_default(), &expected) {
        crate::auth::oauth::Verdict::Answer(Ok(code)) => code,
        crate::auth::oauth::Verdict::Answer(Err(e)) => {
            use crate::auth::oauth::AnswerError;
            return failed(&match e {
                AnswerError::Issuer(_) => {
                    "the answer came from another authorization server".to_owned()
                }
                AnswerError::Refused(why) => format!("the authorization server refused ({why})"),
                AnswerError::NoCode => "the answer carried no code".to_owned(),
            });
        }
        crate::auth::oauth::Verdict::Ignored => {
            return refused(
                StatusCode::BAD_REQUEST,
                "This answer is not for your sign-in.",
            );
        }
    };
    let client = mcp::Client::of(&pending);
    let tokens = match mcp::redeem(
        &server,
        &client,
        code,
        &callback_uri(team),
        verifier.to_owned(),
        &pending.resource,
    )
    .await
    {
        Ok(tokens) => tokens,
        Err(e) => return failed(&e),
    };
    match mcp::check(&url, &tokens.access_token).await {
        Ok(mcp::Access::Granted) => {}
        Ok(mcp::Access::NeedsScope(challenge)) => {
            // The next sign-in asks for the wider scopes.
            let wider = mcp::widen(Some(pending.scopes.clone()), challenge.scopes());
            let pending = mcp::Grant {
                scopes: wider.unwrap_or_default(),
                ..pending
            };
            let _ = store
                .set(&pending_account, Credential::McpOAuth(pending))
                .await;
            return failed(&"the server wants more scope; sign in again to grant it");
        }
        Err(e) => return failed(&e),
    }
    let grant = mcp::Grant {
        tokens: Some(tokens),
        ..pending
    };
    if let Err(e) = store.set(&mine, Credential::McpOAuth(grant)).await {
        return failed(&e);
    }
    let _ = store.delete(&pending_account).await;
    tracing::info!(app, person = %person.subject, "a person signed in to the MCP server");
    with_cookie(ui.flash(HERE, format!("Signed in to {name}."), true), &done)
}

/// `POST /ui/sign-ins/remove`: the viewer's own sign-in forgotten.
pub(in super::super) async fn remove(
    State(ui): State<Ui>,
    viewer: Viewer,
    Form(form): Form<AppForm>,
) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    let person = match signed_in(&ui, &viewer) {
        Ok(p) => p,
        Err(elsewhere) => return elsewhere.into_response(),
    };
    if !crate::auth::store::is_app_id(&form.app) {
        return ui.flash(HERE, "That is not an app id.", false);
    }
    let mine = account(&form.app, &Who::Person(person.subject.as_str().into())).into_owned();
    let store = ui.pipeline().authenticator().store();
    let _ = store.delete(&format!("{mine}{PENDING}")).await;
    match store.delete(&mine).await {
        Ok(true) => ui.flash(HERE, format!("Signed out of {}.", form.app), true),
        Ok(false) => ui.flash(
            HERE,
            format!("You were not signed in to {}.", form.app),
            true,
        ),
        Err(e) => ui.flash(HERE, format!("Cannot sign out: {e}."), false),
    }
}

/// What the cookie of a sign-in says of who started it.
fn tag(subject: &str) -> String {
    use sha2::Digest as _;
    crate::text::hex(&sha2::Sha256::digest(subject.as_bytes())[..8])
}

/// Where the authorization server sends the browser back: the UI's public origin.
fn callback_uri(team: &crate::access::resource::Resource) -> String {
    format!("{}/ui/sign-ins/callback", team.public_origin())
}

/// `; Secure` when the public origin is https.
fn secure(team: &crate::access::resource::Resource) -> &'static str {
    if team.public_origin().starts_with("https://") {
        "; Secure"
    } else {
        ""
    }
}

fn with_cookie(mut response: Response, cookie: &str) -> Response {
    if let Ok(value) = header::HeaderValue::from_str(cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

fn refused(status: StatusCode, message: &str) -> Response {
    (status, format!("{message}\n")).into_response()
}
