//! `aai_run {script, input?}`: a script that calls tools ([`crate::workflow`]), answered
//! as one result: the returned value, the log and every call it made.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use serde_json::{Map, Value};

use super::call::asking;
use super::progress::progress_sink;
use super::rounds::Round;
use super::{Server, invalid};
use crate::error::GatewayError;
use crate::exec::Progress;
use crate::workflow::{CallNote, Report, Script};

/// Longest script taken.
const MAX_SCRIPT: usize = 256 * 1024;

impl Server {
    /// `aai_run`: the script's calls go through the pipeline as the caller's; progress
    /// after each call.
    pub(super) async fn run(
        &self,
        args: &Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
        round: Round<'_>,
    ) -> Result<CallToolResponse, GatewayError> {
        let script = read_script(args)?;
        let caller = self.caller(ctx);
        let (elicits, round_trips) = asking(ctx);
        let progress = progress_sink(ctx);
        let on_call = progress.as_ref().map(|p| {
            let sink = p.sink();
            let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            Arc::new(move |note: &CallNote| {
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                sink(Progress {
                    progress: n as f64,
                    total: None,
                    message: Some(format!(
                        "call {n}: {} {}: {}",
                        note.app, note.tool, note.status
                    )),
                });
            }) as crate::workflow::OnCall
        });
        let limits = self.gateway.config().run_limits.clone();
        if !round_trips {
            let origin = self.session_origin(caller, elicits, ctx);
            let report = crate::workflow::run(
                &self.pipeline,
                script,
                &limits,
                ctx.ct.clone(),
                on_call,
                &origin,
            )
            .await;
            if let Some(progress) = &progress {
                progress.flush().await;
            }
            return Ok(run_result(&report).into());
        }
        // A 2026-07-28 client: each consent question is a round of this `aai_run` call.
        let pipeline = self.pipeline.clone();
        self.many_in_rounds(
            "run",
            ctx,
            round,
            progress.as_ref(),
            move |origin, cancel| async move {
                let report =
                    crate::workflow::run(&pipeline, script, &limits, cancel, on_call, &origin)
                        .await;
                Ok(run_result(&report))
            },
        )
        .await
    }
}

fn read_script(args: &Map<String, Value>) -> Result<Script, GatewayError> {
    let source = match args.get("script") {
        Some(Value::String(s)) if !s.trim().is_empty() => s,
        Some(Value::String(_)) | None => return Err(invalid("script", "`script` is required")),
        Some(_) => return Err(invalid("script", "`script` must be a string")),
    };
    if source.len() > MAX_SCRIPT {
        return Err(invalid(
            "script",
            &format!(
                "`script` is {} KiB; a script may be at most {} KiB",
                source.len() / 1024,
                MAX_SCRIPT / 1024
            ),
        ));
    }
    Ok(Script {
        source: source.clone(),
        input: args.get("input").cloned().unwrap_or(Value::Null),
        atomic: atomic(args)?,
    })
}

/// `atomic`: a boolean, false when left out (also read by `aai_batch`).
pub(super) fn atomic(args: &Map<String, Value>) -> Result<bool, GatewayError> {
    match args.get("atomic") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid("atomic", "`atomic` must be true or false")),
    }
}

/// The report as a tool result: the JSON as text and as `structuredContent`, marked
/// `isError` when the run failed (the calls it made are in it either way).
fn run_result(report: &Report) -> CallToolResult {
    let json = report.to_json();
    let text = serde_json::to_string_pretty(&json).unwrap_or_default();
    let mut result = if report.outcome.is_ok() {
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(json);
    result
}
