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

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    CustomRequest, Implementation, ProgressNotificationParam, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

use crate::exec::process::{ChildGuard, Spawned, StderrTail};
use crate::exec::{Progress, ProgressSink};
use crate::telemetry::{TRACEPARENT, TRACESTATE};

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
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Connects and runs the MCP handshake within `deadline`. `on_tools_changed` runs when
/// the server says its tool list changed. The error is plain text without secrets.
pub(super) async fn connect(
    transport: Transport,
    deadline: Duration,
    on_tools_changed: Arc<dyn Fn() + Send + Sync>,
    refused: Refused,
) -> Result<Connection, String> {
    let sinks = Sinks::default();
    let calls = super::asks::Calls::default();
    let handler = Handler {
        sinks: sinks.clone(),
        on_tools_changed,
        calls: calls.clone(),
    };
    let oversized = Arc::new(AtomicBool::new(false));
    let (service, child, stderr, secrets) = match transport {
        Transport::Stdio(spawned) => {
            let Spawned {
                guard,
                stdin,
                stdout,
                stderr_tail,
            } = *spawned;
            let stdout = Capped::new(stdout, oversized.clone());
            let started = tokio::time::timeout(deadline, handler.serve((stdout, stdin))).await;
            let note = stderr_tail.note();
            let service = match started {
                Ok(Ok(s)) => s,
                Ok(Err(_)) if oversized.load(Ordering::SeqCst) => {
                    return Err(format!("{OVERSIZED}{note}"));
                }
                Ok(Err(e)) => return Err(format!("the MCP handshake failed: {e}{note}")),
                Err(_) => {
                    return Err(format!(
                        "the server did not finish the MCP handshake within {} s{note}",
                        deadline.as_secs()
                    ));
                }
            };
            (service, Some(guard), Some(stderr_tail), Vec::new())
        }
        Transport::Http {
            url,
            headers,
            mut secrets,
            mode,
        } => {
            secrets.extend(url_secrets(&url));
            secrets.sort_by_key(|f| std::cmp::Reverse(f.len()));
            let client = crate::net::client(crate::net::Purpose::Api)
                .map_err(|e| e.to_string())?
                .clone();
            let mut custom = HashMap::new();
            for (name, value) in &headers {
                let name =
                    reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
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
                    match tokio::time::timeout(deadline, handler.clone().serve(transport)).await {
                        Ok(Ok(s)) => Some(Ok(s)),
                        Ok(Err(e)) => Some(Err(e)),
                        Err(_) => return Err(timed_out()),
                    }
                }
            };
            let service = match (streamable, mode) {
                (Some(Ok(service)), _) => service,
                (Some(Err(e)), aai_descriptor::HttpMode::Streamable) => {
                    let why = crate::text::scrub(&http_error(&e), &secrets);
                    return Err(format!("the MCP handshake failed: {why}"));
                }
                // The MCP specification's backwards compatibility: a server that does not
                // take the streamable handshake may be an HTTP+SSE one.
                (Some(Err(e)), _) if e.is_authorization_required() => {
                    return Err(format!("the MCP handshake failed: {}", http_error(&e)));
                }
                (streamable, _) => {
                    let left = deadline.saturating_sub(begun.elapsed());
                    let sse = tokio::time::timeout(left, serve_sse(handler, client, &url, custom));
                    match (sse.await, streamable) {
                        (Ok(Ok(service)), _) => service,
                        (Err(_), _) => return Err(timed_out()),
                        // Not an SSE server either: the streamable attempt's error says
                        // more.
                        (Ok(Err(_)), Some(Err(e))) => {
                            let why = crate::text::scrub(&http_error(&e), &secrets);
                            return Err(format!("the MCP handshake failed: {why}"));
                        }
                        (Ok(Err(why)), _) => {
                            let why = crate::text::scrub(&why, &secrets);
                            return Err(format!("the MCP handshake over SSE failed: {why}"));
                        }
                    }
                }
            };
            (service, None, None, secrets)
        }
    };
    Ok(Connection {
        service,
        calls,
        refused,
        sinks,
        _child: child,
        stderr,
        secrets,
        oversized,
    })
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
    crate::text::excerpt(&without_type_names(&e.to_string()), 300)
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

/// Why a stdio connection ended when the server sent a line longer than the transport
/// takes.
const OVERSIZED: &str = "the server sent a message over 16 MiB (a result too large to pass on); the connection was closed and is opened again on the next call";

/// A stdio server's stdout, passed on line by line: it ends at the first line longer than
/// rmcp takes (rmcp would drop such a line and read on, so the call it answered would
/// wait for its whole timeout; ending the stream fails the connection's calls at once, and
/// `over` says why), and a line nested deeper than rmcp's JSON parser goes (128 levels)
/// loses the list entries that are that deep ([`drop_deep_entries`]): one tool with a
/// hostile schema must not cost the server its whole `tools/list`.
struct Capped<R> {
    inner: R,
    /// The current line so far.
    held: Vec<u8>,
    /// Whole lines ready to be read.
    ready: std::collections::VecDeque<u8>,
    /// The length of each line in `ready` (of the first: what is left of it).
    lines: std::collections::VecDeque<usize>,
    /// The JSON nesting of the current line.
    depth: Depth,
    eof: bool,
    over: Arc<AtomicBool>,
}

impl<R> Capped<R> {
    fn new(inner: R, over: Arc<AtomicBool>) -> Capped<R> {
        Capped {
            inner,
            held: Vec::new(),
            ready: std::collections::VecDeque::new(),
            lines: std::collections::VecDeque::new(),
            depth: Depth::default(),
            eof: false,
            over,
        }
    }

    /// Takes in `bytes`: whole lines become ready.
    fn take(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.over.load(Ordering::Relaxed) {
                return;
            }
            self.held.push(b);
            if b == b'\n' {
                let mut line = std::mem::take(&mut self.held);
                if self.depth.deepest > DEEPEST {
                    line = drop_deep_entries(&line);
                }
                self.lines.push_back(line.len());
                self.ready.extend(line);
                self.depth = Depth::default();
            } else if self.held.len() > DEFAULT_MAX_LINE_LENGTH {
                // The whole lines before this one are kept; the stream ends after them.
                self.held = Vec::new();
                self.over.store(true, Ordering::Relaxed);
            } else {
                self.depth.feed(b);
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Capped<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        loop {
            if let Some(&line) = self.lines.front() {
                // At most one line per read, each a unit of the task's budget: rmcp starts
                // a task for every notification it reads, and a server that floods them
                // must not get ahead of those tasks (300,000 progress notifications once
                // held 400 MB). Out of budget, the reader waits its turn behind them.
                let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
                let n = buf.remaining().min(line);
                let chunk: Vec<u8> = self.ready.drain(..n).collect();
                buf.put_slice(&chunk);
                if n == line {
                    self.lines.pop_front();
                } else if let Some(left) = self.lines.front_mut() {
                    *left -= n;
                }
                coop.made_progress();
                return Poll::Ready(Ok(()));
            }
            if self.eof || self.over.load(Ordering::Relaxed) {
                return Poll::Ready(Ok(())); // end of stream
            }
            let mut scratch = [0u8; 16 * 1024];
            let mut read = ReadBuf::new(&mut scratch);
            std::task::ready!(Pin::new(&mut self.inner).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                // The end: a last line without its newline goes as it is.
                self.eof = true;
                let rest = std::mem::take(&mut self.held);
                if !rest.is_empty() {
                    self.lines.push_back(rest.len());
                    self.ready.extend(rest);
                }
            } else {
                let bytes = read.filled().to_vec();
                self.take(&bytes);
            }
        }
    }
}

/// Deeper than this, a line's list entries are dropped (serde_json, under rmcp, stops at
/// 128 levels and drops the whole line).
const DEEPEST: usize = 120;

/// JSON nesting, fed byte by byte (strings skipped).
#[derive(Debug, Default, Clone, Copy)]
struct Depth {
    now: usize,
    deepest: usize,
    in_string: bool,
    escaped: bool,
}

impl Depth {
    fn feed(&mut self, b: u8) {
        if self.in_string {
            match (self.escaped, b) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                _ => {}
            }
            return;
        }
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => {
                self.now += 1;
                self.deepest = self.deepest.max(self.now);
            }
            b'}' | b']' => self.now = self.now.saturating_sub(1),
            _ => {}
        }
    }
}

/// `line` without the entries of its lists (arrays three levels in, such as
/// `result.tools`) that nest deeper than [`DEEPEST`], commas mended; the rest of the
/// message is kept as it is. A line whose deep part is elsewhere comes back unchanged
/// (rmcp then drops it, as before).
fn drop_deep_entries(line: &[u8]) -> Vec<u8> {
    // (start, end, where its list opened) of each entry to drop.
    let mut drop: Vec<(usize, usize, usize)> = Vec::new();
    let mut depth = Depth::default();
    // The entry of a depth-3 list being read: where it starts and how deep it goes.
    let mut entry: Option<(usize, usize)> = None;
    let mut list_open = false;
    let mut list_at = 0;
    for (i, &b) in line.iter().enumerate() {
        let before = depth;
        depth.feed(b);
        if before.in_string || depth.in_string && b == b'"' {
            if let Some((_, deepest)) = entry.as_mut() {
                *deepest = (*deepest).max(depth.now);
            }
            continue;
        }
        match b {
            b'[' if depth.now == 3 => {
                list_open = true;
                list_at = i;
            }
            b']' if before.now == 3 => {
                if let Some((start, deepest)) = entry.take()
                    && deepest > DEEPEST
                {
                    drop.push((start, i, list_at));
                }
                list_open = false;
            }
            b',' if list_open && depth.now == 3 => {
                if let Some((start, deepest)) = entry.take()
                    && deepest > DEEPEST
                {
                    drop.push((start, i, list_at));
                }
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ if list_open && before.now == 3 && entry.is_none() => entry = Some((i, depth.now)),
            _ => {}
        }
        if let Some((_, deepest)) = entry.as_mut() {
            *deepest = (*deepest).max(depth.now);
        }
    }
    if drop.is_empty() {
        return line.to_vec();
    }
    let mut out = Vec::with_capacity(line.len());
    let mut at = 0;
    for (start, end, list_at) in drop {
        // The entry and the comma after it (else the comma before it, within its list)
        // go.
        let mut cut_start = start;
        let mut cut_end = end;
        let from = at.max(list_at + 1);
        if line.get(end) == Some(&b',') {
            cut_end = end + 1;
        } else if from < start
            && let Some(comma) = line[from..start].iter().rposition(|&c| c == b',')
        {
            cut_start = from + comma;
        }
        out.extend_from_slice(&line[at..cut_start.max(at)]);
        at = cut_end;
    }
    out.extend_from_slice(&line[at..]);
    out
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

    /// Every item of a paged list (`resources/list` → `resources`, `prompts/list` →
    /// `prompts`), at most [`MAX_LISTED`] items and [`MAX_PAGES`] pages, read as JSON.
    pub(super) async fn list_all(
        &self,
        method: &str,
        key: &str,
        deadline: Duration,
    ) -> Result<Vec<Value>, String> {
        let listing = async {
            let mut items = Vec::new();
            let mut cursor: Option<String> = None;
            for _ in 0..MAX_PAGES {
                let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
                let page = self.raw(method, params).await.map_err(|e| match e {
                    CallError::Rpc { message, .. } | CallError::Closed(message) => {
                        format!("{method} failed: {message}")
                    }
                    _ => format!("{method} failed"),
                })?;
                let Some(listed) = page.get(key).and_then(Value::as_array) else {
                    return Err(format!("the server's {method} answer has no `{key}` list"));
                };
                for item in listed {
                    if items.len() >= MAX_LISTED {
                        tracing::warn!(
                            "{method}: more than {MAX_LISTED} items; the rest are left out"
                        );
                        return Ok(items);
                    }
                    items.push(item.clone());
                }
                cursor = page
                    .get("nextCursor")
                    .and_then(Value::as_str)
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned);
                if cursor.is_none() {
                    return Ok(items);
                }
            }
            Ok(items)
        };
        tokio::time::timeout(deadline, listing)
            .await
            .map_err(|_| format!("{method} got no answer within {} s", deadline.as_secs()))?
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
                code: -32603,
                message: e.to_string(),
            }),
            Err(rmcp::ServiceError::McpError(e)) => Err(CallError::Rpc {
                code: e.code.0,
                message: self.clean(&e.message),
            }),
            Err(e) => Err(self.closed(&e.to_string())),
        }
    }

    /// The server's name and version, as it introduced itself.
    pub(super) fn server(&self) -> Option<String> {
        let info = self.service.peer_info()?;
        let server = info.server_info.as_ref()?;
        Some(format!("{} {}", server.name, server.version))
    }

    /// Every tool, all pages, read leniently: a tool the gateway cannot offer (no name, a
    /// name used before, too many tools) is left out with a warning, and a tool whose
    /// `inputSchema` is not an object schema takes any object (the server still checks).
    /// rmcp's typed listing would refuse the whole list for one such tool.
    pub(super) async fn list_tools(&self, deadline: Duration) -> Result<Vec<RemoteTool>, String> {
        let listing = async {
            let mut tools = Vec::new();
            let mut seen = HashSet::new();
            let mut cursor: Option<String> = None;
            for _ in 0..MAX_PAGES {
                let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
                let request =
                    ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
                let page =
                    match self.service.peer().send_request(request).await {
                        Ok(ServerResult::ListToolsResult(r)) => {
                            serde_json::to_value(r).unwrap_or_default()
                        }
                        Ok(ServerResult::CustomResult(r)) => r.0,
                        Ok(_) => return Err(
                            "the server answered tools/list with something other than a tool list"
                                .to_owned(),
                        ),
                        Err(e) => {
                            return Err(format!(
                                "tools/list failed: {}",
                                self.clean(&without_type_names(&e.to_string()))
                            ));
                        }
                    };
                let Some(listed) = page.get("tools").and_then(Value::as_array) else {
                    return Err("the server's tools/list answer has no `tools` list".to_owned());
                };
                for raw in listed {
                    match read_tool(raw, &seen) {
                        Ok(_) if tools.len() >= MAX_TOOLS => {
                            tracing::warn!(
                                "the server lists more than {MAX_TOOLS} tools; the rest are left out"
                            );
                            return Ok(tools);
                        }
                        Ok(tool) => {
                            seen.insert(tool.name.clone());
                            tools.push(tool);
                        }
                        Err(why) => tracing::warn!("a listed tool is left out: {why}"),
                    }
                }
                cursor = page
                    .get("nextCursor")
                    .and_then(Value::as_str)
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned);
                if cursor.is_none() {
                    return Ok(tools);
                }
            }
            tracing::warn!(
                "the server's tool list has more than {MAX_PAGES} pages; the rest are left out"
            );
            Ok(tools)
        };
        tokio::time::timeout(deadline, listing)
            .await
            .map_err(|_| format!("tools/list got no answer within {} s", deadline.as_secs()))?
    }

    /// Calls `name` with `args`; the result is the server's `CallToolResult` as JSON,
    /// untouched. Progress goes to `progress`; `cancel` and `deadline` cancel the request
    /// downstream too.
    pub(super) async fn call(
        &self,
        name: &str,
        args: Map<String, Value>,
        progress: Option<ProgressSink>,
        cancel: &CancellationToken,
        deadline: Duration,
        caller: Caller,
    ) -> Result<Value, CallError> {
        let trace = caller.trace.clone();
        let in_flight = self.calls.enter(caller);
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = Some(args);
        let mut request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // W3C trace context in `_meta`, as MCP's convention has it.
        if let Some(trace) = &trace {
            use rmcp::model::GetMeta;
            let meta = request.get_meta_mut();
            meta.insert(TRACEPARENT.to_owned(), Value::String(trace.traceparent()));
            if let Some(state) = trace.tracestate() {
                meta.insert(TRACESTATE.to_owned(), Value::String(state.to_owned()));
            }
        }
        let peer = self.service.peer().clone();
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| self.closed(&e.to_string()))?;
        let key = token_key(&handle.progress_token);
        in_flight.sent(handle.id.clone(), key.clone());
        if let Some(sink) = progress {
            self.sinks
                .lock()
                .expect("sinks lock")
                .insert(key.clone(), sink);
        }
        let id = handle.id.clone();
        let outcome = tokio::select! {
            answer = handle.await_response() => Ok(answer),
            () = cancel.cancelled() => Err(CallError::Cancelled),
            () = tokio::time::sleep(deadline) => Err(CallError::Timeout),
        };
        // rmcp hands each notification to a task of its own, spawned before the answer
        // that followed it on the wire is delivered: let those tasks run before the
        // call's progress sink goes, so the last progress is not lost.
        if outcome.is_ok() {
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
        }
        self.sinks.lock().expect("sinks lock").remove(&key);
        let answer = match outcome {
            Ok(answer) => answer,
            Err(why) => {
                let reason = match why {
                    CallError::Timeout => "timed out",
                    _ => "cancelled by the client",
                };
                // Best effort: the server may be gone already.
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some(reason.to_owned()),
                    ))
                    .await;
                return Err(why);
            }
        };
        match answer {
            Ok(ServerResult::CallToolResult(result)) => {
                serde_json::to_value(result).map_err(|e| CallError::Rpc {
                    code: -32603,
                    message: e.to_string(),
                })
            }
            Ok(_) => Err(CallError::Rpc {
                code: -32603,
                message: "the server answered tools/call with something other than a tool result"
                    .to_owned(),
            }),
            // A server may echo the request's headers in its error.
            Err(rmcp::ServiceError::McpError(e)) => Err(CallError::Rpc {
                code: e.code.0,
                message: self.clean(&e.message),
            }),
            Err(e) => Err(self.closed(&e.to_string())),
        }
    }
}

/// Most pages of a tool list read, and most tools kept: a server listing more is broken
/// or hostile, and a guide of more would not fit any agent's context.
const MAX_PAGES: usize = 100;
const MAX_TOOLS: usize = 1000;
/// Most resources (or prompts) of a server the gateway lists in its guide.
const MAX_LISTED: usize = 200;

/// One listed tool as the gateway can offer it, or why it cannot (`seen`: names so far).
fn read_tool(raw: &Value, seen: &HashSet<String>) -> Result<RemoteTool, String> {
    let name = raw.get("name").and_then(Value::as_str).unwrap_or("");
    let shown = crate::text::excerpt(&name.escape_debug().to_string(), 60);
    if !valid_tool_name(name) {
        return Err(format!(
            "the name `{shown}` is not a tool name (1–128 letters, digits, `_`, `-`, `.`, `/`)"
        ));
    }
    if seen.contains(name) {
        return Err(format!("`{shown}` is listed twice; the first is kept"));
    }
    let input_schema = match raw.get("inputSchema") {
        Some(s) if s.get("type").and_then(Value::as_str) == Some("object") => s.clone(),
        _ => {
            tracing::warn!(
                tool = name,
                "the tool's inputSchema is not an object schema; it takes any object"
            );
            json!({"type": "object"})
        }
    };
    Ok(RemoteTool {
        name: name.to_owned(),
        description: raw
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        input_schema,
        output_schema: raw.get("outputSchema").filter(|s| s.is_object()).cloned(),
        // A hint from the server, trusted only as far as `consent.readOnly` says.
        read_only: raw
            .pointer("/annotations/readOnlyHint")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        listing: None,
    })
}

/// The MCP specification's tool names: 1–128 of `A–Z a–z 0–9 _ - . /`.
fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn listed_tools_are_read_leniently() {
        let mut seen = HashSet::new();
        let ok = read_tool(&json!({"name": "echo", "inputSchema": "nope"}), &seen).unwrap();
        assert_eq!(ok.input_schema, json!({"type": "object"}));
        seen.insert("echo".to_owned());
        assert!(
            read_tool(&json!({"name": "echo"}), &seen)
                .unwrap_err()
                .contains("twice")
        );
        for bad in [
            "",
            "has space",
            "new\nline",
            "`tick`|pipe",
            &"x".repeat(129),
        ] {
            assert!(read_tool(&json!({"name": bad}), &seen).is_err(), "{bad:?}");
        }
        let err = read_tool(&json!({"name": "a\u{1b}[31mred"}), &seen).unwrap_err();
        assert!(!err.contains('\u{1b}'), "{err}");
    }

    #[tokio::test]
    async fn an_oversized_line_ends_the_stream_after_the_whole_lines() {
        use tokio::io::AsyncReadExt;
        let mut data = b"{\"ok\":1}\n".to_vec();
        data.extend(std::iter::repeat_n(b'x', DEFAULT_MAX_LINE_LENGTH + 10));
        data.extend(b"\n{\"after\":1}\n");
        let over = Arc::new(AtomicBool::new(false));
        let mut capped = Capped::new(&data[..], over.clone());
        let mut out = Vec::new();
        capped.read_to_end(&mut out).await.unwrap();
        assert!(over.load(Ordering::SeqCst));
        assert!(out.starts_with(b"{\"ok\":1}\n"));
        assert!(out.len() <= 9 + DEFAULT_MAX_LINE_LENGTH, "{}", out.len());
        assert!(!out.ends_with(b"{\"after\":1}\n"));
    }

    #[tokio::test]
    async fn each_read_gives_at_most_one_line_and_spends_the_tasks_budget() {
        use tokio::io::AsyncReadExt;
        let data = b"{\"a\":10}\n{\"b\":2}\nlast, without a newline".to_vec();
        let mut capped = Capped::new(&data[..], Arc::new(AtomicBool::new(false)));
        let mut reads = Vec::new();
        let mut buf = [0u8; 4];
        loop {
            let n = capped.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            reads.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        // A line longer than the buffer comes in parts; no read spans two lines.
        assert_eq!(
            reads,
            [
                "{\"a\"", ":10}", "\n", "{\"b\"", ":2}\n", "last", ", wi", "thou", "t a ", "newl",
                "ine"
            ]
        );
        // 300 lines in one chunk: the reader runs out of budget (128 a turn) and yields
        // to the tasks the lines started, instead of reading them all in one turn.
        let many = "{}\n".repeat(300);
        let mut capped = Capped::new(many.as_bytes(), Arc::new(AtomicBool::new(false)));
        let mut line = [0u8; 3];
        let mut in_one_turn = 0;
        while tokio::task::coop::has_budget_remaining() {
            assert_eq!(capped.read(&mut line).await.unwrap(), 3);
            in_one_turn += 1;
        }
        assert!(
            in_one_turn < 300,
            "{in_one_turn} lines read without yielding"
        );
    }

    #[tokio::test]
    async fn a_list_entry_too_deep_for_the_parser_is_dropped_and_the_rest_kept() {
        use tokio::io::AsyncReadExt;
        let deep = format!("{}1{}", "{\"a\":".repeat(200), "}".repeat(200));
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{{"name":"first","inputSchema":{{}}}},{{"name":"deep","inputSchema":{deep}}},{{"name":"last","s":"[{{,"}}]}}}}"#
        );
        let data = format!("{{\"ok\":1}}\n{line}\n");
        let mut capped = Capped::new(data.as_bytes(), Arc::new(AtomicBool::new(false)));
        let mut out = Vec::new();
        capped.read_to_end(&mut out).await.unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("{\"ok\":1}"));
        let kept: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        let names: Vec<&str> = kept["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["first", "last"]);
        // The deep one last, or alone: the commas still fit.
        for tools in [format!(r#"[{{"name":"a"}},{deep}]"#), format!("[{deep}]")] {
            let line = format!(r#"{{"id":1,"result":{{"tools":{tools}}}}}"#);
            let fixed = drop_deep_entries(line.as_bytes());
            serde_json::from_slice::<Value>(&fixed)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&fixed)));
        }
    }
}
