//! Executors: how a tool call reaches an app. One module per executor type, each
//! implementing [`Execute`]; [`Executors`] owns them and dispatches by binding type.
//!
//! Executors never ask for consent and never read the secret store: they get an
//! already-validated call. They create processes only through [`process`].

pub(crate) mod acp;
mod child;
pub(crate) mod com;
#[cfg(target_os = "linux")]
pub(crate) mod dbus;
pub(crate) mod envelope;
pub(crate) mod http;
pub(crate) mod intent;
pub(crate) mod listed;
pub(crate) mod mcp;
pub(crate) mod process;
pub(crate) mod reach;
pub(crate) mod script;
pub(crate) mod skill;
pub mod start;
pub(crate) mod stdio;
pub(crate) mod template;
pub(crate) mod url_scheme;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use aai_descriptor::{Executor, Tool};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::GatewayError;

/// Progress of a long call, forwarded to the client when it asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Work done so far.
    pub progress: f64,
    /// Total work, when known.
    pub total: Option<f64>,
    /// What is happening.
    pub message: Option<String>,
}

/// Where progress goes.
pub(crate) type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// What a downstream MCP server may ask of the client a call came from, mid-call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// `elicitation/create`: a question for the user.
    Elicitation,
    /// `sampling/createMessage`: a completion from the client's model.
    Sampling,
    /// `roots/list`: the client's roots.
    Roots,
}

impl Ask {
    /// The MCP method.
    pub fn method(self) -> &'static str {
        match self {
            Ask::Elicitation => "elicitation/create",
            Ask::Sampling => "sampling/createMessage",
            Ask::Roots => "roots/list",
        }
    }
}

/// Why the calling client did not answer a downstream server's request.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Unanswered(pub String);

/// The client a call came from, as the requests of a downstream MCP server reach it (the
/// MCP front door supplies it; other front doors have none).
pub trait Upstream: Send + Sync {
    /// Whether the client declared the capability.
    fn offers(&self, ask: Ask) -> bool;
    /// The client session: a downstream server's request goes to the session of its own
    /// call, never to another one's.
    fn session(&self) -> u64;
    /// Sends the request with `params` (JSON) and returns the client's result (JSON).
    fn request(
        &self,
        ask: Ask,
        params: Value,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Value, Unanswered>> + Send>>;
}

/// A shared [`Upstream`].
pub(crate) type UpstreamRef = Arc<dyn Upstream>;

/// An app's request, mid-call, to do something that needs the user's permission (an ACP
/// agent about to edit a file or run a command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permission {
    /// The kind of action (`edit`, `execute`, `read`, …; `other` when not said).
    pub kind: String,
    /// What exactly, in the app's words.
    pub title: String,
}

/// Why a [`Permission`] was not given: what happened, and the message the app's log and
/// answer carry.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    kind: RefusedKind,
    message: String,
}

/// What kept a [`Permission`] from being given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedKind {
    /// Nobody can answer here (a command-line call without a terminal, and a consent mode
    /// other than `allow`).
    NobodyToAsk,
    /// The user said no.
    Denied,
    /// Consent did not allow it (its mode, the user's answer, or none in time).
    Consent,
}

impl Refused {
    /// A refusal of `kind` that says `message`.
    pub fn new(kind: RefusedKind, message: impl Into<String>) -> Refused {
        Refused {
            kind,
            message: message.into(),
        }
    }

    /// What happened.
    pub fn kind(&self) -> RefusedKind {
        self.kind
    }
}

/// Asks the user about a [`Permission`] on behalf of the call; `Err` says why it was not
/// allowed. It never waits longer than consent waits (`consentWait`).
pub(crate) type Asker = Arc<
    dyn Fn(Permission) -> std::pin::Pin<Box<dyn Future<Output = Result<(), Refused>> + Send>>
        + Send
        + Sync,
>;

/// How one call runs: its deadline, its cancellation, its progress sink.
#[derive(Clone)]
pub struct CallContext {
    /// Give up after this long.
    pub timeout: Duration,
    /// Cancelled when the client cancels the request or goes away.
    pub cancel: CancellationToken,
    /// Progress sink, when the client sent a progress token.
    pub progress: Option<ProgressSink>,
    /// How often a call that is safe to retry may be retried (config `retries`).
    pub retries: u32,
    /// How to ask the user when the app asks for permission mid-call; `None` refuses.
    pub permission: Option<Asker>,
    /// The working folder an agent's new session gets when the call names none
    /// (`apps.<id>.cwd`; else the user's home).
    pub cwd: Option<std::path::PathBuf>,
    /// The client the call came from, for a downstream MCP server's requests.
    pub upstream: Option<UpstreamRef>,
    /// The W3C trace context to pass on (`traceparent`/`tracestate` headers to web apps,
    /// `_meta` to MCP servers): the executor span's, or the caller's when traces are off.
    pub trace: Option<crate::telemetry::Context>,
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("timeout", &self.timeout)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// One validated call.
#[derive(Debug)]
pub struct Request<'a> {
    /// The app id.
    pub app: &'a str,
    /// The binding's executor settings.
    pub executor: &'a Executor,
    /// The descriptor's folder (relative commands resolve against it).
    pub base_dir: &'a Path,
    /// The tool.
    pub tool: &'a Tool,
    /// Validated arguments, defaults applied.
    pub args: Value,
    /// What authentication adds to the request (web bindings).
    pub auth: Option<crate::auth::Material>,
    /// Whose sign-in `auth` is: a downstream MCP server is reached over one connection
    /// per sign-in, so that no person's requests travel on another's.
    pub who: crate::identity::Who,
    /// The values of the `${NAME}` placeholders in the binding's `env` or `headers`
    /// (`auth::fill`), resolved by the pipeline; filled in when the program starts.
    pub secrets: Vec<(String, crate::auth::Secret)>,
    /// Deadline, cancellation, progress.
    pub ctx: CallContext,
}

/// How a call failed, in the terms of the executor that ran it. Each executor's type
/// gets its wire code in the one `From` impl beside it; the pipeline only asks whether
/// the service refused the credential the request carried ([`Error::unauthorized`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An HTTP call.
    #[error(transparent)]
    Http(#[from] http::Error),
    /// An Android intent.
    #[error(transparent)]
    Intent(#[from] intent::Error),
    /// An iOS URL scheme.
    #[error(transparent)]
    UrlScheme(#[from] url_scheme::Error),
    /// A stdio adapter.
    #[error(transparent)]
    Stdio(#[from] stdio::Error),
    /// A downstream MCP server.
    #[error(transparent)]
    Mcp(#[from] mcp::Error),
    /// An ACP agent.
    #[error(transparent)]
    Acp(#[from] acp::Error),
    /// A COM automation.
    #[error(transparent)]
    Com(#[from] com::Error),
    /// A D-Bus call.
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Dbus(#[from] dbus::Error),
    /// An AppleScript, JXA or Apple event call.
    #[error(transparent)]
    Script(#[from] script::Error),
    /// An Agent Skill.
    #[error(transparent)]
    Skill(#[from] skill::Error),
    /// This host cannot run the binding at all.
    #[error("{0} bindings run on {1} only")]
    Unsupported(&'static str, &'static str),
}

impl Error {
    /// The service refused the credential the request carried (HTTP 401): the pipeline
    /// may renew it and try once more.
    pub fn unauthorized(&self) -> bool {
        match self {
            Error::Http(e) => e.unauthorized(),
            Error::Mcp(e) => e.unauthorized(),
            _ => false,
        }
    }

    /// The scopes a remote MCP server wants when it refused a token for lack of scope
    /// (HTTP 403 `insufficient_scope`): only a new sign-in helps.
    pub fn needs_scope(&self) -> Option<Vec<String>> {
        match self {
            Error::Mcp(e) => e.needs_scope(),
            _ => None,
        }
    }
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        match e {
            Error::Http(e) => e.into(),
            Error::Intent(e) => e.into(),
            Error::UrlScheme(e) => e.into(),
            Error::Com(e) => e.into(),
            Error::Stdio(e) => e.into(),
            Error::Acp(e) => e.into(),
            Error::Mcp(e) => e.into(),
            Error::Script(e) => e.into(),
            Error::Skill(e) => e.into(),
            #[cfg(target_os = "linux")]
            Error::Dbus(e) => e.into(),
            Error::Unsupported(..) => {
                GatewayError::new(crate::error::Code::AutomationNotSupported, e.to_string())
            }
        }
    }
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The tool's JSON result.
    Json(Value),
    /// A whole MCP tool result (`content`, `structuredContent`, `isError`) to pass on as
    /// it is: downstream MCP servers and ACP agents.
    Mcp(Value),
}

/// Runs `program` once for `req` (its deadline, cancellation and app label), from `/`
/// unless the app has a folder; at most `max_output` bytes of each stream are kept.
async fn run_once(
    req: &Request<'_>,
    program: &str,
    args: &[String],
    stdin: &[u8],
    max_output: usize,
) -> Result<process::Output, process::RunError> {
    let spec = process::Spec {
        program,
        args,
        env: &[],
        base_dir: req.base_dir,
        label: req.app,
    };
    let limits = process::Limits {
        deadline: req.ctx.timeout,
        max_output,
        cancel: req.ctx.cancel.clone(),
    };
    process::run(&spec, stdin, &limits).await
}

/// What a program's failure report said, for an error: `<program> said: …`, or that it
/// failed without a message.
fn said(program: &str, said: &str) -> String {
    if said.is_empty() {
        format!("{program} failed without a message")
    } else {
        format!("{program} said: {said}")
    }
}

/// An executor type.
pub(crate) trait Execute {
    /// Runs one call; the result is the tool's JSON result.
    fn execute(&self, req: Request<'_>) -> impl Future<Output = Result<Value, Error>> + Send;
}

/// Where an app's events arrive, each as its data, in order ([`Executors::events`]).
pub(crate) type EventStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = serde_json::Value> + Send>>;

/// What starting or reaching an app takes when its events are listened to (a downstream
/// MCP server is started, or reached with its credential, as for a call).
pub(crate) struct Opening<'a> {
    /// The descriptor's folder.
    pub base_dir: &'a Path,
    /// The app's credential, when it has one.
    pub auth: Option<crate::auth::Material>,
    /// Whose sign-in that is.
    pub who: crate::identity::Who,
    /// The values of the binding's `${NAME}` placeholders.
    pub secrets: Vec<(String, crate::auth::Secret)>,
}

/// All executors of the gateway.
#[derive(Debug, Default)]
pub struct Executors {
    stdio: stdio::StdioExecutor,
    http: http::HttpExecutor,
    script: script::ScriptExecutor,
    com: com::ComExecutor,
    intent: intent::IntentExecutor,
    url_scheme: url_scheme::UrlSchemeExecutor,
    mcp: mcp::McpExecutor,
    acp: acp::AcpExecutor,
    skill: skill::SkillExecutor,
    #[cfg(target_os = "linux")]
    dbus: dbus::DbusExecutor,
}

impl Executors {
    /// Runs `req` with the executor its binding names.
    pub async fn execute(&self, req: Request<'_>) -> Result<Reply, Error> {
        let json = match req.executor {
            Executor::Mcp(_) => return self.mcp.execute(req).await.map(Reply::Mcp),
            Executor::Acp(_) => return self.acp.execute(req).await.map(Reply::Mcp),
            Executor::Skill(_) => return self.skill.execute(req).await.map(Reply::Mcp),
            // The pipeline runs the gateway's own app itself (`manage/`).
            Executor::Gateway => return Err(Error::Unsupported("gateway", "the pipeline")),
            Executor::Stdio(_) => self.stdio.execute(req).await,
            Executor::Http(_) => self.http.execute(req).await,
            Executor::Applescript | Executor::Jxa | Executor::AppleEvents(_) => {
                self.script.execute(req).await
            }
            Executor::Com(_) => self.com.execute(req).await,
            Executor::Intent(_) => self.intent.execute(req).await,
            Executor::UrlScheme(_) => self.url_scheme.execute(req).await,
            #[cfg(target_os = "linux")]
            Executor::Dbus(_) => self.dbus.execute(req).await,
            #[cfg(not(target_os = "linux"))]
            Executor::Dbus(_) => Err(Error::Unsupported("D-Bus", "Linux")),
        };
        json.map(Reply::Json)
    }

    /// The downstream MCP servers.
    pub fn mcp(&self) -> &mcp::McpExecutor {
        &self.mcp
    }

    /// The data of each `source` event of `app`, reached through `executor`, from now on:
    /// D-Bus signals and property changes, and a downstream MCP server's resource updates.
    pub(crate) async fn events(
        &self,
        app: &str,
        executor: &Executor,
        source: &aai_descriptor::EventSource,
        opening: &Opening<'_>,
    ) -> Result<EventStream, Error> {
        use aai_descriptor::EventSource;
        match (executor, source) {
            (Executor::Mcp(server), EventSource::McpResource { uri }) => {
                Ok(self.mcp.watch(app, server, opening, uri).await?)
            }
            #[cfg(target_os = "linux")]
            (Executor::Dbus(target), _) => Ok(self.dbus.events(target, source).await?),
            #[cfg(not(target_os = "linux"))]
            (Executor::Dbus(_), _) => Err(Error::Unsupported("D-Bus", "Linux")),
            _ => Err(Error::Unsupported(
                "events",
                "D-Bus apps and downstream MCP servers",
            )),
        }
    }

    /// After a reload: retires adapters whose app is gone or now starts differently
    /// (`live`: how each app's process would start now); they finish their in-flight
    /// calls first.
    pub(crate) fn retire_stale(&self, live: Live<'_>) {
        self.stdio.retire_stale(live);
        self.mcp.retire_stale(live);
        self.acp.retire_stale(live);
    }

    /// Stops every process the executors started.
    pub fn shutdown(&self) {
        self.stdio.shutdown();
        self.mcp.shutdown();
        self.acp.shutdown();
    }
}

/// How an app's long-lived process or connection would start now, by app id (`None`:
/// the app is gone, or starts none); anything started differently is retired after a
/// reload. Asked only of the apps that run something, so a reload of 10,000 apps does not
/// work out how each would start.
pub(crate) type Live<'a> = &'a dyn Fn(&str) -> Option<Start>;

/// How an app's long-lived process or connection starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Start {
    /// A stdio adapter.
    Stdio(stdio::Started),
    /// A downstream MCP server.
    Mcp(aai_descriptor::McpServer),
    /// An ACP agent.
    Acp(stdio::Started),
}

/// Each app's last failed start (of a server or an agent): when it ended, and why. A
/// caller that was already waiting for that start takes its answer instead of starting
/// (and waiting) again; a caller that comes later tries anew.
#[derive(Debug)]
pub(crate) struct Failures<E>(
    std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, E)>>,
);

impl<E> Default for Failures<E> {
    fn default() -> Self {
        Failures(std::sync::Mutex::default())
    }
}

impl<E: Clone> Failures<E> {
    /// The failure of a start of `app` that ended after `asked` (when the caller began
    /// to wait), if any.
    pub(crate) fn since(&self, app: &str, asked: std::time::Instant) -> Option<E> {
        let failures = self.0.lock().expect("failures lock");
        let (at, why) = failures.get(app)?;
        (*at >= asked).then(|| why.clone())
    }

    /// Records that a start of `app` failed now.
    pub(crate) fn record(&self, app: &str, why: &E) {
        self.0
            .lock()
            .expect("failures lock")
            .insert(app.to_owned(), (std::time::Instant::now(), why.clone()));
    }
}
