//! `aai_run`: a short JavaScript program that calls tools, run in a sandbox ([`engine`]),
//! so that several steps cost the model one round trip and only the script's result
//! enters its context (`docs/workflows.md`).
//!
//! The script reaches the world only through the gateway. Each `call` is a call through
//! the pipeline with the run's caller: that client's view of the apps, consent per (caller,
//! app, tool), rate limits, history and telemetry. A script can never do what its caller
//! could not do one call at a time. `search` and `guide` answer from the caller's view.
//!
//! Limits ([`Limits`], config `run`): wall time, the engine's memory, the number of tool
//! calls, and the size of what comes back (the returned value, and the log). Any of them
//! ends the run with an error that says which; the calls made until then are reported,
//! whatever became of the run (they ran: the client must know what happened).

mod engine;

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::error::Code;
use crate::pipeline::{Origin, Outcome, Pipeline, Within};
use crate::rollback::Step;
use crate::telemetry;
use engine::{Ask, End, Thrown};

/// What one run may use (config `run`).
pub(crate) use crate::config::RunLimits as Limits;

/// A script and what it gets as `input`.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    /// The program: the body of an async function (`await` and `return` at its top level).
    pub source: String,
    /// `input` in the script (`null` when none).
    pub input: Value,
    /// When the run fails, its completed calls are undone (newest first).
    pub atomic: bool,
}

/// Why a run failed. The codes: a script that does not parse is SCRIPT_PARSE_ERROR, one
/// over its wall time TIMEOUT, the rest AUTOMATION_FAILED (with `limit` naming a limit).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Error {
    /// It does not parse.
    #[error("the script does not parse: {0}")]
    Syntax(String),
    /// It threw.
    #[error("the script threw: {message}")]
    Threw {
        /// The error's message.
        message: String,
        /// Its stack, in the script's lines.
        stack: String,
    },
    /// It ran past its wall time.
    #[error("the script ran for longer than {} s (config `run.timeoutMs`); it was stopped", .0.as_secs_f64())]
    TimedOut(Duration),
    /// Its memory ran out.
    #[error("the script needed more than {} MiB of memory (config `run.memoryMb`); it was stopped", .0 / (1024 * 1024))]
    OutOfMemory(usize),
    /// It asked for more tool calls than a run may make.
    #[error("the script made more than {0} tool calls (config `run.maxCalls`); it was stopped")]
    TooManyCalls(usize),
    /// Its result is larger than a run may return.
    #[error(
        "the script's result is {0} bytes as JSON, more than {1} (config `run.maxResultBytes`)"
    )]
    TooLarge(usize, usize),
    /// Its result has no JSON form.
    #[error("the script's result cannot be sent as JSON: {0}")]
    NotJson(String),
    /// The client cancelled the run.
    #[error("the run was cancelled")]
    Cancelled,
    /// Too many runs are under way.
    #[error("{0} runs are under way, the most at once; run this one when one has ended")]
    Busy(usize),
    /// The engine could not run it.
    #[error("the script engine failed: {0}")]
    Engine(String),
}

impl Error {
    /// The limit it names, if any (`data.limit`).
    pub(crate) fn limit(&self) -> Option<&'static str> {
        match self {
            Error::TimedOut(_) => Some("run.timeoutMs"),
            Error::OutOfMemory(_) => Some("run.memoryMb"),
            Error::TooManyCalls(_) => Some("run.maxCalls"),
            Error::TooLarge(..) => Some("run.maxResultBytes"),
            _ => None,
        }
    }

    /// Its code.
    pub(crate) fn code(&self) -> Code {
        match self {
            Error::Syntax(_) => Code::ScriptParseError,
            Error::TimedOut(_) => Code::Timeout,
            Error::Busy(_) => Code::RateLimited,
            _ => Code::AutomationFailed,
        }
    }
}

/// One tool call a script made.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CallNote {
    /// The app as the script named it.
    pub app: String,
    /// The tool.
    pub tool: String,
    /// `ok` or `error`.
    pub status: &'static str,
    /// The error's code, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    /// How long it took.
    pub ms: u64,
}

/// What a run did: its outcome, what it printed, and every call it made.
#[derive(Debug)]
pub(crate) struct Report {
    /// The returned value, or why there is none.
    pub outcome: Result<Value, Error>,
    /// `console.log` lines, in order.
    pub log: Vec<String>,
    /// Lines left out past `run.maxResultBytes`.
    pub log_dropped: usize,
    /// The tool calls, in order.
    pub calls: Vec<CallNote>,
    /// The run's id (`run-…`: its calls' history records name it).
    pub id: String,
    /// For an atomic run that failed: what became of each completed call's undo, newest
    /// first.
    pub undone: Option<Vec<crate::rollback::Undone>>,
}

impl Report {
    fn failed(e: Error, id: &str) -> Report {
        Report {
            outcome: Err(e),
            log: Vec::new(),
            log_dropped: 0,
            calls: Vec::new(),
            id: id.to_owned(),
            undone: None,
        }
    }

    /// The report as JSON: `{result | error, log, calls}`.
    pub(crate) fn to_json(&self) -> Value {
        let mut out = match &self.outcome {
            Ok(value) => json!({ "result": value }),
            Err(e) => {
                let mut error = json!({ "code": e.code().name(), "message": e.to_string() });
                if let Some(limit) = e.limit() {
                    error["limit"] = json!(limit);
                }
                if let Error::Threw { stack, .. } = e
                    && !stack.is_empty()
                {
                    error["stack"] = json!(stack);
                }
                json!({ "error": error })
            }
        };
        out["log"] = json!(self.log);
        if self.log_dropped > 0 {
            out["logDropped"] = json!(self.log_dropped);
        }
        out["calls"] = json!(self.calls);
        out["run"] = json!(self.id);
        if let Some(undone) = &self.undone {
            out["undone"] = json!(undone);
        }
        out
    }
}

/// Called after each tool call of the run ends.
pub(crate) type OnCall = std::sync::Arc<dyn Fn(&CallNote) + Send + Sync>;

/// Runs `script` for `origin`'s caller. `cancel` stops it (and the call it is in). Its
/// calls are part of one run ([`Within`]): each names it in its question and history
/// record, under one span. An atomic run that fails undoes its completed calls.
pub(crate) async fn run(
    pipeline: &Pipeline,
    script: Script,
    limits: &Limits,
    cancel: CancellationToken,
    on_call: Option<OnCall>,
    origin: &Origin,
) -> Report {
    if !script.atomic {
        return run_whole(pipeline, script, limits, cancel, on_call, origin).await;
    }
    // An atomic run finishes, and undoes, even when its request goes away.
    let (pipeline, limits, origin) = (pipeline.clone(), limits.clone(), origin.clone());
    let token = cancel.clone();
    let work = async move { run_whole(&pipeline, script, &limits, cancel, on_call, &origin).await };
    crate::rollback::detached(work, &token)
        .await
        .unwrap_or_else(|| Report::failed(Error::Engine("the run's task failed".into()), ""))
}

async fn run_whole(
    pipeline: &Pipeline,
    script: Script,
    limits: &Limits,
    cancel: CancellationToken,
    on_call: Option<OnCall>,
    origin: &Origin,
) -> Report {
    let within = Arc::new(Within::run(&script.source, script.atomic));
    let mut span =
        telemetry::Call::start_as(telemetry::RUN, pipeline.telemetry(), origin.trace.as_ref());
    span.span().set("aai.run.id", within.id.clone());
    let origin = Origin {
        within: Some(within.clone()),
        trace: span.span().context().cloned(),
        ..origin.clone()
    };
    let mut made = Made::default();
    let mut report = run_script(
        pipeline, script, limits, cancel, on_call, &origin, &mut made,
    )
    .await;
    if within.atomic && report.outcome.is_err() {
        report.undone = Some(pipeline.roll_back(made.steps, &origin).await);
    }
    span.span().set("aai.run.calls", report.calls.len() as i64);
    span.finish(
        report
            .outcome
            .as_ref()
            .map(|_| ())
            .map_err(|e| e.code().name()),
    );
    report
}

/// The calls a run made: as reported, and (atomic) what undoes each.
#[derive(Default)]
struct Made {
    steps: Vec<Step>,
}

async fn run_script(
    pipeline: &Pipeline,
    script: Script,
    limits: &Limits,
    cancel: CancellationToken,
    on_call: Option<OnCall>,
    origin: &Origin,
    made: &mut Made,
) -> Report {
    let id = origin.within.as_ref().map_or("", |w| w.id.as_str());
    let Some(_slot) = Slot::take() else {
        return Report::failed(Error::Busy(MAX_RUNS), id);
    };
    let stop = cancel.child_token();
    let (to_gateway, mut asks) = mpsc::unbounded_channel();
    let setup = engine::Setup {
        source: script.source,
        input: script.input,
        memory: limits.memory_bytes,
        log_bytes: limits.result_bytes,
    };
    let mut ended = match engine::start(setup, to_gateway, stop.clone()) {
        Ok(ended) => ended,
        Err(e) => return Report::failed(Error::Engine(e.to_string()), id),
    };
    let deadline = tokio::time::Instant::now() + limits.wall;
    // The gateway side's reason to stop the script, once it has one.
    let mut why: Option<Error> = None;
    let mut calls: Vec<CallNote> = Vec::new();
    let ended = loop {
        tokio::select! {
            ended = &mut ended => break ended.ok(),
            Some(ask) = asks.recv() => {
                let answered = answer(pipeline, ask, limits, Stops { stop: &stop, deadline, cancel: &cancel }, origin, &mut calls, made).await;
                if let Some(note) = calls.last().filter(|_| answered.called)
                    && let Some(on_call) = &on_call
                {
                    on_call(note);
                }
                if why.is_none() {
                    why = answered.stop;
                }
                if why.is_some() {
                    stop.cancel();
                }
            }
            () = tokio::time::sleep_until(deadline), if why.is_none() => {
                why = Some(Error::TimedOut(limits.wall));
                stop.cancel();
            }
            () = cancel.cancelled(), if why.is_none() => {
                why = Some(Error::Cancelled);
                stop.cancel();
            }
        }
    };
    let Some(ended) = ended else {
        return Report {
            outcome: Err(Error::Engine(
                "the engine's thread ended without an answer".into(),
            )),
            calls,
            log: Vec::new(),
            log_dropped: 0,
            id: id.to_owned(),
            undone: None,
        };
    };
    let outcome = match (ended.end, why) {
        // The gateway's reason wins over how the script saw it end.
        (_, Some(why)) => Err(why),
        (End::Returned(value), None) => {
            let bytes = value.to_string().len();
            if bytes > limits.result_bytes {
                Err(Error::TooLarge(bytes, limits.result_bytes))
            } else {
                Ok(value)
            }
        }
        (End::Threw { message, stack }, None) => Err(Error::Threw { message, stack }),
        (End::Syntax(message), None) => Err(Error::Syntax(message)),
        (End::OutOfMemory, None) => Err(Error::OutOfMemory(limits.memory_bytes)),
        (End::NotJson(why), None) => Err(Error::NotJson(why)),
        (End::Stopped, None) => Err(Error::Cancelled),
        (End::Engine(why), None) => Err(Error::Engine(why)),
    };
    Report {
        outcome,
        log: ended.log.lines,
        log_dropped: ended.log.dropped,
        calls,
        id: id.to_owned(),
        undone: None,
    }
}

/// Most characters of an app or tool name in the report.
const MAX_NAME: usize = 200;

/// How many runs may be under way at once (each may hold `run.memoryMb`); one more is
/// refused at once.
const MAX_RUNS: usize = 4;

/// Runs under way.
static RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How long a call cancelled by the run's end may take to end.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// A place among the [`MAX_RUNS`] runs under way, given back when dropped.
struct Slot;

impl Slot {
    fn take() -> Option<Slot> {
        use std::sync::atomic::Ordering;
        RUNNING
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_RUNS).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// What answering an ask did.
struct Answered {
    /// A tool call was made (and noted).
    called: bool,
    /// The run must stop, and why.
    stop: Option<Error>,
}

/// What ends a run: the gateway's own stop, the deadline, the client's cancel.
struct Stops<'a> {
    stop: &'a CancellationToken,
    deadline: tokio::time::Instant,
    cancel: &'a CancellationToken,
}

/// Answers one ask of the script.
async fn answer(
    pipeline: &Pipeline,
    ask: Ask,
    limits: &Limits,
    stops: Stops<'_>,
    origin: &Origin,
    calls: &mut Vec<CallNote>,
    made: &mut Made,
) -> Answered {
    let Stops {
        stop,
        deadline,
        cancel,
    } = stops;
    match ask {
        Ask::Call {
            app,
            tool,
            args,
            reply,
        } => {
            // A stopped run makes no more calls, whatever the script does with the error
            // its last one threw.
            if stop.is_cancelled() {
                let _ = reply.send(Err(thrown(
                    Code::AutomationFailed,
                    "the run was stopped".into(),
                )));
                return Answered {
                    called: false,
                    stop: None,
                };
            }
            if calls.len() >= limits.max_calls {
                let e = Error::TooManyCalls(limits.max_calls);
                let _ = reply.send(Err(thrown(Code::AutomationFailed, e.to_string())));
                return Answered {
                    called: false,
                    stop: Some(e),
                };
            }
            let started = std::time::Instant::now();
            let atomic = origin.within.as_ref().is_some_and(|w| w.atomic);
            let kept_args = atomic.then(|| args.clone());
            let (stop_why, result) = {
                let token = stop.child_token();
                let call = pipeline.call(&app, &tool, Some(args), token.clone(), None, origin);
                tokio::pin!(call);
                // Stopped mid-call, the call is cancelled and still waited for (briefly): it
                // ends as a cancelled call does, recorded in history like any other.
                let (stop_why, result) = tokio::select! {
                    r = &mut call => (None, Some(r)),
                    () = tokio::time::sleep_until(deadline) => (Some(Error::TimedOut(limits.wall)), None),
                    () = cancel.cancelled() => (Some(Error::Cancelled), None),
                };
                let result = match result {
                    Some(r) => Some(r),
                    None => {
                        token.cancel();
                        tokio::time::timeout(CANCEL_GRACE, &mut call).await.ok()
                    }
                };
                (stop_why, result)
            };
            let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            if let Some(args) = &kept_args {
                // A completed call can be undone from its result; one the run was stopped
                // in may have taken effect all the same, and is reported.
                let plan = match &result {
                    Some(Ok(outcome)) if for_script(outcome).is_ok() => {
                        Some(pipeline.undo_plan(&app, &tool, args, outcome, origin).await)
                    }
                    Some(Ok(_)) => None,
                    _ if stop_why.is_some() => {
                        Some(pipeline.stopped_plan(&app, &tool, origin).await)
                    }
                    _ => None,
                };
                if let Some(plan) = plan {
                    made.steps.push(Step {
                        index: calls.len(),
                        app: crate::text::excerpt(&app, MAX_NAME),
                        tool: crate::text::excerpt(&tool, MAX_NAME),
                        plan,
                    });
                }
            }
            let answer = match result {
                Some(Ok(outcome)) => for_script(&outcome),
                Some(Err(e)) => Err(thrown(
                    e.code,
                    crate::text::excerpt(&e.message(), MAX_NAME * 4),
                )),
                None => Err(thrown(Code::AutomationFailed, "the run was stopped".into())),
            };
            calls.push(CallNote {
                app: crate::text::excerpt(&app, MAX_NAME),
                tool: crate::text::excerpt(&tool, MAX_NAME),
                status: if answer.is_ok() { "ok" } else { "error" },
                code: answer.as_ref().err().map(|t| t.code.name()),
                ms,
            });
            let _ = reply.send(answer);
            Answered {
                called: true,
                stop: stop_why,
            }
        }
        Ask::Search { query, reply } => {
            let snapshot = pipeline.view(pipeline.snapshot().await, &origin.caller);
            let hits: Vec<Value> = pipeline
                .search_for(&snapshot, &query, 10, &origin.caller)
                .await
                .iter()
                .map(|hit| {
                    json!({
                        "app": hit.entry.app.id,
                        "name": snapshot.name(hit.entry),
                        "description": crate::registry::search::description(&hit.entry.app.description),
                        "tools": hit.entry.binding().tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
                    })
                })
                .collect();
            let _ = reply.send(Ok(Value::Array(hits)));
            Answered {
                called: false,
                stop: None,
            }
        }
        Ask::Guide { app, reply } => {
            let _ = reply.send(guide(pipeline, &app, origin).await);
            Answered {
                called: false,
                stop: None,
            }
        }
        Ask::Wait {
            app,
            event,
            uri,
            timeout,
            reply,
        } => {
            let waited = tokio::select! {
                waited = wait_for(pipeline, &app, &event, uri, timeout, origin) => Ok(waited),
                () = tokio::time::sleep_until(deadline) => Err(Error::TimedOut(limits.wall)),
                () = cancel.cancelled() => Err(Error::Cancelled),
            };
            match waited {
                Ok(answer) => {
                    let _ = reply.send(answer);
                    Answered {
                        called: false,
                        stop: None,
                    }
                }
                Err(why) => {
                    let _ = reply.send(Err(thrown(
                        Code::AutomationFailed,
                        "the run was stopped".into(),
                    )));
                    Answered {
                        called: false,
                        stop: Some(why),
                    }
                }
            }
        }
    }
}

/// The data of `app`'s next `event` (its app in the caller's view, consent asked as for
/// a call), or TIMEOUT after `timeout`.
async fn wait_for(
    pipeline: &Pipeline,
    app: &str,
    event: &str,
    uri: Option<String>,
    timeout: Duration,
    origin: &Origin,
) -> Result<Value, Thrown> {
    let mut feed = pipeline
        .listen(app, event, uri.as_deref(), origin)
        .await
        .map_err(|e| thrown(e.code, e.message()))?;
    match tokio::time::timeout(timeout, feed.next()).await {
        Ok(Some(fired)) => Ok(fired.data.clone()),
        Ok(None) => Err(thrown(
            Code::ServiceUnavailable,
            format!("`{app}` stopped announcing `{event}` (it or the bus went away)"),
        )),
        Err(_) => Err(thrown(
            Code::Timeout,
            format!("no `{event}` of `{app}` within {} ms", timeout.as_millis()),
        )),
    }
}

/// `app`'s guide from the caller's view (a downstream server's tools listed first, when
/// it may start).
async fn guide(pipeline: &Pipeline, app: &str, origin: &Origin) -> Result<Value, Thrown> {
    let snapshot = pipeline.view(pipeline.snapshot().await, &origin.caller);
    let snapshot = pipeline
        .remote_tools(snapshot, app, &origin.caller)
        .await
        .map_err(|e| thrown(e.code, e.message()))?;
    let snapshot = pipeline.view(snapshot, &origin.caller);
    let entry = snapshot.find(app).ok_or_else(|| {
        thrown(
            Code::AppNotFound,
            format!("no app `{app}` is served to this client"),
        )
    })?;
    Ok(Value::String(
        pipeline.guide_for(&snapshot, entry, &origin.caller).await,
    ))
}

/// A tool's result as a script gets it ([`crate::rollback::value_of`]); a result marked
/// `isError` is thrown.
fn for_script(outcome: &Outcome) -> Result<Value, Thrown> {
    crate::rollback::value_of(outcome).map_err(|f| thrown(Code::AutomationFailed, f.0))
}

fn thrown(code: Code, message: String) -> Thrown {
    Thrown { code, message }
}
