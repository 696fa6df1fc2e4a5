//! `--generate <app> [--from FILE]`: a language model drafts the app's descriptor
//! (`aai_author::generate`, through `llm`), `validate` checks each answer, and the problems go
//! back to the model until an answer is valid or `generate.rounds` answers were asked for.
//! A valid draft is shown, then written like `--discover`'s (`--yes` or a TTY
//! confirmation; files you edited kept unless `--force`).
//!
//! The source: `--from FILE` (D-Bus XML, `.sdef`, OpenAPI or help text, told apart by
//! content); else, on Linux, the introspection of the session-bus name `<app>`; else the
//! `--help` output of the command `<app>`.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use super::Context;
use super::drafts::plan_valid;
use super::drafts::{self, Found};
use super::llm::{Chat, Message};
use crate::auth::Secret;
use crate::auth::store::Credential;
use aai_author::generate::{self as author, Source, SourceKind, Verdict};

/// The credential-store entry of the model service's key (`auth set aai-gateway.generate`).
pub(super) const KEY_ID: &str = "aai-gateway.generate";

/// Largest `--from` file read.
const MAX_FROM: u64 = 16 * 1024 * 1024;

pub(super) fn run(
    ctx: &Context,
    app: &str,
    from: Option<&Path>,
    opts: drafts::Options,
) -> ExitCode {
    let runtime = match super::runtime() {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let source = match runtime.block_on(gather(app, from)) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let settings = &ctx.config.generate;
    let store = match super::credential_store(ctx, &runtime) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let key = match runtime.block_on(store.get(KEY_ID)) {
        Ok(Some(Credential::ApiKey { value })) => Some(value),
        _ => std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty())
            .map(Secret::new),
    };
    let chat = Chat {
        base_url: settings.base_url.clone(),
        model: settings.model.clone(),
        key,
        timeout: settings.timeout,
    };
    let tty = std::io::stderr().is_terminal();
    let mut messages = author::first_messages(&source);
    let mut problems = Vec::new();
    for round in 1..=settings.rounds {
        say(&format!(
            "round {round}: asking {} for the descriptor of {} ({})",
            chat.model,
            source.id,
            source.kind.as_str()
        ));
        let mut shown = 0usize;
        let answer = runtime.block_on(chat.complete(&messages, &mut |n| {
            // On a terminal, a line that counts what has arrived.
            if tty && (n - shown >= 200 || shown == 0) {
                shown = n;
                eprint!("\r\x1b[2K  receiving… {n} characters");
            }
        }));
        if tty {
            eprint!("\r\x1b[2K");
        }
        let answer = match answer {
            Ok(a) => a,
            Err(e) => return fail(&e),
        };
        match author::check(&answer, &source.id) {
            Verdict::Valid {
                text,
                app,
                warnings,
            } => {
                say(&format!("round {round}: the descriptor is valid"));
                let tools: usize = app.bindings.iter().map(|b| b.tools.len()).sum();
                let summary = format!(
                    "{}: {} (drafted by {})",
                    app.name.resolve(None),
                    crate::text::count(tools, "tool", "tools"),
                    chat.model
                );
                let found = [Found {
                    plan: plan_valid(&ctx.home.join(&source.id), &text),
                    id: source.id.clone(),
                    text: Some(text),
                    summary,
                    notes: warnings,
                    secrets: Vec::new(),
                    file: None,
                }];
                return drafts::present(ctx, opts, &found, &[], &mut |_| Ok(()));
            }
            Verdict::Invalid(found) => {
                say(&format!(
                    "round {round}: {}: {}",
                    crate::text::count(found.len(), "problem", "problems"),
                    found.first().map(String::as_str).unwrap_or("")
                ));
                messages.push(Message {
                    role: "assistant",
                    content: answer,
                });
                messages.push(author::repair_message(&found));
                problems = found;
            }
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "aai-gateway: no valid descriptor after {}; nothing written. The last answer's problems:",
        crate::text::count(settings.rounds as usize, "round", "rounds")
    );
    for p in problems.iter().take(20) {
        let _ = writeln!(std::io::stderr(), "  {p}");
    }
    ExitCode::from(1)
}

/// What the model is shown about `app`.
async fn gather(app: &str, from: Option<&Path>) -> Result<Source, String> {
    if let Some(file) = from {
        // Capped as it is read: devices and pipes have no length to check first.
        let mut bytes = Vec::new();
        std::fs::File::open(file)
            .and_then(|f| {
                std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_FROM + 1), &mut bytes)
            })
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        if bytes.len() as u64 > MAX_FROM {
            return Err(format!(
                "{} is larger than {} MiB",
                file.display(),
                MAX_FROM / 1024 / 1024
            ));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("{} is not UTF-8 text", file.display()))?;
        return Ok(Source {
            kind: SourceKind::of_text(&text),
            id: author::app_id(app),
            origin: format!("the file {}", file.display()),
            text,
        });
    }
    #[cfg(target_os = "linux")]
    if app.contains('.')
        && crate::catalog::bus::session_names()
            .await
            .iter()
            .any(|n| n == app)
    {
        let objects = crate::catalog::bus::introspect_tree(app, 64)
            .await
            .map_err(|e| format!("cannot introspect `{app}`: {e}"))?;
        if objects.is_empty() {
            return Err(format!(
                "`{app}` has no interfaces of its own on the session bus"
            ));
        }
        let text = objects
            .iter()
            .map(|o| format!("<!-- object {} -->\n{}", o.path, o.xml.trim()))
            .collect::<Vec<_>>()
            .join("\n\n");
        return Ok(Source {
            kind: SourceKind::DbusIntrospection,
            id: app.to_owned(),
            origin: format!("the session bus name {app}"),
            text,
        });
    }
    help_text(app).await
}

/// `app --help`, run like every child (explicit environment, killed at the deadline).
async fn help_text(app: &str) -> Result<Source, String> {
    use crate::exec::process;
    let args = ["--help".to_owned()];
    let home = std::env::temp_dir();
    let spec = process::Spec {
        program: app,
        args: &args,
        env: &[],
        base_dir: &home,
        label: app,
    };
    let limits = process::Limits {
        deadline: Duration::from_secs(10),
        max_output: 256 * 1024,
        cancel: tokio_util::sync::CancellationToken::new(),
    };
    let output = process::run(&spec, &[], &limits).await.map_err(|e| {
        format!(
            "`{app}` is neither a name on the session bus nor a command that runs ({e}); give its description with --from FILE"
        )
    })?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    if text.trim().is_empty() {
        text = String::from_utf8_lossy(&output.stderr).into_owned();
    }
    if text.trim().is_empty() {
        return Err(format!(
            "`{app} --help` printed nothing; give its description with --from FILE"
        ));
    }
    let name = Path::new(app)
        .file_name()
        .map_or_else(|| app.to_owned(), |n| n.to_string_lossy().into_owned());
    Ok(Source {
        kind: SourceKind::Help,
        id: author::app_id(&name),
        origin: format!("the command `{app}`"),
        text,
    })
}

/// Progress on stderr (stdout is the table or JSON).
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "aai-gateway: {message}");
    ExitCode::from(2)
}
