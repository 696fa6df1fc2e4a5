//! `config.json`: the gateway's settings (docs/config.md), read once at start.
//!
//! Unknown keys are warnings; a value of the wrong type or out of range is an error that
//! names the key (as a JSON pointer) and the file. A missing default config file means
//! defaults; a missing file named with `--config` is an error.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aai_descriptor::read::{Obj, type_name};
use aai_descriptor::{Diagnostic, Sink};
use serde_json::Value;

/// How apps are shown in `tools/list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// `app_<slug>` per app plus the meta tools, while apps ≤ `maxListedApps`.
    Progressive,
    /// Meta tools only.
    Search,
    /// Every tool of every app.
    Flat,
}

/// How tool failures reach the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorStyle {
    /// JSON-RPC errors (the default; docs/design.md, Errors).
    JsonRpc,
    /// A `CallToolResult` with `isError: true`.
    Result,
}

/// What happens when a tool needs consent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsentMode {
    /// Ask the user.
    Prompt,
    /// Allow everything (the user's explicit choice).
    Allow,
    /// Deny everything that has not been granted.
    Deny,
}

impl ConsentMode {
    /// The name used in `config.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsentMode::Prompt => "prompt",
            ConsentMode::Allow => "allow",
            ConsentMode::Deny => "deny",
        }
    }
}

/// Where credentials are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialStore {
    /// The OS store (Keychain, Credential Manager, Secret Service).
    Keyring,
    /// A 0600 file under `$AAI_HOME` (explicit opt-in).
    File,
}

/// The shared store (`store`): PostgreSQL for a team's replicas (docs/storage.md).
#[derive(Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// The connection as written: a `postgres://` URL. It may hold a password, so it is
    /// never shown whole: `Debug` and every message show [`StoreSettings::shown`].
    pub url: String,
    /// The file holding the credential key (else `AAI_STORE_KEY`).
    pub key_file: Option<PathBuf>,
    /// Most connections in the pool.
    pub pool_size: usize,
    /// Longest wait for a connection to open.
    pub connect_timeout: Duration,
    /// Longest wait for one statement (and for a pooled connection).
    pub timeout: Duration,
}

impl StoreSettings {
    /// The URL without its password.
    pub fn shown(&self) -> String {
        crate::text::redact_url(&self.url)
    }
}

impl std::fmt::Debug for StoreSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSettings")
            .field("url", &self.shown())
            .field("key_file", &self.key_file)
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Per-app overrides (`apps.<appId>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppSettings {
    /// OAuth client id, overriding the descriptor's.
    pub client_id: Option<String>,
    /// `consent` mode for this app, overriding `consent.mode`.
    pub consent: Option<ConsentMode>,
    /// ACP agents: the folder new sessions work in (else the user's home).
    pub cwd: Option<PathBuf>,
    /// Changes to its tools, by the tool's own name (`tools`; [`crate::overrides`]).
    pub tools: BTreeMap<String, crate::overrides::ToolOverride>,
    /// `signIn: "shared"`: in team mode everyone uses the one sign-in an admin made
    /// (default `"personal"`: each person signs in for themselves).
    pub shared_sign_in: bool,
}

/// One token bucket (`rateLimits.perPerson`, `rateLimits.perApp.*`): calls refill at
/// `per_minute` a minute, and at most `burst` may be made at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// `perMinute`: the sustained rate.
    pub per_minute: u32,
    /// `burst`: the bucket's size (default: `perMinute`).
    pub burst: u32,
}

/// `rateLimits` (docs/rate-limits.md): per person, per app, in this process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimits {
    /// `perPerson`: each person's calls, across every app.
    pub per_person: Option<Limit>,
    /// `perApp.default`: each app without a limit of its own, all callers together.
    pub per_app_default: Option<Limit>,
    /// `perApp.<appId>`: that app, all callers together.
    pub per_app: BTreeMap<String, Limit>,
}

impl RateLimits {
    /// Whether no limit is set (nothing is counted then).
    pub fn is_empty(&self) -> bool {
        self.per_person.is_none() && self.per_app_default.is_none() && self.per_app.is_empty()
    }

    /// The limit of app `id`: its own, else `perApp.default`.
    pub fn app(&self, id: &str) -> Option<Limit> {
        self.per_app.get(id).copied().or(self.per_app_default)
    }
}

/// Highest `perMinute` of a rate limit (10 000 a second).
pub(crate) const MAX_PER_MINUTE: u64 = 600_000;
/// Largest `burst` of a rate limit.
pub(crate) const MAX_BURST: u64 = 100_000;

/// The gateway's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file these settings came from (it may not exist).
    pub file: PathBuf,
    /// Extra places to look for descriptors.
    pub scan_paths: Vec<PathBuf>,
    /// Timeout of a tool call when neither tool nor binding sets one.
    pub default_timeout: Duration,
    /// `error` | `warn` | `info` | `debug` | `trace`.
    pub log_level: String,
    /// Serve the web UI beside the stdio server.
    pub enable_web_ui: bool,
    /// Port of the web UI and HTTP transport.
    pub http_port: u16,
    /// Periodic rescan; `None` disables it.
    pub scan_interval: Option<Duration>,
    /// AAI Registry base URL.
    pub registry_url: String,
    /// Fetch the registry catalog.
    pub enable_registry: bool,
    /// The official MCP Registry's base URL.
    pub mcp_registry_url: String,
    /// `aai_search` with `remote: true` searches the MCP Registry.
    pub enable_mcp_registry: bool,
    /// How apps are listed.
    pub exposure: Exposure,
    /// Above this many apps, `progressive` becomes `search`.
    pub max_listed_apps: usize,
    /// How failures are returned.
    pub errors: ErrorStyle,
    /// Consent policy.
    pub consent: ConsentMode,
    /// How long a call without a consent channel waits for a grant (`consent.waitSeconds`).
    pub consent_wait: Duration,
    /// Read-only tools run without asking (`consent.readOnly: "allow"`; default `"ask"`).
    pub consent_read_only: bool,
    /// Credential storage.
    pub credentials: CredentialStore,
    /// The shared PostgreSQL store (`store`); `None`: `state.db` and `credentials.store`.
    pub store: Option<StoreSettings>,
    /// Locale for names, overriding `LC_ALL`/`LC_MESSAGES`/`LANG`.
    pub locale: Option<String>,
    /// The https URL of the gateway's OAuth Client ID Metadata Document, used as its client
    /// id with authorization servers of remote MCP servers that support them.
    pub oauth_client_metadata_url: Option<String>,
    /// Retries of calls that are safe to retry.
    pub retries: u32,
    /// Per-app overrides.
    pub apps: BTreeMap<String, AppSettings>,
    /// Which apps and tools each MCP client may see (`clients`).
    pub visibility: crate::visibility::Visibility,
    /// Call history retention: days.
    pub history_days: u32,
    /// Call history retention: rows.
    pub history_rows: u64,
    /// What one `aai_run` may use (`run`).
    pub run_limits: RunLimits,
    /// Most calls in one `aai_batch` (`batch.maxCalls`).
    pub batch_max_calls: usize,
    /// How long the undos of one atomic run or batch may take together (`undo.timeoutMs`).
    pub undo_timeout: Duration,
    /// Most calls of one parallel batch running at once (`batch.concurrency`).
    pub batch_concurrency: usize,
    /// `${NAME}` placeholders of servers and agents may be filled from the gateway's own
    /// environment when the store has no value (`secrets.fromEnvironment`).
    pub secrets_from_environment: bool,
    /// More `Host` names `--web` accepts with a token (`web.allowedHosts`).
    pub web_allowed_hosts: Vec<String>,
    /// `--web` as an OAuth 2.1 resource server of the team's authorization server
    /// (`web.auth`, docs/team.md).
    pub web_auth: Option<WebAuth>,
    /// `--generate`'s model service and how it is used (`generate.*`).
    pub generate: GenerateSettings,
    /// Rate limits (`rateLimits`); empty: none.
    pub rate_limits: RateLimits,
    /// OpenTelemetry trace export (`telemetry.otlp`); `None`: off.
    pub telemetry: Option<crate::telemetry::Settings>,
}

/// What one `aai_run` may use (config `run`; docs/workflows.md, Limits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLimits {
    /// Wall time from start to end, tool calls included (`run.timeoutMs`).
    pub wall: Duration,
    /// The engine's memory (`run.memoryMb`).
    pub memory_bytes: usize,
    /// Tool calls (`run.maxCalls`).
    pub max_calls: usize,
    /// Bytes of the returned value as JSON, and of the log (`run.maxResultBytes`).
    pub result_bytes: usize,
}

impl Default for RunLimits {
    fn default() -> RunLimits {
        RunLimits {
            wall: Duration::from_secs(60),
            memory_bytes: 64 * 1024 * 1024,
            max_calls: 100,
            result_bytes: 1024 * 1024,
        }
    }
}

/// `web.auth`: the team's authorization server whose access tokens `--web` takes.
#[derive(Debug, Clone, PartialEq)]
pub struct WebAuth {
    /// The authorization server's issuer URL (`web.auth.issuer`).
    pub issuer: String,
    /// This server's resource URL, the audience tokens must name (`web.auth.audience`).
    pub audience: String,
    /// Scopes every token must carry (`web.auth.scopes`).
    pub scopes: Vec<String>,
    /// Per scope, the apps and tools it lets a person see (`web.auth.scopeAccess`);
    /// empty: every scope sees everything the client may.
    pub scope_access: crate::visibility::ScopeAccess,
    /// The scope that sees everyone's history and pending calls (`web.auth.adminScope`).
    pub admin_scope: String,
    /// The client id the web UI signs in with, and introspects opaque tokens as
    /// (`web.auth.clientId`); its secret, if any, is `AAI_WEB_AUTH_CLIENT_SECRET`.
    pub client_id: Option<String>,
}

/// `generate.*`: the OpenAI-compatible chat-completions service `--generate` drafts
/// descriptors with.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateSettings {
    /// Base URL (`…/v1`): `generate.baseUrl`.
    pub base_url: String,
    /// Model name: `generate.model`.
    pub model: String,
    /// Most answers asked for (the first and the repairs): `generate.rounds`.
    pub rounds: u32,
    /// Time for one answer: `generate.timeoutSeconds`.
    pub timeout: Duration,
}

impl Config {
    /// Every setting in effect as `(dotted key, value)`, in the file's vocabulary (the
    /// web UI's config page; `apps.<id>.*` for each per-app override).
    pub fn effective(&self) -> Vec<(String, String)> {
        let secs = |d: Duration| format!("{}", d.as_secs_f64());
        let mut rows: Vec<(String, String)> = vec![
            (
                "scanPaths".into(),
                serde_json::to_string(&self.scan_paths).unwrap_or_default(),
            ),
            ("defaultTimeout".into(), secs(self.default_timeout)),
            ("logLevel".into(), self.log_level.clone()),
            ("enableWebUI".into(), self.enable_web_ui.to_string()),
            ("httpPort".into(), self.http_port.to_string()),
            (
                "scanInterval".into(),
                self.scan_interval.map_or("0 (off)".into(), secs),
            ),
            ("registryUrl".into(), self.registry_url.clone()),
            ("enableRegistry".into(), self.enable_registry.to_string()),
            ("mcpRegistryUrl".into(), self.mcp_registry_url.clone()),
            (
                "enableMcpRegistry".into(),
                self.enable_mcp_registry.to_string(),
            ),
            (
                "exposure".into(),
                match self.exposure {
                    Exposure::Progressive => "progressive",
                    Exposure::Search => "search",
                    Exposure::Flat => "flat",
                }
                .into(),
            ),
            ("maxListedApps".into(), self.max_listed_apps.to_string()),
            (
                "errors".into(),
                match self.errors {
                    ErrorStyle::JsonRpc => "jsonrpc",
                    ErrorStyle::Result => "result",
                }
                .into(),
            ),
            ("retries".into(), self.retries.to_string()),
            ("consent.mode".into(), self.consent.as_str().into()),
            ("consent.waitSeconds".into(), secs(self.consent_wait)),
            (
                "consent.readOnly".into(),
                if self.consent_read_only {
                    "allow"
                } else {
                    "ask"
                }
                .into(),
            ),
            (
                "credentials.store".into(),
                match self.credentials {
                    CredentialStore::Keyring => "keyring",
                    CredentialStore::File => "file",
                }
                .into(),
            ),
            (
                "locale".into(),
                self.locale
                    .clone()
                    .unwrap_or_else(|| "(from the environment)".into()),
            ),
            (
                "oauthClientMetadataUrl".into(),
                self.oauth_client_metadata_url
                    .clone()
                    .unwrap_or_else(|| "(none: register dynamically)".into()),
            ),
            ("history.days".into(), self.history_days.to_string()),
            ("history.rows".into(), self.history_rows.to_string()),
            ("batch.maxCalls".into(), self.batch_max_calls.to_string()),
            (
                "undo.timeoutMs".into(),
                self.undo_timeout.as_millis().to_string(),
            ),
            (
                "run.timeoutMs".into(),
                self.run_limits.wall.as_millis().to_string(),
            ),
            (
                "run.memoryMb".into(),
                (self.run_limits.memory_bytes >> 20).to_string(),
            ),
            ("run.maxCalls".into(), self.run_limits.max_calls.to_string()),
            (
                "run.maxResultBytes".into(),
                self.run_limits.result_bytes.to_string(),
            ),
            ("web.allowedHosts".into(), self.web_allowed_hosts.join(", ")),
            (
                "web.auth".into(),
                self.web_auth.as_ref().map_or_else(
                    || "(none: the bearer token only)".into(),
                    |a| format!("issuer {}, audience {}", a.issuer, a.audience),
                ),
            ),
            (
                "secrets.fromEnvironment".into(),
                self.secrets_from_environment.to_string(),
            ),
            (
                "batch.concurrency".into(),
                self.batch_concurrency.to_string(),
            ),
            ("generate.baseUrl".into(), self.generate.base_url.clone()),
            ("generate.model".into(), self.generate.model.clone()),
            ("generate.rounds".into(), self.generate.rounds.to_string()),
            (
                "generate.timeoutSeconds".into(),
                secs(self.generate.timeout),
            ),
        ];
        let limit = |l: &Limit| format!("{} a minute, burst {}", l.per_minute, l.burst);
        if let Some(l) = &self.rate_limits.per_person {
            rows.push(("rateLimits.perPerson".into(), limit(l)));
        }
        if let Some(l) = &self.rate_limits.per_app_default {
            rows.push(("rateLimits.perApp.default".into(), limit(l)));
        }
        for (id, l) in &self.rate_limits.per_app {
            rows.push((format!("rateLimits.perApp.{id}"), limit(l)));
        }
        if let Some(t) = &self.telemetry {
            rows.push(("telemetry.otlp.endpoint".into(), crate::net::redact(&t.url)));
            let names: Vec<&str> = t.headers.iter().map(|(n, _)| n.as_str()).collect();
            rows.push(("telemetry.otlp.headers".into(), names.join(", ")));
            rows.push(("telemetry.otlp.serviceName".into(), t.service_name.clone()));
        }
        for (id, app) in &self.apps {
            if let Some(client_id) = &app.client_id {
                rows.push((format!("apps.{id}.clientId"), client_id.clone()));
            }
            if let Some(mode) = app.consent {
                rows.push((format!("apps.{id}.consent"), mode.as_str().into()));
            }
            if let Some(cwd) = &app.cwd {
                rows.push((format!("apps.{id}.cwd"), cwd.display().to_string()));
            }
        }
        rows
    }

    /// The defaults, as if `file` did not exist.
    pub fn defaults(file: PathBuf) -> Config {
        Config {
            file,
            scan_paths: Vec::new(),
            default_timeout: Duration::from_secs(30),
            log_level: "info".to_owned(),
            enable_web_ui: true,
            http_port: 3000,
            scan_interval: Some(Duration::from_secs(60)),
            registry_url: "https://registry.aai-protocol.com".to_owned(),
            enable_registry: false,
            mcp_registry_url: "https://registry.modelcontextprotocol.io".to_owned(),
            enable_mcp_registry: false,
            exposure: Exposure::Progressive,
            max_listed_apps: 50,
            errors: ErrorStyle::JsonRpc,
            consent: ConsentMode::Prompt,
            consent_wait: Duration::ZERO,
            consent_read_only: false,
            credentials: CredentialStore::Keyring,
            store: None,
            locale: None,
            oauth_client_metadata_url: None,
            retries: 2,
            apps: BTreeMap::new(),
            visibility: crate::visibility::Visibility::default(),
            history_days: 30,
            history_rows: 100_000,
            run_limits: RunLimits::default(),
            batch_max_calls: 100,
            undo_timeout: Duration::from_secs(60),
            batch_concurrency: 8,
            secrets_from_environment: false,
            web_allowed_hosts: Vec::new(),
            web_auth: None,
            generate: GenerateSettings {
                base_url: "https://api.openai.com/v1".to_owned(),
                model: "gpt-4o-mini".to_owned(),
                rounds: 3,
                timeout: Duration::from_secs(300),
            },
            rate_limits: RateLimits::default(),
            telemetry: None,
        }
    }

    /// Loads `file`. `explicit` means the user named it, so it must exist.
    ///
    /// Returns the config and its diagnostics; `Err` carries the diagnostics when any
    /// of them is an error.
    pub fn load(file: &Path, explicit: bool) -> Result<(Config, Vec<Diagnostic>), Vec<Diagnostic>> {
        let source = file.display().to_string();
        let text = match fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                return Ok((Config::defaults(file.to_owned()), Vec::new()));
            }
            Err(e) => {
                let sink = Sink::new(source);
                sink.error("", format!("cannot read config: {e}"));
                return Err(sink.into_vec());
            }
        };
        Config::parse(&text, file)
    }

    /// Parses config text; `file` names it and anchors relative `scanPaths`.
    ///
    /// ```
    /// use std::path::Path;
    /// use aai_gateway::testing::config::{Config, Exposure};
    ///
    /// let file = Path::new("/home/u/.aai/config.json");
    /// let (config, warnings) = Config::parse(r#"{"exposure": "search", "scanPaths": ["apps"]}"#, file).unwrap();
    /// assert_eq!(config.exposure, Exposure::Search);
    /// assert_eq!(config.scan_paths, [Path::new("/home/u/.aai/apps")]);
    /// assert!(warnings.is_empty());
    ///
    /// let errors = Config::parse(r#"{"httpPort": 0}"#, file).unwrap_err();
    /// assert_eq!(
    ///     errors[0].to_string(),
    ///     "/home/u/.aai/config.json: /httpPort: error: `httpPort` must be a whole number from 1 to 65535, found 0"
    /// );
    /// ```
    pub fn parse(text: &str, file: &Path) -> Result<(Config, Vec<Diagnostic>), Vec<Diagnostic>> {
        let sink = Sink::new(file.display().to_string());
        let mut config = Config::defaults(file.to_owned());
        match serde_json::from_str::<Value>(text) {
            Ok(root) => {
                if let Some(mut obj) = Obj::new(&sink, &root, String::new()) {
                    read(&mut obj, &mut config);
                }
            }
            Err(e) => sink.error(
                "",
                format!("invalid JSON at line {} column {}", e.line(), e.column()),
            ),
        }
        let diagnostics = sink.into_vec();
        if diagnostics.iter().any(Diagnostic::is_error) {
            Err(diagnostics)
        } else {
            Ok((config, diagnostics))
        }
    }
}

fn read(obj: &mut Obj<'_>, c: &mut Config) {
    let sink = obj.sink();
    obj.ignore("$schema");
    let base = c.file.parent().map(Path::to_owned).unwrap_or_default();
    if let Some(paths) = obj.opt_str_list("scanPaths") {
        c.scan_paths = paths.iter().map(|p| expand_path(p, &base)).collect();
    }
    if let Some(n) = positive(obj, "defaultTimeout")
        && let Some(n) = at_most(obj, "defaultTimeout", n, 86_400.0)
    {
        c.default_timeout = Duration::from_secs_f64(n);
    }
    if let Some(level) = obj.opt_str("logLevel") {
        match level {
            "error" | "warn" | "info" | "debug" | "trace" => c.log_level = level.to_owned(),
            _ => sink.error(
                obj.at("logLevel"),
                format!("`{level}` is not a log level; expected error, warn, info, debug or trace"),
            ),
        }
    }
    if let Some(b) = obj.opt_bool("enableWebUI") {
        c.enable_web_ui = b;
    }
    if let Some(port) = integer(obj, "httpPort", 1, u64::from(u16::MAX)) {
        c.http_port = port as u16;
    }
    if let Some(n) = obj.opt_non_negative("scanInterval")
        && let Some(n) = at_most(obj, "scanInterval", n, 7.0 * 86_400.0)
    {
        c.scan_interval = (n > 0.0).then(|| Duration::from_secs_f64(n));
    }
    if let Some(url) = obj.opt_text("registryUrl") {
        if url.starts_with("https://") || url.starts_with("http://") {
            c.registry_url = url.trim_end_matches('/').to_owned();
        } else {
            sink.error(
                obj.at("registryUrl"),
                format!("`{url}` is not an http(s) URL"),
            );
        }
    }
    if let Some(b) = obj.opt_bool("enableRegistry") {
        c.enable_registry = b;
    }
    if let Some(url) = obj.opt_text("mcpRegistryUrl") {
        if url.starts_with("https://") || url.starts_with("http://") {
            c.mcp_registry_url = url.trim_end_matches('/').to_owned();
        } else {
            sink.error(
                obj.at("mcpRegistryUrl"),
                format!("`{url}` is not an http(s) URL"),
            );
        }
    }
    if let Some(b) = obj.opt_bool("enableMcpRegistry") {
        c.enable_mcp_registry = b;
    }
    if let Some(e) = choice(
        obj,
        "exposure",
        &[
            ("progressive", Exposure::Progressive),
            ("search", Exposure::Search),
            ("flat", Exposure::Flat),
        ],
    ) {
        c.exposure = e;
    }
    if let Some(n) = integer(obj, "maxListedApps", 0, u64::from(u32::MAX)) {
        c.max_listed_apps = n as usize;
    }
    if let Some(e) = choice(
        obj,
        "errors",
        &[
            ("jsonrpc", ErrorStyle::JsonRpc),
            ("result", ErrorStyle::Result),
        ],
    ) {
        c.errors = e;
    }
    if let Some(n) = integer(obj, "retries", 0, 10) {
        c.retries = n as u32;
    }
    if let Some(mut consent) = obj.opt_obj("consent") {
        if let Some(m) = choice(&mut consent, "mode", CONSENT_MODES) {
            c.consent = m;
        }
        if let Some(n) = consent.opt_non_negative("waitSeconds")
            && let Some(n) = at_most(&mut consent, "waitSeconds", n, 3600.0)
        {
            c.consent_wait = Duration::from_secs_f64(n);
        }
        if let Some(allow) = choice(&mut consent, "readOnly", &[("ask", false), ("allow", true)]) {
            c.consent_read_only = allow;
        }
    }
    let credentials_set = obj
        .get("credentials")
        .is_some_and(|c| c.get("store").is_some());
    if let Some(mut store) = obj.opt_obj("store") {
        c.store = store_settings(&mut store, &base);
        if c.store.is_some() && credentials_set {
            sink.error(
                obj.at("credentials"),
                "`credentials.store` and `store` cannot both be set: with `store.url`, credentials are kept in PostgreSQL, encrypted",
            );
        }
    }
    if let Some(mut credentials) = obj.opt_obj("credentials")
        && let Some(s) = choice(
            &mut credentials,
            "store",
            &[
                ("keyring", CredentialStore::Keyring),
                ("file", CredentialStore::File),
            ],
        )
    {
        c.credentials = s;
    }
    if let Some(locale) = obj.opt_text("locale") {
        c.locale = Some(locale.to_owned());
    }
    if let Some(url) = obj.opt_text("oauthClientMetadataUrl") {
        // A Client ID Metadata Document is only ever an https URL with a path.
        match reqwest::Url::parse(url) {
            Ok(u) if u.scheme() == "https" && u.path() != "/" && u.fragment().is_none() => {
                c.oauth_client_metadata_url = Some(url.to_owned());
            }
            _ => sink.error(
                obj.at("oauthClientMetadataUrl"),
                format!("`{url}` must be an https URL with a path (where the client metadata document is published)"),
            ),
        }
    }
    if let Some(mut history) = obj.opt_obj("history") {
        if let Some(days) = integer(&mut history, "days", 1, 3650) {
            c.history_days = days as u32;
        }
        if let Some(rows) = integer(&mut history, "rows", 100, 100_000_000) {
            c.history_rows = rows;
        }
    }
    if let Some(mut run) = obj.opt_obj("run") {
        let l = &mut c.run_limits;
        if let Some(n) = integer(&mut run, "timeoutMs", 100, 3_600_000) {
            l.wall = Duration::from_millis(n);
        }
        if let Some(n) = integer(&mut run, "memoryMb", 4, 4096) {
            l.memory_bytes = n as usize * 1024 * 1024;
        }
        if let Some(n) = integer(&mut run, "maxCalls", 1, 10_000) {
            l.max_calls = n as usize;
        }
        if let Some(n) = integer(&mut run, "maxResultBytes", 1024, 64 * 1024 * 1024) {
            l.result_bytes = n as usize;
        }
    }
    if let Some(mut undo) = obj.opt_obj("undo")
        && let Some(n) = integer(&mut undo, "timeoutMs", 100, 3_600_000)
    {
        c.undo_timeout = Duration::from_millis(n);
    }
    if let Some(mut batch) = obj.opt_obj("batch") {
        if let Some(n) = integer(&mut batch, "maxCalls", 1, 1000) {
            c.batch_max_calls = n as usize;
        }
        if let Some(n) = integer(&mut batch, "concurrency", 1, 64) {
            c.batch_concurrency = n as usize;
        }
    }
    if let Some(mut web) = obj.opt_obj("web") {
        if let Some(hosts) = web.opt_str_list("allowedHosts") {
            c.web_allowed_hosts = hosts;
        }
        if let Some(auth) = web.opt_obj("auth") {
            c.web_auth = web_auth(sink, auth);
        }
    }
    if let Some(mut secrets) = obj.opt_obj("secrets")
        && let Some(b) = secrets.opt_bool("fromEnvironment")
    {
        c.secrets_from_environment = b;
    }
    if let Some(mut generate) = obj.opt_obj("generate") {
        if let Some(url) = generate.opt_text("baseUrl") {
            match reqwest::Url::parse(url) {
                Ok(u) if crate::net::check_fetchable(&u).is_ok() => {
                    c.generate.base_url = url.trim_end_matches('/').to_owned();
                }
                _ => sink.error(
                    generate.at("baseUrl"),
                    format!("`{url}` is not an https URL (plain http only for this machine)"),
                ),
            }
        }
        if let Some(model) = generate.opt_text("model") {
            c.generate.model = model.to_owned();
        }
        if let Some(n) = integer(&mut generate, "rounds", 1, 10) {
            c.generate.rounds = n as u32;
        }
        if let Some(n) = integer(&mut generate, "timeoutSeconds", 5, 3600) {
            c.generate.timeout = Duration::from_secs(n);
        }
    }
    if let Some(clients) = obj.opt_obj("clients") {
        c.visibility = visibility(sink, clients);
    }
    if let Some(value) = obj.get("rateLimits") {
        c.rate_limits = rate_limits(sink, value, obj.at("rateLimits"));
    }
    if let Some(telemetry) = obj.get("telemetry") {
        let at = obj.at("telemetry");
        if let Some(mut read) = Obj::new(sink, telemetry, at.clone()) {
            read.allow_unknown();
            if strict_keys(sink, telemetry, &at, &["otlp"])
                && let Some(otlp) = read.get("otlp")
            {
                let at = aai_descriptor::diagnostic::join_pointer(&at, "otlp");
                c.telemetry = otlp_settings(sink, otlp, at, &|k| std::env::var(k).ok());
            }
        }
    }
    if let Some(apps) = obj.opt_obj("apps") {
        let at = apps.pointer().to_owned();
        for (id, value) in apps.entries() {
            let pointer = aai_descriptor::diagnostic::join_pointer(&at, id);
            let Some(mut app) = Obj::new(sink, value, pointer) else {
                continue;
            };
            let settings = AppSettings {
                client_id: app.opt_text("clientId").map(str::to_owned),
                consent: choice(&mut app, "consent", CONSENT_MODES),
                cwd: app.opt_text("cwd").and_then(|dir| {
                    let dir = PathBuf::from(dir);
                    if dir.is_absolute() {
                        Some(dir)
                    } else {
                        sink.warning(
                            app.at("cwd"),
                            "`cwd` must be an absolute path; it is ignored",
                        );
                        None
                    }
                }),
                tools: app
                    .get("tools")
                    .map(|t| crate::overrides::parse(sink, t, app.at("tools")))
                    .unwrap_or_default(),
                shared_sign_in: choice(
                    &mut app,
                    "signIn",
                    &[("personal", false), ("shared", true)],
                )
                .unwrap_or(false),
            };
            c.apps.insert(id.clone(), settings);
        }
    }
}

/// `clients`: per client name (`"*"`: everyone), `apps.allow`, `apps.deny` (app ids,
/// `prefix.*`) and `tools.deny` (`<appId>:<tool>`).
/// `web.auth`: every key checked; `None` (with errors) when it cannot be used.
fn web_auth(sink: &Sink, mut auth: Obj<'_>) -> Option<WebAuth> {
    let url = |auth: &mut Obj<'_>, key: &'static str| -> Option<String> {
        let Some(text) = auth.opt_text(key) else {
            sink.error(auth.at(key), format!("`web.auth.{key}` is required"));
            return None;
        };
        match reqwest::Url::parse(text) {
            Ok(u) if crate::net::check_fetchable(&u).is_ok() && u.fragment().is_none() => {
                Some(text.trim_end_matches('/').to_owned())
            }
            _ => {
                sink.error(
                    auth.at(key),
                    format!("`{text}` is not an https URL (plain http only for this machine)"),
                );
                None
            }
        }
    };
    let issuer = url(&mut auth, "issuer");
    let audience = url(&mut auth, "audience");
    let scopes = auth.opt_str_list("scopes").unwrap_or_default();
    let scope_access = auth
        .opt_obj("scopeAccess")
        .map(|rules| crate::visibility::ScopeAccess::new(rule_map(sink, rules)))
        .unwrap_or_default();
    let admin_scope = auth
        .opt_text("adminScope")
        .unwrap_or("aai:admin")
        .to_owned();
    let client_id = auth.opt_text("clientId").map(str::to_owned);
    Some(WebAuth {
        issuer: issuer?,
        audience: audience?,
        scopes,
        scope_access,
        admin_scope,
        client_id,
    })
}

fn visibility(sink: &Sink, clients: Obj<'_>) -> crate::visibility::Visibility {
    crate::visibility::Visibility::new(rule_map(sink, clients))
}

/// Rules by name: config `clients` (by client name) and `web.auth.scopeAccess` (by scope).
fn rule_map(sink: &Sink, named: Obj<'_>) -> BTreeMap<String, crate::visibility::Rules> {
    use crate::visibility::Rules;
    let at = named.pointer().to_owned();
    let mut by_client = BTreeMap::new();
    for (name, value) in named.entries() {
        let pointer = aai_descriptor::diagnostic::join_pointer(&at, name);
        let Some(mut client) = Obj::new(sink, value, pointer) else {
            continue;
        };
        let mut rules = Rules::default();
        if let Some(mut apps) = client.opt_obj("apps") {
            rules.allow = apps.opt_str_list("allow");
            rules.deny = apps.opt_str_list("deny").unwrap_or_default();
        }
        if let Some(mut tools) = client.opt_obj("tools")
            && let Some(deny) = tools.opt_str_list("deny")
        {
            for entry in deny {
                match entry.split_once(':') {
                    Some((app, tool)) if !app.is_empty() && !tool.is_empty() => {
                        rules.deny_tools.push((app.to_owned(), tool.to_owned()));
                    }
                    _ => sink.error(
                        tools.at("deny"),
                        format!("`{entry}` is not `<appId>:<tool>`"),
                    ),
                }
            }
        }
        by_client.insert(name.clone(), rules);
    }
    by_client
}

/// `rateLimits`, read strictly: an unknown key is an error, not a warning (a misspelt
/// limit would otherwise leave the gateway unlimited without a word).
fn rate_limits(sink: &Sink, value: &Value, at: String) -> RateLimits {
    let mut limits = RateLimits::default();
    let Some(map) = strict_object(sink, value, &at, &["perPerson", "perApp"]) else {
        return limits;
    };
    if let Some(v) = map.get("perPerson") {
        limits.per_person = limit(sink, v, join(&at, "perPerson"));
    }
    if let Some(v) = map.get("perApp") {
        let at = join(&at, "perApp");
        match v {
            Value::Object(apps) => {
                for (id, v) in apps {
                    let pointer = join(&at, id);
                    if id.is_empty() || id.chars().any(|c| c.is_whitespace() || c.is_control()) {
                        sink.error(pointer, format!("`{}` is not an app id", id.escape_debug()));
                        continue;
                    }
                    let Some(l) = limit(sink, v, pointer) else {
                        continue;
                    };
                    if id == "default" {
                        limits.per_app_default = Some(l);
                    } else {
                        limits.per_app.insert(id.clone(), l);
                    }
                }
            }
            other => sink.error(
                at,
                format!(
                    "expected an object of app ids (or `default`) to limits, found {}",
                    type_name(other)
                ),
            ),
        }
    }
    limits
}

/// One rate limit: `{"perMinute": n, "burst": m}` (`burst` defaults to `perMinute`).
fn limit(sink: &Sink, value: &Value, at: String) -> Option<Limit> {
    let map = strict_object(sink, value, &at, &["perMinute", "burst"])?;
    let whole = |key: &str, max: u64| -> Option<Option<u32>> {
        let Some(v) = map.get(key) else {
            return Some(None);
        };
        match v.as_u64() {
            Some(n) if (1..=max).contains(&n) => Some(Some(n as u32)),
            _ => {
                sink.error(
                    join(&at, key),
                    format!("`{key}` must be a whole number from 1 to {max}, found {v}"),
                );
                None
            }
        }
    };
    let per_minute = whole("perMinute", MAX_PER_MINUTE)?;
    let burst = whole("burst", MAX_BURST)?;
    let Some(per_minute) = per_minute else {
        sink.error(at, "missing required field `perMinute`");
        return None;
    };
    Some(Limit {
        per_minute,
        burst: burst.unwrap_or_else(|| per_minute.min(MAX_BURST as u32)),
    })
}

/// `value` as an object of only `known` keys; an error for anything else.
fn strict_object<'a>(
    sink: &Sink,
    value: &'a Value,
    at: &str,
    known: &[&str],
) -> Option<&'a serde_json::Map<String, Value>> {
    let Value::Object(map) = value else {
        sink.error(
            at.to_owned(),
            format!("expected an object, found {}", type_name(value)),
        );
        return None;
    };
    let mut ok = true;
    for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
        let expected: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
        sink.error(
            join(at, key),
            format!(
                "unknown field `{}`; expected {}",
                key.escape_debug(),
                expected.join(" or ")
            ),
        );
        ok = false;
    }
    ok.then_some(map)
}

fn join(at: &str, key: &str) -> String {
    aai_descriptor::diagnostic::join_pointer(at, key)
}

/// Whether `value` (an object at `at`) has only `keys`; each other key is an error (a
/// type error is left to the object's reader).
fn strict_keys(sink: &Sink, value: &Value, at: &str, keys: &[&str]) -> bool {
    let Value::Object(map) = value else {
        return true;
    };
    let mut known = true;
    for key in map.keys().filter(|k| !keys.contains(&k.as_str())) {
        known = false;
        sink.error(
            aai_descriptor::diagnostic::join_pointer(at, key),
            format!(
                "unknown key `{key}`; expected {}",
                keys.iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    known
}

const CONSENT_MODES: &[(&str, ConsentMode)] = &[
    ("prompt", ConsentMode::Prompt),
    ("allow", ConsentMode::Allow),
    ("deny", ConsentMode::Deny),
];

/// `n` when it is at most `max` seconds; else an error naming the key.
fn at_most(obj: &mut Obj<'_>, key: &'static str, n: f64, max: f64) -> Option<f64> {
    if n.is_finite() && n <= max {
        return Some(n);
    }
    obj.sink().error(
        obj.at(key),
        format!("`{key}` must be at most {max} seconds"),
    );
    None
}

/// `store`: the URL (required, `postgres://` or `postgresql://`, checked by the driver's
/// own parser), the key file, the pool and the timeouts.
fn store_settings(store: &mut Obj<'_>, base: &Path) -> Option<StoreSettings> {
    let sink = store.sink();
    let url = store.req_text("url");
    let key_file = store.opt_text("keyFile").map(|f| expand_path(f, base));
    let pool_size = integer(store, "poolSize", 1, 64).unwrap_or(8) as usize;
    let connect_timeout =
        Duration::from_secs(integer(store, "connectTimeoutSeconds", 1, 120).unwrap_or(5));
    let timeout = Duration::from_secs(integer(store, "timeoutSeconds", 1, 600).unwrap_or(10));
    let url = url?;
    let shown = crate::text::redact_url(url);
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        sink.error(
            store.at("url"),
            format!(
                "`{shown}` is not a PostgreSQL URL; expected postgres://user@host:port/database"
            ),
        );
        return None;
    }
    match url.parse::<tokio_postgres::Config>() {
        Ok(parsed) if parsed.get_hosts().is_empty() => {
            sink.error(
                store.at("url"),
                format!("`{shown}` names no host (a name, an address, or a socket folder such as %2Frun%2Fpostgresql)"),
            );
            None
        }
        Ok(parsed) if parsed.get_dbname().is_none() || parsed.get_user().is_none() => {
            sink.error(
                store.at("url"),
                format!(
                    "`{shown}` must name its user and database: postgres://user@host:port/database"
                ),
            );
            None
        }
        Ok(_) => Some(StoreSettings {
            url: url.to_owned(),
            key_file,
            pool_size,
            connect_timeout,
            timeout,
        }),
        Err(e) => {
            // The driver's words never quote the URL.
            sink.error(
                store.at("url"),
                format!("`{shown}` is not a usable PostgreSQL URL: {e}"),
            );
            None
        }
    }
}

fn positive(obj: &mut Obj<'_>, key: &'static str) -> Option<f64> {
    let n = obj.opt_non_negative(key)?;
    if n == 0.0 {
        obj.sink()
            .error(obj.at(key), format!("`{key}` must be greater than zero"));
        return None;
    }
    Some(n)
}

fn integer(obj: &mut Obj<'_>, key: &'static str, min: u64, max: u64) -> Option<u64> {
    let value = obj.get(key)?;
    match value.as_u64() {
        Some(n) if (min..=max).contains(&n) => Some(n),
        Some(_) | None if value.is_number() => {
            obj.sink().error(
                obj.at(key),
                format!("`{key}` must be a whole number from {min} to {max}, found {value}"),
            );
            None
        }
        _ => {
            obj.sink().error(
                obj.at(key),
                format!("expected an integer, found {}", type_name(value)),
            );
            None
        }
    }
}

fn choice<T: Copy>(obj: &mut Obj<'_>, key: &'static str, options: &[(&str, T)]) -> Option<T> {
    let word = obj.opt_str(key)?;
    if let Some((_, v)) = options.iter().find(|(name, _)| *name == word) {
        return Some(*v);
    }
    let expected: Vec<String> = options.iter().map(|(n, _)| format!("`{n}`")).collect();
    obj.sink().error(
        obj.at(key),
        format!(
            "`{word}` is not a valid `{key}`; expected {}",
            expected.join(", ")
        ),
    );
    None
}

/// Expands `~` and makes `path` absolute against `base`.
pub(crate) fn expand_path(path: &str, base: &Path) -> PathBuf {
    let expanded = match path.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with(['/', '\\']) => {
            match std::env::home_dir() {
                Some(home) => home.join(rest.trim_start_matches(['/', '\\'])),
                None => PathBuf::from(path),
            }
        }
        _ => PathBuf::from(path),
    };
    if expanded.is_absolute() {
        expanded
    } else {
        base.join(expanded)
    }
}

#[path = "config_otlp.rs"]
mod otlp;
use otlp::otlp_settings;

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
