//! `call <app> <tool> [json]`: one tool call through the same pipeline the MCP server
//! uses. stdout gets JSON either way: the result (exit 0), or the error object
//! (`{code, message, data}`, exit 1) — a script reads one place. A failure also says
//! its message and way out in one line on stderr, for a person at a terminal.

use std::io::Write;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use super::Context;
use crate::error::{Code, GatewayError};
use crate::gateway::Lifecycle;

pub(super) fn run(ctx: Context, app: &str, tool: &str, args: Option<&str>) -> ExitCode {
    let args = match args.map(serde_json::from_str::<serde_json::Value>) {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(e)) => {
            return fail(&GatewayError::new(
                Code::InvalidParams,
                format!("the arguments are not JSON: {e}"),
            ));
        }
    };
    let life = match ctx
        .into_gateway()
        .map_err(|e| e.to_string())
        .and_then(|g| Lifecycle::for_one_client(g).map_err(|e| e.to_string()))
    {
        Ok(life) => life,
        Err(e) => {
            return fail(&GatewayError::new(
                Code::AutomationFailed,
                format!("cannot start: {e}"),
            ));
        }
    };
    let gateway = life.gateway().clone();
    if let Err(e) = life.block_on(gateway.open_store()) {
        return fail(&e.into());
    }
    let outcome = life.block_on(async {
        let scan = gateway.clone();
        tokio::task::spawn_blocking(move || scan.rescan())
            .await
            .map_err(|e| GatewayError::new(Code::AutomationFailed, e.to_string()))?;
        let cancel = CancellationToken::new();
        let on_signal = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                on_signal.cancel();
            }
        });
        // A person at a terminal can answer an agent's permission requests.
        let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin())
            && std::io::IsTerminal::is_terminal(&std::io::stderr());
        let origin = crate::pipeline::Origin {
            caller: crate::identity::Caller::cli(),
            prompter: interactive
                .then(|| std::sync::Arc::new(Terminal) as crate::consent::SharedPrompter),
            client: None,
            trace: None,
            within: None,
        };
        gateway
            .pipeline()
            .call(app, tool, args, cancel, None, &origin)
            .await
    });
    drop(life);
    match outcome {
        Ok(o) => {
            let mut out = std::io::stdout().lock();
            let _ = serde_json::to_writer_pretty(&mut out, &o.value);
            let _ = out.write_all(b"\n");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn fail(error: &GatewayError) -> ExitCode {
    let text = serde_json::to_string_pretty(&error.to_json()).expect("JSON values serialize");
    let _ = writeln!(std::io::stdout(), "{text}");
    let _ = writeln!(
        std::io::stderr(),
        "aai-gateway: {}: {}",
        error.code.message(),
        error.explain()
    );
    ExitCode::FAILURE
}

/// Asks at the terminal (stderr for the question, stdin for the answer): what a one-shot
/// `call` offers when an agent asks for a permission mid-call. An answer is for this
/// call only; the command line keeps no grants.
#[derive(Debug)]
struct Terminal;

impl crate::consent::Prompter for Terminal {
    fn ask<'a>(
        &'a self,
        question: &'a crate::consent::Question,
    ) -> std::pin::Pin<Box<dyn Future<Output = crate::consent::Reply> + Send + 'a>> {
        let text = question.text();
        Box::pin(async move {
            let answer = tokio::task::spawn_blocking(move || {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "{text}\nAllow it? [y/N] ");
                let _ = err.flush();
                drop(err);
                let mut line = String::new();
                std::io::BufRead::read_line(&mut std::io::stdin().lock(), &mut line).map(|_| line)
            })
            .await;
            match answer {
                Ok(Ok(line)) if matches!(line.trim(), "y" | "Y" | "yes" | "Yes") => {
                    crate::consent::Reply::Chosen(crate::consent::Choice::Once)
                }
                Ok(Ok(_)) => crate::consent::Reply::Declined,
                Ok(Err(e)) => crate::consent::Reply::Unavailable(e.to_string()),
                Err(e) => crate::consent::Reply::Unavailable(e.to_string()),
            }
        })
    }
}
