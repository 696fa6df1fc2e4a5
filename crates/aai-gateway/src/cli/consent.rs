//! `consent list | grant | revoke`: the "always allow" grants in `state.db`.

use std::io::Write;
use std::process::ExitCode;

use super::Context;
use super::table::Table;
use crate::consent::state::{Grant, State};

/// What to do.
#[derive(Debug)]
pub(super) enum Action {
    /// Show the grants.
    List { json: bool },
    /// Always allow `caller` to run `tool` (every tool without one) of `app`; with
    /// `start`, always allow the app to start as its descriptor starts it now.
    Grant {
        app: String,
        tool: Option<String>,
        caller: Option<String>,
        start: bool,
    },
    /// Remove grants of `app` (of one tool / one caller when given).
    Revoke {
        app: String,
        tool: Option<String>,
        caller: Option<String>,
    },
}

pub(super) fn run(ctx: Context, action: Action) -> ExitCode {
    let state = match State::open(&State::file_in(&ctx.home)) {
        Ok(s) => s,
        Err(e) => return fail(&e.to_string()),
    };
    let mut out = std::io::stdout().lock();
    match action {
        Action::List { json } => {
            let grants = match state.grants() {
                Ok(g) => g,
                Err(e) => return fail(&e.to_string()),
            };
            if json {
                let body = serde_json::json!({ "grants": grants });
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&body).expect("JSON")
                );
            } else if grants.is_empty() {
                let _ = writeln!(out, "No grants: every call asks (consent.mode `prompt`).");
            } else {
                // A web app's grant holds only while the site shows the same certificate.
                let mut table =
                    Table::new(&["CALLER", "APP", "TOOL", "SITE CERTIFICATE (SHA-256)"]);
                for g in grants {
                    let tool = if g.tool == "*" {
                        "every tool".to_owned()
                    } else {
                        g.tool
                    };
                    let cert = g.cert.unwrap_or_else(|| "-".to_owned());
                    table.row(vec![g.caller, g.app, tool, cert]);
                }
                let _ = write!(out, "{}", table.render());
            }
            ExitCode::SUCCESS
        }
        Action::Grant {
            app,
            tool,
            caller,
            start,
        } => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            if start {
                let pin = match start_pin(ctx, &app) {
                    Ok(pin) => pin,
                    Err(why) => return fail(&why),
                };
                let grant = Grant {
                    caller: crate::consent::ANY_CALLER.to_owned(),
                    app: app.clone(),
                    tool: crate::consent::START.to_owned(),
                    cert: Some(pin.1),
                    granted_at: now,
                };
                if let Err(e) = state.grant(&grant) {
                    return fail(&e.to_string());
                }
                let _ = writeln!(out, "{app} may now {} (for every client)", pin.0);
            }
            let Some(caller) = caller else {
                return ExitCode::SUCCESS;
            };
            let grant = Grant {
                caller,
                app,
                tool: tool.unwrap_or_else(|| "*".to_owned()),
                cert: None,
                granted_at: now,
            };
            if let Err(e) = state.grant(&grant) {
                return fail(&e.to_string());
            }
            let what = if grant.tool == "*" {
                "every tool".to_owned()
            } else {
                format!("`{}`", grant.tool)
            };
            let _ = writeln!(out, "{} may now run {what} of {}", grant.caller, grant.app);
            ExitCode::SUCCESS
        }
        Action::Revoke { app, tool, caller } => {
            match state.revoke(&app, tool.as_deref(), caller.as_deref()) {
                Ok(n) => {
                    let _ = writeln!(out, "revoked {}", crate::text::count(n, "grant", "grants"));
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e.to_string()),
            }
        }
    }
}

/// What starting `app` means now (the sentence and the digest a grant is tied to), read
/// from its descriptor as the server would serve it. Nothing is started.
fn start_pin(ctx: Context, app: &str) -> Result<(String, String), String> {
    let gateway = ctx.into_gateway();
    gateway.rescan();
    let snapshot = gateway.registry_snapshot();
    let entry = snapshot
        .find(app)
        .ok_or_else(|| format!("no app `{app}` is served here (see `aai-gateway --scan`)"))?;
    let start = crate::exec::start::start_of(
        &entry.binding().executor,
        crate::pipeline::base_dir(entry),
    )
    .ok_or_else(|| {
        format!(
            "`{}` starts nothing ahead of a call (it is not an MCP server or an agent); grant its tools with --tool and --caller",
            entry.app.id
        )
    })?;
    Ok((start.describe(), start.pin))
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "aai-gateway: {message}");
    ExitCode::FAILURE
}
