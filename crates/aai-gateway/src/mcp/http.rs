//! The Streamable HTTP transport: MCP at `/mcp`, through rmcp's `StreamableHttpService`,
//! one handler per session over the one [`Gateway`]. The listener, the Host/Origin
//! checks and the bearer token are `listen`'s; rmcp checks Host and Origin again with
//! the same lists — except Host with a token, where `listen` also accepts the names remote
//! clients use for this machine (any IP address, its host name, `web.allowedHosts`),
//! which rmcp's list cannot express.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::Server;
use crate::gateway::Gateway;

/// The `/mcp` service of a listener on `addr`; `token` identifies the bearer token it
/// requires (for the callers' identity).
pub fn service(gateway: Arc<Gateway>, addr: SocketAddr, token: Option<String>) -> axum::Router {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_origins(crate::listen::allowed_origins(addr))
        .enforce_origin_validation();
    let config = if token.is_some() {
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(crate::listen::allowed_hosts(addr))
    };
    let factory = move || Ok(Server::new(gateway.clone(), "http").with_token(token.clone()));
    let mut sessions = LocalSessionManager::default();
    // An idle session (no request, no open stream) is closed after two minutes.
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let sessions = Arc::new(sessions);
    let service = StreamableHttpService::new(factory, sessions.clone(), config);
    axum::Router::new()
        .fallback_service(service)
        .layer(axum::middleware::from_fn(move |req, next| {
            let sessions = sessions.clone();
            async move { capped(&sessions, req, next).await }
        }))
}

/// Most sessions one listener keeps at once.
pub const MAX_SESSIONS: usize = 64;
/// How long an idle session is kept.
pub const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(120);

/// A request that would open a session (a POST without `Mcp-Session-Id`) while
/// [`MAX_SESSIONS`] are open is refused with 503; requests of open sessions, and the
/// stateless revision's, pass.
async fn capped(
    sessions: &LocalSessionManager,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let maybe_opens =
        req.method() == axum::http::Method::POST && !req.headers().contains_key("mcp-session-id");
    if !maybe_opens || sessions.sessions.read().await.len() < MAX_SESSIONS {
        return next.run(req).await;
    }
    // At the cap: only an `initialize` opens a session (the stateless revision's requests
    // do not). The body is already in memory (the listener bounded and read it).
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, crate::listen::MAX_BODY).await else {
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
            "message": format!("this server has {MAX_SESSIONS} sessions open; close one (DELETE with its Mcp-Session-Id) or retry later")}});
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            answer.to_string(),
        )
            .into_response();
    }
    next.run(req).await
}
