//! The consent page (`/ui/consent`): pending calls and "always" grants, and its actions
//! (answer, grant, revoke).

use askama::Template;
use axum::extract::{Form, Query, State};
use axum::response::Response;
use serde::Deserialize;

use super::{
    Chrome, PendingRow, Ui, Viewer, back_to, forbidden_csrf, local_time, page, pending_rows,
};
use crate::consent::Choice;

/// One "always" grant.
#[derive(Debug)]
struct GrantRow {
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
pub(in super::super) struct ConsentQuery {
    pending: Option<u64>,
    flash: Option<u64>,
}

pub(in super::super) async fn consent(
    State(ui): State<Ui>,
    viewer: Viewer,
    Query(q): Query<ConsentQuery>,
) -> Response {
    let grants = match ui.pipeline().consent().grants_listed().await {
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
            mode: ui.gateway().config().consent.as_str(),
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
pub(in super::super) struct AnswerForm {
    csrf: Option<String>,
    id: u64,
    choice: String,
    back: Option<String>,
}

pub(in super::super) async fn answer(
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
        .pipeline()
        .consent()
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
    match ui.pipeline().consent().answer_listed(form.id, choice).await {
        Ok(what) => ui.flash(&back, format!("Answered: {what}."), true),
        Err(e) => ui.flash(&back, e.to_string(), false),
    }
}

#[derive(Debug, Deserialize)]
pub(in super::super) struct GrantForm {
    csrf: Option<String>,
    caller: String,
    app: String,
    #[serde(default)]
    tool: String,
}

pub(in super::super) async fn grant(
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
    ui.pipeline().consent().remember(caller, app, tool, None);
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
pub(in super::super) struct RevokeForm {
    csrf: Option<String>,
    caller: String,
    app: String,
    tool: String,
}

pub(in super::super) async fn revoke(
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
        .pipeline()
        .consent()
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
