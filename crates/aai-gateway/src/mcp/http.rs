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
    let service =
        StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), config);
    axum::Router::new().fallback_service(service)
}
