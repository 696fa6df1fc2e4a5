//! `--discover [--yes] [--force] [--all] [--json]`: the summary first, then write on
//! confirmation (a TTY prompt) or `--yes`. Progress goes to stderr.
//!
//! Where apps are found: on Linux the D-Bus session bus (`aai_author::dbus`); on macOS
//! the scriptable bundles under `/Applications` and `~/Applications` (their `.sdef`,
//! `aai_author::sdef`).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use super::Context;
use super::drafts::{self, Found, Plan, present};

/// Options of `--discover`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Options {
    pub yes: bool,
    pub force: bool,
    pub all: bool,
    pub json: bool,
}

impl From<Options> for super::drafts::Options {
    fn from(o: Options) -> Self {
        super::drafts::Options {
            yes: o.yes,
            force: o.force,
            json: o.json,
        }
    }
}

pub(super) fn run(ctx: &Context, opts: Options) -> ExitCode {
    let gathered = match crate::host::Host::current().os() {
        crate::host::Os::Macos => Ok(bundles(ctx, opts)),
        #[cfg(target_os = "linux")]
        crate::host::Os::Linux => bus(ctx, opts),
        other => Err(format!(
            "--discover knows no way to find apps on {}",
            other.as_str()
        )),
    };
    match gathered {
        Ok((found, not_running)) => {
            present(ctx, opts.into(), &found, &not_running, &mut |_| Ok(()))
        }
        Err(e) => fail(&e),
    }
}

/// The session bus's services, introspected.
#[cfg(target_os = "linux")]
fn bus(ctx: &Context, opts: Options) -> Result<(Vec<Found>, Vec<String>), String> {
    use aai_author::dbus as generate;
    let runtime = super::runtime()?;
    let names = match runtime.block_on(crate::catalog::bus::owned_names()) {
        Ok(n) => n,
        Err(e) => {
            return Err(format!(
                "cannot reach the D-Bus session bus ({e}). --discover finds apps on the desktop session's bus: run it inside your desktop session, or set DBUS_SESSION_BUS_ADDRESS (e.g. `unix:path=$XDG_RUNTIME_DIR/bus`); `aai-gateway import openapi|mcp` and `--generate` make descriptors without a bus."
            ));
        }
    };
    let activatable: Vec<String> = crate::catalog::builtin::session_bus_names()
        .into_iter()
        .filter(|n| !names.contains(n) && (opts.all || !generate::is_plumbing(n)))
        .collect();
    let candidates: Vec<&String> = names
        .iter()
        .filter(|n| opts.all || !generate::is_plumbing(n))
        .collect();
    let mut found = Vec::new();
    // Progress on one overwritten line, only where a person watches.
    let tty = std::io::stderr().is_terminal();
    for (i, service) in candidates.iter().enumerate() {
        if tty {
            eprint!(
                "\r\x1b[2Kintrospecting {}/{}: {service}",
                i + 1,
                candidates.len()
            );
        }
        let objects = runtime
            .block_on(crate::catalog::bus::describe_service(service, 200))
            .unwrap_or_default();
        let doc = generate::descriptor(service, &objects);
        let text = doc
            .as_ref()
            .map(|d| format!("{}\n", serde_json::to_string_pretty(d).expect("JSON")));
        let plan = match &text {
            // The built-in app for this name is richer than a generated one, and a file
            // on disk would shadow it.
            Some(_) if !opts.all && crate::catalog::builtin::watches(service) => Plan::BuiltIn,
            Some(t) => drafts::plan(&ctx.home.join(service.as_str()), t),
            None => Plan::Empty,
        };
        if tty && i + 1 == candidates.len() {
            eprint!("\r\x1b[2K");
        }
        found.push(Found {
            id: (*service).clone(),
            summary: doc.as_ref().map(generate::summary).unwrap_or_default(),
            text,
            plan,
            notes: Vec::new(),
            secrets: Vec::new(),
            file: None,
        });
    }
    Ok((found, activatable))
}

/// The scriptable app bundles under `/Applications` (re-rooted by `AAI_SYSTEM_ROOT`) and
/// `~/Applications`: a draft from each one's scripting definition. Nothing is launched.
fn bundles(ctx: &Context, opts: Options) -> (Vec<Found>, Vec<String>) {
    let mut dirs = vec![crate::catalog::paths::system_root().join("Applications")];
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        dirs.push(std::path::PathBuf::from(home).join("Applications"));
    }
    let builtin = crate::catalog::builtin::macos_ids();
    let mut found = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut apps: Vec<std::path::PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "app"))
            .collect();
        apps.sort();
        for app in apps {
            let Some(info) = bundle_info(&app) else {
                continue;
            };
            let Some(sdef) = &info.sdef else {
                continue; // not scriptable
            };
            let source = match std::fs::read_to_string(sdef) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("{}: {e}", sdef.display());
                    continue;
                }
            };
            let (text, summary, plan) = match aai_author::sdef::draft(&info.id, &info.name, &source)
            {
                Ok(Some(draft)) => {
                    let tools = draft.descriptor["platforms"]["macos"]["tools"]
                        .as_array()
                        .map_or(0, Vec::len);
                    let text = format!(
                        "{}\n",
                        serde_json::to_string_pretty(&draft.descriptor).expect("JSON")
                    );
                    let plan = if !opts.all && builtin.contains(&info.id) {
                        Plan::BuiltIn
                    } else {
                        drafts::plan(&ctx.home.join(&info.id), &text)
                    };
                    let summary = format!(
                        "{} from {} ({} left out)",
                        crate::text::count(tools, "tool", "tools"),
                        sdef.file_name().unwrap_or_default().to_string_lossy(),
                        crate::text::count(draft.skipped.len(), "command", "commands"),
                    );
                    (Some(text), summary, plan)
                }
                Ok(None) => (None, "no commands of its own".to_owned(), Plan::Empty),
                Err(e) => (None, e, Plan::Invalid),
            };
            found.push(Found {
                id: info.id,
                text,
                summary,
                plan,
                notes: Vec::new(),
                secrets: Vec::new(),
                file: None,
            });
        }
    }
    (found, Vec::new())
}

/// What a bundle's `Info.plist` (XML or binary) says.
struct BundleInfo {
    id: String,
    name: String,
    sdef: Option<std::path::PathBuf>,
}

fn bundle_info(app: &std::path::Path) -> Option<BundleInfo> {
    let info = plist::Value::from_file(app.join("Contents").join("Info.plist")).ok()?;
    let dict = info.as_dictionary()?;
    let text = |key: &str| dict.get(key).and_then(plist::Value::as_string);
    let id = text("CFBundleIdentifier")?.to_owned();
    let name = text("CFBundleName")
        .map(str::to_owned)
        .or_else(|| Some(app.file_stem()?.to_string_lossy().into_owned()))?;
    let resources = app.join("Contents").join("Resources");
    // `OSAScriptingDefinition` names the file (a plain name inside Resources only).
    let named = text("OSAScriptingDefinition")
        .filter(|f| !f.contains(['/', '\\']) && *f != ".." && *f != ".")
        .map(|f| resources.join(f))
        .filter(|p| p.is_file());
    let sdef = named.or_else(|| {
        let mut all: Vec<std::path::PathBuf> = std::fs::read_dir(&resources)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "sdef"))
            .collect();
        all.sort();
        all.into_iter().next()
    });
    Some(BundleInfo { id, name, sdef })
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "aai-gateway: {message}");
    ExitCode::from(2)
}
