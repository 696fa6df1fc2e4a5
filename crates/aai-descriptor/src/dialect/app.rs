//! Dialects D1 (snake_case) and D2 (camelCase), described in docs/descriptors.md under
//! those names: one file per platform deployment with `app`, `execution`, `auth` and
//! `tools`.
//!
//! The two differ in key spelling, in the name format (pipe string vs BCP-47 object with
//! `defaultLang`) and in the execution types each generation lists (`ipc|http` vs
//! `http|stdio|acp|apple-events|dbus|com`). One parser serves both through [`Case`]; it
//! accepts either name format and the union of execution types in either dialect, so a
//! file is never rejected for using the other generation's vocabulary.
//!
//! `ipc` is the platform default (docs/descriptors.md, The `ipc` defaults): macOS →
//! Apple Events to the app id with class `AAI ` / id `call`; Linux → D-Bus JSON
//! convention (service = app id, path = id with `.` → `/`, interface `com.aai.Executor`,
//! session bus); Windows → COM with progId = app id. D2 `execution.timeout` is
//! milliseconds.

use super::common::{
    self, DbusName, Unit, app_id, check_dbus_name, check_unique_names, check_url, fold, tool_base,
};
use crate::diagnostic::Sink;
use crate::model::*;
use crate::name::AppName;
use crate::read::Obj;
use crate::schema::Schema;

/// Key spelling of a dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Case {
    Snake,
    Camel,
}

impl Case {
    /// The spelling of the camelCase key `camel` in this dialect.
    fn k(self, camel: &'static str) -> &'static str {
        if self == Case::Camel {
            return camel;
        }
        match camel {
            "schemaVersion" => "schema_version",
            "defaultLang" => "default_lang",
            "baseUrl" => "base_url",
            "defaultHeaders" => "default_headers",
            "bundleId" => "bundle_id",
            "eventClass" => "event_class",
            "eventId" => "event_id",
            "objectPath" => "object_path",
            "progId" => "prog_id",
            "authorizationEndpoint" => "authorization_endpoint",
            "tokenEndpoint" => "token_endpoint",
            "clientId" => "client_id",
            "apiKey" => "api_key",
            "obtainUrl" => "obtain_url",
            "appCredential" => "app_credential",
            "tokenType" => "token_type",
            "expiresIn" => "expires_in",
            "loginUrl" => "login_url",
            "requiredCookies" => "required_cookies",
            "helpUrl" => "help_url",
            "screenshotUrl" => "screenshot_url",
            other => other,
        }
    }

    fn dialect(self) -> Dialect {
        match self {
            Case::Snake => Dialect::SnakeCase,
            Case::Camel => Dialect::CamelCase,
        }
    }
}

pub(crate) fn parse(root: &mut Obj<'_>, case: Case) -> Option<App> {
    let sink = root.sink();
    root.ignore("$schema");
    let schema_version = root.req_text(case.k("schemaVersion"));
    if let Some(v) = schema_version
        && v.split('.').next() != Some("1")
    {
        sink.warning(
            root.at(case.k("schemaVersion")),
            format!(
                "schema version `{v}` is newer than this gateway knows (1.x); loading it as 1.x"
            ),
        );
    }
    let version = root.req_text("version");
    if let Some(v) = version
        && semver::Version::parse(v).is_err()
    {
        sink.error(
            root.at("version"),
            format!("`{v}` is not a semantic version (MAJOR.MINOR.PATCH, e.g. \"1.0.0\")"),
        );
    }
    let platform_name = root.req_text("platform");
    let platform = platform_name.and_then(|p| {
        let parsed = Platform::parse(p);
        if parsed.is_none() {
            sink.error(
                root.at("platform"),
                format!("`{p}` is not a platform; expected `macos`, `linux`, `windows`, `web`, `android` or `ios`"),
            );
        }
        parsed
    });

    let mut app = root.req_obj("app");
    let id = app.as_mut().and_then(|a| app_id(a, "id"));
    let name = app.as_mut().and_then(|a| name(a, case));
    let description = app.as_mut().and_then(|a| a.req_str("description"));
    let aliases = app
        .as_mut()
        .and_then(|a| a.opt_str_list("aliases"))
        .unwrap_or_default();
    drop(app);

    let Execution {
        kind,
        executor,
        timeout,
    } = match platform {
        Some(platform) => execution(root, case, platform, id.as_deref().unwrap_or_default()),
        None => {
            root.ignore("execution");
            Execution::default()
        }
    };

    let auth = match root.opt_obj("auth") {
        Some(mut a) => {
            let parsed = auth(&mut a, case);
            let applies = match &executor {
                Some(Executor::Mcp(McpServer::Http { .. })) => {
                    matches!(parsed, Some(Auth::ApiKey(_)))
                }
                _ => kind == Some(ExecutorKind::Http),
            };
            if parsed.is_some() && kind.is_some() && !applies {
                sink.warning(
                    a.pointer().to_owned(),
                    "`auth` applies to http execution (and `apiKey` to MCP servers over HTTP) only; it is ignored here",
                );
                None
            } else {
                parsed
            }
        }
        None => None,
    };

    // A downstream MCP server lists its own tools; a descriptor may still name a subset.
    let tools = if kind == Some(ExecutorKind::Mcp) && !root.has("tools") {
        Vec::new()
    } else {
        let tools_array = root.req_array("tools")?;
        // Exact: a large catalog keeps every app's tools for as long as it runs.
        let mut tools = Vec::with_capacity(tools_array.len());
        for (_, mut obj) in tools_array.objects() {
            match kind {
                Some(kind) => tools.extend(tool(&mut obj, kind)),
                None => obj.allow_unknown(),
            }
        }
        check_unique_names(
            sink,
            tools_array.pointer(),
            tools_array
                .values()
                .filter_map(|(i, v)| Some((i, v.get("name")?.as_str()?))),
        );
        crate::undo::check_all(sink, tools_array.pointer(), tools_array.raw());
        tools
    };
    let events = crate::event::read(root, kind == Some(ExecutorKind::Dbus));

    Some(App {
        id: id?,
        name: name?,
        description: description?.to_owned(),
        aliases,
        keywords: Vec::new(),
        checks: Vec::new(),
        version: Some(version?.to_owned()),
        schema_version: schema_version?.to_owned(),
        dialect: case.dialect(),
        bindings: vec![Binding {
            platform: platform?,
            executor: executor?,
            auth,
            timeout,
            tools,
            events,
        }],
    })
}

/// `app.name`: a pipe string, or a BCP-47 object with `defaultLang`.
fn name(app: &mut Obj<'_>, case: Case) -> Option<AppName> {
    let sink = app.sink();
    let lang_key = case.k("defaultLang");
    let value = app.req("name")?;
    if let Some(text) = value.as_str() {
        if text.trim().is_empty() {
            sink.error(app.at("name"), "`name` must not be empty");
            return None;
        }
        app.ignore(lang_key);
        return Some(AppName::from_pipe(text));
    }
    let names = app.opt_obj("name")?.string_entries();
    if names.is_empty() {
        sink.error(app.at("name"), "`name` has no entries");
        return None;
    }
    let default_lang = match app.opt_text(lang_key) {
        Some(lang) => lang.to_owned(),
        None if app.has(lang_key) => return None,
        None => {
            sink.error(
                app.pointer().to_owned(),
                format!("missing required field `{lang_key}` (needed when `name` is an object of languages)"),
            );
            return None;
        }
    };
    if !names.iter().any(|(tag, _)| *tag == default_lang) {
        sink.error(
            app.at(lang_key),
            format!(
                "`{lang_key}` is `{default_lang}`, but `name` has no `{default_lang}` entry (it has {})",
                names.iter().map(|(t, _)| format!("`{t}`")).collect::<Vec<_>>().join(", ")
            ),
        );
        return None;
    }
    Some(AppName::Tagged {
        names,
        default_lang,
    })
}

/// What the `execution` section says: the executor kind (known even when its settings are
/// broken, so tools are still checked), the executor, and the binding timeout.
#[derive(Debug, Default)]
struct Execution {
    kind: Option<ExecutorKind>,
    executor: Option<Executor>,
    timeout: Option<std::time::Duration>,
}

/// The executor kind of an execution type on a platform, with `ipc` resolved. A type of
/// another platform is an error, and its kind is still returned, so that the rest of the
/// section and the tools are checked in the same pass.
fn kind_of(sink: &Sink, at: &str, ty: &str, platform: Platform) -> Option<ExecutorKind> {
    let needs = |wanted: Platform, kind: ExecutorKind| {
        if platform != wanted {
            sink.error(
                at,
                format!(
                    "execution type `{ty}` needs platform `{}`, but the descriptor's platform is `{}`",
                    wanted.as_str(),
                    platform.as_str()
                ),
            );
        }
        Some(kind)
    };
    match fold(ty).as_str() {
        "ipc" => match platform {
            Platform::Macos => Some(ExecutorKind::AppleEvents),
            Platform::Linux => Some(ExecutorKind::Dbus),
            Platform::Windows => Some(ExecutorKind::Com),
            Platform::Web | Platform::Android | Platform::Ios => {
                sink.error(
                    at,
                    format!(
                        "`ipc` has no meaning on platform `{}`; use `http` for web apps, or a `platforms` descriptor for Android intents and iOS URL schemes",
                        platform.as_str()
                    ),
                );
                None
            }
        },
        "http" => Some(ExecutorKind::Http),
        "stdio" => Some(ExecutorKind::Stdio),
        "acp" => Some(ExecutorKind::Acp),
        "mcp" => Some(ExecutorKind::Mcp),
        "skill" => Some(ExecutorKind::Skill),
        "appleevents" => needs(Platform::Macos, ExecutorKind::AppleEvents),
        "dbus" => needs(Platform::Linux, ExecutorKind::Dbus),
        "com" => needs(Platform::Windows, ExecutorKind::Com),
        _ => {
            sink.error(
                at,
                format!("`{ty}` is not an execution type; expected one of `http`, `stdio`, `acp`, `mcp`, `skill`, `apple-events`, `dbus`, `com`, `ipc`"),
            );
            None
        }
    }
}

/// Reads the execution section. A missing section means `ipc` (desktop platforms).
fn execution(root: &mut Obj<'_>, case: Case, platform: Platform, id: &str) -> Execution {
    let sink = root.sink();
    let Some(mut exec) = root.opt_obj("execution") else {
        if root.has("execution") {
            return Execution::default();
        }
        if platform == Platform::Web {
            sink.error(
                root.pointer().to_owned(),
                "missing required field `execution` (web apps need `execution.type: http` and a base URL)",
            );
            return Execution::default();
        }
        let kind = kind_of(sink, root.pointer(), "ipc", platform);
        return Execution {
            kind,
            executor: kind.and_then(|k| ipc(sink, root.pointer(), k, id)),
            timeout: None,
        };
    };
    let Some(ty) = exec.req_str("type") else {
        exec.allow_unknown();
        return Execution::default();
    };
    let at_type = exec.at("type");
    let Some(kind) = kind_of(sink, &at_type, ty, platform) else {
        exec.allow_unknown();
        return Execution::default();
    };
    let executor = if fold(ty) == "ipc" {
        ipc(sink, &at_type, kind, id)
    } else {
        settings(&mut exec, case, kind, id)
    };
    let timeout = common::timeout(&mut exec, "timeout", Unit::Millis);
    Execution {
        kind: Some(kind),
        executor,
        timeout,
    }
}

/// Refuses a URL or path with a dot segment (see [`common::dot_segment`]).
fn no_dot_segment(sink: &Sink, at: &str, url: &str) -> bool {
    match common::dot_segment(url) {
        Some(segment) => {
            sink.error(
                at,
                format!(
                    "`{url}` has the dot segment `{segment}`, which URL parsing would resolve away (the request would go to another path); write the path without it"
                ),
            );
            false
        }
        None => true,
    }
}

/// The settings of an explicit (non-`ipc`) execution type.
fn settings(exec: &mut Obj<'_>, case: Case, kind: ExecutorKind, id: &str) -> Option<Executor> {
    let sink = exec.sink();
    match kind {
        ExecutorKind::Http => {
            let base_url = exec.req_text(case.k("baseUrl"));
            let ok = base_url.is_some_and(|u| {
                let at = exec.at(case.k("baseUrl"));
                check_url(sink, &at, u) && no_dot_segment(sink, &at, u)
            });
            let default_headers = exec
                .opt_str_map(case.k("defaultHeaders"))
                .unwrap_or_default();
            let mut ok = ok;
            for (name, _) in &default_headers {
                if let Some(why) = header_name_problem(name) {
                    sink.error(exec.at(case.k("defaultHeaders")), why);
                    ok = false;
                }
            }
            ok.then(|| {
                Executor::Http(Http {
                    base_url: base_url
                        .unwrap_or_default()
                        .trim_end_matches('/')
                        .to_owned(),
                    default_headers,
                })
            })
        }
        ExecutorKind::Stdio => process(exec).map(Executor::Stdio),
        ExecutorKind::Acp => {
            let mut start = exec.req_obj("start")?;
            process(&mut start).map(Executor::Acp)
        }
        ExecutorKind::Mcp => mcp_server(exec),
        ExecutorKind::Skill => Some(Executor::Skill(crate::model::SkillFolder {
            path: exec.opt_text("path").unwrap_or(".").to_owned(),
        })),
        // No type name reads as the gateway's own tools (`execution_kind`): never here.
        ExecutorKind::Gateway => None,
        ExecutorKind::AppleEvents => {
            let bundle_id = exec.opt_text(case.k("bundleId")).unwrap_or(id).to_owned();
            if !bundle_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
            {
                exec.sink().error(
                    exec.at(case.k("bundleId")),
                    format!("`{bundle_id}` is not a bundle identifier (letters, digits, `.`, `-`)"),
                );
            }
            let event_class = four_cc(exec, case.k("eventClass"), "AAI ");
            let event_id = four_cc(exec, case.k("eventId"), "call");
            Some(Executor::AppleEvents(AppleEvents {
                bundle_id,
                event_class: event_class?,
                event_id: event_id?,
            }))
        }
        ExecutorKind::Dbus => {
            let service = exec.opt_text("service").unwrap_or(id).to_owned();
            let object_path = exec
                .opt_text(case.k("objectPath"))
                .map(str::to_owned)
                .unwrap_or_else(|| common::path_from_id(&service));
            let interface = exec
                .opt_text("interface")
                .unwrap_or(JSON_INTERFACE)
                .to_owned();
            let bus = match exec.opt_str("bus") {
                None | Some("session") => Some(Bus::Session),
                Some("system") => Some(Bus::System),
                Some(other) => {
                    sink.error(
                        exec.at("bus"),
                        format!("`{other}` is not a bus; expected `session` or `system`"),
                    );
                    None
                }
            };
            let ok = check_dbus_name(sink, &exec.at("service"), DbusName::Bus, &service)
                & check_dbus_name(
                    sink,
                    &exec.at(case.k("objectPath")),
                    DbusName::Path,
                    &object_path,
                )
                & check_dbus_name(sink, &exec.at("interface"), DbusName::Interface, &interface);
            let bus = bus?;
            ok.then_some({
                Executor::Dbus(Dbus {
                    bus,
                    service,
                    object_path,
                    interface,
                })
            })
        }
        ExecutorKind::Com => Some(Executor::Com(Com {
            prog_id: Some(exec.opt_text(case.k("progId")).unwrap_or(id).to_owned()),
        })),
        ExecutorKind::Applescript
        | ExecutorKind::Jxa
        | ExecutorKind::Intent
        | ExecutorKind::UrlScheme => unreachable!("not a D1/D2 execution type"),
    }
}

/// The interface of the D-Bus JSON convention.
pub const JSON_INTERFACE: &str = "com.aai.Executor";

/// `ipc`: the platform's default executor for the app id (docs/descriptors.md, The `ipc`
/// defaults).
fn ipc(sink: &Sink, at: &str, kind: ExecutorKind, id: &str) -> Option<Executor> {
    match kind {
        ExecutorKind::AppleEvents => Some(Executor::AppleEvents(AppleEvents {
            bundle_id: id.to_owned(),
            event_class: "AAI ".to_owned(),
            event_id: "call".to_owned(),
        })),
        ExecutorKind::Dbus => check_dbus_name(sink, at, DbusName::Bus, id).then(|| {
            Executor::Dbus(Dbus {
                bus: Bus::Session,
                service: id.to_owned(),
                object_path: common::path_from_id(id),
                interface: JSON_INTERFACE.to_owned(),
            })
        }),
        ExecutorKind::Com => Some(Executor::Com(Com {
            prog_id: Some(id.to_owned()),
        })),
        _ => None,
    }
}

fn four_cc(exec: &mut Obj<'_>, key: &'static str, default: &str) -> Option<String> {
    let code = exec.opt_str(key).unwrap_or(default);
    // Printable ASCII without `"` or `\`: it is written raw into `«event …»`.
    if code.chars().count() != 4
        || !code.chars().all(|c| c == ' ' || c.is_ascii_graphic())
        || code.contains(['"', '\\'])
    {
        exec.sink().error(
            exec.at(key),
            format!("`{code}` is not a four-character code (e.g. `AAI ` or `call`)"),
        );
        return None;
    }
    Some(code.to_owned())
}

pub(super) fn process(obj: &mut Obj<'_>) -> Option<Process> {
    let command = obj.req_text("command");
    let args = obj.opt_str_list("args").unwrap_or_default();
    let env = obj.opt_str_map("env").unwrap_or_default();
    warn_of_secrets(obj.sink(), &obj.at("env"), &env);
    Some(Process {
        command: command?.to_owned(),
        args,
        env,
    })
}

/// An ACP tool's parameters with the two arguments every agent call takes: `sessionId`
/// (continue a session) and `cwd` (the folder a new session works in). A schema that
/// already declares them keeps its own.
pub(super) fn with_session_arguments(parameters: &Schema) -> Schema {
    let mut json = parameters.json().clone();
    let Some(obj) = json.as_object_mut() else {
        return parameters.clone();
    };
    let properties = obj
        .entry("properties")
        .or_insert_with(|| serde_json::json!({}));
    let Some(properties) = properties.as_object_mut() else {
        return parameters.clone();
    };
    properties.entry("sessionId").or_insert_with(|| {
        serde_json::json!({
            "type": "string",
            "description": "Continue this session (the `sessionId` of an earlier result); leave out to start a new one."
        })
    });
    properties.entry("cwd").or_insert_with(|| {
        serde_json::json!({
            "type": "string",
            "description": "Absolute path of the folder a new session works in (default: the gateway's setting for this app, else the home folder)."
        })
    });
    Schema::load(&json).unwrap_or_else(|_| parameters.clone())
}

/// Warns of each value under a secret-looking name that is written out rather than a
/// `${NAME}` placeholder: a descriptor is a plain file, its secrets belong in the
/// credential store.
pub(super) fn warn_of_secrets(sink: &Sink, at: &str, values: &[(String, String)]) {
    for (name, value) in values {
        if common::looks_secret(name) && !value.is_empty() && !value.contains("${") {
            sink.warning(
                crate::diagnostic::join_pointer(at, name),
                format!(
                    "`{name}` looks like a secret written into the descriptor; write `${{{}}}` and store the value with `aai-gateway auth set <app> --secret {}`",
                    common::placeholder_name(name),
                    common::placeholder_name(name)
                ),
            );
        }
    }
}

/// `mcp`: `command`/`args`/`env` (stdio) or `url`/`headers`/`transport` (HTTP), not both.
fn mcp_server(exec: &mut Obj<'_>) -> Option<Executor> {
    let sink = exec.sink();
    match (exec.has("command"), exec.has("url")) {
        (true, false) => process(exec).map(|p| Executor::Mcp(McpServer::Stdio(p))),
        (false, true) => {
            let url = exec.req_text("url")?;
            let headers = exec.opt_str_map("headers").unwrap_or_default();
            warn_of_secrets(sink, &exec.at("headers"), &headers);
            let mode = match exec.opt_text("transport") {
                None => HttpMode::Detect,
                Some("streamable-http") => HttpMode::Streamable,
                Some("sse") => HttpMode::Sse,
                Some(other) => {
                    sink.error(
                        exec.at("transport"),
                        format!(
                            "unknown transport `{other}`: `streamable-http` or `sse` (left out: streamable HTTP, falling back to SSE)"
                        ),
                    );
                    return None;
                }
            };
            check_url(sink, &exec.at("url"), url).then(|| {
                Executor::Mcp(McpServer::Http {
                    url: url.to_owned(),
                    headers,
                    mode,
                })
            })
        }
        (both, _) => {
            sink.error(
                exec.pointer().to_owned(),
                if both {
                    "an `mcp` server has either `command` (stdio) or `url` (streamable HTTP), not both"
                } else {
                    "missing required field `command` or `url` (how to reach the MCP server)"
                },
            );
            exec.allow_unknown();
            None
        }
    }
}

fn tool(obj: &mut Obj<'_>, kind: ExecutorKind) -> Option<Tool> {
    let base = tool_base(obj);
    let call = match kind {
        ExecutorKind::Http => http_tool(obj, base.as_ref().map(|b| b.params_json)),
        ExecutorKind::Dbus if obj.has("method") || obj.has("property") => {
            super::platforms::native_dbus(obj).flatten()
        }
        ExecutorKind::Mcp | ExecutorKind::Skill => Some(ToolCall::Forward),
        _ => Some(ToolCall::Envelope),
    };
    let base = base?;
    let parameters = if kind == ExecutorKind::Acp {
        with_session_arguments(&base.parameters)
    } else {
        base.parameters
    };
    Some(Tool {
        name: base.name,
        description: base.description,
        parameters,
        returns: base.returns,
        timeout: None,
        read_only: base.read_only,
        undo: base.undo,
        call: call?,
        overridden: None,
    })
}

fn http_tool(obj: &mut Obj<'_>, params: Option<&serde_json::Value>) -> Option<ToolCall> {
    let sink = obj.sink();
    let Some(mut exec) = obj.opt_obj("execution") else {
        if !obj.has("execution") {
            sink.error(
                obj.pointer().to_owned(),
                "missing required field `execution` (http tools need `execution.path`)",
            );
        }
        return None;
    };
    let path = exec.req_str("path")?;
    if !path.starts_with('/') {
        sink.error(
            exec.at("path"),
            format!("path `{path}` must start with `/`"),
        );
        return None;
    }
    // Reported, and the rest of the tool still read (one pass reports every problem).
    let clean_path = no_dot_segment(sink, &exec.at("path"), path);
    let headers = exec.opt_str_map("headers").unwrap_or_default();
    let query = exec.opt_str_list("query").unwrap_or_default();
    let body = exec.opt_str("body").map(str::to_owned);

    // Each argument named by the binding is a parameter and goes to one place.
    let mut places = Places {
        sink,
        params,
        taken: Vec::new(),
        ok: true,
    };
    for name in path_params(path) {
        places.take(name, exec.at("path"), "URL path");
    }
    for (header, value) in &headers {
        for name in header_params(value) {
            places.take(name, exec.at("headers"), "headers");
        }
        if let Some(why) = header_name_problem(header) {
            places.sink.error(exec.at("headers"), why);
            places.ok = false;
        }
    }
    for name in &query {
        places.take(name, exec.at("query"), "query string");
    }
    if let Some(name) = &body {
        places.take(name, exec.at("body"), "body");
    }
    let method = match exec.opt_str("method") {
        None => Some(HttpMethod::Post),
        Some(m) => {
            let parsed = HttpMethod::parse(m);
            if parsed.is_none() {
                sink.error(
                    exec.at("method"),
                    format!("`{m}` is not an HTTP method; expected GET, POST, PUT, PATCH, DELETE or HEAD"),
                );
            }
            parsed
        }
    };
    let method = method?;
    (places.ok && clean_path).then(|| ToolCall::Http {
        method,
        path: path.to_owned(),
        headers,
        query,
        body,
    })
}

/// Where the arguments of an HTTP tool go, checked as they are named.
struct Places<'a> {
    sink: &'a crate::diagnostic::Sink,
    params: Option<&'a serde_json::Value>,
    taken: Vec<(String, &'static str)>,
    ok: bool,
}

impl Places<'_> {
    fn take(&mut self, name: &str, pointer: String, place: &'static str) {
        if self.params.is_some_and(|p| !common::has_property(p, name)) {
            let what = if place == "URL path" {
                format!("path placeholder `{{{name}}}`")
            } else {
                format!("`{name}` (in the {place})")
            };
            self.sink
                .error(pointer, format!("{what} is not a parameter of the tool"));
            self.ok = false;
        } else if let Some((_, before)) = self.taken.iter().find(|(n, _)| n == name) {
            if *before != place {
                self.sink.error(
                    pointer,
                    format!("argument `{name}` is sent in the {before} and in the {place}; it goes to one place"),
                );
                self.ok = false;
            }
        } else {
            self.taken.push((name.to_owned(), place));
        }
    }
}

/// Headers that frame or route the request: the HTTP client sets them, and one set by a
/// descriptor (or an argument) could desynchronize a pooled connection or retarget it.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    "proxy-authorization",
    "expect",
];

/// Why `name` cannot be a descriptor's header, if it cannot.
pub fn header_name_problem(name: &str) -> Option<String> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        Some(format!("`{name}` is not a valid HTTP header name"))
    } else if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        Some(format!(
            "`{name}` is set by the HTTP client (it frames or routes the request); a descriptor may not set it"
        ))
    } else {
        None
    }
}

/// The `{name}` placeholders of a header value: names of letters, digits, `_`, `-`, `.`
/// and `$` (other braces, as in a JSON value, are literal text).
pub fn header_params(value: &str) -> impl Iterator<Item = &str> {
    path_params(value).filter(|name| {
        !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'$'))
    })
}

/// The `{name}` segments of an HTTP path.
pub fn path_params(path: &str) -> impl Iterator<Item = &str> {
    path.split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
}

fn auth(a: &mut Obj<'_>, case: Case) -> Option<Auth> {
    let sink = a.sink();
    let ty = a.req_str("type")?;
    let (key, kind) = match fold(ty).as_str() {
        "oauth2" => ("oauth2", 0),
        "apikey" => (case.k("apiKey"), 1),
        "appcredential" => (case.k("appCredential"), 2),
        "cookie" => ("cookie", 3),
        _ => {
            sink.error(
                a.at("type"),
                format!("`{ty}` is not an auth type; expected `oauth2`, `apiKey`, `appCredential` or `cookie`"),
            );
            a.allow_unknown();
            return None;
        }
    };
    // The settings live in a sub-object named after the type; tolerate them inline too.
    let mut inner = a.opt_obj(key);
    let obj: &mut Obj<'_> = match inner.as_mut() {
        Some(o) => {
            if let Some(t) = o.opt_str("type")
                && fold(t) != fold(ty)
            {
                sink.error(
                    o.at("type"),
                    format!("`{t}` contradicts `auth.type` `{ty}`"),
                );
            }
            o
        }
        None if a.has(key) => return None,
        None => a,
    };
    match kind {
        0 => oauth2(obj, case).map(Auth::OAuth2),
        1 => api_key(obj, case).map(Auth::ApiKey),
        2 => app_credential(obj, case).map(Auth::AppCredential),
        _ => cookie(obj, case).map(Auth::Cookie),
    }
}

fn endpoint(obj: &mut Obj<'_>, key: &'static str) -> Option<String> {
    let url = obj.req_text(key)?;
    check_url(obj.sink(), &obj.at(key), url).then(|| url.to_owned())
}

fn oauth2(o: &mut Obj<'_>, case: Case) -> Option<OAuth2> {
    let authorization_endpoint = endpoint(o, case.k("authorizationEndpoint"));
    let token_endpoint = endpoint(o, case.k("tokenEndpoint"));
    let scopes = o.req_array("scopes").map(|a| a.strings());
    if let Some(mut pkce) = o.opt_obj("pkce") {
        match pkce.req_str("method") {
            Some("S256") | None => {}
            Some(other) => pkce.sink().error(
                pkce.at("method"),
                format!("PKCE method `{other}` is not supported; only `S256` is"),
            ),
        }
    }
    let client_id = o.opt_text(case.k("clientId")).map(str::to_owned);
    Some(OAuth2 {
        authorization_endpoint: authorization_endpoint?,
        token_endpoint: token_endpoint?,
        scopes: scopes?,
        client_id,
    })
}

fn api_key(o: &mut Obj<'_>, case: Case) -> Option<ApiKey> {
    let location = match o.req_str("location") {
        Some("header") => Some(KeyLocation::Header),
        Some("query") => Some(KeyLocation::Query),
        Some(other) => {
            o.sink().error(
                o.at("location"),
                format!("`{other}` is not a key location; expected `header` or `query`"),
            );
            None
        }
        None => None,
    };
    let name = o.req_text("name");
    let prefix = o.opt_str("prefix").map(str::to_owned);
    let obtain_url = o.req_text(case.k("obtainUrl"));
    let instructions = instructions(o, case);
    Some(ApiKey {
        location: location?,
        name: name?.to_owned(),
        prefix,
        obtain_url: obtain_url?.to_owned(),
        instructions: instructions?,
    })
}

fn app_credential(o: &mut Obj<'_>, case: Case) -> Option<AppCredential> {
    let token_endpoint = endpoint(o, case.k("tokenEndpoint"));
    let token_type = match o.req_str(case.k("tokenType")).map(fold).as_deref() {
        Some("tenantaccesstoken") => Some(TokenType::TenantAccessToken),
        Some("appaccesstoken") => Some(TokenType::AppAccessToken),
        Some("useraccesstoken") => Some(TokenType::UserAccessToken),
        Some(_) => {
            o.sink().error(
                o.at(case.k("tokenType")),
                "expected `tenantAccessToken`, `appAccessToken` or `userAccessToken`",
            );
            None
        }
        None => None,
    };
    let expires_in = common::timeout(o, case.k("expiresIn"), Unit::Seconds)
        .unwrap_or(std::time::Duration::from_secs(7200));
    let instructions = instructions(o, case);
    Some(AppCredential {
        token_endpoint: token_endpoint?,
        token_type: token_type?,
        expires_in,
        instructions: instructions?,
    })
}

fn cookie(o: &mut Obj<'_>, case: Case) -> Option<Cookie> {
    let login_url = o.req_text(case.k("loginUrl"));
    let required = o.req_array(case.k("requiredCookies")).map(|a| a.strings());
    if required.as_ref().is_some_and(Vec::is_empty) {
        o.sink().error(
            o.at(case.k("requiredCookies")),
            "list at least one cookie name",
        );
    }
    let domain = o.req_text("domain");
    let instructions = instructions(o, case);
    Some(Cookie {
        login_url: login_url?.to_owned(),
        required_cookies: required.filter(|r| !r.is_empty())?,
        domain: domain?.to_owned(),
        instructions: instructions?,
    })
}

/// `instructions`: an object (`short`, `detailed`, `helpUrl`, `screenshotUrl`) or, as the
/// cookie type writes it, a plain string. `Some(None)` when absent; `None` when broken.
fn instructions(o: &mut Obj<'_>, case: Case) -> Option<Option<Instructions>> {
    let Some(value) = o.get("instructions") else {
        return Some(None);
    };
    if let Some(text) = value.as_str() {
        return Some(Some(Instructions {
            short: text.to_owned(),
            detailed: None,
            help_url: None,
            screenshot_url: None,
        }));
    }
    let mut i = Obj::new(o.sink(), value, o.at("instructions"))?;
    let short = i.req_text("short");
    let detailed = i.opt_str("detailed").map(str::to_owned);
    let help_url = i.opt_str(case.k("helpUrl")).map(str::to_owned);
    let screenshot_url = i.opt_str(case.k("screenshotUrl")).map(str::to_owned);
    Some(Some(Instructions {
        short: short?.to_owned(),
        detailed,
        help_url,
        screenshot_url,
    }))
}

#[cfg(test)]
mod tests {
    use crate::ToolCall;

    fn http_tool(execution: serde_json::Value) -> (Option<ToolCall>, Vec<String>) {
        let doc = serde_json::json!({
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "web",
            "app": {"id": "com.example.api", "name": "Api", "description": "d"},
            "execution": {"type": "http", "baseUrl": "https://api.example.com"},
            "tools": [{"name": "t", "description": "t", "execution": execution,
                       "parameters": {"type": "object", "properties": {
                           "id": {}, "status": {}, "trace": {}, "pet": {}}}}]
        });
        let parsed = crate::parse(&doc.to_string(), "t.json");
        let errors = parsed
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.message.clone())
            .collect();
        let call = parsed.app.map(|a| a.bindings[0].tools[0].call.clone());
        (call, errors)
    }

    #[test]
    fn http_tools_place_each_argument_once() {
        let (call, errors) = http_tool(serde_json::json!({
            "path": "/pets/{id}", "method": "PUT", "query": ["status"], "body": "pet",
            "headers": {"X-Trace": "{trace}", "X-Json": "{\"a\":1}"}}));
        assert!(errors.is_empty(), "{errors:?}");
        let Some(ToolCall::Http { query, body, .. }) = call else {
            panic!("{call:?}")
        };
        assert_eq!(
            (query, body),
            (vec!["status".to_owned()], Some("pet".to_owned()))
        );

        for (execution, message) in [
            (
                serde_json::json!({"path": "/p", "query": ["nope"]}),
                "`nope` (in the query string) is not a parameter of the tool",
            ),
            (
                serde_json::json!({"path": "/p", "body": "ghost"}),
                "`ghost` (in the body) is not a parameter of the tool",
            ),
            (
                serde_json::json!({"path": "/p", "headers": {"X-A": "{missing}"}}),
                "`missing` (in the headers) is not a parameter of the tool",
            ),
            (
                serde_json::json!({"path": "/p/{id}", "query": ["id"]}),
                "argument `id` is sent in the URL path and in the query string; it goes to one place",
            ),
            (
                serde_json::json!({"path": "/p", "query": ["pet"], "body": "pet"}),
                "argument `pet` is sent in the query string and in the body; it goes to one place",
            ),
            (
                serde_json::json!({"path": "/p", "headers": {"Bad Header": "x"}}),
                "`Bad Header` is not a valid HTTP header name",
            ),
            (
                serde_json::json!({"path": "/p", "headers": {"Content-Length": "{trace}"}}),
                "`Content-Length` is set by the HTTP client (it frames or routes the request); a descriptor may not set it",
            ),
        ] {
            let (call, errors) = http_tool(execution.clone());
            assert!(call.is_none(), "{execution}");
            assert_eq!(errors, [message], "{execution}");
        }
    }
}
