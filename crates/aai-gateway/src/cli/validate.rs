//! `validate <path>… [--json]`: check descriptors without loading the rest of the world.
//!
//! Directories are searched like a config `scanPaths` entry. Exit status 1 when any file
//! has an error (warnings alone pass), 0 otherwise.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use aai_descriptor::{Diagnostic, Sink};
use serde_json::json;

use crate::catalog::{self, SearchDir, SourceKind};

struct Checked {
    path: PathBuf,
    app: Option<(String, &'static str, usize)>,
    diagnostics: Vec<Diagnostic>,
}

pub(super) fn run(paths: &[PathBuf], as_json: bool) -> ExitCode {
    let mut checked = Vec::new();
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
            checked.extend(files.iter().map(|f| check(f)));
        } else {
            checked.push(check(path));
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
                    "dialect": c.app.as_ref().map(|a| a.1),
                    "tools": c.app.as_ref().map(|a| a.2),
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

fn check(path: &Path) -> Checked {
    let text = match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => return missing(path, "the file is not UTF-8 text"),
        },
        Err(e) => return missing(path, &format!("cannot read the file: {e}")),
    };
    let parsed = aai_descriptor::parse(&text, &path.display().to_string());
    Checked {
        path: path.to_owned(),
        app: parsed.app.map(|a| {
            let dialect = match a.dialect {
                aai_descriptor::Dialect::Platforms => "platforms",
                aai_descriptor::Dialect::SnakeCase => "snake_case",
                aai_descriptor::Dialect::CamelCase => "camelCase",
            };
            let tools = a.bindings.iter().map(|b| b.tools.len()).sum();
            (a.id, dialect, tools)
        }),
        diagnostics: parsed.diagnostics,
    }
}

fn missing(path: &Path, message: &str) -> Checked {
    let sink = Sink::new(path.display().to_string());
    sink.error("", message);
    Checked {
        path: path.to_owned(),
        app: None,
        diagnostics: sink.into_vec(),
    }
}
