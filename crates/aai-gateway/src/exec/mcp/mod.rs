//! The `mcp` executor (our extension; `docs/descriptors.md`): a downstream MCP server is
//! an app, and its tools are the app's tools.
//!
//! A server is connected on first use (a call, or a guide that needs its tools) and kept;
//! concurrent first uses share one connection attempt. Nothing here decides whether it
//! may start: the gateway asks consent first (`exec::start`). Its tools are listed once,
//! cached here and kept on disk (`exec::listed`), so a later run can show them without
//! starting the server; the gateway folds them into its snapshot (`Gateway::rescan`), so they are
//! disclosed progressively like any app's. When the server says its tool list changed,
//! the app is marked stale (once, however many notifications come; its last list stays in use) and the app id is sent to the gateway, which lists the
//! tools again and tells its own clients. A server that is down fails only its own calls
//! (SERVICE_UNAVAILABLE); the next call connects again.
//!
//! Each sign-in has its own connection ([`Who`]): in team mode a person's requests carry
//! their own token on a connection of their own, so neither a request nor what the server
//! asks back mid-call ever travels on another person's. A person's connection unused for
//! [`PERSON_IDLE`] is closed, and an app keeps at most [`PERSON_SLOTS`] of them.
//!
//! Results pass through untouched (text, images, embedded resources, `structuredContent`,
//! `isError`), and so do progress and cancellation.

mod asks;
mod client;
mod listings;
mod offers;
mod sse;
pub(crate) mod ui;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aai_descriptor::{Executor, McpServer, Schema, Tool, ToolCall};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Execute, Request, process};
use crate::error::{Code, GatewayError};
use crate::identity::Who;
use client::{CallError, Connection, Listing, RemoteTool, Transport};
use listings::{listing_remote, listing_tool, read_listing};

/// How long starting a server and its handshake may take at most (`npx` may install
/// first); a call's own timeout bounds it too.
const CONNECT_DEADLINE: Duration = Duration::from_secs(60);
/// How long `tools/list` may take.
const LIST_DEADLINE: Duration = Duration::from_secs(30);

/// The app's tool that reads one of its server's resources (when the server has
/// resources and no tool of this name): its description lists them, so they cost a
/// client nothing until it reads that app's guide.
pub(crate) const RESOURCES_TOOL: &str = "mcp.resources.read";
/// The app's tool that gets one of its server's prompts, the same way.
pub(crate) const PROMPTS_TOOL: &str = "mcp.prompts.get";
/// Most characters of the listing in such a tool's description.
const LISTING_MAX: usize = 6000;
/// How long a person's connection is kept unused.
const PERSON_IDLE: Duration = Duration::from_secs(600);
/// Most people's connections kept per app (the least recently used goes first).
const PERSON_SLOTS: usize = 64;

/// Whose connection to which app's server.
type SlotKey = (String, Who);

/// One app's server: how it is reached, and its connection once made.
struct Slot {
    server: McpServer,
    base_dir: PathBuf,
    /// A digest of the credential the connection carries: a renewed token reconnects.
    credential: u64,
    link: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// The protocol revision the server answered with last (a reconnection starts there).
    revision: Mutex<Option<String>>,
    /// When it was last asked for (a person's idle connection is closed).
    used: Mutex<std::time::Instant>,
}

impl Slot {
    fn new(server: &McpServer, base_dir: &Path, credential: u64) -> Slot {
        Slot {
            server: server.clone(),
            base_dir: base_dir.to_owned(),
            credential,
            link: tokio::sync::Mutex::new(None),
            revision: Mutex::new(None),
            used: Mutex::new(std::time::Instant::now()),
        }
    }

    fn last_used(&self) -> std::time::Instant {
        *self.used.lock().expect("used lock")
    }
}

/// Drops the people's connections of `app` unused for [`PERSON_IDLE`], then the least
/// recently used beyond [`PERSON_SLOTS`] (calls in flight keep theirs until they end).
fn trim_people(slots: &mut HashMap<SlotKey, Arc<Slot>>, app: &str, now: std::time::Instant) {
    slots.retain(|(a, who), slot| {
        a != app || *who == Who::Shared || now.duration_since(slot.last_used()) < PERSON_IDLE
    });
    let mut people: Vec<(std::time::Instant, SlotKey)> = slots
        .iter()
        .filter(|((a, who), _)| a == app && *who != Who::Shared)
        .map(|(key, slot)| (slot.last_used(), key.clone()))
        .collect();
    if people.len() > PERSON_SLOTS {
        people.sort_by_key(|(used, _)| *used);
        for (_, key) in &people[..people.len() - PERSON_SLOTS] {
            slots.remove(key);
        }
    }
}

/// A digest of the headers a credential adds (kept in memory only, to notice a change).
fn credential_digest(auth: Option<&crate::auth::Material>) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (name, value) in auth.map(|m| m.headers.as_slice()).unwrap_or_default() {
        name.hash(&mut h);
        value.expose().hash(&mut h);
    }
    h.finish()
}

/// How a call to a downstream MCP server failed. `From<Error> for GatewayError` below
/// gives the wire codes. Clone: callers waiting for the same connection share its failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The server could not be started, reached or kept (`note`: its last stderr lines).
    #[error("the MCP server of `{app}` is not available: {why}{note}")]
    Unavailable {
        /// The app id.
        app: String,
        /// What failed (scrubbed of secrets by the client).
        why: String,
        /// The note of its last stderr lines, or empty.
        note: String,
    },
    /// The server will not tell of a resource's updates.
    #[error("the MCP server of `{app}` does not tell of updates of that resource: {why}")]
    NotWatched {
        /// The app id.
        app: String,
        /// Why (scrubbed of secrets by the client).
        why: String,
    },
    /// An MCP server over HTTP was given a query-string key.
    #[error("an MCP server over HTTP takes its API key in a header, not the query string")]
    KeyInQuery,
    /// The client cancelled while the server was starting.
    #[error("the call was cancelled while the MCP server was starting")]
    CancelledStarting,
    /// The server answered with a JSON-RPC error.
    #[error("the MCP server answered with an error: {}", crate::text::excerpt(.message, 2000))]
    Rpc {
        /// Its JSON-RPC code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// No answer in time; the request was cancelled there.
    #[error("the MCP server did not answer within {} s; the request was cancelled there", .0.as_secs())]
    TimedOut(Duration),
    /// The client cancelled; so was the request there.
    #[error("the call was cancelled; the MCP server was told")]
    Cancelled,
    /// The server refused the request's credential, or its lack of one (HTTP 401, or 403
    /// with a challenge); sign-in is the pipeline's business.
    #[error("the MCP server of `{app}` wants {}", if .challenge.insufficient_scope() {
        format!("a token with more scope ({})", .challenge.scope.as_deref().unwrap_or("unnamed"))
    } else {
        "a sign-in or another token (HTTP 401/403)".to_owned()
    })]
    Refused {
        /// The app id.
        app: String,
        /// What its `WWW-Authenticate` said.
        challenge: crate::auth::mcp::Challenge,
    },
}

impl Error {
    /// Whether the server refused the token (or its lack): a refresh or a sign-in helps.
    pub fn unauthorized(&self) -> bool {
        matches!(self, Error::Refused { challenge, .. } if !challenge.insufficient_scope())
    }

    /// The scopes the server wants when it refused a token for lack of scope.
    pub fn needs_scope(&self) -> Option<Vec<String>> {
        match self {
            Error::Refused { challenge, .. } if challenge.insufficient_scope() => {
                Some(challenge.scopes().unwrap_or_default())
            }
            _ => None,
        }
    }

    fn unavailable(app: &str, why: &str, note: &str) -> Error {
        Error::Unavailable {
            app: app.to_owned(),
            why: why.to_owned(),
            note: note.to_owned(),
        }
    }
}

/// The refusal an HTTP server's last 401/403 challenge says, if it sent one.
fn refusal(app: &str, refused: &client::Refused) -> Option<Error> {
    let challenge = refused.lock().expect("refused lock").take()?;
    Some(Error::Refused {
        app: app.to_owned(),
        challenge: crate::auth::mcp::Challenge::parse(&challenge),
    })
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match &e {
            Error::Unavailable { .. } => Code::ServiceUnavailable,
            Error::KeyInQuery => Code::AaiJsonInvalid,
            Error::NotWatched { .. } => Code::AutomationNotSupported,
            Error::Rpc { code, .. } if *code == i64::from(crate::error::INVALID_PARAMS) => {
                Code::InvalidParams
            }
            Error::TimedOut(_) => Code::Timeout,
            Error::Refused { .. } => Code::AuthRequired,
            Error::CancelledStarting | Error::Rpc { .. } | Error::Cancelled => {
                Code::AutomationFailed
            }
        };
        let wire = GatewayError::new(code, e.to_string());
        match e {
            Error::Unavailable { app, .. }
            | Error::Refused { app, .. }
            | Error::NotWatched { app, .. } => wire.with("app", app),
            Error::Rpc { code, .. } => wire.with("serverCode", code),
            _ => wire,
        }
    }
}

/// Listed tools, by app id (kept while a changed list is fetched again).
type ToolCache = Arc<Mutex<HashMap<String, Vec<Tool>>>>;

/// Apps whose server said its list changed and that are not being listed yet: one pending
/// relisting per app however many notifications arrive.
type Stale = Arc<Mutex<std::collections::HashSet<String>>>;

/// A downstream server's state now (`/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Connected (started, handshake done) and not closed.
    Connected,
    /// Being started or reached now.
    Starting,
    /// Its last attempt to connect failed.
    Failing,
    /// Connected earlier; the connection has since closed (the next call connects again).
    Disconnected,
}

impl Health {
    /// Every state, in order.
    pub const ALL: [Health; 4] = [
        Health::Connected,
        Health::Starting,
        Health::Failing,
        Health::Disconnected,
    ];

    /// Its name in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Connected => "connected",
            Health::Starting => "starting",
            Health::Failing => "failing",
            Health::Disconnected => "disconnected",
        }
    }

    /// Which of an app's connections speaks for it: the one furthest along.
    fn rank(self) -> u8 {
        match self {
            Health::Failing => 0,
            Health::Disconnected => 1,
            Health::Starting => 2,
            Health::Connected => 3,
        }
    }
}

/// Runs downstream MCP servers.
pub struct McpExecutor {
    slots: Mutex<HashMap<SlotKey, Arc<Slot>>>,
    /// Whether each app's last attempt to connect succeeded (for [`McpExecutor::health`]).
    reached: Mutex<HashMap<SlotKey, bool>>,
    failures: super::Failures<Error>,
    tools: ToolCache,
    stale: Stale,
    /// Apps whose cached list was read from disk, not listed by their server in this run.
    kept: Mutex<std::collections::HashSet<String>>,
    /// `(app, tool)` → the gateway's own tools for a server's resources and prompts.
    listings: Mutex<HashMap<(String, String), Listing>>,
    /// What each server says about itself beyond its tools (views, templates,
    /// instructions).
    offers: offers::Offers,
    /// Where tool lists are kept on disk, and the home that folder is in (none: lists are
    /// kept in memory only).
    lists_dir: std::sync::OnceLock<(PathBuf, PathBuf)>,
    changed_tx: mpsc::UnboundedSender<(String, Who)>,
    changed_rx: Mutex<Option<mpsc::UnboundedReceiver<(String, Who)>>>,
}

impl Default for McpExecutor {
    fn default() -> Self {
        let (changed_tx, changed_rx) = mpsc::unbounded_channel();
        McpExecutor {
            slots: Mutex::default(),
            reached: Mutex::default(),
            failures: super::Failures::default(),
            tools: ToolCache::default(),
            stale: Stale::default(),
            kept: Mutex::default(),
            listings: Mutex::default(),
            offers: offers::Offers::default(),
            lists_dir: std::sync::OnceLock::new(),
            changed_tx,
            changed_rx: Mutex::new(Some(changed_rx)),
        }
    }
}

impl std::fmt::Debug for McpExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.slots.lock().map(|s| s.len()).unwrap_or(0);
        f.debug_struct("McpExecutor").field("servers", &n).finish()
    }
}

impl Execute for McpExecutor {
    /// The result is the server's whole `CallToolResult`.
    async fn execute(&self, req: Request<'_>) -> Result<Value, super::Error> {
        Ok(self.call(req).await?)
    }
}

impl McpExecutor {
    /// A listed tool as one of the app's tools; remembers which are the gateway's own
    /// resource and prompt tools.
    fn to_tool(&self, app: &str, t: RemoteTool) -> Tool {
        if let Some(listing) = t.listing {
            self.listings
                .lock()
                .expect("listings lock")
                .insert((app.to_owned(), t.name.clone()), listing);
        }
        if let Some(view) = &t.ui {
            self.offers
                .set_view(app, &t.name, ui::namespaced(app, view));
        }
        to_tool(app, t)
    }

    /// The interactive view of `app`'s tool `tool` (MCP Apps `_meta.ui`, its URI named
    /// for the app), when its server lists one.
    pub fn view(&self, app: &str, tool: &str) -> Option<Value> {
        self.offers.view(app, tool)
    }

    /// `app`'s tools with a view, and each view's URI, by tool name.
    pub fn views(&self, app: &str) -> Vec<(String, String)> {
        self.offers.views(app)
    }

    /// `app`'s server's resource templates (`resources/templates/list` items) from its
    /// last listing in this run.
    pub fn templates(&self, app: &str) -> Vec<Value> {
        self.offers.templates(app)
    }

    /// `app`'s server's `instructions` (cut to [`offers::MAX_INSTRUCTIONS`] characters),
    /// as it gave them when the gateway last connected.
    pub fn instructions(&self, app: &str) -> Option<String> {
        self.offers.instructions(app)
    }

    /// Keeps tool lists in `home`'s `cache/mcp-tools` from now on (the first home given
    /// stays).
    pub fn keep_lists_in(&self, home: &Path) {
        let _ = self
            .lists_dir
            .set((home.join("cache").join("mcp-tools"), home.to_owned()));
    }

    /// Where lists are kept, and the pin `server` (described in `base_dir`) files its list
    /// under: its start's, with a folder inside the home named relative to the home, so
    /// that a moved home keeps its lists (the command that starts is the same).
    fn kept_list(&self, server: &McpServer, base_dir: &Path) -> Option<(&Path, String)> {
        let (dir, home) = self.lists_dir.get()?;
        let base = match base_dir.strip_prefix(home) {
            Ok(inside) => Path::new("$AAI_HOME").join(inside),
            Err(_) => base_dir.to_owned(),
        };
        let start = super::start::start_of(&Executor::Mcp(server.clone()), &base)?;
        Some((dir, start.pin))
    }

    /// The tools of `app`'s server, when they have been listed: in this run, or in an
    /// earlier one from the same command (read from disk, without starting anything).
    /// Blocks on the disk the first time: call it off the async workers.
    pub fn tools_of(&self, app: &str, server: &McpServer, base_dir: &Path) -> Option<Vec<Tool>> {
        if let Some(tools) = self.tools.lock().expect("tools lock").get(app) {
            return Some(tools.clone());
        }
        let (dir, pin) = self.kept_list(server, base_dir)?;
        let listed = super::listed::read(dir, app, &pin)?;
        let tools: Vec<Tool> = listed
            .iter()
            .filter_map(kept_tool)
            .map(|t| self.to_tool(app, t))
            .collect();
        self.kept.lock().expect("kept lock").insert(app.to_owned());
        self.tools
            .lock()
            .expect("tools lock")
            .insert(app.to_owned(), tools.clone());
        Some(tools)
    }

    /// Whether `app`'s server must be asked for its tools: never asked in this run (its
    /// list, if any, is from an earlier run), or its list changed since.
    pub fn needs_listing(&self, app: &str) -> bool {
        !self.tools.lock().expect("tools lock").contains_key(app)
            || self.kept.lock().expect("kept lock").contains(app)
            || self.stale.lock().expect("stale lock").contains(app)
    }

    /// Whether some list of `app`'s tools is known (from this run or kept on disk).
    pub fn has_list(&self, app: &str) -> bool {
        self.tools.lock().expect("tools lock").contains_key(app)
    }

    /// Whether `app`'s tools come from its server (listed at least once), as opposed to
    /// its descriptor.
    pub fn lists_tools_of(&self, app: &str) -> bool {
        self.tools.lock().expect("tools lock").contains_key(app)
    }

    /// App ids whose server changed its tool list (taken once, by the gateway).
    pub fn changes(&self) -> Option<mpsc::UnboundedReceiver<(String, Who)>> {
        self.changed_rx.lock().expect("changes lock").take()
    }

    /// Connects to `app`'s server if needed and lists its tools into the cache. Connecting
    /// takes at most the app's `timeout` when it has one (and 60 s at most).
    pub(crate) async fn list_tools(
        &self,
        app: &str,
        server: &McpServer,
        opening: &super::Opening<'_>,
        timeout: Option<Duration>,
    ) -> Result<(), Error> {
        let deadline = timeout.map_or(CONNECT_DEADLINE, |t| t.min(CONNECT_DEADLINE));
        let link = self.link(app, server, opening, deadline).await?;
        self.list_on(app, &opening.who, server, opening.base_dir, &link, timeout)
            .await
    }

    /// After the server of `app` said its tools changed on `who`'s connection: lists them
    /// again on that connection, as it is (no credential is looked up again). `false`:
    /// that connection is gone (the next use lists them).
    pub(crate) async fn relist(
        &self,
        app: &str,
        who: &Who,
        timeout: Option<Duration>,
    ) -> Result<bool, Error> {
        let slot = self.slot(app, who);
        let Some(slot) = slot else {
            return Ok(false);
        };
        let live = slot.link.lock().await.clone().filter(|l| !l.is_closed());
        let Some(link) = live else {
            return Ok(false);
        };
        self.list_on(app, who, &slot.server, &slot.base_dir, &link, timeout)
            .await
            .map(|()| true)
    }

    /// Lists the tools of `app`'s server (and its resources and prompts) on `link`, into
    /// the cache and onto disk.
    async fn list_on(
        &self,
        app: &str,
        who: &Who,
        server: &McpServer,
        base_dir: &Path,
        link: &Arc<Connection>,
        timeout: Option<Duration>,
    ) -> Result<(), Error> {
        // A change announced from here on is listed again after this listing.
        self.stale.lock().expect("stale lock").remove(app);
        // The app's own timeout bounds the listing too (a server whose list cannot be
        // read must not hold a guide for 30 s when the app says 5).
        let limit = timeout.map_or(LIST_DEADLINE, |t| t.min(LIST_DEADLINE));
        let mut listed = link.list_tools(limit).await.map_err(|why: String| {
            self.forget(app, who, link);
            // A listing refused for its token (the server moved to another authorization
            // server, or the token was revoked) is a sign-in's business, as for a call.
            refusal(app, link.refused())
                .unwrap_or_else(|| Error::unavailable(app, &why, &link.stderr_note()))
        })?;
        // Its resources and prompts, as two tools of the gateway's (a failure here costs
        // only them: the tools stay usable).
        let (resources, prompts) = link.offers();
        let mut listed_templates = Vec::new();
        for (offered, listing) in [(resources, Listing::Resources), (prompts, Listing::Prompts)] {
            let name = listing_tool(listing);
            if !offered || listed.iter().any(|t| t.name == name) {
                continue;
            }
            let (method, key) = match listing {
                Listing::Resources => ("resources/list", "resources"),
                Listing::Prompts => ("prompts/list", "prompts"),
            };
            // Resource templates too (a server without them answers with an error).
            let templates = match listing {
                Listing::Resources => link
                    .list_all("resources/templates/list", "resourceTemplates", limit)
                    .await
                    .unwrap_or_default(),
                Listing::Prompts => Vec::new(),
            };
            listed_templates.extend(templates.iter().cloned());
            match link.list_all(method, key, limit).await {
                Ok(items) if !items.is_empty() || !templates.is_empty() => {
                    // A person's items are theirs: the tool every caller sees names none.
                    let per_person = *who != Who::Shared;
                    listed.push(listing_remote(listing, &items, &templates, per_person));
                }
                Ok(_) => {}
                Err(why) => tracing::warn!(app, "{why}; its {key} are not offered"),
            }
        }
        if let Some((dir, pin)) = self.kept_list(server, base_dir) {
            let (dir, app_id) = (dir.to_owned(), app.to_owned());
            let kept: Vec<Value> = listed.iter().map(keep_tool).collect();
            let written = tokio::task::spawn_blocking(move || {
                super::listed::write(&dir, &app_id, &pin, &kept)
            })
            .await;
            if let Ok(Err(e)) = written {
                tracing::warn!(app, "the tool list could not be kept on disk: {e}");
            }
        }
        self.listings
            .lock()
            .expect("listings lock")
            .retain(|(a, _), _| a != app);
        self.offers.relisted(app, listed_templates);
        let tools = listed.into_iter().map(|t| self.to_tool(app, t)).collect();
        self.kept.lock().expect("kept lock").remove(app);
        self.tools
            .lock()
            .expect("tools lock")
            .insert(app.to_owned(), tools);
        Ok(())
    }

    /// Each update of the resource `uri` of `app`'s server (started or reached now, as a
    /// call would), until the stream is dropped.
    pub(crate) async fn watch(
        &self,
        app: &str,
        server: &McpServer,
        opening: &super::Opening<'_>,
        uri: &str,
    ) -> Result<super::EventStream, Error> {
        let link = self.link(app, server, opening, CONNECT_DEADLINE).await?;
        link.watch(uri).await.map_err(|why| {
            // What the server may echo of the credential and the placeholders' values.
            let mut hide = opening
                .auth
                .as_ref()
                .map(crate::auth::Material::secret_forms)
                .unwrap_or_default();
            hide.extend(crate::auth::echoes(
                opening.secrets.iter().map(|(_, v)| v.expose()),
            ));
            hide.sort_by_key(|f| std::cmp::Reverse(f.len()));
            Error::NotWatched {
                app: app.to_owned(),
                why: crate::text::scrub(&why, &hide),
            }
        })
    }

    async fn call(&self, req: Request<'_>) -> Result<Value, Error> {
        let Executor::Mcp(server) = req.executor else {
            unreachable!("dispatched by executor type");
        };
        let ctx = &req.ctx;
        let started = std::time::Instant::now();
        let opening = super::Opening {
            base_dir: req.base_dir,
            auth: req.auth,
            who: req.who,
            secrets: req.secrets,
        };
        let link = tokio::select! {
            link = self.link(req.app, server, &opening, ctx.timeout.min(CONNECT_DEADLINE)) => link?,
            () = ctx.cancel.cancelled() => {
                return Err(Error::CancelledStarting);
            }
        };
        let Value::Object(args) = req.args else {
            unreachable!("validated arguments are an object");
        };
        // Starting the server took part of the call's time.
        let left = ctx.timeout.saturating_sub(started.elapsed());
        let listing = self
            .listings
            .lock()
            .expect("listings lock")
            .get(&(req.app.to_owned(), req.tool.name.clone()))
            .copied();
        let outcome = match listing {
            Some(listing) => {
                tokio::select! {
                    r = read_listing(&link, listing, args) => r,
                    () = ctx.cancel.cancelled() => Err(CallError::Cancelled),
                    () = tokio::time::sleep(left) => Err(CallError::Timeout),
                }
            }
            None => {
                let caller = client::Caller {
                    app: req.app.to_owned(),
                    upstream: ctx.upstream.clone(),
                    permission: ctx.permission.clone(),
                    trace: ctx.trace.clone(),
                };
                link.call(
                    &req.tool.name,
                    args,
                    ctx.progress.clone(),
                    &ctx.cancel,
                    left,
                    caller,
                )
                .await
            }
        };
        match outcome {
            Ok(result) => Ok(result),
            Err(CallError::Closed(why)) => {
                self.forget(req.app, &opening.who, &link);
                Err(refusal(req.app, link.refused())
                    .unwrap_or_else(|| Error::unavailable(req.app, &why, &link.stderr_note())))
            }
            Err(CallError::Rpc { code, message }) => Err(Error::Rpc {
                code: code.into(),
                message,
            }),
            Err(CallError::Timeout) => Err(Error::TimedOut(ctx.timeout)),
            Err(CallError::Cancelled) => Err(Error::Cancelled),
        }
    }

    /// The live connection to `app`'s server with `who`'s sign-in, made now (within
    /// `deadline`) when there is none. Concurrent callers wait for the same attempt, and
    /// share its failure.
    async fn link(
        &self,
        app: &str,
        server: &McpServer,
        opening: &super::Opening<'_>,
        deadline: Duration,
    ) -> Result<Arc<Connection>, Error> {
        let (who, base_dir) = (&opening.who, opening.base_dir);
        let credential = credential_digest(opening.auth.as_ref());
        let key = (app.to_owned(), who.clone());
        let slot = {
            let mut slots = self.slots.lock().expect("slots lock");
            if *who != Who::Shared && !slots.contains_key(&key) {
                trim_people(&mut slots, app, std::time::Instant::now());
            }
            let slot = slots
                .entry(key)
                .or_insert_with(|| Arc::new(Slot::new(server, base_dir, credential)));
            if slot.server != *server || slot.base_dir != base_dir || slot.credential != credential
            {
                *slot = Arc::new(Slot::new(server, base_dir, credential));
            }
            *slot.used.lock().expect("used lock") = std::time::Instant::now();
            slot.clone()
        };
        // Failures are each credential's own: one person's refused token fails nobody
        // else, nor their next token.
        let account = format!("{}#{credential:x}", crate::auth::store::account(app, who));
        let asked = std::time::Instant::now();
        let mut link = slot.link.lock().await;
        if let Some(live) = link.as_ref().filter(|l| !l.is_closed()) {
            return Ok(live.clone());
        }
        if let Some(why) = self.failures.since(&account, asked) {
            return Err(why);
        }
        *link = None;
        let connection = self.connect(app, &slot, opening, deadline).await;
        self.reached
            .lock()
            .expect("reached lock")
            .insert((app.to_owned(), who.clone()), connection.is_ok());
        let connection = connection.inspect_err(|why| self.failures.record(&account, why))?;
        *link = Some(connection.clone());
        Ok(connection)
    }

    /// Starts or reaches `app`'s server (`slot`'s) and runs the handshake, within
    /// `deadline`, starting at the revision the server answered with last.
    async fn connect(
        &self,
        app: &str,
        slot: &Slot,
        opening: &super::Opening<'_>,
        deadline: Duration,
    ) -> Result<Arc<Connection>, Error> {
        let (who, auth, secrets) = (&opening.who, opening.auth.as_ref(), &opening.secrets);
        let (server, base_dir) = (&slot.server, slot.base_dir.as_path());
        let earlier = slot.revision.lock().expect("revision lock").clone();
        if matches!(server, McpServer::Http { .. }) && auth.is_some_and(|m| !m.query.is_empty()) {
            return Err(Error::KeyInQuery);
        }
        // The transport, made again (the server started again) when the first handshake
        // needs a second try.
        let open = || -> Result<Transport, String> {
            Ok(match server {
                McpServer::Stdio(p) => Transport::Stdio(Box::new(
                    process::spawn(&process::Spec {
                        program: &p.command,
                        args: &p.args,
                        env: &crate::auth::fill::fill_all(&p.env, secrets),
                        base_dir,
                        label: app,
                    })
                    .map_err(|e| e.to_string())?,
                )),
                McpServer::Http { url, headers, mode } => {
                    let headers = crate::auth::fill::fill_all(headers, secrets);
                    let filled: Vec<&str> = secrets.iter().map(|(_, v)| v.expose()).collect();
                    let mut secrets = crate::auth::echoes(
                        headers
                            .iter()
                            .filter(|(name, _)| secret_header(name))
                            .map(|(_, value)| value.as_str())
                            .chain(filled),
                    );
                    let mut headers = headers;
                    if let Some(material) = auth {
                        headers.extend(
                            material
                                .headers
                                .iter()
                                .map(|(k, v)| (k.clone(), v.expose().to_owned())),
                        );
                        secrets.extend(material.secret_forms());
                    }
                    Transport::Http {
                        url: url.clone(),
                        headers,
                        secrets,
                        mode: *mode,
                    }
                }
            })
        };
        let stale = self.stale.clone();
        let changed = self.changed_tx.clone();
        let (id, whose) = (app.to_owned(), who.clone());
        let on_tools_changed = Arc::new(move || {
            if stale.lock().expect("stale lock").insert(id.clone()) {
                let _ = changed.send((id.clone(), whose.clone()));
            }
        });
        let refused = client::Refused::default();
        let connection = client::connect(
            &open,
            deadline,
            on_tools_changed,
            refused.clone(),
            earlier.as_deref(),
        )
        .await
        .map_err(|why: String| {
            refusal(app, &refused).unwrap_or_else(|| Error::unavailable(app, &why, ""))
        })?;
        tracing::info!(
            app,
            server = ?connection.server(),
            revision = ?connection.revision(),
            "connected to the MCP server"
        );
        *slot.revision.lock().expect("revision lock") = connection.revision();
        self.offers
            .set_instructions(app, connection.instructions().as_deref());
        Ok(Arc::new(connection))
    }

    /// `app`'s connection slot for `who`, if there is one.
    fn slot(&self, app: &str, who: &Who) -> Option<Arc<Slot>> {
        self.slots
            .lock()
            .expect("slots lock")
            .get(&(app.to_owned(), who.clone()))
            .cloned()
    }

    /// Drops `link` as `app`'s connection for `who` (it failed); the next use connects
    /// again.
    fn forget(&self, app: &str, who: &Who, link: &Arc<Connection>) {
        let slot = self.slot(app, who);
        if let Some(slot) = slot
            && let Ok(mut current) = slot.link.try_lock()
            && current.as_ref().is_some_and(|c| Arc::ptr_eq(c, link))
        {
            *current = None;
        }
    }

    /// The state of each server this run has tried to reach, by app id (servers never
    /// used are not listed): of its people's connections, the best.
    pub fn health(&self) -> Vec<(String, Health)> {
        let slots: Vec<(SlotKey, Arc<Slot>)> = self
            .slots
            .lock()
            .expect("slots lock")
            .iter()
            .map(|(key, slot)| (key.clone(), slot.clone()))
            .collect();
        let reached = self.reached.lock().expect("reached lock").clone();
        let mut best: HashMap<String, Health> = HashMap::new();
        let each = slots.into_iter().map(|(key, slot)| {
            let health = match slot.link.try_lock() {
                // Held: a connection attempt (or a caller checking the link) now.
                Err(_) => Health::Starting,
                Ok(link) if link.as_ref().is_some_and(|l| !l.is_closed()) => Health::Connected,
                Ok(_) => match reached.get(&key) {
                    Some(false) => Health::Failing,
                    Some(true) => Health::Disconnected,
                    None => Health::Starting,
                },
            };
            (key.0, health)
        });
        for (app, health) in each {
            let kept = best.entry(app).or_insert(health);
            if health.rank() > kept.rank() {
                *kept = health;
            }
        }
        best.into_iter().collect()
    }

    /// After a reload: drops the connections and tool lists of apps that are gone or
    /// now reach their server differently (`app id → server`).
    pub(crate) fn retire_stale(&self, live: crate::exec::Live<'_>) {
        let server = |app: &str| match live(app) {
            Some(crate::exec::Start::Mcp(server)) => Some(server),
            _ => None,
        };
        let served = |app: &str| server(app).is_some();
        self.reached
            .lock()
            .expect("reached lock")
            .retain(|(app, _), _| served(app));
        self.slots
            .lock()
            .expect("slots lock")
            .retain(|(app, _), slot| server(app).as_ref() == Some(&slot.server));
        self.tools
            .lock()
            .expect("tools lock")
            .retain(|app, _| served(app));
        self.kept
            .lock()
            .expect("kept lock")
            .retain(|app| served(app));
        self.stale
            .lock()
            .expect("stale lock")
            .retain(|app| served(app));
    }

    /// Closes the people's connections unused for [`PERSON_IDLE`] (run every minute).
    pub fn close_idle(&self) {
        let now = std::time::Instant::now();
        let mut slots = self.slots.lock().expect("slots lock");
        slots.retain(|(_, who), slot| {
            *who == Who::Shared || now.duration_since(slot.last_used()) < PERSON_IDLE
        });
        let kept: std::collections::HashSet<SlotKey> = slots.keys().cloned().collect();
        drop(slots);
        self.reached
            .lock()
            .expect("reached lock")
            .retain(|key, _| key.1 == Who::Shared || kept.contains(key));
    }

    /// Closes every connection (stdio servers are killed with their process group).
    pub fn shutdown(&self) {
        self.slots.lock().expect("slots lock").clear();
    }
}

/// A listed tool as `exec::listed` keeps it (as MCP lists it).
fn keep_tool(t: &RemoteTool) -> Value {
    json!({
        "name": t.name,
        "description": t.description,
        "inputSchema": t.input_schema,
        "outputSchema": t.output_schema,
        "readOnly": t.read_only,
        "listing": t.listing.map(|l| match l {
            Listing::Resources => "resources",
            Listing::Prompts => "prompts",
        }),
        "ui": t.ui,
    })
}

/// A kept tool read back (one that is not a tool is left out).
fn kept_tool(t: &Value) -> Option<RemoteTool> {
    Some(RemoteTool {
        name: t.get("name")?.as_str()?.to_owned(),
        description: t
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        input_schema: t.get("inputSchema")?.clone(),
        output_schema: t.get("outputSchema").cloned().filter(|v| !v.is_null()),
        read_only: t.get("readOnly").and_then(Value::as_bool).unwrap_or(false),
        listing: match t.get("listing").and_then(Value::as_str) {
            Some("resources") => Some(Listing::Resources),
            Some("prompts") => Some(Listing::Prompts),
            _ => None,
        },
        ui: ui::read(&json!({"_meta": {"ui": t.get("ui")}})),
    })
}

/// Whether a header the descriptor sets by value looks like it carries a secret (its
/// value is then scrubbed from errors like a stored credential).
fn secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "auth", "key", "token", "secret", "cookie", "session", "pass", "sig", "cred",
    ]
    .iter()
    .any(|hint| name.contains(hint))
}

/// A listed tool as one of the app's tools. A schema the gateway cannot use for
/// validation is replaced by "any object" (the server still validates).
fn to_tool(app: &str, t: RemoteTool) -> Tool {
    let parameters = Schema::compile(&t.input_schema).unwrap_or_else(|why| {
        tracing::warn!(app, tool = %t.name, "the tool's input schema is not usable here ({why}); arguments are passed unchecked");
        Schema::compile(&json!({"type": "object"})).expect("a constant schema")
    });
    let returns = t.output_schema.and_then(|s| Schema::compile(&s).ok());
    Tool {
        name: t.name,
        description: t.description,
        parameters,
        returns,
        timeout: None,
        read_only: t.read_only,
        undo: None,
        call: ToolCall::Forward,
        overridden: None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn people_connections_idle_or_beyond_the_cap_are_dropped_first_unused_first() {
        use super::{PERSON_IDLE, PERSON_SLOTS, Slot, Who, trim_people};
        use std::time::Instant;
        let server = aai_descriptor::McpServer::Http {
            url: "http://127.0.0.1:1/mcp".into(),
            headers: Default::default(),
            mode: Default::default(),
        };
        let now = Instant::now() + PERSON_IDLE * 3;
        let slot = |age: std::time::Duration| {
            let slot = Slot::new(&server, std::path::Path::new("."), 0);
            // Ages up to 20 minutes: an `Instant` that far back may not exist on Windows
            // (it counts from boot), so the test's clock starts ahead of now.
            *slot.used.lock().unwrap() = now - age;
            std::sync::Arc::new(slot)
        };
        let person = |n: usize| Who::Person(format!("p{n}").into());
        let mut slots = std::collections::HashMap::new();
        let secs = std::time::Duration::from_secs;
        slots.insert(("a".to_owned(), Who::Shared), slot(PERSON_IDLE * 2));
        slots.insert(("b".to_owned(), person(0)), slot(PERSON_IDLE * 2));
        slots.insert(("a".to_owned(), person(0)), slot(PERSON_IDLE + secs(1)));
        for n in 1..=PERSON_SLOTS + 2 {
            slots.insert(("a".to_owned(), person(n)), slot(secs(n as u64)));
        }
        trim_people(&mut slots, "a", now);
        // The shared connection and other apps' stay; the idle one went, and of the rest
        // the two least recently used (the oldest: the highest numbers).
        assert!(slots.contains_key(&("a".to_owned(), Who::Shared)));
        assert!(slots.contains_key(&("b".to_owned(), person(0))));
        assert!(!slots.contains_key(&("a".to_owned(), person(0))));
        let people = slots
            .keys()
            .filter(|(a, w)| a == "a" && *w != Who::Shared)
            .count();
        assert_eq!(people, PERSON_SLOTS);
        assert!(slots.contains_key(&("a".to_owned(), person(1))));
        assert!(!slots.contains_key(&("a".to_owned(), person(PERSON_SLOTS + 2))));
        assert!(!slots.contains_key(&("a".to_owned(), person(PERSON_SLOTS + 1))));
    }
}
