//! `call <app> <tool> [json]`: one tool call through the same pipeline the MCP server
//! uses. The result goes to stdout as JSON; a failure prints the error object
//! (`{code, message, data}`) to stderr and exits 1.

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
    let life = match Lifecycle::new(ctx.into_gateway()) {
        Ok(life) => life,
        Err(e) => {
            return fail(&GatewayError::new(
                Code::AutomationFailed,
                format!("cannot start: {e}"),
            ));
        }
    };
    let gateway = life.gateway().clone();
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
        let origin = crate::pipeline::Origin {
            caller: crate::consent::Caller::cli(),
            prompter: None,
        };
        gateway
            .pipeline
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
    let _ = writeln!(std::io::stderr(), "{text}");
    ExitCode::FAILURE
}
