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

mod ask;
pub(crate) mod dialog;
pub(crate) mod fingerprint;
mod gate;
mod pending;
mod question;
pub(crate) mod shared;
pub(crate) mod site;
pub mod state;
mod within;

use crate::identity::Caller;
pub use gate::Gate;
pub(crate) use pending::REFUSED_KEPT_MS;
use pending::Slot;
pub(crate) use pending::{NotPending, Pending};
pub(crate) use question::{ANY_CALLER, EVENT, Prompter, START, SharedPrompter};
pub use question::{Choice, Fixed, Question, Reply};
pub(crate) use within::Note;
pub use within::Within;

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
pub(crate) use crate::exec::start::Start;

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
pub(crate) type Observer = Arc<dyn Fn(&str, Decision) + Send + Sync>;

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

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
