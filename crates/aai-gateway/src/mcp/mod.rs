//! The MCP surface (docs/mcp.md): the gateway as an MCP server. With `exec/mcp/client.rs`
//! (the gateway as a client of downstream servers), the only module that knows rmcp.
//!
//! Listed tools use client-safe names: `app_<slug>` (one per app, returns its guide),
//! `aai_search`, `aai_guide`, `aai_exec`; in `flat` mode every tool as `<slug>__<tool>`.
//! `tools/call` also accepts the colon spellings `app:<id>`, `aai:exec` and the direct
//! `<appId>:<tool>` (docs/design.md, Colon spellings). Resources: `app:<appId>` (the
//! descriptor as written: the file of the binding in use, or a built-in's JSON),
//! `app:<appId>/model` (the normalized model of that binding) and `app:<appId>/guide`
//! (markdown).

// This module is where rmcp is allowed (clippy.toml bans its types elsewhere).
#![allow(clippy::disallowed_types)]

mod batch;
mod call;
mod events;
pub mod http;
mod names;
mod progress;
mod rounds;
mod run;
mod search;
pub mod stdio;
mod subscriptions;
mod tools;
mod upstream;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    Implementation, InitializeResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use crate::config::{ErrorStyle, Exposure};
use crate::error::{Code, GatewayError};
use crate::gateway::Handle;
use crate::host::Os;
use crate::pipeline::Pipeline;
use crate::registry::{Entry, Snapshot};
use call::asking;
use rounds::Round;
use search::{add_registry_hits, search_result};
use tools::Meta;
use upstream::Elicit;

const INSTRUCTIONS: &str = "This server lets you use applications on this computer and on the web directly. \
Find an app with `aai_search` (any language), read its guide with `aai_guide` (or the app's `app_*` tool), \
then call a tool with `aai_exec` {app, tool, args}. `web_discover` adds a web app by its domain.";

/// The MCP handler, independent of the transport: one per session, all sharing one
/// gateway (its [`Pipeline`] and [`Handle`]). It keeps no peer; each session's peer hears of changes through its own
/// subscription (see [`Server::on_initialized`]).
#[derive(Clone)]
pub struct Server {
    /// The call path.
    pipeline: Pipeline,
    /// The rest of the gateway a session sees: the snapshot, its changes, the shutdown.
    gateway: Handle,
    /// The last change generation this session was told of; held while telling, so an
    /// answer that must follow the announcement (web_discover) waits for it.
    announced: Arc<tokio::sync::Mutex<u64>>,
    /// `stdio` or `http`: half of the caller's identity for consent.
    transport: &'static str,
    /// Which bearer token the HTTP listener requires, if any (part of the identity).
    token: Option<String>,
    /// This session's number, which a downstream server's requests are routed by.
    session: u64,
    /// What the sessions of one listener share.
    shared: Arc<Shared>,
    /// This session's subscriptions to apps' events.
    events: Arc<events::Subscriptions>,
}

/// What the sessions of one listener (stdio, or one HTTP listener, where each request of
/// the stateless revision gets a handler of its own) share: the open
/// `subscriptions/listen` streams and the calls parked between round trips.
#[derive(Default)]
struct Shared {
    streams: subscriptions::Streams,
    parking: rounds::Parking,
}

/// The number of the next session.
static SESSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").finish_non_exhaustive()
    }
}

impl Server {
    /// A handler over `gateway` for a session on `transport` (`stdio`, `http`).
    pub fn new(gateway: Handle, transport: &'static str) -> Server {
        Server {
            pipeline: gateway.pipeline().clone(),
            gateway,
            announced: Arc::new(tokio::sync::Mutex::new(0)),
            transport,
            token: None,
            session: SESSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            shared: Arc::default(),
            events: Arc::default(),
        }
    }

    /// The same, sharing `shared` with the listener's other sessions.
    fn with_shared(mut self, shared: Arc<Shared>) -> Server {
        self.shared = shared;
        self
    }

    /// The same, for a listener that requires the bearer token with id `token`.
    pub fn with_token(mut self, token: Option<String>) -> Server {
        self.token = token;
        self
    }

    /// Tells `peer` of a change it has not heard of yet; false when the peer is gone.
    async fn announce_up_to(&self, peer: &Peer<RoleServer>, generation: u64) -> bool {
        let mut announced = self.announced.lock().await;
        if *announced >= generation {
            return true;
        }
        let sent = self.announce_change(peer).await;
        *announced = generation;
        sent
    }

    /// Tells `peer` that the tool and resource lists changed (legacy sessions); false
    /// when the peer is gone.
    async fn announce_change(&self, peer: &Peer<RoleServer>) -> bool {
        if self.exposure(&*self.gateway.snapshot().await) != Exposure::Search
            && let Err(e) = peer.notify_tool_list_changed().await
        {
            tracing::debug!("tools/list_changed not delivered: {e}");
            return false;
        }
        if let Err(e) = peer.notify_resource_list_changed().await {
            tracing::debug!("resources/list_changed not delivered: {e}");
            return false;
        }
        true
    }

    /// Forwards the gateway's changes to `peer` until it goes away or the gateway stops.
    fn follow_changes(&self, peer: Peer<RoleServer>) {
        let mut changes = self.gateway.subscribe();
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let generation = tokio::select! {
                    change = changes.recv() => match change {
                        Ok(generation) => generation,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => me.gateway.generation(),
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    },
                    () = me.gateway.stopping() => return,
                };
                if peer.is_transport_closed() || !me.announce_up_to(&peer, generation).await {
                    return;
                }
            }
        });
    }

    /// The effective exposure: `progressive` lists like `search` above `maxListedApps`.
    fn exposure(&self, snapshot: &Snapshot) -> Exposure {
        match self.gateway.config().exposure {
            Exposure::Progressive
                if snapshot.entries.len() > self.gateway.config().max_listed_apps =>
            {
                Exposure::Search
            }
            e => e,
        }
    }

    fn failure(&self, error: GatewayError) -> Result<CallToolResponse, McpError> {
        match self.gateway.config().errors {
            ErrorStyle::JsonRpc => Err(McpError::new(
                ErrorCode(error.code.number()),
                error.message(),
                Some(error.data()),
            )),
            ErrorStyle::Result => {
                let body = error.to_json();
                let mut result = CallToolResult::error(vec![ContentBlock::text(body.to_string())]);
                result.structured_content = Some(body);
                Ok(result.into())
            }
        }
    }

    async fn dispatch(
        &self,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, GatewayError> {
        let name = request.name.as_ref();
        let args = request.arguments.clone().unwrap_or_default();
        let round = Round {
            responses: request.input_responses.as_ref(),
            state: request.request_state.as_deref(),
        };
        // What this client may see (config `clients`).
        let snapshot = self
            .pipeline
            .view(self.gateway.snapshot().await, &self.caller(ctx));
        match tools::lookup(name) {
            Some(Meta::Search) => self.search(&snapshot, &args, ctx).await,
            Some(Meta::Guide) => self.guide(snapshot, &args, ctx, round).await,
            Some(Meta::WebDiscover) => self.web_discover(&args, ctx).await,
            Some(Meta::Exec) => {
                let app = string_arg(&args, "app")?;
                let tool = string_arg(&args, "tool")?;
                let call_args = args.get("args").cloned();
                self.exec(app, tool, call_args, ctx, round).await
            }
            Some(Meta::Batch) => self.batch(&args, ctx, round).await,
            Some(Meta::Run) => self.run(&args, ctx, round).await,
            None => self.by_name(name, snapshot, args, ctx, round).await,
        }
    }

    /// `aai_search`: the served apps that match, and with `remote` the MCP Registry's.
    async fn search(
        &self,
        snapshot: &Snapshot,
        args: &Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, GatewayError> {
        let query = string_arg(args, "query")?;
        let limit = match args.get("limit") {
            None | Some(Value::Null) => 10,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=50).contains(n))
                .ok_or_else(|| invalid("limit", "`limit` must be an integer from 1 to 50"))?
                as usize,
        };
        let hits = self
            .pipeline
            .search_for(snapshot, query, limit, &self.caller(ctx))
            .await;
        let mut result = search_result(snapshot, query, &hits);
        if args.get("remote").and_then(Value::as_bool) == Some(true) {
            let found = self.gateway.search_mcp_registry(query, limit).await;
            add_registry_hits(&mut result, found);
        }
        Ok(result.into())
    }

    /// `aai_guide`: the gateway's own guide, an app's, or one tool's.
    async fn guide(
        &self,
        snapshot: Arc<Snapshot>,
        args: &Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
        round: Round<'_>,
    ) -> Result<CallToolResponse, GatewayError> {
        if matches!(args.get("app"), None | Some(Value::Null)) {
            return Ok(text(crate::registry::guide::gateway(&snapshot)).into());
        }
        let app = string_arg(args, "app")?;
        // A downstream MCP server is asked for its tools on first use (once it may
        // start).
        let (snapshot, note) = match self.guide_snapshot(snapshot, app, ctx, round).await? {
            Ok(ready) => ready,
            Err(ask) => return Ok(ask.into()),
        };
        let entry = find(&snapshot, app, self.gateway.os())?;
        let mut guide = match args.get("tool") {
            None | Some(Value::Null) => {
                self.pipeline
                    .guide_for(&snapshot, entry, &self.caller(ctx))
                    .await
            }
            Some(_) => {
                let tool = string_arg(args, "tool")?;
                crate::registry::guide::render_tool(&snapshot, entry, tool).ok_or_else(|| {
                    crate::pipeline::no_such_tool(&entry.app.id, entry.binding(), tool)
                })?
            }
        };
        if let Some(note) = note {
            guide.insert_str(0, &format!("{note}\n\n"));
        }
        Ok(text(guide).into())
    }

    /// `web_discover`: fetches a site's descriptor, announces the new app, returns its
    /// guide.
    async fn web_discover(
        &self,
        args: &Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, GatewayError> {
        let url = string_arg(args, "url")?;
        // A client limited by config `clients` learns nothing of the apps it may
        // not see from a refusal, and one held to an allow list adds no web app
        // for the others.
        let caller = self.caller(ctx);
        // A web app found here is added for everyone: with the team's tokens, only
        // the admin scope may (it also keeps a person from making the gateway
        // fetch what they choose).
        if caller.person.as_ref().is_some_and(|p| !p.admin) {
            return Err(GatewayError::new(
                Code::PermissionDenied,
                "web_discover adds a web app for everyone: it needs the team's admin scope",
            ));
        }
        let visibility = self.gateway.registry_snapshot().visibility.clone();
        if visibility.allow_listed(&caller.name) {
            return Err(GatewayError::new(
                Code::PermissionDenied,
                "web_discover is not available to this client (config `clients` allows it a list of apps)",
            ));
        }
        let limited = visibility.limits(&caller.name);
        let (app_id, stale) = self.gateway.discover_web(url).await.map_err(|e| {
            if limited && e.code == Code::PermissionDenied {
                GatewayError::new(
                    Code::PermissionDenied,
                    "the site's descriptor cannot be served to this client",
                )
            } else {
                e
            }
        })?;
        // The new app is announced before its guide is returned: on this session,
        // or on the open subscriptions (2026-07-28).
        let generation = self.gateway.generation();
        if asking(ctx).1 {
            self.shared.streams.announced_all(generation).await;
        } else {
            self.announce_up_to(&ctx.peer, generation).await;
        }
        let snapshot = self
            .pipeline
            .view(self.gateway.snapshot().await, &self.caller(ctx));
        let entry = find(&snapshot, &app_id, self.gateway.os())?;
        let mut guide = crate::registry::guide::render(&snapshot, entry);
        if stale {
            guide.insert_str(
                0,
                "> The site could not be reached; this is the cached copy of its descriptor.\n\n",
            );
        }
        Ok(text(guide).into())
    }

    /// A tool called by its own name: an app's `app_<slug>` guide, a `flat` tool, or a
    /// colon spelling (`<appId>:<tool>`).
    async fn by_name(
        &self,
        name: &str,
        snapshot: Arc<Snapshot>,
        args: Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
        round: Round<'_>,
    ) -> Result<CallToolResponse, GatewayError> {
        if let Some(app) = name
            .strip_prefix("app_")
            .or_else(|| name.strip_prefix("app:"))
            && snapshot.find(app).is_some()
        {
            let (snapshot, note) = match self
                .guide_snapshot(snapshot.clone(), app, ctx, round)
                .await?
            {
                Ok(ready) => ready,
                Err(ask) => return Ok(ask.into()),
            };
            let entry = find(&snapshot, app, self.gateway.os())?;
            let mut guide = self
                .pipeline
                .guide_for(&snapshot, entry, &self.caller(ctx))
                .await;
            if let Some(note) = note {
                guide.insert_str(0, &format!("{note}\n\n"));
            }
            return Ok(text(guide).into());
        }
        if let Some((entry, tool)) = names::flat_target(&snapshot, name) {
            let (app, tool) = (entry.app.id.clone(), tool.to_owned());
            return self
                .exec(&app, &tool, Some(Value::Object(args)), ctx, round)
                .await;
        }
        if let Some((app, tool)) = name.split_once(':') {
            return self
                .exec(app, tool, Some(Value::Object(args)), ctx, round)
                .await;
        }
        Err(GatewayError::new(
            Code::ToolNotFound,
            format!("no tool `{name}`; use aai_search, aai_guide and aai_exec"),
        ))
    }

    /// The snapshot to show `app`'s guide from, and a note for above it
    /// ([`crate::pipeline::Pipeline::guide_snapshot`]). A downstream server that may not
    /// start yet is asked about by elicitation when the client offers it: for a
    /// 2026-07-28 client, as an input-required result (`Err`), its answer in the retry.
    async fn guide_snapshot(
        &self,
        snapshot: Arc<Snapshot>,
        app: &str,
        ctx: &RequestContext<RoleServer>,
        round: Round<'_>,
    ) -> Result<
        Result<(Arc<Snapshot>, Option<String>), rmcp::model::InputRequiredResult>,
        GatewayError,
    > {
        let caller = self.caller(ctx);
        let prompter = match asking(ctx) {
            (true, false) => {
                Some(Arc::new(Elicit(ctx.peer.clone())) as crate::consent::SharedPrompter)
            }
            (true, true) => {
                let bound = rounds::bound_to(&caller, app, crate::consent::START);
                match round.open(&bound)? {
                    Some(_) => Some(Arc::new(crate::consent::Fixed(round.consent_reply())) as _),
                    None => {
                        if let Some(question) = self.pipeline.guide_question(app, &caller).await {
                            return Ok(Err(rounds::consent_required(
                                &question,
                                app,
                                crate::consent::START,
                            )?));
                        }
                        None
                    }
                }
            }
            _ => None,
        };
        let origin = crate::pipeline::Origin {
            caller,
            prompter,
            client: None,
            trace: incoming_trace(ctx),
            within: None,
        };
        let ready = self.pipeline.guide_snapshot(snapshot, app, &origin).await?;
        Ok(Ok(ready))
    }

    /// Who is calling: the client's name, the transport, the HTTP token or person.
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> crate::identity::Caller {
        crate::identity::Caller {
            name: ctx
                .client_info()
                .map(|i| i.name)
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| "unknown-client".to_owned()),
            transport: self.transport,
            token: self.token.clone(),
            // Over HTTP with the team's token: the person `listen` found it names.
            person: ctx
                .extensions
                .get::<::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Arc<crate::identity::Person>>())
                .cloned(),
        }
    }
}

/// The caller's W3C trace context: `params._meta.traceparent` (and `tracestate`), else
/// over Streamable HTTP the request's `traceparent` header. A malformed one is ignored.
fn incoming_trace(ctx: &RequestContext<RoleServer>) -> Option<crate::telemetry::Context> {
    let meta = |key: &str| ctx.meta.get(key).and_then(Value::as_str);
    use crate::telemetry::{Context, TRACEPARENT, TRACESTATE};
    if let Some(parent) = meta(TRACEPARENT) {
        return Context::parse(parent, meta(TRACESTATE));
    }
    let parts = ctx.extensions.get::<::http::request::Parts>()?;
    let header = |key: &str| {
        let mut values = parts.headers.get_all(key).iter();
        let first = values.next()?.to_str().ok()?;
        // Two `traceparent` headers are ambiguous: neither is taken.
        values.next().is_none().then_some(first)
    };
    Context::parse(header(TRACEPARENT)?, header(TRACESTATE))
}

fn text(body: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(body)])
}

fn invalid(field: &str, detail: &str) -> GatewayError {
    GatewayError::new(Code::InvalidParams, detail).with("field", format!("/{field}"))
}

fn string_arg<'a>(args: &'a Map<String, Value>, key: &str) -> Result<&'a str, GatewayError> {
    match args.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        Some(_) => Err(invalid(key, &format!("`{key}` must be a non-empty string"))),
        None => Err(invalid(key, &format!("`{key}` is required"))),
    }
}

fn find<'a>(snapshot: &'a Snapshot, app: &str, os: Os) -> Result<&'a Entry, GatewayError> {
    snapshot
        .find(app)
        .ok_or_else(|| crate::pipeline::not_served(snapshot, app, os))
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_resources_subscribe()
                // It answers `prompts/list` (with none): 2026-07-28 asks a server that
                // handles prompts to declare them.
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new(
            "aai-gateway",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(INSTRUCTIONS)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // A person behind a team token is known per request, not here.
        if self.token.is_none()
            && let Some(info) = context.peer.peer_info()
            && !info.client_info.name.trim().is_empty()
        {
            self.pipeline.prefetch_usage(&crate::identity::Caller {
                name: info.client_info.name.clone(),
                transport: self.transport,
                token: None,
                person: None,
            });
        }
        self.follow_changes(context.peer);
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let snapshot = self.gateway.registry_snapshot();
        Some(subscriptions::accepted(requested, |uri| {
            events::subscribable(&snapshot, uri)
        }))
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let listed = || {
            // The tool list of a `search` listing never changes.
            let snapshot = self.gateway.registry_snapshot();
            self.exposure(&snapshot) != Exposure::Search
        };
        // The resources it names: each listened to (consent asked) before anything is sent;
        // one refused ends the stream with why.
        let mut relays = tokio::task::JoinSet::new();
        let uris = context.accepted().resource_subscriptions.clone();
        for uri in uris.into_iter().flatten() {
            let feed = self.feed_for(&uri, context.request_context()).await?;
            let sink = context.sink().clone();
            relays.spawn(events::relay(
                feed,
                move || {
                    let (sink, uri) = (sink.clone(), uri.clone());
                    async move { sink.notify_resource_updated(uri).await.is_ok() }
                },
                std::future::pending(),
            ));
        }
        let listened = self
            .shared
            .streams
            .listen(&self.gateway, context, listed)
            .await;
        relays.abort_all();
        listened
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = self.caller(&context);
        let mut snapshot = self.gateway.snapshot().await;
        if self.exposure(&snapshot) == Exposure::Flat {
            snapshot = self.gateway.all_remote_tools(&caller).await;
        }
        let snapshot = self.pipeline.view(snapshot, &caller);
        let mut tools = Vec::new();
        match self.exposure(&snapshot) {
            Exposure::Progressive => {
                tools.extend(
                    snapshot
                        .entries
                        .iter()
                        .map(|e| names::app_tool(&snapshot, e)),
                );
            }
            Exposure::Flat => {
                // Servers that may not start yet are left out (nothing starts for a list).
                for e in snapshot
                    .entries
                    .iter()
                    .filter(|e| !self.pipeline.unapproved_server(e))
                {
                    let mcp = self.pipeline.executors().mcp();
                    let id = e.app.id.as_str();
                    tools.extend(names::flat_tools(e, &|tool| mcp.view(id, tool)));
                }
            }
            Exposure::Search => {}
        }
        tools.extend(tools::listed().iter().cloned());
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        match self.dispatch(&request, &context).await {
            // `structuredContent` came with 2025-06-18: older sessions get the content
            // alone (it carries the same result as text).
            Ok(CallToolResponse::Complete(mut result))
                if context
                    .protocol_version()
                    .is_some_and(|v| v < rmcp::model::ProtocolVersion::V_2025_06_18) =>
            {
                result.structured_content = None;
                Ok(CallToolResponse::Complete(result))
            }
            Ok(response) => Ok(response),
            Err(e) => self.failure(e),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let snapshot = self
            .pipeline
            .view(self.gateway.snapshot().await, &self.caller(&context));
        let resources = snapshot
            .entries
            .iter()
            .map(|e| {
                Resource::new(format!("app:{}", e.app.id), snapshot.name(e))
                    .with_description(crate::registry::guide::cut(
                        &e.app.description,
                        crate::registry::guide::DESCRIPTION_MAX,
                    ))
                    .with_mime_type("application/aai+json")
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let mut guide = ResourceTemplate::new("app:{appId}/guide", "guide");
        guide.description = Some("An app's operation guide (markdown)".to_owned());
        guide.mime_type = Some("text/markdown".to_owned());
        let mut model = ResourceTemplate::new("app:{appId}/model", "model");
        model.description = Some(
            "An app as the gateway understood it: the normalized model, with the binding in use"
                .to_owned(),
        );
        model.mime_type = Some("application/json".to_owned());
        let mut events = ResourceTemplate::new("app:{appId}/events/{event}", "events");
        events.description = Some(
            "An app's event (its guide lists them): the last ones fired; subscribe to hear of the next"
                .to_owned(),
        );
        events.mime_type = Some("application/json".to_owned());
        let mut downstream = ResourceTemplate::new("app:{appId}/resources/{+uri}", "resources");
        downstream.description = Some(
            "A resource of a downstream MCP server, by the URI the server gives it (its `mcp.resources.read` tool lists them): read it, or subscribe to hear when it changes"
                .to_owned(),
        );
        let mut all = vec![guide, model, events, downstream];
        all.extend(self.downstream_templates(&context).await);
        Ok(ListResourceTemplatesResult::with_all_items(all))
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscribe_event(&request.uri, context).await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.unsubscribe_event(&request.uri);
        Ok(())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let snapshot = self
            .pipeline
            .view(self.gateway.snapshot().await, &self.caller(&context));
        let uri = request.uri.as_str();
        let not_found = || {
            McpError::resource_not_found(format!("no resource `{uri}`"), Some(json!({"uri": uri})))
        };
        if events::parse(uri).is_some() {
            let contents = self.read_event(uri, &context).await?;
            return Ok(ReadResourceResult::new(vec![contents]).into());
        }
        if events::parse_resource(uri).is_some() || uri.starts_with("ui://") {
            let contents = self.read_downstream(uri, &context).await?;
            return Ok(ReadResourceResult::new(contents).into());
        }
        let key = uri.strip_prefix("app:").ok_or_else(not_found)?;
        let (key, part) = match key.rsplit_once('/') {
            Some((k, "guide")) => (k, "guide"),
            Some((k, "model")) => (k, "model"),
            _ => (key, ""),
        };
        let entry = snapshot
            .find(key)
            .filter(|e| e.app.id == key)
            .ok_or_else(not_found)?;
        let contents = match part {
            "guide" => {
                ResourceContents::text(crate::registry::guide::render(&snapshot, entry), uri)
                    .with_mime_type("text/markdown")
            }
            "model" => ResourceContents::text(descriptor_json(entry), uri)
                .with_mime_type("application/json"),
            // A client some of this app's tools are hidden from reads the model of what it
            // may see: the file would name them. So does one of an app whose tools the
            // user changed (config `apps.<id>.tools`): the file has them as defined.
            _ if self
                .gateway
                .config()
                .apps
                .get(key)
                .is_some_and(|a| !a.tools.is_empty())
                || self.gateway.snapshot().await.find(key).is_some_and(|all| {
                    all.binding().tools.len() != entry.binding().tools.len()
                }) =>
            {
                ResourceContents::text(descriptor_json(entry), uri)
                    .with_mime_type("application/json")
            }
            // The descriptor as its author wrote it (the file of the binding served).
            _ => {
                let source = entry.source.clone();
                let text =
                    tokio::task::spawn_blocking(move || crate::catalog::descriptor_text(&source))
                        .await
                        .map_err(|e| McpError::internal_error(e.to_string(), None))?
                        .map_err(|e| {
                            McpError::internal_error(
                                format!("the descriptor of `{key}` cannot be read now: {e}"),
                                Some(json!({"uri": uri})),
                            )
                        })?;
                ResourceContents::text(text, uri).with_mime_type("application/json")
            }
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

/// The normalized app with only the binding in use.
fn descriptor_json(entry: &Entry) -> String {
    let mut value = serde_json::to_value(&entry.app).expect("the model serializes");
    if let Some(obj) = value.as_object_mut() {
        let binding = serde_json::to_value(entry.binding()).expect("the model serializes");
        obj.insert("bindings".into(), Value::Array(vec![binding]));
    }
    serde_json::to_string_pretty(&value).expect("JSON values serialize")
}
