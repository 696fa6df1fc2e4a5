//! The gateway as an MCP *client* of a downstream server (the `mcp` executor's wire; the
//! executor's lifecycle lives in `exec/mcp/mod.rs`). Besides the server in `mcp/`, the
//! only module that knows rmcp: it speaks to the executor in JSON values and the
//! gateway's own types.
//!
//! One [`Connection`] per downstream server: stdio (over the pipes of a child started by
//! `exec/process.rs`) or streamable HTTP (over `net`'s API client). Progress notifications
//! are routed to the call that sent the token; `tools/list_changed` calls the connection's
//! hook; dropping a connection closes it (and, for stdio, kills the child's group).

// rmcp's client is allowed here (clippy.toml bans its types elsewhere).
#![allow(clippy::disallowed_types)]

mod call;
mod direct;
mod framing;
mod listing;
mod updates;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ClientRequest, CustomRequest, ErrorCode, Implementation, ProgressNotificationParam,
    ProtocolVersion, ServerResult, SubscriptionFilter,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RoleClient, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::exec::process::{ChildGuard, Spawned, StderrTail};
use crate::exec::{Progress, ProgressSink};
use crate::telemetry::{TRACEPARENT, TRACESTATE};
use framing::{Capped, OVERSIZED};

/// How to reach a server.
pub(super) enum Transport {
    /// A started child; its stdin/stdout carry MCP.
    Stdio(Box<Spawned>),
    /// An HTTP endpoint with the headers every request carries (secrets included).
    Http {
        /// Endpoint (for SSE, the event stream).
        url: String,
        /// Streamable HTTP, SSE, or streamable HTTP falling back to SSE.
        mode: aai_descriptor::HttpMode,
        /// Headers, the credential's last.
        headers: Vec<(String, String)>,
        /// The forms of the header values that are secrets ([`crate::auth::echoes`]),
        /// never to be shown; the URL's path, query and password are added here.
        secrets: Vec<String>,
    },
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Stdio(s) => f.debug_tuple("Stdio").field(&s.guard.pid()).finish(),
            // Header values may be credentials: names only.
            Transport::Http { url, headers, .. } => f
                .debug_struct("Http")
                .field("url", &crate::text::scrub(url, &url_secrets(url)))
                .field(
                    "headers",
                    &headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                )
                .finish(),
        }
    }
}

/// A tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RemoteTool {
    /// Name.
    pub name: String,
    /// Description (may be empty).
    pub description: String,
    /// `inputSchema`.
    pub input_schema: Value,
    /// `outputSchema`, when declared.
    pub output_schema: Option<Value>,
    /// `annotations.readOnlyHint`.
    pub read_only: bool,
    /// Not one of the server's tools: the gateway's own tool for its resources or prompts.
    pub listing: Option<Listing>,
    /// Its interactive view (`_meta.ui`, MCP Apps), as the server names it.
    pub ui: Option<Value>,
}

/// What a tool the gateway adds for a server reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Listing {
    /// `resources/read`.
    Resources,
    /// `prompts/get`.
    Prompts,
}

/// How a downstream call failed.
#[derive(Debug)]
pub(super) enum CallError {
    /// The connection is gone (the server exited or hung up).
    Closed(String),
    /// The server answered with a JSON-RPC error.
    Rpc {
        /// JSON-RPC error code.
        code: i32,
        /// Its message.
        message: String,
    },
    /// No answer within the deadline (the request was cancelled downstream).
    Timeout,
    /// The caller cancelled (the request was cancelled downstream).
    Cancelled,
}

type Sinks = Arc<Mutex<HashMap<String, ProgressSink>>>;

pub(in crate::exec) use super::asks::Caller;

/// What the gateway does with the server's notifications and requests.
#[derive(Clone)]
struct Handler {
    sinks: Sinks,
    on_tools_changed: Arc<dyn Fn() + Send + Sync>,
    /// The calls in flight: the server's requests of the client go to their own call's
    /// client ([`super::asks`]).
    calls: super::asks::Calls,
    /// The resources watched (servers before 2026-07-28).
    watched: updates::Watched,
}

/// `custom_headers` plus the `traceparent`/`tracestate` a `tools/call` carries in its
/// `_meta` (Streamable HTTP servers read the header, as for any HTTP request).
fn with_trace_headers(
    message: &rmcp::model::ClientJsonRpcMessage,
    mut headers: HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>,
) -> HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue> {
    use rmcp::model::GetMeta;
    let rmcp::model::ClientJsonRpcMessage::Request(request) = message else {
        return headers;
    };
    if !matches!(request.request, ClientRequest::CallToolRequest(_)) {
        return headers;
    }
    let meta = request.request.get_meta();
    for key in [TRACEPARENT, TRACESTATE] {
        if let Some(Value::String(v)) = meta.get(key)
            && let Ok(v) = reqwest::header::HeaderValue::from_str(v)
        {
            headers.insert(reqwest::header::HeaderName::from_static(key), v);
        }
    }
    headers
}

// Sampling and roots are deprecated from 2026-07-28; servers of earlier revisions use them.
#[allow(deprecated)]
impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let key = token_key(&params.progress_token);
        let sink = self.sinks.lock().expect("sinks lock").get(&key).cloned();
        if let Some(sink) = sink {
            sink(Progress {
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.on_tools_changed)();
    }

    // Resources and prompts are offered as two of the app's tools (their descriptions
    // list them): a change is a change of the app's tools.
    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.on_tools_changed)();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.on_tools_changed)();
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.watched.updated(&params.uri);
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.calls.elicitation(request, &context).await
    }

    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let params = serde_json::to_value(&params)
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))?;
        let answer = self.calls.sampling(params, &context).await?;
        serde_json::from_value(answer).map_err(|e| {
            rmcp::ErrorData::internal_error(format!("the client's answer is not valid: {e}"), None)
        })
    }

    async fn list_roots(
        &self,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        self.calls.roots(&context).await
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        // What a calling client may answer is passed through (`asks`); a server
        // asking when the caller cannot gets an error at once.
        info.capabilities.elicitation = Some(rmcp::model::ElicitationCapability::default());
        info.capabilities.sampling = Some(rmcp::model::SamplingCapability::default());
        info.capabilities.roots = Some(rmcp::model::RootsCapabilities::default());
        info.client_info = Implementation::new("aai-gateway", env!("CARGO_PKG_VERSION"));
        // The revision servers are most likely to know (a later one answers with it or
        // with its own); docs/mcp.md says why.
        info.protocol_version = rmcp::model::ProtocolVersion::V_2025_11_25;
        info
    }
}

pub(super) fn token_key(token: &rmcp::model::ProgressToken) -> String {
    serde_json::to_string(token).unwrap_or_default()
}

/// A live connection to one downstream server.
pub(super) struct Connection {
    /// The calls in flight, for the server's requests of the client.
    calls: super::asks::Calls,
    /// The last 401/403 challenge of an HTTP server (how a call learns it was refused).
    refused: Refused,
    service: RunningService<RoleClient, Handler>,
    sinks: Sinks,
    /// Kills the stdio server's process group when the connection is dropped.
    _child: Option<ChildGuard>,
    stderr: Option<StderrTail>,
    /// What every error text is scrubbed of: the endpoint's path, query and password and
    /// the secret header values (HTTP), in the forms a server may echo them.
    secrets: Vec<String>,
    /// Set when the server sent a message longer than the transport takes (stdio).
    oversized: Arc<AtomicBool>,
    /// Ends the task listening for the server's list changes (2026-07-28).
    _listening: tokio_util::sync::DropGuard,
    /// The resources watched (servers before 2026-07-28).
    watched: updates::Watched,
    /// Calls without rmcp's service loop (stdio servers).
    wire: Option<direct::Wire>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// The latest revision the gateway speaks to servers, and the one it falls back to.
const LATEST: ProtocolVersion = ProtocolVersion::V_2026_07_28;
const LEGACY: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// How the handshake starts: `server/discover` first (2026-07-28), falling back to
/// `initialize` at 2025-11-25 for a server that answers it with an error, unless the
/// server is known (`earlier`: the revision it last answered with) to be of an earlier
/// revision, which spares a server that never answers `server/discover` rmcp's 10 s wait
/// on every reconnection.
fn lifecycle(earlier: Option<&str>) -> ClientLifecycleMode {
    match earlier {
        Some(revision) if revision < LATEST.as_str() => ClientLifecycleMode::Initialize,
        _ => ClientLifecycleMode::Auto {
            preferred_versions: vec![LATEST],
            legacy_version: Some(LEGACY),
        },
    }
}

/// Connects and runs the MCP handshake within `deadline`, over the transport `open`
/// makes (it starts a stdio server). `on_tools_changed` runs when the server says its
/// tool list changed. `earlier` is the revision the server answered with last time, if
/// known. A server that answers `server/discover` with something other than an error (an
/// empty result, a stray id) or hangs up on it is of an earlier revision that reads
/// unknown methods oddly: it is connected again, with `initialize` alone. The error is
/// plain text without secrets.
pub(super) async fn connect(
    open: &(dyn Fn() -> Result<Transport, String> + Sync),
    deadline: Duration,
    on_tools_changed: Arc<dyn Fn() + Send + Sync>,
    refused: Refused,
    earlier: Option<&str>,
) -> Result<Connection, String> {
    let begun = tokio::time::Instant::now();
    let mode = lifecycle(earlier);
    let probing = matches!(mode, ClientLifecycleMode::Auto { .. });
    let first = handshake(
        open()?,
        deadline,
        on_tools_changed.clone(),
        refused.clone(),
        mode,
    )
    .await;
    match first {
        Err(failed) if probing && failed.misread => {
            tracing::info!(
                "the server misread server/discover ({}); connecting again with initialize",
                failed.why
            );
            let left = deadline.saturating_sub(begun.elapsed());
            let mode = ClientLifecycleMode::Initialize;
            handshake(open()?, left, on_tools_changed, refused, mode)
                .await
                .map_err(|f| f.why)
        }
        other => other.map_err(|f| f.why),
    }
}

/// Why a handshake failed, and whether the server misread `server/discover` (see
/// [`connect`]).
struct Failed {
    why: String,
    misread: bool,
}

impl From<String> for Failed {
    fn from(why: String) -> Failed {
        Failed {
            why,
            misread: false,
        }
    }
}

/// Whether a handshake error is a server misreading `server/discover`: an answer that is
/// not a JSON-RPC error, or an answer to another id, or the connection closed on it.
fn misread(e: &rmcp::service::ClientInitializeError) -> bool {
    use rmcp::service::ClientInitializeError as E;
    matches!(
        e,
        E::ExpectedInitResult(_)
            | E::ExpectedInitResponse(_)
            | E::ConflictInitResponseId(..)
            | E::UncorrelatedErrorResponse { .. }
            | E::ConnectionClosed(_)
    )
}

/// One handshake over `transport`, started as `start` says, within `deadline`.
async fn handshake(
    transport: Transport,
    deadline: Duration,
    on_tools_changed: Arc<dyn Fn() + Send + Sync>,
    refused: Refused,
    start: ClientLifecycleMode,
) -> Result<Connection, Failed> {
    let sinks = Sinks::default();
    let calls = super::asks::Calls::default();
    let watched = updates::Watched::default();
    let handler = Handler {
        sinks: sinks.clone(),
        on_tools_changed: on_tools_changed.clone(),
        calls: calls.clone(),
        watched: watched.clone(),
    };
    let oversized = Arc::new(AtomicBool::new(false));
    let (service, child, stderr, secrets, wire) = match transport {
        Transport::Stdio(spawned) => {
            let (service, guard, tail, mut wire) =
                over_stdio(*spawned, handler, oversized.clone(), deadline, start).await?;
            if let Some(info) = service.peer_info() {
                wire.opened(direct::Session {
                    revision: info.protocol_version.clone(),
                    client: service.service().get_info(),
                });
            }
            (service, Some(guard), Some(tail), Vec::new(), Some(wire))
        }
        Transport::Http {
            url,
            headers,
            secrets,
            mode,
        } => {
            let http = Http {
                url,
                headers,
                secrets,
                mode,
            };
            let (service, secrets) = http.handshake(handler, &refused, deadline, start).await?;
            (service, None, None, secrets, None)
        }
    };
    let listening = CancellationToken::new();
    listen(&service, on_tools_changed, listening.clone());
    Ok(Connection {
        service,
        calls,
        refused,
        sinks,
        _child: child,
        stderr,
        secrets,
        oversized,
        _listening: listening.drop_guard(),
        watched,
        wire,
    })
}

/// The handshake with a started stdio server.
async fn over_stdio(
    spawned: Spawned,
    handler: Handler,
    oversized: Arc<AtomicBool>,
    deadline: Duration,
    start: ClientLifecycleMode,
) -> Result<
    (
        RunningService<RoleClient, Handler>,
        ChildGuard,
        StderrTail,
        direct::Wire,
    ),
    Failed,
> {
    let Spawned {
        guard,
        stdin,
        stdout,
        stderr_tail,
    } = spawned;
    let (wire, stdin) = direct::Wire::new(stdin);
    let stdout = Capped::new(stdout, oversized.clone(), Some(wire.waiting.clone()));
    let started = tokio::time::timeout(
        deadline,
        handler.serve_with_lifecycle((stdout, stdin), start),
    )
    .await;
    let note = stderr_tail.note();
    let service = match started {
        Ok(Ok(s)) => s,
        Ok(Err(_)) if oversized.load(Ordering::SeqCst) => {
            return Err(format!("{OVERSIZED}{note}").into());
        }
        Ok(Err(e)) => {
            let why = handshake_error(&e);
            return Err(Failed {
                why: format!("the MCP handshake failed: {why}{note}"),
                misread: misread(&e),
            });
        }
        Err(_) => {
            return Err(format!(
                "the server did not finish the MCP handshake within {} s{note}",
                deadline.as_secs()
            )
            .into());
        }
    };
    Ok((service, guard, stderr_tail, wire))
}

/// An HTTP server's endpoint as the handshake reaches it.
struct Http {
    url: String,
    headers: Vec<(String, String)>,
    secrets: Vec<String>,
    mode: aai_descriptor::HttpMode,
}

impl Http {
    /// The handshake over Streamable HTTP, or HTTP+SSE (as `mode` says, or when the
    /// streamable one is not taken); the service and the secrets its errors hide.
    async fn handshake(
        self,
        handler: Handler,
        refused: &Refused,
        deadline: Duration,
        start: ClientLifecycleMode,
    ) -> Result<(RunningService<RoleClient, Handler>, Vec<String>), Failed> {
        let Http {
            url,
            headers,
            mut secrets,
            mode,
        } = self;
        secrets.extend(url_secrets(&url));
        secrets.sort_by_key(|f| std::cmp::Reverse(f.len()));
        let client = crate::net::client(crate::net::Purpose::Api)
            .map_err(|e| Failed::from(e.to_string()))?
            .clone();
        let mut custom = HashMap::new();
        for (name, value) in &headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                format!(
                    "the header name `{}` is not valid (letters, digits and `-` only)",
                    crate::text::excerpt(&name.escape_debug().to_string(), 40)
                )
            })?;
            let mut value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| format!("the value of header `{name}` is not valid"))?;
            value.set_sensitive(true);
            custom.insert(name, value);
        }
        let begun = tokio::time::Instant::now();
        let timed_out = || {
            format!(
                "the server did not finish the MCP handshake within {} s",
                deadline.as_secs()
            )
        };
        let streamable = match mode {
            aai_descriptor::HttpMode::Sse => None,
            _ => {
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom.clone());
                let watched = Watched {
                    client: client.clone(),
                    refused: refused.clone(),
                };
                let transport = StreamableHttpClientTransport::with_client(watched, config);
                let started = handler.clone().serve_with_lifecycle(transport, start);
                match tokio::time::timeout(deadline, started).await {
                    Ok(Ok(s)) => Some(Ok(s)),
                    Ok(Err(e)) => Some(Err(e)),
                    Err(_) => return Err(timed_out().into()),
                }
            }
        };
        let service = match (streamable, mode) {
            (Some(Ok(service)), _) => service,
            (Some(Err(e)), mode) if mode == aai_descriptor::HttpMode::Streamable || misread(&e) => {
                let why = crate::text::scrub(&http_error(&e), &secrets);
                return Err(Failed {
                    why: format!("the MCP handshake failed: {why}"),
                    misread: misread(&e),
                });
            }
            // The MCP specification's backwards compatibility: a server that does not
            // take the streamable handshake may be an HTTP+SSE one.
            (Some(Err(e)), _) if e.is_authorization_required() => {
                return Err(format!("the MCP handshake failed: {}", http_error(&e)).into());
            }
            (streamable, _) => {
                let left = deadline.saturating_sub(begun.elapsed());
                let sse = tokio::time::timeout(left, serve_sse(handler, client, &url, custom));
                match (sse.await, streamable) {
                    (Ok(Ok(service)), _) => service,
                    (Err(_), _) => return Err(timed_out().into()),
                    // Not an SSE server either: the streamable attempt's error says
                    // more.
                    (Ok(Err(_)), Some(Err(e))) => {
                        let why = crate::text::scrub(&http_error(&e), &secrets);
                        return Err(format!("the MCP handshake failed: {why}").into());
                    }
                    (Ok(Err(why)), _) => {
                        let why = crate::text::scrub(&why, &secrets);
                        return Err(format!("the MCP handshake over SSE failed: {why}").into());
                    }
                }
            }
        };
        Ok((service, secrets))
    }
}

/// At 2026-07-28 a server announces list changes only on a `subscriptions/listen`
/// stream: one is kept open (and opened again, after a pause, when it ends while the
/// connection lives) for its tools, and its resources and prompts when it offers them,
/// until `stop` or until the server refuses to listen. `on_changed` runs for each
/// change. The server's `listChanged` is not required: servers built on the Python SDK
/// declare `false` and announce changes all the same. Servers of earlier revisions
/// notify without being asked ([`Handler`]).
fn listen(
    service: &RunningService<RoleClient, Handler>,
    on_changed: Arc<dyn Fn() + Send + Sync>,
    stop: CancellationToken,
) {
    let Some(info) = service.peer_info() else {
        return;
    };
    if info.protocol_version.has_initialize() {
        return;
    }
    let caps = &info.capabilities;
    let mut filter = SubscriptionFilter::new();
    filter.tools_list_changed = Some(true);
    filter.resources_list_changed = caps.resources.is_some().then_some(true);
    filter.prompts_list_changed = caps.prompts.is_some().then_some(true);
    let peer = service.peer().clone();
    tokio::spawn(stop.run_until_cancelled_owned(async move {
        let mut pause = Duration::from_secs(1);
        let mut first = true;
        while !peer.is_transport_closed() {
            match peer.listen(filter.clone()).await {
                Ok(mut subscription) => {
                    pause = Duration::from_secs(1);
                    // A stream that ended (the server's, or rmcp's when the gateway fell
                    // behind) is not resumed: what changed meanwhile is fetched again.
                    if !std::mem::take(&mut first) {
                        on_changed();
                    }
                    while let Ok(Some(_)) = subscription.next().await {
                        on_changed();
                    }
                }
                Err(rmcp::ServiceError::McpError(e)) => {
                    tracing::debug!(
                        "the server does not take subscriptions/listen: {}",
                        e.message
                    );
                    return;
                }
                Err(e) => tracing::debug!("subscriptions/listen failed: {e}"),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(60));
        }
    }));
}

/// The `WWW-Authenticate` challenge of the last request an HTTP server refused (401 or
/// 403 with a challenge), shared by the executor and the transport.
pub(super) type Refused = Arc<Mutex<Option<String>>>;

/// reqwest's streamable HTTP client, noting the challenge of a refused request: rmcp
/// ends the session on it, and the call then reports the refusal instead of a closed
/// connection.
#[derive(Clone)]
struct Watched {
    client: reqwest::Client,
    refused: Refused,
}

type HttpError = rmcp::transport::streamable_http_client::StreamableHttpError<reqwest::Error>;

impl Watched {
    fn note<T>(&self, result: Result<T, HttpError>) -> Result<T, HttpError> {
        use rmcp::transport::streamable_http_client::StreamableHttpError as E;
        let challenge = match &result {
            Err(E::AuthRequired(e)) => Some(e.www_authenticate_header.clone()),
            Err(E::InsufficientScope(e)) => Some(e.www_authenticate_header.clone()),
            // A 401 or 403 without `WWW-Authenticate`: rmcp reports it as an unexpected
            // status (in words); it is still a refusal of the credential.
            Err(e) => {
                let text = e.to_string();
                (text.contains("HTTP 401") || text.contains("HTTP 403"))
                    .then(|| "Bearer".to_owned())
            }
            Ok(_) => None,
        };
        if let Some(challenge) = challenge {
            *self.refused.lock().expect("refused lock") = Some(challenge);
        }
        result
    }
}

impl rmcp::transport::streamable_http_client::StreamableHttpClient for Watched {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>,
    ) -> Result<rmcp::transport::streamable_http_client::StreamableHttpPostResponse, HttpError>
    {
        let custom_headers = with_trace_headers(&message, custom_headers);
        let sent = self
            .client
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.note(sent)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<rmcp::transport::streamable_http_client::StreamableHttpPostResponse, HttpError>
    {
        let custom_headers = with_trace_headers(&message, custom_headers);
        let sent = self
            .client
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.note(sent)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>,
    ) -> Result<(), HttpError> {
        self.client
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>,
    ) -> Result<
        futures_util::stream::BoxStream<
            'static,
            Result<sse_stream::Sse, rmcp::transport::streamable_http_client::SseError>,
        >,
        HttpError,
    > {
        let opened = self
            .client
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.note(opened)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<
        futures_util::stream::BoxStream<
            'static,
            Result<sse_stream::Sse, rmcp::transport::streamable_http_client::SseError>,
        >,
        HttpError,
    > {
        let opened = self
            .client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.note(opened)
    }
}

/// The handshake over the HTTP+SSE transport (`sse.rs`).
async fn serve_sse(
    handler: Handler,
    client: reqwest::Client,
    url: &str,
    headers: HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>,
) -> Result<RunningService<RoleClient, Handler>, String> {
    let headers: reqwest::header::HeaderMap = headers.into_iter().collect();
    let session = super::sse::Session::open(client, url, headers).await?;
    handler
        .serve(SseTransport(session))
        .await
        .map_err(|e| without_type_names(&e.to_string()))
}

/// rmcp's transport over an SSE session: each message serialized or parsed once.
struct SseTransport(super::sse::Session);

/// Why a message could not be sent over SSE.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct SseError(String);

impl rmcp::transport::Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        use rmcp::model::{ClientNotification as N, JsonRpcMessage as M};
        let pending = self.0.pending();
        match &item {
            M::Request(r) => pending.waits(waiting(true, &r.id)),
            M::Response(r) => pending.done(&waiting(false, &r.id)),
            M::Error(e) => e.id.iter().for_each(|id| pending.done(&waiting(false, id))),
            M::Notification(n) => {
                if let N::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    pending.done(&waiting(true, id));
                }
            }
        }
        let poster = self.0.poster();
        async move {
            let message = serde_json::to_string(&item).map_err(|e| SseError(e.to_string()))?;
            poster.post(message).await.map_err(SseError)
        }
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        loop {
            let text = self.0.recv().await?;
            match serde_json::from_str(&text) {
                Ok(message) => {
                    use rmcp::model::{JsonRpcMessage as M, ServerNotification as N};
                    let pending = self.0.pending();
                    match &message {
                        M::Request(r) => pending.waits(waiting(false, &r.id)),
                        M::Response(r) => pending.done(&waiting(true, &r.id)),
                        M::Error(e) => e.id.iter().for_each(|id| pending.done(&waiting(true, id))),
                        M::Notification(n) => {
                            if let N::CancelledNotification(c) = &n.notification
                                && let Some(id) = &c.params.request_id
                            {
                                pending.done(&waiting(false, id));
                            }
                        }
                    }
                    return Some(message);
                }
                Err(e) => tracing::info!(
                    "an SSE server sent a message that is not MCP ({e}): {}",
                    crate::text::excerpt(&text, 200)
                ),
            }
        }
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.0.close();
        Ok(())
    }
}

/// The key of a request that waits on an SSE session (`sse::Pending`): whose it is, and
/// its id.
fn waiting(ours: bool, id: &rmcp::model::RequestId) -> String {
    format!("{}{id:?}", if ours { "ours " } else { "theirs " })
}

/// Paths this short (`/mcp`, `/v1/mcp`) are left readable in errors; longer ones may
/// carry a key (`/mcp/<key>`) and are hidden.
const SHORT_PATH: usize = 8;

/// The parts of an endpoint that may carry a key, as written and as a URL parser
/// normalizes them (errors quote either): its query, its password, and its path unless
/// short.
fn url_secrets(url: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut add = |path: &str, query: Option<&str>, password: Option<&str>| {
        if path.len() >= SHORT_PATH {
            out.push(path.to_owned());
        }
        out.extend(query.filter(|q| !q.is_empty()).map(str::to_owned));
        out.extend(password.filter(|p| !p.is_empty()).map(str::to_owned));
    };
    if let Some((_, rest)) = url.split_once("://") {
        let rest = rest.split('#').next().unwrap_or(rest);
        let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        let (path, query) = match tail.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (tail, None),
        };
        let password = authority
            .rsplit_once('@')
            .and_then(|(info, _)| info.split_once(':'))
            .map(|(_, p)| p);
        add(path, query, password);
    }
    if let Ok(parsed) = url::Url::parse(url) {
        add(parsed.path(), parsed.query(), parsed.password());
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.len()));
    out.dedup();
    out
}

/// An HTTP handshake error in words: no Rust type names, no request (headers carry the
/// credential), long bodies cut.
fn http_error(e: &rmcp::service::ClientInitializeError) -> String {
    if e.is_authorization_required() {
        return "the server requires authorization (HTTP 401/403)".to_owned();
    }
    crate::text::excerpt(&without_type_names(&handshake_error(e)), 300)
}

/// A handshake error in words. When `server/discover` and then `initialize` failed, the
/// second says why: a server of an earlier revision is expected to refuse the first.
fn handshake_error(e: &rmcp::service::ClientInitializeError) -> String {
    match e {
        rmcp::service::ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
            handshake_error(fallback)
        }
        other => other.to_string(),
    }
}

/// rmcp's transport errors open with the transport's Rust type (`Transport
/// [rmcp::transport::worker::WorkerTransport<…>] error: …`); users need what follows.
fn without_type_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(len) = bracketed_len(&rest[open..]) else {
            break;
        };
        let inner = &rest[open + 1..open + len - 1];
        out.push_str(&rest[..open]);
        if !inner.contains("::") {
            out.push_str(&rest[open..open + len]);
        }
        rest = &rest[open + len..];
    }
    out.push_str(rest);
    out.replace("Transport  error", "transport error")
        .replace("Transport error", "transport error")
}

/// The length of the balanced `[…]` group `text` starts with.
fn bracketed_len(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

impl Connection {
    /// `text` without anything secret about the endpoint.
    fn clean(&self, text: &str) -> String {
        crate::text::scrub(text, &self.secrets)
    }

    /// Why the connection closed, in words (`detail` is the transport's, cleaned).
    fn closed(&self, detail: &str) -> CallError {
        if self.oversized.load(Ordering::SeqCst) {
            CallError::Closed(OVERSIZED.to_owned())
        } else {
            CallError::Closed(self.clean(&without_type_names(detail)))
        }
    }

    /// Whether the server has gone away.
    pub(super) fn refused(&self) -> &Refused {
        &self.refused
    }

    pub(super) fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }

    /// The server's last stderr lines (stdio) as a note for error messages.
    pub(super) fn stderr_note(&self) -> String {
        self.stderr
            .as_ref()
            .map(StderrTail::note)
            .unwrap_or_default()
    }

    /// Whether the server declared resources and prompts (`initialize` capabilities).
    pub(super) fn offers(&self) -> (bool, bool) {
        let caps = self.service.peer_info().map(|i| i.capabilities.clone());
        caps.map_or((false, false), |c| {
            (c.resources.is_some(), c.prompts.is_some())
        })
    }

    /// One request by method name, its result as JSON whatever rmcp makes of it (a
    /// server's odd field does not refuse the whole answer).
    pub(super) async fn raw(
        &self,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, CallError> {
        let request = ClientRequest::CustomRequest(CustomRequest::new(method.to_owned(), params));
        match self.service.peer().send_request(request).await {
            Ok(ServerResult::CustomResult(r)) => Ok(r.0),
            Ok(other) => serde_json::to_value(other).map_err(|e| CallError::Rpc {
                code: ErrorCode::INTERNAL_ERROR.0,
                message: e.to_string(),
            }),
            Err(rmcp::ServiceError::McpError(e)) => Err(CallError::Rpc {
                code: e.code.0,
                message: self.clean(&e.message),
            }),
            Err(e) => Err(self.closed(&e.to_string())),
        }
    }

    /// The protocol revision the server speaks on this connection.
    pub(super) fn revision(&self) -> Option<String> {
        let info = self.service.peer_info()?;
        Some(info.protocol_version.as_str().to_owned())
    }

    /// The server's `instructions`, as it gave them.
    pub(super) fn instructions(&self) -> Option<String> {
        self.service.peer_info()?.instructions.clone()
    }

    /// The server's name and version, as it introduced itself.
    pub(super) fn server(&self) -> Option<String> {
        let info = self.service.peer_info()?;
        let server = info.server_info.as_ref()?;
        Some(format!("{} {}", server.name, server.version))
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_known_to_be_of_an_earlier_revision_is_not_asked_to_discover() {
        let auto = |m: &ClientLifecycleMode| matches!(m, ClientLifecycleMode::Auto { .. });
        assert!(auto(&lifecycle(None)));
        assert!(auto(&lifecycle(Some("2026-07-28"))));
        assert_eq!(
            lifecycle(Some("2025-11-25")),
            ClientLifecycleMode::Initialize
        );
        assert_eq!(
            lifecycle(Some("2024-11-05")),
            ClientLifecycleMode::Initialize
        );
    }

    #[test]
    fn an_endpoints_key_never_reaches_an_error() {
        let scrub = |url: &str| {
            let text = format!("error sending request for url ({url})");
            crate::text::scrub(&text, &url_secrets(url))
        };
        let clean = scrub("https://mcp.example.com/mcp?api_key=sk-123&team=1#frag");
        assert!(!clean.contains("sk-123"), "{clean}");
        assert!(clean.contains("https://mcp.example.com/mcp?***"), "{clean}");
        let clean = scrub("https://mcp.example.com/mcp/sk-4567890/x");
        assert!(!clean.contains("sk-4567890"), "{clean}");
        let clean = scrub("https://user:pa55w0rd@mcp.example.com/mcp");
        assert!(!clean.contains("pa55w0rd"), "{clean}");
        // Short paths stay readable.
        assert_eq!(
            scrub("http://127.0.0.1/mcp"),
            "error sending request for url (http://127.0.0.1/mcp)"
        );
        assert!(url_secrets("http://127.0.0.1/mcp?").is_empty());
    }

    #[test]
    fn rust_type_names_are_left_out_of_transport_errors() {
        let text = "Transport [rmcp::transport::worker::WorkerTransport<rmcp::transport::streamable_http_client::StreamableHttpClientWorker<reqwest::Client>>] error: Client error: HTTP status client error (400 Bad Request) [x]";
        assert_eq!(
            without_type_names(text),
            "transport error: Client error: HTTP status client error (400 Bad Request) [x]"
        );
    }
}
