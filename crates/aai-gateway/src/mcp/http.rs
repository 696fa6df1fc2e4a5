//! The Streamable HTTP transport (`aai-gateway --web`): MCP at `/mcp`, through rmcp's
//! `StreamableHttpService` mounted in axum, one handler per session over the one
//! [`Gateway`].
//!
//! Exposure rules:
//! * By default it listens on `127.0.0.1:<httpPort>`.
//! * DNS rebinding: the `Host` header must name this machine (`localhost`, `127.0.0.1`,
//!   `::1`, or the address it listens on), and a browser's `Origin` must be this server's
//!   own origin; anything else gets 403 before MCP sees it.
//! * Listening on a non-loopback address requires a bearer token (`AAI_HTTP_TOKEN`); the
//!   gateway refuses to start without one. With a token every request must carry
//!   `Authorization: Bearer <token>` (compared in constant time), else 401.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::Server;
use crate::auth::Secret;
use crate::gateway::Gateway;

/// Where and how to listen.
#[derive(Debug, Clone)]
pub struct Options {
    /// The address to listen on.
    pub addr: SocketAddr,
    /// The bearer token every request must carry (required off loopback).
    pub token: Option<Secret>,
}

/// Why the HTTP transport did not start.
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

/// Serves MCP over Streamable HTTP until the gateway is asked to stop; starts the
/// gateway's background work and stops it at the end. `listening` hears the address
/// once it is bound (port 0 picks a free one).
pub async fn serve(
    gateway: Arc<Gateway>,
    options: Options,
    listening: impl FnOnce(SocketAddr),
) -> Result<(), Error> {
    if !options.addr.ip().is_loopback() && options.token.is_none() {
        return Err(Error::TokenRequired(options.addr));
    }
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| Error::Bind(options.addr, e))?;
    let addr = listener.local_addr().map_err(Error::Serve)?;
    let running = gateway.start();
    let app = router(gateway.clone(), addr, options.token);
    tracing::info!("serving MCP on http://{addr}/mcp");
    listening(addr);
    let stopping = gateway.clone();
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move { stopping.stopping().await })
        .await
        .map_err(Error::Serve);
    running.stop();
    served
}

/// The routes: `/mcp`, behind the token check when there is a token.
fn router(gateway: Arc<Gateway>, addr: SocketAddr, token: Option<Secret>) -> axum::Router {
    let port = addr.port();
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    let own = addr.ip().to_string();
    if !hosts.contains(&own) {
        hosts.push(own.clone());
    }
    let host = if addr.is_ipv6() {
        format!("[{own}]")
    } else {
        own
    };
    let origins = [
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        format!("http://[::1]:{port}"),
        format!("http://{host}:{port}"),
    ];
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    let factory = move || Ok(Server::new(gateway.clone(), "http"));
    let service =
        StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    match token {
        Some(token) => router.layer(axum::middleware::from_fn(move |req, next| {
            let token = token.clone();
            async move { bearer(token, req, next).await }
        })),
        None => router,
    }
}

/// Lets a request through only with `Authorization: Bearer <token>`.
async fn bearer(token: Secret, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if constant_time_eq(given.as_bytes(), token.expose().as_bytes()) {
        return next.run(req).await;
    }
    let mut response = (StatusCode::UNAUTHORIZED, "a bearer token is required\n").into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Equality that takes the same time wherever the inputs differ (the length still shows).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
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
}
