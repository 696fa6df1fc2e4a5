//! The script's side of `aai_run`: QuickJS, through rquickjs, on a thread of its own.
//!
//! The context has the language and `JSON`, `Promise`, `Proxy`, `Map`/`Set`, typed
//! arrays, regular expressions and a monotonic `performance.now()`; no `Date` (no wall
//! clock), no `eval` and no function constructors (no code from text), no modules, and no
//! I/O of any kind. What the script reaches of the world, it reaches by asking the
//! gateway ([`Ask`]): `call`, `search` and `guide` send an ask and wait for the answer, so
//! tool calls run one at a time, in the order the script makes them.
//!
//! Limits: the runtime's memory (QuickJS refuses an allocation past it), its stack, and an
//! interrupt handler that stops the script (uncatchably) once the run's token is cancelled:
//! by its wall time, its calls, or its caller.

use std::cell::RefCell;
use std::rc::Rc;

use rquickjs::context::{EvalOptions, intrinsic};
use rquickjs::{Context, Ctx, Exception, Function, Runtime};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// What a script asks the gateway for; each carries where the answer goes.
#[derive(Debug)]
pub(super) enum Ask {
    /// A tool call.
    Call {
        app: String,
        tool: String,
        args: Value,
        reply: oneshot::Sender<Result<Value, Thrown>>,
    },
    /// `search(query)`: the apps that match, as `aai_search` ranks them.
    Search {
        query: String,
        reply: oneshot::Sender<Result<Value, Thrown>>,
    },
    /// `guide(app)`: the app's guide, as `aai_guide` shows it.
    Guide {
        app: String,
        reply: oneshot::Sender<Result<Value, Thrown>>,
    },
    /// `waitFor(app, event, {timeout, uri})`: the data of the app's next such event.
    Wait {
        app: String,
        event: String,
        /// The resource of a downstream server's `resource_updated`.
        uri: Option<String>,
        /// At most this long (the run's own limit still applies).
        timeout: std::time::Duration,
        reply: oneshot::Sender<Result<Value, Thrown>>,
    },
}

/// An error the script sees as a thrown `Error` with a `code`.
#[derive(Debug, Clone)]
pub(super) struct Thrown {
    /// The gateway's error code (the script sees its name: `CONSENT_REQUIRED`, …).
    pub code: crate::error::Code,
    /// What went wrong.
    pub message: String,
}

/// How the script ended.
#[derive(Debug)]
pub(super) enum End {
    /// It returned (or its promise resolved to) `value`; `undefined` is `null`.
    Returned(Value),
    /// It threw: the message and, when there is one, the stack.
    Threw { message: String, stack: String },
    /// It does not parse.
    Syntax(String),
    /// Its memory ran out.
    OutOfMemory,
    /// The run's token was cancelled (the reason is the gateway side's).
    Stopped,
    /// Its returned value has no JSON form (a function, a cycle).
    NotJson(String),
    /// The engine itself failed.
    Engine(String),
}

/// The end, with what the script printed.
#[derive(Debug)]
pub(super) struct Ended {
    pub end: End,
    pub log: Log,
}

/// What `console.log` and friends printed, up to a budget of bytes.
#[derive(Debug, Default)]
pub(super) struct Log {
    pub lines: Vec<String>,
    /// Lines left out past the budget.
    pub dropped: usize,
    bytes: usize,
}

/// What the engine gets.
pub(super) struct Setup {
    pub source: String,
    pub input: Value,
    /// The runtime's memory limit, bytes.
    pub memory: usize,
    /// Most bytes of log kept.
    pub log_bytes: usize,
}

/// Stack the engine may use (QuickJS checks it; the thread has more).
const MAX_STACK: usize = 1024 * 1024;
/// The engine thread's own stack.
const THREAD_STACK: usize = 8 * 1024 * 1024;

/// Most characters of a thrown error's message, and of its stack, in the report.
const MAX_ERROR_TEXT: usize = 4000;

/// Why nothing more can be asked: the run ended on the gateway side.
const STOPPED: &str = "the run was stopped";

/// Starts the script on its own thread; the receiver gets how it ended.
pub(super) fn start(
    setup: Setup,
    asks: mpsc::UnboundedSender<Ask>,
    stop: CancellationToken,
) -> std::io::Result<oneshot::Receiver<Ended>> {
    let (done, ended) = oneshot::channel();
    std::thread::Builder::new()
        .name("aai-run".into())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let _ = done.send(run(setup, asks, &stop));
        })?;
    Ok(ended)
}

fn run(setup: Setup, asks: mpsc::UnboundedSender<Ask>, stop: &CancellationToken) -> Ended {
    let log = Rc::new(RefCell::new(Log::default()));
    let end = match Runtime::new() {
        Ok(runtime) => {
            runtime.set_memory_limit(setup.memory);
            runtime.set_max_stack_size(MAX_STACK);
            let stop = stop.clone();
            runtime.set_interrupt_handler(Some(Box::new(move || stop.is_cancelled())));
            evaluate(&runtime, &setup, asks, &log)
        }
        Err(e) => End::Engine(e.to_string()),
    };
    // The context (and the functions holding the log) is gone by now.
    let log = std::mem::take(&mut *log.borrow_mut());
    Ended { end, log }
}

/// The intrinsics a script gets: no `Date`, everything else it may need.
type Intrinsics = (
    intrinsic::Eval,
    intrinsic::RegExpCompiler,
    intrinsic::RegExp,
    intrinsic::Json,
    intrinsic::Proxy,
    intrinsic::MapSet,
    intrinsic::TypedArrays,
    intrinsic::Promise,
    intrinsic::Performance,
);

fn evaluate(
    runtime: &Runtime,
    setup: &Setup,
    asks: mpsc::UnboundedSender<Ask>,
    log: &Rc<RefCell<Log>>,
) -> End {
    let context = match Context::custom::<Intrinsics>(runtime) {
        Ok(c) => c,
        Err(e) => return out_of_memory_or(e, End::Engine),
    };
    context.with(|ctx| {
        if let Err(e) = install(&ctx, setup, asks, log.clone()) {
            return thrown(&ctx, e);
        }
        // The script is the body of an async function: `await` and `return` work at its
        // top level, and its first line is line 1 of `script`.
        let wrapped = format!("(async () => {{{}\n}})()", setup.source);
        let mut options = EvalOptions::default();
        options.filename = Some("script".into());
        let promise: rquickjs::Promise = match ctx.eval_with_options(wrapped, options) {
            Ok(p) => p,
            Err(e) => return thrown(&ctx, e),
        };
        let value: rquickjs::Value = match promise.finish() {
            Ok(v) => v,
            Err(rquickjs::Error::WouldBlock) => {
                return End::Threw {
                    message: "the script waits for something that never comes (a promise no call resolves)".into(),
                    stack: String::new(),
                };
            }
            Err(e) => return thrown(&ctx, e),
        };
        if value.is_undefined() {
            return End::Returned(Value::Null);
        }
        match ctx.json_stringify(value) {
            Ok(Some(text)) => match text.to_string().map(|t| serde_json::from_str(&t)) {
                Ok(Ok(v)) => End::Returned(v),
                Ok(Err(e)) => End::NotJson(e.to_string()),
                Err(e) => thrown(&ctx, e),
            },
            Ok(None) => End::NotJson("it has no JSON form (a function or a symbol)".into()),
            Err(e) => match thrown(&ctx, e) {
                End::Threw { message, .. } => End::NotJson(message),
                other => other,
            },
        }
    })
}

/// The gateway's functions and the prelude that wraps them.
fn install<'js>(
    ctx: &Ctx<'js>,
    setup: &Setup,
    asks: mpsc::UnboundedSender<Ask>,
    log: Rc<RefCell<Log>>,
) -> rquickjs::Result<()> {
    let globals = ctx.globals();
    let to = asks.clone();
    globals.set(
        "__aai_call",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, app: String, tool: String, args: String| {
                // Arguments that do not read back as JSON (a lone surrogate, nesting past
                // the parser's depth) are refused: never sent as no arguments.
                let args: Value = serde_json::from_str(&args).map_err(|e| {
                    Exception::throw_type(
                        &ctx,
                        &format!("the arguments cannot be sent as JSON: {e}"),
                    )
                })?;
                ask(&ctx, &to, |reply| Ask::Call {
                    app,
                    tool,
                    args,
                    reply,
                })
            },
        )?,
    )?;
    let to = asks.clone();
    globals.set(
        "__aai_search",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, query: String| {
            ask(&ctx, &to, |reply| Ask::Search { query, reply })
        })?,
    )?;
    let to = asks.clone();
    globals.set(
        "__aai_guide",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, app: String| {
            ask(&ctx, &to, |reply| Ask::Guide { app, reply })
        })?,
    )?;
    let to = asks;
    globals.set(
        "__aai_wait",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>,
                  app: String,
                  event: String,
                  timeout_ms: f64,
                  uri: Option<String>| {
                // NaN, negative and huge values become 0 and the cap: the run's limit rules.
                let timeout =
                    std::time::Duration::from_millis(timeout_ms.clamp(0.0, 86_400_000.0) as u64);
                ask(&ctx, &to, |reply| Ask::Wait {
                    app,
                    event,
                    uri,
                    timeout,
                    reply,
                })
            },
        )?,
    )?;
    let budget = setup.log_bytes;
    globals.set(
        "__aai_log",
        Function::new(ctx.clone(), move |line: String| {
            // Counted as the report sends it: a JSON string and a comma.
            let bytes = serde_json::to_string(&line).map_or(line.len(), |s| s.len()) + 1;
            let mut log = log.borrow_mut();
            if log.bytes + bytes > budget {
                log.dropped += 1;
            } else {
                log.bytes += bytes;
                log.lines.push(line);
            }
        })?,
    )?;
    globals.set("input", ctx.json_parse(setup.input.to_string())?)?;
    ctx.eval::<(), _>(PRELUDE)
}

/// Sends an ask and waits for its answer: `{"result": …}` or `{"error": {code, message}}`
/// as JSON text, which the prelude turns into a value or a thrown `Error`.
fn ask<'js>(
    ctx: &Ctx<'js>,
    to: &mpsc::UnboundedSender<Ask>,
    make: impl FnOnce(oneshot::Sender<Result<Value, Thrown>>) -> Ask,
) -> rquickjs::Result<String> {
    let (reply, answer) = oneshot::channel();
    if to.send(make(reply)).is_err() {
        return Err(Exception::throw_internal(ctx, STOPPED));
    }
    match answer.blocking_recv() {
        Ok(Ok(result)) => Ok(json!({ "result": result }).to_string()),
        Ok(Err(t)) => {
            Ok(json!({ "error": { "code": t.code.name(), "message": t.message } }).to_string())
        }
        Err(_) => Err(Exception::throw_internal(ctx, STOPPED)),
    }
}

/// What an engine error means for the run.
fn thrown(ctx: &Ctx<'_>, e: rquickjs::Error) -> End {
    if !matches!(e, rquickjs::Error::Exception) {
        return out_of_memory_or(e, End::Engine);
    }
    let caught = ctx.catch();
    let (name, message, stack) = match caught.as_exception() {
        Some(ex) => (
            ex.get::<_, Option<String>>("name")
                .ok()
                .flatten()
                .unwrap_or_default(),
            ex.message().unwrap_or_default(),
            ex.stack().unwrap_or_default(),
        ),
        // QuickJS throws `null` when an allocation fails past the limit.
        None if caught.is_null() => return End::OutOfMemory,
        None => (
            String::new(),
            ctx.json_stringify(caught.clone())
                .ok()
                .flatten()
                .and_then(|s| s.to_string().ok())
                .unwrap_or_else(|| "a value that is not an Error".into()),
            String::new(),
        ),
    };
    let (message, stack) = (
        crate::text::excerpt(&message, MAX_ERROR_TEXT),
        crate::text::excerpt(&stack, MAX_ERROR_TEXT),
    );
    match (name.as_str(), message.as_str()) {
        ("SyntaxError", _) => End::Syntax(format!("{message}{}", where_in(&stack))),
        (_, "out of memory") => End::OutOfMemory,
        ("InternalError", "interrupted") | (_, STOPPED) => End::Stopped,
        _ => End::Threw { message, stack },
    }
}

/// ` (line LINE:COL)` from a QuickJS stack, when it names the script (`script:3:7`).
fn where_in(stack: &str) -> String {
    stack
        .lines()
        .find_map(|l| {
            l.split_once("script:")
                .map(|(_, at)| at.trim_end_matches(')'))
        })
        .map(|at| format!(" (line {at})"))
        .unwrap_or_default()
}

fn out_of_memory_or(e: rquickjs::Error, other: impl FnOnce(String) -> End) -> End {
    match e {
        rquickjs::Error::Allocation => End::OutOfMemory,
        e => other(e.to_string()),
    }
}

/// Turns the gateway's raw functions into the script's API and closes the ways to run
/// code from text.
const PRELUDE: &str = r#""use strict";
(() => {
  const g = globalThis;
  const raw = { call: g.__aai_call, search: g.__aai_search, guide: g.__aai_guide, wait: g.__aai_wait, log: g.__aai_log };
  for (const k of ["__aai_call", "__aai_search", "__aai_guide", "__aai_wait", "__aai_log"]) delete g[k];
  const answer = (text) => {
    const r = JSON.parse(text);
    if (r.error) {
      const e = new Error(r.error.message);
      e.code = r.error.code;
      throw e;
    }
    return r.result;
  };
  const call = async (app, tool, args) =>
    answer(raw.call(String(app), String(tool), JSON.stringify(args === undefined ? {} : args)));
  const show = (x) => {
    if (typeof x === "string") return x;
    try { return JSON.stringify(x) ?? String(x); } catch (_) { return String(x); }
  };
  const log = (...parts) => raw.log(parts.map(show).join(" "));
  const fixed = (name, value) => Object.defineProperty(g, name, { value, enumerable: true });
  fixed("call", call);
  fixed("search", async (query) => answer(raw.search(String(query))));
  fixed("guide", async (app) => answer(raw.guide(String(app))));
  fixed("waitFor", async (app, event, options) => {
    const timeout = options && options.timeout !== undefined ? Number(options.timeout) : 30000;
    const uri = options && options.uri !== undefined && options.uri !== null ? String(options.uri) : undefined;
    return answer(raw.wait(String(app), String(event), timeout, uri));
  });
  const tools = (app) => new Proxy({}, {
    get: (_, tool) => (typeof tool === "string" && tool !== "then") ? (args) => call(app, tool, args) : undefined,
  });
  fixed("apps", new Proxy({}, {
    get: (_, app) => (typeof app === "string" && app !== "then") ? tools(app) : undefined,
  }));
  fixed("console", Object.freeze({ log, info: log, warn: log, error: log, debug: log }));
  delete g.eval;
  const refuse = function Function() { throw new TypeError("code from text cannot run here"); };
  for (const f of [function () {}, async function () {}, function* () {}, async function* () {}]) {
    const proto = Object.getPrototypeOf(f);
    refuse.prototype = proto;
    Object.defineProperty(proto, "constructor", { value: refuse });
  }
  refuse.prototype = Function.prototype;
  g.Function = refuse;
})();
"#;
