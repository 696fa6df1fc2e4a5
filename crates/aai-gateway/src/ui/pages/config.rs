//! The config page (`/ui/config`), and the rescan every page's header offers (`/ui/rescan`).

use askama::Template;
use axum::extract::{Form, Query, State};
use axum::response::Response;
use serde::Deserialize;

use super::{Chrome, FlashQuery, Ui, back_to, forbidden_csrf, page};

#[derive(Template)]
#[template(path = "ui/config.html")]
struct ConfigPage {
    c: Chrome,
    file: String,
    rows: Vec<(String, String, String)>,
    places: Vec<(String, String)>,
}

pub(in super::super) async fn config(
    State(ui): State<Ui>,
    Query(q): Query<FlashQuery>,
) -> Response {
    let gateway = ui.gateway();
    let config = gateway.config();
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
        ("Home".to_owned(), gateway.home().display().to_string()),
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
                crate::consent::state::State::file_in(gateway.home())
                    .display()
                    .to_string(),
            ),
        },
        (
            "Logs".to_owned(),
            gateway.home().join("logs").display().to_string(),
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
pub(in super::super) struct BackForm {
    csrf: Option<String>,
    back: Option<String>,
}

pub(in super::super) async fn rescan(State(ui): State<Ui>, Form(form): Form<BackForm>) -> Response {
    if !ui.csrf_ok(form.csrf.as_deref()) {
        return forbidden_csrf();
    }
    let gateway = ui.inner.gateway.clone();
    let changed = gateway.rescan_everything().await;
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
