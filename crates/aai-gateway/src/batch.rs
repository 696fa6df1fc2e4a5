//! Batch calls (`aai_batch`): many tool calls in one request, each through the whole
//! pipeline (validation, consent, credentials, history), run in order or side by side with
//! bounded concurrency, one result per call.
//!
//! With `stopOnError`, the first failure stops calls from starting (they are reported
//! `skipped`); calls already running finish, since stopping one midway may leave half an
//! effect. Cancelling the batch cancels the running calls and skips the rest.
//!
//! An atomic batch runs in sequence and stops at the first failure; then (or when it is
//! cancelled) its completed calls are undone, newest first ([`crate::rollback`]).
//!
//! The results of one batch add up to at most [`RESULT_BUDGET`] bytes (as JSON): a call
//! that finishes once the budget is spent still ran, but its result is left out
//! ([`Status::Cut`]), so that a hundred large results cannot make a reply of gigabytes.

use std::sync::Arc;

use futures_util::StreamExt as _;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::{Code, GatewayError};
use crate::pipeline::{Origin, Outcome, Pipeline, Within};
use crate::rollback::Step;
use crate::telemetry;

/// Why a batch was refused whole. `From<Error> for GatewayError` below gives the codes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No calls.
    #[error("`calls` is empty; give at least one {{app, tool, args}}")]
    Empty,
    /// More calls than `batch.maxCalls`.
    #[error("`calls` has {total} calls; a batch takes at most {max} (config `batch.maxCalls`)")]
    TooMany {
        /// Calls given.
        total: usize,
        /// The limit.
        max: usize,
    },
    /// A call of an atomic batch could not be read: nothing ran.
    #[error("call {index} cannot be read, so this atomic batch runs none of its calls: {why}")]
    Unreadable {
        /// Its place.
        index: usize,
        /// Why.
        why: String,
    },
    /// The task an atomic batch ran on ended without an answer (it panicked).
    #[error("the batch's task ended without an answer")]
    Lost,
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        match e {
            Error::Lost => GatewayError::new(Code::AutomationFailed, e.to_string()),
            Error::Unreadable { index, .. } => {
                GatewayError::new(Code::InvalidParams, e.to_string())
                    .with("field", format!("/calls/{index}"))
            }
            e => GatewayError::new(Code::InvalidParams, e.to_string()).with("field", "/calls"),
        }
    }
}

/// Most bytes (as JSON) the results of one batch may hold together.
pub(crate) const RESULT_BUDGET: usize = 16 * 1024 * 1024;

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
    /// It ran and succeeded, but its result (of `bytes` bytes) did not fit in what was
    /// left of the batch's [`RESULT_BUDGET`]; it is left out.
    Cut {
        /// The size of the result left out.
        bytes: usize,
    },
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
            Status::Skipped(_) | Status::Cut { .. } => false,
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
    /// Undo the completed calls unless all of them succeed (implies [`Mode::Sequence`]
    /// and `stop_on_error`).
    pub atomic: bool,
}

/// What a batch did.
#[derive(Debug)]
pub struct Ran {
    /// Each call's status, in the calls' order.
    pub statuses: Vec<Status>,
    /// The batch's id (`batch-…`: its calls' history records name it).
    pub id: String,
    /// For an atomic batch that did not finish: what became of each completed call's
    /// undo, newest first.
    pub(crate) undone: Option<Vec<crate::rollback::Undone>>,
}

/// Called after each call ends: (calls done, calls in all, that call's status).
pub(crate) type OnDone = Arc<dyn Fn(usize, usize, &Status) + Send + Sync>;

impl Pipeline {
    /// Runs `batch`; the statuses are in the calls' order. `cancel` stops the batch.
    /// Fails as a whole only when it has no calls or more than `batch.maxCalls`. Its
    /// calls are part of one batch ([`Within`]): each names it in its question and
    /// history record, under one span.
    pub async fn batch(
        &self,
        batch: Batch,
        cancel: CancellationToken,
        on_done: Option<OnDone>,
        origin: &Origin,
    ) -> Result<Ran, GatewayError> {
        let max = self.settings().batch_max_calls;
        let total = batch.calls.len();
        if total == 0 {
            return Err(Error::Empty.into());
        }
        if total > max {
            return Err(Error::TooMany { total, max }.into());
        }
        if batch.atomic
            && let Some((index, Err(e))) = batch.calls.iter().enumerate().find(|(_, c)| c.is_err())
        {
            return Err(Error::Unreadable {
                index,
                why: e.message(),
            }
            .into());
        }
        if !batch.atomic {
            return self.run_batch(batch, cancel, on_done, origin).await;
        }
        // An atomic batch finishes, and undoes, even when its request goes away.
        let (pipeline, origin) = (self.clone(), origin.clone());
        let token = cancel.clone();
        let work = async move { pipeline.run_batch(batch, cancel, on_done, &origin).await };
        crate::rollback::detached(work, &token)
            .await
            .unwrap_or_else(|| Err(Error::Lost.into()))
    }

    async fn run_batch(
        &self,
        batch: Batch,
        cancel: CancellationToken,
        on_done: Option<OnDone>,
        origin: &Origin,
    ) -> Result<Ran, GatewayError> {
        let total = batch.calls.len();
        let irreversible = if batch.atomic {
            let named = batch.calls.iter().flatten();
            self.irreversible(named.map(|c| (c.app.as_str(), c.tool.as_str())), origin)
                .await
        } else {
            Vec::new()
        };
        let within = Arc::new(Within::batch(batch.atomic, irreversible));
        let mut span =
            telemetry::Call::start_as(telemetry::BATCH, self.telemetry(), origin.trace.as_ref());
        span.span().set("aai.batch.id", within.id.clone());
        span.span().set("aai.batch.calls", total as i64);
        let origin = &Origin {
            within: Some(within.clone()),
            trace: span.span().context().cloned(),
            ..origin.clone()
        };
        let stop_on_error = batch.stop_on_error || batch.atomic;
        let width = match batch.mode {
            Mode::Parallel if !batch.atomic => self.settings().batch_concurrency,
            _ => 1,
        };
        let atomic = batch.atomic;
        let steps = std::sync::Mutex::new(Vec::new());
        // Stops calls from starting (after a failure with stopOnError, or on cancel).
        let stop = cancel.child_token();
        let done = std::sync::atomic::AtomicUsize::new(0);
        let spent = std::sync::atomic::AtomicUsize::new(0);
        let run = |(index, call): (usize, Result<Call, GatewayError>)| {
            let (stop, cancel, on_done, done, spent) = (&stop, &cancel, &on_done, &done, &spent);
            let steps = &steps;
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
                            let args = atomic.then(|| call.args.clone());
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
                                Ok(outcome) => {
                                    if let Some(args) = args
                                        && crate::rollback::value_of(&outcome).is_ok()
                                    {
                                        // No arguments given reads as `{}` for `/args` pointers.
                                        let args = args
                                            .unwrap_or_else(|| Value::Object(Default::default()));
                                        let plan = self
                                            .undo_plan(
                                                &call.app, &call.tool, &args, &outcome, origin,
                                            )
                                            .await;
                                        steps.lock().expect("steps lock").push(Step {
                                            index,
                                            app: crate::text::excerpt(&call.app, 200),
                                            tool: crate::text::excerpt(&call.tool, 200),
                                            plan,
                                        });
                                    }
                                    keep_within(outcome, spent)
                                }
                                Err(e) => {
                                    if atomic && cancel.is_cancelled() {
                                        // Stopped mid-call: it may have taken effect.
                                        let plan =
                                            self.stopped_plan(&call.app, &call.tool, origin).await;
                                        steps.lock().expect("steps lock").push(Step {
                                            index,
                                            app: crate::text::excerpt(&call.app, 200),
                                            tool: crate::text::excerpt(&call.tool, 200),
                                            plan,
                                        });
                                    }
                                    Status::Failed(e)
                                }
                            }
                        }
                    }
                };
                if stop_on_error && status.failed() {
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
        let statuses: Vec<Status> = statuses.into_iter().map(|(_, status)| status).collect();
        // All or nothing: a failed or skipped call undoes the completed ones.
        let finished = statuses
            .iter()
            .all(|s| matches!(s, Status::Ok(_) | Status::Cut { .. }) && !s.failed());
        let undone = if within.atomic && !finished {
            let steps = steps.into_inner().expect("steps lock");
            Some(self.roll_back(steps, origin).await)
        } else {
            None
        };
        let failed = statuses.iter().filter(|s| s.failed()).count();
        span.span().set("aai.batch.failed", failed as i64);
        span.finish(if failed == 0 {
            Ok(())
        } else {
            Err("BATCH_FAILED")
        });
        Ok(Ran {
            statuses,
            id: within.id.clone(),
            undone,
        })
    }
}

/// `outcome` as a batch keeps it: whole while the batch's results fit in
/// [`RESULT_BUDGET`] (`spent` counts what is kept so far), else left out. Dropped as soon
/// as it is measured, so a batch never holds more than the budget.
fn keep_within(outcome: Outcome, spent: &std::sync::atomic::AtomicUsize) -> Status {
    use std::sync::atomic::Ordering;
    let bytes = json_size(&outcome.value);
    let fits = spent
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
            (used + bytes <= RESULT_BUDGET).then_some(used + bytes)
        })
        .is_ok();
    if fits {
        Status::Ok(outcome)
    } else {
        Status::Cut { bytes }
    }
}

/// The length of `value` as JSON, counted without building the text.
fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_past_the_budget_are_left_out() {
        let spent = std::sync::atomic::AtomicUsize::new(0);
        let big = |mib: usize| Outcome {
            value: Value::String("x".repeat(mib * 1024 * 1024)),
            structured: false,
            mcp: false,
        };
        let kept: Vec<Status> = (0..5).map(|_| keep_within(big(6), &spent)).collect();
        assert!(matches!(kept[0], Status::Ok(_)) && matches!(kept[1], Status::Ok(_)));
        assert!(matches!(kept[2], Status::Cut { bytes } if bytes == 6 * 1024 * 1024 + 2));
        assert_eq!(kept[2].name(), "ok", "it ran");
        // A small result still fits after a large one was cut.
        assert!(matches!(keep_within(big(1), &spent), Status::Ok(_)));
        assert!(spent.load(std::sync::atomic::Ordering::SeqCst) <= RESULT_BUDGET);
    }
}
