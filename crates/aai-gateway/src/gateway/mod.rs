//! The running gateway: its settings, the served snapshot and its lifecycle.
//!
//! [`Gateway`] owns the first scan, every rescan, the snapshot agents see, one change
//! broadcast that every front door (each MCP session, later the web UI) subscribes to, and
//! one shutdown token. [`Gateway::start`] starts what runs in the background — the first
//! scan, the watcher, the registry catalog refresh, the signal handler — so a transport
//! only has to serve until [`Gateway::stopping`] resolves. [`Lifecycle`] is the one
//! guard every command that runs the gateway goes through: it starts that work and owns
//! the one teardown. One call's path lives in `pipeline`.

mod handle;
mod remote;
mod scanner;
pub(crate) mod watch;

pub use handle::Handle;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use crate::auth::Authenticator;
use crate::catalog::{self, SearchDir};
use crate::config::Config;
use crate::error::GatewayError;
use crate::exec::Executors;
use crate::host::Host;
use crate::registry::{Registry, Snapshot};

/// How often the registry catalog is fetched again.
const REGISTRY_INTERVAL: Duration = Duration::from_secs(6 * 3600);
/// How long after a downstream server's `list_changed` its tools are listed again.
const CHANGE_DEBOUNCE: Duration = Duration::from_millis(250);
/// How long `tools/list` in `flat` exposure waits for downstream MCP servers.
const FLAT_LISTING_WAIT: Duration = Duration::from_secs(15);
/// How often people's idle downstream connections are looked for.
const IDLE_SWEEP: Duration = Duration::from_secs(60);
/// How long the process waits, once its session ended, for atomic runs and batches still
/// undoing their calls (docs/workflows.md, "Undo").
const UNDO_GRACE: Duration = Duration::from_secs(30);

/// The running gateway: settings, the served apps, the executors.
#[derive(Debug)]
pub struct Gateway {
    /// Settings.
    pub config: Config,
    /// `$AAI_HOME`.
    pub home: PathBuf,
    /// Locale for names.
    pub locale: Option<String>,
    pub(crate) host: Host,
    search_dirs: Vec<SearchDir>,
    registry: Registry,
    loaded: AtomicBool,
    loaded_notify: Notify,
    changes: broadcast::Sender<u64>,
    generation: AtomicU64,
    reported: std::sync::Mutex<Vec<String>>,
    rescans: AtomicU64,
    /// Held for a whole scan: one scan at a time, so an older scan that finishes later
    /// cannot replace a newer one's apps (a file written during the first scan is seen by
    /// the rescan its event starts, which then goes second). It holds what the last scan
    /// read, so a scan re-reads only the files that changed.
    scanning: std::sync::Mutex<catalog::reads::Reads>,
    /// The thread scans run on.
    scanner: scanner::Scanner,
    shutdown: CancellationToken,
    /// The call path (every front door's).
    pipeline: crate::pipeline::Pipeline,
    web: catalog::web::Fetcher,
    /// `state.db`, opened on first use.
    state: crate::consent::state::Deferred,
    /// The shared store (config `store`).
    shared: Option<Arc<crate::store::Shared>>,
    /// The ids local and built-in descriptors have had (this run's scans and, through
    /// `state.db`, earlier runs'): a web app may never take one.
    local_ids: std::sync::Mutex<Option<std::collections::HashSet<String>>>,
}

impl Gateway {
    /// A gateway that has not scanned yet, serving the descriptors of `home`, the
    /// config's `scanPaths` and this OS's system paths.
    pub fn new(config: Config, home: PathBuf, locale: Option<String>, host: Host) -> Arc<Gateway> {
        let search_dirs = catalog::paths::search_dirs(&home, &config.scan_paths, host.os());
        let store = crate::auth::store::Store::new(config.credentials, &home);
        Gateway::build(config, home, locale, host, search_dirs, store, None)
    }

    /// The gateway `config` describes, on the shared PostgreSQL store when it names one
    /// (`store`): refused without the credential key. Nothing is connected yet:
    /// [`Gateway::open_store`] does that before serving.
    pub fn open(
        config: Config,
        home: PathBuf,
        locale: Option<String>,
        host: Host,
    ) -> Result<Arc<Gateway>, crate::store::Error> {
        let Some(settings) = &config.store else {
            return Ok(Gateway::new(config, home, locale, host));
        };
        let shared = crate::store::Shared::new(settings, &|k| std::env::var(k).ok())?;
        let search_dirs = catalog::paths::search_dirs(&home, &config.scan_paths, host.os());
        let store = crate::auth::store::Store::Postgres(shared.clone());
        Ok(Gateway::build(
            config,
            home,
            locale,
            host,
            search_dirs,
            store,
            Some(shared),
        ))
    }

    /// With the shared store: migrates it, reads its grants and follows the other
    /// replicas until the gateway stops. An error refuses the start (the database is
    /// unreachable, newer than this gateway, …). Nothing to do without one.
    pub async fn open_store(&self) -> Result<(), crate::store::Error> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let version = shared.migrate().await?;
        tracing::info!(
            "shared store: PostgreSQL {} (schema version {version}), replica {}",
            shared.shown(),
            shared.replica()
        );
        self.pipeline
            .consent()
            .open_shared(self.shutdown.clone())
            .await
    }

    /// The shared store, when the config names one.
    pub fn shared_store(&self) -> Option<&Arc<crate::store::Shared>> {
        self.shared.as_ref()
    }

    /// A gateway over exactly `search_dirs` and `store` (for embedding and tests).
    pub fn with_parts(
        config: Config,
        home: PathBuf,
        locale: Option<String>,
        host: Host,
        search_dirs: Vec<SearchDir>,
        store: crate::auth::store::Store,
    ) -> Arc<Gateway> {
        Gateway::build(config, home, locale, host, search_dirs, store, None)
    }

    fn build(
        config: Config,
        home: PathBuf,
        locale: Option<String>,
        host: Host,
        search_dirs: Vec<SearchDir>,
        store: crate::auth::store::Store,
        shared: Option<Arc<crate::store::Shared>>,
    ) -> Arc<Gateway> {
        let client_ids = config
            .apps
            .iter()
            .filter_map(|(id, a)| Some((id.clone(), a.client_id.clone()?)))
            .collect();
        let auth = Arc::new(Authenticator::new(store, locale.clone(), client_ids));
        // Opened on first use: the handshake does not wait for the disk.
        let state =
            crate::consent::state::Deferred::at(crate::consent::state::State::file_in(&home));
        let per_app = config
            .apps
            .iter()
            .filter_map(|(id, a)| Some((id.clone(), a.consent?)))
            .collect();
        let native = crate::consent::dialog::Dialog::available()
            .map(|d| Arc::new(d) as crate::consent::SharedPrompter);
        // With the shared store, grants live there, not in `state.db`.
        let grants_state = if shared.is_some() {
            crate::consent::state::Deferred::from(None)
        } else {
            state.clone()
        };
        let consent = Arc::new(
            crate::consent::Gate::new(config.consent, per_app, config.consent_wait, grants_state)
                .with_shared(shared.clone())
                .with_native(native)
                .with_read_only(config.consent_read_only),
        );
        let env = |k: &str| std::env::var(k).ok();
        let default_home = crate::catalog::paths::default_home(crate::host::Os::current(), &env);
        if default_home.as_deref() != Some(home.as_path()) {
            let absolute = std::path::absolute(&home).unwrap_or_else(|_| home.clone());
            consent.set_home(absolute);
        }
        let retention = crate::history::Retention {
            days: config.history_days,
            rows: config.history_rows,
        };
        let history = match &shared {
            Some(shared) => crate::history::Postgres::start(shared.clone(), retention)
                .map(|h| Arc::new(h) as Arc<dyn crate::history::Sink>),
            None => crate::history::Sqlite::start(
                crate::consent::state::State::file_in(&home),
                retention,
            )
            .map(|h| Arc::new(h) as Arc<dyn crate::history::Sink>),
        };
        let history = match history {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::warn!("call history is off: {e}");
                None
            }
        };
        let executors = Arc::new(Executors::default());
        executors.mcp().keep_lists_in(&home);
        let sites = Arc::new(crate::consent::site::Sites::default());
        let settings = crate::pipeline::Settings {
            default_timeout: config.default_timeout,
            retries: config.retries,
            secrets_from_environment: config.secrets_from_environment,
            cwd: config
                .apps
                .iter()
                .filter_map(|(id, a)| Some((id.clone(), a.cwd.clone()?)))
                .collect(),
            os: host.os(),
            batch_max_calls: config.batch_max_calls,
            batch_concurrency: config.batch_concurrency,
            undo_timeout: config.undo_timeout,
            scope_access: config
                .web_auth
                .as_ref()
                .map(|a| a.scope_access.clone())
                .unwrap_or_default(),
            shared_sign_ins: config
                .apps
                .iter()
                .filter(|(_, a)| a.shared_sign_in)
                .map(|(id, _)| id.clone())
                .collect(),
        };
        // Traces (config `telemetry.otlp`): an exporter thread only when configured.
        let telemetry = config.telemetry.clone().and_then(|settings| {
            crate::telemetry::Telemetry::start(settings)
                .inspect_err(|e| tracing::warn!("traces are off: {e}"))
                .ok()
        });
        let manage = Arc::new(crate::manage::Manager::new(
            home.clone(),
            crate::catalog::builtin::host_platform(),
        ));
        Arc::new_cyclic(|me| Gateway {
            pipeline: crate::pipeline::Pipeline::new(
                Arc::new(AppsOf(me.clone())),
                crate::pipeline::Parts {
                    executors,
                    consent,
                    auth,
                    history,
                    sites,
                    manage: Some(manage),
                    metrics: Some(Arc::new(crate::metrics::Metrics::new())),
                    limits: (!config.rate_limits.is_empty()).then(|| {
                        Arc::new(crate::ratelimit::Limiter::new(
                            config.rate_limits.clone(),
                            shared.clone(),
                        ))
                    }),
                    settings,
                },
            )
            .with_telemetry(telemetry),
            state,
            shared,
            local_ids: std::sync::Mutex::new(None),
            web: catalog::web::Fetcher::new(&home),
            config,
            home,
            locale,
            host,
            search_dirs,
            registry: Registry::default(),
            loaded: AtomicBool::new(false),
            loaded_notify: Notify::new(),
            changes: broadcast::channel(16).0,
            generation: AtomicU64::new(0),
            reported: std::sync::Mutex::new(Vec::new()),
            rescans: AtomicU64::new(0),
            scanning: std::sync::Mutex::default(),
            scanner: scanner::Scanner::default(),
            shutdown: CancellationToken::new(),
        })
    }

    /// The directories scanned, in precedence order.
    pub fn search_dirs(&self) -> &[SearchDir] {
        &self.search_dirs
    }

    /// Scans now (blocking) and installs the result; returns whether what agents see
    /// changed (every subscriber hears of it). The first call releases what waits.
    pub fn rescan(self: &Arc<Self>) -> bool {
        self.rescan_for(Why::Other)
    }

    /// [`Gateway::rescan`], for `why`: a file event that finds no descriptor changed
    /// (the gateway's own write, seen again by the watcher) rebuilds nothing. Every scan
    /// runs on the one scanning thread (`scanner.rs`).
    pub(crate) fn rescan_for(self: &Arc<Self>, why: Why) -> bool {
        let me = self.clone();
        self.scanner.run(move || me.scan_now(why))
    }

    fn scan_now(&self, why: Why) -> bool {
        let mut reads = self.scanning.lock().unwrap_or_else(|e| e.into_inner());
        self.rescans.fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        // Touched paths are looked at alone when they can be placed; else every file is.
        let (touched, descriptors_only) = match &why {
            Why::Files(paths) => {
                match catalog::scan_touched(&self.search_dirs, &mut reads, paths) {
                    Ok(None) if self.loaded.load(Ordering::SeqCst) => {
                        tracing::debug!("rescan: no descriptor's path changed, nothing to reload");
                        return false;
                    }
                    Ok(scanned) => (scanned, true),
                    Err(whole) => (None, whole == catalog::Whole::List),
                }
            }
            Why::Other | Why::Everything => (None, false),
        };
        let files_only = touched.is_some();
        let loaded = self.loaded.load(Ordering::SeqCst);
        // A whole scan of a served catalog goes in steps, each served as it is read.
        let (mut steps, mut stepped) = (0, false);
        let mut step = |catalog: catalog::Catalog| {
            steps += 1;
            stepped |= self
                .apply(catalog, false)
                .is_some_and(|(changed, _)| changed);
        };
        let (scanned, counts) = touched.unwrap_or_else(|| {
            let reread = why == Why::Everything;
            let step = loaded.then_some((catalog::STEP, &mut step as &mut dyn FnMut(_)));
            catalog::scan_in_steps(&self.search_dirs, &mut reads, reread, step)
        });
        if descriptors_only && counts.unchanged() && reads.applied() && loaded {
            tracing::info!("rescan: no descriptor changed, nothing to reload");
            return false;
        }
        let Some((changed, apps)) = self.apply(scanned, steps > 0) else {
            // What the steps served stays served.
            if stepped {
                self.announce();
            }
            return stepped;
        };
        let changed = changed || stepped;
        reads.installed();
        tracing::info!(
            apps,
            read = counts.read,
            reused = counts.reused,
            files = if files_only { "touched" } else { "all" },
            steps = steps + 1,
            ms = started.elapsed().as_millis() as u64,
            "catalog loaded"
        );
        let first = !self.loaded.swap(true, Ordering::SeqCst);
        if first {
            self.loaded_notify.notify_waiters();
        } else if changed {
            self.announce();
        }
        changed
    }

    /// Tells every subscriber that what agents see changed.
    fn announce(&self) {
        tracing::info!("apps changed; notifying clients");
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        // Nobody listening is fine: there may be no session yet.
        let _ = self.changes.send(generation);
    }

    /// Serves `scanned`: the ids it may claim, the remote tools, the user's overrides,
    /// the snapshot built from the one served (what it shares), the executors of apps gone
    /// or changed retired. Whether what agents see changed, and how many apps there are;
    /// `None` when the scan could not read everything, and the apps served stay (those of
    /// its steps, when `stepped`).
    fn apply(&self, scanned: catalog::Catalog, stepped: bool) -> Option<(bool, usize)> {
        let catalog =
            self.with_reserved_ids(|ids| catalog::complete(scanned, &self.search_dirs, ids));
        // A scan that could not read everything (too many open files, an I/O error) says
        // nothing about what it missed: the apps served stay as they were.
        if !catalog.unreadable.is_empty() && self.loaded.load(Ordering::SeqCst) {
            let stay = if stepped {
                "the apps it read before stay served, the others as they were,"
            } else {
                "the apps stay as they were"
            };
            tracing::warn!(
                "the rescan could not read {} ({}); {stay} until a rescan reads everything",
                crate::text::count(catalog.unreadable.len(), "place", "places"),
                catalog.unreadable[0]
            );
            return None;
        }
        let mut catalog = catalog;
        self.note_local_ids(&catalog);
        self.fold_in_remote_tools(&mut catalog);
        // The user's changes to tools (config `apps.<id>.tools`); errors reported below.
        catalog.diagnostics.extend(crate::overrides::apply_all(
            |id| self.config.apps.get(id).map(|a| &a.tools),
            catalog.apps.iter_mut().map(|l| &mut l.app),
        ));
        // Each broken file is reported once, not on every rescan.
        let problems: Vec<String> = catalog
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(ToString::to_string)
            .collect();
        let mut reported = self.reported.lock().expect("reported lock");
        for p in problems.iter().filter(|p| !reported.contains(*p)) {
            tracing::warn!(target: crate::logging::DESCRIPTORS, "{p}");
        }
        *reported = problems;
        drop(reported);
        let previous = self.registry.snapshot();
        let mut snapshot =
            Snapshot::build_after(catalog, &self.host, self.locale.clone(), Some(&previous));
        snapshot.visibility = Arc::new(self.visibility());
        let live = |app: &str| {
            use crate::exec::{Start, stdio::Started};
            let e = snapshot.exact_id(app)?;
            let started = |process: &aai_descriptor::Process| Started {
                process: process.clone(),
                base_dir: crate::pipeline::base_dir(e).to_owned(),
            };
            match &e.binding().executor {
                aai_descriptor::Executor::Stdio(p) => Some(Start::Stdio(started(p))),
                aai_descriptor::Executor::Acp(p) => Some(Start::Acp(started(p))),
                aai_descriptor::Executor::Mcp(server) => Some(Start::Mcp(server.clone())),
                _ => None,
            }
        };
        self.pipeline.executors().retire_stale(&live);
        warn_of_breaking_releases(&previous, &snapshot);
        let apps = snapshot.entries.len();
        let changed = self.registry.replace(snapshot);
        drop(previous);
        Some((changed, apps))
    }

    /// Who sees what: config `clients`, and what the gateway's own app changed
    /// (`$AAI_HOME/apps.json`; one it cannot read is left out, with a warning).
    fn visibility(&self) -> crate::visibility::Visibility {
        match crate::manage::overlay::read(&self.home) {
            Ok(overlay) => self
                .config
                .visibility
                .with(overlay.rules(), overlay.audience),
            Err(e) => {
                tracing::warn!("{e}");
                self.config.visibility.clone()
            }
        }
    }

    /// The ids local and built-in descriptors have had, read from `state.db` once.
    /// Lent to `with`, not copied: at 10,000 apps a copy per scan was 10,000 strings.
    fn with_reserved_ids<T>(
        &self,
        with: impl FnOnce(&std::collections::HashSet<String>) -> T,
    ) -> T {
        let mut ids = self.local_ids.lock().expect("local ids lock");
        with(ids.get_or_insert_with(|| {
            self.state
                .get()
                .and_then(|s| s.local_ids().inspect_err(|e| tracing::warn!("{e}")).ok())
                .unwrap_or_default()
        }))
    }

    /// Remembers the ids of this scan's local and built-in apps (new ones are written to
    /// `state.db`).
    fn note_local_ids(&self, catalog: &catalog::Catalog) {
        let mut ids = self.local_ids.lock().expect("local ids lock");
        let known = ids.get_or_insert_with(Default::default);
        let new: Vec<&str> = catalog
            .apps
            .iter()
            .filter(|l| l.kind != catalog::SourceKind::WebCache)
            .map(|l| l.app.id.as_str())
            .filter(|id| !known.contains(*id))
            .collect();
        if new.is_empty() {
            return;
        }
        if let Some(state) = self.state.get()
            && let Err(e) = state.note_local_ids(&new)
        {
            tracing::warn!("{e}");
        }
        known.extend(new.into_iter().map(str::to_owned));
    }

    /// Rescans on a blocking thread.
    pub async fn rescan_async(self: &Arc<Self>) -> bool {
        self.rescan_async_for(Why::Other).await
    }

    /// [`Gateway::rescan_for`] on a blocking thread.
    pub(crate) async fn rescan_async_for(self: &Arc<Self>, why: Why) -> bool {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.rescan_for(why))
            .await
            .unwrap_or(false)
    }

    /// The served apps, once the first scan has finished.
    pub async fn snapshot(&self) -> Arc<Snapshot> {
        loop {
            let notified = self.loaded_notify.notified();
            if self.loaded.load(Ordering::SeqCst) {
                return self.registry.snapshot();
            }
            notified.await;
        }
    }

    /// The served apps as they are now, without waiting (empty before the first scan).
    pub fn registry_snapshot(&self) -> Arc<Snapshot> {
        self.registry.snapshot()
    }

    /// Hears of every change in what agents see (after the first scan), as the change's
    /// generation number.
    pub fn subscribe(&self) -> broadcast::Receiver<u64> {
        self.changes.subscribe()
    }

    /// How many scans have run (the first included).
    pub fn rescans(&self) -> u64 {
        self.rescans.load(Ordering::Relaxed)
    }

    /// How many times what agents see has changed since the first scan.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Resolves when the gateway is asked to stop (a signal, or [`Gateway::stop`]).
    pub async fn stopping(&self) {
        self.shutdown.cancelled().await;
    }

    /// Asks everything to stop: transports end their sessions, and every process the
    /// executors started is stopped (adapters run in their own process groups, so a
    /// signal to the gateway does not reach them).
    pub fn stop(&self) {
        self.shutdown.cancel();
        self.pipeline.executors().shutdown();
    }

    /// Starts the background work of a server: the watcher and the first scan (off the
    /// handshake: `watch::start`), the registry catalog refresh (when enabled), and the
    /// signal handler. Dropping the [`Running`] stops it.
    pub fn start(self: &Arc<Self>) -> Running {
        let watcher = watch::start(self.clone());
        self.pipeline.authenticator().store().warn_if_plain();
        // What an older version left readable by others is narrowed, off the handshake.
        let home = self.home.clone();
        tokio::task::spawn_blocking(move || crate::files::tighten_home(&home));
        let mut tasks = Vec::new();
        if let Some(mut changes) = self.pipeline.executors().mcp().changes() {
            let me = self.clone();
            tasks.push(tokio::spawn(async move {
                while let Some((app, who)) = changes.recv().await {
                    // A server that announces changes in a loop is listed at most a few
                    // times a second.
                    tokio::time::sleep(CHANGE_DEBOUNCE).await;
                    tracing::info!(app, "the MCP server's tools changed; listing them again");
                    // On the connection that said so, with the credential it has. On
                    // failure the last list stays in use (and is asked again on the
                    // server's next change); with that connection gone, the next use
                    // lists them.
                    let timeout = me
                        .snapshot()
                        .await
                        .find(&app)
                        .and_then(|e| e.binding().timeout);
                    match me
                        .pipeline
                        .executors()
                        .mcp()
                        .relist(&app, &who, timeout)
                        .await
                    {
                        Ok(true) => {
                            me.rescan_async().await;
                        }
                        Ok(false) => {}
                        Err(e) => {
                            let e = GatewayError::from(e);
                            tracing::warn!(
                                app,
                                "listing the MCP server's tools failed: {}",
                                e.detail
                            );
                        }
                    }
                }
            }));
            // People's connections left unused are closed.
            let me = self.clone();
            tasks.push(tokio::spawn(async move {
                let mut every = tokio::time::interval(IDLE_SWEEP);
                loop {
                    every.tick().await;
                    me.pipeline.executors().mcp().close_idle();
                }
            }));
        }
        if self.config.enable_registry {
            let me = self.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    if let Err(e) = me.refresh_registry().await {
                        tracing::warn!(
                            "the registry could not be read; using the cache: {}",
                            e.detail
                        );
                    }
                    tokio::time::sleep(REGISTRY_INTERVAL).await;
                }
            }));
        }
        let me = self.clone();
        tasks.push(tokio::spawn(async move {
            let signal = terminated().await;
            tracing::info!("{signal}; shutting down");
            me.stop();
        }));
        Running {
            gateway: self.clone(),
            _watcher: watcher,
            tasks,
        }
    }

    /// Fetches and caches a web app's descriptor (`web_discover`); returns the app id and
    /// whether the cached copy was used because the site is unreachable. Rescans, so the
    /// app is callable right away.
    pub async fn discover_web(
        self: &Arc<Self>,
        input: &str,
    ) -> Result<(String, bool), GatewayError> {
        let url = catalog::web::well_known(input)?;
        let started = std::time::Instant::now();
        let fetched = self.web.fetch(&url, None).await?;
        let fetch_ms = started.elapsed().as_secs_f64() * 1e3;
        // A site may not take the id of a local or built-in app (and the credential
        // stored for it): its copy is not kept.
        if catalog::builtin::is_builtin_id(&fetched.app_id)
            || self.with_reserved_ids(|ids| ids.contains(&fetched.app_id))
        {
            if fetched.changed {
                self.web.forget(&fetched.app_id);
            }
            return Err(catalog::web::Error::Reserved {
                url: crate::net::redact(&url),
                id: fetched.app_id,
            }
            .into());
        }
        // A cache hit changes nothing: no rescan (it would cost a scan of every app). What
        // the fetch wrote is looked at alone.
        if fetched.changed {
            let folder = catalog::web::cache_dir(&self.home).join(&fetched.app_id);
            let written = vec![folder.join("aai.json"), folder.join("meta.json")];
            self.rescan_async_for(Why::Files(written)).await;
        } else if self.snapshot().await.find(&fetched.app_id).is_none() {
            self.rescan_async().await;
        }
        tracing::debug!(
            app = %fetched.app_id,
            fetch_ms = %format!("{fetch_ms:.1}"),
            then_ms = %format!("{:.1}", started.elapsed().as_secs_f64() * 1e3 - fetch_ms),
            "web_discover"
        );
        Ok((fetched.app_id, fetched.stale))
    }

    /// Fetches the registry catalog into the web cache (when enabled), then rescans.
    pub async fn refresh_registry(self: &Arc<Self>) -> Result<bool, GatewayError> {
        let (ok, problems) = self.web.registry(&self.config.registry_url).await?;
        for p in &problems {
            tracing::warn!("registry entry skipped: {p}");
        }
        tracing::info!(
            apps = ok.len(),
            skipped = problems.len(),
            "registry catalog fetched"
        );
        Ok(self.rescan_async().await)
    }

    /// The servers the MCP Registry has for `query` (at most `limit`), when config
    /// `enableMcpRegistry` allows sending it there; `Err` says why there are none.
    pub async fn search_mcp_registry(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<catalog::mcp_registry::Found>, catalog::mcp_registry::Error> {
        if !self.config.enable_mcp_registry {
            return Err(catalog::mcp_registry::Error::Off);
        }
        catalog::mcp_registry::search(&self.config.mcp_registry_url, query, limit).await
    }

    /// The call path every front door shares.
    pub fn pipeline(&self) -> &crate::pipeline::Pipeline {
        &self.pipeline
    }

    /// The credentials side (for `auth login`).
    pub fn authenticator(&self) -> &Authenticator {
        self.pipeline.authenticator()
    }

    /// What a front door holds besides the pipeline (see [`Handle`]).
    pub fn handle(self: &Arc<Self>) -> Handle {
        Handle {
            gateway: self.clone(),
        }
    }
}

/// The gateway as the pipeline's [`crate::pipeline::Apps`]: weak, so the pipeline the
/// gateway holds does not keep it alive.
struct AppsOf(std::sync::Weak<Gateway>);

impl AppsOf {
    fn gateway(&self) -> Result<Arc<Gateway>, GatewayError> {
        self.0
            .upgrade()
            .ok_or_else(|| crate::pipeline::Error::Stopping.into())
    }
}

impl crate::pipeline::Apps for AppsOf {
    fn snapshot(&self) -> crate::pipeline::AppsFuture<'_, Arc<Snapshot>> {
        Box::pin(async move {
            match self.0.upgrade() {
                Some(gateway) => gateway.snapshot().await,
                None => Arc::new(Snapshot::default()),
            }
        })
    }

    fn listed<'a>(
        &'a self,
        snapshot: Arc<Snapshot>,
        app: &'a str,
        caller: &'a crate::identity::Caller,
    ) -> crate::pipeline::AppsFuture<'a, Result<Arc<Snapshot>, GatewayError>> {
        // Most calls find the tools listed: answered without building (and moving to the
        // heap) the listing's future, 10 KiB of state.
        match self.gateway() {
            Ok(gateway) if !gateway.may_list(&snapshot, app) => {
                Box::pin(std::future::ready(Ok(snapshot)))
            }
            Ok(gateway) => Box::pin(async move {
                let who = snapshot
                    .find(app)
                    .map(|entry| gateway.pipeline.who(entry, caller))
                    .unwrap_or_default();
                let person = caller.person.as_deref();
                gateway.remote_tools(snapshot, app, &who, person).await
            }),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }

    fn discover_web<'a>(
        &'a self,
        url: &'a str,
    ) -> crate::pipeline::AppsFuture<'a, Result<String, GatewayError>> {
        Box::pin(async move { Ok(self.gateway()?.discover_web(url).await?.0) })
    }

    fn refresh(&self) -> crate::pipeline::AppsFuture<'_, ()> {
        Box::pin(async move {
            if let Some(gateway) = self.0.upgrade() {
                gateway.rescan_async().await;
            }
        })
    }
}

/// Why a scan runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Why {
    /// These paths changed (descriptors, a web app's `meta.json`, app folders made,
    /// renamed or removed; the watcher saw them, or the gateway wrote them): only the
    /// files they stand for are looked at (`catalog/touched.rs`), and when none changed,
    /// nothing is rebuilt. A path no file stands for but a new folder makes it a whole
    /// scan, as [`Why::Other`].
    Files(Vec<PathBuf>),
    /// Anything else: the first scan, the interval, the session bus, the gateway's own
    /// writes, a downstream server's tools.
    Other,
    /// Every file is read again, whatever its stamp (the web UI's Rescan); a file with
    /// the same bytes keeps its parse.
    Everything,
}

/// The background work of a running server; dropping it ends that work and stops the
/// gateway.
#[derive(Debug)]
pub struct Running {
    gateway: Arc<Gateway>,
    _watcher: watch::Watcher,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.gateway.stop();
    }
}

/// The one lifecycle of every command that runs the gateway (the stdio server, `--web`,
/// `call`): the runtime, the gateway, and the one teardown when it drops — everything
/// asked to stop, the runtime given 200 ms, then every process the gateway started (and
/// their descendants, through the subreaper) reaped within 2 s.
#[derive(Debug)]
pub struct Lifecycle {
    runtime: Option<tokio::runtime::Runtime>,
    gateway: Arc<Gateway>,
}

impl Lifecycle {
    /// Takes charge of `gateway`: this process adopts orphaned descendants, and a runtime
    /// is made for it.
    pub fn new(gateway: Arc<Gateway>) -> std::io::Result<Lifecycle> {
        Lifecycle::with(gateway, tokio::runtime::Builder::new_multi_thread())
    }

    /// [`Lifecycle::new`] for one client (the stdio server, `call`): one worker thread.
    /// A client's requests hop between a handful of tasks (its pipe, rmcp, the call, a
    /// downstream server's pipe); on one thread each hop is a function call, on two it
    /// often wakes the other thread: 60–80 µs of CPU per forwarded call, for no more
    /// calls per second (docs/performance.md, "The proxy path"). Scans, the history and
    /// disk work have threads of their own.
    pub fn for_one_client(gateway: Arc<Gateway>) -> std::io::Result<Lifecycle> {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(1);
        Lifecycle::with(gateway, builder)
    }

    fn with(
        gateway: Arc<Gateway>,
        mut builder: tokio::runtime::Builder,
    ) -> std::io::Result<Lifecycle> {
        crate::exec::process::become_subreaper();
        let runtime = builder.enable_all().build()?;
        Ok(Lifecycle {
            runtime: Some(runtime),
            gateway,
        })
    }

    /// The gateway.
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    /// Runs `work` on the runtime (setup before serving, or a one-off command).
    pub fn block_on<F: Future>(&self, work: F) -> F::Output {
        self.runtime().block_on(work)
    }

    /// Spawns `work` on the runtime; it ends with the lifecycle.
    pub fn spawn<F>(&self, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.runtime().spawn(work);
    }

    /// Serves: starts the background work ([`Gateway::start`]), runs `serve` until it
    /// returns (a transport serves until [`Gateway::stopping`]), then stops it all.
    pub fn serve<F, T>(self, serve: impl FnOnce(Handle) -> F) -> T
    where
        F: Future<Output = T>,
    {
        let gateway = self.gateway.clone();
        self.block_on(async move {
            let _running = gateway.start();
            let served = serve(gateway.handle()).await;
            // An atomic run or batch whose client went away is still undoing its calls.
            crate::rollback::settled(UNDO_GRACE).await;
            served
        })
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("the runtime lives until drop")
    }
}

impl Drop for Lifecycle {
    fn drop(&mut self) {
        self.gateway.stop();
        if let Some(runtime) = self.runtime.take() {
            // Adapters and blocking scans must not keep the process alive.
            runtime.shutdown_timeout(Duration::from_millis(200));
        }
        // Every call made so far is in the history before the process ends (calls
        // cancelled above recorded themselves as they ended).
        self.gateway.pipeline.flush_history(Duration::from_secs(2));
        // The last spans go to the collector, within `telemetry.otlp.shutdownSeconds`.
        self.gateway.pipeline.shutdown_telemetry();
        // Nothing we started outlives us, not even a grandchild that left its group.
        crate::exec::process::reap_all(Duration::from_secs(2));
    }
}

/// Resolves when the process is asked to stop (SIGTERM, SIGINT, SIGHUP; Ctrl-C elsewhere).
async fn terminated() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            _ = hup.recv() => "SIGHUP",
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}

/// Logs a warning for each app whose reloaded descriptor breaks agents (a MAJOR change,
/// see `aai_descriptor::versions`) without a MAJOR version bump. Apps whose tools come
/// from their MCP server are left out: their lists are not releases.
fn warn_of_breaking_releases(old: &Snapshot, new: &Snapshot) {
    use aai_descriptor::versions::{self, Bump};
    // Both are sorted by id: each app's release before is found walking along.
    let mut before = old.entries.iter().peekable();
    for entry in &new.entries {
        while before.next_if(|b| b.app.id < entry.app.id).is_some() {}
        let Some(before) = before.next_if(|b| b.app.id == entry.app.id) else {
            continue;
        };
        // An app whose file did not change is the very same parse: nothing to compare
        // (comparing reads every tool's schema into a JSON tree, which the schema keeps).
        if Arc::ptr_eq(&before.app, &entry.app)
            || matches!(entry.binding().executor, aai_descriptor::Executor::Mcp(_))
        {
            continue;
        }
        let report = versions::compare(&before.app, &entry.app);
        if report.needed == Bump::Major && !report.enough() {
            let first = &report.changes[0].what;
            tracing::warn!(
                target: crate::logging::DESCRIPTORS,
                app = %entry.app.id,
                "the reloaded descriptor breaks agents ({first}{}) but its version went from {} to {} without a MAJOR bump",
                if report.changes.len() > 1 { format!(" and {} more changes", report.changes.len() - 1) } else { String::new() },
                report.versions.0,
                report.versions.1,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Layout, SourceKind};

    #[test]
    fn a_scan_waits_for_the_one_under_way_so_the_last_to_start_stands() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_owned();
        let (config, _) = Config::parse("{}", &home.join("config.json")).unwrap();
        let dirs = vec![SearchDir {
            kind: SourceKind::User,
            dir: home.clone(),
            layout: Layout::AppDirs,
        }];
        let gw = Gateway::with_parts(
            config,
            home.clone(),
            None,
            Host::new(crate::host::Os::Linux),
            dirs,
            crate::auth::store::Store::memory(),
        );
        // A scan is under way (this test holds its place): the scan a file event starts
        // waits for it, and so reads what was written meanwhile last.
        let under_way = gw.scanning.lock().unwrap();
        let second = {
            let gw = gw.clone();
            std::thread::spawn(move || gw.rescan())
        };
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(gw.rescans(), 0, "a scan began beside another");
        let app = home.join("com.example.late");
        std::fs::create_dir(&app).unwrap();
        std::fs::write(
            app.join("aai.json"),
            r#"{"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
                "app":{"id":"com.example.late","name":{"en":"Late"},"defaultLang":"en",
                       "description":"Written during a scan"},
                "execution":{"type":"stdio","command":"true"},
                "tools":[{"name":"t","description":"A tool","parameters":{"type":"object"}}]}"#,
        )
        .unwrap();
        drop(under_way);
        assert!(second.join().unwrap(), "the scan saw a change");
        assert_eq!(gw.rescans(), 1);
        let snapshot = gw.registry_snapshot();
        assert!(
            snapshot
                .entries
                .iter()
                .any(|e| e.app.id == "com.example.late"),
            "the app written during the scan under way is served"
        );
    }

    #[test]
    fn a_file_event_that_changed_no_descriptor_reloads_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_owned();
        let (config, _) = Config::parse("{}", &home.join("config.json")).unwrap();
        let app = home.join("com.example.once");
        std::fs::create_dir(&app).unwrap();
        let file = app.join("aai.json");
        std::fs::write(
            &file,
            r#"{"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
                "app":{"id":"com.example.once","name":{"en":"Once"},"defaultLang":"en",
                       "description":"Read once"},
                "execution":{"type":"stdio","command":"true"},
                "tools":[{"name":"t","description":"A tool","parameters":{"type":"object"}}]}"#,
        )
        .unwrap();
        // Written a minute ago: not so recent that it must be read again.
        let then = std::time::SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(then)
            .unwrap();
        let gw = Gateway::with_parts(
            config,
            home.clone(),
            None,
            Host::new(crate::host::Os::Linux),
            vec![SearchDir {
                kind: SourceKind::User,
                dir: home.clone(),
                layout: Layout::AppDirs,
            }],
            crate::auth::store::Store::memory(),
        );
        gw.rescan();
        let first = gw.registry_snapshot();
        // The gateway's own write seen again by the watcher: the same snapshot stays.
        assert!(!gw.rescan_for(Why::Files(vec![file.clone()])));
        assert!(Arc::ptr_eq(&first, &gw.registry_snapshot()));
        // Any other reason rebuilds it, sharing the app the file still holds.
        assert!(!gw.rescan());
        let second = gw.registry_snapshot();
        assert!(!Arc::ptr_eq(&first, &second));
        let shared = |s: &Snapshot| {
            s.entries
                .iter()
                .find(|e| e.app.id == "com.example.once")
                .unwrap()
                .app
                .clone()
        };
        assert!(Arc::ptr_eq(&shared(&first), &shared(&second)));
        // Everything is read again when asked (the web UI's Rescan): the snapshot is
        // rebuilt, and the same bytes keep their parse.
        gw.rescan_for(Why::Everything);
        let third = gw.registry_snapshot();
        assert!(!Arc::ptr_eq(&second, &third));
        assert!(Arc::ptr_eq(&shared(&second), &shared(&third)));
    }
}
