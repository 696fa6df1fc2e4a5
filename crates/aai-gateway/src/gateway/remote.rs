//! A downstream MCP server's tools in the served snapshot: folded in from what it listed
//! (in this run, or kept on disk from an earlier one), listed on first use with the
//! caller's sign-in, and all at once for `flat` exposure.

use std::sync::Arc;

use super::{FLAT_LISTING_WAIT, Gateway};
use crate::catalog;
use crate::error::GatewayError;
use crate::identity::Who;
use crate::registry::Snapshot;

impl Gateway {
    /// Gives each downstream MCP server's app whose descriptor lists no tools the tools
    /// the server listed, when it has been asked (see [`Gateway::remote_tools`]) in this
    /// run or in an earlier one from the same command (kept on disk; nothing starts).
    pub(super) fn fold_in_remote_tools(&self, catalog: &mut catalog::Catalog) {
        let mcp = self.pipeline.executors().mcp();
        for loaded in &mut catalog.apps {
            let listed: Vec<(usize, Vec<aai_descriptor::Tool>)> = loaded
                .app
                .bindings
                .iter()
                .zip(&loaded.binding_sources)
                .enumerate()
                .filter_map(|(i, (binding, source))| match &binding.executor {
                    aai_descriptor::Executor::Mcp(server) if binding.tools.is_empty() => {
                        let folder = crate::pipeline::folder_of(source);
                        Some((i, mcp.tools_of(&loaded.app.id, server, folder)?))
                    }
                    _ => None,
                })
                .collect();
            // The app is copied only when it gains tools (the scan's parse stays as read).
            for (i, tools) in listed {
                std::sync::Arc::make_mut(&mut loaded.app).bindings[i].tools = tools;
            }
        }
    }

    /// Whether [`Gateway::remote_tools`] may list `app`'s tools now: a downstream MCP
    /// server whose tools are not known in this run, and which may start.
    pub(super) fn may_list(&self, snapshot: &Snapshot, app: &str) -> bool {
        snapshot.find(app).is_some_and(|entry| {
            self.unlisted_server(entry).is_some() && self.pipeline.start_to_approve(entry).is_none()
        })
    }

    /// The server to ask for `entry`'s tools, when it is a downstream MCP server whose
    /// descriptor declares none and whose list is not known in this run (or changed
    /// since).
    fn unlisted_server<'e>(
        &self,
        entry: &'e crate::registry::Entry,
    ) -> Option<&'e aai_descriptor::McpServer> {
        let binding = entry.binding();
        let aai_descriptor::Executor::Mcp(server) = &binding.executor else {
            return None;
        };
        let mcp = self.pipeline.executors().mcp();
        let declared = !binding.tools.is_empty() && !mcp.lists_tools_of(&entry.app.id);
        (!declared && mcp.needs_listing(&entry.app.id)).then_some(server)
    }

    /// `snapshot`, or a new one with `app`'s tools in it when it is a downstream MCP
    /// server whose tools are not known in this run (its first use connects to it, with
    /// `who`'s sign-in, or `person`'s token exchanged). A server that may not start yet
    /// is left alone: its tools are the ones kept from an earlier run, if any. The list is
    /// the app's, whoever listed it.
    pub async fn remote_tools(
        self: &Arc<Self>,
        snapshot: Arc<Snapshot>,
        app: &str,
        who: &Who,
        person: Option<&crate::identity::Person>,
    ) -> Result<Arc<Snapshot>, GatewayError> {
        let Some(entry) = snapshot.find(app) else {
            return Ok(snapshot);
        };
        let Some(server) = self.unlisted_server(entry) else {
            return Ok(snapshot);
        };
        if self.pipeline.start_to_approve(entry).is_some() {
            return Ok(snapshot);
        }
        let material = self
            .mcp_auth(&entry.app.id, entry.binding(), who, person)
            .await?;
        let secrets = self
            .pipeline
            .authenticator()
            .placeholders(
                &entry.app.id,
                &entry.binding().executor,
                self.config.secrets_from_environment,
            )
            .await?;
        let list = |material: Option<crate::auth::Material>| {
            let secrets = &secrets;
            async move {
                self.pipeline
                    .executors()
                    .mcp()
                    .list_tools(
                        &entry.app.id,
                        server,
                        &crate::exec::Opening {
                            base_dir: crate::pipeline::base_dir(entry),
                            auth: material,
                            who: who.clone(),
                            secrets: secrets.clone(),
                        },
                        entry.binding().timeout,
                    )
                    .await
            }
        };
        match list(material).await {
            Ok(()) => {}
            // A remote MCP server that signs in the MCP way refused: a refresh may help,
            // once; else the user signs in (AUTH_REQUIRED names the command).
            Err(e)
                if entry.binding().auth.is_none()
                    && (e.unauthorized() || e.needs_scope().is_some()) =>
            {
                let app = &entry.app.id;
                if let Some(scopes) = e.needs_scope() {
                    self.pipeline
                        .authenticator()
                        .mcp_wants(app, who, &scopes)
                        .await?;
                }
                if e.unauthorized()
                    && self
                        .pipeline
                        .authenticator()
                        .after_mcp_unauthorized(app, who)
                        .await?
                {
                    let material = self.mcp_auth(app, entry.binding(), who, None).await?;
                    if let Err(e) = list(material).await {
                        return Err(self
                            .pipeline
                            .authenticator()
                            .mcp_required(app, who, &e.to_string())
                            .into());
                    }
                } else {
                    return Err(self
                        .pipeline
                        .authenticator()
                        .mcp_required(app, who, &e.to_string())
                        .into());
                }
            }
            Err(e) => return Err(e.into()),
        }
        self.rescan_async().await;
        Ok(self.snapshot().await)
    }

    /// The snapshot with the tools of every downstream MCP server that may start listed
    /// (`flat` exposure names every tool): a list kept from an earlier run is used as it
    /// is, and only servers with none are asked. Servers are asked concurrently; one that
    /// fails is logged and stays without tools, the others are not held up. Servers that
    /// may not start are not started (and `flat` does not list them). Each is listed with
    /// `caller`'s sign-in.
    pub async fn all_remote_tools(
        self: &Arc<Self>,
        caller: &crate::identity::Caller,
    ) -> Arc<Snapshot> {
        let snapshot = self.snapshot().await;
        let mcp = self.pipeline.executors().mcp();
        let pending: Vec<(String, Who)> = snapshot
            .entries
            .iter()
            .filter(|e| {
                self.unlisted_server(e).is_some()
                    && !mcp.has_list(&e.app.id)
                    && self.pipeline.start_to_approve(e).is_none()
            })
            .map(|e| (e.app.id.clone(), self.pipeline.who(e, caller)))
            .collect();
        let person = caller.person.clone();
        if pending.is_empty() {
            return snapshot;
        }
        let mut listing = tokio::task::JoinSet::new();
        for (app, who) in pending {
            let (me, snapshot, person) = (self.clone(), snapshot.clone(), person.clone());
            listing.spawn(async move {
                if let Err(e) = me
                    .remote_tools(snapshot, &app, &who, person.as_deref())
                    .await
                {
                    tracing::warn!(app, "listing the MCP server's tools failed: {}", e.detail);
                }
            });
        }
        // A hung server must not hold `tools/list` for long: what is listed by then is
        // shown, the rest is abandoned (and asked again on the next list or first use).
        if tokio::time::timeout(FLAT_LISTING_WAIT, listing.join_all())
            .await
            .is_err()
        {
            tracing::warn!(
                "some MCP servers did not list their tools within {FLAT_LISTING_WAIT:?}"
            );
        }
        self.snapshot().await
    }

    /// The credential (`who`'s, or `person`'s token exchanged) an MCP server over HTTP is
    /// reached with, when it has one.
    pub(crate) async fn mcp_auth(
        &self,
        app: &str,
        binding: &aai_descriptor::Binding,
        who: &Who,
        person: Option<&crate::identity::Person>,
    ) -> Result<Option<crate::auth::Material>, GatewayError> {
        match (&binding.executor, &binding.auth) {
            (
                aai_descriptor::Executor::Mcp(aai_descriptor::McpServer::Http { url, .. }),
                Some(a),
            ) => Ok(Some(
                self.pipeline
                    .authenticator()
                    .material(app, who, a, url)
                    .await?,
            )),
            (aai_descriptor::Executor::Mcp(aai_descriptor::McpServer::Http { url, .. }), None) => {
                Ok(self.pipeline.mcp_material(app, who, person, url).await?.0)
            }
            _ => Ok(None),
        }
    }
}
