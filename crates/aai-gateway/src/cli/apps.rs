//! `apps list|enable|disable|remove|restore`: the user's side of what the gateway's own
//! app (`aai`) lets an agent do, through the same `manage` functions. A running gateway
//! sees each change at its next scan (the home is watched).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use serde_json::json;

use super::Context;
use super::table::{Table, printable};
use crate::manage::{EVERYONE, Manager, overlay, trash};

/// One `apps` command.
#[derive(Debug, clap::Subcommand)]
pub(super) enum AppsCommand {
    /// Every app, where it comes from and whom it is hidden from; then the trash.
    List {
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Hide an app (or one tool) from one client or from every client.
    Disable(Toggle),
    /// Show again what `disable` hid.
    Enable(Toggle),
    /// Move an app the gateway's home holds to the trash.
    Remove {
        /// App id.
        app: String,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
    },
    /// Bring back the last removal of an app from the trash.
    Restore {
        /// App id.
        app: String,
    },
}

/// Which app or tool, for whom.
#[derive(Debug, clap::Args)]
pub(super) struct Toggle {
    /// App id.
    app: String,
    /// Only this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only for this client (its `clientInfo.name`, as consent shows it); else everyone.
    #[arg(long)]
    client: Option<String>,
}

pub(super) fn run(ctx: &Context, command: AppsCommand) -> ExitCode {
    let manager = Manager::new(ctx.home.clone(), crate::catalog::builtin::host_platform());
    let result = match command {
        AppsCommand::List { json } => return list(ctx, json),
        AppsCommand::Disable(t) | AppsCommand::Enable(t) if t.app.is_empty() => {
            Err("an app id is required".to_owned())
        }
        AppsCommand::Disable(t) => toggle(&manager, true, &t),
        AppsCommand::Enable(t) => toggle(&manager, false, &t),
        AppsCommand::Remove { app, yes } => remove(ctx, &manager, &app, yes),
        AppsCommand::Restore { app } => apply(&manager, manager.restore(&app)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "aai-gateway: {}", printable(&e));
            ExitCode::from(2)
        }
    }
}

fn toggle(manager: &Manager, hide: bool, t: &Toggle) -> Result<ExitCode, String> {
    let client = t.client.as_deref().unwrap_or(EVERYONE);
    apply(
        manager,
        manager.visibility(hide, client, &t.app, t.tool.as_deref()),
    )
}

fn remove(ctx: &Context, manager: &Manager, app: &str, yes: bool) -> Result<ExitCode, String> {
    let catalog = super::scan::load(ctx);
    let loaded = catalog
        .apps
        .iter()
        .find(|l| l.app.id == app)
        .ok_or_else(|| format!("no app `{app}` (see `aai-gateway apps list`)"))?;
    let change = manager
        .remove(app, loaded.source())
        .map_err(|e| e.to_string())?;
    let _ = writeln!(std::io::stdout(), "{}", change.describe());
    let confirmed = yes || (std::io::stdin().is_terminal() && ask());
    if !confirmed {
        let _ = writeln!(
            std::io::stdout(),
            "Nothing moved; run again with --yes to remove it."
        );
        return Ok(ExitCode::SUCCESS);
    }
    apply(manager, Ok(change))
}

fn ask() -> bool {
    eprint!("Remove it? [y/N] ");
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).is_ok() && answer.trim().eq_ignore_ascii_case("y")
}

/// Does `change` (the user at the command line asked for it) and prints what was done.
fn apply(
    manager: &Manager,
    change: Result<crate::manage::Change, crate::manage::Error>,
) -> Result<ExitCode, String> {
    let change = change.map_err(|e| e.to_string())?;
    let text = change.describe().to_owned();
    let runtime = super::runtime()?;
    // No change of this command stores a credential (imports do, through the agent or
    // `import`): the store is never opened.
    let store = crate::auth::store::Store::memory();
    runtime
        .block_on(manager.apply(change, &store))
        .map_err(|e| e.to_string())?;
    let _ = writeln!(std::io::stdout(), "done: {text}");
    Ok(ExitCode::SUCCESS)
}

fn list(ctx: &Context, as_json: bool) -> ExitCode {
    let catalog = super::scan::load(ctx);
    let overlay = match overlay::read(&ctx.home) {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "aai-gateway: {e}");
            overlay::Overlay::default()
        }
    };
    let visibility = ctx
        .config
        .visibility
        .with(overlay.rules(), overlay.audience.clone());
    let trashed = trash::list(&ctx.home);
    let who = |c: &str| {
        if c == EVERYONE {
            "everyone".to_owned()
        } else {
            c.to_owned()
        }
    };
    let rows: Vec<(String, String, String, Vec<String>)> = catalog
        .apps
        .iter()
        .map(|l| {
            let tools: Vec<String> = l
                .app
                .bindings
                .iter()
                .flat_map(|b| b.tools.iter().map(|t| t.name.clone()))
                .collect();
            let mut hidden: Vec<String> = visibility
                .hidden(&l.app.id, &tools)
                .map(|(client, tool)| match tool {
                    None => who(client),
                    Some(t) => format!("{t} from {}", who(client)),
                })
                .collect();
            if let Some(only) = visibility.audience(&l.app.id) {
                let names: Vec<&str> = only.iter().map(String::as_str).collect();
                hidden.push(format!("all but {}", names.join(", ")));
            }
            (
                l.app.id.clone(),
                l.app.name.primary().to_owned(),
                l.source().display().to_string(),
                hidden,
            )
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if as_json {
        let apps: Vec<_> = rows
            .iter()
            .map(|(id, name, source, hidden)| {
                json!({"id": id, "name": name, "source": source, "hiddenFrom": hidden})
            })
            .collect();
        let body = json!({"apps": apps, "trash": trashed});
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&body).expect("JSON")
        );
        return ExitCode::SUCCESS;
    }
    let mut table = Table::new(&["APP", "NAME", "SOURCE", "HIDDEN FROM"]);
    for (id, name, source, hidden) in rows {
        table.row(vec![
            id,
            name,
            source,
            if hidden.is_empty() {
                "-".to_owned()
            } else {
                hidden.join("; ")
            },
        ]);
    }
    let _ = write!(out, "{}", table.render());
    if !trashed.is_empty() {
        let _ = writeln!(out, "\nIn the trash (`aai-gateway apps restore <app>`):");
        for t in &trashed {
            let _ = writeln!(
                out,
                "  {} (removed {}; was {})",
                t.app,
                crate::history::utc(t.removed_at_ms),
                t.origin.display()
            );
        }
    }
    ExitCode::SUCCESS
}
