//! The dashboard (`/ui`): apps served, the day's calls and errors, what waits for consent.

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;

use super::{CallRow, Chrome, FlashQuery, PendingRow, Ui, Viewer, calls, page, pending_rows};
use crate::history::{self, Filter};

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

pub(in super::super) async fn dashboard(
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
