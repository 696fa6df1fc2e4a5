//! The gateway as an MCP *client* of a downstream server (the `mcp` executor's wire; the
//! executor's lifecycle lives in `exec/mcp.rs`). rmcp stays inside `mcp/`: this module
//! speaks in JSON values and the gateway's own types.
//!
//! One [`Connection`] per downstream server: stdio (over the pipes of a child started by
//! `exec/process.rs`) or streamable HTTP (over `net`'s API client). Progress notifications
//! are routed to the call that sent the token; `tools/list_changed` calls the connection's
//! hook; dropping a connection closes it (and, for stdio, kills the child's group).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    Implementation, ProgressNotificationParam, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::exec::process::{ChildGuard, Spawned, StderrTail};
use crate::exec::{Progress, ProgressSink};

/// How to reach a server.
pub enum Transport {
    /// A started child; its stdin/stdout carry MCP.
    Stdio(Box<Spawned>),
    /// A streamable HTTP endpoint with the headers every request carries (secrets included).
    Http {
        /// Endpoint.
        url: String,
        /// Headers, the credential's last.
        headers: Vec<(String, String)>,
    },
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Stdio(s) => f.debug_tuple("Stdio").field(&s.guard.pid()).finish(),
            // Header values may be credentials: names only.
            Transport::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", &hide_query(url, query_of(url)))
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
pub struct RemoteTool {
    /// Name.
    pub name: String,
    /// Description (may be empty).
    pub description: String,
    /// `inputSchema`.
    pub input_schema: Value,
    /// `outputSchema`, when declared.
    pub output_schema: Option<Value>,
}

/// How a downstream call failed.
#[derive(Debug)]
pub enum CallError {
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

/// What the gateway does with the server's notifications.
struct Handler {
    sinks: Sinks,
    on_tools_changed: Arc<dyn Fn() + Send + Sync>,
}

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

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.client_info = Implementation::new("aai-gateway", env!("CARGO_PKG_VERSION"));
        info
    }
}

fn token_key(token: &rmcp::model::ProgressToken) -> String {
    serde_json::to_string(token).unwrap_or_default()
}

/// A live connection to one downstream server.
pub struct Connection {
    service: RunningService<RoleClient, Handler>,
    sinks: Sinks,
    /// Kills the stdio server's process group when the connection is dropped.
    _child: Option<ChildGuard>,
    stderr: Option<StderrTail>,
    /// The endpoint's query string (HTTP), kept out of every error text: a key may be in it.
    query: Option<String>,
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
pub async fn connect(
    transport: Transport,
    deadline: Duration,
    on_tools_changed: Arc<dyn Fn() + Send + Sync>,
) -> Result<Connection, String> {
    let sinks = Sinks::default();
    let handler = Handler {
        sinks: sinks.clone(),
        on_tools_changed,
    };
    let (service, child, stderr, query) = match transport {
        Transport::Stdio(spawned) => {
            let Spawned {
                guard,
                stdin,
                stdout,
                stderr_tail,
            } = *spawned;
            let started = tokio::time::timeout(deadline, handler.serve((stdout, stdin))).await;
            let note = stderr_tail.note();
            let service = match started {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err(format!("the MCP handshake failed: {e}{note}")),
                Err(_) => {
                    return Err(format!(
                        "the server did not finish the MCP handshake within {} s{note}",
                        deadline.as_secs()
                    ));
                }
            };
            (service, Some(guard), Some(stderr_tail), None)
        }
        Transport::Http { url, headers } => {
            let client = crate::net::client(crate::net::Purpose::Api)?.clone();
            let mut custom = HashMap::new();
            for (name, value) in &headers {
                let name = axum::http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("`{name}` is not a valid header name"))?;
                let mut value = axum::http::HeaderValue::from_str(value)
                    .map_err(|_| format!("the value of header `{name}` is not valid"))?;
                value.set_sensitive(true);
                custom.insert(name, value);
            }
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            let service = match tokio::time::timeout(deadline, handler.serve(transport)).await {
                Ok(Ok(s)) => s,
                // rmcp's error may quote the request; only its kind is kept.
                Ok(Err(e)) => {
                    let why = hide_query(&http_error(&e), query_of(&url));
                    return Err(format!("the MCP handshake failed: {why}"));
                }
                Err(_) => {
                    return Err(format!(
                        "the server did not finish the MCP handshake within {} s",
                        deadline.as_secs()
                    ));
                }
            };
            (service, None, None, query_of(&url).map(str::to_owned))
        }
    };
    Ok(Connection {
        service,
        sinks,
        _child: child,
        stderr,
        query,
    })
}

/// The query string of `url`, if it has one.
fn query_of(url: &str) -> Option<&str> {
    url.split_once('?')
        .map(|(_, q)| q.split('#').next().unwrap_or(q))
        .filter(|q| !q.is_empty())
}

/// `text` with `query` (an endpoint's query string) replaced by `…`.
fn hide_query(text: &str, query: Option<&str>) -> String {
    match query {
        Some(q) => text.replace(q, "…"),
        None => text.to_owned(),
    }
}

/// An HTTP handshake error, said without the request (headers carry the credential).
fn http_error(e: &rmcp::service::ClientInitializeError) -> String {
    if e.is_authorization_required() {
        return "the server requires authorization (HTTP 401/403)".to_owned();
    }
    let text = e.to_string();
    // Errors of reqwest name the URL at most; never the headers. Cut long bodies.
    crate::text::excerpt(&text, 300)
}

impl Connection {
    /// `text` without the endpoint's query string.
    fn clean(&self, text: &str) -> String {
        hide_query(text, self.query.as_deref())
    }

    /// Whether the server has gone away.
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }

    /// The server's last stderr lines (stdio) as a note for error messages.
    pub fn stderr_note(&self) -> String {
        self.stderr
            .as_ref()
            .map(StderrTail::note)
            .unwrap_or_default()
    }

    /// The server's name and version, as it introduced itself.
    pub fn server(&self) -> Option<String> {
        let info = self.service.peer_info()?;
        let server = info.server_info.as_ref()?;
        Some(format!("{} {}", server.name, server.version))
    }

    /// Every tool, all pages.
    pub async fn list_tools(&self, deadline: Duration) -> Result<Vec<RemoteTool>, String> {
        let tools = tokio::time::timeout(deadline, self.service.list_all_tools())
            .await
            .map_err(|_| format!("tools/list got no answer within {} s", deadline.as_secs()))?
            .map_err(|e| self.clean(&format!("tools/list failed: {e}")))?;
        Ok(tools
            .into_iter()
            .map(|t| RemoteTool {
                name: t.name.into_owned(),
                description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
                input_schema: Value::Object((*t.input_schema).clone()),
                output_schema: t.output_schema.map(|s| Value::Object((*s).clone())),
            })
            .collect())
    }

    /// Calls `name` with `args`; the result is the server's `CallToolResult` as JSON,
    /// untouched. Progress goes to `progress`; `cancel` and `deadline` cancel the request
    /// downstream too.
    pub async fn call(
        &self,
        name: &str,
        args: Map<String, Value>,
        progress: Option<ProgressSink>,
        cancel: &CancellationToken,
        deadline: Duration,
    ) -> Result<Value, CallError> {
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = Some(args);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let peer = self.service.peer().clone();
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| CallError::Closed(self.clean(&e.to_string())))?;
        let key = token_key(&handle.progress_token);
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
            Err(rmcp::ServiceError::McpError(e)) => Err(CallError::Rpc {
                code: e.code.0,
                message: e.message.into_owned(),
            }),
            Err(e) => Err(CallError::Closed(self.clean(&e.to_string()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoints_query_never_reaches_an_error() {
        let url = "https://mcp.example.com/mcp?api_key=sk-123&team=1#frag";
        let q = query_of(url);
        assert_eq!(q, Some("api_key=sk-123&team=1"));
        let text = format!("error sending request for url ({url})");
        let clean = hide_query(&text, q);
        assert!(!clean.contains("sk-123"), "{clean}");
        assert!(clean.contains("https://mcp.example.com/mcp?…"));
        assert_eq!(query_of("http://127.0.0.1/mcp"), None);
        assert_eq!(query_of("http://127.0.0.1/mcp?"), None);
    }
}
