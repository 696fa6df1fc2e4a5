//! The pages and actions of the web UI, one file per page: each handler reads the
//! gateway, fills a view, and renders its template (`templates/ui/`). POST handlers check
//! the CSRF token first. Here is what the pages share: the chrome, the rows of calls and of
//! pending questions, where an action goes back to, the page for what is not there.

mod app;
mod app_sign_in;
mod apps;
mod config;
mod consent;
mod credentials;
mod dashboard;
mod history;
mod sign_ins;
mod token;

// The handlers, for the router in `ui` (they are `pub(in super::super)` for it).
pub(super) use app::{app, try_tool};
pub(super) use app_sign_in::{login, mcp_login};
pub(super) use apps::{apps, manage};
pub(super) use config::{config, rescan};
pub(super) use consent::{answer, consent, grant, revoke};
pub(super) use credentials::{credentials, remove_credential, set_credential};
pub(super) use dashboard::dashboard;
pub(super) use history::{call, history};
pub(super) use sign_ins::{
    callback as sign_in_callback, confirm as confirm_sign_in, remove as remove_sign_in, sign_ins,
    start as start_sign_in,
};
pub(super) use token::{sign_in, sign_in_page};

use askama::Template;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use super::{Ui, Viewer, forbidden_csrf, page};
use crate::consent::Pending;
use crate::history::{Filter, Record};

/// What every page carries: its title and path, the CSRF token, a message.
#[derive(Debug)]
struct Chrome {
    title: String,
    path: String,
    csrf: String,
    flash: Option<(String, bool)>,
    /// Reload the page every this many seconds (a pending consent appears without
    /// JavaScript, which the UI's CSP forbids).
    refresh: Option<u32>,
    /// Team mode: each person has their own sign-ins page.
    team: bool,
}

impl Chrome {
    fn new(
        ui: &Ui,
        title: impl Into<String>,
        path: impl Into<String>,
        flash: Option<u64>,
    ) -> Chrome {
        Chrome {
            title: title.into(),
            path: path.into(),
            csrf: ui.csrf(),
            flash: ui.take_flash(flash),
            refresh: None,
            team: ui.team().is_some(),
        }
    }

    /// Reloads the page every `seconds`.
    fn refreshing(mut self, seconds: Option<u32>) -> Chrome {
        self.refresh = seconds;
        self
    }

    /// The navigation: `(href, label, is this page)`.
    fn nav(&self) -> Vec<(&'static str, &'static str, bool)> {
        [
            ("/ui", "Dashboard"),
            ("/ui/apps", "Apps"),
            ("/ui/history", "History"),
            ("/ui/consent", "Consent"),
            ("/ui/credentials", "Credentials"),
            ("/ui/sign-ins", "Your sign-ins"),
            ("/ui/config", "Config"),
        ]
        .into_iter()
        .filter(|(href, _)| self.team || *href != "/ui/sign-ins")
        .map(|(href, label)| {
            let here = if href == "/ui" {
                self.path == "/ui"
            } else {
                self.path.starts_with(href)
            };
            (href, label, here)
        })
        .collect()
    }
}

/// One call in a list.
#[derive(Debug)]
struct CallRow {
    id: u64,
    time: String,
    caller: String,
    app: String,
    tool: String,
    status: String,
    code: Option<String>,
    duration_ms: u64,
    short: String,
}

impl CallRow {
    fn new(id: u64, r: Record) -> CallRow {
        CallRow {
            id,
            time: local_time(r.at_ms),
            short: crate::text::excerpt(&r.excerpt, 120),
            caller: r.caller,
            app: r.app,
            tool: r.tool,
            status: r.status,
            code: r.code,
            duration_ms: r.duration_ms,
        }
    }
}

/// `2026-11-25 03:12:04 CET`: a time in this machine's time zone (`TZ`, else
/// `/etc/localtime`; UTC when neither can be read), which is where the user of a local UI
/// sits (no JavaScript runs to ask the browser).
fn local_time(at_ms: u64) -> String {
    let zone = jiff::tz::TimeZone::try_system().unwrap_or(jiff::tz::TimeZone::UTC);
    let at = i64::try_from(at_ms).unwrap_or(i64::MAX);
    match jiff::Timestamp::from_millisecond(at) {
        Ok(t) => t
            .to_zoned_datetime(zone)
            .strftime("%Y-%m-%d %H:%M:%S %Z")
            .to_string(),
        Err(_) => crate::history::utc(at_ms),
    }
}

/// One pending consent question.
#[derive(Debug)]
struct PendingRow {
    id: u64,
    time: String,
    caller: String,
    app: String,
    app_name: String,
    tool: String,
    description: String,
    args: Option<String>,
    /// What changed in the tool since it was allowed.
    changed: Option<String>,
    site: Option<String>,
    start: Option<String>,
    /// The script run or batch the call is part of.
    within: Option<String>,
    waiting: bool,
    /// "Always" answers are offered (not for changes asked about each time).
    lasting: bool,
    highlight: bool,
}

/// The pending calls the viewer may see (every replica's with the shared store; none when
/// it is down, with a warning).
async fn pending_rows(ui: &Ui, viewer: &Viewer, highlight: Option<u64>) -> Vec<PendingRow> {
    let pending = match ui.pipeline().consent().pending_listed().await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!("the pending calls cannot be listed: {e}");
            Vec::new()
        }
    };
    pending
        .into_iter()
        .filter(|p| viewer.owns(&p.caller))
        .map(|p: Pending| PendingRow {
            highlight: Some(p.id) == highlight,
            lasting: p.lasting,
            id: p.id,
            time: local_time(p.at_ms),
            caller: p.caller,
            app: p.app,
            app_name: p.app_name,
            tool: p.tool,
            description: p.description,
            args: p.args,
            changed: p.changed,
            site: p.site,
            start: p.start,
            within: p.within,
            waiting: p.waiting,
        })
        .collect()
}

/// History rows for `filter`, read on a blocking thread; an empty list when none exist.
async fn calls(ui: &Ui, filter: Filter) -> Result<Vec<CallRow>, String> {
    if let Some(shared) = ui.gateway().shared_store() {
        return crate::history::rows_shared(shared, &filter)
            .await
            .map(|rows| {
                rows.into_iter()
                    .map(|(id, r)| CallRow::new(id, r))
                    .collect()
            })
            .map_err(|e| e.to_string());
    }
    let file = crate::consent::state::State::file_in(ui.gateway().home());
    tokio::task::spawn_blocking(move || {
        if !file.exists() {
            return Ok(Vec::new());
        }
        crate::history::rows(&file, &filter)
            .map(|rows| {
                rows.into_iter()
                    .map(|(id, r)| CallRow::new(id, r))
                    .collect()
            })
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())?
}

#[derive(Debug, Deserialize)]
pub(super) struct FlashQuery {
    flash: Option<u64>,
}

/// A form naming one app: remove its credential, or start its sign-in.
#[derive(Debug, Deserialize)]
pub(super) struct AppForm {
    csrf: Option<String>,
    app: String,
}

/// Where to go after an action: a UI path from the form, else `default` (never another
/// site: only `/ui…` paths are followed).
/// A path with anything but visible ASCII (a control character, a space, non-ASCII) is
/// no header value and falls back to `default` too: the action already ran, its answer
/// must not fail.
fn back_to(back: Option<&str>, default: &str) -> String {
    match back {
        Some(b)
            if b.starts_with("/ui")
                && !b.starts_with("//")
                && !b.contains('\\')
                && b.bytes().all(|c| c.is_ascii_graphic()) =>
        {
            b.split(['?', '#']).next().unwrap_or(default).to_owned()
        }
        _ => default.to_owned(),
    }
}

fn not_found(ui: &Ui, what: &str) -> Response {
    #[derive(Template)]
    #[template(
        source = "{% extends \"ui/base.html\" %}{% block content %}<p>{{ what }}</p>{% endblock %}",
        ext = "html"
    )]
    struct NotFound<'a> {
        c: Chrome,
        what: &'a str,
    }
    let mut response = page(
        NotFound {
            c: Chrome::new(ui, "Not found", "/ui", None),
            what,
        }
        .render(),
    );
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

#[cfg(test)]
mod tests {
    use super::back_to;

    #[test]
    fn back_leads_within_the_ui_and_is_always_a_header_value() {
        assert_eq!(back_to(Some("/ui/apps?x=1"), "/ui"), "/ui/apps");
        for bad in [
            "//evil.example",
            "/ui/a\u{1}b",
            "/ui/a\tb",
            "/ui/a b",
            "/ui/é",
            "/ui\\x",
            "https://x",
            "/ui/\r\nX: y",
        ] {
            assert_eq!(back_to(Some(bad), "/ui"), "/ui", "{bad:?}");
            let _ = axum::response::Redirect::to(&back_to(Some(bad), "/ui"));
        }
    }
}
