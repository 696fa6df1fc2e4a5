//! Consent: the user decides, per (caller, app, tool), whether an agent may run a tool.
//!
//! * `consent.mode` (config; per app `apps.<id>.consent`): `prompt` (default) asks,
//!   `allow` runs every call, `deny` refuses every call.
//! * The caller is the client's `clientInfo.name` and its transport (`claude-code@stdio`).
//!   It is self-asserted by the client: it keeps one client's grants from serving another
//!   honest client, not from an impostor (docs/consent.md).
//! * Choices: allow once, always allow this tool, always allow every tool of this app,
//!   deny. "Always" is stored in `state.db`; a deny, a declined or a cancelled question
//!   refuses this call only and is not remembered.
//! * Channels, in order: the front door's own (MCP elicitation when the client declares
//!   it), then a native dialog when a display exists (`dialog`), else CONSENT_REQUIRED,
//!   whose `data` links to the web UI's pending list and names the `aai-gateway consent
//!   grant …` command. Before refusing, a call waits `consent.waitSeconds` (default 0)
//!   for an answer from the web UI or a grant from the CLI; a refused call stays in the
//!   pending list for an hour, so that the user can approve its retry.
//! * Tool calls ask, whatever name reached them. Starting a downstream MCP server or an
//!   ACP agent is asked too (with the call that needs it, or alone for a guide that
//!   needs its tools), and an "always" answer is tied to the command (`exec::start`).
//!   Search and lists never ask and never start anything.

pub mod dialog;
pub mod fingerprint;
pub mod shared;
pub mod site;
pub mod state;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::ConsentMode;
use crate::consent::fingerprint::{Cover, Definition, Pins};
use crate::consent::state::{Deferred, Grant};
use crate::error::{Code, GatewayError};

/// Why a call may not run. `From<Error> for GatewayError` below gives the wire codes;
/// CONSENT_REQUIRED comes with the way to allow it, whole in the message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `consent.mode` is `deny`.
    #[error("calls to this app are refused by configuration (`consent.mode` is `deny`)")]
    Refused,
    /// The user said no (`channel`: how they were asked, as a suffix).
    #[error("the user denied this call{0}")]
    Denied(String),
    /// The question was closed without an answer.
    #[error("the user declined or dismissed the question; nothing was remembered")]
    Dismissed,
    /// Nobody could be asked: how the user can allow it.
    #[error("{}", .0.detail)]
    Required(Box<Required>),
}

/// CONSENT_REQUIRED's content.
#[derive(Debug)]
pub struct Required {
    detail: String,
    hint: String,
    caller: String,
    /// The grant command, for a question an answer may be remembered for.
    command: Option<(String, String)>,
    start: Option<String>,
    ui: Option<String>,
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        match e {
            Error::Required(r) => {
                let mut wire = GatewayError::new(Code::ConsentRequired, r.detail)
                    .with_hint(r.hint)
                    .with("caller", r.caller);
                if let Some((command, powershell)) = r.command {
                    wire = wire
                        .with("command", command)
                        .with("powershellCommand", powershell);
                }
                if let Some(start) = r.start {
                    wire = wire.with("start", start);
                }
                if let Some(link) = r.ui {
                    wire = wire.with("ui", link);
                }
                wire
            }
            Error::Refused | Error::Denied(_) | Error::Dismissed => {
                GatewayError::new(Code::PermissionDenied, e.to_string())
            }
        }
    }
}
pub use crate::exec::start::Start;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    /// The client's `clientInfo.name`.
    pub name: String,
    /// The transport: `stdio`, `http`, `cli`.
    pub transport: &'static str,
    /// Over HTTP with a bearer token: which token (the first 8 hex digits of its SHA-256),
    /// so that grants made under one token do not serve another.
    pub token: Option<String>,
    /// Over HTTP with the team's access token (`web.auth`): the person it was issued to.
    pub person: Option<std::sync::Arc<Person>>,
}

/// A person signed in through the team's authorization server: the subject of a
/// validated access token and what it carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Person {
    /// The token's `sub`, as the issuer wrote it (at most [`Person::MAX_SUBJECT`]
    /// characters, no control characters).
    pub subject: String,
    /// Its scopes, sorted.
    pub scopes: Vec<String>,
    /// Whether it carries the admin scope (`web.auth.adminScope`): it sees everyone's
    /// history and pending calls.
    pub admin: bool,
}

impl Person {
    /// Longest subject accepted.
    pub const MAX_SUBJECT: usize = 200;

    /// Whether `subject` can name a person: not empty, not too long, printable.
    pub fn valid_subject(subject: &str) -> bool {
        !subject.is_empty()
            && subject.chars().count() <= Person::MAX_SUBJECT
            && !subject.chars().any(char::is_control)
    }
}

impl Caller {
    /// The user at the command line: they asked for the call themselves.
    pub fn cli() -> Caller {
        Caller {
            name: "aai-gateway".into(),
            transport: "cli",
            token: None,
            person: None,
        }
    }

    /// The web UI's own "try it" form: the user at the UI, like the command line.
    pub fn ui() -> Caller {
        Caller {
            name: "web-ui".into(),
            transport: "ui",
            token: None,
            person: None,
        }
    }

    /// Whether the user is the caller (the command line, the web UI's "try it" form):
    /// they asked for the call itself, so it does not ask them again.
    pub fn is_user(&self) -> bool {
        matches!(self.transport, "cli" | "ui")
    }

    /// `name@transport` (`name@http#1a2b3c4d` with a bearer token, `name@http~alice` for
    /// a person signed in with the team's token), the key of grants and history. A
    /// person's client name and subject have `%`, `@`, `~` and `#` percent-encoded, so
    /// that no client name can make one person's key end like another's.
    pub fn key(&self) -> String {
        match (&self.person, &self.token) {
            (Some(person), _) => format!(
                "{}@{}~{}",
                key_part(&self.name),
                self.transport,
                key_part(&person.subject)
            ),
            (None, Some(id)) => format!("{}@{}#{id}", self.name, self.transport),
            (None, None) => format!("{}@{}", self.name, self.transport),
        }
    }

    /// Whether a caller key (of a grant, a pending call or a history record) is one of
    /// `subject`'s, as [`Caller::key`] writes them: `<client>@http~<subject>`.
    pub fn key_is_persons(key: &str, subject: &str) -> bool {
        key.strip_suffix(key_part(subject).as_ref())
            .and_then(|rest| rest.strip_suffix("@http~"))
            .is_some_and(|name| !name.is_empty() && !name.contains(['@', '~', '#']))
    }

    /// Who is behind the call, whatever client they use: the person's subject, else the
    /// caller's key (one user). Rate limits and the UI's "mine" go by it.
    pub fn person_key(&self) -> String {
        match &self.person {
            Some(person) => format!("~{}", person.subject),
            None => self.key(),
        }
    }
}

/// A client name or subject inside a person's caller key: the key's separators and `%`
/// percent-encoded.
fn key_part(part: &str) -> std::borrow::Cow<'_, str> {
    if !part.contains(['%', '@', '~', '#']) {
        return std::borrow::Cow::Borrowed(part);
    }
    let mut out = String::with_capacity(part.len() + 6);
    for c in part.chars() {
        match c {
            '%' => out.push_str("%25"),
            '@' => out.push_str("%40"),
            '~' => out.push_str("%7E"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The user's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Run this call.
    Once,
    /// Always allow this tool for this caller.
    Tool,
    /// Always allow every tool of this app for this caller.
    App,
    /// Refuse this call.
    Deny,
}

impl Choice {
    /// Every choice with its wire value and title, in the order offered.
    pub const ALL: [(Choice, &'static str, &'static str); 4] = [
        (Choice::Once, "once", "Allow once"),
        (Choice::Tool, "tool", "Always allow this tool"),
        (Choice::App, "app", "Always allow every tool of this app"),
        (Choice::Deny, "deny", "Deny"),
    ];

    /// The choice a wire value names.
    pub fn parse(value: &str) -> Option<Choice> {
        Choice::ALL
            .iter()
            .find(|(_, v, _)| *v == value)
            .map(|(c, _, _)| *c)
    }
}

/// What is asked.
#[derive(Debug, Clone)]
pub struct Question {
    /// The caller.
    pub caller: Caller,
    /// App id and its display name.
    pub app: String,
    /// Its display name.
    pub app_name: String,
    /// The tool.
    pub tool: String,
    /// What the tool does.
    pub description: String,
    /// For a web app: its server and certificate, which the user checks and an "always"
    /// answer is tied to.
    pub site: Option<crate::consent::site::Site>,
    /// What must start first (a downstream MCP server, an ACP agent) when that is not
    /// allowed yet: an allowing answer allows it too, and an "always" one is tied to its
    /// command.
    pub start: Option<Start>,
    /// The call's arguments as the user sees them: one line of JSON, secret-looking
    /// fields masked as in history, cut ([`Question::shown_args`]); `None` when there are
    /// none or the question is not about one call.
    pub args: Option<String>,
    /// The tool only reads (descriptor `readOnly`, a server's `readOnlyHint`).
    pub read_only: bool,
    /// An "always" answer is remembered; `false` for changes that are asked about each
    /// time (the gateway's own app): such an answer allows this call only.
    pub remember: bool,
    /// The tool's definition and fingerprint as it is now, which an "always allow this
    /// tool" answer is tied to (`fingerprint`); `None` when the question is not about a
    /// known tool (a start, a server that has not listed its tools).
    pub definition: Option<Arc<Definition>>,
    /// What changed in the tool since the caller's grant for it was given (the gate fills
    /// it in when it asks, [`Gate::explain`]).
    pub changed: Option<String>,
}

impl Question {
    /// The tool part of the key an "allow once" answer is kept under: the tool, or for a
    /// question whose answers are never remembered (a change the gateway's own app would
    /// make), the tool and a hash of the change described, so that the approval releases
    /// that very change and no other.
    /// The choices offered: all, or for a change asked about each time, allow once and
    /// deny.
    pub fn choices(&self) -> impl Iterator<Item = &'static (Choice, &'static str, &'static str)> {
        let remember = self.remember;
        Choice::ALL
            .iter()
            .filter(move |(c, _, _)| remember || matches!(c, Choice::Once | Choice::Deny))
    }

    fn once_tool(&self) -> String {
        if self.remember {
            self.tool.clone()
        } else {
            format!(
                "{}#{:016x}",
                self.tool,
                aai_descriptor::hash::stable(&self.description)
            )
        }
    }
}

/// The tool name of a question about starting an app only (its guide or tool list needs
/// it running): no tool can have it, `@` is outside tool names.
pub const START: &str = "@start";

/// The caller of start grants: starting an app is allowed for every client alike (one
/// server process serves them all).
pub const ANY_CALLER: &str = "*";

impl Question {
    /// `args` as a question shows them: masked like history (docs/history.md), one line,
    /// at most 300 characters; nothing for no arguments.
    pub fn shown_args(args: &serde_json::Value) -> Option<String> {
        if args.as_object().is_some_and(serde_json::Map::is_empty) || args.is_null() {
            return None;
        }
        let line = crate::history::mask(args).to_string();
        Some(crate::text::excerpt(&line, 300))
    }

    /// One sentence for any channel.
    pub fn text(&self) -> String {
        let mut text = if self.tool == START {
            format!(
                "{} needs {} ({}) running to see its tools",
                self.caller.name, self.app_name, self.app
            )
        } else {
            format!(
                "{} wants to run `{}` of {} ({}): {}",
                self.caller.name, self.tool, self.app_name, self.app, self.description
            )
        };
        if let Some(changed) = &self.changed {
            text.push_str(" — it changed since it was allowed: ");
            text.push_str(changed);
        }
        if let Some(args) = &self.args {
            text.push_str(" — with ");
            text.push_str(args);
        }
        if let Some(site) = &self.site {
            text.push_str(" — on ");
            text.push_str(&site.describe());
        }
        if let Some(start) = &self.start {
            text.push_str(" — ");
            text.push_str(&start.in_question());
        }
        if !self.remember {
            text.push_str(" (asked each time: an answer allows this change only)");
        }
        text
    }

    /// The certificate fingerprint an answer is tied to.
    fn cert(&self) -> Option<&str> {
        self.site
            .as_ref()
            .and_then(crate::consent::site::Site::fingerprint)
    }
}

/// What asking through a channel gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The user chose.
    Chosen(Choice),
    /// The user declined, cancelled, closed the question or let it time out: this call is
    /// refused (and nothing is remembered).
    Declined,
    /// The channel could not ask (a dialog that cannot open its display, a client whose
    /// elicitation request failed): no answer at all, so the next channel is tried.
    Unavailable(String),
    /// The question came back without a choice and without a no: an elicitation answered
    /// `cancel`, as clients that cannot show forms answer (Claude Code's `-p`). Not a
    /// denial: no other channel asks (the user just closed one), and the call is refused
    /// with how to allow it (CONSENT_REQUIRED), its pending entry kept for the web UI.
    Unshown(String),
}

/// A way to ask the user, supplied by the front door (MCP elicitation…).
pub trait Prompter: Send + Sync + std::fmt::Debug {
    /// Asks `question`.
    fn ask<'a>(
        &'a self,
        question: &'a Question,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>>;
}

/// How long a refused call stays in the pending list for the user to approve its retry.
pub(crate) const REFUSED_KEPT_MS: u64 = 3600 * 1000;
/// How long an "allow once" given for a refused call waits for the retry.
const ONCE_KEPT_MS: u64 = 10 * 60 * 1000;
/// At most this many pending entries are kept (the oldest go first).
const PENDING_MAX: usize = 100;

/// A call that asked and had no channel: waiting for an answer from the web UI or the
/// CLI, or refused with CONSENT_REQUIRED and kept so that the user can approve its retry.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Pending {
    /// Its number, for answering it.
    pub id: u64,
    /// `name@transport`.
    pub caller: String,
    /// App id.
    pub app: String,
    /// Its display name.
    pub app_name: String,
    /// The tool.
    pub tool: String,
    /// What the tool does.
    pub description: String,
    /// The call's arguments, masked and cut ([`Question::shown_args`]).
    pub args: Option<String>,
    /// What changed in the tool since it was allowed ([`Question::changed`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<String>,
    /// The tool's definition an "always" answer is tied to.
    #[serde(skip)]
    definition: Option<Arc<Definition>>,
    /// For a web app: its server and certificate.
    pub site: Option<String>,
    /// The certificate fingerprint an "always" answer is tied to.
    #[serde(skip)]
    cert: Option<String>,
    /// What an allowing answer also starts (a command line, or the server reached).
    pub start: Option<String>,
    /// The digest an "always" answer ties the start to.
    #[serde(skip)]
    start_pin: Option<String>,
    /// When it asked (Unix ms).
    pub at_ms: u64,
    /// A call is waiting for the answer; else it was refused and the agent may retry.
    pub waiting: bool,
    /// An "always" answer may be remembered (else only once or deny are offered).
    pub lasting: bool,
    /// The tool part of the "allow once" key ([`Question::once_tool`]).
    #[serde(skip)]
    pub(crate) once_tool: String,
}

#[derive(Debug)]
struct Slot {
    info: Pending,
    answer: Option<tokio::sync::oneshot::Sender<Choice>>,
}

impl Slot {
    fn waiting(&self) -> bool {
        self.answer.as_ref().is_some_and(|s| !s.is_closed())
    }
}

/// An answer to a call that no longer waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no pending call {0}: it was answered or it expired")]
pub struct NotPending(pub u64);

/// `(caller key, app, tool)`.
type Key = (String, String, String);

/// How a consent check ended, or that a question was put (metrics count them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A question was put to a channel or queued for the web UI (its outcome follows).
    Asked,
    /// The app's consent mode is `allow`.
    ModeAllow,
    /// The app's consent mode is `deny`.
    ModeDeny,
    /// The user made the call themselves (`call`, the web UI's "try it").
    User,
    /// A read-only tool under `consent.readOnly: "allow"`.
    ReadOnly,
    /// Allowed already: a grant, an "allow once" waiting for this retry, or an answer
    /// given (or a grant made) while the call waited.
    Granted,
    /// The user chose "allow once".
    Once,
    /// The user chose "always allow this tool".
    AlwaysTool,
    /// The user chose "always allow every tool of this app".
    AlwaysApp,
    /// The user chose "deny".
    Denied,
    /// The user declined, cancelled or let the question time out.
    Declined,
    /// Nobody could be asked in time: CONSENT_REQUIRED.
    Unanswered,
}

impl Decision {
    /// Every decision, in order.
    pub const ALL: [Decision; 12] = [
        Decision::Asked,
        Decision::ModeAllow,
        Decision::ModeDeny,
        Decision::User,
        Decision::ReadOnly,
        Decision::Granted,
        Decision::Once,
        Decision::AlwaysTool,
        Decision::AlwaysApp,
        Decision::Denied,
        Decision::Declined,
        Decision::Unanswered,
    ];

    /// Its name in metrics (docs/metrics.md).
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Asked => "asked",
            Decision::ModeAllow => "mode_allow",
            Decision::ModeDeny => "mode_deny",
            Decision::User => "user",
            Decision::ReadOnly => "read_only",
            Decision::Granted => "granted",
            Decision::Once => "once",
            Decision::AlwaysTool => "always_tool",
            Decision::AlwaysApp => "always_app",
            Decision::Denied => "denied",
            Decision::Declined => "declined",
            Decision::Unanswered => "unanswered",
        }
    }

    /// The decision of an answer (`None`: declined).
    fn of(choice: Option<Choice>) -> Decision {
        match choice {
            Some(Choice::Once) => Decision::Once,
            Some(Choice::Tool) => Decision::AlwaysTool,
            Some(Choice::App) => Decision::AlwaysApp,
            Some(Choice::Deny) => Decision::Denied,
            None => Decision::Declined,
        }
    }
}

/// Told of each [`Decision`] with the app id it was about (an id of the catalog).
pub type Observer = Arc<dyn Fn(&str, Decision) + Send + Sync>;

/// The gate's observer, once set.
#[derive(Default)]
struct Watch(OnceLock<Observer>);

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Watch(set)"
        } else {
            "Watch(none)"
        })
    }
}

/// The consent gate.
#[derive(Debug)]
pub struct Gate {
    mode: ConsentMode,
    per_app: std::collections::BTreeMap<String, ConsentMode>,
    wait: Duration,
    state: Deferred,
    /// The grants have been read from `state` (on first use, not at start).
    loaded: std::sync::Once,
    /// The gateway's own channel (a native dialog), used when the front door has none.
    native: Option<SharedPrompter>,
    /// `(caller key, app, tool or "*")` → the certificate and tool definition the grant
    /// is tied to.
    grants: RwLock<HashMap<Key, Pins>>,
    /// Calls without a channel, newest last.
    pending: Mutex<Vec<Slot>>,
    next_id: AtomicU64,
    /// "Allow once" answers for refused calls, consumed by their retry: key → expiry.
    once: Mutex<Vec<(Key, u64)>>,
    /// The web UI's address, once it listens (for the link in CONSENT_REQUIRED).
    ui: OnceLock<String>,
    /// The home, when it is not the default one: the grant command must name it.
    home: OnceLock<std::path::PathBuf>,
    /// `consent.readOnly: "allow"`: read-only tools run without asking.
    read_only: bool,
    /// Starts allowed for this run ("allow once"): `(app, pin)`.
    started: Mutex<std::collections::HashSet<(String, String)>>,
    /// One question at a time per key: concurrent calls that need the same answer wait
    /// for the first one's question instead of asking again.
    asking: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
    /// The shared store (config `store`): grants and pending calls in PostgreSQL
    /// (`shared.rs`); `state` is then unused.
    shared: Option<Arc<crate::store::Shared>>,
    /// With the shared store: grants given here that a reload has not shown stored yet
    /// (being written, or kept for this run when the write failed); a reload keeps them.
    unsaved: Mutex<HashMap<Key, Pins>>,
    /// Told of every decision (metrics).
    watch: Watch,
}

impl Gate {
    /// A gate with `mode` (per-app overrides in `per_app`), grants from `state` (read
    /// when first needed).
    pub fn new(
        mode: ConsentMode,
        per_app: std::collections::BTreeMap<String, ConsentMode>,
        wait: Duration,
        state: impl Into<Deferred>,
    ) -> Gate {
        Gate {
            mode,
            per_app,
            wait,
            state: state.into(),
            loaded: std::sync::Once::new(),
            native: None,
            grants: RwLock::new(HashMap::new()),
            pending: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            once: Mutex::new(Vec::new()),
            ui: OnceLock::new(),
            home: OnceLock::new(),
            read_only: false,
            started: Mutex::default(),
            asking: Mutex::default(),
            shared: None,
            unsaved: Mutex::default(),
            watch: Watch::default(),
        }
    }

    /// Keeps grants and pending calls in the shared store instead of `state.db`; its
    /// grants are read by [`Gate::open_shared`] at start.
    #[must_use]
    pub fn with_shared(mut self, shared: Option<Arc<crate::store::Shared>>) -> Gate {
        self.shared = shared;
        self
    }

    /// The shared store, when grants and pending calls live there.
    pub fn shared(&self) -> Option<&Arc<crate::store::Shared>> {
        self.shared.as_ref()
    }

    /// With the shared store: reads its grants and follows the other replicas' changes
    /// and answers until `stop`. Nothing to do without one.
    pub async fn open_shared(
        self: &Arc<Self>,
        stop: tokio_util::sync::CancellationToken,
    ) -> Result<(), crate::store::Error> {
        let Some(store) = self.shared.clone() else {
            return Ok(());
        };
        shared::load(self, &store).await?;
        shared::follow(self, store, stop);
        Ok(())
    }

    /// Replaces the cached grants (read from the shared store), keeping those given here
    /// that it does not show yet.
    fn replace_grants(&self, all: Vec<Grant>) {
        self.loaded.call_once(|| {});
        let mut map: HashMap<Key, Pins> = all
            .into_iter()
            .map(|g| (Pins::of(&g), g))
            .map(|(pins, g)| ((g.caller, g.app, g.tool), pins))
            .collect();
        let mut unsaved = self.unsaved.lock().expect("unsaved lock");
        unsaved.retain(|key, pins| map.get(key) != Some(pins));
        for (key, pins) in unsaved.iter() {
            map.insert(key.clone(), pins.clone());
        }
        *self.grants.write().expect("grants lock") = map;
    }

    /// Every "always" grant, oldest first, from wherever they are kept.
    pub async fn grants_listed(self: &Arc<Self>) -> Result<Vec<Grant>, crate::store::Error> {
        if let Some(store) = &self.shared {
            return shared::grants(store).await;
        }
        let me = self.clone();
        Ok(tokio::task::spawn_blocking(move || me.grants())
            .await
            .unwrap_or_default())
    }

    /// The pending calls (every replica's with the shared store), newest first.
    pub async fn pending_listed(&self) -> Result<Vec<Pending>, crate::store::Error> {
        match &self.shared {
            Some(store) => shared::pending(store).await,
            None => Ok(self.pending()),
        }
    }

    /// Answers pending call `id` from the web UI: here ([`Gate::answer`]), or with the
    /// shared store, on whichever replica the call waits.
    pub async fn answer_listed(
        &self,
        id: u64,
        choice: Choice,
    ) -> Result<&'static str, shared::AnswerError> {
        match &self.shared {
            Some(store) => shared::answer(self, store, id, choice).await,
            None => Ok(self.answer(id, choice)?),
        }
    }

    /// Tells `observer` of every decision from now on (the first observer set stays).
    pub fn observe(&self, observer: Observer) {
        let _ = self.watch.0.set(observer);
    }

    fn tell(&self, app: &str, decision: Decision) {
        if let Some(observer) = self.watch.0.get() {
            observer(app, decision);
        }
    }

    /// Lets read-only tools run without asking (`consent.readOnly: "allow"`).
    #[must_use]
    pub fn with_read_only(mut self, allow: bool) -> Gate {
        self.read_only = allow;
        self
    }

    /// Whether `question` is about a read-only tool the configuration lets run without
    /// asking (what it starts must still be allowed).
    fn read_only_ok(&self, question: &Question) -> bool {
        self.read_only && question.read_only && self.start_ok(question)
    }

    /// The grants in memory, read from `state.db` on first use.
    fn grant_map(&self) -> &RwLock<HashMap<Key, Pins>> {
        self.loaded.call_once(|| self.read_grants());
        &self.grants
    }

    /// Adds the gateway's own channel (a native dialog) for callers whose front door
    /// cannot ask.
    pub fn with_native(mut self, native: Option<SharedPrompter>) -> Gate {
        self.native = native;
        self
    }

    /// Tells the gate where the web UI listens (`http://127.0.0.1:3000/ui`), so that
    /// CONSENT_REQUIRED can link to it. The first address stays.
    pub fn set_ui(&self, base: String) {
        let _ = self.ui.set(base);
    }

    /// Names the gateway's home in the grant command of CONSENT_REQUIRED (`--home …`), for
    /// a gateway that does not run on the default one.
    pub fn set_home(&self, home: std::path::PathBuf) {
        let _ = self.home.set(home);
    }

    /// The web UI's address, when one listens.
    pub fn ui(&self) -> Option<&str> {
        self.ui.get().map(String::as_str)
    }

    /// The mode that applies to `app`.
    pub fn mode(&self, app: &str) -> ConsentMode {
        self.per_app.get(app).copied().unwrap_or(self.mode)
    }

    /// Reads the grants again (another process may have changed them).
    pub fn reload(&self) {
        self.loaded.call_once(|| {});
        self.read_grants();
    }

    fn read_grants(&self) {
        let Some(state) = self.state.get() else {
            return;
        };
        match state.grants() {
            Ok(all) => {
                *self.grants.write().expect("grants lock") = all
                    .into_iter()
                    .map(|g| (Pins::of(&g), g))
                    .map(|(pins, g)| ((g.caller, g.app, g.tool), pins))
                    .collect();
            }
            Err(e) => tracing::warn!("{e}"),
        }
    }

    /// Every "always" grant, oldest first (this run's too when `state.db` is unusable).
    pub fn grants(&self) -> Vec<Grant> {
        if let Some(state) = self.state.get()
            && let Ok(all) = state.grants()
        {
            return all;
        }
        let mut all: Vec<Grant> = self
            .grant_map()
            .read()
            .expect("grants lock")
            .iter()
            .map(|((caller, app, tool), pins)| Grant {
                caller: caller.clone(),
                app: app.clone(),
                tool: tool.clone(),
                granted_at: 0,
                cert: pins.cert.clone(),
                definition: pins.definition.as_deref().cloned(),
            })
            .collect();
        all.sort_by(|a, b| (&a.caller, &a.app, &a.tool).cmp(&(&b.caller, &b.app, &b.tool)));
        all
    }

    /// Whether starting `start` for `app` is allowed now: mode `allow`, an "always" grant
    /// tied to this very command, or an "allow once" earlier in this run.
    pub fn start_allowed(&self, app: &str, start: &Start) -> bool {
        self.start_remembered(app, start)
            || (self.mode(app) == ConsentMode::Prompt
                && self
                    .started
                    .lock()
                    .expect("started lock")
                    .contains(&(app.to_owned(), start.pin.clone())))
    }

    /// Whether `app` may start `start` in every run (mode `allow`, or an "always" answer
    /// tied to that command), not only in this one.
    pub fn start_remembered(&self, app: &str, start: &Start) -> bool {
        match self.mode(app) {
            ConsentMode::Allow => true,
            ConsentMode::Deny => false,
            ConsentMode::Prompt => self
                .grant_map()
                .read()
                .expect("grants lock")
                .get(&(ANY_CALLER.to_owned(), app.to_owned(), START.to_owned()))
                .is_some_and(|pins| pins.cert.as_deref() == Some(start.pin.as_str())),
        }
    }

    /// Allows starting `app` with the command `pin` names, for this run or always.
    /// Allows app `app` to start `start` for the rest of this run (the user approved
    /// exactly that command, as part of importing the app).
    pub fn allow_start_now(&self, app: &str, start: &Start) {
        self.allow_start(app, &start.pin, false);
    }

    fn allow_start(&self, app: &str, pin: &str, always: bool) {
        if always {
            self.remember(ANY_CALLER, app, START, Some(pin));
        } else {
            self.started
                .lock()
                .expect("started lock")
                .insert((app.to_owned(), pin.to_owned()));
        }
    }

    /// Whether a grant covers the call (one tied to a certificate only while the site
    /// shows that certificate, one tied to a tool's definition only while the tool has
    /// it); a grant that keeps no definition of the tool yet adopts it now.
    fn granted(&self, key: &Key, question: &Question) -> bool {
        match self.cover(&key.0, question) {
            Cover::Yes => true,
            Cover::No => false,
            Cover::Adopt => {
                if let Some(definition) = &question.definition {
                    let tool = (key.0.clone(), key.1.clone(), question.tool.clone());
                    self.adopt(&tool, definition);
                }
                true
            }
        }
    }

    /// Always allows `caller` to run `tool` (`*`: every tool) of `app`; with `cert`, only
    /// while the site shows that certificate.
    pub fn remember(&self, caller: &str, app: &str, tool: &str, cert: Option<&str>) {
        self.keep(caller, app, tool, cert, None);
    }

    /// [`Gate::remember`], tied to the tool's `definition` when known (a changed tool
    /// asks again).
    fn keep(
        &self,
        caller: &str,
        app: &str,
        tool: &str,
        cert: Option<&str>,
        definition: Option<&Arc<Definition>>,
    ) {
        // Every tool of the app: tied to none of their definitions (`fingerprint`).
        let definition = definition.filter(|_| tool != "*");
        let pins = Pins {
            cert: cert.map(str::to_owned),
            definition: definition.cloned(),
        };
        self.grant_map().write().expect("grants lock").insert(
            (caller.to_owned(), app.to_owned(), tool.to_owned()),
            pins.clone(),
        );
        if let Some(store) = &self.shared {
            self.unsaved
                .lock()
                .expect("unsaved lock")
                .insert((caller.to_owned(), app.to_owned(), tool.to_owned()), pins);
            shared::store_grant(
                store,
                Grant {
                    caller: caller.to_owned(),
                    app: app.to_owned(),
                    tool: tool.to_owned(),
                    granted_at: now_ms() / 1000,
                    cert: cert.map(str::to_owned),
                    definition: definition.map(|d| (**d).clone()),
                },
            );
            return;
        }
        if let Some(state) = self.state.get() {
            let grant = Grant {
                caller: caller.to_owned(),
                app: app.to_owned(),
                tool: tool.to_owned(),
                granted_at: now_ms() / 1000,
                cert: cert.map(str::to_owned),
                definition: definition.map(|d| (**d).clone()),
            };
            if let Err(e) = state.grant(&grant) {
                tracing::warn!("the grant is kept for this run only: {e}");
            }
        }
    }

    /// Removes the grants of `app` (only `tool`'s, only `caller`'s when given); how many.
    pub async fn revoke(
        &self,
        app: &str,
        tool: Option<&str>,
        caller: Option<&str>,
    ) -> Result<usize, shared::RevokeError> {
        let matches = |(c, a, t): &Key| {
            a == app && tool.is_none_or(|x| x == t) && caller.is_none_or(|x| x == c)
        };
        self.unsaved
            .lock()
            .expect("unsaved lock")
            .retain(|k, _| !matches(k));
        let here = {
            let mut grants = self.grant_map().write().expect("grants lock");
            let before = grants.len();
            grants.retain(|k, _| !matches(k));
            before - grants.len()
        };
        if let Some(store) = &self.shared {
            return Ok(shared::revoke(store, app, tool, caller).await?);
        }
        match self.state.get() {
            Some(state) => Ok(state.revoke(app, tool, caller)?),
            None => Ok(here),
        }
    }

    /// The calls waiting for an answer and the recently refused ones, newest first.
    pub fn pending(&self) -> Vec<Pending> {
        let mut slots = self.pending.lock().expect("pending lock");
        prune(&mut slots);
        slots
            .iter()
            .rev()
            .map(|s| Pending {
                waiting: s.waiting(),
                ..s.info.clone()
            })
            .collect()
    }

    /// Answers pending call `id` (from the web UI). A waiting call follows the answer; for
    /// a refused call, "always" choices are remembered, "once" lets its next retry run,
    /// and deny forgets it. Says what happened.
    pub fn answer(&self, id: u64, choice: Choice) -> Result<&'static str, NotPending> {
        let slot = {
            let mut slots = self.pending.lock().expect("pending lock");
            let at = slots
                .iter()
                .position(|s| s.info.id == id)
                .ok_or(NotPending(id))?;
            slots.remove(at)
        };
        let key = (
            slot.info.caller.clone(),
            slot.info.app.clone(),
            slot.info.once_tool.clone(),
        );
        // A change asked about each time: an "always" answer counts once.
        let choice = match choice {
            Choice::Tool | Choice::App if !slot.info.lasting => Choice::Once,
            other => other,
        };
        if let Some(sender) = slot.answer
            && sender.send(choice).is_ok()
        {
            return Ok(match choice {
                Choice::Deny => "the waiting call was refused",
                _ => "the waiting call goes on",
            });
        }
        if let Some(pin) = &slot.info.start_pin
            && choice != Choice::Deny
        {
            self.allow_start(&key.1, pin, choice != Choice::Once);
        }
        let start_only = key.2 == START && slot.info.start_pin.is_some();
        Ok(match choice {
            Choice::Once if start_only => "the app may start in this run",
            Choice::Once => {
                let mut once = self.once.lock().expect("once lock");
                once.retain(|(k, _)| *k != key);
                once.push((key, now_ms() + ONCE_KEPT_MS));
                "its next retry may run once"
            }
            Choice::Tool if start_only => "the app may start from now on",
            Choice::Tool => {
                self.keep(
                    &key.0,
                    &key.1,
                    &key.2,
                    slot.info.cert.as_deref(),
                    slot.info.definition.as_ref(),
                );
                "the tool is allowed for this client from now on"
            }
            Choice::App => {
                self.remember(&key.0, &key.1, "*", slot.info.cert.as_deref());
                "every tool of the app is allowed for this client from now on"
            }
            Choice::Deny => "dismissed",
        })
    }

    /// Consumes an "allow once" given for a refused call.
    fn take_once(&self, key: &Key) -> bool {
        let mut once = self.once.lock().expect("once lock");
        let now = now_ms();
        once.retain(|(_, expires)| *expires > now);
        match once.iter().position(|(k, _)| k == key) {
            Some(at) => {
                once.remove(at);
                true
            }
            None => false,
        }
    }

    /// Adds a pending entry (replacing an older one for the same call); its id.
    fn enqueue(&self, info: Pending, answer: tokio::sync::oneshot::Sender<Choice>) {
        let mut slots = self.pending.lock().expect("pending lock");
        slots.retain(|s| {
            s.waiting()
                || (s.info.caller != info.caller
                    || s.info.app != info.app
                    || s.info.once_tool != info.once_tool)
        });
        prune(&mut slots);
        slots.push(Slot {
            info,
            answer: Some(answer),
        });
    }

    /// What the pending list shows of `question`, as entry `id`.
    fn pending_info(question: &Question, id: u64) -> Pending {
        Pending {
            id,
            caller: question.caller.key(),
            app: question.app.clone(),
            app_name: question.app_name.clone(),
            tool: question.tool.clone(),
            description: question.description.clone(),
            args: question.args.clone(),
            changed: question.changed.clone(),
            definition: question.definition.clone(),
            site: question
                .site
                .as_ref()
                .map(crate::consent::site::Site::describe),
            cert: question.cert().map(str::to_owned),
            start: question.start.as_ref().map(Start::describe),
            start_pin: question.start.as_ref().map(|s| s.pin.clone()),
            at_ms: now_ms(),
            waiting: true,
            lasting: question.remember,
            once_tool: question.once_tool(),
        }
    }

    /// Forgets pending entry `id` (its call was allowed some other way).
    fn settle(&self, id: u64) {
        self.pending
            .lock()
            .expect("pending lock")
            .retain(|s| s.info.id != id);
    }

    /// Whether a call of `question` would have to ask the user now (mode `prompt`, no
    /// grant, no "allow once" waiting for it, not the command line, and what it starts
    /// allowed). Front doors that ask in a round trip of their own (MCP's input-required
    /// result) check this first.
    pub fn would_ask(&self, question: &Question) -> bool {
        let caller = question.caller.key();
        self.mode(&question.app) == ConsentMode::Prompt
            && !question.caller.is_user()
            && !self.read_only_ok(question)
            && !(self.start_ok(question)
                && (start_only(question)
                    || self.cover(&caller, question) != Cover::No
                    || self.once_waiting(&caller, question)))
    }

    fn once_waiting(&self, caller: &str, question: &Question) -> bool {
        let once_tool = question.once_tool();
        self.once
            .lock()
            .expect("once lock")
            .iter()
            .any(|((c, a, t), expires)| {
                c == caller && *a == question.app && *t == once_tool && *expires > now_ms()
            })
    }

    /// Whether what `question` starts (if anything) is allowed.
    fn start_ok(&self, question: &Question) -> bool {
        question
            .start
            .as_ref()
            .is_none_or(|s| self.start_allowed(&question.app, s))
    }

    /// Whether `question` may run without asking now; consumes an "allow once" waiting
    /// for it.
    fn allowed_now(&self, question: &Question, key: &Key) -> bool {
        self.start_ok(question)
            && (start_only(question) || self.granted(key, question) || self.take_once(key))
    }

    /// Decides whether `question` may run: Ok to run, else the refusal. Starting what the
    /// question starts is decided with it.
    pub async fn check(
        &self,
        question: &Question,
        prompter: Option<&dyn Prompter>,
    ) -> Result<(), GatewayError> {
        let (result, decision) = self.decide(question, prompter, self.wait).await;
        self.tell(&question.app, decision);
        result
    }

    /// [`Gate::check`] without waiting `consent.waitSeconds` for an answer from the web UI
    /// when nobody can be asked: for a read (a guide) that says how to allow it instead.
    pub async fn check_at_once(
        &self,
        question: &Question,
        prompter: Option<&dyn Prompter>,
    ) -> Result<(), GatewayError> {
        let (result, decision) = self.decide(question, prompter, Duration::ZERO).await;
        self.tell(&question.app, decision);
        result
    }

    /// [`Gate::check`], and how it decided.
    async fn decide(
        &self,
        question: &Question,
        prompter: Option<&dyn Prompter>,
        wait: Duration,
    ) -> (Result<(), GatewayError>, Decision) {
        match self.mode(&question.app) {
            ConsentMode::Allow => return (Ok(()), Decision::ModeAllow),
            ConsentMode::Deny => {
                return (Err(Error::Refused.into()), Decision::ModeDeny);
            }
            ConsentMode::Prompt => {}
        }
        // The user at the command line asked for this call (and for what it starts).
        if question.caller.is_user() {
            if let Some(start) = &question.start {
                self.allow_start(&question.app, &start.pin, false);
            }
            return (Ok(()), Decision::User);
        }
        if self.read_only_ok(question) {
            tracing::info!(app = %question.app, tool = %question.tool, "a read-only tool runs without asking (consent.readOnly)");
            return (Ok(()), Decision::ReadOnly);
        }
        let key = (
            question.caller.key(),
            question.app.clone(),
            question.once_tool(),
        );
        if self.allowed_now(question, &key) {
            return (Ok(()), Decision::Granted);
        }
        // Concurrent calls that need the same answer ask once: the others wait for it,
        // then look again (an "always" answer lets them all run).
        let turn = self
            .asking
            .lock()
            .expect("asking lock")
            .entry(key.clone())
            .or_default()
            .clone();
        let result = {
            let _turn = turn.lock().await;
            if self.allowed_now(question, &key) {
                (Ok(()), Decision::Granted)
            } else {
                self.tell(&question.app, Decision::Asked);
                // The question says what changed in the tool since it was allowed.
                let mut explained = question.clone();
                self.explain(&mut explained);
                self.ask(&explained, &key, prompter, wait).await
            }
        };
        let mut asking = self.asking.lock().expect("asking lock");
        if Arc::strong_count(&turn) <= 2 {
            asking.remove(&key);
        }
        result
    }

    /// Asks through the front door's channel, then the native one; with neither (or
    /// neither able to ask), waits for an answer from the web UI or the CLI.
    async fn ask(
        &self,
        question: &Question,
        key: &Key,
        prompter: Option<&dyn Prompter>,
        wait: Duration,
    ) -> (Result<(), GatewayError>, Decision) {
        for (i, channel) in [prompter, self.native.as_deref()].into_iter().enumerate() {
            let Some(channel) = channel else { continue };
            let from_client = i == 0;
            match channel.ask(question).await {
                Reply::Chosen(choice) => {
                    return (
                        self.follow(question, key, Some(choice), ""),
                        Decision::of(Some(choice)),
                    );
                }
                Reply::Declined => {
                    let mut refused = self.follow(question, key, None, "");
                    // Some clients decline a form they cannot show (Codex's and Copilot
                    // CLI's non-interactive runs): still a no, but it says how to allow it.
                    if from_client && question.remember {
                        let (command, powershell) = self.grant_command(question, &key.0);
                        refused = refused.map_err(|e| {
                            e.with_hint(format!(
                                "If the user was shown no question (some clients decline forms they cannot show), they can allow it by running `{command}`"
                            ))
                            .with("command", command)
                            .with("powershellCommand", powershell)
                        });
                    }
                    return (refused, Decision::Declined);
                }
                Reply::Unavailable(why) => {
                    tracing::info!("the consent question could not be asked there ({why})");
                }
                Reply::Unshown(why) => {
                    tracing::info!("the consent question came back unanswered ({why})");
                    break;
                }
            }
        }
        // No channel: the answer may come from the web UI, or a grant from the CLI.
        let (sender, mut answer) = tokio::sync::oneshot::channel();
        let mut info = Gate::pending_info(question, 0);
        info.id = match &self.shared {
            // Written first, so that every replica's UI can answer it; a store that is
            // down fails the call now rather than leave it waiting for nobody.
            Some(store) => match shared::add_pending(store, &info).await {
                Ok(id) => id,
                Err(e) => return (Err(e.into()), Decision::Unanswered),
            },
            None => self.next_id.fetch_add(1, Ordering::Relaxed),
        };
        let id = info.id;
        self.enqueue(info, sender);
        // A call that stops waiting (refused, or dropped by its client) stays listed as
        // refused in the shared store, as it does here.
        let mut row = SharedRow {
            shared: self.shared.as_ref(),
            id,
            refused: true,
        };
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            self.reload();
            if self.allowed_now(question, key) {
                self.settle(id);
                row.refused = false;
                return (Ok(()), Decision::Granted);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                break;
            }
            let tick = (deadline - now).min(Duration::from_millis(250));
            tokio::select! {
                choice = &mut answer => {
                    // Taken from the shared store, which holds it no more.
                    row.shared = None;
                    let choice = choice.ok();
                    return (
                        self.follow(question, key, choice, " in the web UI"),
                        Decision::of(choice),
                    );
                }
                () = tokio::time::sleep(tick) => {}
            }
        }
        // Kept (not waiting any more) so that the user can approve the retry.
        drop(answer);
        (
            Err(self.consent_required(question, &key.0, id)),
            Decision::Unanswered,
        )
    }

    /// CONSENT_REQUIRED for `question`, refused as pending entry `id`: where to approve
    /// it, and the command that grants it, quoted for a POSIX shell and for PowerShell.
    fn consent_required(&self, question: &Question, caller: &str, id: u64) -> GatewayError {
        Error::Required(Box::new(self.required(question, caller, id))).into()
    }

    /// The command that allows `question` for `caller`, quoted for a POSIX shell and for
    /// PowerShell.
    fn grant_command(&self, question: &Question, caller: &str) -> (String, String) {
        // A value starting with `-` is given as `--tool=…`, so that it stays the value.
        let option = |name: &str, value: &str| -> Vec<String> {
            if value.starts_with('-') {
                vec![format!("{name}={value}")]
            } else {
                vec![name.to_owned(), value.to_owned()]
            }
        };
        let mut words = vec!["aai-gateway".to_owned()];
        if let Some(home) = self.home.get() {
            words.extend(option("--home", &home.to_string_lossy()));
        }
        words.extend(["consent", "grant", question.app.as_str()].map(str::to_owned));
        if !start_only(question) {
            words.extend(option("--tool", &question.tool));
            words.extend(option("--caller", caller));
        }
        if question.start.is_some() && !self.start_ok(question) {
            words.push("--start".to_owned());
        }
        let join = |quote: fn(&str) -> String| {
            words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
        };
        let command = join(crate::text::sh_quote);
        let powershell = join(crate::text::ps_quote).replacen("'aai-gateway'", "aai-gateway", 1);
        (command, powershell)
    }

    /// How the user can allow `question`, for a caller that cannot ask them.
    fn required(&self, question: &Question, caller: &str, id: u64) -> Required {
        let start_only = start_only(question);
        let (command, powershell) = self.grant_command(question, caller);
        let ui = self.ui().map(|base| format!("{base}/consent?pending={id}"));
        // A change asked about each time has no grant to run: only the web UI approves it.
        if !question.remember {
            let (where_, hint) = match &ui {
                Some(link) => (
                    format!("approve it at {link}"),
                    format!("Ask the user to approve it at {link} (while this gateway runs)"),
                ),
                None => (
                    "use a client that can ask them, or the web UI".to_owned(),
                    "Ask the user to make this change from a client that can ask them, or from the web UI".to_owned(),
                ),
            };
            return Required {
                detail: format!(
                    "the user has not approved this change ({}) for `{caller}`, and this client cannot ask them; {where_}, then try again",
                    question.description
                ),
                hint,
                caller: caller.to_owned(),
                command: None,
                start: None,
                ui,
            };
        }
        let where_ = match &ui {
            Some(link) => format!("approve it at {link} or run `{command}`"),
            None => format!("run `{command}`"),
        };
        let hint = match &ui {
            Some(link) => format!(
                "Ask the user to approve it at {link} (while this gateway runs) or to run: {command}"
            ),
            None => format!("Ask the user to run: {command}"),
        };
        let detail = match &question.start {
            Some(start) if start_only => format!(
                "the user has not allowed the gateway to {} for `{}`, and this client cannot ask them; ask the user to {where_}, then try again",
                start.describe(),
                question.app
            ),
            _ => format!(
                "the user has not allowed `{caller}` to run `{}` of `{}`{}{}, and this client cannot ask them; ask the user to {where_} (or allow every tool of the app), then try again",
                question.tool,
                question.app,
                question
                    .changed
                    .as_ref()
                    .map(|c| format!(" as it is now (it changed since it was allowed: {c})"))
                    .unwrap_or_default(),
                question
                    .start
                    .as_ref()
                    .map(|s| format!(" (which will first {})", s.describe()))
                    .unwrap_or_default()
            ),
        };
        Required {
            detail,
            hint,
            caller: caller.to_owned(),
            command: Some((command, powershell)),
            start: question.start.as_ref().map(|s| s.describe()),
            ui,
        }
    }

    /// What an answer means for the call that asked: an allowing answer also allows what
    /// the call starts (for this run, or always, tied to its command).
    fn follow(
        &self,
        question: &Question,
        key: &Key,
        choice: Option<Choice>,
        channel: &str,
    ) -> Result<(), GatewayError> {
        let cert = question.cert();
        if let (Some(start), Some(choice)) = (&question.start, choice)
            && choice != Choice::Deny
        {
            self.allow_start(&question.app, &start.pin, choice != Choice::Once);
        }
        match choice {
            Some(Choice::Once) => Ok(()),
            Some(Choice::Tool | Choice::App) if !question.remember => Ok(()),
            Some(Choice::Tool) => {
                if !start_only(question) {
                    self.keep(&key.0, &key.1, &key.2, cert, question.definition.as_ref());
                }
                Ok(())
            }
            Some(Choice::App) => {
                self.remember(&key.0, &key.1, "*", cert);
                Ok(())
            }
            Some(Choice::Deny) => Err(Error::Denied(channel.to_owned()).into()),
            None => Err(Error::Dismissed.into()),
        }
    }
}

/// A pending row of the shared store, updated when its call stops waiting: removed
/// (`refused: false`) or kept as refused.
struct SharedRow<'a> {
    shared: Option<&'a Arc<crate::store::Shared>>,
    id: u64,
    refused: bool,
}

impl Drop for SharedRow<'_> {
    fn drop(&mut self) {
        if let Some(store) = self.shared {
            shared::settle(store, self.id, self.refused);
        }
    }
}

/// Whether `question` is only about starting its app (a guide needs it running).
fn start_only(question: &Question) -> bool {
    question.tool == START && question.start.is_some()
}

/// Drops refused entries older than an hour and the oldest beyond the cap.
fn prune(slots: &mut Vec<Slot>) {
    let now = now_ms();
    slots.retain(|s| s.waiting() || s.info.at_ms + REFUSED_KEPT_MS > now);
    if slots.len() >= PENDING_MAX {
        let extra = slots.len() + 1 - PENDING_MAX;
        slots.drain(..extra);
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A prompter that always gives the same answer (tests, embedding).
#[derive(Debug, Clone)]
pub struct Fixed(pub Reply);

impl Prompter for Fixed {
    fn ask<'a>(
        &'a self,
        _question: &'a Question,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
        Box::pin(std::future::ready(self.0.clone()))
    }
}

/// The prompter of a call, shared.
pub type SharedPrompter = Arc<dyn Prompter>;

#[cfg(test)]
mod tests;
