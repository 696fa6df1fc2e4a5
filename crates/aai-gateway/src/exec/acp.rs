//! The `acp` executor (docs/agents.md, ACP agents): a coding agent that speaks the Agent
//! Client Protocol (v1, newline-delimited JSON-RPC 2.0 on stdio) is an app, and the
//! gateway is its client.
//!
//! This is a small client of our own rather than the `agent-client-protocol` crate: the
//! crate's connection runs `!Send` futures on a local task set, which does not fit a
//! multi-threaded server handling many sessions, and the part of the protocol a gateway
//! needs is a dozen messages.
//!
//! * **Lifecycle.** One agent process per app, started on first use (concurrent first
//!   calls share the start and its `initialize`), checked before each use and started
//!   again after it died. It is stopped with its process group on shutdown, when the app
//!   is removed or changed, and when the gateway's process ends (kill on drop).
//! * **A call** is a prompt turn: `session/new` (cwd: the `cwd` argument, else
//!   `apps.<id>.cwd`, else the home folder) or, with a `sessionId` argument, that session
//!   again; then `session/prompt`. The prompt is the `prompt` argument, or else the tool's
//!   description with its arguments as JSON.
//! * **Updates.** `agent_message_chunk`s become the result text and, when the client sent
//!   a progress token, progress notifications as they arrive; tool calls and the plan are
//!   summarized in the text and listed in `structuredContent`.
//! * **Permission.** `session/request_permission` goes to the call's consent channel
//!   ([`super::Asker`]); the answer picks the agent's own allow or reject option. With no
//!   channel the request is rejected at once.
//! * **Cancellation and timeout** send `session/cancel`; an agent that does not end the
//!   turn within [`CANCEL_GRACE`] is stopped.
//! * The client offers neither `fs/*` nor `terminal/*` (the gateway is not an editor);
//!   such requests get "method not found".

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aai_descriptor::Executor;
use serde_json::{Map, Value, json};
use tokio::process::ChildStdout;
use tokio::sync::oneshot;

use super::child::{self, Child, Ended};
use super::process;
use super::stdio::Started;
use super::{Asker, Execute, Permission, Progress, ProgressSink, Request};
use crate::error::{Code, GatewayError, INTERNAL_ERROR, METHOD_NOT_FOUND};

/// The protocol version the gateway speaks.
const PROTOCOL_VERSION: u64 = 1;
/// How long starting an agent and its `initialize` may take.
const START_DEADLINE: Duration = Duration::from_secs(60);
/// How long `session/new` or `session/load` may take.
const SESSION_DEADLINE: Duration = Duration::from_secs(60);
/// How long an agent has to end a cancelled turn before it is stopped.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Why a prompt turn stopped before the agent answered.
#[derive(Debug, Clone, Copy)]
enum Stopped {
    TimedOut,
    Cancelled,
}

/// How a call to an ACP agent failed. `From<Error> for GatewayError` below gives the wire
/// codes. Clone: callers waiting for the same start share its failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The agent's program did not start.
    #[error(transparent)]
    Start(#[from] process::StartError),
    /// The agent started but `initialize` failed (`note`: its last stderr lines).
    #[error("the agent did not start: `initialize` failed: {message}{note}")]
    NotStarted {
        /// The JSON-RPC error's message.
        message: String,
        /// The note of its last stderr lines.
        note: String,
    },
    /// The agent speaks another protocol version.
    #[error("the agent speaks ACP version {0}, the gateway speaks {PROTOCOL_VERSION}")]
    Version(String),
    /// The client cancelled while the agent was starting.
    #[error("the call was cancelled while the agent was starting")]
    CancelledStarting,
    /// `cwd` is not an absolute path to a folder.
    #[error("`cwd` must be an absolute path to an existing folder")]
    BadCwd,
    /// A `sessionId` the running agent does not know and cannot load.
    #[error(
        "session `{0}` is not known to the running agent (it may have restarted, and it cannot load sessions); leave out `sessionId` to start a new one"
    )]
    UnknownSession(String),
    /// The session is in another prompt turn.
    #[error("session `{0}` is busy with another prompt; wait for it, or start a new session")]
    Busy(String),
    /// `session/new` answered without an id.
    #[error("the agent's answer to session/new has no sessionId")]
    NoSessionId,
    /// The turn ran out of time and was cancelled.
    #[error("the agent did not finish within {} s; the turn was cancelled", .0.as_secs())]
    TimedOut(Duration),
    /// The client cancelled; so was the turn.
    #[error("the call was cancelled; the agent's turn was cancelled")]
    Cancelled,
    /// The agent exited during the turn.
    #[error("{0}")]
    Gone(String),
    /// The agent needs its user to sign in (`methods`: the ways it offers).
    #[error(
        "the agent needs you to sign in first ({message}); sign in with the agent's own command, then try again. Its ways to sign in: {methods}"
    )]
    SignIn {
        /// The app id.
        app: String,
        /// The agent's message.
        message: String,
        /// Its authentication methods, listed.
        methods: String,
    },
    /// The agent answered a request with an error.
    #[error("the agent answered `{method}` with an error: {}", crate::text::excerpt(.message, 1000))]
    Rpc {
        /// The request.
        method: &'static str,
        /// Its JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// A failure within a session's turn.
    #[error("{error}")]
    InSession {
        /// The session.
        session: String,
        /// What failed.
        error: Box<Error>,
    },
}

impl Error {
    fn in_session(self, session: &str) -> Error {
        Error::InSession {
            session: session.to_owned(),
            error: Box::new(self),
        }
    }
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match e {
            Error::Start(start) => return start.into(),
            Error::InSession { session, error } => {
                return GatewayError::from(*error).with("sessionId", session);
            }
            Error::NotStarted { .. } | Error::Gone(_) => Code::AppNotRunning,
            Error::Version(_) => Code::AutomationNotSupported,
            Error::BadCwd | Error::UnknownSession(_) | Error::Busy(_) => Code::InvalidParams,
            Error::TimedOut(_) => Code::Timeout,
            Error::SignIn { .. } => Code::AuthRequired,
            Error::CancelledStarting
            | Error::Cancelled
            | Error::NoSessionId
            | Error::Rpc { .. } => Code::AutomationFailed,
        };
        let mut wire = GatewayError::new(code, e.to_string());
        match e {
            Error::SignIn { app, .. } => wire = wire.with("app", app),
            Error::Rpc { code, .. } => wire = wire.with("agentCode", code),
            _ => {}
        }
        wire
    }
}

/// Longest accepted message line.
const MAX_LINE: usize = 16 * 1024 * 1024;
/// The ACP error code for "authentication required".
const AUTH_REQUIRED: i64 = -32000;

/// A JSON-RPC error from the agent.
#[derive(Debug, Clone)]
struct RpcError {
    code: i64,
    message: String,
}

/// What a prompt turn has heard so far.
#[derive(Default)]
struct Heard {
    text: String,
    /// Text left out past `MAX_TEXT` (bytes).
    text_dropped: usize,
    /// Tool calls by id, in the order first seen (at most `MAX_TOOL_CALLS`).
    tool_calls: Vec<(String, Map<String, Value>)>,
    /// Where each tool call is in `tool_calls`.
    tool_index: HashMap<String, usize>,
    /// Tool calls left out past `MAX_TOOL_CALLS`.
    tool_calls_dropped: usize,
    plan: Option<Value>,
    chunks: u64,
}

/// Most of an agent's answer kept in a result (the rest is counted, not kept).
const MAX_TEXT: usize = 1024 * 1024;
/// Most tool calls listed in a result.
const MAX_TOOL_CALLS: usize = 500;

/// Most permission requests put to the user in one turn; later ones are rejected without
/// asking (an agent asking in a loop must not flood the user).
const MAX_ASKS: usize = 20;

/// The turn running in a session: where its updates and permission requests go.
struct Turn {
    heard: Mutex<Heard>,
    progress: Option<ProgressSink>,
    asker: Option<Asker>,
    /// Permission requests of this turn so far.
    asks: AtomicU64,
}

/// One running agent.
struct Agent {
    child: Child<u64, oneshot::Sender<Result<Value, RpcError>>>,
    started: Started,
    turns: Mutex<HashMap<String, Arc<Turn>>>,
    /// Sessions created or loaded by this process.
    sessions: Mutex<Vec<String>>,
    next_id: AtomicU64,
    /// The `initialize` result.
    info: Mutex<Value>,
}

impl Agent {
    fn app(&self) -> &str {
        self.child.label()
    }

    fn kill(&self) {
        self.child.kill();
        self.fail_all("the agent was stopped");
    }

    fn fail_all(&self, why: &str) {
        for tx in self.child.drain() {
            let _ = tx.send(Err(RpcError {
                code: INTERNAL_ERROR.into(),
                message: why.to_owned(),
            }));
        }
    }

    fn stderr_note(&self) -> String {
        self.child.stderr_note()
    }

    async fn write(&self, message: &Value) -> std::io::Result<()> {
        self.child.send(message).await
    }

    async fn notify(&self, method: &str, params: Value) {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        if let Err(e) = self.write(&message).await {
            tracing::info!(app = %self.app(), "could not send `{method}` to the agent: {e}");
        }
    }

    /// Sends a request and waits for its answer, at most `deadline`.
    async fn request(
        &self,
        method: &str,
        params: Value,
        deadline: Duration,
    ) -> Result<Value, RpcError> {
        let (tx, rx) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if !self.child.wait(id, tx) {
            return Err(RpcError {
                code: INTERNAL_ERROR.into(),
                message: "the agent has stopped".to_owned(),
            });
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if let Err(e) = self.write(&message).await {
            self.child.take(&id);
            return Err(RpcError {
                code: INTERNAL_ERROR.into(),
                message: format!("cannot write to the agent: {e}"),
            });
        }
        match tokio::time::timeout(deadline, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(RpcError {
                code: INTERNAL_ERROR.into(),
                message: "the agent stopped before answering".into(),
            }),
            Err(_) => {
                self.child.take(&id);
                Err(RpcError {
                    code: -32001,
                    message: format!("no answer to `{method}` within {} s", deadline.as_secs()),
                })
            }
        }
    }

    /// The `authMethods` the agent advertised, as text.
    fn auth_methods(&self) -> Option<String> {
        let info = self.info.lock().expect("info lock");
        let methods = info.get("authMethods")?.as_array()?;
        if methods.is_empty() {
            return None;
        }
        Some(
            methods
                .iter()
                .map(|m| {
                    let id = m.get("id").and_then(Value::as_str).unwrap_or("?");
                    let name = m.get("name").and_then(Value::as_str).unwrap_or(id);
                    match m.get("description").and_then(Value::as_str) {
                        Some(d) => format!("{name} (`{id}`: {d})"),
                        None => format!("{name} (`{id}`)"),
                    }
                })
                .collect::<Vec<_>>()
                .join(", "),
        )
    }

    fn can_load_sessions(&self) -> bool {
        self.info
            .lock()
            .expect("info lock")
            .pointer("/agentCapabilities/loadSession")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

/// Reads the agent's messages until its stdout closes.
async fn read_messages(agent: Arc<Agent>, stdout: ChildStdout) {
    let ended = child::read_lines(stdout, MAX_LINE, |line| {
        let text = String::from_utf8_lossy(line);
        match serde_json::from_str::<Value>(text.trim()) {
            Ok(message) => dispatch(&agent, message),
            Err(_) => {
                tracing::info!(app = %agent.app(), "the agent wrote a line that is not JSON-RPC: {}", crate::text::excerpt(text.trim(), 200));
            }
        }
    })
    .await;
    if let Ended::Failed(e) = &ended {
        tracing::info!(app = %agent.app(), "reading the agent's output failed: {e}");
    }
    // An agent that closed its stdout cannot answer any more, even if it still runs:
    // stop it (and its process group) now rather than on its next call.
    let why = match agent.child.ended() {
        Some(mut guard) => {
            guard.kill();
            match ended {
                Ended::TooLong => format!(
                    "the agent wrote a line longer than {MAX_LINE} bytes; it was stopped{}",
                    agent.stderr_note()
                ),
                Ended::Closed | Ended::Failed(_) => {
                    format!("the agent exited{}", agent.stderr_note())
                }
            }
        }
        None => "the agent was stopped".to_owned(),
    };
    agent.fail_all(&why);
}

fn dispatch(agent: &Arc<Agent>, message: Value) {
    let method = message.get("method").and_then(Value::as_str);
    let id = message.get("id").cloned().filter(|v| !v.is_null());
    match (method, id) {
        // A response to one of ours.
        (None, Some(id)) => {
            let Some(id) = id.as_u64() else { return };
            let Some(tx) = agent.child.take(&id) else {
                return;
            };
            let answer = match message.get("error") {
                Some(e) => Err(RpcError {
                    code: e
                        .get("code")
                        .and_then(Value::as_i64)
                        .unwrap_or(INTERNAL_ERROR.into()),
                    message: e
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown error")
                        .to_owned(),
                }),
                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            let _ = tx.send(answer);
        }
        (Some("session/update"), None) => {
            on_update(agent, message.get("params").unwrap_or(&Value::Null));
        }
        (Some("session/request_permission"), Some(id)) => {
            let agent = agent.clone();
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            tokio::spawn(async move {
                let outcome = permission(&agent, &params).await;
                let reply = json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": outcome}});
                if let Err(e) = agent.write(&reply).await {
                    tracing::info!(app = %agent.app(), "could not answer the permission request: {e}");
                }
            });
        }
        (Some(method), Some(id)) => {
            // `fs/*`, `terminal/*` and anything else: not offered.
            let agent = agent.clone();
            let reply = json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": METHOD_NOT_FOUND,
                "message": format!("`{method}` is not offered by this client (aai-gateway is not an editor)"),
            }});
            tokio::spawn(async move {
                let _ = agent.write(&reply).await;
            });
        }
        (_, None) => {}
    }
}

fn on_update(agent: &Agent, params: &Value) {
    let Some(session) = params.get("sessionId").and_then(Value::as_str) else {
        return;
    };
    let Some(turn) = agent
        .turns
        .lock()
        .expect("turns lock")
        .get(session)
        .cloned()
    else {
        return;
    };
    let Some(update) = params.get("update") else {
        return;
    };
    let kind = update
        .get("sessionUpdate")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut heard = turn.heard.lock().expect("heard lock");
    match kind {
        "agent_message_chunk" => {
            let Some(text) = update.pointer("/content/text").and_then(Value::as_str) else {
                return;
            };
            if heard.text.len() + text.len() <= MAX_TEXT {
                heard.text.push_str(text);
            } else {
                heard.text_dropped += text.len();
            }
            heard.chunks += 1;
            if let Some(sink) = &turn.progress {
                sink(Progress {
                    progress: heard.chunks as f64,
                    total: None,
                    message: Some(text.to_owned()),
                });
            }
        }
        "tool_call" | "tool_call_update" => {
            let Some(fields) = update.as_object() else {
                return;
            };
            let Some(id) = fields
                .get("toolCallId")
                .and_then(Value::as_str)
                .map(str::to_owned)
            else {
                return;
            };
            let keep = ["title", "kind", "status"];
            let fresh: Map<String, Value> = fields
                .iter()
                .filter(|(k, v)| keep.contains(&k.as_str()) && !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            match heard.tool_index.get(&id).copied() {
                Some(at) => heard.tool_calls[at].1.extend(fresh),
                None if heard.tool_calls.len() >= MAX_TOOL_CALLS => heard.tool_calls_dropped += 1,
                None => {
                    let at = heard.tool_calls.len();
                    heard.tool_index.insert(id.clone(), at);
                    heard.tool_calls.push((id, fresh));
                }
            }
        }
        "plan" => heard.plan = update.get("entries").cloned(),
        _ => {}
    }
}

/// Asks the call's consent channel and picks the agent's matching option.
async fn permission(agent: &Agent, params: &Value) -> Value {
    let options: Vec<(&str, &str)> = params
        .get("options")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|o| {
                    Some((
                        o.get("optionId")?.as_str()?,
                        o.get("kind").and_then(Value::as_str).unwrap_or(""),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let pick = |kinds: &[&str]| {
        kinds.iter().find_map(|k| {
            options
                .iter()
                .find(|(_, kind)| kind == k)
                .map(|(id, _)| json!({"outcome": "selected", "optionId": id}))
        })
    };
    let reject =
        || pick(&["reject_once", "reject_always"]).unwrap_or(json!({"outcome": "cancelled"}));
    if options.is_empty() {
        tracing::info!(app = %agent.app(), "the agent asked for permission without options; cancelled");
        return json!({"outcome": "cancelled"});
    }
    let session = params
        .get("sessionId")
        .and_then(Value::as_str)
        .unwrap_or("");
    let turn = agent
        .turns
        .lock()
        .expect("turns lock")
        .get(session)
        .cloned();
    let Some((turn, asker)) = turn.and_then(|t| t.asker.clone().map(|a| (t, a))) else {
        tracing::info!(app = %agent.app(), "the agent asked for permission outside a call; rejected");
        return reject();
    };
    if turn.asks.fetch_add(1, Ordering::SeqCst) >= MAX_ASKS as u64 {
        tracing::warn!(app = %agent.app(), "the agent asked for permission more than {MAX_ASKS} times in one turn; rejected without asking");
        return reject();
    }
    let call = params.get("toolCall").cloned().unwrap_or(Value::Null);
    let kind = call
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .unwrap_or("other");
    // The title is the agent's text, shown to the user: no control characters.
    let title: String = call
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("an action it did not describe")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let asked = Permission {
        kind: kind
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(40)
            .collect(),
        title: format!(
            "the agent asks permission for: {}",
            crate::text::excerpt(title.trim(), 300)
        ),
    };
    match asker(asked).await {
        Ok(()) => pick(&["allow_once", "allow_always"]).unwrap_or_else(reject),
        Err(why) => {
            tracing::info!(app = %agent.app(), "permission refused: {why}");
            reject()
        }
    }
}

/// One app's agent, once started (locked while it starts, so first calls share a start).
type AgentSlot = Arc<tokio::sync::Mutex<Option<Arc<Agent>>>>;

/// Runs ACP agents.
#[derive(Default)]
pub(crate) struct AcpExecutor {
    agents: Mutex<HashMap<String, AgentSlot>>,
    failures: super::Failures<Error>,
}

impl std::fmt::Debug for AcpExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.agents.lock().map(|a| a.len()).unwrap_or(0);
        f.debug_struct("AcpExecutor").field("agents", &n).finish()
    }
}

impl Execute for AcpExecutor {
    /// The result is an MCP tool result: the agent's text, and the turn in
    /// `structuredContent`.
    async fn execute(&self, req: Request<'_>) -> Result<Value, super::Error> {
        Ok(self.call(req).await?)
    }
}

impl AcpExecutor {
    async fn call(&self, req: Request<'_>) -> Result<Value, Error> {
        let Executor::Acp(process) = req.executor else {
            unreachable!("dispatched by executor type");
        };
        let started = Started {
            process: process.clone(),
            base_dir: req.base_dir.to_owned(),
        };
        let begun = std::time::Instant::now();
        let deadline = req.ctx.timeout.min(START_DEADLINE);
        let agent = tokio::select! {
            agent = self.agent(req.app, &started, &req.secrets, deadline) => agent?,
            () = req.ctx.cancel.cancelled() => {
                return Err(Error::CancelledStarting);
            }
        };
        let args = req.args.as_object().cloned().unwrap_or_default();
        let session = self.session(&agent, &args, &req).await?;

        let turn = Arc::new(Turn {
            heard: Mutex::default(),
            progress: req.ctx.progress.clone(),
            asker: req.ctx.permission.clone(),
            asks: AtomicU64::new(0),
        });
        {
            let mut turns = agent.turns.lock().expect("turns lock");
            if turns.contains_key(&session) {
                return Err(Error::Busy(session));
            }
            turns.insert(session.clone(), turn.clone());
        }
        let text = prompt_text(req.tool, &args);
        let params = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        let prompt = agent.request("session/prompt", params, Duration::MAX);
        tokio::pin!(prompt);
        let ended = tokio::select! {
            answer = &mut prompt => Ok(answer),
            // Starting the agent took part of the call's time.
            () = tokio::time::sleep(req.ctx.timeout.saturating_sub(begun.elapsed())) => Err(Stopped::TimedOut),
            () = req.ctx.cancel.cancelled() => Err(Stopped::Cancelled),
        };
        let answer = match ended {
            Ok(answer) => answer,
            Err(stopped) => {
                agent
                    .notify("session/cancel", json!({"sessionId": session}))
                    .await;
                if tokio::time::timeout(CANCEL_GRACE, &mut prompt)
                    .await
                    .is_err()
                {
                    tracing::warn!(app = %req.app, "the agent did not end a cancelled turn; stopping it");
                    agent.kill();
                }
                agent.turns.lock().expect("turns lock").remove(&session);
                let why = match stopped {
                    Stopped::TimedOut => Error::TimedOut(req.ctx.timeout),
                    Stopped::Cancelled => Error::Cancelled,
                };
                return Err(why.in_session(&session));
            }
        };
        agent.turns.lock().expect("turns lock").remove(&session);
        let answer = answer.map_err(|e| {
            if !agent.child.is_alive() {
                Error::Gone(e.message)
            } else {
                self.rpc_error(&agent, "session/prompt", e)
            }
            .in_session(&session)
        })?;
        let stop = answer
            .get("stopReason")
            .and_then(Value::as_str)
            .unwrap_or("end_turn")
            .to_owned();
        let heard = std::mem::take(&mut *turn.heard.lock().expect("heard lock"));
        Ok(result(&session, &stop, heard))
    }

    /// The session this call continues (`sessionId`) or a new one.
    async fn session(
        &self,
        agent: &Arc<Agent>,
        args: &Map<String, Value>,
        req: &Request<'_>,
    ) -> Result<String, Error> {
        let cwd = match args.get("cwd").and_then(Value::as_str) {
            Some(dir) => {
                let dir = PathBuf::from(dir);
                if !dir.is_absolute() || !dir.is_dir() {
                    return Err(Error::BadCwd);
                }
                dir
            }
            None => req.ctx.cwd.clone().unwrap_or_else(home),
        };
        let cwd = cwd.to_string_lossy().into_owned();
        if let Some(id) = args.get("sessionId").and_then(Value::as_str) {
            if agent
                .sessions
                .lock()
                .expect("sessions lock")
                .iter()
                .any(|s| s == id)
            {
                return Ok(id.to_owned());
            }
            if !agent.can_load_sessions() {
                return Err(Error::UnknownSession(id.to_owned()));
            }
            let params = json!({"sessionId": id, "cwd": cwd, "mcpServers": []});
            agent
                .request("session/load", params, SESSION_DEADLINE)
                .await
                .map_err(|e| self.rpc_error(agent, "session/load", e))?;
            agent
                .sessions
                .lock()
                .expect("sessions lock")
                .push(id.to_owned());
            return Ok(id.to_owned());
        }
        let params = json!({"cwd": cwd, "mcpServers": []});
        let created = agent
            .request("session/new", params, SESSION_DEADLINE)
            .await
            .map_err(|e| self.rpc_error(agent, "session/new", e))?;
        let id = created
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or(Error::NoSessionId)?
            .to_owned();
        agent
            .sessions
            .lock()
            .expect("sessions lock")
            .push(id.clone());
        Ok(id)
    }

    fn rpc_error(&self, agent: &Agent, method: &'static str, e: RpcError) -> Error {
        if e.code == AUTH_REQUIRED
            && let Some(methods) = agent.auth_methods()
        {
            return Error::SignIn {
                app: agent.app().to_owned(),
                message: e.message,
                methods,
            };
        }
        Error::Rpc {
            method,
            code: e.code,
            message: e.message,
        }
    }

    /// The running agent of `app`, started and initialized (within `deadline`) if needed.
    /// Concurrent callers wait for the same start, and share its failure.
    async fn agent(
        &self,
        app: &str,
        started: &Started,
        secrets: &[(String, crate::auth::Secret)],
        deadline: Duration,
    ) -> Result<Arc<Agent>, Error> {
        let slot = self
            .agents
            .lock()
            .expect("agents lock")
            .entry(app.to_owned())
            .or_default()
            .clone();
        let asked = std::time::Instant::now();
        let mut slot = slot.lock().await;
        if let Some(agent) = slot.as_ref() {
            if agent.child.is_alive() && agent.started == *started {
                return Ok(agent.clone());
            }
            tracing::info!(app, "the agent exited or changed; starting it again");
            agent.kill();
        }
        *slot = None;
        if let Some(why) = self.failures.since(app, asked) {
            return Err(why);
        }
        let agent = Self::start(app, started, secrets, deadline)
            .await
            .inspect_err(|why| self.failures.record(app, why))?;
        *slot = Some(agent.clone());
        Ok(agent)
    }

    /// Starts `app`'s agent and runs `initialize`, within `deadline`.
    async fn start(
        app: &str,
        started: &Started,
        secrets: &[(String, crate::auth::Secret)],
        deadline: Duration,
    ) -> Result<Arc<Agent>, Error> {
        let spawned = process::spawn(&process::Spec {
            program: &started.process.command,
            args: &started.process.args,
            env: &crate::auth::fill::fill_all(&started.process.env, secrets),
            base_dir: &started.base_dir,
            label: app,
        })?;
        let (child, stdout) = Child::new(app, spawned);
        let agent = Arc::new(Agent {
            child,
            started: started.clone(),
            turns: Mutex::default(),
            sessions: Mutex::default(),
            next_id: AtomicU64::new(0),
            info: Mutex::new(Value::Null),
        });
        tokio::spawn(read_messages(agent.clone(), stdout));
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {
                "fs": {"readTextFile": false, "writeTextFile": false},
                "terminal": false,
            },
            "clientInfo": {"name": "aai-gateway", "version": env!("CARGO_PKG_VERSION")},
        });
        let info = agent
            .request("initialize", params, deadline)
            .await
            .map_err(|e| {
                let note = agent.stderr_note();
                agent.kill();
                Error::NotStarted {
                    message: e.message,
                    note,
                }
            })?;
        let version = info.get("protocolVersion");
        if version.and_then(Value::as_u64) != Some(PROTOCOL_VERSION) {
            agent.kill();
            return Err(Error::Version(version.map_or_else(
                || "(none given)".to_owned(),
                |v| crate::text::excerpt(&v.to_string(), 40),
            )));
        }
        *agent.info.lock().expect("info lock") = info;
        tracing::info!(app, "agent started");
        Ok(agent)
    }

    /// After a reload: stops the agents of apps that are gone or now start differently.
    pub(crate) fn retire_stale(&self, live: super::Live<'_>) {
        let mut agents = self.agents.lock().expect("agents lock");
        agents.retain(|app, slot| {
            let Ok(current) = slot.try_lock() else {
                return true; // starting or in use right now; checked on its next use
            };
            let keep = match (current.as_ref(), live(app)) {
                (Some(agent), Some(super::Start::Acp(now))) => now == agent.started,
                (None, Some(super::Start::Acp(_))) => true,
                _ => false,
            };
            if !keep && let Some(agent) = current.as_ref() {
                tracing::info!(app, "the app was removed or changed; stopping its agent");
                agent.kill();
            }
            keep
        });
    }

    /// Stops every agent and its process group.
    pub(crate) fn shutdown(&self) {
        let slots: Vec<_> = self
            .agents
            .lock()
            .expect("agents lock")
            .drain()
            .map(|(_, s)| s)
            .collect();
        for slot in slots {
            if let Ok(current) = slot.try_lock()
                && let Some(agent) = current.as_ref()
            {
                agent.kill();
            }
        }
    }
}

fn home() -> PathBuf {
    std::env::home_dir().unwrap_or_else(|| PathBuf::from("/"))
}

/// The prompt of a call: the `prompt` argument, or the tool's description and its
/// arguments (without `sessionId` and `cwd`).
fn prompt_text(tool: &aai_descriptor::Tool, args: &Map<String, Value>) -> String {
    if let Some(text) = args.get("prompt").and_then(Value::as_str) {
        return text.to_owned();
    }
    let rest: Map<String, Value> = args
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "sessionId" | "cwd"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    format!(
        "{}\n\nArguments (JSON):\n{}",
        tool.description,
        serde_json::to_string_pretty(&Value::Object(rest)).expect("JSON values serialize")
    )
}

/// The MCP tool result of a finished turn.
fn result(session: &str, stop: &str, heard: Heard) -> Value {
    let mut text = heard.text;
    if heard.text_dropped > 0 {
        text.push_str(&format!(
            "\n\n(… {} more bytes of the answer were left out: a result keeps at most 1 MiB.)",
            heard.text_dropped
        ));
    }
    let tool_calls: Vec<Value> = heard
        .tool_calls
        .into_iter()
        .map(|(id, mut fields)| {
            fields.insert("id".into(), Value::String(id));
            Value::Object(fields)
        })
        .collect();
    if !tool_calls.is_empty() {
        text.push_str("\n\nTool calls:");
        for call in &tool_calls {
            let field = |k: &str| call.get(k).and_then(Value::as_str).unwrap_or("");
            text.push_str(&format!(
                "\n- {} [{}] {}",
                field("title"),
                field("kind"),
                field("status")
            ));
        }
    }
    if heard.tool_calls_dropped > 0 {
        text.push_str(&format!(
            "\n- … and {} more tool calls (not listed)",
            heard.tool_calls_dropped
        ));
    }
    if let Some(Value::Array(entries)) = &heard.plan {
        text.push_str("\n\nPlan:");
        for entry in entries {
            let field = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or("");
            text.push_str(&format!("\n- [{}] {}", field("status"), field("content")));
        }
    }
    if stop != "end_turn" {
        text.push_str(&format!("\n\n(The turn ended: {stop}.)"));
    }
    text.push_str(&format!(
        "\n\n(sessionId `{session}`: pass it as `sessionId` to continue this session.)"
    ));
    json!({
        "content": [{"type": "text", "text": text.trim_start()}],
        "structuredContent": {
            "sessionId": session,
            "stopReason": stop,
            "toolCalls": tool_calls,
            "plan": heard.plan.unwrap_or(Value::Array(Vec::new())),
        },
        "isError": false,
    })
}
