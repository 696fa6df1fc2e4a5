//! The credentials page (`/ui/credentials`), and storing or removing an app's credential.

use aai_descriptor::{Auth, AuthKind};
use askama::Template;
use axum::extract::{Form, Query, State};
use axum::response::Response;
use serde::Deserialize;

use super::app_sign_in::mcp_url;
use super::{AppForm, Chrome, FlashQuery, Ui, forbidden_csrf, page};
use crate::auth::store::Credential;

/// One app that needs credentials.
#[derive(Debug)]
struct CredentialRow {
    id: String,
    slug: String,
    name: String,
    kind: String,
    stored: String,
    has_stored: bool,
    instructions: String,
    obtain_url: Option<String>,
    login: Option<String>,
    /// A remote MCP server (MCP authorization): signs in with the button too.
    mcp: bool,
    /// The next authorization URL of a step-up, to open.
    login_link: Option<String>,
    /// Team mode: whose calls a sign-in here serves.
    upstream: Option<&'static str>,
}

#[derive(Template)]
#[template(path = "ui/credentials.html")]
struct CredentialsPage {
    c: Chrome,
    store: String,
    /// The store cannot be read (no Secret Service): what to do, once.
    problem: Option<String>,
    apps: Vec<CredentialRow>,
}

pub(in super::super) async fn credentials(
    State(ui): State<Ui>,
    Query(q): Query<FlashQuery>,
) -> Response {
    let gateway = ui.gateway();
    let snapshot = gateway.snapshot().await;
    let store = gateway.pipeline().authenticator().store();
    let logins = ui.inner.logins.lock().expect("logins lock").clone();
    let links = ui.inner.login_links.lock().expect("links lock").clone();
    let mut apps = Vec::new();
    // The store's refusal, said once above the forms with the way forward.
    let mut problem = None;
    for entry in &snapshot.entries {
        if mcp_url(entry).is_some() {
            let stored = match store.get(&entry.app.id).await {
                Ok(Some(Credential::McpOAuth(g))) if g.tokens.is_some() => {
                    format!("signed in at {}", crate::auth::mcp::origin(&g.issuer))
                }
                Ok(Some(Credential::McpOAuth(_))) => "a client, not signed in".to_owned(),
                Ok(_) => "no (needed only when the server asks)".to_owned(),
                Err(e) => {
                    let unknown = format!("unknown: {e}");
                    problem.get_or_insert_with(|| store_problem(e, &gateway.config().file));
                    unknown
                }
            };
            apps.push(CredentialRow {
                id: entry.app.id.clone(),
                slug: entry.slug.clone(),
                name: snapshot.name(entry).to_owned(),
                kind: "oauth2 (MCP)".to_owned(),
                has_stored: !stored.starts_with("no") && !stored.starts_with("unknown"),
                stored,
                instructions: String::new(),
                obtain_url: None,
                login: logins.get(&entry.app.id).cloned(),
                mcp: true,
                login_link: links.get(&entry.app.id).cloned(),
                upstream: ui.team().map(|_| {
                    if ui.pipeline().settings().shared_sign_ins.contains(&entry.app.id) {
                        "Shared sign-in: everyone acts upstream as the account signed in here."
                    } else {
                        "Each person signs in for themselves (Your sign-ins): a sign-in here serves only the command line, never a person's calls."
                    }
                }),
            });
            continue;
        }
        let Some(auth) = entry.binding().auth.as_ref() else {
            continue;
        };
        let (stored, has_stored) = match store.get(&entry.app.id).await {
            Ok(Some(c)) if c.kind() == auth.kind() => ("yes".to_owned(), true),
            Ok(Some(c)) => (
                format!("a {} credential (the app needs {})", c.kind(), auth.kind()),
                true,
            ),
            Ok(None) => ("no".to_owned(), false),
            Err(e) => {
                let unknown = format!("unknown: {e}");
                problem.get_or_insert_with(|| store_problem(e, &gateway.config().file));
                (unknown, false)
            }
        };
        let (obtain_url, instructions) = match auth {
            Auth::ApiKey(k) => (Some(k.obtain_url.clone()), k.instructions.as_ref()),
            Auth::Cookie(c) => (Some(c.login_url.clone()), c.instructions.as_ref()),
            Auth::AppCredential(a) => (None, a.instructions.as_ref()),
            Auth::OAuth2(_) => (None, None),
        };
        apps.push(CredentialRow {
            id: entry.app.id.clone(),
            slug: entry.slug.clone(),
            name: snapshot.name(entry).to_owned(),
            kind: auth.kind().to_string(),
            stored,
            has_stored,
            instructions: instructions.map(|i| i.short.clone()).unwrap_or_default(),
            obtain_url: obtain_url
                .filter(|u| u.starts_with("https://") || u.starts_with("http://")),
            login: logins.get(&entry.app.id).cloned(),
            mcp: false,
            login_link: None,
            upstream: ui
                .team()
                .filter(|_| matches!(auth, Auth::OAuth2(_)))
                .map(|_| {
                    if ui.pipeline().settings().shared_sign_ins.contains(&entry.app.id) {
                        "Shared sign-in: everyone acts upstream as the account signed in here."
                    } else {
                        "Each person signs in for themselves (`aai-gateway auth login <app> --person <subject>`): a sign-in here serves only the command line, never a person's calls."
                    }
                }),
        });
    }
    let store = match gateway.config().credentials {
        _ if gateway.shared_store().is_some() => format!(
            "the shared PostgreSQL store {} (encrypted)",
            gateway
                .shared_store()
                .map(|s| s.shown())
                .unwrap_or_default()
        ),
        crate::config::CredentialStore::Keyring => "the OS keyring".to_owned(),
        crate::config::CredentialStore::File => format!(
            "{} (the file store)",
            gateway.home().join("credentials.json").display()
        ),
    };
    page(
        CredentialsPage {
            c: Chrome::new(&ui, "Credentials", "/ui/credentials", q.flash),
            store,
            problem,
            apps,
        }
        .render(),
    )
}

#[derive(Deserialize)]
pub(in super::super) struct SetForm {
    csrf: Option<String>,
    app: String,
    #[serde(default)]
    secret: String,
    #[serde(default)]
    app_id: String,
}

impl std::fmt::Debug for SetForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetForm")
            .field("app", &self.app)
            .finish_non_exhaustive()
    }
}

/// The auth an app served now needs.
pub(super) async fn auth_of(ui: &Ui, app: &str) -> Option<Auth> {
    let snapshot = ui.gateway().snapshot().await;
    let entry = snapshot.entries.iter().find(|e| e.app.id == app)?;
    entry.binding().auth.clone()
}

pub(in super::super) async fn set_credential(
    State(ui): State<Ui>,
    Form(form): Form<SetForm>,
) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    let Some(auth) = auth_of(&ui, &form.app).await else {
        return ui.flash(
            "/ui/credentials",
            "That app does not need credentials.",
            false,
        );
    };
    let input = match auth.kind() {
        AuthKind::AppCredential => {
            serde_json::json!({"appId": form.app_id.trim(), "appSecret": form.secret}).to_string()
        }
        _ => form.secret.clone(),
    };
    let credential = match Credential::parse(auth.kind(), &input) {
        Ok(c) => c,
        Err(e) => return ui.flash("/ui/credentials", format!("Not saved: {e}."), false),
    };
    match ui
        .pipeline()
        .authenticator()
        .store()
        .set(&form.app, credential)
        .await
    {
        Ok(()) => ui.flash(
            "/ui/credentials",
            format!("Saved the credential of `{}`.", form.app),
            true,
        ),
        Err(e) => ui.flash(
            "/ui/credentials",
            format!(
                "Not saved: {}",
                store_problem(e, &ui.gateway().config().file)
            ),
            false,
        ),
    }
}

/// A store that refused, with the way forward (no Secret Service: start one, or
/// `"credentials": {"store": "file"}` in the config file this gateway reads, named), as
/// the command line says it.
fn store_problem(e: crate::auth::store::Error, config: &std::path::Path) -> String {
    let e = crate::error::GatewayError::from(e);
    match e.hint.as_deref() {
        Some(hint) => format!(
            "{}. {hint} This gateway's config file: {}.",
            e.detail,
            config.display()
        ),
        None => format!("{}.", e.detail),
    }
}

pub(in super::super) async fn remove_credential(
    State(ui): State<Ui>,
    Form(form): Form<AppForm>,
) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    match ui
        .pipeline()
        .authenticator()
        .store()
        .delete(&form.app)
        .await
    {
        Ok(true) => ui.flash(
            "/ui/credentials",
            format!("Removed the credential of `{}`.", form.app),
            true,
        ),
        Ok(false) => ui.flash("/ui/credentials", "Nothing was stored.", true),
        Err(e) => ui.flash("/ui/credentials", format!("Not removed: {e}"), false),
    }
}
