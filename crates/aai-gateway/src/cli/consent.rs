//! `consent list | grant | revoke`: the "always allow" grants in `state.db`, or in the
//! shared PostgreSQL store when the config names one (`store`; the running replicas hear
//! of a change at once).

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

/// Where the grants are.
enum Grants {
    Local(State),
    Shared(
        std::sync::Arc<crate::store::Shared>,
        tokio::runtime::Runtime,
    ),
}

impl Grants {
    fn open(ctx: &Context) -> Result<Grants, String> {
        let Some(settings) = &ctx.config.store else {
            return State::open(&State::file_in(&ctx.home))
                .map(Grants::Local)
                .map_err(|e| e.to_string());
        };
        let shared = crate::store::Shared::without_key(settings).map_err(|e| e.to_string())?;
        let runtime = super::runtime()?;
        runtime
            .block_on(shared.migrate())
            .map_err(|e| e.to_string())?;
        Ok(Grants::Shared(shared, runtime))
    }

    fn grants(&self) -> Result<Vec<Grant>, String> {
        match self {
            Grants::Local(state) => state.grants().map_err(|e| e.to_string()),
            Grants::Shared(shared, rt) => rt
                .block_on(crate::consent::shared::grants(shared))
                .map_err(|e| e.to_string()),
        }
    }

    fn grant(&self, grant: &Grant) -> Result<(), String> {
        match self {
            Grants::Local(state) => state.grant(grant).map_err(|e| e.to_string()),
            Grants::Shared(shared, rt) => rt
                .block_on(crate::consent::shared::grant(shared, grant, || {}))
                .map_err(|e| e.to_string()),
        }
    }

    fn revoke(&self, app: &str, tool: Option<&str>, caller: Option<&str>) -> Result<usize, String> {
        match self {
            Grants::Local(state) => state.revoke(app, tool, caller).map_err(|e| e.to_string()),
            Grants::Shared(shared, rt) => rt
                .block_on(crate::consent::shared::revoke(shared, app, tool, caller))
                .map_err(|e| e.to_string()),
        }
    }
}

pub(super) fn run(ctx: Context, action: Action) -> ExitCode {
    let state = match Grants::open(&ctx) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let mut out = std::io::stdout().lock();
    match action {
        Action::List { json } => {
            let grants = match state.grants() {
                Ok(g) => g,
                Err(e) => return fail(&e),
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
                    definition: None,
                };
                if let Err(e) = state.grant(&grant) {
                    return fail(&e);
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
                // Tied to the tool as it is at its next call (`consent::fingerprint`).
                definition: None,
            };
            if let Err(e) = state.grant(&grant) {
                return fail(&e);
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
                Err(e) => fail(&e),
            }
        }
    }
}

/// What starting `app` means now (the sentence and the digest a grant is tied to), read
/// from its descriptor as the server would serve it. Nothing is started.
fn start_pin(ctx: Context, app: &str) -> Result<(String, String), String> {
    let gateway = crate::gateway::Gateway::new(ctx.config, ctx.home, ctx.locale, ctx.host);
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
            "`{}` starts nothing ahead of a call (it is not an adapter, an MCP server or an agent); grant its tools with --tool and --caller",
            entry.app.id
        )
    })?;
    Ok((start.describe(), start.pin))
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "aai-gateway: {message}");
    ExitCode::FAILURE
}
