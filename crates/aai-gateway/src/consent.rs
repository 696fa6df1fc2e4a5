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
//!   it), then a native dialog when a display exists (`dialog`), else CONSENT_REQUIRED — whose `data` says how to grant it (`aai-gateway consent
//!   grant …`) — after waiting `consent.waitSeconds` (default 0) for a grant from the
//!   CLI.
//! * Guides, search and lists never ask; only tool calls do, whatever name reached them.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::ConsentMode;
use crate::error::{Code, GatewayError};
use crate::state::{Grant, State};

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    /// The client's `clientInfo.name`.
    pub name: String,
    /// The transport: `stdio`, `http`, `cli`.
    pub transport: &'static str,
}

impl Caller {
    /// The user at the command line: they asked for the call themselves.
    pub fn cli() -> Caller {
        Caller {
            name: "aai-gateway".into(),
            transport: "cli",
        }
    }

    /// `name@transport`, the key of grants.
    pub fn key(&self) -> String {
        format!("{}@{}", self.name, self.transport)
    }
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
}

impl Question {
    /// One sentence for any channel.
    pub fn text(&self) -> String {
        format!(
            "{} wants to run `{}` of {} ({}): {}",
            self.caller.name, self.tool, self.app_name, self.app, self.description
        )
    }
}

/// A way to ask the user, supplied by the front door (MCP elicitation…). `None` means
/// no answer: declined, cancelled, or the channel failed.
pub trait Prompter: Send + Sync + std::fmt::Debug {
    /// Asks `question`.
    fn ask<'a>(
        &'a self,
        question: &'a Question,
    ) -> Pin<Box<dyn Future<Output = Option<Choice>> + Send + 'a>>;
}

/// The consent gate.
#[derive(Debug)]
pub struct Gate {
    mode: ConsentMode,
    per_app: std::collections::BTreeMap<String, ConsentMode>,
    wait: Duration,
    state: Option<State>,
    /// The gateway's own channel (a native dialog), used when the front door has none.
    native: Option<SharedPrompter>,
    /// `(caller key, app, tool or "*")`.
    grants: RwLock<HashSet<(String, String, String)>>,
}

impl Gate {
    /// A gate with `mode` (per-app overrides in `per_app`), grants from `state`.
    pub fn new(
        mode: ConsentMode,
        per_app: std::collections::BTreeMap<String, ConsentMode>,
        wait: Duration,
        state: Option<State>,
    ) -> Gate {
        let gate = Gate {
            mode,
            per_app,
            wait,
            state,
            native: None,
            grants: RwLock::new(HashSet::new()),
        };
        gate.reload();
        gate
    }

    /// Adds the gateway's own channel (a native dialog) for callers whose front door
    /// cannot ask.
    pub fn with_native(mut self, native: Option<SharedPrompter>) -> Gate {
        self.native = native;
        self
    }

    fn reload(&self) {
        let Some(state) = &self.state else { return };
        match state.grants() {
            Ok(all) => {
                *self.grants.write().expect("grants lock") =
                    all.into_iter().map(|g| (g.caller, g.app, g.tool)).collect();
            }
            Err(e) => tracing::warn!("{e}"),
        }
    }

    fn granted(&self, caller: &str, app: &str, tool: &str) -> bool {
        let grants = self.grants.read().expect("grants lock");
        grants.contains(&(caller.to_owned(), app.to_owned(), tool.to_owned()))
            || grants.contains(&(caller.to_owned(), app.to_owned(), "*".to_owned()))
    }

    fn remember(&self, caller: &str, app: &str, tool: &str) {
        self.grants.write().expect("grants lock").insert((
            caller.to_owned(),
            app.to_owned(),
            tool.to_owned(),
        ));
        if let Some(state) = &self.state {
            let grant = Grant {
                caller: caller.to_owned(),
                app: app.to_owned(),
                tool: tool.to_owned(),
                granted_at: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
            };
            if let Err(e) = state.grant(&grant) {
                tracing::warn!("the grant is kept for this run only: {e}");
            }
        }
    }

    /// Decides whether `question` may run: Ok to run, else the refusal.
    pub async fn check(
        &self,
        question: &Question,
        prompter: Option<&dyn Prompter>,
    ) -> Result<(), GatewayError> {
        let mode = self
            .per_app
            .get(&question.app)
            .copied()
            .unwrap_or(self.mode);
        let caller = question.caller.key();
        match mode {
            ConsentMode::Allow => return Ok(()),
            ConsentMode::Deny => {
                return Err(GatewayError::new(
                    Code::PermissionDenied,
                    "calls to this app are refused by configuration (`consent.mode` is `deny`)",
                ));
            }
            ConsentMode::Prompt => {}
        }
        // The user at the command line asked for this call.
        if question.caller.transport == "cli"
            || self.granted(&caller, &question.app, &question.tool)
        {
            return Ok(());
        }
        if let Some(prompter) = prompter.or(self.native.as_deref()) {
            return match prompter.ask(question).await {
                Some(Choice::Once) => Ok(()),
                Some(Choice::Tool) => {
                    self.remember(&caller, &question.app, &question.tool);
                    Ok(())
                }
                Some(Choice::App) => {
                    self.remember(&caller, &question.app, "*");
                    Ok(())
                }
                Some(Choice::Deny) => Err(GatewayError::new(
                    Code::PermissionDenied,
                    "the user denied this call",
                )),
                None => Err(GatewayError::new(
                    Code::PermissionDenied,
                    "the user declined or dismissed the question; nothing was remembered",
                )),
            };
        }
        // No channel: a grant may come from the CLI meanwhile.
        let deadline = tokio::time::Instant::now() + self.wait;
        loop {
            self.reload();
            if self.granted(&caller, &question.app, &question.tool) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let command = format!(
            "aai-gateway consent grant {} --tool {} --caller '{}'",
            question.app, question.tool, caller
        );
        Err(GatewayError::new(
            Code::ConsentRequired,
            format!(
                "the user has not allowed `{caller}` to run `{}` of `{}`, and this client cannot ask them; ask the user to run `{command}` (or allow every tool of the app without --tool), then try again",
                question.tool, question.app
            ),
        )
        .with("caller", caller)
        .with("command", command))
    }
}

/// A prompter that always gives the same answer (tests, embedding).
#[derive(Debug, Clone, Copy)]
pub struct Fixed(pub Option<Choice>);

impl Prompter for Fixed {
    fn ask<'a>(
        &'a self,
        _question: &'a Question,
    ) -> Pin<Box<dyn Future<Output = Option<Choice>> + Send + 'a>> {
        Box::pin(std::future::ready(self.0))
    }
}

/// The prompter of a call, shared.
pub type SharedPrompter = Arc<dyn Prompter>;

#[cfg(test)]
mod tests {
    use super::*;

    fn question(caller: &str) -> Question {
        Question {
            caller: Caller {
                name: caller.into(),
                transport: "stdio",
            },
            app: "com.a".into(),
            app_name: "A".into(),
            tool: "send".into(),
            description: "Send".into(),
        }
    }

    #[tokio::test]
    async fn choices_are_remembered_per_caller_and_denials_never() {
        let dir = tempfile::tempdir().unwrap();
        let state = || State::open(&State::file_in(dir.path())).unwrap();
        let gate = Gate::new(
            ConsentMode::Prompt,
            Default::default(),
            Duration::ZERO,
            Some(state()),
        );
        let q = question("alpha");
        let e = gate.check(&q, None).await.unwrap_err();
        assert_eq!(e.code, Code::ConsentRequired);
        assert!(
            e.data()["command"]
                .as_str()
                .unwrap()
                .contains("--caller 'alpha@stdio'")
        );
        assert!(
            gate.check(&q, Some(&Fixed(Some(Choice::Deny))))
                .await
                .is_err()
        );
        assert!(gate.check(&q, Some(&Fixed(None))).await.is_err());
        gate.check(&q, Some(&Fixed(Some(Choice::Once))))
            .await
            .unwrap();
        assert!(
            gate.check(&q, None).await.is_err(),
            "once is not remembered"
        );
        gate.check(&q, Some(&Fixed(Some(Choice::Tool))))
            .await
            .unwrap();
        gate.check(&q, None).await.unwrap();
        // Another caller has its own decisions.
        assert!(gate.check(&question("beta"), None).await.is_err());
        // Remembered across runs, and a grant made elsewhere is seen.
        let again = Gate::new(
            ConsentMode::Prompt,
            Default::default(),
            Duration::ZERO,
            Some(state()),
        );
        again.check(&q, None).await.unwrap();
        state()
            .grant(&Grant {
                caller: "beta@stdio".into(),
                app: "com.a".into(),
                tool: "*".into(),
                granted_at: 1,
            })
            .unwrap();
        again.check(&question("beta"), None).await.unwrap();
        // Modes.
        let allow = Gate::new(ConsentMode::Allow, Default::default(), Duration::ZERO, None);
        allow.check(&question("x"), None).await.unwrap();
        let per_app = [("com.a".to_owned(), ConsentMode::Deny)]
            .into_iter()
            .collect();
        let deny = Gate::new(ConsentMode::Allow, per_app, Duration::ZERO, None);
        assert_eq!(
            deny.check(&question("x"), None).await.unwrap_err().code,
            Code::PermissionDenied
        );
    }
}
