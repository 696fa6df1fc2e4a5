//! `aai_batch`: many calls in one, each through the pipeline, read from the tool's
//! arguments and answered as one result.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use serde_json::{Map, Value, json};

use super::call::{asking, outcome_result};
use super::progress::progress_sink;
use super::rounds::Round;
use super::{Server, invalid};
use crate::error::GatewayError;
use crate::exec::Progress;

impl Server {
    /// `aai_batch`: every call through the pipeline; progress after each call ends.
    pub(super) async fn batch(
        &self,
        args: &Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
        round: Round<'_>,
    ) -> Result<CallToolResponse, GatewayError> {
        let (batch, labels) = read_batch(args)?;
        let caller = self.caller(ctx);
        let (elicits, round_trips) = asking(ctx);
        let progress = progress_sink(ctx);
        let on_done = progress.as_ref().map(|p| {
            let sink = p.sink();
            Arc::new(
                move |done: usize, total: usize, status: &crate::batch::Status| {
                    sink(Progress {
                        progress: done as f64,
                        total: Some(total as f64),
                        message: Some(format!(
                            "{done} of {total} calls done (the last: {})",
                            status.name()
                        )),
                    });
                },
            ) as crate::batch::OnDone
        });
        if !round_trips {
            let origin = self.session_origin(caller, elicits, ctx);
            let ran = self
                .pipeline
                .batch(batch, ctx.ct.clone(), on_done, &origin)
                .await?;
            if let Some(progress) = &progress {
                progress.flush().await;
            }
            return Ok(batch_result(&labels, ran).into());
        }
        // A 2026-07-28 client: each consent question is a round of this `aai_batch` call.
        let pipeline = self.pipeline.clone();
        self.many_in_rounds(
            "batch",
            ctx,
            round,
            progress.as_ref(),
            move |origin, cancel| async move {
                let ran = pipeline.batch(batch, cancel, on_done, &origin).await?;
                Ok(batch_result(&labels, ran))
            },
        )
        .await
    }
}

/// The batch `args` describe, with each call's `(app, tool)` as written (for the result).
/// A call that cannot be read fails alone (INVALID_PARAMS naming it); the others run.
fn read_batch(
    args: &Map<String, Value>,
) -> Result<(crate::batch::Batch, Vec<(String, String)>), GatewayError> {
    use crate::batch::{Batch, Call, Mode};
    let calls = match args.get("calls") {
        Some(Value::Array(calls)) => calls,
        Some(_) => {
            return Err(invalid(
                "calls",
                "`calls` must be an array of {app, tool, args}",
            ));
        }
        None => return Err(invalid("calls", "`calls` is required")),
    };
    let atomic = super::run::atomic(args)?;
    let mode = match args.get("mode") {
        None | Some(Value::Null) if atomic => Mode::Sequence,
        None | Some(Value::Null) => Mode::Parallel,
        Some(Value::String(m)) if m == "parallel" && atomic => {
            return Err(invalid(
                "mode",
                "an atomic batch runs in sequence: leave `mode` out or make it \"sequence\"",
            ));
        }
        Some(Value::String(m)) if m == "parallel" => Mode::Parallel,
        Some(Value::String(m)) if m == "sequence" => Mode::Sequence,
        Some(_) => {
            return Err(invalid(
                "mode",
                "`mode` must be \"parallel\" or \"sequence\"",
            ));
        }
    };
    let stop_on_error = match args.get("stopOnError") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(invalid(
                "stopOnError",
                "`stopOnError` must be true or false",
            ));
        }
    };
    let mut read = Vec::with_capacity(calls.len());
    let mut labels = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        let field = |key: &str| {
            call.get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let (app, tool) = (field("app"), field("tool"));
        labels.push((app.clone(), tool.clone()));
        let args_ok = call
            .get("args")
            .is_none_or(|a| a.is_object() || a.is_null());
        let problem = if !call.is_object() {
            Some(("", "each call must be an object {app, tool, args}"))
        } else if app.trim().is_empty() {
            Some(("app", "`app` must be a non-empty string"))
        } else if tool.trim().is_empty() {
            Some(("tool", "`tool` must be a non-empty string"))
        } else if !args_ok {
            Some(("args", "`args` must be an object"))
        } else {
            None
        };
        read.push(match problem {
            None => Ok(Call {
                app,
                tool,
                args: call.get("args").filter(|a| !a.is_null()).cloned(),
            }),
            Some((key, why)) => {
                let at = if key.is_empty() {
                    format!("calls/{i}")
                } else {
                    format!("calls/{i}/{key}")
                };
                Err(invalid(&at, &format!("call {i}: {why}")))
            }
        });
    }
    Ok((
        Batch {
            calls: read,
            mode,
            stop_on_error,
            atomic,
        },
        labels,
    ))
}

/// A batch's result: one line per call in the text, and in `structuredContent`
/// `{results: [{index, app, tool, status, result | error | reason}], ok, failed, skipped,
/// batch, undone?}` with each error in the shape of docs/design.md, Errors, and each
/// result as the `aai_exec` result it would be; `undone` says what became of the
/// completed calls of an atomic batch that did not finish.
fn batch_result(labels: &[(String, String)], ran: crate::batch::Ran) -> CallToolResult {
    let crate::batch::Ran {
        statuses,
        id,
        undone,
    } = ran;
    use crate::batch::Status;
    let (mut ok, mut failed, mut skipped) = (0, 0, 0);
    let mut lines = Vec::with_capacity(statuses.len());
    let mut results = Vec::with_capacity(statuses.len());
    for (index, ((app, tool), status)) in labels.iter().zip(statuses).enumerate() {
        let name = status.name();
        let mut item = json!({"index": index, "app": app, "tool": tool, "status": name});
        let line = match status {
            Status::Ok(outcome) => {
                let mut result = outcome_result(outcome);
                // Inside `structuredContent` this is data, not a result on the wire: it
                // carries no field of a protocol revision the session may not speak
                // (`resultType` is 2026-07-28's; rmcp strips it only from the top).
                result.result_type = None;
                let head = result
                    .content
                    .iter()
                    .find_map(|c| c.as_text().map(|t| t.text.clone()))
                    .unwrap_or_default();
                item["result"] = serde_json::to_value(&result).unwrap_or(Value::Null);
                crate::text::excerpt(head.trim(), 200)
            }
            Status::Failed(e) => {
                let line = format!(
                    "{}: {}",
                    e.code.name(),
                    crate::text::excerpt(&e.detail, 300)
                );
                item["error"] = e.to_json();
                line
            }
            Status::Skipped(why) => {
                item["reason"] = why.into();
                why.to_owned()
            }
            Status::Cut { bytes } => {
                let why = format!(
                    "[result left out: {bytes} bytes, past the {} MiB all results of a batch may hold; call the tool alone for it]",
                    crate::batch::RESULT_BUDGET >> 20
                );
                item["cut"] = true.into();
                item["reason"] = why.clone().into();
                why
            }
        };
        match name {
            "ok" => ok += 1,
            "error" => failed += 1,
            _ => skipped += 1,
        }
        lines.push(format!("{index}. {app} {tool}: {name}: {line}"));
        results.push(item);
    }
    let mut summary = format!(
        "{}: {ok} ok, {failed} failed, {skipped} skipped\n\n{}",
        crate::text::count(results.len(), "call", "calls"),
        lines.join("\n")
    );
    if let Some(undone) = &undone {
        summary.push_str("\n\nAtomic, and not every call succeeded: ");
        summary.push_str(&crate::rollback::summary(undone));
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(summary)]);
    let mut structured = json!({
        "results": results, "ok": ok, "failed": failed, "skipped": skipped, "batch": id,
    });
    if let Some(undone) = undone {
        structured["undone"] = json!(undone);
    }
    result.structured_content = Some(structured);
    result
}
