//! The one HTTP listener: MCP at `/mcp` (`aai-gateway --web`) and the web UI at `/ui`
//! (with `--web`, and beside the stdio server when `enableWebUI` is on).
//!
//! Exposure rules, for every route:
//! * By default it listens on `127.0.0.1:<httpPort>`.
//! * Loopback is not an identity: every connection is checked before a byte of it is
//!   read. On Linux the owner of the client's socket must be the gateway's own user
//!   (`peer`); another user's connection is closed at once. Where the peer cannot be
//!   proven (other OSes, other machines) the listener requires a token: `AAI_HTTP_TOKEN`,
//!   else the per-install token in `$AAI_HOME/token` (0600; `aai-gateway token` prints it).
//! * Bounded: at most [`MAX_CONNECTIONS`] connections at once (more wait in the backlog),
//!   and a connection that takes over [`HEADER_READ_TIMEOUT`] to send a request's headers
//!   (idle between requests included) is closed. Repeated wrong tokens slow down.
//! * DNS rebinding: the `Host` header must name this machine (`localhost`, `127.0.0.1`,
//!   `::1`, or the address it listens on), and a browser's `Origin` must be this server's
//!   own origin; anything else gets 403 before a route sees it.
//! * `/metrics` (Prometheus) is one more route behind the same checks.
//! * Listening on a non-loopback address requires a bearer token (`AAI_HTTP_TOKEN`); the
//!   gateway refuses to start without one. With a token every request must carry
//!   `Authorization: Bearer <token>` (compared in constant time), else 401; a browser may
//!   instead sign in to the UI once at `/ui/login`, which sets an HttpOnly cookie holding a
//!   value derived from the token (it opens `/ui` only).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::access::{
    MAX_BODY, PERSON_COOKIE, Remote, TOKEN_COOKIE, allowed_hosts, allowed_origins,
    constant_time_eq, cookie, origin_of, ui_session,
};
use crate::auth::Secret;
use crate::auth::mcp::RESOURCE_METADATA;
use crate::gateway::Handle;

/// Most connections served at once; the next ones wait until one closes.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// How long a connection may take to send a request's headers, or stay idle between
/// requests.
pub(crate) const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// The shortest bearer token accepted.
pub(crate) const MIN_TOKEN_LEN: usize = 16;

/// The bearer token a listener on `addr` uses: `AAI_HTTP_TOKEN` when set (at least
/// [`MIN_TOKEN_LEN`] characters); else, where a connection's owner cannot be proven (off
/// loopback, or an OS without `peer` support), the per-install token of `home`; else
/// none (the OS proves each peer).
pub(crate) fn token_for(home: &std::path::Path, addr: SocketAddr) -> Result<Option<Secret>, Error> {
    if let Some(token) = std::env::var("AAI_HTTP_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        if token.trim().chars().count() < MIN_TOKEN_LEN {
            return Err(Error::ShortToken);
        }
        return Ok(Some(Secret::new(token.trim())));
    }
    if addr.ip().is_loopback() && crate::peer::provable_on(crate::host::Host::current().os()) {
        return Ok(None);
    }
    install_token(home).map(Some)
}

/// The per-install token in `home/token`, made (32 random bytes, hex, 0600) when missing.
pub(crate) fn install_token(home: &std::path::Path) -> Result<Secret, Error> {
    let file = home.join("token");
    if let Ok(text) = std::fs::read_to_string(&file)
        && text.trim().len() >= MIN_TOKEN_LEN
    {
        return Ok(Secret::new(text.trim()));
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::Token(format!("no randomness for a token: {e}")))?;
    let token = crate::text::hex(&bytes);
    crate::files::private_dir(home)
        .and_then(|()| crate::files::write_private(&file, format!("{token}\n").as_bytes()))
        .map_err(|e| Error::Token(format!("cannot keep the token in {}: {e}", file.display())))?;
    Ok(Secret::new(token))
}

/// Where, how and what to serve.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// The address to listen on.
    pub addr: SocketAddr,
    /// The bearer token every request must carry (required off loopback).
    pub token: Option<Secret>,
    /// Serve MCP at `/mcp`.
    pub mcp: bool,
    /// Serve the web UI at `/ui`.
    pub ui: bool,
    /// More `Host` names to accept (config `web.allowedHosts`), with a token.
    pub hosts: Vec<String>,
    /// The team's authorization server whose access tokens are taken (config `web.auth`).
    pub resource: Option<Arc<crate::access::resource::Resource>>,
    /// This replica's name (`--replica`), the prefix of its MCP session ids.
    pub replica: Option<String>,
}

/// Why the listener did not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// Off loopback without a token.
    #[error(
        "listening on {0} exposes the gateway to other machines; set a bearer token in AAI_HTTP_TOKEN first (or listen on 127.0.0.1)"
    )]
    TokenRequired(SocketAddr),
    /// Another program listens on the port already.
    #[error(
        "cannot listen on {0}: another program listens on that port already (whatever answers there is not this gateway); pick another port with `--listen` (`--listen {free}` takes any free one and prints it)",
        free = SocketAddr::new(.0.ip(), 0)
    )]
    InUse(SocketAddr),
    /// The address cannot be listened on (not ours, no permission).
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
    /// The server failed while running.
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
    /// `AAI_HTTP_TOKEN` is too short to be safe.
    #[error(
        "AAI_HTTP_TOKEN is shorter than {MIN_TOKEN_LEN} characters: anyone who can reach the port could guess it; use a long random value (`aai-gateway token` prints one made for this install)"
    )]
    ShortToken,
    /// The per-install token could not be made or kept.
    #[error("{0}")]
    Token(String),
}

/// A bound listener, not serving yet.
#[derive(Debug)]
pub(crate) struct Bound {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    options: Options,
}

impl Bound {
    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// Binds `options.addr` (port 0 picks a free one).
pub(crate) async fn bind(options: Options) -> Result<Bound, Error> {
    if !options.addr.ip().is_loopback() && options.token.is_none() && options.resource.is_none() {
        return Err(Error::TokenRequired(options.addr));
    }
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => Error::InUse(options.addr),
            _ => Error::Bind(options.addr, e),
        })?;
    let addr = listener.local_addr().map_err(Error::Serve)?;
    Ok(Bound {
        listener,
        addr,
        options,
    })
}

/// Binds the first free port of `port`, `port + 1`, … `port + 19` on loopback, else any
/// free one: where the stdio server puts its web UI.
pub(crate) async fn bind_near(port: u16, options: Options) -> Result<Bound, Error> {
    let ip = options.addr.ip();
    for candidate in (0..20).filter_map(|i| port.checked_add(i)) {
        let addr = SocketAddr::new(ip, candidate);
        if let Ok(bound) = bind(Options {
            addr,
            ..options.clone()
        })
        .await
        {
            return Ok(bound);
        }
    }
    bind(Options {
        addr: SocketAddr::new(ip, 0),
        ..options
    })
    .await
}

/// Serves until the gateway is asked to stop.
pub(crate) async fn serve(gateway: Handle, bound: Bound) -> Result<(), Error> {
    let Bound {
        listener,
        addr,
        options,
    } = bound;
    let origin = origin_of(addr);
    let mut router = axum::Router::new();
    if options.mcp {
        let setup = crate::mcp::http::Setup {
            token: options.token.as_ref().map(token_id),
            remote_hosts: options.token.is_some() || options.resource.is_some(),
            origins: options.resource.iter().map(|r| r.public_origin()).collect(),
            replica: options.replica.clone(),
        };
        router = router.nest_service(
            "/mcp",
            crate::mcp::http::service(gateway.clone(), addr, setup),
        );
        tracing::info!("serving MCP on {origin}/mcp");
    }
    if options.ui {
        let base = match &options.resource {
            Some(resource) => format!("{}/ui", resource.public_origin()),
            None => format!("{origin}/ui"),
        };
        let ui = crate::ui::Ui::new(
            gateway.clone(),
            base,
            options.token.clone(),
            options.resource.clone(),
        );
        gateway.pipeline().set_ui(ui.base());
        if options.token.is_some() {
            tracing::warn!(
                "open the web UI with this one-time link (10 minutes): {}",
                ui.one_time_link()
            );
        }
        router = router.merge(ui.router());
        tracing::info!("serving the web UI on {origin}/ui");
    }
    // Metrics, behind the same guard as every route (docs/metrics.md).
    let scraped = gateway.clone();
    router = router.route(
        "/metrics",
        axum::routing::get(move || {
            let gateway = scraped.clone();
            async move { metrics(&gateway) }
        }),
    );
    let has_token = options.token.is_some() || options.resource.is_some();
    if let Some(resource) = &options.resource {
        tracing::info!(
            "taking access tokens of {} for {}",
            resource.config().issuer,
            resource.config().audience
        );
    }
    let team = options.resource.is_some();
    let guard = Guard::new(addr, options.token, options.resource, &options.hosts);
    let router = router.layer(axum::middleware::from_fn(move |req, next| {
        let guard = guard.clone();
        async move { guard.check(req, next).await }
    }));
    accept_loop(&gateway, listener, router, has_token, team).await;
    Ok(())
}

/// Accepts connections until the gateway stops: each is checked for its owner first
/// (another user's only with the team's tokens, `team`), at most [`MAX_CONNECTIONS`] are served at once, and each must send its request headers
/// within [`HEADER_READ_TIMEOUT`].
async fn accept_loop(
    gateway: &Handle,
    listener: tokio::net::TcpListener,
    router: axum::Router,
    has_token: bool,
    team: bool,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = gateway.stopping() => break,
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, mostly: wait for some to close.
                    tracing::warn!("cannot accept a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = gateway.stopping() => break,
        };
        let Ok(local) = stream.local_addr() else {
            continue;
        };
        let (os, http, watcher) = (gateway.os(), http.clone(), graceful.watcher());
        // Each request knows the address it came from (per-client limits).
        let service = hyper_util::service::TowerToHyperService::new(
            router.clone().layer(axum::Extension(Remote(remote.ip()))),
        );
        // The owner is looked up beside the loop (on some OSes it takes a program run):
        // no byte of the connection is read until it is proven.
        tokio::spawn(async move {
            let _slot = slot;
            match crate::peer::owner(local, remote, os).await {
                crate::peer::Peer::Owner => {}
                crate::peer::Peer::Unknown if has_token => {}
                // With the team's tokens every request names its person, whoever owns
                // the connection (a reverse proxy runs as its own user).
                crate::peer::Peer::Other(_) if team => {}
                crate::peer::Peer::Other(uid) => {
                    tracing::warn!(%remote, uid, "refused a connection of another user");
                    return;
                }
                crate::peer::Peer::Unknown => {
                    tracing::warn!(%remote, "refused a connection whose user cannot be proven");
                    return;
                }
            }
            // Small answers (a JSON-RPC reply, an SSE event) go out at once: without
            // TCP_NODELAY Nagle's algorithm meets the client's delayed ACK and every call
            // waits 40 ms.
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!("TCP_NODELAY: {e}");
            }
            let connection = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            if let Err(e) = watcher.watch(connection).await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    // Open streams get a moment to end on their own.
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
    }
}

/// `/metrics`: the gateway's metrics in the Prometheus text format, with each downstream
/// MCP server's state read now.
fn metrics(gateway: &Handle) -> Response {
    use crate::exec::mcp::Health;
    let pipeline = gateway.pipeline();
    let Some(metrics) = pipeline.metrics() else {
        return (StatusCode::NOT_FOUND, "metrics are off\n").into_response();
    };
    let servers: Vec<(String, &'static str)> = pipeline
        .executors()
        .mcp()
        .health()
        .into_iter()
        .map(|(app, health)| (app, health.as_str()))
        .collect();
    let states = Health::ALL.map(Health::as_str);
    (
        [
            (header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE),
            (header::CACHE_CONTROL, "no-store"),
        ],
        metrics.render(&servers, &states),
    )
        .into_response()
}

/// This machine's host name (and its `.local` form), for `Host` headers of remote
/// clients.
fn machine_names() -> Vec<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty());
    name.map(|n| vec![format!("{n}.local"), n])
        .unwrap_or_default()
}

/// Host, Origin and token checks in front of every route.
#[derive(Debug, Clone)]
struct Guard {
    hosts: Arc<Vec<String>>,
    origins: Arc<Vec<String>>,
    token: Option<Secret>,
    /// The team's tokens (`web.auth`).
    resource: Option<Arc<crate::access::resource::Resource>>,
    /// Wrong tokens in a row (any client), for the back-off.
    failures: Arc<std::sync::atomic::AtomicU32>,
    /// MCP requests being read and handled at once.
    parsing: Arc<tokio::sync::Semaphore>,
    /// `(session, id)` of the MCP requests whose reply is not over yet.
    in_flight: Arc<std::sync::Mutex<std::collections::HashSet<(String, serde_json::Value)>>>,
}

/// Frees a request id of a session when dropped (its reply is over).
struct Release(
    Arc<std::sync::Mutex<std::collections::HashSet<(String, serde_json::Value)>>>,
    (String, serde_json::Value),
);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.lock().expect("in-flight lock").remove(&self.1);
    }
}

/// `(session, id)` of a JSON-RPC request sent within a session; `None` for other messages
/// and for requests outside a session (each has its own reply stream).
fn in_flight_key(
    headers: &axum::http::HeaderMap,
    body: &[u8],
) -> Option<(String, serde_json::Value)> {
    #[derive(serde::Deserialize)]
    struct Head {
        id: Option<serde_json::Value>,
        method: Option<serde::de::IgnoredAny>,
    }
    let session = headers.get("mcp-session-id")?.to_str().ok()?.to_owned();
    let head: Head = serde_json::from_slice(body).ok()?;
    head.method?;
    Some((
        session,
        head.id.filter(|id| id.is_string() || id.is_number())?,
    ))
}

/// The budget of MCP requests read and handled at once, in KiB of their bodies.
pub(crate) const MAX_PARSING: usize = crate::budget::MAX_IN_FLIGHT_BYTES / 1024;

fn too_large() -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        "the request body is larger than 16 MiB\n",
    )
        .into_response()
}

impl Guard {
    /// With a token, remote clients may name this machine as they know it: any IP
    /// address (a DNS-rebinding page cannot send one), its host name, and `extra` (config
    /// `web.allowedHosts`).
    fn new(
        addr: SocketAddr,
        token: Option<Secret>,
        resource: Option<Arc<crate::access::resource::Resource>>,
        extra: &[String],
    ) -> Guard {
        let mut hosts = allowed_hosts(addr);
        let mut origins = allowed_origins(addr);
        if token.is_some() || resource.is_some() {
            hosts.extend(machine_names());
            hosts.extend(extra.iter().map(|h| h.to_ascii_lowercase()));
        }
        if let Some(resource) = &resource {
            // The name clients and browsers reach this server by (behind a proxy).
            let public = resource.public_origin();
            if let Ok(url) = reqwest::Url::parse(&public)
                && let Some(host) = url.host_str()
            {
                hosts.push(host.trim_matches(['[', ']']).to_ascii_lowercase());
            }
            origins.push(public);
        }
        Guard {
            hosts: Arc::new(hosts),
            origins: Arc::new(origins),
            token,
            resource,
            failures: Arc::default(),
            parsing: Arc::new(tokio::sync::Semaphore::new(MAX_PARSING)),
            in_flight: Arc::default(),
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        self.hosts.iter().any(|a| a.eq_ignore_ascii_case(host))
            || ((self.token.is_some() || self.resource.is_some())
                && host.parse::<std::net::IpAddr>().is_ok())
    }

    /// After a few wrong tokens in a row, each further one waits longer (up to 2 s)
    /// before its answer: guessing a token takes forever. A right token resets it.
    async fn refused_token(&self) {
        use std::sync::atomic::Ordering;
        let n = self.failures.fetch_add(1, Ordering::SeqCst) + 1;
        if n > 5 {
            let ms = 50u64 << (n - 5).min(6);
            tokio::time::sleep(std::time::Duration::from_millis(ms.min(2000))).await;
        }
    }

    /// The guard, then the request's cost: a body over [`MAX_BODY`] is refused (413), an
    /// MCP message of too many values or too deep is refused before anything parses it,
    /// and MCP requests of at most [`crate::budget::MAX_IN_FLIGHT_BYTES`] in all are read
    /// and handled at once (more wait their turn).
    async fn check(&self, req: Request, next: Next) -> Response {
        let is_mcp_post = req.method() == axum::http::Method::POST && req.uri().path() == "/mcp";
        let length = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        if length.is_some_and(|n| n > MAX_BODY) {
            return too_large();
        }
        let (parts, body) = req.into_parts();
        let body = axum::body::Body::new(http_body_util::Limited::new(body, MAX_BODY));
        let req = Request::from_parts(parts, body);
        if !is_mcp_post {
            return self.check_access(req, next).await;
        }
        // A share of the budget in KiB, by the announced length (a body without one may
        // be as large as any).
        let kib = u32::try_from(length.unwrap_or(MAX_BODY) / 1024 + 1).unwrap_or(u32::MAX);
        let _turn = self
            .parsing
            .acquire_many(kib)
            .await
            .expect("the semaphore is never closed");
        let (parts, body) = req.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
            return too_large();
        };
        if let Some(problem) = crate::budget::problem(&bytes) {
            let answer = serde_json::json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": crate::error::INVALID_REQUEST, "message": format!("Invalid Request: {problem}")}});
            return (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "application/json")],
                answer.to_string(),
            )
                .into_response();
        }
        // A request whose id is still in progress in its session would take over the
        // first one's reply (rmcp keys replies by id): it is answered here instead.
        let key = in_flight_key(&parts.headers, &bytes);
        if let Some(key) = &key
            && !self
                .in_flight
                .lock()
                .expect("in-flight lock")
                .insert(key.clone())
        {
            let answer = serde_json::json!({"jsonrpc": "2.0", "id": key.1,
                "error": {"code": crate::error::INVALID_REQUEST,
                          "message": "Invalid Request: a request with this id is still in progress"}});
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                answer.to_string(),
            )
                .into_response();
        }
        let response = self
            .check_access(
                Request::from_parts(parts, axum::body::Body::from(bytes)),
                next,
            )
            .await;
        let Some(key) = key else {
            return response;
        };
        // The id is free again once its reply (a JSON body or an SSE stream) is over.
        let release = Release(self.in_flight.clone(), key);
        let (parts, body) = response.into_parts();
        let body = futures_util::StreamExt::map(body.into_data_stream(), move |chunk| {
            let _ = &release;
            chunk
        });
        Response::from_parts(parts, axum::body::Body::from_stream(body))
    }

    /// A refusal of a request whose `Host` is not served here, or that comes from
    /// another origin; `None` when both are fine.
    fn refused_host_or_origin(&self, req: &Request) -> Option<Response> {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .map(host_name);
        if !host.is_some_and(|h| self.host_allowed(&h)) {
            return Some(
                (
                    StatusCode::FORBIDDEN,
                    "Forbidden: this Host is not served here\n",
                )
                    .into_response(),
            );
        }
        if let Some(origin) = req.headers().get(header::ORIGIN)
            && !origin
                .to_str()
                .is_ok_and(|o| self.origins.iter().any(|a| a.eq_ignore_ascii_case(o)))
        {
            return Some(
                (
                    StatusCode::FORBIDDEN,
                    "Forbidden: cross-origin requests are refused\n",
                )
                    .into_response(),
            );
        }
        None
    }

    async fn check_access(&self, req: Request, next: Next) -> Response {
        if let Some(refused) = self.refused_host_or_origin(&req) {
            return refused;
        }
        if self.token.is_none() && self.resource.is_none() {
            return next.run(req).await;
        }
        let path = req.uri().path().to_owned();
        if let Some(resource) = &self.resource
            && (path == RESOURCE_METADATA || path.starts_with(&format!("{RESOURCE_METADATA}/")))
        {
            // Public by definition (RFC 9728): where to get a token.
            return (
                [(header::CONTENT_TYPE, "application/json")],
                resource.metadata().to_string(),
            )
                .into_response();
        }
        // The sign-in pages of the UI are the one thing served without a token.
        if path == "/ui/login"
            || (self.resource.is_some() && matches!(path.as_str(), "/ui/signin" | "/ui/callback"))
        {
            return next.run(req).await;
        }
        let mut req = req;
        if let Some(given) = bearer(&req) {
            if let Some(token) = &self.token
                && same(given, token)
            {
                self.failures.store(0, std::sync::atomic::Ordering::SeqCst);
                return next.run(req).await;
            }
            if let Some(resource) = &self.resource {
                match resource.person(given).await {
                    // The metrics name every app and tool, also those a person's scopes
                    // hide: for the admin scope only.
                    Ok(person) if path == "/metrics" && !person.admin => {
                        return (
                            StatusCode::FORBIDDEN,
                            format!(
                                "the metrics are for the admin scope `{}`\n",
                                resource.config().admin_scope
                            ),
                        )
                            .into_response();
                    }
                    Ok(person) => {
                        req.extensions_mut().insert(person);
                        return next.run(req).await;
                    }
                    Err(refusal) => {
                        if matches!(refusal, crate::access::resource::Refusal::Invalid(_)) {
                            self.refused_token().await;
                        }
                        return refuse(resource, &refusal);
                    }
                }
            }
            self.refused_token().await;
        }
        if path.starts_with("/ui") {
            if let Some(token) = &self.token {
                let session = ui_session(token);
                if cookie(&req, TOKEN_COOKIE)
                    .is_some_and(|c| constant_time_eq(c.as_bytes(), session.as_bytes()))
                {
                    return next.run(req).await;
                }
            }
            if let Some(resource) = &self.resource
                && let Some(signed_in) = cookie(&req, PERSON_COOKIE).map(str::to_owned)
                && let Ok(person) = resource.person(&signed_in).await
            {
                req.extensions_mut().insert(person);
                req.extensions_mut()
                    .insert(crate::access::PersonCsrf::of(&signed_in));
                return next.run(req).await;
            }
            if req.method() == axum::http::Method::GET {
                let to = if self.resource.is_some() {
                    // Back to the page asked for once signed in (only a path of the UI).
                    let next_path = req.uri().path_and_query().map_or("/ui", |p| p.as_str());
                    format!(
                        "/ui/signin?next={}",
                        url::form_urlencoded::byte_serialize(next_path.as_bytes())
                            .collect::<String>()
                    )
                } else {
                    "/ui/login".to_owned()
                };
                return axum::response::Redirect::to(&to).into_response();
            }
        }
        if let Some(resource) = &self.resource {
            return refuse(resource, &crate::access::resource::Refusal::Missing);
        }
        let mut response =
            (StatusCode::UNAUTHORIZED, "a bearer token is required\n").into_response();
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        response
    }
}

/// The answer to a request whose team token was not taken: 401 (403 for a missing
/// scope, 503 when the authorization server cannot be asked) with the challenge that
/// names the resource metadata.
fn refuse(
    resource: &crate::access::resource::Resource,
    refusal: &crate::access::resource::Refusal,
) -> Response {
    use crate::access::resource::Refusal;
    let status = match refusal {
        Refusal::Missing | Refusal::Invalid(_) => StatusCode::UNAUTHORIZED,
        Refusal::Scope(_) => StatusCode::FORBIDDEN,
        Refusal::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    let mut response = (status, format!("{refusal}\n")).into_response();
    if let Ok(value) = HeaderValue::from_str(&resource.challenge(refusal)) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// A token's public name: the first 8 hex digits of its SHA-256 (part of a caller's
/// identity; the token itself never leaves memory).
pub(crate) fn token_id(token: &Secret) -> String {
    use sha2::Digest;
    crate::text::hex(&sha2::Sha256::digest(token.expose().as_bytes())[..4])
}

fn same(given: &str, token: &Secret) -> bool {
    constant_time_eq(given.as_bytes(), token.expose().as_bytes())
}

/// The host of a `Host` header: `[::1]:3000` → `::1`, `localhost:3000` → `localhost`.
fn host_name(header: &str) -> String {
    let header = header.trim();
    if let Some(rest) = header.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("").to_owned();
    }
    header.split(':').next().unwrap_or("").to_owned()
}

fn bearer(req: &Request) -> Option<&str> {
    req.headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"s3cr3t", b"s3cr3t"));
        assert!(!constant_time_eq(b"s3cr3t", b"s3cr3T"));
        assert!(!constant_time_eq(b"s3cr3t", b"s3cr3"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn host_names_lose_their_port() {
        assert_eq!(host_name("localhost:3000"), "localhost");
        assert_eq!(host_name("[::1]:3000"), "::1");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
        assert_eq!(host_name("evil.example:80"), "evil.example");
    }

    #[test]
    fn origins_are_this_server_only() {
        let addr: SocketAddr = "127.0.0.1:3000".parse().unwrap();
        assert!(allowed_origins(addr).contains(&"http://localhost:3000".to_owned()));
        assert!(!allowed_origins(addr).iter().any(|o| o.contains("3001")));
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert_eq!(origin_of(any), "http://127.0.0.1:8080");
        assert!(allowed_hosts(any).contains(&"0.0.0.0".to_owned()));
    }
}
