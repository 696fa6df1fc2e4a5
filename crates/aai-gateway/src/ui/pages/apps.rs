//! The apps list (`/ui/apps`), and the buttons of it and of an app page that hide, show,
//! remove or restore an app (`/ui/manage`).

use askama::Template;
use axum::extract::{Form, Query, State};
use axum::response::Response;
use serde::Deserialize;

use super::{Chrome, Ui, Viewer, forbidden_csrf, page};
use crate::registry::Missing;

/// One app in the list.
#[derive(Debug)]
struct AppRow {
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
pub(in super::super) struct AppsQuery {
    #[serde(default)]
    q: String,
    flash: Option<u64>,
}

pub(in super::super) async fn apps(
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
            home: ui.gateway().home().display().to_string(),
            trash: crate::manage::trash::list(ui.gateway().home())
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

#[derive(Debug, Deserialize)]
pub(in super::super) struct ManageForm {
    csrf: Option<String>,
    /// `hide`, `show` (for every client), `remove`, `restore`.
    action: String,
    app: String,
}

/// The apps page's and an app page's buttons: hide or show an app for every client, move
/// it to the trash, restore it (`docs/manage.md`). The user at the UI asked: nothing more
/// is asked.
pub(in super::super) async fn manage(
    State(ui): State<Ui>,
    Form(form): Form<ManageForm>,
) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    let gateway = ui.inner.gateway.clone();
    let Some(manager) = gateway.pipeline().manager().cloned() else {
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
    match manager
        .apply(change, gateway.pipeline().authenticator().store())
        .await
    {
        Ok(_) => {
            gateway.rescan().await;
            ui.flash(&back, format!("Done: {text}."), true)
        }
        Err(e) => ui.flash(&back, format!("Nothing changed: {e}"), false),
    }
}
