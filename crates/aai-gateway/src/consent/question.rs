//! What the user is asked ([`Question`], its text and [`Choice`]s), what asking gave
//! ([`Reply`]), and the channels that ask ([`Prompter`]).

use super::*;

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
    /// The script run or batch the call is part of, and what the question says of it.
    pub within: Option<(Arc<super::Within>, super::Note)>,
}

impl Question {
    /// A question about one call of `tool` of `app` (shown as `app_name`) by `caller`,
    /// described as `description`: nothing to start, no site, no arguments shown, no
    /// definition, an "always" answer remembered. A call sets what differs
    /// (`Question { start: Some(..), ..Question::for_call(..) }`).
    pub fn for_call(
        caller: &Caller,
        app: &str,
        app_name: &str,
        tool: &str,
        description: &str,
    ) -> Question {
        Question {
            caller: caller.clone(),
            app: app.to_owned(),
            app_name: app_name.to_owned(),
            tool: tool.to_owned(),
            description: description.to_owned(),
            site: None,
            start: None,
            args: None,
            read_only: false,
            remember: true,
            definition: None,
            changed: None,
            within: None,
        }
    }

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

    pub(super) fn once_tool(&self) -> String {
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
pub(crate) const START: &str = "@start";

/// The start of the tool name of a question about listening to an app's event
/// (`@event/track_changed`): no tool can have it.
pub(crate) const EVENT: &str = "@event/";

/// The caller of start grants: starting an app is allowed for every client alike (one
/// server process serves them all).
pub(crate) const ANY_CALLER: &str = "*";

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
        } else if let Some(event) = self.tool.strip_prefix(EVENT) {
            format!(
                "{} wants to watch the event `{event}` of {} ({}): {}",
                self.caller.name, self.app_name, self.app, self.description
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
        if let Some((within, note)) = &self.within {
            text.push_str(" — ");
            text.push_str(&within.describe(note));
        }
        text
    }

    /// The certificate fingerprint an answer is tied to.
    pub(super) fn cert(&self) -> Option<&str> {
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
pub(crate) type SharedPrompter = Arc<dyn Prompter>;
