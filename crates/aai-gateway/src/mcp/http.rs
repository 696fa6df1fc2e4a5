//! The Streamable HTTP transport: MCP at `/mcp`, through rmcp's `StreamableHttpService`,
//! one handler per session over the one [`Gateway`]. The listener, the Host/Origin
//! checks and the bearer token are `listen`'s; rmcp checks Host and Origin again with
//! the same lists — except Host with a token, where `listen` also accepts the names remote
//! clients use for this machine (any IP address, its host name, `web.allowedHosts`),
//! which rmcp's list cannot express.

use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::server_side_http::{ServerSseMessage, SessionId};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionHandle, LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::Server;
use crate::gateway::Handle;

/// How the `/mcp` service of a listener is set up.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// Which bearer token it requires (its public name), for the callers' identity.
    pub token: Option<String>,
    /// Whether the listener checks `Host` against names rmcp's list cannot hold (a token
    /// or the team's tokens: remote clients, the public name behind a proxy).
    pub remote_hosts: bool,
    /// More browser origins to accept (the public origin behind a proxy).
    pub origins: Vec<String>,
    /// This replica's name (`--replica`): every session id starts with `<name>.`, so
    /// that a proxy can send a session's requests to the replica that holds it.
    pub replica: Option<String>,
}

/// The `/mcp` service of a listener on `addr`.
pub fn service(gateway: Handle, addr: SocketAddr, setup: Setup) -> axum::Router {
    let mut origins = crate::access::allowed_origins(addr);
    origins.extend(setup.origins);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    let config = if setup.remote_hosts {
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(crate::access::allowed_hosts(addr))
    };
    let token = setup.token;
    let metrics = gateway.pipeline().metrics().cloned();
    let shared = Arc::<super::Shared>::default();
    let factory = move || {
        Ok(Server::new(gateway.clone(), "http")
            .with_token(token.clone())
            .with_shared(shared.clone()))
    };
    let mut sessions = LocalSessionManager::default();
    // An idle session (no request, no open stream) is closed after two minutes; each
    // keeps at most this many messages for a client that is not reading (older ones go).
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    sessions.session_config.channel_capacity = SESSION_QUEUE;
    let sessions = Arc::new(Sessions {
        manager: Arc::new(sessions),
        clients: std::sync::Mutex::default(),
    });
    // `/metrics` reads the open sessions when scraped.
    if let Some(metrics) = &metrics {
        let manager = sessions.manager.clone();
        metrics.probe_sessions(move || {
            let open = manager.sessions.try_read().ok()?;
            i64::try_from(open.len()).ok()
        });
    }
    let routed = Arc::new(Routed {
        inner: sessions.manager.clone(),
        prefix: setup
            .replica
            .map(|name| format!("{name}."))
            .unwrap_or_default(),
    });
    let service = StreamableHttpService::new(factory, routed, config);
    axum::Router::new()
        .fallback_service(service)
        .layer(axum::middleware::from_fn(move |req, next| {
            let sessions = sessions.clone();
            async move { capped(&sessions, req, next).await }
        }))
}

/// rmcp's in-memory sessions, under ids that name this replica (`<replica>.<uuid>`): a
/// proxy routes on the prefix of `Mcp-Session-Id` (docs/deploy.md). An id without this
/// replica's prefix is a session it does not hold.
struct Routed {
    inner: Arc<LocalSessionManager>,
    prefix: String,
}

impl Routed {
    fn inner_id(&self, id: &SessionId) -> Result<SessionId, LocalSessionManagerError> {
        id.strip_prefix(self.prefix.as_str())
            .map(SessionId::from)
            .ok_or_else(|| LocalSessionManagerError::SessionNotFound(id.clone()))
    }

    /// The session's handle, out of the map (the lock is not held while it is used).
    async fn handle(&self, id: &SessionId) -> Result<LocalSessionHandle, LocalSessionManagerError> {
        let inner = self.inner_id(id)?;
        self.inner
            .sessions
            .read()
            .await
            .get(&inner)
            .cloned()
            .ok_or_else(|| LocalSessionManagerError::SessionNotFound(id.clone()))
    }
}

/// A session's reply channel as a stream (what rmcp's own manager returns; its streams
/// borrow the id they were asked with, so they are made here from the same parts).
fn replies(
    mut rx: tokio::sync::mpsc::Receiver<ServerSseMessage>,
) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

impl SessionManager for Routed {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        Ok((format!("{}{id}", self.prefix).into(), transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner
            .initialize_session(&self.inner_id(id)?, message)
            .await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        match self.inner_id(id) {
            Ok(inner) => self.inner.has_session(&inner).await,
            Err(_) => Ok(false),
        }
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner.close_session(&self.inner_id(id)?).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let handle = self.handle(id).await?;
        let receiver = handle.establish_request_wise_channel().await?;
        handle
            .push_message(message, receiver.http_request_id)
            .await?;
        Ok(replies(receiver.inner))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner
            .accept_message(&self.inner_id(id)?, message)
            .await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let receiver = self.handle(id).await?.establish_common_channel().await?;
        Ok(replies(receiver.inner))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // The manager keeps no event store: a stream resumes from its session's memory.
        let receiver = self
            .handle(id)
            .await?
            .resume(last_event_id.parse()?)
            .await?;
        Ok(replies(receiver.inner))
    }
}

/// The sessions of a listener, and who opened each.
struct Sessions {
    manager: Arc<LocalSessionManager>,
    clients: std::sync::Mutex<std::collections::HashMap<String, Owner>>,
}

/// Who opened a session: the person of the team's token (only they may use it), and the
/// remote address (for the per-client cap of those without one).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    person: Option<String>,
    ip: Option<std::net::IpAddr>,
}

impl Owner {
    fn of(req: &axum::extract::Request) -> Owner {
        Owner {
            person: req
                .extensions()
                .get::<Arc<crate::identity::Person>>()
                .map(|p| p.subject.clone()),
            ip: req
                .extensions()
                .get::<crate::access::Remote>()
                .map(|r| r.0)
                .filter(|ip| !ip.is_loopback()),
        }
    }

    /// Whether `other` counts against the same per-client cap: the same person, else
    /// the same remote address.
    fn same_client(&self, other: &Owner) -> bool {
        match (&self.person, &other.person) {
            (Some(a), Some(b)) => a == b,
            (None, None) => self.ip.is_some() && self.ip == other.ip,
            _ => false,
        }
    }
}

/// Most sessions one person (with the team's token) or one remote client (address)
/// keeps open at once; this machine's own clients are one user, bounded by
/// [`MAX_SESSIONS`].
pub const MAX_SESSIONS_PER_CLIENT: usize = 16;
/// Most messages a session keeps for a client that does not read them.
pub const SESSION_QUEUE: usize = 16;

/// Most sessions one listener keeps at once.
pub const MAX_SESSIONS: usize = 64;
/// How long an idle session is kept.
pub const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(120);

/// A request that would open a session (a POST without `Mcp-Session-Id`) while
/// [`MAX_SESSIONS`] are open is refused with 503; requests of open sessions, and the
/// stateless revision's, pass.
async fn capped(
    sessions: &Sessions,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let maybe_opens =
        req.method() == axum::http::Method::POST && !req.headers().contains_key("mcp-session-id");
    let owner = Owner::of(&req);
    if !maybe_opens {
        // A session is its opener's: another person's request for it finds nothing.
        if let Some(id) = req
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            && sessions
                .clients
                .lock()
                .expect("clients lock")
                .get(id)
                .is_some_and(|opener| opener.person != owner.person)
        {
            return (
                axum::http::StatusCode::NOT_FOUND,
                "Not Found: Session not found\n",
            )
                .into_response();
        }
        let delete = req.method() == axum::http::Method::DELETE;
        let mut response = next.run(req).await;
        // A session ended by DELETE: rmcp answers 202, the specification's clients (the
        // Python SDK) expect 200 or 204 and log a failure on anything else.
        if delete && response.status() == axum::http::StatusCode::ACCEPTED {
            *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
            *response.body_mut() = axum::body::Body::empty();
        }
        return response;
    }
    let open: std::collections::HashSet<String> = sessions
        .manager
        .sessions
        .read()
        .await
        .keys()
        .map(ToString::to_string)
        .collect();
    let client_full = {
        let mut clients = sessions.clients.lock().expect("clients lock");
        clients.retain(|id, _| open.contains(id));
        clients.values().filter(|c| c.same_client(&owner)).count() >= MAX_SESSIONS_PER_CLIENT
    };
    if open.len() < MAX_SESSIONS && !client_full {
        let response = next.run(req).await;
        if let Some(id) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            sessions
                .clients
                .lock()
                .expect("clients lock")
                .insert(id.to_owned(), owner);
        }
        return response;
    }
    // At the cap: only an `initialize` opens a session (the stateless revision's requests
    // do not). The body is already in memory (the listener bounded and read it).
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, crate::access::MAX_BODY).await else {
        return axum::http::StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    #[derive(serde::Deserialize)]
    struct Head {
        method: Option<String>,
    }
    let opens = serde_json::from_slice::<Head>(&bytes)
        .ok()
        .and_then(|h| h.method)
        .is_some_and(|m| m == "initialize");
    let req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    if opens {
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000,
        "message": if client_full {
            format!("this client has {MAX_SESSIONS_PER_CLIENT} sessions open; close one (DELETE with its Mcp-Session-Id) or retry later")
        } else {
            format!("this server has {MAX_SESSIONS} sessions open; close one (DELETE with its Mcp-Session-Id) or retry later")
        }}});
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            answer.to_string(),
        )
            .into_response();
    }
    next.run(req).await
}
