//! One tool call from request to result, the same for every front door (MCP over stdio
//! and HTTP, the web UI, `call`, batches): find the app and tool, apply schema defaults,
//! validate the arguments (the MCP SDK does not), ask for consent, pick the timeout (tool,
//! else binding, else `defaultTimeout`), resolve credentials, execute, record. Calls wait
//! for the first scan to finish.
//!
//! [`Pipeline`] is built from explicit parts — where apps are found ([`Apps`], the
//! gateway's snapshot), the executors, the consent gate, the credential resolver, the
//! history sink, the metrics and the rate limiter — so it is tested without a gateway.
//!
//! Rate limits apply first: the caller's person bucket before anything else (web
//! discovery included), the app's once the app is found; both before consent is asked and
//! before any executor runs.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::auth::Authenticator;
use crate::consent::Gate;
use crate::consent::site::Sites;
use crate::error::{Code, GatewayError};
use crate::exec::{self, Executors};
use crate::history::Sink;
use crate::host::Os;
use crate::registry::{Missing, Snapshot};
use crate::telemetry::{self, Kind};

mod args;
mod call;
mod events;
mod manage;
mod memo;
mod ranked;
pub use crate::consent::Within;
use args::validate;
pub(crate) use args::with_defaults;
pub(crate) use events::RESOURCE_UPDATED;

/// Why the call path refused a call before any executor ran. `From<Error> for
/// GatewayError` below gives the wire codes and `data`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No such app (`detail` suggests close ids, or `web_discover` for a domain).
    #[error("{detail}")]
    NoApp {
        /// The id asked for.
        app: String,
        /// What to say.
        detail: String,
    },
    /// The app's descriptor does not load.
    #[error("the descriptor of `{app}` ({}) does not load: {}", .file.display(), .problems.join("; "))]
    Broken {
        /// The id.
        app: String,
        /// The descriptor.
        file: PathBuf,
        /// Its errors.
        problems: Vec<String>,
    },
    /// The app is not active on this machine (a `discovery.checks` entry does not hold).
    #[error("`{app}` is not active on this machine ({}): {why}", .file.display())]
    Inactive {
        /// The id.
        app: String,
        /// The descriptor.
        file: PathBuf,
        /// The check that does not hold, and why.
        why: String,
    },
    /// The app has no binding for this host.
    #[error("`{app}` cannot run on this host ({}): it has bindings for {} only", .host.as_str(), .has.join(", "))]
    Unsupported {
        /// The id.
        app: String,
        /// This host.
        host: Os,
        /// `platform (kind)` of each binding.
        has: Vec<String>,
        /// The platforms it has.
        platforms: Vec<String>,
    },
    /// No such tool in the app (`hint`: its tools, or the close ones).
    #[error("`{app}` has no tool `{tool}`; {hint}")]
    NoTool {
        /// The id.
        app: String,
        /// The name asked for, escaped and cut.
        tool: String,
        /// What it has.
        hint: String,
    },
    /// No such event of the app (`hint`: its events).
    #[error("`{app}` has no event `{event}`; {hint}")]
    NoEvent {
        /// The id.
        app: String,
        /// The name asked for.
        event: String,
        /// What it has.
        hint: String,
    },
    /// Arguments that are not an object.
    #[error("arguments must be a JSON object, not {0}")]
    NotObject(&'static str),
    /// The tool's schema does not compile (load accepted it; a guard).
    #[error("the tool's parameter schema does not compile: {0}")]
    Schema(String),
    /// The arguments break the schema (`field`: the first place, masked).
    #[error("{detail}")]
    Invalid {
        /// Every violation, named by field, never by value.
        detail: String,
        /// The first one's pointer.
        field: String,
    },
    /// Validation ran out of its time (a regex on hostile input).
    #[error("validation took too long (over {} s); the arguments were refused", args::VALIDATION_DEADLINE.as_secs())]
    ValidationSlow,
    /// Validation's blocking task failed.
    #[error("validating the arguments failed: {0}")]
    ValidationFailed(String),
    /// The gateway is shutting down.
    #[error("the gateway is stopping")]
    Stopping,
    /// The site's certificate could not be fetched for the question.
    #[error("the site's certificate could not be checked before the first call: {0}")]
    SiteUnchecked(String),
    /// This pipeline was built without the gateway's own app's part (an embedding).
    #[error("managing apps is not available here")]
    NoManager,
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match &e {
            Error::NoApp { .. } => Code::AppNotFound,
            Error::Broken { .. } | Error::Schema(_) => Code::AaiJsonInvalid,
            Error::Unsupported { .. } | Error::Inactive { .. } => Code::AutomationNotSupported,
            Error::NoTool { .. } | Error::NoEvent { .. } => Code::ToolNotFound,
            Error::NotObject(_) | Error::Invalid { .. } | Error::ValidationSlow => {
                Code::InvalidParams
            }
            Error::ValidationFailed(_) => Code::AutomationFailed,
            Error::SiteUnchecked(_) | Error::Stopping | Error::NoManager => {
                Code::ServiceUnavailable
            }
        };
        let wire = GatewayError::new(code, e.to_string());
        match e {
            Error::NoApp { app, .. } => wire.with("app", app),
            Error::Broken { app, file, .. } => wire
                .with("app", app)
                .with("file", file.display().to_string())
                .with(
                    "command",
                    format!("aai-gateway validate {}", file.display()),
                ),
            Error::Unsupported {
                app,
                host,
                platforms,
                ..
            } => wire
                .with("app", app)
                .with("host", host.as_str())
                .with("platforms", platforms),
            Error::Inactive { app, file, .. } => wire
                .with("app", app)
                .with("file", file.display().to_string()),
            Error::Invalid { field, .. } => wire.with("field", field),
            _ => wire,
        }
    }
}

/// How long a prompt to an ACP agent may run when its descriptor sets no timeout.
const AGENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Who asks for a call, and how to ask the user about it.
#[derive(Clone)]
pub struct Origin {
    /// The caller (client name and transport).
    pub caller: crate::identity::Caller,
    /// The front door's way to ask the user, when it has one.
    pub prompter: Option<crate::consent::SharedPrompter>,
    /// The calling MCP client, for a downstream MCP server's requests of it.
    pub client: Option<exec::UpstreamRef>,
    /// The caller's W3C trace context (`traceparent`), when it sent a valid one.
    pub trace: Option<crate::telemetry::Context>,
    /// The script run or batch the call is part of.
    pub within: Option<Arc<Within>>,
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Origin")
            .field("caller", &self.caller)
            .field("prompter", &self.prompter.is_some())
            .field("client", &self.client.is_some())
            .field("trace", &self.trace)
            .field("within", &self.within.as_ref().map(|w| &w.id))
            .finish()
    }
}

/// A call's cancellation, progress and spans.
struct Control<'a> {
    cancel: tokio_util::sync::CancellationToken,
    progress: Option<crate::exec::ProgressSink>,
    spans: &'a telemetry::Call,
}

/// What a call learned on its way, for its history record.
#[derive(Debug, Default)]
struct Trace {
    /// The id of the app the name resolved to.
    app_id: Option<String>,
    /// The name of the tool it resolved to.
    tool: Option<String>,
    /// The rate limit that refused it.
    limited: Option<crate::ratelimit::Scope>,
    /// The fingerprint of the tool's definition (`consent::fingerprint`).
    fingerprint: Option<String>,
    /// The secrets the request carried (scrubbed from the excerpt).
    secrets: Vec<String>,
}

/// A successful call.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The tool's result.
    pub value: Value,
    /// Whether the tool declares a `returns` schema (the result is then also structured).
    pub structured: bool,
    /// Whether `value` is a whole MCP tool result to pass on as it is (downstream MCP
    /// servers, ACP agents).
    pub mcp: bool,
}

/// A future the [`Apps`] methods return.
pub type AppsFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where the pipeline finds apps: the served snapshot, and the two ways a call adds to
/// it (a downstream server's tools listed on first use, a web app discovered by URL).
pub trait Apps: Send + Sync {
    /// The served apps, once the first scan has finished.
    fn snapshot(&self) -> AppsFuture<'_, Arc<Snapshot>>;
    /// `snapshot`, or a new one with `app`'s tools in it when it is a downstream MCP
    /// server whose tools are not known yet (and may start), listed with `caller`'s
    /// sign-in ([`Pipeline::who`]).
    fn listed<'a>(
        &'a self,
        snapshot: Arc<Snapshot>,
        app: &'a str,
        caller: &'a crate::identity::Caller,
    ) -> AppsFuture<'a, Result<Arc<Snapshot>, GatewayError>>;
    /// Finds the web app at `url` (fetched, or from the web cache); its app id.
    fn discover_web<'a>(&'a self, url: &'a str) -> AppsFuture<'a, Result<String, GatewayError>>;
    /// Looks at the apps again now (after the gateway's own app changed them), so that
    /// the next call sees the change; nothing by default.
    fn refresh(&self) -> AppsFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// The settings a call reads.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `defaultTimeout`.
    pub default_timeout: Duration,
    /// `retries`.
    pub retries: u32,
    /// `secrets.fromEnvironment`.
    pub secrets_from_environment: bool,
    /// `apps.<id>.cwd`: an agent's working folder.
    pub cwd: std::collections::HashMap<String, PathBuf>,
    /// This machine's OS (for why an app is not served).
    pub os: Os,
    /// `batch.maxCalls`.
    pub batch_max_calls: usize,
    /// `batch.concurrency`.
    pub batch_concurrency: usize,
    /// `undo.timeoutMs`: the undos of one atomic run or batch, together.
    pub undo_timeout: Duration,
    /// `web.auth.scopeAccess`: what each scope of a signed-in person opens.
    pub scope_access: crate::visibility::ScopeAccess,
    /// `apps.<id>.signIn: "shared"`: apps whose one sign-in serves everybody.
    pub shared_sign_ins: std::collections::HashSet<String>,
}

/// The call path: shared by every front door, cheap to clone.
#[derive(Clone)]
pub struct Pipeline {
    apps: Arc<dyn Apps>,
    executors: Arc<Executors>,
    consent: Arc<Gate>,
    auth: Arc<Authenticator>,
    /// Where finished calls are recorded.
    history: Option<Arc<dyn Sink>>,
    /// Each client's use of apps and tools, for ranking.
    usage: Arc<crate::usage::Usage>,
    /// Apps' events that are listened to.
    events: Arc<crate::events::Hub>,
    /// Web apps' servers and certificates, for consent.
    sites: Arc<Sites>,
    /// What the gateway's own app (`aai`) runs; `None`: its calls are refused.
    manage: Option<Arc<crate::manage::Manager>>,
    /// Where calls are counted (`/metrics`).
    metrics: Option<Arc<crate::metrics::Metrics>>,
    /// Rate limits (`rateLimits`); `None`: none.
    limits: Option<Arc<crate::ratelimit::Limiter>>,
    settings: Arc<Settings>,
    /// Each limited client's view, with the snapshot it was made from.
    views: Arc<std::sync::Mutex<Views>>,
    /// Where call spans go (config `telemetry.otlp`); `None`: traces are off.
    telemetry: Option<Arc<telemetry::Telemetry>>,
    /// Fingerprints and starts worked out per served app.
    memo: Arc<memo::Memo>,
    /// Team mode: people's tokens exchanged for remote MCP servers' ([`Pipeline::set_team`]).
    exchange: Arc<std::sync::OnceLock<crate::access::exchange::Exchanger>>,
}

/// Each limited client's view, with the snapshot it was made from, by client name (and
/// a person's scopes).
type Views = std::collections::HashMap<String, (Arc<Snapshot>, Arc<Snapshot>)>;

/// How many clients' views are kept (more distinct names start the cache anew).
const VIEWS_KEPT: usize = 32;

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("settings", &self.settings)
            .field("history", &self.history.is_some())
            .field("telemetry", &self.telemetry.is_some())
            .finish_non_exhaustive()
    }
}

/// The parts a [`Pipeline`] is built from.
#[derive(Debug)]
pub struct Parts {
    /// The executors.
    pub executors: Arc<Executors>,
    /// The consent gate.
    pub consent: Arc<Gate>,
    /// Credentials.
    pub auth: Arc<Authenticator>,
    /// Where finished calls are recorded.
    pub history: Option<Arc<dyn Sink>>,
    /// Web apps' servers and certificates.
    pub sites: Arc<Sites>,
    /// What the gateway's own app runs.
    pub manage: Option<Arc<crate::manage::Manager>>,
    /// Where calls are counted.
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
    /// Rate limits.
    pub limits: Option<Arc<crate::ratelimit::Limiter>>,
    /// Settings.
    pub settings: Settings,
}

impl Pipeline {
    /// Waits (at most `wait`) until the history has stored every call so far.
    pub fn flush_history(&self, wait: std::time::Duration) {
        if let Some(history) = &self.history {
            history.flush(wait);
        }
    }

    /// A pipeline over `apps` with `parts`.
    pub fn new(apps: Arc<dyn Apps>, parts: Parts) -> Pipeline {
        if let Some(metrics) = &parts.metrics {
            let metrics = metrics.clone();
            parts.consent.observe(Arc::new(move |app, decision| {
                metrics.decided(app, decision.as_str());
            }));
        }
        Pipeline {
            apps,
            events: Arc::new(crate::events::Hub::new(parts.executors.clone())),
            executors: parts.executors,
            consent: parts.consent,
            auth: parts.auth,
            usage: Arc::new(crate::usage::Usage::new(parts.history.clone())),
            history: parts.history,
            sites: parts.sites,
            manage: parts.manage,
            metrics: parts.metrics,
            limits: parts.limits,
            settings: Arc::new(parts.settings),
            views: Arc::default(),
            memo: Arc::default(),
            telemetry: None,
            exchange: Arc::default(),
        }
    }

    /// The executors (the gateway's scans retire and list through them).
    pub fn executors(&self) -> &Arc<Executors> {
        &self.executors
    }

    /// The consent gate (what the web UI lists, answers and revokes).
    pub fn consent(&self) -> &Arc<Gate> {
        &self.consent
    }

    /// The credentials side.
    pub fn authenticator(&self) -> &Arc<Authenticator> {
        &self.auth
    }

    /// What the gateway's own app (`aai`) runs, when it may run anything.
    pub fn manager(&self) -> Option<&Arc<crate::manage::Manager>> {
        self.manage.as_ref()
    }

    /// Where calls are counted, when they are.
    pub fn metrics(&self) -> Option<&Arc<crate::metrics::Metrics>> {
        self.metrics.as_ref()
    }

    /// Where spans go, when they are exported.
    pub(crate) fn telemetry(&self) -> Option<&Arc<telemetry::Telemetry>> {
        self.telemetry.as_ref()
    }

    /// The settings calls run with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Tells the consent gate and the sign-in flows where the web UI is, so questions
    /// and sign-in links can point there.
    pub fn set_ui(&self, base: &str) {
        self.consent.set_ui(base.to_owned());
        self.auth.set_ui(base.to_owned());
    }

    /// This pipeline, recording a span per call into `telemetry`.
    pub fn with_telemetry(mut self, telemetry: Option<Arc<telemetry::Telemetry>>) -> Pipeline {
        self.telemetry = telemetry;
        self
    }

    /// Sends the spans still queued and stops the exporter (at most its configured
    /// `shutdownSeconds`); nothing when traces are off.
    pub fn shutdown_telemetry(&self) {
        if let Some(telemetry) = &self.telemetry {
            telemetry.shutdown();
        }
    }

    /// `snapshot` as `caller` sees it: config `clients`, and for a person of the team
    /// `web.auth.scopeAccess` and, without the admin scope, no gateway app `aai` (its
    /// changes are everyone's). The same one when nothing limits the caller, else its
    /// view, made once per snapshot.
    pub fn view(&self, snapshot: Arc<Snapshot>, caller: &crate::identity::Caller) -> Arc<Snapshot> {
        let visibility = snapshot.visibility.clone();
        let scopes = caller
            .person
            .as_ref()
            .filter(|_| self.settings.scope_access.limits())
            .map(|p| p.scopes.as_slice());
        let member = caller.person.as_ref().is_some_and(|p| !p.admin);
        // The rules are per MCP client: the user at the command line or the web UI sees all.
        if caller.is_user() || (!visibility.limits(&caller.name) && scopes.is_none() && !member) {
            return snapshot;
        }
        // Views are kept by client name and, for a person, whether they are an admin and
        // the scopes they hold.
        let key = match &caller.person {
            Some(person) => format!(
                "{}\u{0}{}\u{0}{}",
                caller.name,
                if person.admin { "admin" } else { "member" },
                scopes.map(|s| s.join(" ")).unwrap_or_default()
            ),
            None => caller.name.clone(),
        };
        let mut views = self.views.lock().expect("views lock");
        if let Some((base, view)) = views.get(&key)
            && Arc::ptr_eq(base, &snapshot)
        {
            return view.clone();
        }
        let access = &self.settings.scope_access;
        let opens = |id: &str| {
            !(member && id == crate::catalog::builtin::GATEWAY_ID)
                && scopes.is_none_or(|scopes| access.app(scopes, id))
        };
        let view = if caller.person.is_none() {
            match crate::registry::view::view(&visibility, &snapshot, &caller.name) {
                Some(view) => view,
                None => return snapshot,
            }
        } else {
            snapshot.filtered(
                |id: &str| visibility.app(&caller.name, id) && opens(id),
                |id: &str, names: &[&str]| {
                    names.iter().all(|n| visibility.tool(&caller.name, id, n))
                        && scopes.is_none_or(|scopes| access.tool(scopes, id, names))
                },
            )
        };
        let view = Arc::new(view);
        if views.len() >= VIEWS_KEPT {
            views.clear();
        }
        views.insert(key, (snapshot, view.clone()));
        view
    }

    /// The served apps, once the first scan has finished.
    pub async fn snapshot(&self) -> Arc<Snapshot> {
        self.apps.snapshot().await
    }

    /// See [`Apps::listed`]: listed with `caller`'s sign-in ([`Pipeline::who`]).
    pub async fn remote_tools(
        &self,
        snapshot: Arc<Snapshot>,
        app: &str,
        caller: &crate::identity::Caller,
    ) -> Result<Arc<Snapshot>, GatewayError> {
        self.apps.listed(snapshot, app, caller).await
    }

    /// What starting `entry`'s app needs approved before it may start now, when that is
    /// not allowed yet (`None`: nothing to start, or allowed).
    pub fn start_to_approve(
        &self,
        entry: &crate::registry::Entry,
    ) -> Option<crate::consent::Start> {
        let start = self.memo.start(entry)?;
        (!self.consent.start_allowed(&entry.app.id, &start)).then_some(start)
    }

    /// What starting `entry`'s app runs, for a question about one of its tools to name,
    /// unless it may start in every run: an "always" answer then covers the command it
    /// named, and a start allowed for this run only is named again.
    pub fn start_to_name(&self, entry: &crate::registry::Entry) -> Option<crate::consent::Start> {
        let mut start = self.memo.start(entry)?;
        if self.consent.start_remembered(&entry.app.id, &start) {
            return None;
        }
        start.allowed = self.consent.start_allowed(&entry.app.id, &start);
        Some(start)
    }

    /// Whether `entry` is a downstream MCP server that may not start yet, so that its
    /// tools (if listed in an earlier run) are shown but nothing is started for them.
    pub fn unapproved_server(&self, entry: &crate::registry::Entry) -> bool {
        matches!(entry.binding().executor, aai_descriptor::Executor::Mcp(_))
            && self.start_to_approve(entry).is_some()
    }

    /// Runs one tool call; `cancel` stops it, `progress` receives its progress.
    /// `app` may also be a web app's URL or domain: it is discovered (or taken from the
    /// web cache) first.
    pub async fn call(
        &self,
        app: &str,
        tool: &str,
        args: Option<Value>,
        cancel: tokio_util::sync::CancellationToken,
        progress: Option<crate::exec::ProgressSink>,
        origin: &Origin,
    ) -> Result<Outcome, GatewayError> {
        let started = std::time::Instant::now();
        let masked = self.history.as_ref().map(|_| {
            args.as_ref()
                .map(crate::history::mask)
                .unwrap_or(Value::Null)
        });
        let mut trace = Trace::default();
        let mut spans = telemetry::Call::start(self.telemetry.as_ref(), origin.trace.as_ref());
        let control = Control {
            cancel,
            progress,
            spans: &spans,
        };
        if let Some(metrics) = &self.metrics {
            metrics.started();
        }
        let result = self
            .call_inner(app, tool, args, control, origin, &mut trace)
            .await;
        let secrets = trace.secrets;
        let elapsed = started.elapsed();
        if let Some(metrics) = &self.metrics {
            if let Some(scope) = trace.limited {
                metrics.limited(trace.app_id.as_deref(), scope.as_str());
            }
            metrics.finished(crate::metrics::Call {
                app: trace.app_id.as_deref(),
                tool: trace.tool.as_deref(),
                status: match &result {
                    Ok(_) => "ok",
                    Err(e) => e.code.name(),
                },
                elapsed,
            });
        }
        match &result {
            Ok(_) => tracing::info!(app, tool, ?elapsed, "call succeeded"),
            Err(e) => tracing::info!(app, tool, ?elapsed, code = e.code.name(), "call failed"),
        }
        if spans.recording() {
            let span = spans.span();
            span.set(
                "aai.app.id",
                span_name(trace.app_id.as_deref().unwrap_or(app)),
            );
            span.set("aai.tool.name", span_name(tool));
            span.set("aai.client.name", span_name(&origin.caller.name));
            span.set("aai.transport", origin.caller.transport);
            span.set(
                "aai.duration_ms",
                i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
            );
            match &result {
                Ok(_) => span.set("aai.call.status", "ok"),
                Err(e) => {
                    span.set("aai.call.status", "error");
                    span.set("aai.error.code", e.code.name());
                }
            }
            spans.finish(result.as_ref().map(|_| ()).map_err(|e| e.code.name()));
        }
        // The caller's key, made once for its use and its history record.
        let caller_key = origin.caller.key();
        if result.is_ok()
            && let Some(id) = &trace.app_id
        {
            let person = origin.caller.person.as_ref().map(|p| p.subject.as_str());
            self.usage
                .note(&caller_key, person, id, tool, crate::history::now_ms());
        }
        if let (Some(history), Some(args)) = (&self.history, masked) {
            let (status, code, head) = match &result {
                Ok(o) => ("ok", None, result_head(&crate::history::mask(&o.value))),
                Err(e) => ("error", Some(e.code.name().to_owned()), e.detail.clone()),
            };
            // Scrubbed before it is cut, so no secret survives as a prefix.
            let excerpt = crate::history::excerpt(&crate::text::scrub(&head, &secrets));
            // Kept under the app's id, so that filters by id find it; the name the caller
            // used goes beside it.
            let (id, asked) = match trace.app_id {
                Some(id) if id != app => (id, Some(app.to_owned())),
                _ => (app.to_owned(), None),
            };
            history.record(crate::history::Record {
                at_ms: crate::history::now_ms(),
                caller: caller_key,
                person: origin.caller.person.as_ref().map(|p| p.subject.clone()),
                app: id,
                asked,
                tool: tool.to_owned(),
                args,
                status: status.to_owned(),
                code,
                duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
                excerpt,
                fingerprint: trace.fingerprint,
                run: origin.within.as_ref().map(|w| w.id.clone()),
            });
        }
        result
    }

    /// The consent question a call of `tool` of `app` by `caller` would ask now, if it
    /// would ask (see [`crate::consent::Gate::would_ask`]); `None` when it would run
    /// without asking or cannot be resolved (the call itself then reports why).
    pub async fn consent_question(
        &self,
        app: &str,
        tool: &str,
        args: Option<&Value>,
        caller: &crate::identity::Caller,
    ) -> Option<crate::consent::Question> {
        let snapshot = self.view(self.snapshot().await, caller);
        let entry = snapshot.find(app)?;
        // A listed tool's question names the command unless it may start in every run.
        let start = if entry.binding().tool(tool).is_some() {
            self.start_to_name(entry)
        } else {
            self.start_to_approve(entry)
        };
        let definition = entry.binding().tool(tool);
        let definition =
            definition.map(|t| Arc::new(crate::consent::fingerprint::Definition::of(t)));
        let (name, description, read_only) = match entry.binding().tool(tool) {
            Some(t) => (t.name.clone(), t.description.clone(), t.read_only),
            // A server that has not run yet has not listed its tools: the question names
            // the tool as asked, and starting the server comes with it.
            None if start.is_some() && self.unapproved_server(entry) => {
                (tool.to_owned(), UNLISTED.to_owned(), false)
            }
            None => return None,
        };
        let mut question = crate::consent::Question {
            args: args.and_then(crate::consent::Question::shown_args),
            read_only,
            site: self
                .site_to_check(&entry.app.id, entry.binding(), caller)
                .await
                .ok()?,
            start,
            definition,
            ..crate::consent::Question::for_call(
                caller,
                &entry.app.id,
                snapshot.name(entry),
                &name,
                &description,
            )
        };
        self.consent.would_ask(&question).then(|| {
            self.consent.explain(&mut question);
            question
        })
    }

    /// The snapshot to show `app`'s guide from, and a note to put above it. A downstream
    /// MCP server that may start and has not listed its tools in this run is listed now.
    /// One that may not start is never started for a guide: its tools kept from an earlier
    /// run are shown as they are; with none, the user is asked (through the caller's
    /// channel, as for a call) whether it may start, and when they have not allowed it
    /// the note says that its tools are listed once it may start, and how to allow it.
    pub async fn guide_snapshot(
        &self,
        snapshot: Arc<Snapshot>,
        app: &str,
        origin: &Origin,
    ) -> Result<(Arc<Snapshot>, Option<String>), GatewayError> {
        let Some(entry) = snapshot.find(app) else {
            return Ok((snapshot, None));
        };
        if self.unapproved_server(entry)
            && let Some(start) = self.start_to_approve(entry)
        {
            if self.executors.mcp().has_list(&entry.app.id) {
                let note = format!(
                    "> These tools were listed when its server last ran; it has not been started in this run (the first allowed call will {}).",
                    start.describe()
                );
                return Ok((snapshot, Some(note)));
            }
            let question = start_question(&snapshot, entry, &origin.caller, start);
            // A guide is a read: it says at once how to allow the start rather than wait
            // (`consent.waitSeconds`) for an answer nobody was asked for.
            if let Err(e) = self
                .consent
                .check_at_once(&question, origin.prompter.as_deref())
                .await
            {
                let note = format!(
                    "> Its server has not been started, so its tools are not listed yet: they are listed once it is allowed to start. {}",
                    e.detail
                );
                return Ok((snapshot, Some(note)));
            }
        }
        let listed = self.remote_tools(snapshot, app, &origin.caller).await?;
        Ok((self.view(listed, &origin.caller), None))
    }

    /// The question a guide of `app` would ask before its server's first start (for a
    /// client asked through round trips, before it calls [`Pipeline::guide_snapshot`]
    /// with the answer); `None` when it would not ask.
    pub async fn guide_question(
        &self,
        app: &str,
        caller: &crate::identity::Caller,
    ) -> Option<crate::consent::Question> {
        let snapshot = self.view(self.snapshot().await, caller);
        let entry = snapshot.find(app)?;
        if !self.unapproved_server(entry) || self.executors.mcp().has_list(&entry.app.id) {
            return None;
        }
        let start = self.start_to_approve(entry)?;
        let question = start_question(&snapshot, entry, caller, start);
        self.consent.would_ask(&question).then_some(question)
    }

    /// For a web app whose calls ask for consent: its server and certificate, read before
    /// anything is sent (a grant is tied to the certificate). Nothing is read when the
    /// call would not ask (mode `allow`/`deny`, the command line, other executors).
    async fn site_to_check(
        &self,
        app_id: &str,
        binding: &aai_descriptor::Binding,
        caller: &crate::identity::Caller,
    ) -> Result<Option<crate::consent::site::Site>, GatewayError> {
        let aai_descriptor::Executor::Http(http) = &binding.executor else {
            return Ok(None);
        };
        if caller.is_user() || self.consent.mode(app_id) != crate::config::ConsentMode::Prompt {
            return Ok(None);
        }
        self.sites
            .site(&http.base_url)
            .await
            .map(Some)
            .map_err(|e| Error::SiteUnchecked(e.to_string()).into())
    }

    /// The consent gate's answer to `question`, in a span of the call's.
    async fn asked(
        &self,
        question: &crate::consent::Question,
        origin: &Origin,
        spans: &telemetry::Call,
    ) -> Result<(), GatewayError> {
        let mut span = spans.child(telemetry::CONSENT, Kind::Internal);
        span.set(
            "aai.consent.mode",
            self.consent.mode(&question.app).as_str(),
        );
        span.set("aai.consent.start", question.start.is_some());
        let answer = self
            .consent
            .check(question, origin.prompter.as_deref())
            .await;
        span.set(
            "aai.consent.outcome",
            if answer.is_ok() { "allowed" } else { "refused" },
        );
        spans.end(span, answer.as_ref().map(|_| ()).map_err(|e| e.code.name()));
        answer
    }

    /// How a running call asks the user when its app asks for permission mid-call (an
    /// ACP agent's `session/request_permission`): as a consent question for the tool
    /// `<tool>/<kind of action>` (so "always allow this tool" allows, say, every edit of
    /// this agent for this caller), through the call's own channel.
    fn permission_asker(
        &self,
        question: &crate::consent::Question,
        origin: &Origin,
    ) -> exec::Asker {
        let consent = self.consent.clone();
        let from_cli = origin.caller.is_user();
        let base = question.clone();
        let prompter = origin.prompter.clone();
        Arc::new(move |permission: exec::Permission| {
            let consent = consent.clone();
            let mut question = base.clone();
            let prompter = prompter.clone();
            Box::pin(async move {
                question.tool = format!("{}/{}", question.tool, permission.kind);
                question.start = None;
                question.description = permission.title;
                question.site = None;
                question.args = None;
                question.read_only = false;
                if from_cli {
                    // The user asked for the call, not for what the agent then wants: a
                    // terminal asks them (this call only), else only `allow` lets it.
                    if consent.mode(&question.app) == crate::config::ConsentMode::Allow {
                        return Ok(());
                    }
                    let Some(terminal) = prompter else {
                        return Err(exec::Refused::new(
                            exec::RefusedKind::NobodyToAsk,
                            "the agent asked for a permission and nobody can answer it here; run `aai-gateway call` in a terminal to answer, make the call through an MCP client, or set the app's consent mode to `allow`",
                        ));
                    };
                    return match terminal.ask(&question).await {
                        crate::consent::Reply::Chosen(c) if c != crate::consent::Choice::Deny => {
                            Ok(())
                        }
                        _ => Err(exec::Refused::new(
                            exec::RefusedKind::Denied,
                            "the user refused the agent's permission request",
                        )),
                    };
                }
                consent
                    .check(&question, prompter.as_deref())
                    .await
                    .map_err(|e| exec::Refused::new(exec::RefusedKind::Consent, e.detail))
            })
        })
    }
}

/// TOOL_NOT_FOUND for `tool` of the app `app_id` reached through `binding`, naming its
/// tools (or, for a large app, the close ones).
pub(crate) fn no_such_tool(
    app_id: &str,
    binding: &aai_descriptor::Binding,
    tool: &str,
) -> GatewayError {
    let names: Vec<&str> = binding.tools.iter().map(|t| t.name.as_str()).collect();
    Error::NoTool {
        app: app_id.to_owned(),
        tool: crate::text::excerpt(&tool.escape_debug().to_string(), 100),
        hint: crate::registry::guide::tool_hint(&names, tool, app_id),
    }
    .into()
}

/// The folder an app's relative commands resolve against: its descriptor's.
pub fn base_dir(entry: &crate::registry::Entry) -> &Path {
    folder_of(&entry.source)
}

/// The folder of a descriptor file: relative commands resolve against it. Built-in apps
/// have no folder (`builtin:…`): their programs start in `/`.
pub(crate) fn folder_of(source: &Path) -> &Path {
    if source.to_string_lossy().starts_with("builtin:") {
        return Path::new("/");
    }
    source.parent().unwrap_or(Path::new("."))
}

/// The first 2 KiB of a result as text, serialized no further than that.
fn result_head(value: &Value) -> String {
    /// A writer that refuses to grow past its limit (serialization then stops early).
    struct Limited(Vec<u8>);
    impl std::io::Write for Limited {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0.len() >= 2048 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.0.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    match value {
        Value::String(s) => s.chars().take(2048).collect(),
        other => {
            let mut out = Limited(Vec::new());
            let _ = serde_json::to_writer(&mut out, other);
            String::from_utf8_lossy(&out.0).into_owned()
        }
    }
}

/// A name as a span attribute: a URL (an `app` that is a web app's address) cut to its
/// origin, anything else to 128 characters.
fn span_name(name: &str) -> String {
    if is_url(name) {
        return reqwest::Url::parse(name.trim())
            .map_or_else(|_| "(url)".to_owned(), |u| u.origin().ascii_serialization());
    }
    name.chars().take(128).collect()
}

/// What a call's description says of a tool its server has not listed yet.
const UNLISTED: &str = "(its server has not listed its tools yet)";

/// Whether an `app` argument is a URL (`https://…`, anything with `://`): the only form
/// of `app` that is fetched from the web.
fn is_url(app: &str) -> bool {
    app.trim().contains("://")
}

/// The error for an app that is not served: its descriptor is broken, it cannot run on
/// this host, or it does not exist (with a suggestion).
pub(crate) fn not_served(snapshot: &Snapshot, app: &str, os: Os) -> GatewayError {
    match snapshot.missing(app) {
        Some(Missing::Broken(broken)) => Error::Broken {
            app: app.to_owned(),
            file: broken.file.clone(),
            problems: broken.problems.clone(),
        }
        .into(),
        Some(Missing::Inactive(inactive)) => Error::Inactive {
            app: app.to_owned(),
            file: inactive.file.clone(),
            why: inactive.why.clone(),
        }
        .into(),
        Some(Missing::Unsupported(bindings)) => Error::Unsupported {
            app: app.to_owned(),
            host: os,
            has: bindings
                .iter()
                .map(|(platform, kind)| format!("{} ({kind})", platform.as_str()))
                .collect(),
            platforms: bindings
                .iter()
                .map(|(p, _)| p.as_str().to_owned())
                .collect(),
        }
        .into(),
        None => {
            let hint = snapshot
                .nearby(app, 3)
                .iter()
                .map(|id| format!("`{id}`"))
                .collect::<Vec<_>>();
            let mut detail = if hint.is_empty() {
                format!("no app `{app}`; use aai_search to find apps")
            } else {
                format!("no app `{app}`; did you mean {}?", hint.join(", "))
            };
            if looks_like_domain(app) {
                detail.push_str(&format!(
                    " For a web app, call web_discover with its URL (`https://{}`): an id is never looked up on the web.",
                    app.trim()
                ));
            }
            Error::NoApp {
                app: app.to_owned(),
                detail,
            }
            .into()
        }
    }
}

/// Whether an unknown id reads like a host name (`nope.app`): the error then says how to
/// reach a web app.
fn looks_like_domain(app: &str) -> bool {
    let labels: Vec<&str> = app.trim().split('.').collect();
    labels.len() >= 2
        && labels
            .iter()
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}

/// The question that allows `entry`'s server to start so that its tools can be listed.
fn start_question(
    snapshot: &Snapshot,
    entry: &crate::registry::Entry,
    caller: &crate::identity::Caller,
    start: crate::consent::Start,
) -> crate::consent::Question {
    crate::consent::Question {
        start: Some(start),
        ..crate::consent::Question::for_call(
            caller,
            &entry.app.id,
            snapshot.name(entry),
            crate::consent::START,
            "start it, so that its tools can be listed",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::args::prepare_args;
    use super::*;
    use aai_descriptor::Tool;
    use serde_json::json;

    fn tool(schema: Value) -> Tool {
        let text = json!({"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
            "app":{"id":"com.t.t","name":"T","description":"d"},
            "execution":{"type":"stdio","command":"x"},
            "tools":[{"name":"t","description":"d","parameters": schema}]});
        let app = aai_descriptor::parse(&text.to_string(), "t").app.unwrap();
        app.bindings[0].tools[0].clone()
    }

    #[test]
    fn only_urls_are_fetched() {
        assert!(is_url("https://x.example/a"));
        assert!(is_url("http://127.0.0.1:8080"));
        for id in [
            "nope.app",
            "yuque.com",
            "api.github.com/v3",
            "com.example.notes",
            "notes",
        ] {
            assert!(!is_url(id), "{id}");
        }
        assert!(looks_like_domain("nope.app"));
        assert!(!looks_like_domain("notes"));
    }

    #[test]
    fn defaults_are_applied_then_arguments_validated() {
        let t = tool(json!({"type":"object","properties":{
            "query":{"type":"string"},
            "limit":{"type":"integer","minimum":1,"default":10},
            "opts":{"type":"object","properties":{"deep":{"type":"boolean","default":false}}}},
            "required":["query"]}));
        assert_eq!(
            prepare_args(&t, Some(json!({"query":"x","opts":{}}))).unwrap(),
            json!({"query":"x","limit":10,"opts":{"deep":false}})
        );
        let e = prepare_args(&t, Some(json!({"limit":"hunter2-secret"}))).unwrap_err();
        assert_eq!(e.code, Code::InvalidParams);
        assert!(
            !e.detail.contains("hunter2"),
            "values never appear: {}",
            e.detail
        );
        assert!(e.detail.contains("`/limit`"), "{}", e.detail);
        assert!(e.detail.contains("`/query`"), "{}", e.detail);
        let field = e.data()["field"].clone();
        assert!(field == "/limit" || field == "/query", "{field}");
        // Keys of maps are data: never shown, in the detail or in `field`.
        let m = tool(json!({"type":"object","properties":{
            "map":{"type":"object","additionalProperties":{"type":"integer"},
                   "propertyNames":{"maxLength":20}},
            "strict":{"type":"object","properties":{"a":{"type":"string"}},
                      "additionalProperties":false}}}));
        let e = prepare_args(
            &m,
            Some(
                json!({"map":{"SECRET-KEY":"x","ANOTHER-SECRET-THAT-IS-LONG":1},
                        "strict":{"a":"ok","SECRET2":1}}),
            ),
        )
        .unwrap_err();
        let shown = e.to_json().to_string();
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(e.detail.contains("`/map/*`"), "{}", e.detail);
        assert!(
            e.detail
                .contains("`/strict`: has properties that are not allowed"),
            "{}",
            e.detail
        );
        let e = prepare_args(&t, Some(json!([1]))).unwrap_err();
        assert_eq!(e.detail, "arguments must be a JSON object, not an array");
        assert!(prepare_args(&t, None).is_err(), "query is required");
    }
}
