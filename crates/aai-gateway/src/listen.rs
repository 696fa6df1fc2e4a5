//! The one HTTP listener: MCP at `/mcp` (`aai-gateway --web`) and the web UI at `/ui`
//! (with `--web`, and beside the stdio server when `enableWebUI` is on).
//!
//! Exposure rules, for every route:
//! * By default it listens on `127.0.0.1:<httpPort>`.
//! * DNS rebinding: the `Host` header must name this machine (`localhost`, `127.0.0.1`,
//!   `::1`, or the address it listens on), and a browser's `Origin` must be this server's
//!   own origin; anything else gets 403 before a route sees it.
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

use crate::auth::Secret;
use crate::gateway::Gateway;

/// Where, how and what to serve.
#[derive(Debug, Clone)]
pub struct Options {
    /// The address to listen on.
    pub addr: SocketAddr,
    /// The bearer token every request must carry (required off loopback).
    pub token: Option<Secret>,
    /// Serve MCP at `/mcp`.
    pub mcp: bool,
    /// Serve the web UI at `/ui`.
    pub ui: bool,
}

/// Why the listener did not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Off loopback without a token.
    #[error(
        "listening on {0} exposes the gateway to other machines; set a bearer token in AAI_HTTP_TOKEN first (or listen on 127.0.0.1)"
    )]
    TokenRequired(SocketAddr),
    /// The address cannot be listened on (taken, not ours).
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
    /// The server failed while running.
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
}

/// A bound listener, not serving yet.
#[derive(Debug)]
pub struct Bound {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    options: Options,
}

impl Bound {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// Binds `options.addr` (port 0 picks a free one).
pub async fn bind(options: Options) -> Result<Bound, Error> {
    if !options.addr.ip().is_loopback() && options.token.is_none() {
        return Err(Error::TokenRequired(options.addr));
    }
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| Error::Bind(options.addr, e))?;
    let addr = listener.local_addr().map_err(Error::Serve)?;
    Ok(Bound {
        listener,
        addr,
        options,
    })
}

/// Binds the first free port of `port`, `port + 1`, … `port + 19` on loopback, else any
/// free one: where the stdio server puts its web UI.
pub async fn bind_near(port: u16, options: Options) -> Result<Bound, Error> {
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
pub async fn serve(gateway: Arc<Gateway>, bound: Bound) -> Result<(), Error> {
    let Bound {
        listener,
        addr,
        options,
    } = bound;
    let origin = origin_of(addr);
    let mut router = axum::Router::new();
    if options.mcp {
        let token_id = options.token.as_ref().map(token_id);
        router = router.nest_service(
            "/mcp",
            crate::mcp::http::service(gateway.clone(), addr, token_id),
        );
        tracing::info!("serving MCP on {origin}/mcp");
    }
    if options.ui {
        let ui = crate::ui::Ui::new(
            gateway.clone(),
            format!("{origin}/ui"),
            options.token.clone(),
        );
        gateway.consent.set_ui(ui.base().to_owned());
        router = router.merge(ui.router());
        tracing::info!("serving the web UI on {origin}/ui");
    }
    let guard = Guard::new(addr, options.token);
    let router = router.layer(axum::middleware::from_fn(move |req, next| {
        let guard = guard.clone();
        async move { guard.check(req, next).await }
    }));
    let stopping = gateway.clone();
    // Small answers (a JSON-RPC reply, an SSE event) go out at once: without TCP_NODELAY
    // Nagle's algorithm meets the client's delayed ACK and every call waits 40 ms.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY: {e}");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { stopping.stopping().await })
        .await
        .map_err(Error::Serve)
}

/// `http://127.0.0.1:3000` (brackets for IPv6; a wildcard address shows as 127.0.0.1).
pub fn origin_of(addr: SocketAddr) -> String {
    let ip = if addr.ip().is_unspecified() {
        "127.0.0.1".to_owned()
    } else if addr.is_ipv6() {
        format!("[{}]", addr.ip())
    } else {
        addr.ip().to_string()
    };
    format!("http://{ip}:{}", addr.port())
}

/// The host names a request may use to reach `addr`.
pub fn allowed_hosts(addr: SocketAddr) -> Vec<String> {
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    let own = addr.ip().to_string();
    if !hosts.contains(&own) {
        hosts.push(own);
    }
    hosts
}

/// The origins a browser page may send from to reach `addr`.
pub fn allowed_origins(addr: SocketAddr) -> Vec<String> {
    let port = addr.port();
    let mut origins = vec![
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        format!("http://[::1]:{port}"),
    ];
    let own = origin_of(addr);
    if !origins.contains(&own) {
        origins.push(own);
    }
    origins
}

/// The name of the UI's sign-in cookie (with a token).
pub const TOKEN_COOKIE: &str = "aai_token";

/// Host, Origin and token checks in front of every route.
#[derive(Debug, Clone)]
struct Guard {
    hosts: Arc<Vec<String>>,
    origins: Arc<Vec<String>>,
    token: Option<Secret>,
}

impl Guard {
    fn new(addr: SocketAddr, token: Option<Secret>) -> Guard {
        Guard {
            hosts: Arc::new(allowed_hosts(addr)),
            origins: Arc::new(allowed_origins(addr)),
            token,
        }
    }

    async fn check(&self, req: Request, next: Next) -> Response {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .map(host_name);
        if !host.is_some_and(|h| self.hosts.iter().any(|a| a.eq_ignore_ascii_case(&h))) {
            return (
                StatusCode::FORBIDDEN,
                "Forbidden: this Host is not served here\n",
            )
                .into_response();
        }
        if let Some(origin) = req.headers().get(header::ORIGIN)
            && !origin
                .to_str()
                .is_ok_and(|o| self.origins.iter().any(|a| a.eq_ignore_ascii_case(o)))
        {
            return (
                StatusCode::FORBIDDEN,
                "Forbidden: cross-origin requests are refused\n",
            )
                .into_response();
        }
        let Some(token) = &self.token else {
            return next.run(req).await;
        };
        let path = req.uri().path();
        // The sign-in page of the UI is the one thing served without the token.
        if path == "/ui/login" || bearer(&req).is_some_and(|t| same(t, token)) {
            return next.run(req).await;
        }
        if path.starts_with("/ui") {
            let session = ui_session(token);
            if cookie(&req, TOKEN_COOKIE)
                .is_some_and(|c| constant_time_eq(c.as_bytes(), session.as_bytes()))
            {
                return next.run(req).await;
            }
            if req.method() == axum::http::Method::GET {
                return axum::response::Redirect::to("/ui/login").into_response();
            }
        }
        let mut response =
            (StatusCode::UNAUTHORIZED, "a bearer token is required\n").into_response();
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        response
    }
}

/// The UI's sign-in cookie for `token`: derived from it, so that a leaked cookie opens
/// the UI only and never serves as the bearer token of `/mcp`.
pub fn ui_session(token: &Secret) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(b"aai-gateway web UI session\0");
    hash.update(token.expose().as_bytes());
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A token's public name: the first 8 hex digits of its SHA-256 (part of a caller's
/// identity; the token itself never leaves memory).
pub fn token_id(token: &Secret) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(token.expose().as_bytes())
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
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

/// The value of cookie `name`, if the request carries it.
pub fn cookie<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == name).then_some(v)
        })
}

/// Equality that takes the same time wherever the inputs differ (the length still shows).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
