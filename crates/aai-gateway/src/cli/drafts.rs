//! Commands that write descriptors (`--discover`, `--generate`, `import`) show what they would
//! write first, then write on `--yes` or a TTY confirmation; files the user edited are
//! kept unless `--force` (`aai_author::plan` decides; this module reads and writes).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;

use super::Context;
use super::table::{Table, printable};
pub(super) use aai_author::plan::Plan;

/// How to write (also the `import` subcommands' flags).
#[derive(Debug, Clone, Copy, clap::Args)]
pub(super) struct Options {
    /// Write without asking.
    #[arg(long)]
    pub yes: bool,
    /// Also overwrite descriptors you edited (and an existing `--output` file, where the
    /// command has one).
    #[arg(long)]
    pub force: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One descriptor that may be written.
pub(super) struct Found {
    /// App id (its folder under the home).
    pub id: String,
    /// The descriptor, when there is one.
    pub text: Option<String>,
    /// One line about it (never a secret).
    pub summary: String,
    /// What writing it would do.
    pub plan: Plan,
    /// What the user should know about it.
    pub notes: Vec<String>,
    /// Credential store entries (key, value) to store once it is written.
    pub secrets: Vec<(String, String)>,
    /// Write exactly this file instead of `$AAI_HOME/<id>/aai.json`.
    pub file: Option<PathBuf>,
}

impl Found {
    /// Where it goes.
    fn target(&self, home: &Path) -> PathBuf {
        self.file
            .clone()
            .unwrap_or_else(|| home.join(&self.id).join("aai.json"))
    }
}

/// Shows what was found, then writes what may be written (`before_write` runs first for
/// each file, and a failure stops there).
pub(super) fn present(
    ctx: &Context,
    opts: Options,
    found: &[Found],
    activatable: &[String],
    before_write: &mut dyn FnMut(&Found) -> Result<(), String>,
) -> ExitCode {
    let writable: Vec<&Found> = found
        .iter()
        .filter(|f| {
            matches!(f.plan, Plan::New | Plan::Update)
                || (opts.force && matches!(f.plan, Plan::Edited | Plan::Exists))
        })
        .collect();

    if !opts.json {
        let mut table = Table::new(&["APP", "DESCRIPTOR", "PLAN"]);
        for f in found {
            table.row(vec![
                f.id.clone(),
                f.summary.clone(),
                f.plan.as_str().to_owned(),
            ]);
        }
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "{}", table.render());
        for f in found {
            for note in &f.notes {
                let _ = writeln!(out, "note: {}: {}", printable(&f.id), printable(note));
            }
        }
        if !activatable.is_empty() {
            let _ = writeln!(
                out,
                "\nNot running (start them and run --discover again): {}",
                activatable.join(", ")
            );
        }
    }
    let confirmed = opts.yes
        || (!writable.is_empty()
            && !opts.json
            && std::io::stdin().is_terminal()
            && ask(writable.len()));
    let mut written = Vec::new();
    if confirmed {
        for f in &writable {
            let text = f.text.as_deref().expect("planned files have text");
            if let Err(e) = before_write(f) {
                return fail(&format!("{} was not written: {e}", f.id));
            }
            let wrote = match &f.file {
                Some(file) => write_file(file, text).map(|()| file.clone()),
                None => write(&ctx.home.join(&f.id), text),
            };
            match wrote {
                Ok(path) => written.push(path),
                Err(e) => {
                    return fail(&format!("cannot write the descriptor of {}: {e}", f.id));
                }
            }
        }
    }
    let mut out = std::io::stdout().lock();
    if opts.json {
        let apps: Vec<_> = found
            .iter()
            .map(|f| json!({"app": f.id, "notes": f.notes, "plan": format!("{:?}", f.plan).to_lowercase(), "summary": f.summary,
                            "file": f.target(&ctx.home)}))
            .collect();
        let body = json!({"apps": apps, "notRunning": activatable, "written": written});
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&body).expect("JSON")
        );
    } else if !written.is_empty() {
        for p in &written {
            let _ = writeln!(out, "wrote {}", p.display());
        }
    } else if !writable.is_empty() {
        let _ = writeln!(
            out,
            "\nNothing written; run again with --yes to write {}.",
            crate::text::count(writable.len(), "descriptor", "descriptors")
        );
    }
    ExitCode::SUCCESS
}

fn ask(n: usize) -> bool {
    eprint!(
        "Write {}? [y/N] ",
        crate::text::count(n, "descriptor", "descriptors")
    );
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).is_ok() && answer.trim().eq_ignore_ascii_case("y")
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "aai-gateway: {message}");
    ExitCode::from(2)
}

/// What writing `text` to `dir/aai.json` would do. A text that does not validate is
/// never written.
pub(super) fn plan(dir: &Path, text: &str) -> Plan {
    if let Err(diagnostics) = aai_author::plan::check(text) {
        for d in &diagnostics {
            tracing::warn!("generated descriptor for {}: {d}", dir.display());
        }
        return Plan::Invalid;
    }
    plan_valid(dir, text)
}

/// What writing `text`, already validated, to `dir/aai.json` would do.
pub(super) fn plan_valid(dir: &Path, text: &str) -> Plan {
    let current = std::fs::read_to_string(dir.join("aai.json")).ok();
    let recorded = std::fs::read_to_string(dir.join(".generated")).ok();
    aai_author::plan::plan(current.as_deref(), recorded.as_deref(), text)
}

/// Writes `text` to a file the user named (no fingerprint: the user owns it), through a
/// temporary file beside it.
fn write_file(file: &Path, text: &str) -> std::io::Result<()> {
    // Owner-only, like every descriptor the gateway writes (it may name a server's
    // command and the names of its secrets).
    crate::files::write_private(file, text.as_bytes())
}

/// Writes `text` and its fingerprint.
fn write(dir: &Path, text: &str) -> std::io::Result<PathBuf> {
    crate::manage::write_descriptor(dir, text)
}
