//! What a front door (an MCP session, the web UI, the listener) holds besides the
//! [`Pipeline`]: the served snapshot and its changes, the shutdown, the settings, and the
//! few gateway-wide actions an agent or a person may ask for (rescan, web discovery, the
//! MCP Registry search, listing downstream servers' tools).
//!
//! It reaches the executors, the consent gate and the credentials only through the
//! pipeline, so a front door cannot go round the call path.

use std::path::Path;
use std::sync::Arc;

use tokio::sync::broadcast;

use super::Gateway;
use crate::catalog::{self, SearchDir};
use crate::config::Config;
use crate::error::GatewayError;
use crate::host::Os;
use crate::pipeline::Pipeline;
use crate::registry::Snapshot;

/// A front door's narrow handle on the running gateway; cheap to clone.
#[derive(Debug, Clone)]
pub struct Handle {
    pub(super) gateway: Arc<Gateway>,
}

impl Handle {
    /// The call path.
    pub fn pipeline(&self) -> &Pipeline {
        &self.gateway.pipeline
    }

    /// The served apps, once the first scan has finished.
    pub async fn snapshot(&self) -> Arc<Snapshot> {
        self.gateway.snapshot().await
    }

    /// The served apps as they are now, without waiting (empty before the first scan).
    pub fn registry_snapshot(&self) -> Arc<Snapshot> {
        self.gateway.registry_snapshot()
    }

    /// Hears of every change in what agents see, as the change's generation number.
    pub fn subscribe(&self) -> broadcast::Receiver<u64> {
        self.gateway.subscribe()
    }

    /// How many times what agents see has changed since the first scan.
    pub fn generation(&self) -> u64 {
        self.gateway.generation()
    }

    /// Resolves when the gateway is asked to stop.
    pub async fn stopping(&self) {
        self.gateway.stopping().await;
    }

    /// The OS the apps are served for.
    pub fn os(&self) -> Os {
        self.gateway.host.os()
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.gateway.config
    }

    /// `$AAI_HOME`.
    pub fn home(&self) -> &Path {
        &self.gateway.home
    }

    /// The directories scanned, in precedence order.
    pub fn search_dirs(&self) -> &[SearchDir] {
        self.gateway.search_dirs()
    }

    /// The shared store, when the config names one.
    pub fn shared_store(&self) -> Option<&Arc<crate::store::Shared>> {
        self.gateway.shared_store()
    }

    /// Scans again, off the async threads; whether what agents see changed.
    pub async fn rescan(&self) -> bool {
        self.gateway.rescan_async().await
    }

    /// Scans again reading every descriptor, changed or not (the web UI's Rescan).
    pub async fn rescan_everything(&self) -> bool {
        self.gateway.rescan_async_for(super::Why::Everything).await
    }

    /// Adds a web app by its domain (`web_discover`): its id, and whether the cached copy
    /// was used because the site is unreachable.
    pub async fn discover_web(&self, input: &str) -> Result<(String, bool), GatewayError> {
        self.gateway.discover_web(input).await
    }

    /// The servers the MCP Registry has for `query`, when config allows asking it.
    pub async fn search_mcp_registry(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<catalog::mcp_registry::Found>, catalog::mcp_registry::Error> {
        self.gateway.search_mcp_registry(query, limit).await
    }

    /// The snapshot with every startable downstream MCP server's tools listed (`flat`),
    /// each with `caller`'s sign-in.
    pub async fn all_remote_tools(&self, caller: &crate::identity::Caller) -> Arc<Snapshot> {
        self.gateway.all_remote_tools(caller).await
    }
}
