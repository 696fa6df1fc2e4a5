//! Batch calls (`aai_batch`): many tool calls in one request, each through the whole
//! pipeline (validation, consent, credentials, history), run in order or side by side with
//! bounded concurrency, one result per call.
//!
//! With `stopOnError`, the first failure stops calls from starting (they are reported
//! `skipped`); calls already running finish, since stopping one midway may leave half an
//! effect. Cancelling the batch cancels the running calls and skips the rest.

use std::sync::Arc;

use futures_util::StreamExt as _;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::{Code, GatewayError};
use crate::gateway::Gateway;
use crate::pipeline::{Origin, Outcome};

/// One call of a batch, as the client wrote it.
#[derive(Debug, Clone)]
pub struct Call {
    /// App id (or anything `aai_exec` takes).
    pub app: String,
    /// Tool name.
    pub tool: String,
    /// Arguments.
    pub args: Option<Value>,
}

/// In which order calls run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Side by side, at most `batch.concurrency` at once.
    Parallel,
    /// One after the other, in order.
    Sequence,
}

/// What became of one call.
#[derive(Debug)]
pub enum Status {
    /// It ran; its outcome.
    Ok(Outcome),
    /// It failed (or could not be read: `Err` of the parsing step).
    Failed(GatewayError),
    /// It did not start: why.
    Skipped(&'static str),
}

impl Status {
    /// `ok`, `error` (see [`Status::failed`]) or `skipped`.
    pub fn name(&self) -> &'static str {
        if self.failed() {
            "error"
        } else if matches!(self, Status::Skipped(_)) {
            "skipped"
        } else {
            "ok"
        }
    }

    /// Whether the call failed: an error, or a passed-on MCP result marked `isError`.
    pub fn failed(&self) -> bool {
        match self {
            Status::Failed(_) => true,
            Status::Ok(o) => o.mcp && o.value.get("isError") == Some(&Value::Bool(true)),
            Status::Skipped(_) => false,
        }
    }
}

/// A batch to run: each call already read, or why it could not be.
#[derive(Debug)]
pub struct Batch {
    /// The calls in the client's order.
    pub calls: Vec<Result<Call, GatewayError>>,
    /// In which order they run.
    pub mode: Mode,
    /// Stop starting calls after the first failure.
    pub stop_on_error: bool,
}

/// Called after each call ends: (calls done, calls in all, that call's status).
pub type OnDone = Arc<dyn Fn(usize, usize, &Status) + Send + Sync>;

impl Gateway {
    /// Runs `batch`; the statuses are in the calls' order. `cancel` stops the batch.
    /// Fails as a whole only when it has no calls or more than `batch.maxCalls`.
    pub async fn batch(
        self: &Arc<Self>,
        batch: Batch,
        cancel: CancellationToken,
        on_done: Option<OnDone>,
        origin: &Origin,
    ) -> Result<Vec<Status>, GatewayError> {
        let max = self.config.batch_max_calls;
        let total = batch.calls.len();
        if total == 0 {
            return Err(GatewayError::new(
                Code::InvalidParams,
                "`calls` is empty; give at least one {app, tool, args}",
            )
            .with("field", "/calls"));
        }
        if total > max {
            return Err(GatewayError::new(
                Code::InvalidParams,
                format!(
                    "`calls` has {total} calls; a batch takes at most {max} (config `batch.maxCalls`)"
                ),
            )
            .with("field", "/calls"));
        }
        let width = match batch.mode {
            Mode::Parallel => self.config.batch_concurrency,
            Mode::Sequence => 1,
        };
        // Stops calls from starting (after a failure with stopOnError, or on cancel).
        let stop = cancel.child_token();
        let done = std::sync::atomic::AtomicUsize::new(0);
        let run = |(index, call): (usize, Result<Call, GatewayError>)| {
            let (stop, cancel, on_done, done) = (&stop, &cancel, &on_done, &done);
            async move {
                let status = if stop.is_cancelled() {
                    Status::Skipped(if cancel.is_cancelled() {
                        "the batch was cancelled"
                    } else {
                        "an earlier call failed (stopOnError)"
                    })
                } else {
                    match call {
                        Err(e) => Status::Failed(e),
                        Ok(call) => {
                            match self
                                .call(
                                    &call.app,
                                    &call.tool,
                                    call.args,
                                    cancel.child_token(),
                                    None,
                                    origin,
                                )
                                .await
                            {
                                Ok(outcome) => Status::Ok(outcome),
                                Err(e) => Status::Failed(e),
                            }
                        }
                    }
                };
                if batch.stop_on_error && status.failed() {
                    stop.cancel();
                }
                let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                if let Some(on_done) = on_done {
                    on_done(n, total, &status);
                }
                (index, status)
            }
        };
        let mut statuses: Vec<(usize, Status)> =
            futures_util::stream::iter(batch.calls.into_iter().enumerate())
                .map(run)
                .buffer_unordered(width)
                .collect()
                .await;
        statuses.sort_by_key(|(index, _)| *index);
        Ok(statuses.into_iter().map(|(_, status)| status).collect())
    }
}
