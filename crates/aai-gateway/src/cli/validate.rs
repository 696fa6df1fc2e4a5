//! `validate <path>… [--json]`: check descriptors without loading the rest of the world.
//!
//! Directories are searched like a config `scanPaths` entry. Exit status 1 when any file
//! has an error (warnings alone pass), 0 otherwise.
//!
//! A file of the access form (the reference gateway's 2.0) may name no app id: it is read
//! as the catalog reads it, with the id of its place (`catalog::fallback_id`: the folder of
//! `<id>/aai.json`, else the file's name without `.json`), and the output says so.
//!
//! An app the user changed tools of (config `apps.<id>.tools`, when the config can be
//! read) is shown with each changed tool as agents see it next to the app's own
//! definition ([`crate::overrides::summary`]); an override that cannot be applied is an
//! error of `config.json`, and so is a config the gateway would not start with.
//!
//! `validate NEW --against OLD`: also the version rules of docs/descriptors.md, Versions
//! (`aai_descriptor::versions`): each change with the bump it needs; exit status 1 when the
//! new version is not bumped enough.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use aai_descriptor::{Diagnostic, Sink};
use serde_json::json;

use crate::catalog::{self, SearchDir, SourceKind};

struct Checked {
    path: PathBuf,
    app: Option<(String, &'static str, usize)>,
    /// The app id is the file's place's: the file names none.
    id_from_place: bool,
    diagnostics: Vec<Diagnostic>,
    /// Each tool the user changed: the name agents see, and what changed.
    changed: Vec<(String, String)>,
}

/// The tools' overrides of config `apps`, by app id.
pub(super) type Overrides = BTreeMap<String, BTreeMap<String, crate::overrides::ToolOverride>>;

/// The overrides of the config `file` (none when there is none), or its errors: a config
/// the gateway would not start with fails validation too.
pub(super) fn overrides_in(file: &Path, explicit: bool) -> Result<Overrides, Vec<Diagnostic>> {
    let (config, _) = crate::config::Config::load(file, explicit)?;
    Ok(config
        .apps
        .into_iter()
        .filter(|(_, a)| !a.tools.is_empty())
        .map(|(id, a)| (id, a.tools))
        .collect())
}

pub(super) fn run(
    paths: &[PathBuf],
    as_json: bool,
    config: Result<Overrides, Vec<Diagnostic>>,
) -> ExitCode {
    let mut checked = Vec::new();
    let overrides = &match config {
        Ok(overrides) => overrides,
        Err(diagnostics) => {
            // Shown as a file of its own: the gateway would not start with it.
            checked.push(Checked {
                path: diagnostics
                    .first()
                    .map(|d| PathBuf::from(&d.source))
                    .unwrap_or_default(),
                app: None,
                id_from_place: false,
                diagnostics,
                changed: Vec::new(),
            });
            Overrides::new()
        }
    };
    for path in paths {
        if path.is_dir() {
            let dir = SearchDir {
                kind: SourceKind::Config,
                dir: path.clone(),
                layout: catalog::Layout::Mixed,
            };
            let files = catalog::scan_files(&dir);
            if files.is_empty() {
                checked.push(missing(path, "no descriptor files in this directory"));
            }
            checked.extend(files.iter().map(|f| check(f, overrides)));
        } else {
            checked.push(check(path, overrides));
        }
    }
    let failed = checked
        .iter()
        .any(|c| c.diagnostics.iter().any(Diagnostic::is_error));
    let text = if as_json {
        let files: Vec<_> = checked
            .iter()
            .map(|c| {
                json!({
                    "path": c.path,
                    "valid": c.app.is_some(),
                    "app": c.app.as_ref().map(|a| &a.0),
                    "idFromPlace": c.id_from_place,
                    "dialect": c.app.as_ref().map(|a| a.1),
                    "tools": c.app.as_ref().map(|a| a.2),
                    "changed": c.changed.iter().map(|(tool, what)| json!({"tool": tool, "changed": what})).collect::<Vec<_>>(),
                    "diagnostics": c.diagnostics,
                })
            })
            .collect();
        let mut s = serde_json::to_string_pretty(&json!({ "valid": !failed, "files": files }))
            .expect("JSON values serialize");
        s.push('\n');
        s
    } else {
        let mut out = String::new();
        for c in &checked {
            match &c.app {
                Some((id, dialect, tools)) => out.push_str(&format!(
                    "ok      {} ({id}, {dialect}, {})\n",
                    c.path.display(),
                    crate::text::count(*tools, "tool", "tools")
                )),
                None => out.push_str(&format!("invalid {}\n", c.path.display())),
            }
            if let Some((id, ..)) = c.app.as_ref().filter(|_| c.id_from_place) {
                out.push_str(&format!(
                    "  the file names no app id: the gateway gives it `{id}`, the name of {} (write `app.id` to choose another)\n",
                    if c.path.file_name().is_some_and(|n| n == "aai.json") {
                        "its folder"
                    } else {
                        "the file without `.json`"
                    }
                ));
            }
            for (tool, what) in &c.changed {
                out.push_str(&format!("  `{tool}` as config.json changes it: {what}\n"));
            }
            for d in &c.diagnostics {
                out.push_str(&format!("  {d}\n"));
            }
        }
        out
    };
    let _ = std::io::stdout().write_all(text.as_bytes());
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `validate NEW --against OLD`.
pub(super) fn against(paths: &[PathBuf], old: &Path, as_json: bool) -> ExitCode {
    let [new] = paths else {
        eprintln!(
            "error: --against compares one descriptor file with its previous release; give one file"
        );
        return ExitCode::from(2);
    };
    let (older, newer) = (read_app(old), read_app(new));
    let (older, newer) = match (older, newer) {
        (Ok(o), Ok(n)) => (o, n),
        (o, n) => {
            for (path, result) in [(old, o), (new.as_path(), n)] {
                if let Err(diagnostics) = result {
                    eprintln!("invalid {}", path.display());
                    for d in diagnostics {
                        eprintln!("  {d}");
                    }
                }
            }
            return ExitCode::FAILURE;
        }
    };
    let report = aai_descriptor::versions::compare(&older, &newer);
    let text = if as_json {
        let mut s = serde_json::to_string_pretty(&json!({
            "enough": report.enough(),
            "needed": report.needed,
            "made": report.made,
            "old": report.versions.0,
            "new": report.versions.1,
            "problem": report.problem,
            "changes": report.changes,
        }))
        .expect("JSON values serialize");
        s.push('\n');
        s
    } else {
        let mut out = String::new();
        for c in &report.changes {
            out.push_str(&format!("{:<6} {}\n", c.bump.to_string(), c.what));
        }
        if report.changes.is_empty() {
            out.push_str("no changes that agents can see\n");
        }
        let (from, to) = &report.versions;
        match &report.problem {
            Some(why) => out.push_str(&format!("error: {why}\n")),
            None if report.enough() => out.push_str(&format!(
                "ok: {from} → {to} is a {} bump; the changes need {}\n",
                report.made, report.needed
            )),
            None => out.push_str(&format!(
                "error: the changes need a {} bump, but {from} → {to} is {}\n",
                report.needed,
                if report.made == aai_descriptor::versions::Bump::None {
                    "no bump".to_owned()
                } else {
                    format!("a {} bump", report.made)
                }
            )),
        }
        out
    };
    let _ = std::io::stdout().write_all(text.as_bytes());
    if report.enough() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The app `path` describes, or its diagnostics.
fn read_app(path: &Path) -> Result<aai_descriptor::App, Vec<Diagnostic>> {
    let checked = std::fs::read_to_string(path)
        .map_err(|e| missing(path, &format!("cannot read the file: {e}")).diagnostics)?;
    let parsed = parse(&checked, path);
    parsed.app.ok_or(parsed.diagnostics)
}

fn check(path: &Path, overrides: &Overrides) -> Checked {
    let text = match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => return missing(path, "the file is not UTF-8 text"),
        },
        Err(e) => return missing(path, &format!("cannot read the file: {e}")),
    };
    let mut parsed = parse(&text, path);
    let mut changed = Vec::new();
    if let Some((app, tools)) = parsed
        .app
        .as_mut()
        .and_then(|a| overrides.get(&a.id).map(|tools| (a, tools)))
    {
        let sink = Sink::new("config.json");
        crate::overrides::apply(app, tools, &sink);
        parsed.diagnostics.extend(sink.into_vec());
        changed = app
            .bindings
            .iter()
            .flat_map(|b| &b.tools)
            .filter_map(|t| Some((t.name.clone(), crate::overrides::summary(t)?)))
            .collect();
    }
    Checked {
        changed,
        path: path.to_owned(),
        id_from_place: parsed.id_from_origin,
        app: parsed.app.map(|a| {
            let dialect = match a.dialect {
                aai_descriptor::Dialect::Platforms => "platforms",
                aai_descriptor::Dialect::SnakeCase => "snake_case",
                aai_descriptor::Dialect::CamelCase => "camelCase",
                aai_descriptor::Dialect::Access => "access",
            };
            let tools = a.bindings.iter().map(|b| b.tools.len()).sum();
            (a.id, dialect, tools)
        }),
        diagnostics: parsed.diagnostics,
    }
}

/// Parses the file at `path` as the catalog would in a `scanPaths` folder.
fn parse(text: &str, path: &Path) -> aai_descriptor::Parsed {
    let id = catalog::fallback_id(path, catalog::Layout::Mixed);
    let origin = catalog::origin_of(id.as_deref());
    aai_descriptor::parse_with(text, &path.display().to_string(), &origin)
}

fn missing(path: &Path, message: &str) -> Checked {
    let sink = Sink::new(path.display().to_string());
    sink.error("", message);
    Checked {
        changed: Vec::new(),
        path: path.to_owned(),
        app: None,
        id_from_place: false,
        diagnostics: sink.into_vec(),
    }
}
