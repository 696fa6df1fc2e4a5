//! Calls waiting for an answer from the web UI or the CLI, and refused calls kept for the
//! user to approve their retry: the pending list and how an answer reaches its call.

use super::*;

/// How long a refused call stays in the pending list for the user to approve its retry.
pub(crate) const REFUSED_KEPT_MS: u64 = 3600 * 1000;
/// How long an "allow once" given for a refused call waits for the retry.
pub(super) const ONCE_KEPT_MS: u64 = 10 * 60 * 1000;
/// At most this many pending entries are kept (the oldest go first).
pub(super) const PENDING_MAX: usize = 100;

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
    /// The script run or batch the call is part of (the first question of a run shows
    /// its script).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<String>,
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
pub(super) struct Slot {
    pub(super) info: Pending,
    pub(super) answer: Option<tokio::sync::oneshot::Sender<Choice>>,
}

impl Slot {
    pub(super) fn waiting(&self) -> bool {
        self.answer.as_ref().is_some_and(|s| !s.is_closed())
    }
}

/// An answer to a call that no longer waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no pending call {0}: it was answered or it expired")]
pub struct NotPending(pub u64);

impl Gate {
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
    pub(super) fn take_once(&self, key: &Key) -> bool {
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
    pub(super) fn enqueue(&self, info: Pending, answer: tokio::sync::oneshot::Sender<Choice>) {
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
    pub(super) fn pending_info(question: &Question, id: u64) -> Pending {
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
            within: question.within.as_ref().map(|(w, note)| w.describe(note)),
            at_ms: now_ms(),
            waiting: true,
            lasting: question.remember,
            once_tool: question.once_tool(),
        }
    }

    /// Forgets pending entry `id` (its call was allowed some other way).
    pub(super) fn settle(&self, id: u64) {
        self.pending
            .lock()
            .expect("pending lock")
            .retain(|s| s.info.id != id);
    }

    pub(super) fn once_waiting(&self, caller: &str, question: &Question) -> bool {
        let once_tool = question.once_tool();
        self.once
            .lock()
            .expect("once lock")
            .iter()
            .any(|((c, a, t), expires)| {
                c == caller && *a == question.app && *t == once_tool && *expires > now_ms()
            })
    }
}

/// Drops refused entries older than an hour and the oldest beyond the cap.
pub(super) fn prune(slots: &mut Vec<Slot>) {
    let now = now_ms();
    slots.retain(|s| s.waiting() || s.info.at_ms + REFUSED_KEPT_MS > now);
    if slots.len() >= PENDING_MAX {
        let extra = slots.len() + 1 - PENDING_MAX;
        slots.drain(..extra);
    }
}
