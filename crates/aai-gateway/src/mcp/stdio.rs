//! The stdio transport: MCP on stdin/stdout for one client, until the client goes away
//! or the gateway is asked to stop.

use std::sync::Arc;

use rmcp::ServiceExt;

use super::Server;
use crate::gateway::Gateway;

/// Serves MCP on stdin/stdout; starts the gateway's background work (first scan,
/// watcher, registry, signals) and stops it when the session ends.
pub async fn serve(gateway: Arc<Gateway>) -> anyhow::Result<()> {
    let running = gateway.start();
    let service = Server::new(gateway.clone())
        .serve(rmcp::transport::stdio())
        .await?;
    let cancel = service.cancellation_token();
    tokio::select! {
        reason = service.waiting() => tracing::info!("client session ended: {reason:?}"),
        () = gateway.stopping() => cancel.cancel(),
    }
    running.stop();
    Ok(())
}
