//! The pages and actions of the web UI: each handler reads the gateway, fills a view,
//! and renders its template (`templates/ui/`). POST handlers check the CSRF token first.

use std::collections::HashMap;

use aai_descriptor::{Auth, AuthKind};
use askama::Template;
use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{Ui, Viewer, forbidden_csrf, page};
use crate::auth::store::Credential;
use crate::consent::{Choice, Pending};
use crate::history::{self, Filter, Record};
use crate::registry::Missing;

/// What every page carries: its title and path, the CSRF token, a message.
#[derive(Debug)]
pub(super) struct Chrome {
    title: String,
    path: String,
    csrf: String,
    flash: Option<(String, bool)>,
    /// Reload the page every this many seconds (a pending consent appears without
    /// JavaScript, which the UI's CSP forbids).
    refresh: Option<u32>,
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
            ("/ui/config", "Config"),
        ]
        .into_iter()
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
pub(super) struct CallRow {
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
pub(super) struct PendingRow {
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
    waiting: bool,
    /// "Always" answers are offered (not for changes asked about each time).
    lasting: bool,
    highlight: bool,
}

/// The pending calls the viewer may see (every replica's with the shared store; none when
/// it is down, with a warning).
async fn pending_rows(ui: &Ui, viewer: &Viewer, highlight: Option<u64>) -> Vec<PendingRow> {
    let pending = match ui.gateway().consent.pending_listed().await {
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
            waiting: p.waiting,
        })
        .collect()
}

/// History rows for `filter`, read on a blocking thread; an empty list when none exist.
async fn calls(ui: &Ui, filter: Filter) -> Result<Vec<CallRow>, String> {
    if let Some(shared) = ui.gateway().shared_store() {
        return history::rows_shared(shared, &filter)
            .await
            .map(|rows| {
                rows.into_iter()
                    .map(|(id, r)| CallRow::new(id, r))
                    .collect()
            })
            .map_err(|e| e.to_string());
    }
    let file = crate::consent::state::State::file_in(&ui.gateway().home);
    tokio::task::spawn_blocking(move || {
        if !file.exists() {
            return Ok(Vec::new());
        }
        history::rows(&file, &filter)
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

#[derive(Template)]
#[template(path = "ui/dashboard.html")]
struct DashboardPage {
    c: Chrome,
    apps: usize,
    broken: usize,
    calls_day: usize,
    errors_day: usize,
    pending: Vec<PendingRow>,
    recent: Vec<CallRow>,
    errors: Vec<CallRow>,
}

pub(super) async fn dashboard(
    State(ui): State<Ui>,
    viewer: Viewer,
    Query(q): Query<FlashQuery>,
) -> Response {
    let snapshot = viewer.snapshot(&ui).await;
    let day = history::now_ms().saturating_sub(86_400_000);
    let person = viewer.only();
    let in_day = |status: Option<&str>| Filter {
        status: status.map(str::to_owned),
        since_ms: Some(day),
        limit: 10_000,
        person: person.clone(),
        ..Filter::default()
    };
    let calls_day = calls(&ui, in_day(None)).await.map_or(0, |c| c.len());
    let errors_day = calls(&ui, in_day(Some("error")))
        .await
        .map_or(0, |c| c.len());
    let recent = calls(
        &ui,
        Filter {
            limit: 10,
            person: person.clone(),
            ..Filter::default()
        },
    )
    .await
    .unwrap_or_default();
    let errors = calls(
        &ui,
        Filter {
            status: Some("error".into()),
            limit: 5,
            person,
            ..Filter::default()
        },
    )
    .await
    .unwrap_or_default();
    let pending = pending_rows(&ui, &viewer, None).await;
    page(
        DashboardPage {
            // No form to lose here: a new pending call shows within 10 s, and while one
            // waits the page follows closely.
            c: Chrome::new(&ui, "Dashboard", "/ui", q.flash)
                .refreshing(Some(if pending.is_empty() { 10 } else { 3 })),
            apps: snapshot.entries.len(),
            broken: snapshot.missing_all().len(),
            calls_day,
            errors_day,
            pending,
            recent,
            errors,
        }
        .render(),
    )
}

/// One app in the list.
#[derive(Debug)]
pub(super) struct AppRow {
    id: String,
    name: String,
    description: String,
    kind: &'static str,
    platform: &'static str,
    tools: usize,
}

#[derive(Template)]
#[template(path = "ui/apps.html")]
struct AppsPage {
    c: Chrome,
    q: String,
    home: String,
    apps: Vec<AppRow>,
    /// `(app id, removed at, where it was)`, newest first.
    trash: Vec<(String, String, String)>,
    /// `(ids, why)`.
    broken: Vec<(String, String)>,
}

#[derive(Debug, Deserialize)]
pub(super) struct AppsQuery {
    #[serde(default)]
    q: String,
    flash: Option<u64>,
}

pub(super) async fn apps(
    State(ui): State<Ui>,
    viewer: Viewer,
    Query(query): Query<AppsQuery>,
) -> Response {
    let snapshot = viewer.snapshot(&ui).await;
    let row = |e: &crate::registry::Entry| AppRow {
        id: e.app.id.clone(),
        name: snapshot.name(e).to_owned(),
        description: e.app.description.clone(),
        kind: e.binding().executor.kind().as_str(),
        platform: e.binding().platform.as_str(),
        tools: e.binding().tools.len(),
    };
    let q = query.q.trim().to_owned();
    let apps: Vec<AppRow> = if q.is_empty() {
        snapshot.entries.iter().map(row).collect()
    } else {
        crate::registry::search::search(&snapshot, &q, 200)
            .iter()
            .map(|hit| row(hit.entry))
            .collect()
    };
    // Broken files and the trash are the gateway's, not a member's to see.
    let admin = !viewer.member();
    let broken = snapshot
        .missing_all()
        .into_iter()
        .filter(|_| admin)
        .map(|(id, why)| {
            let why = match why {
                Missing::Broken(b) => format!("{}\n{}", b.file.display(), b.problems.join("\n")),
                Missing::Inactive(inactive) => {
                    format!(
                        "{}\nnot active on this machine: {}",
                        inactive.file.display(),
                        inactive.why
                    )
                }
                Missing::Unsupported(bindings) => {
                    let list: Vec<String> = bindings
                        .iter()
                        .map(|(p, t)| format!("{} ({t})", p.as_str()))
                        .collect();
                    format!(
                        "no binding runs on this machine; it has: {}",
                        list.join(", ")
                    )
                }
            };
            (id.to_owned(), why)
        })
        .collect();
    page(
        AppsPage {
            c: Chrome::new(&ui, "Apps", "/ui/apps", query.flash),
            q,
            home: ui.gateway().home.display().to_string(),
            trash: crate::manage::trash::list(&ui.gateway().home)
                .into_iter()
                .filter(|_| admin)
                .map(|t| {
                    (
                        t.app,
                        crate::history::utc(t.removed_at_ms),
                        t.origin.display().to_string(),
                    )
                })
                .collect(),
            apps,
            broken,
        }
        .render(),
    )
}

/// One binding of an app.
#[derive(Debug)]
pub(super) struct BindingRow {
    platform: &'static str,
    kind: &'static str,
    auth: String,
    tools: usize,
    used: bool,
}

/// One tool of an app.
#[derive(Debug)]
pub(super) struct ToolRow {
    name: String,
    description: String,
    schema: String,
    /// The "try it" form's fields, one per top-level property of the schema.
    fields: Vec<Field>,
}

/// One field of a tool's "try it" form.
#[derive(Debug)]
pub(super) struct Field {
    name: String,
    /// `text`, `number`, `integer`, `boolean`, `choice` or `json` (anything else).
    kind: &'static str,
    required: bool,
    description: String,
    /// For `choice`: the allowed values.
    options: Vec<String>,
}

/// The form fields of a tool's parameters schema: strings, numbers and booleans as
/// inputs, an `enum` of strings as a choice, anything else as JSON text.
fn fields_of(schema: &serde_json::Value) -> Vec<Field> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(serde_json::Value::as_array)
        .map(|r| r.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
    else {
        return Vec::new();
    };
    properties
        .iter()
        .take(50)
        .map(|(name, p)| {
            let options: Vec<String> = p
                .get("enum")
                .and_then(serde_json::Value::as_array)
                .map(|e| {
                    e.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let kind = match p.get("type").and_then(serde_json::Value::as_str) {
                _ if !options.is_empty() => "choice",
                Some("string") => "text",
                Some("number") => "number",
                Some("integer") => "integer",
                Some("boolean") => "boolean",
                _ => "json",
            };
            Field {
                name: name.clone(),
                kind,
                required: required.contains(&name.as_str()),
                description: p
                    .get("description")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                options,
            }
        })
        .collect()
}

#[derive(Template)]
#[template(path = "ui/app.html")]
struct AppPage {
    c: Chrome,
    id: String,
    description: String,
    aliases: String,
    version: Option<String>,
    dialect: String,
    source: String,
    bindings: Vec<BindingRow>,
    tools: Vec<ToolRow>,
    diagnostics: Vec<String>,
    /// Description text addressed to the model (`aai_descriptor::lint`), listed tools'
    /// included: where, what, an excerpt.
    poisoning: Vec<String>,
    guide: String,
    /// What config `clients` hides of this app, in words (the effective state).
    hidden: Vec<String>,
    /// `disable` hid it from every client (`$AAI_HOME/apps.json`).
    hidden_for_all: bool,
    /// Its folder is the gateway's to move to the trash.
    removable: bool,
}

pub(super) async fn app(
    State(ui): State<Ui>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(q): Query<FlashQuery>,
) -> Response {
    let snapshot = viewer.snapshot(&ui).await;
    let Some(entry) = snapshot.find(&id) else {
        return not_found(&ui, &format!("No app `{id}` is served."));
    };
    let app = &entry.app;
    let source = entry.source.display().to_string();
    let manager = ui.gateway().pipeline.manage.clone();
    let removable = manager
        .as_ref()
        .is_some_and(|m| m.remove(&app.id, &entry.source).is_ok());
    let hidden_for_all = manager
        .as_ref()
        .is_some_and(|m| m.hidden_from_everyone(&app.id));
    page(
        AppPage {
            hidden_for_all,
            removable,
            c: Chrome::new(
                &ui,
                snapshot.name(entry),
                format!("/ui/apps/{}", app.id),
                q.flash,
            ),
            id: app.id.clone(),
            description: app.description.clone(),
            aliases: app.aliases.join(", "),
            version: app.version.clone(),
            dialect: format!("{:?}", app.dialect),
            bindings: app
                .bindings
                .iter()
                .enumerate()
                .map(|(i, b)| BindingRow {
                    platform: b.platform.as_str(),
                    kind: b.executor.kind().as_str(),
                    auth: b
                        .auth
                        .as_ref()
                        .map_or("none".to_owned(), |a| a.kind().to_string()),
                    tools: b.tools.len(),
                    used: i == entry.binding,
                })
                .collect(),
            tools: entry
                .binding()
                .tools
                .iter()
                .map(|t| ToolRow {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    schema: serde_json::to_string_pretty(t.parameters.json()).unwrap_or_default(),
                    fields: fields_of(t.parameters.json()),
                })
                .collect(),
            diagnostics: snapshot
                .diagnostics
                .iter()
                .filter(|d| d.source == source)
                .map(ToString::to_string)
                .collect(),
            poisoning: aai_descriptor::lint::text(&app.description)
                .into_iter()
                .map(|f| ("the app".to_owned(), f))
                .chain(entry.binding().tools.iter().flat_map(|t| {
                    aai_descriptor::lint::tool(t)
                        .into_iter()
                        .map(|f| (format!("tool `{}`", t.name), f))
                }))
                .map(|(whose, f)| {
                    format!(
                        "{whose} ({}): {}: \u{201c}{}\u{201d}",
                        if f.pointer.is_empty() {
                            "/description"
                        } else {
                            &f.pointer
                        },
                        f.kind.what(),
                        f.excerpt
                    )
                })
                .collect(),
            guide: crate::registry::guide::render(&snapshot, entry),
            hidden: {
                let tools: Vec<String> = entry
                    .binding()
                    .tools
                    .iter()
                    .map(|t| t.name.clone())
                    .collect();
                let who = |c: &str| {
                    if c == "*" {
                        "every client".to_owned()
                    } else {
                        format!("`{c}`")
                    }
                };
                let visibility = ui.gateway().registry_snapshot().visibility.clone();
                let mut hidden: Vec<String> = visibility
                    .hidden(&app.id, &tools)
                    .map(|(client, tool)| match tool {
                        None => format!("the app is hidden from {}", who(client)),
                        Some(t) => format!("`{t}` is hidden from {}", who(client)),
                    })
                    .collect();
                if let Some(only) = visibility.audience(&app.id) {
                    let names: Vec<String> = only.iter().map(|c| who(c)).collect();
                    hidden.push(format!("only {} see the app", names.join(", ")));
                }
                hidden
            },
            source,
        }
        .render(),
    )
}

#[derive(Template)]
#[template(path = "ui/history.html")]
struct HistoryPage {
    c: Chrome,
    app: String,
    tool: String,
    caller: String,
    status: String,
    since: String,
    limit: usize,
    error: Option<String>,
    calls: Vec<CallRow>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct HistoryQuery {
    #[serde(default)]
    app: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    caller: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    since: String,
    flash: Option<u64>,
}

/// How many calls the history page lists.
const HISTORY_PAGE: usize = 200;

pub(super) async fn history(
    State(ui): State<Ui>,
    viewer: Viewer,
    Query(q): Query<HistoryQuery>,
) -> Response {
    let some = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
    let mut error = None;
    let since_ms = match some(&q.since).map(|s| history::since(&s)) {
        Some(Ok(ms)) => Some(ms),
        Some(Err(e)) => {
            error = Some(e.to_string());
            None
        }
        None => None,
    };
    let status = some(&q.status).filter(|s| s == "ok" || s == "error");
    let filter = Filter {
        app: some(&q.app),
        tool: some(&q.tool),
        caller: some(&q.caller),
        status: status.clone(),
        since_ms,
        limit: HISTORY_PAGE,
        person: viewer.only(),
    };
    let calls = match calls(&ui, filter).await {
        Ok(c) => c,
        Err(e) => {
            error = Some(format!("cannot read the history: {e}"));
            Vec::new()
        }
    };
    page(
        HistoryPage {
            c: Chrome::new(&ui, "History", "/ui/history", q.flash),
            app: q.app,
            tool: q.tool,
            caller: q.caller,
            status: status.unwrap_or_default(),
            since: q.since,
            limit: HISTORY_PAGE,
            error,
            calls,
        }
        .render(),
    )
}

#[derive(Template)]
#[template(path = "ui/call.html")]
struct CallPage {
    c: Chrome,
    /// The request arguments, pretty.
    args: String,
    /// The whole recorded excerpt (the row's is shortened).
    excerpt: String,
    call: CallRow,
}

pub(super) async fn call(State(ui): State<Ui>, viewer: Viewer, Path(id): Path<u64>) -> Response {
    let file = crate::consent::state::State::file_in(&ui.gateway().home);
    let shared = ui.gateway().shared_store().cloned();
    let found = match shared {
        Some(shared) => history::get_shared(&shared, id)
            .await
            .map_err(|e| e.to_string()),
        None => tokio::task::spawn_blocking(move || {
            if file.exists() {
                history::get(&file, id)
            } else {
                Ok(None)
            }
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string())),
    };
    let record = match found {
        // Another person's call is as unknown as a pruned one.
        Ok(Some(r)) if viewer.sees(r.person.as_deref()) => r,
        Ok(Some(_)) => return not_found(&ui, &format!("No call {id} is kept.")),
        Ok(None) => return not_found(&ui, &format!("No call {id} is kept.")),
        Err(e) => return not_found(&ui, &format!("Cannot read the history: {e}")),
    };
    page(
        CallPage {
            c: Chrome::new(&ui, format!("Call {id}"), "/ui/history", None),
            args: serde_json::to_string_pretty(&record.args).unwrap_or_default(),
            excerpt: record.excerpt.clone(),
            call: CallRow::new(id, record),
        }
        .render(),
    )
}

/// One "always" grant.
#[derive(Debug)]
pub(super) struct GrantRow {
    caller: String,
    app: String,
    tool: String,
    time: String,
    cert: Option<String>,
}

#[derive(Template)]
#[template(path = "ui/consent.html")]
struct ConsentPage {
    c: Chrome,
    mode: &'static str,
    pending: Vec<PendingRow>,
    grants: Vec<GrantRow>,
}

/// What a link to the consent page may say: which pending call to show, and a message.
/// Never what the grant form holds: a link from anywhere could pre-fill an "always".
#[derive(Debug, Default, Deserialize)]
pub(super) struct ConsentQuery {
    pending: Option<u64>,
    flash: Option<u64>,
}

pub(super) async fn consent(
    State(ui): State<Ui>,
    viewer: Viewer,
    Query(q): Query<ConsentQuery>,
) -> Response {
    let grants = match ui.gateway().consent.grants_listed().await {
        Ok(g) => g,
        Err(e) => {
            tracing::warn!("the grants cannot be listed: {e}");
            Vec::new()
        }
    };
    let pending = pending_rows(&ui, &viewer, q.pending).await;
    page(
        ConsentPage {
            // Only while something waits: a reload would lose what is typed into the
            // grant form below.
            c: Chrome::new(&ui, "Consent", "/ui/consent", q.flash)
                .refreshing((!pending.is_empty()).then_some(3)),
            mode: ui.gateway().config.consent.as_str(),
            pending,
            grants: grants
                .into_iter()
                .filter(|g| viewer.owns(&g.caller))
                .map(|g| GrantRow {
                    time: if g.granted_at == 0 {
                        "this run".into()
                    } else {
                        local_time(g.granted_at.saturating_mul(1000))
                    },
                    caller: g.caller,
                    app: g.app,
                    tool: g.tool,
                    cert: g.cert,
                })
                .collect(),
        }
        .render(),
    )
}

#[derive(Debug, Deserialize)]
pub(super) struct AnswerForm {
    csrf: Option<String>,
    id: u64,
    choice: String,
    back: Option<String>,
}

pub(super) async fn answer(
    State(ui): State<Ui>,
    viewer: Viewer,
    Form(form): Form<AnswerForm>,
) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    let back = back_to(form.back.as_deref(), "/ui/consent");
    let Some(choice) = Choice::parse(&form.choice) else {
        return ui.flash(&back, format!("`{}` is not a choice", form.choice), false);
    };
    // A person answers only for their own calls: another's is as unknown as none.
    let theirs = ui
        .gateway()
        .consent
        .pending_listed()
        .await
        .unwrap_or_default()
        .iter()
        .any(|p| p.id == form.id && viewer.owns(&p.caller));
    if !theirs {
        return ui.flash(
            &back,
            crate::consent::NotPending(form.id).to_string(),
            false,
        );
    }
    match ui.gateway().consent.answer_listed(form.id, choice).await {
        Ok(what) => ui.flash(&back, format!("Answered: {what}."), true),
        Err(e) => ui.flash(&back, e.to_string(), false),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct GrantForm {
    csrf: Option<String>,
    caller: String,
    app: String,
    #[serde(default)]
    tool: String,
}

pub(super) async fn grant(
    State(ui): State<Ui>,
    viewer: Viewer,
    Form(form): Form<GrantForm>,
) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    let (caller, app) = (form.caller.trim(), form.app.trim());
    let tool = match form.tool.trim() {
        "" => "*",
        t => t,
    };
    if caller.is_empty() || app.is_empty() || !caller.contains('@') {
        return ui.flash(
            "/ui/consent",
            "A grant needs a caller (`name@transport`) and an app.",
            false,
        );
    }
    if !viewer.owns(caller) {
        return ui.flash(
            "/ui/consent",
            "You may grant only your own callers (`<client>@http~<you>`).",
            false,
        );
    }
    ui.gateway().consent.remember(caller, app, tool, None);
    let what = if tool == "*" {
        "every tool".to_owned()
    } else {
        format!("`{tool}`")
    };
    ui.flash(
        "/ui/consent",
        format!("`{caller}` may now run {what} of `{app}` without asking."),
        true,
    )
}

#[derive(Debug, Deserialize)]
pub(super) struct RevokeForm {
    csrf: Option<String>,
    caller: String,
    app: String,
    tool: String,
}

pub(super) async fn revoke(
    State(ui): State<Ui>,
    viewer: Viewer,
    Form(form): Form<RevokeForm>,
) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    if !viewer.owns(&form.caller) {
        return ui.flash("/ui/consent", "You may revoke only your own grants.", false);
    }
    match ui
        .gateway()
        .consent
        .revoke(&form.app, Some(&form.tool), Some(&form.caller))
        .await
    {
        Ok(n) => ui.flash(
            "/ui/consent",
            format!(
                "Revoked {n} grant{}; the next call asks again.",
                if n == 1 { "" } else { "s" }
            ),
            true,
        ),
        Err(e) => ui.flash("/ui/consent", format!("Cannot revoke: {e}"), false),
    }
}

/// One app that needs credentials.
#[derive(Debug)]
pub(super) struct CredentialRow {
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

pub(super) async fn credentials(State(ui): State<Ui>, Query(q): Query<FlashQuery>) -> Response {
    let gateway = ui.gateway();
    let snapshot = gateway.snapshot().await;
    let store = gateway.authenticator().store();
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
                    problem.get_or_insert_with(|| store_problem(e, &gateway.config.file));
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
                problem.get_or_insert_with(|| store_problem(e, &gateway.config.file));
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
        });
    }
    let store = match gateway.config.credentials {
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
            gateway.home.join("credentials.json").display()
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
pub(super) struct SetForm {
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
async fn auth_of(ui: &Ui, app: &str) -> Option<Auth> {
    let snapshot = ui.gateway().snapshot().await;
    let entry = snapshot.entries.iter().find(|e| e.app.id == app)?;
    entry.binding().auth.clone()
}

pub(super) async fn set_credential(State(ui): State<Ui>, Form(form): Form<SetForm>) -> Response {
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
        .gateway()
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
            format!("Not saved: {}", store_problem(e, &ui.gateway().config.file)),
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

#[derive(Debug, Deserialize)]
pub(super) struct AppForm {
    csrf: Option<String>,
    app: String,
}

pub(super) async fn remove_credential(State(ui): State<Ui>, Form(form): Form<AppForm>) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    match ui.gateway().authenticator().store().delete(&form.app).await {
        Ok(true) => ui.flash(
            "/ui/credentials",
            format!("Removed the credential of `{}`.", form.app),
            true,
        ),
        Ok(false) => ui.flash("/ui/credentials", "Nothing was stored.", true),
        Err(e) => ui.flash("/ui/credentials", format!("Not removed: {e}"), false),
    }
}

/// The URL of a remote MCP server that signs in the MCP way (no descriptor `auth`).
fn mcp_url(entry: &crate::registry::Entry) -> Option<&str> {
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

#[derive(Template)]
#[template(path = "ui/mcp_sign_in.html")]
struct McpSignInPage {
    c: Chrome,
    app: String,
    name: String,
    server: String,
    issuer: String,
    issuer_origin: String,
}

/// Starts the OAuth sign-in of an app and sends the browser to the provider; the tokens
/// are stored when the provider redirects back to the gateway's loopback listener. A
/// remote MCP server first gets a page that shows its origin and its authorization
/// server's (discovery asked only the server) and asks to go on.
pub(super) async fn login(State(ui): State<Ui>, Form(form): Form<AppForm>) -> Response {
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
    let Some(client_id) = ui.gateway().authenticator().client_id(&form.app, &oauth) else {
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
                .gateway()
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
pub(super) struct McpLoginForm {
    csrf: Option<String>,
    app: String,
    /// The authorization server the user agreed to.
    issuer: String,
}

/// A remote MCP server's sign-in, after the user agreed to its origins: discovery again
/// (the authorization server must be the one shown), then `auth::mcp::sign_in` in the
/// background; the browser goes to the first authorization URL.
pub(super) async fn mcp_login(State(ui): State<Ui>, Form(form): Form<McpLoginForm>) -> Response {
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
        let store = task_ui.gateway().authenticator().store().clone();
        let before = match store.get(&app).await {
            Ok(Some(Credential::McpOAuth(g))) => Some(g),
            _ => None,
        };
        let document = task_ui.gateway().config.oauth_client_metadata_url.clone();
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

#[derive(Template)]
#[template(path = "ui/config.html")]
struct ConfigPage {
    c: Chrome,
    file: String,
    rows: Vec<(String, String, String)>,
    places: Vec<(String, String)>,
}

pub(super) async fn config(State(ui): State<Ui>, Query(q): Query<FlashQuery>) -> Response {
    let gateway = ui.gateway();
    let config = &gateway.config;
    let file_json: serde_json::Value = std::fs::read_to_string(&config.file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    let listening = url::Url::parse(ui.base())
        .ok()
        .and_then(|u| u.port_or_known_default());
    let rows = config
        .effective()
        .into_iter()
        .map(|(key, value)| {
            let pointer = format!("/{}", key.replace('.', "/"));
            // Per-app keys hold dots in the app id: look them up whole.
            let in_file = file_json.pointer(&pointer).is_some() || key.starts_with("apps.");
            let from = if in_file {
                config.file.display().to_string()
            } else {
                "default".to_owned()
            };
            // `--listen`, or the next free port when `httpPort` was taken: the port this
            // UI really answers on.
            if key == "httpPort"
                && let Some(port) = listening.filter(|p| p.to_string() != value)
            {
                return (
                    key,
                    port.to_string(),
                    format!("listening (the setting is {value})"),
                );
            }
            (key, value, from)
        })
        .collect();
    let token = if ui.inner.token.is_some() {
        "set (AAI_HTTP_TOKEN)"
    } else {
        "not set"
    };
    let mut places = vec![
        ("Home".to_owned(), gateway.home.display().to_string()),
        ("Config file".to_owned(), config.file.display().to_string()),
        match gateway.shared_store() {
            Some(shared) => (
                "Shared store (consent, history, credentials)".to_owned(),
                format!(
                    "PostgreSQL {}, replica {}",
                    shared.shown(),
                    shared.replica()
                ),
            ),
            None => (
                "State (consent, history)".to_owned(),
                crate::consent::state::State::file_in(&gateway.home)
                    .display()
                    .to_string(),
            ),
        },
        (
            "Logs".to_owned(),
            gateway.home.join("logs").display().to_string(),
        ),
        ("Web UI".to_owned(), ui.base().to_owned()),
        ("Bearer token".to_owned(), token.to_owned()),
    ];
    for dir in gateway.search_dirs() {
        places.push((
            format!("Descriptors ({})", dir.kind.as_str()),
            dir.dir.display().to_string(),
        ));
    }
    page(
        ConfigPage {
            c: Chrome::new(&ui, "Config", "/ui/config", q.flash),
            file: config.file.display().to_string(),
            rows,
            places,
        }
        .render(),
    )
}

#[derive(Debug, Deserialize)]
pub(super) struct BackForm {
    csrf: Option<String>,
    back: Option<String>,
}

pub(super) async fn rescan(State(ui): State<Ui>, Form(form): Form<BackForm>) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    let gateway = ui.inner.gateway.clone();
    let changed = gateway.rescan_async().await;
    let snapshot = gateway.snapshot().await;
    let back = back_to(form.back.as_deref(), "/ui");
    ui.flash(
        &back,
        format!(
            "Rescanned: {} app{} served{}.",
            snapshot.entries.len(),
            if snapshot.entries.len() == 1 { "" } else { "s" },
            if changed {
                ", changes announced to clients"
            } else {
                ", nothing changed"
            }
        ),
        true,
    )
}

#[derive(Debug, Deserialize)]
pub(super) struct ManageForm {
    csrf: Option<String>,
    /// `hide`, `show` (for every client), `remove`, `restore`.
    action: String,
    app: String,
}

/// The apps page's and an app page's buttons: hide or show an app for every client, move
/// it to the trash, restore it (`docs/manage.md`). The user at the UI asked: nothing more
/// is asked.
pub(super) async fn manage(State(ui): State<Ui>, Form(form): Form<ManageForm>) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    let gateway = ui.inner.gateway.clone();
    let Some(manager) = gateway.pipeline.manage.clone() else {
        return ui.flash("/ui/apps", "Managing apps is not available here.", false);
    };
    let app = form.app.as_str();
    let page = format!("/ui/apps/{}", crate::text::percent_encode(app));
    let (change, back) = match form.action.as_str() {
        "hide" => (
            manager.visibility(true, crate::manage::EVERYONE, app, None),
            page,
        ),
        "show" => (
            manager.visibility(false, crate::manage::EVERYONE, app, None),
            page,
        ),
        "remove" => {
            let snapshot = gateway.snapshot().await;
            let change = match snapshot.find(app) {
                Some(entry) => manager.remove(&entry.app.id, &entry.source),
                None => return ui.flash("/ui/apps", format!("No app `{app}` is served."), false),
            };
            (change, "/ui/apps".to_owned())
        }
        "restore" => (manager.restore(app), "/ui/apps".to_owned()),
        _ => return ui.flash("/ui/apps", "Unknown action.", false),
    };
    let change = match change {
        Ok(c) => c,
        Err(e) => return ui.flash(&back, format!("Nothing changed: {e}"), false),
    };
    let text = change.describe().to_owned();
    match manager.apply(change, gateway.authenticator().store()).await {
        Ok(_) => {
            gateway.rescan_async().await;
            ui.flash(&back, format!("Done: {text}."), true)
        }
        Err(e) => ui.flash(&back, format!("Nothing changed: {e}"), false),
    }
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

#[derive(Template)]
#[template(path = "ui/login.html")]
struct LoginPage {
    failed: bool,
}

#[derive(Deserialize)]
pub(super) struct SignInQuery {
    code: Option<String>,
}

pub(super) async fn sign_in_page(
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
pub(super) struct SignInForm {
    token: String,
}

pub(super) async fn sign_in(State(ui): State<Ui>, Form(form): Form<SignInForm>) -> Response {
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

/// The result of a tool run from its app page.
#[derive(Template)]
#[template(path = "ui/tried.html")]
struct TriedPage {
    c: Chrome,
    app: String,
    tool: String,
    args: String,
    ok: bool,
    result: String,
}

/// `POST /ui/apps/{id}/try`: runs one tool with the form's arguments through the same
/// pipeline as every front door (validation, consent policy, credentials, history), as
/// the user at the UI (caller `web-ui@ui`, like the command line).
pub(super) async fn try_tool(
    State(ui): State<Ui>,
    Path(id): Path<String>,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let value = |key: &str| form.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    if !ui.csrf_ok(value("csrf")) {
        return forbidden_csrf();
    }
    let tool = value("tool").unwrap_or_default().to_owned();
    let back = format!(
        "/ui/apps/{}",
        percent_encoding::utf8_percent_encode(&id, percent_encoding::NON_ALPHANUMERIC)
    );
    let args = match form_args(&form) {
        Ok(args) => args,
        Err(why) => return ui.flash(&back, why, false),
    };
    let origin = crate::pipeline::Origin {
        caller: crate::consent::Caller::ui(),
        prompter: None,
        client: None,
        trace: None,
    };
    let shown = crate::history::mask(&args);
    let outcome = ui
        .gateway()
        .pipeline
        .call(
            &id,
            &tool,
            Some(args),
            tokio_util::sync::CancellationToken::new(),
            None,
            &origin,
        )
        .await;
    let (ok, result) = match outcome {
        // The user's own result, as the app gave it (cut at 100,000 characters).
        Ok(o) => (
            true,
            crate::text::excerpt(
                &serde_json::to_string_pretty(&o.value).unwrap_or_default(),
                100_000,
            ),
        ),
        Err(e) => (
            false,
            serde_json::to_string_pretty(&e.to_json()).unwrap_or_default(),
        ),
    };
    page(
        TriedPage {
            c: Chrome::new(&ui, format!("{id}: {tool}"), back.clone(), None),
            app: id,
            tool,
            args: serde_json::to_string_pretty(&shown).unwrap_or_default(),
            ok,
            result,
        }
        .render(),
    )
}

/// The arguments of a "try it" form: `arg.<name>` fields typed by `type.<name>`, empty
/// ones left out; a non-empty `json` field (an object) is taken whole instead.
fn form_args(form: &[(String, String)]) -> Result<serde_json::Value, String> {
    use serde_json::Value;
    if let Some((_, text)) = form
        .iter()
        .find(|(k, v)| k == "json" && !v.trim().is_empty())
    {
        return match serde_json::from_str::<Value>(text) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(_) => Err("The arguments must be a JSON object.".to_owned()),
            Err(e) => Err(format!("The arguments are not JSON: {e}")),
        };
    }
    let kind = |name: &str| {
        form.iter()
            .find(|(k, _)| k.strip_prefix("type.") == Some(name))
            .map_or("text", |(_, v)| v.as_str())
    };
    let mut args = serde_json::Map::new();
    for (key, text) in form {
        let Some(name) = key.strip_prefix("arg.") else {
            continue;
        };
        if text.is_empty() {
            continue;
        }
        let value = match kind(name) {
            "integer" => text
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| format!("`{name}` must be a whole number."))?,
            "number" => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("`{name}` must be a number."))?,
            "boolean" => Value::Bool(text == "true"),
            "json" => {
                serde_json::from_str(text).map_err(|e| format!("`{name}` is not JSON: {e}"))?
            }
            _ => Value::String(text.clone()),
        };
        args.insert(name.to_owned(), value);
    }
    Ok(Value::Object(args))
}
