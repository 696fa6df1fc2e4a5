//! The history (`/ui/history`) and one call of it (`/ui/history/{id}`).

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;

use super::{CallRow, Chrome, Ui, Viewer, calls, not_found, page};
use crate::history::{self, Filter};

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
pub(in super::super) struct HistoryQuery {
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
    /// Only one script run's or batch's calls (a link of a call's page).
    #[serde(default)]
    run: String,
    flash: Option<u64>,
}

/// How many calls the history page lists.
const HISTORY_PAGE: usize = 200;

pub(in super::super) async fn history(
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
        run: some(&q.run),
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

pub(in super::super) async fn call(
    State(ui): State<Ui>,
    viewer: Viewer,
    Path(id): Path<u64>,
) -> Response {
    let file = crate::consent::state::State::file_in(ui.gateway().home());
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
