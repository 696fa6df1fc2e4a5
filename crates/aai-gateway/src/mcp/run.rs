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
                "`script` is {} bytes; a script may be at most {} ({} KiB)",
                source.len(),
                MAX_SCRIPT,
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

/// The report as a tool result, marked `isError` when the run failed: the whole report as
/// `structuredContent`; as text, what the model needs and no more (the point of a script
/// is to spend fewer tokens than its calls): the returned value as JSON (or the error),
/// the log, one line on the calls, and the failed calls and undos.
fn run_result(report: &Report) -> CallToolResult {
    let json = report.to_json();
    let text = run_text(report, &json);
    let mut result = if report.outcome.is_ok() {
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(json);
    result
}

fn run_text(report: &Report, json: &Value) -> String {
    use std::fmt::Write as _;
    let mut text = match (&report.outcome, json.get("error")) {
        (Ok(value), _) => value.to_string(),
        (Err(_), Some(error)) => {
            let field = |k: &str| error.get(k).and_then(Value::as_str).unwrap_or_default();
            let mut t = format!("{}: {}", field("code"), field("message"));
            if !field("stack").is_empty() {
                let _ = write!(t, "\n{}", field("stack"));
            }
            t
        }
        (Err(_), None) => String::new(),
    };
    if !report.log.is_empty() {
        let _ = write!(text, "\n\nlog:\n{}", report.log.join("\n"));
    }
    if report.log_dropped > 0 {
        let _ = write!(text, "\n({} more log lines left out)", report.log_dropped);
    }
    let failed: Vec<&CallNote> = report.calls.iter().filter(|c| c.status != "ok").collect();
    let _ = write!(
        text,
        "\n\n{}, {} failed; run {}",
        crate::text::count(report.calls.len(), "call", "calls"),
        failed.len(),
        report.id
    );
    for (i, call) in report
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.status != "ok")
    {
        let _ = write!(
            text,
            "\n{i}. {} {}: {}",
            call.app,
            call.tool,
            call.code.unwrap_or("error")
        );
    }
    if let Some(undone) = &report.undone {
        let _ = write!(text, "\n\nAtomic: {}", crate::rollback::summary(undone));
    }
    text
}
