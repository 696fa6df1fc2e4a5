//! Each call's check: whether a grant or the mode covers it, else asking through the
//! call's channel (the front door's, a native dialog, or the pending list), and the
//! CONSENT_REQUIRED answer that names how to allow it.

use super::*;

impl Gate {
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

    /// Whether what `question` starts (if anything) is allowed.
    pub(super) fn start_ok(&self, question: &Question) -> bool {
        question
            .start
            .as_ref()
            .is_none_or(|s| self.start_allowed(&question.app, s))
    }

    /// Whether `question` may run without asking now; consumes an "allow once" waiting
    /// for it.
    pub(super) fn allowed_now(&self, question: &Question, key: &Key) -> bool {
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
    pub(super) async fn decide(
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
    pub(super) async fn ask(
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
    pub(super) fn consent_required(
        &self,
        question: &Question,
        caller: &str,
        id: u64,
    ) -> GatewayError {
        Error::Required(Box::new(self.required(question, caller, id))).into()
    }

    /// The command that allows `question` for `caller`, quoted for a POSIX shell and for
    /// PowerShell.
    pub(super) fn grant_command(&self, question: &Question, caller: &str) -> (String, String) {
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
    pub(super) fn required(&self, question: &Question, caller: &str, id: u64) -> Required {
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
    pub(super) fn follow(
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
pub(super) struct SharedRow<'a> {
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
pub(super) fn start_only(question: &Question) -> bool {
    question.tool == START && question.start.is_some()
}
