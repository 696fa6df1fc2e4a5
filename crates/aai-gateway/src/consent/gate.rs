//! The consent gate: grants (kept, shared, pinned to what they allow), and each call's
//! check, which asks through the call's channel when no grant covers it.

use super::*;

/// The consent gate.
#[derive(Debug)]
pub struct Gate {
    pub(super) mode: ConsentMode,
    pub(super) per_app: std::collections::BTreeMap<String, ConsentMode>,
    pub(super) wait: Duration,
    pub(super) state: Deferred,
    /// The grants have been read from `state` (on first use, not at start).
    pub(super) loaded: std::sync::Once,
    /// The gateway's own channel (a native dialog), used when the front door has none.
    pub(super) native: Option<SharedPrompter>,
    /// `(caller key, app, tool or "*")` → the certificate and tool definition the grant
    /// is tied to.
    pub(super) grants: RwLock<HashMap<Key, Pins>>,
    /// Calls without a channel, newest last.
    pub(super) pending: Mutex<Vec<Slot>>,
    pub(super) next_id: AtomicU64,
    /// "Allow once" answers for refused calls, consumed by their retry: key → expiry.
    pub(super) once: Mutex<Vec<(Key, u64)>>,
    /// The web UI's address, once it listens (for the link in CONSENT_REQUIRED).
    pub(super) ui: OnceLock<String>,
    /// The home, when it is not the default one: the grant command must name it.
    pub(super) home: OnceLock<std::path::PathBuf>,
    /// `consent.readOnly: "allow"`: read-only tools run without asking.
    pub(super) read_only: bool,
    /// Starts allowed for this run ("allow once"): `(app, pin)`.
    pub(super) started: Mutex<std::collections::HashSet<(String, String)>>,
    /// One question at a time per key: concurrent calls that need the same answer wait
    /// for the first one's question instead of asking again.
    pub(super) asking: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
    /// The shared store (config `store`): grants and pending calls in PostgreSQL
    /// (`shared.rs`); `state` is then unused.
    pub(super) shared: Option<Arc<crate::store::Shared>>,
    /// With the shared store: grants given here whose write has not committed yet (or
    /// failed: kept for this run); a reload keeps them. A committed grant leaves at once,
    /// so a revoke on another replica that a reload then shows is not undone here.
    pub(super) unsaved: Arc<Mutex<HashMap<Key, Pins>>>,
    /// Told of every decision (metrics).
    pub(super) watch: Watch,
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
            unsaved: Arc::default(),
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
    pub(super) fn replace_grants(&self, all: Vec<Grant>) {
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

    /// Tells `observer` of every decision from now on (the first observer set stays).
    pub fn observe(&self, observer: Observer) {
        let _ = self.watch.0.set(observer);
    }

    pub(super) fn tell(&self, app: &str, decision: Decision) {
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
    pub(super) fn read_only_ok(&self, question: &Question) -> bool {
        self.read_only && question.read_only && self.start_ok(question)
    }

    /// The grants in memory, read from `state.db` on first use.
    pub(super) fn grant_map(&self) -> &RwLock<HashMap<Key, Pins>> {
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

    pub(super) fn read_grants(&self) {
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

    pub(super) fn allow_start(&self, app: &str, pin: &str, always: bool) {
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
    pub(super) fn granted(&self, key: &Key, question: &Question) -> bool {
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
    pub(super) fn keep(
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
            let key = (caller.to_owned(), app.to_owned(), tool.to_owned());
            self.unsaved
                .lock()
                .expect("unsaved lock")
                .insert(key.clone(), pins.clone());
            let unsaved = self.unsaved.clone();
            let saved = move || {
                let mut unsaved = unsaved.lock().expect("unsaved lock");
                if unsaved.get(&key) == Some(&pins) {
                    unsaved.remove(&key);
                }
            };
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
                saved,
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
}
