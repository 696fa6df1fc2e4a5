//! The normalized model: what every dialect becomes.
//!
//! An [`App`] has one or more [`Binding`]s; a binding is one way to reach the app
//! (platform + executor + auth + tools). A "platforms" (D0) file yields one binding per
//! platform; a snake_case (D1) or camelCase (D2) file yields exactly one.
//!
//! All defaulting happens during normalization, so consumers never re-derive defaults:
//! timeouts are [`Duration`]s whatever unit the dialect used, D1 `ipc` is already the
//! platform's concrete executor, D-Bus names are filled in, and so on.
//!
//! The model serializes (camelCase) because the gateway shows it to agents
//! (`resources/read`) and in `--scan --json`; it is not the input format.

use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::name::AppName;
use crate::schema::Schema;

/// Which generation of the descriptor format a file was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Dialect {
    /// docs/descriptors.md, platforms: root `appId` and `platforms.{macos,…}`.
    #[serde(rename = "platforms")]
    Platforms,
    /// docs/descriptors.md, snake_case: `schema_version`, `app{…}`,
    /// `execution.type: ipc|http`.
    #[serde(rename = "snake_case")]
    SnakeCase,
    /// docs/descriptors.md, camelCase: `schemaVersion`, `app.name{lang}`,
    /// `execution.type: http|stdio|…`.
    #[serde(rename = "camelCase")]
    CamelCase,
    /// docs/descriptors.md, access: the reference gateway's 2.0 form, `"schemaVersion":
    /// "2.0"`, `access.protocol` + `config`, `exposure`, `discovery.checks`.
    #[serde(rename = "access")]
    Access,
}

/// One application, merged from all of its bindings.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct App {
    /// Reverse-DNS identifier, e.g. `com.apple.mail`.
    pub id: String,
    /// Localized name(s).
    pub name: AppName,
    /// What the app is, for agents.
    pub description: String,
    /// Extra words to match the app by.
    pub aliases: Vec<String>,
    /// Words search weighs the app by (access form `exposure.keywords`); unlike aliases
    /// they are not names the app is looked up by.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// What must hold on a machine for the app to be active there (access form
    /// `discovery.checks`), all of them; the gateway's catalog probes them at each scan.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    /// The descriptor's own version (semver in D1/D2; free-form in D0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The AAI spec version the file declares.
    pub schema_version: String,
    /// The dialect the file was written in.
    pub dialect: Dialect,
    /// The ways to reach the app.
    pub bindings: Vec<Binding>,
}

impl App {
    /// The binding for `platform`, if any.
    pub fn binding(&self, platform: Platform) -> Option<&Binding> {
        self.bindings.iter().find(|b| b.platform == platform)
    }
}

/// One condition for an app to be active on a machine. Paths are as written: the gateway
/// reads `~/` as the user's home and a relative path as relative to the descriptor's
/// folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Check {
    /// A program: a name found on `PATH`, or a path to an executable file.
    Command {
        /// The name or path.
        command: String,
    },
    /// A regular file exists.
    File {
        /// The file.
        path: String,
    },
    /// A folder exists.
    Path {
        /// The folder.
        path: String,
    },
}

/// The platform a binding targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// macOS.
    Macos,
    /// Windows.
    Windows,
    /// Linux desktops.
    Linux,
    /// Android (driven through `adb`).
    Android,
    /// iOS (driven through `xcrun simctl`).
    Ios,
    /// A web service, reachable from any host.
    Web,
}

impl Platform {
    /// Every platform, in the order the gateway lists them.
    pub const ALL: [Platform; 6] = [
        Platform::Macos,
        Platform::Windows,
        Platform::Linux,
        Platform::Android,
        Platform::Ios,
        Platform::Web,
    ];

    /// The name used in descriptors and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Macos => "macos",
            Platform::Windows => "windows",
            Platform::Linux => "linux",
            Platform::Android => "android",
            Platform::Ios => "ios",
            Platform::Web => "web",
        }
    }

    /// Parses a platform name as written in descriptors.
    pub fn parse(name: &str) -> Option<Platform> {
        Platform::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

/// One way to reach an app: platform, executor, auth and tools.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    /// The platform this binding targets.
    pub platform: Platform,
    /// How tools are executed.
    pub executor: Executor,
    /// How requests are authenticated (web bindings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<Auth>,
    /// Default timeout for this binding's tools, when the descriptor sets one.
    #[serde(
        rename = "timeoutMs",
        serialize_with = "opt_millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<Duration>,
    /// The binding's tools, in descriptor order, with unique names.
    pub tools: Vec<Tool>,
    /// The events the app announces (descriptor `events`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<crate::event::Event>,
}

impl Binding {
    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// The kind of executor, as named everywhere (CLI, UI, docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExecutorKind {
    /// macOS AppleScript through `osascript`.
    Applescript,
    /// macOS JavaScript for Automation through `osascript -l JavaScript`.
    Jxa,
    /// A raw Apple Event carrying the JSON envelope.
    AppleEvents,
    /// Windows COM through PowerShell.
    Com,
    /// Linux D-Bus.
    Dbus,
    /// Android intents through `adb`.
    Intent,
    /// iOS URL schemes through `xcrun simctl`.
    UrlScheme,
    /// HTTP requests to a web API.
    Http,
    /// A local adapter process speaking newline-delimited JSON envelopes.
    Stdio,
    /// An Agent Client Protocol agent.
    Acp,
    /// A downstream MCP server (our extension).
    Mcp,
    /// An Agent Skill: a folder with `SKILL.md`, read by its tool (our extension).
    Skill,
    /// The gateway's own tools (its app `aai`: import, remove, enable, disable). No
    /// descriptor file can name it: the gateway builds that app itself.
    Gateway,
}

impl ExecutorKind {
    /// The name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutorKind::Applescript => "applescript",
            ExecutorKind::Jxa => "jxa",
            ExecutorKind::AppleEvents => "apple-events",
            ExecutorKind::Com => "com",
            ExecutorKind::Dbus => "dbus",
            ExecutorKind::Intent => "intent",
            ExecutorKind::UrlScheme => "url-scheme",
            ExecutorKind::Http => "http",
            ExecutorKind::Stdio => "stdio",
            ExecutorKind::Acp => "acp",
            ExecutorKind::Mcp => "mcp",
            ExecutorKind::Skill => "skill",
            ExecutorKind::Gateway => "gateway",
        }
    }
}

/// How a binding's tools are executed, with the binding-wide settings.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Executor {
    /// AppleScript; each tool carries its script.
    Applescript,
    /// JXA; each tool carries its script.
    Jxa,
    /// Apple Event with the JSON envelope.
    AppleEvents(AppleEvents),
    /// COM: D0 action lists per tool, or `Execute(json)` on `progId`.
    Com(Com),
    /// D-Bus: the JSON `Execute` convention, or the app's own methods per tool.
    Dbus(Dbus),
    /// Android intents to `package`.
    Intent(Intent),
    /// iOS URL scheme.
    UrlScheme(UrlScheme),
    /// HTTP API.
    Http(Http),
    /// Local stdio adapter.
    Stdio(Process),
    /// ACP agent process.
    Acp(Process),
    /// Downstream MCP server; its tools are forwarded.
    Mcp(McpServer),
    /// An Agent Skill's folder (relative to the descriptor's); its tools read it.
    Skill(SkillFolder),
    /// The gateway's own tools; never read from a file.
    Gateway,
}

/// An Agent Skill: the folder holding its `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillFolder {
    /// The folder, absolute or relative to the descriptor's folder.
    pub path: String,
}

impl Executor {
    /// The executor's kind.
    pub fn kind(&self) -> ExecutorKind {
        match self {
            Executor::Applescript => ExecutorKind::Applescript,
            Executor::Jxa => ExecutorKind::Jxa,
            Executor::AppleEvents(_) => ExecutorKind::AppleEvents,
            Executor::Com(_) => ExecutorKind::Com,
            Executor::Dbus(_) => ExecutorKind::Dbus,
            Executor::Intent(_) => ExecutorKind::Intent,
            Executor::UrlScheme(_) => ExecutorKind::UrlScheme,
            Executor::Http(_) => ExecutorKind::Http,
            Executor::Stdio(_) => ExecutorKind::Stdio,
            Executor::Acp(_) => ExecutorKind::Acp,
            Executor::Mcp(_) => ExecutorKind::Mcp,
            Executor::Skill(_) => ExecutorKind::Skill,
            Executor::Gateway => ExecutorKind::Gateway,
        }
    }
}

/// Apple Event target. Defaults: bundle id = app id, class `AAI `, id `call`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppleEvents {
    /// Target bundle identifier.
    pub bundle_id: String,
    /// Four-character event class.
    pub event_class: String,
    /// Four-character event id.
    pub event_id: String,
}

/// COM settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Com {
    /// The ProgID of the app's automation object (D0 `progid`, D2 `progId`; D1 `ipc`: the app id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prog_id: Option<String>,
}

/// Which D-Bus bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bus {
    /// The user's session bus (default).
    Session,
    /// The system bus.
    System,
}

/// D-Bus address of the app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dbus {
    /// Session or system bus.
    pub bus: Bus,
    /// Well-known bus name.
    pub service: String,
    /// Object path.
    pub object_path: String,
    /// Interface of the methods (JSON convention: `com.aai.Executor`).
    pub interface: String,
}

/// Android target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Intent {
    /// Package name.
    pub package: String,
}

/// iOS target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UrlScheme {
    /// URL scheme, without `://`.
    pub scheme: String,
}

/// HTTP API settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Http {
    /// Absolute base URL; only its origin is ever contacted.
    pub base_url: String,
    /// Headers sent with every request, before auth and tool headers.
    pub default_headers: Vec<(String, String)>,
}

/// A process to start: stdio adapters and ACP agents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Process {
    /// Program to run (looked up on `PATH` when it has no slash).
    pub command: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
}

/// How the gateway reaches a downstream MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "transport", rename_all = "camelCase")]
pub enum McpServer {
    /// A server process speaking MCP on its stdin/stdout.
    Stdio(Process),
    /// An HTTP endpoint: streamable HTTP, or the legacy HTTP+SSE transport.
    #[serde(rename_all = "camelCase")]
    Http {
        /// The endpoint URL (for SSE, the URL of the event stream).
        url: String,
        /// Headers sent with every request (before the credential's).
        headers: Vec<(String, String)>,
        /// Which HTTP transport it speaks (`execution.transport`).
        mode: HttpMode,
    },
}

/// The HTTP transport of a downstream MCP server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HttpMode {
    /// Not said: streamable HTTP, and when its handshake fails, the legacy transport if
    /// the URL answers as an SSE endpoint (the MCP specification's backwards
    /// compatibility).
    #[default]
    Detect,
    /// `streamable-http` (2025-03-26 and later) only.
    Streamable,
    /// `sse`: the HTTP+SSE transport of 2024-11-05 only.
    Sse,
}

/// One tool of a binding.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Name, unique within the binding.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// JSON Schema (draft-07) of the arguments, compiled.
    pub parameters: Schema,
    /// JSON Schema of the result, compiled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub returns: Option<Schema>,
    /// This tool's own timeout, when the descriptor sets one.
    #[serde(
        rename = "timeoutMs",
        serialize_with = "opt_millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<Duration>,
    /// The tool only reads (descriptor `readOnly`, a downstream MCP tool's
    /// `readOnlyHint`): with `consent.readOnly: "allow"` it runs without asking.
    #[serde(rename = "readOnly", skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// The tool that undoes a call of this one (descriptor `undo`), for atomic runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undo: Option<crate::undo::Undo>,
    /// What running the tool means for its executor.
    pub call: ToolCall,
    /// When the user changed this tool (the gateway's `apps.<id>.tools`): the tool as its
    /// app defines it and the arguments fixed for every call. The fields above are then
    /// what agents see; the app is called as it defines the tool.
    #[serde(skip)]
    pub overridden: Option<Arc<Overridden>>,
}

impl Tool {
    /// The tool as its app defines it: what its executor runs.
    pub fn as_defined(&self) -> &Tool {
        self.overridden.as_ref().map_or(self, |o| &o.original)
    }
}

/// What the user changed of a tool ([`Tool::overridden`]).
#[derive(Debug, Clone)]
pub struct Overridden {
    /// The tool as its app defines it.
    pub original: Tool,
    /// Arguments every call gets with these values (agents neither see nor send them).
    pub fixed: serde_json::Map<String, serde_json::Value>,
}

/// What running one tool means, for its binding's executor.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ToolCall {
    /// Send the JSON envelope `{version, tool, params, request_id}` (D-Bus `Execute`,
    /// stdio, Apple Events, COM `Execute`); for ACP, a prompt template.
    Envelope,
    /// Call the downstream MCP server's tool of the same name with the arguments as they are.
    Forward,
    /// Run an AppleScript/JXA script template with `${param}` placeholders.
    Script {
        /// The template.
        source: String,
        /// How the script's result is read.
        output: ScriptOutput,
    },
    /// Run a COM action list (D0 Windows).
    ComScript {
        /// The steps, in order.
        steps: Vec<ComStep>,
    },
    /// Call the app's own D-Bus method (native convention).
    DbusMethod {
        /// Method name.
        method: String,
        /// Interface, when not the binding's.
        #[serde(skip_serializing_if = "Option::is_none")]
        interface: Option<String>,
        /// How the reply is read.
        output: DbusOutput,
    },
    /// Read or write one of the app's D-Bus properties (our extension: MPRIS state such
    /// as `PlaybackStatus` lives in properties). Writing takes the argument `value`.
    DbusProperty {
        /// Property name.
        property: String,
        /// Interface, when not the binding's.
        #[serde(skip_serializing_if = "Option::is_none")]
        interface: Option<String>,
        /// Write instead of read.
        write: bool,
    },
    /// Send an Android intent.
    Intent {
        /// Intent action.
        action: String,
        /// Extras; string values may hold `${param}` placeholders.
        extras: Vec<(String, serde_json::Value)>,
        /// Where the result comes from.
        result: IntentResult,
    },
    /// Open an iOS URL.
    Url {
        /// URL template with `${param}` placeholders.
        template: String,
        /// Where the result comes from, if anywhere.
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<UrlResult>,
    },
    /// Make an HTTP request.
    Http {
        /// HTTP method.
        method: HttpMethod,
        /// Path below the base URL, with `{name}` segments.
        path: String,
        /// Headers for this tool, applied last; `{name}` in a value is filled with that
        /// argument (the header is left out when the argument is absent).
        headers: Vec<(String, String)>,
        /// Arguments sent in the query string whatever the method.
        query: Vec<String>,
        /// The argument that is the whole request body; the other arguments not in the
        /// path or headers then go to the query string.
        body: Option<String>,
    },
}

/// How an AppleScript/JXA result is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ScriptOutput {
    /// `result as text`: the result is a string (JSON is parsed when it is JSON).
    #[serde(rename = "result as text")]
    Text,
    /// `result as record`: the result is a record, returned as a JSON object.
    #[serde(rename = "result as record")]
    Record,
}

/// How a native D-Bus reply is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DbusOutput {
    /// Convert the reply to JSON (a string reply holding JSON is parsed).
    Json,
    /// Return the reply as text.
    String,
}

/// One step of a D0 COM action list. String values may hold `${param}` placeholders.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum ComStep {
    /// `var = New-Object -ComObject progId`.
    Create {
        /// Variable to hold the object.
        var: String,
        /// ProgID to instantiate.
        prog_id: String,
    },
    /// `[var =] object.method(args…)`.
    Call {
        /// Variable for the return value.
        #[serde(skip_serializing_if = "Option::is_none")]
        var: Option<String>,
        /// Object variable.
        object: String,
        /// Method name.
        method: String,
        /// Arguments.
        args: Vec<serde_json::Value>,
    },
    /// `object.property = value`.
    Set {
        /// Object variable.
        object: String,
        /// Property name.
        property: String,
        /// Value.
        value: serde_json::Value,
    },
    /// `[var =] object.property`.
    Get {
        /// Variable for the value.
        #[serde(skip_serializing_if = "Option::is_none")]
        var: Option<String>,
        /// Object variable.
        object: String,
        /// Property name.
        property: String,
    },
    /// The script's result: a value, or a variable.
    Return {
        /// Literal value (template).
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<serde_json::Value>,
        /// Variable to return.
        #[serde(skip_serializing_if = "Option::is_none")]
        var: Option<String>,
    },
}

/// Where an Android tool's result comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum IntentResult {
    /// The broadcast's result data.
    Broadcast,
    /// `content query --uri uri`.
    ContentProvider {
        /// The content URI.
        uri: String,
    },
}

/// Where an iOS tool's result comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UrlResult {
    /// The simulator's clipboard.
    Clipboard,
    /// A file in the app group container.
    AppGroup {
        /// App group identifier.
        group_id: String,
    },
}

/// HTTP methods a tool may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    /// GET (arguments in the query string).
    Get,
    /// POST (arguments in a JSON body).
    Post,
    /// PUT (JSON body).
    Put,
    /// PATCH (JSON body).
    Patch,
    /// DELETE (arguments in the query string).
    Delete,
    /// HEAD (arguments in the query string).
    Head,
}

impl HttpMethod {
    /// Parses a method name, any letter case.
    pub fn parse(name: &str) -> Option<HttpMethod> {
        Some(match name.to_ascii_uppercase().as_str() {
            "GET" => HttpMethod::Get,
            "POST" => HttpMethod::Post,
            "PUT" => HttpMethod::Put,
            "PATCH" => HttpMethod::Patch,
            "DELETE" => HttpMethod::Delete,
            "HEAD" => HttpMethod::Head,
            _ => return None,
        })
    }
}

/// How a web binding authenticates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Auth {
    /// OAuth 2 authorization code with PKCE S256.
    #[serde(rename = "oauth2")]
    OAuth2(OAuth2),
    /// A static API key in a header or the query string.
    ApiKey(ApiKey),
    /// App id + secret exchanged for a token.
    AppCredential(AppCredential),
    /// Browser session cookies.
    Cookie(Cookie),
}

impl Auth {
    /// Which of the four auth types this is.
    pub fn kind(&self) -> AuthKind {
        match self {
            Auth::OAuth2(_) => AuthKind::OAuth2,
            Auth::ApiKey(_) => AuthKind::ApiKey,
            Auth::AppCredential(_) => AuthKind::AppCredential,
            Auth::Cookie(_) => AuthKind::Cookie,
        }
    }
}

/// The auth types, named as in descriptors (`auth.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum AuthKind {
    /// `oauth2`.
    #[serde(rename = "oauth2")]
    OAuth2,
    /// `apiKey`.
    ApiKey,
    /// `appCredential`.
    AppCredential,
    /// `cookie`.
    Cookie,
}

impl AuthKind {
    /// Every auth type.
    pub const ALL: [AuthKind; 4] = [
        AuthKind::OAuth2,
        AuthKind::ApiKey,
        AuthKind::AppCredential,
        AuthKind::Cookie,
    ];

    /// The name used in descriptors, output and the credential store.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthKind::OAuth2 => "oauth2",
            AuthKind::ApiKey => "apiKey",
            AuthKind::AppCredential => "appCredential",
            AuthKind::Cookie => "cookie",
        }
    }

    /// The kind a name means (descriptor spelling).
    pub fn parse(name: &str) -> Option<AuthKind> {
        AuthKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for AuthKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// OAuth 2 settings. PKCE is always S256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuth2 {
    /// Authorization endpoint URL.
    pub authorization_endpoint: String,
    /// Token endpoint URL.
    pub token_endpoint: String,
    /// Scopes to request.
    pub scopes: Vec<String>,
    /// Client id (our extension; config `apps.<id>.clientId` overrides it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
}

/// Where an API key goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyLocation {
    /// A request header.
    Header,
    /// A query parameter.
    Query,
}

/// API key settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKey {
    /// Header or query.
    pub location: KeyLocation,
    /// Header or parameter name.
    pub name: String,
    /// Value prefix, e.g. `Bearer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Where the user gets a key.
    pub obtain_url: String,
    /// Guidance for the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<Instructions>,
}

/// The kind of token an app credential yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TokenType {
    /// Tenant access token.
    TenantAccessToken,
    /// App access token.
    AppAccessToken,
    /// User access token.
    UserAccessToken,
}

/// App credential settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppCredential {
    /// Where id + secret are exchanged for a token.
    pub token_endpoint: String,
    /// Which token.
    pub token_type: TokenType,
    /// Token lifetime (default 7,200 s).
    #[serde(rename = "expiresInSecs", serialize_with = "secs")]
    pub expires_in: Duration,
    /// Guidance for the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<Instructions>,
}

/// Cookie settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cookie {
    /// Where the user logs in.
    pub login_url: String,
    /// Cookies that must be present.
    pub required_cookies: Vec<String>,
    /// Cookie domain; cookies are sent only there.
    pub domain: String,
    /// Guidance for the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<Instructions>,
}

/// Guidance shown to the user when a credential is needed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Instructions {
    /// One line.
    pub short: String,
    /// Steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detailed: Option<String>,
    /// Documentation link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help_url: Option<String>,
    /// Screenshot of the process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screenshot_url: Option<String>,
}

fn opt_millis<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_u64(d.as_millis() as u64),
        None => s.serialize_none(),
    }
}

fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}
