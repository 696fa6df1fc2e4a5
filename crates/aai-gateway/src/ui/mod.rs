//! The web UI at `/ui`: server-rendered pages (askama templates compiled into the binary)
//! over the one [`Gateway`] — dashboard, apps, history, consent, credentials, config —
//! and the few POST actions behind them (answer or grant consent, revoke, store or remove
//! a credential, start an OAuth sign-in, rescan).
//!
//! Rules:
//! * Every POST carries the CSRF token of this run (a hidden form field, compared in
//!   constant time); without it the answer is 403 and nothing changes.
//! * `listen` has already checked Host, Origin and the token; this module never
//!   serves anything without that guard in front of it.
//! * Secrets go one way: a credential form stores a value, no page ever shows one.
//! * Messages after an action travel as a one-time number (`?flash=N`), never as text in
//!   the URL, so a link cannot put words in the UI's mouth.

mod pages;
mod signin;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::gateway::Handle;
use crate::pipeline::Pipeline;

/// The UI's state, shared by its handlers.
#[derive(Debug, Clone)]
pub struct Ui {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The call path ("Try it", consent, credentials).
    pipeline: Pipeline,
    /// The rest of the gateway the UI shows: the snapshot, the settings, the rescan.
    gateway: Handle,
    /// `http://127.0.0.1:3000/ui`.
    base: String,
    /// Every form's CSRF token, random per run.
    csrf: String,
    /// The listener's bearer token, for the sign-in page.
    token: Option<crate::auth::Secret>,
    /// One-time messages after an action.
    flash: Mutex<Flash>,
    /// OAuth sign-ins started from the UI: app → what became of it.
    logins: Mutex<HashMap<String, String>>,
    /// The authorization URL a remote MCP server's step-up needs the user to open next.
    login_links: Mutex<HashMap<String, String>>,
    /// One-time sign-in codes (`/ui/login?code=…`) and when they expire.
    codes: Mutex<Vec<(String, std::time::Instant)>>,
    /// Wrong tokens in a row at the sign-in form, for the back-off.
    failures: std::sync::atomic::AtomicU32,
    /// The team's authorization server people sign in through (`web.auth`).
    resource: Option<Arc<crate::access::resource::Resource>>,
}

/// How long a one-time sign-in link works.
const CODE_TTL: std::time::Duration = std::time::Duration::from_secs(600);

#[derive(Debug, Default)]
struct Flash {
    next: u64,
    messages: HashMap<u64, (String, bool)>,
}

impl Ui {
    /// The UI of `gateway`, served at `base`.
    pub fn new(
        gateway: Handle,
        base: String,
        token: Option<crate::auth::Secret>,
        resource: Option<Arc<crate::access::resource::Resource>>,
    ) -> Ui {
        Ui {
            inner: Arc::new(Inner {
                pipeline: gateway.pipeline().clone(),
                gateway,
                base,
                csrf: crate::auth::oauth::random_token(32),
                token,
                flash: Mutex::new(Flash::default()),
                logins: Mutex::new(HashMap::new()),
                login_links: Mutex::new(HashMap::new()),
                codes: Mutex::new(Vec::new()),
                failures: std::sync::atomic::AtomicU32::new(0),
                resource,
            }),
        }
    }

    /// A link that signs a browser in once (within ten minutes), as Jupyter's does: what
    /// the person who started the gateway opens instead of typing the token.
    pub fn one_time_link(&self) -> String {
        let code = crate::auth::oauth::random_token(32);
        let mut codes = self.inner.codes.lock().expect("codes lock");
        let now = std::time::Instant::now();
        codes.retain(|(_, until)| *until > now);
        codes.push((code.clone(), now + CODE_TTL));
        format!("{}/login?code={code}", self.inner.base)
    }

    /// Uses up one-time code `code`; whether it was valid.
    fn redeem(&self, code: &str) -> bool {
        let mut codes = self.inner.codes.lock().expect("codes lock");
        let now = std::time::Instant::now();
        codes.retain(|(_, until)| *until > now);
        match codes
            .iter()
            .position(|(c, _)| crate::access::constant_time_eq(c.as_bytes(), code.as_bytes()))
        {
            Some(at) => {
                codes.remove(at);
                true
            }
            None => false,
        }
    }

    /// Where the UI is served.
    pub fn base(&self) -> &str {
        &self.inner.base
    }

    /// The routes, to merge into the listener's router.
    pub fn router(self) -> Router {
        Router::new()
            .route("/ui", get(pages::dashboard))
            .route("/ui/", get(pages::dashboard))
            .route("/ui/apps", get(pages::apps))
            .route("/ui/apps/{id}", get(pages::app))
            .route("/ui/apps/{id}/try", post(pages::try_tool))
            .route("/ui/manage", post(pages::manage))
            .route("/ui/history", get(pages::history))
            .route("/ui/history/{id}", get(pages::call))
            .route("/ui/consent", get(pages::consent))
            .route("/ui/consent/answer", post(pages::answer))
            .route("/ui/consent/grant", post(pages::grant))
            .route("/ui/consent/revoke", post(pages::revoke))
            .route("/ui/credentials", get(pages::credentials))
            .route("/ui/credentials/set", post(pages::set_credential))
            .route("/ui/credentials/remove", post(pages::remove_credential))
            .route("/ui/credentials/login", post(pages::login))
            .route("/ui/credentials/mcp-login", post(pages::mcp_login))
            .route("/ui/sign-ins", get(pages::sign_ins))
            .route("/ui/sign-ins/start", post(pages::start_sign_in))
            .route("/ui/sign-ins/confirm", post(pages::confirm_sign_in))
            .route("/ui/sign-ins/callback", get(pages::sign_in_callback))
            .route("/ui/sign-ins/remove", post(pages::remove_sign_in))
            .route("/ui/config", get(pages::config))
            .route("/ui/rescan", post(pages::rescan))
            .route("/ui/login", get(pages::sign_in_page).post(pages::sign_in))
            .route("/ui/signin", get(signin::start))
            .route("/ui/callback", get(signin::callback))
            .route("/ui/signout", post(signin::sign_out))
            .route("/ui/style.css", get(style))
            .route("/ui/favicon.svg", get(icon))
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                admins_only,
            ))
            .with_state(self)
    }

    fn gateway(&self) -> &Handle {
        &self.inner.gateway
    }

    fn pipeline(&self) -> &Pipeline {
        &self.inner.pipeline
    }

    /// Whether people sign in through the team's authorization server.
    fn team(&self) -> Option<&crate::access::resource::Resource> {
        self.inner.resource.as_deref()
    }

    /// The form token of this request: a signed-in person's own (derived from their
    /// cookie, the same on every replica), else this run's.
    fn csrf(&self) -> String {
        PERSON_CSRF
            .try_with(Clone::clone)
            .unwrap_or_else(|_| self.inner.csrf.clone())
    }

    /// Whether a form's token is this request's ([`Ui::csrf`]).
    fn csrf_ok(&self, given: Option<&str>) -> bool {
        let expected = self.csrf();
        given.is_some_and(|g| crate::access::constant_time_eq(g.as_bytes(), expected.as_bytes()))
    }

    /// Keeps `message` for the next page; the redirect target with its number.
    fn flash(&self, to: &str, message: impl Into<String>, ok: bool) -> Response {
        let mut flash = self.inner.flash.lock().expect("flash lock");
        flash.next += 1;
        // Unguessable beside a counter: with the team's sign-in several people share the
        // UI, and one must not read (and so take) another's message.
        let mut salt = [0u8; 4];
        let _ = getrandom::fill(&mut salt);
        let n = (u64::from(u32::from_le_bytes(salt)) << 20) | (flash.next & 0xF_FFFF);
        // A few dozen unread messages at most.
        if flash.messages.len() >= 64 {
            flash.messages.clear();
        }
        flash.messages.insert(n, (message.into(), ok));
        let sep = if to.contains('?') { '&' } else { '?' };
        Redirect::to(&format!("{to}{sep}flash={n}")).into_response()
    }

    /// The message `n` left for this page, once.
    fn take_flash(&self, n: Option<u64>) -> Option<(String, bool)> {
        self.inner
            .flash
            .lock()
            .expect("flash lock")
            .messages
            .remove(&n?)
    }
}

/// A refusal page for a POST without this run's CSRF token.
fn forbidden_csrf() -> Response {
    (
        StatusCode::FORBIDDEN,
        Html("<!doctype html><title>Refused</title><link rel=\"icon\" href=\"/ui/favicon.svg\" type=\"image/svg+xml\"><h1>Refused</h1><p>This form did not carry the page's CSRF token, so nothing was changed. Reload the page and try again.</p>"),
    )
        .into_response()
}

/// The stylesheet.
async fn style() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("../../templates/ui/style.css"),
    )
        .into_response()
}

/// The icon.
async fn icon() -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("../../templates/ui/favicon.svg"),
    )
        .into_response()
}

/// A rendered page, with the headers every page carries. The referrer policy is
/// `same-origin`, not `no-referrer`: under `no-referrer` Chromium sends `Origin: null`
/// with a form POST, which the Origin check refuses.
fn page(html: Result<String, askama::Error>) -> Response {
    match html {
        Ok(body) => (
            [
                (header::CONTENT_SECURITY_POLICY, "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'; form-action 'self'"),
                (header::X_FRAME_OPTIONS, "DENY"),
                (header::REFERRER_POLICY, "same-origin"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            Html(body),
        )
            .into_response(),
        Err(e) => {
            tracing::error!("a UI page failed to render: {e}");
            (StatusCode::INTERNAL_SERVER_ERROR, "the page failed to render").into_response()
        }
    }
}

/// Who looks at the UI: the one user (the bearer token, or this machine's own user), or a
/// person signed in through the team's authorization server.
#[derive(Debug, Clone, Default)]
pub(crate) struct Viewer(Option<Arc<crate::identity::Person>>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Viewer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Viewer(
            parts
                .extensions
                .get::<Arc<crate::identity::Person>>()
                .cloned(),
        ))
    }
}

impl Viewer {
    /// The person whose calls alone this viewer sees: `None` for the one user and for
    /// the team's admins (everyone's history).
    fn only(&self) -> Option<String> {
        self.0
            .as_ref()
            .filter(|p| !p.admin)
            .map(|p| p.subject.clone())
    }

    /// Whether a grant or pending call of caller `key` is this viewer's to see and answer:
    /// a person's own only (an admin sees everyone's history, but consent is each
    /// person's).
    fn owns(&self, key: &str) -> bool {
        self.0
            .as_ref()
            .is_none_or(|p| crate::identity::Caller::key_is_persons(key, &p.subject))
    }

    /// The apps this viewer may see: everything for the one user; for a person, what
    /// their scopes open (the view MCP clients get, the gateway's own app only for the
    /// admin scope).
    async fn snapshot(&self, ui: &Ui) -> Arc<crate::registry::Snapshot> {
        let snapshot = ui.gateway().snapshot().await;
        match &self.0 {
            None => snapshot,
            Some(person) => {
                let caller = crate::identity::Caller {
                    name: "web-ui".into(),
                    transport: "http",
                    token: None,
                    person: Some(person.clone()),
                };
                ui.pipeline().view(snapshot, &caller)
            }
        }
    }

    /// Whether this viewer is a person of the team without the admin scope.
    fn member(&self) -> bool {
        self.0.as_ref().is_some_and(|p| !p.admin)
    }

    /// Whether this viewer sees a history record of `person`.
    fn sees(&self, person: Option<&str>) -> bool {
        self.only().is_none_or(|me| person == Some(me.as_str()))
    }
}

tokio::task_local! {
    /// The signed-in person's form token while their request is handled.
    static PERSON_CSRF: String;
}

/// With the team's sign-in, what changes the gateway for everyone — credentials, apps,
/// configuration, rescans — and the "try it" form (which runs as the user, without
/// consent) are for people holding the admin scope; others get 403. A person's forms
/// carry a token derived from their own cookie.
async fn admins_only(
    axum::extract::State(ui): axum::extract::State<Ui>,
    viewer: Viewer,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(team) = ui.team() else {
        return next.run(req).await;
    };
    let path = req.uri().path();
    let guarded = path.starts_with("/ui/credentials")
        || path.starts_with("/ui/config")
        || matches!(path, "/ui/manage" | "/ui/rescan")
        || (path.starts_with("/ui/apps/") && path.ends_with("/try"));
    if guarded && viewer.member() {
        return (
            StatusCode::FORBIDDEN,
            format!(
                "This page is for the team's admins (scope `{}`).\n",
                team.config().admin_scope
            ),
        )
            .into_response();
    }
    // A person's forms carry their own token.
    match req.extensions().get::<crate::access::PersonCsrf>().cloned() {
        Some(csrf) => PERSON_CSRF.scope(csrf.0, next.run(req)).await,
        None => next.run(req).await,
    }
}
