//! `--scan [--json]`: what the gateway would serve, and what is wrong with the rest.
//!
//! JSON shape (docs/design.md, CLI):
//! `{"apps":[{"id","name","description","aliases","version","source","bindings":
//! [{"platform","type","usable","tools":[names],"source"}]}],
//! "diagnostics":[{"source","pointer","severity","message"}]}`.

use std::io::Write;
use std::process::ExitCode;

use std::path::Path;

use aai_descriptor::Platform;
use serde::Serialize;

use super::Context;
use super::table::Table;
use crate::catalog::{self, Catalog};
use crate::text::count;

pub(super) fn run(ctx: &Context, as_json: bool) -> ExitCode {
    let catalog = load(ctx);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = if as_json {
        serde_json::to_writer_pretty(&mut out, &ScanJson::new(ctx, &catalog))
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
    } else {
        out.write_all(render(ctx, &catalog).as_bytes())
    };
    let _ = out.flush();
    ExitCode::SUCCESS
}

/// What the server would load: every search dir and the built-ins, with the ids local
/// descriptors used in earlier runs as the server reads them (nothing is created when
/// there is no state file yet), and the user's changes to tools.
pub(super) fn load(ctx: &Context) -> Catalog {
    let file = crate::consent::state::State::file_in(&ctx.home);
    let reserved = if file.exists() {
        crate::consent::state::State::open(&file)
            .and_then(|s| s.local_ids())
            .unwrap_or_default()
    } else {
        Default::default()
    };
    let mut catalog = catalog::load(&ctx.search_dirs(), &reserved);
    // Tools as agents see them, with the user's changes (config `apps.<id>.tools`).
    let apps = catalog.apps.iter_mut().map(|l| &mut l.app);
    let unapplied =
        crate::overrides::apply_all(|id| ctx.config.apps.get(id).map(|a| &a.tools), apps);
    catalog.diagnostics.extend(unapplied);
    catalog
}

/// The `--scan --json` object, serialized straight from the catalog.
#[derive(Serialize)]
pub(crate) struct ScanJson<'a> {
    apps: Vec<AppJson<'a>>,
    diagnostics: Vec<&'a aai_descriptor::Diagnostic>,
}

#[derive(Serialize)]
struct AppJson<'a> {
    id: &'a str,
    name: &'a str,
    description: &'a str,
    aliases: &'a [String],
    version: Option<&'a str>,
    source: &'a Path,
    bindings: Vec<BindingJson<'a>>,
}

#[derive(Serialize)]
struct BindingJson<'a> {
    platform: Platform,
    #[serde(rename = "type")]
    kind: &'static str,
    usable: bool,
    tools: Vec<&'a str>,
    source: &'a Path,
}

impl<'a> ScanJson<'a> {
    pub(crate) fn new(ctx: &'a Context, catalog: &'a Catalog) -> ScanJson<'a> {
        let apps = catalog
            .apps
            .iter()
            .map(|loaded| {
                let app = &loaded.app;
                AppJson {
                    id: &app.id,
                    name: app.name.resolve(ctx.locale.as_deref()),
                    description: &app.description,
                    aliases: &app.aliases,
                    version: app.version.as_deref(),
                    source: loaded.source(),
                    bindings: app
                        .bindings
                        .iter()
                        .zip(&loaded.binding_sources)
                        .map(|(b, source)| BindingJson {
                            platform: b.platform,
                            kind: b.executor.kind().as_str(),
                            usable: ctx.host.can_run(b) && missing_command(b, source).is_none(),
                            tools: b.tools.iter().map(|t| t.name.as_str()).collect(),
                            source,
                        })
                        .collect(),
                }
            })
            .collect();
        ScanJson {
            apps,
            diagnostics: ctx
                .config_warnings
                .iter()
                .chain(&catalog.diagnostics)
                .collect(),
        }
    }
}

fn render(ctx: &Context, catalog: &Catalog) -> String {
    let mut table = Table::new(&[
        "APP", "NAME", "PLATFORM", "TYPE", "USABLE", "TOOLS", "SOURCE",
    ]);
    let mut usable_apps = 0;
    let mut problems = Vec::new();
    for loaded in &catalog.apps {
        let app = &loaded.app;
        let mut any_usable = false;
        for (i, (b, source)) in app.bindings.iter().zip(&loaded.binding_sources).enumerate() {
            let missing = missing_command(b, source);
            let usable = ctx.host.can_run(b) && missing.is_none();
            if let Some(command) = missing {
                problems.push(format!(
                    "{}: not usable here: its command `{command}` is not found{} (nothing was run to look)",
                    app.id,
                    if command.contains('/') { "" } else { " on PATH" }
                ));
            }
            any_usable |= usable;
            let (id, name) = if i == 0 {
                (
                    app.id.clone(),
                    app.name.resolve(ctx.locale.as_deref()).to_owned(),
                )
            } else {
                (String::new(), String::new())
            };
            table.row(vec![
                id,
                name,
                b.platform.as_str().to_owned(),
                b.executor.kind().as_str().to_owned(),
                if usable { "yes" } else { "no" }.to_owned(),
                tool_list(b.tools.iter().map(|t| t.name.as_str())),
                source.display().to_string(),
            ]);
        }
        usable_apps += usize::from(any_usable);
    }
    let mut out = String::new();
    if catalog.apps.is_empty() {
        out.push_str(&format!(
            "No apps found. Put descriptors in {}/<appId>/aai.json (see README).\n",
            ctx.home.display()
        ));
    } else {
        out.push_str(&table.render());
    }
    let all = || ctx.config_warnings.iter().chain(&catalog.diagnostics);
    let errors = all().filter(|d| d.is_error()).count();
    let warnings = all().count() - errors;
    out.push_str(&format!(
        "\n{} ({usable_apps} usable here) from {}; {}, {}, {}\n",
        count(catalog.apps.len(), "app", "apps"),
        count(catalog.files, "file", "files"),
        count(errors, "error", "errors"),
        count(warnings, "warning", "warnings"),
        count(problems.len(), "command not found", "commands not found"),
    ));
    for d in all() {
        out.push_str(&format!("{d}\n"));
    }
    for p in problems {
        out.push_str(&format!("{p}\n"));
    }
    out
}

/// Tool names, cut after about 40 columns with a count of the rest.
fn tool_list<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> String {
    let total = names.len();
    let mut out = String::new();
    for (shown, name) in names.enumerate() {
        if !out.is_empty() && out.len() + name.len() > 40 {
            return format!("{out}, … (+{})", total - shown);
        }
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(name);
    }
    out
}

/// The command a binding starts (an adapter, an agent, a downstream server over stdio),
/// when it cannot be found: a path (relative ones from the descriptor's folder) that is
/// not an executable file, or a bare name on no folder of `PATH`. Nothing is run: a
/// command that downloads what it runs (`npx`, `uvx`) is found when the launcher is.
fn missing_command(binding: &aai_descriptor::Binding, source: &Path) -> Option<String> {
    use aai_descriptor::{Executor, McpServer};
    let command = match &binding.executor {
        Executor::Stdio(p) | Executor::Acp(p) | Executor::Mcp(McpServer::Stdio(p)) => &p.command,
        _ => return None,
    };
    let found = if command.contains('/') || command.contains(std::path::MAIN_SEPARATOR) {
        let path = crate::pipeline::folder_of(source).join(command);
        executable(&path)
    } else {
        crate::host::on_path(command).is_some()
    };
    (!found).then(|| command.clone())
}

/// Whether `path` is a file this user may run.
fn executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}
