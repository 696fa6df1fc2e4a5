//! `--discover [--yes] [--force] [--all] [--json]`: the summary first, then write on
//! confirmation (a TTY prompt) or `--yes`. Progress goes to stderr.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use serde_json::json;

use super::Context;
use super::table::Table;
use crate::catalog::generate::{self, Plan};

/// Options of `--discover`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Options {
    pub yes: bool,
    pub force: bool,
    pub all: bool,
    pub json: bool,
}

struct Found {
    service: String,
    text: Option<String>,
    summary: String,
    plan: Plan,
}

pub(super) fn run(ctx: &Context, opts: Options) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(&format!("cannot start: {e}")),
    };
    let names = match runtime.block_on(crate::catalog::bus::owned_names()) {
        Ok(n) => n,
        Err(e) => return fail(&format!("cannot reach the D-Bus session bus: {e}")),
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
            Some(t) => generate::plan(&ctx.home.join(service.as_str()), t),
            None => Plan::Empty,
        };
        if tty && i + 1 == candidates.len() {
            eprint!("\r\x1b[2K");
        }
        found.push(Found {
            service: (*service).clone(),
            summary: doc.as_ref().map(generate::summary).unwrap_or_default(),
            text,
            plan,
        });
    }
    let writable: Vec<&Found> = found
        .iter()
        .filter(|f| {
            matches!(f.plan, Plan::New | Plan::Update) || (opts.force && f.plan == Plan::Edited)
        })
        .collect();

    if !opts.json {
        let mut table = Table::new(&["SERVICE", "DESCRIPTOR", "PLAN"]);
        for f in &found {
            table.row(vec![
                f.service.clone(),
                f.summary.clone(),
                f.plan.as_str().to_owned(),
            ]);
        }
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "{}", table.render());
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
            match generate::write(&ctx.home.join(&f.service), text) {
                Ok(path) => written.push(path),
                Err(e) => {
                    return fail(&format!(
                        "cannot write the descriptor of {}: {e}",
                        f.service
                    ));
                }
            }
        }
    }
    let mut out = std::io::stdout().lock();
    if opts.json {
        let apps: Vec<_> = found
            .iter()
            .map(|f| json!({"service": f.service, "plan": format!("{:?}", f.plan).to_lowercase(), "summary": f.summary,
                            "file": ctx.home.join(&f.service).join("aai.json")}))
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
