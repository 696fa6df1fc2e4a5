//! The access form: the reference gateway's current format (`"schemaVersion": "2.0"`),
//! described in docs/descriptors.md under that name. One app, reached one way:
//!
//! ```json
//! {"schemaVersion": "2.0", "version": "1.0.0",
//!  "app": {"name": {"default": "OpenCode", "zh-CN": "OpenCode"}},
//!  "discovery": {"checks": [{"kind": "command", "command": "opencode"}]},
//!  "access": {"protocol": "acp-agent", "config": {"command": "opencode", "args": ["acp"]}},
//!  "exposure": {"summary": "AI assistant for development tasks.", "keywords": ["code"]}}
//! ```
//!
//! | written | model |
//! |---|---|
//! | `access.protocol: mcp`, `config.transport: stdio` (or no transport and a `command`) | `Executor::Mcp(McpServer::Stdio)`, no tools (the server lists them) |
//! | `access.protocol: mcp`, `config.transport: streamable-http` / `sse` (or no transport and a `url`) | `Executor::Mcp(McpServer::Http)`, mode `Streamable` / `Sse` (`Detect` when left out) |
//! | `config.timeout` of `mcp` (ms) | `Binding::timeout` |
//! | `access.protocol: skill`, `config.path` | `Executor::Skill`, one tool `read {section?, file?}` |
//! | `access.protocol: acp-agent`, `config.command/args/env` | `Executor::Acp`, one tool `ask {prompt, sessionId?, cwd?}` |
//! | `app.name.default` and language entries | `AppName::with_default` |
//! | `exposure.summary` / `exposure.keywords` | `App::description` / `App::keywords` |
//! | `discovery.checks` | `App::checks` (the gateway probes them) |
//!
//! Not supported, each said where it is written: `cli` (no executor runs a command line
//! per call), a skill by `url` (nothing is fetched), `cwd` (a warning: processes start in
//! the descriptor's folder). Such a file names no app id and no platform: both come from
//! the [`Origin`] (an `app.id` of its own, our extension, wins). Limits the reference
//! enforces (summary length, keyword count) are warnings here.

use std::time::Duration;

use super::app::{header_name_problem, process, warn_of_secrets, with_session_arguments};
use super::common::{self, Unit, check_url, fold};
use crate::Origin;
use crate::model::*;
use crate::name::AppName;
use crate::read::Obj;
use crate::schema::Schema;

/// The longest summary the reference gateway accepts, in characters.
const SUMMARY_MAX: usize = 200;
/// The most keywords the reference gateway accepts.
const KEYWORDS_MAX: usize = 8;

pub(crate) fn parse(root: &mut Obj<'_>, origin: &Origin<'_>) -> Option<App> {
    let sink = root.sink();
    root.ignore("$schema");
    let schema_version = root.req_text("schemaVersion");
    if let Some(v) = schema_version
        && v.trim() != "2.0"
    {
        sink.warning(
            root.at("schemaVersion"),
            format!("schema version `{v}` is not `2.0`, the version of this form the gateway knows; loading it as 2.0"),
        );
    }
    let version = root.req_text("version");
    if let Some(v) = version
        && semver::Version::parse(v).is_err()
    {
        sink.warning(
            root.at("version"),
            format!("`{v}` is not a semantic version (MAJOR.MINOR.PATCH, e.g. \"1.0.0\"); `validate --against` cannot compare its releases"),
        );
    }

    let mut app = root.req_obj("app");
    let id = app.as_mut().and_then(|a| id(a, origin));
    let name = app.as_mut().and_then(name);
    if let Some(a) = app.as_mut() {
        // Known, and not used: the gateway shows no icons.
        a.opt_str("iconUrl");
    }
    drop(app);

    let checks = checks(root);
    let (summary, keywords) = exposure(root);
    let reached = access(root);

    let id = id?;
    let name = name?;
    let (executor, timeout) = reached?;
    let tools = match &executor {
        Executor::Skill(_) => vec![skill_tool(sink)?],
        Executor::Acp(_) => vec![agent_tool(sink, name.primary(), &id)?],
        _ => Vec::new(),
    };
    Some(App {
        id,
        name,
        description: summary?,
        aliases: Vec::new(),
        keywords,
        checks,
        version: Some(version?.to_owned()),
        schema_version: schema_version?.to_owned(),
        dialect: Dialect::Access,
        bindings: vec![Binding {
            platform: origin.platform.unwrap_or_else(built_for),
            executor,
            auth: None,
            timeout,
            tools,
            events: Vec::new(),
        }],
    })
}

/// The platform this crate was built for: a binding's platform when the caller gives none.
fn built_for() -> Platform {
    if cfg!(target_os = "macos") {
        Platform::Macos
    } else if cfg!(windows) {
        Platform::Windows
    } else {
        Platform::Linux
    }
}

/// `app.id` when written (our extension), else the id of the file's place.
fn id(app: &mut Obj<'_>, origin: &Origin<'_>) -> Option<String> {
    if app.has("id") {
        return common::app_id(app, "id");
    }
    let sink = app.sink();
    match origin.id.filter(|id| !id.is_empty()) {
        // Reference ids are short names (`claude`): no reverse-DNS warning for them.
        Some(id) => common::check_app_id(
            sink,
            app.pointer(),
            id,
            "the app id taken from the file's folder or name,",
        )
        .then(|| id.to_owned()),
        None => {
            sink.error(
                app.pointer().to_owned(),
                "missing `id`: a file in this form takes its app id from its place (the folder of `<id>/aai.json`, or the name of `<id>.json`), and none was given; write `app.id` to read it on its own",
            );
            None
        }
    }
}

/// `app.name`: `default` and names by language tag (a plain string is taken as the
/// default name, as the one-platform forms write it).
fn name(app: &mut Obj<'_>) -> Option<AppName> {
    let sink = app.sink();
    let value = app.req("name")?;
    if let Some(text) = value.as_str() {
        if text.trim().is_empty() {
            sink.error(app.at("name"), "`name` must not be empty");
            return None;
        }
        return Some(AppName::from_pipe(text));
    }
    let obj = Obj::new(sink, value, app.at("name"))?;
    let at = obj.pointer().to_owned();
    let mut default = None;
    let mut localized = Vec::new();
    for (tag, text) in obj.string_entries() {
        if tag == crate::name::DEFAULT_TAG {
            default = Some(text);
        } else if !text.trim().is_empty() {
            localized.push((tag, text));
        }
    }
    match default {
        Some(d) if d.trim().is_empty() => {
            sink.error(
                crate::diagnostic::join_pointer(&at, "default"),
                "`default` must not be empty",
            );
            None
        }
        Some(d) => Some(AppName::with_default(d, localized)),
        None => {
            sink.error(
                at,
                "missing required field `default` (the name for every language the others do not cover)",
            );
            None
        }
    }
}

/// `discovery.checks`: what must hold on a machine for the app to be active there.
fn checks(root: &mut Obj<'_>) -> Vec<Check> {
    let Some(mut discovery) = root.opt_obj("discovery") else {
        return Vec::new();
    };
    let Some(list) = discovery.req_array("checks") else {
        return Vec::new();
    };
    if list.is_empty() {
        discovery.sink().warning(
            list.pointer().to_owned(),
            "no checks: the app is active everywhere (the reference gateway refuses an empty list; leave out `discovery` instead)",
        );
    }
    list.objects()
        .filter_map(|(_, mut c)| check(&mut c))
        .collect()
}

fn check(c: &mut Obj<'_>) -> Option<Check> {
    let Some(kind) = c.req_str("kind") else {
        c.allow_unknown();
        return None;
    };
    match kind {
        "command" => Some(Check::Command {
            command: c.req_text("command")?.to_owned(),
        }),
        "file" => Some(Check::File {
            path: c.req_text("path")?.to_owned(),
        }),
        "path" => Some(Check::Path {
            path: c.req_text("path")?.to_owned(),
        }),
        other => {
            c.sink().error(
                c.at("kind"),
                format!("`{other}` is not a check; expected `command` (a program on PATH), `file` (a file exists) or `path` (a folder exists)"),
            );
            c.allow_unknown();
            None
        }
    }
}

/// `exposure`: the summary agents see and the words search weighs.
fn exposure(root: &mut Obj<'_>) -> (Option<String>, Vec<String>) {
    let Some(mut e) = root.req_obj("exposure") else {
        return (None, Vec::new());
    };
    let sink = e.sink();
    let summary = e.req_text("summary");
    if let Some(s) = summary
        && s.chars().count() > SUMMARY_MAX
    {
        sink.warning(
            e.at("summary"),
            format!("the summary has {} characters; the reference gateway refuses more than {SUMMARY_MAX} (agents see it in every list: keep it short)", s.chars().count()),
        );
    }
    let mut keywords = Vec::new();
    if let Some(list) = e.opt_array("keywords") {
        for (i, value) in list.values() {
            match value.as_str() {
                Some(k) if k.trim().is_empty() => {
                    sink.error(list.at(i), "a keyword must not be empty");
                }
                Some(k) => keywords.push(k.to_owned()),
                None => sink.error(
                    list.at(i),
                    format!("expected a string, found {}", crate::read::type_name(value)),
                ),
            }
        }
        if keywords.len() > KEYWORDS_MAX {
            sink.warning(
                list.pointer().to_owned(),
                format!(
                    "{} keywords; the reference gateway refuses more than {KEYWORDS_MAX}",
                    keywords.len()
                ),
            );
        }
    }
    (summary.map(str::to_owned), keywords)
}

/// `access`: the executor (and, for an MCP server, the timeout of its calls).
fn access(root: &mut Obj<'_>) -> Option<(Executor, Option<Duration>)> {
    let mut a = root.req_obj("access")?;
    let sink = a.sink();
    let Some(protocol) = a.req_str("protocol") else {
        a.ignore("config");
        return None;
    };
    let at = a.at("protocol");
    let refuse = |why: String| {
        sink.error(at.clone(), why);
        None
    };
    let known = match fold(protocol).as_str() {
        p @ ("mcp" | "skill" | "acpagent") => p.to_owned(),
        "cli" => {
            a.ignore("config");
            return refuse("protocol `cli` is not supported: no executor of this gateway runs a command line per call (the reference gateway has none either); describe the program as an `mcp` server or an `acp-agent`, or write a camelCase descriptor with a `stdio` adapter".to_owned());
        }
        _ => {
            a.ignore("config");
            return refuse(format!(
                "`{protocol}` is not a protocol; expected `mcp`, `skill` or `acp-agent`"
            ));
        }
    };
    let mut config = a.req_obj("config")?;
    match known.as_str() {
        "mcp" => mcp(&mut config),
        "skill" => skill(&mut config).map(|e| (e, None)),
        _ => {
            no_cwd(
                &mut config,
                "the agent starts in the descriptor's folder, and each session works in the call's `cwd` argument (else config `apps.<id>.cwd`, else the home folder)",
            );
            process(&mut config).map(|p| (Executor::Acp(p), None))
        }
    }
}

/// Warns that `cwd` is ignored, saying what happens instead.
fn no_cwd(config: &mut Obj<'_>, instead: &str) {
    if config.opt_str("cwd").is_some() {
        config.sink().warning(
            config.at("cwd"),
            format!("`cwd` is not supported and is ignored: {instead}"),
        );
    }
}

/// An MCP server: stdio (`command`, `args`, `env`) or HTTP (`url`, `headers`).
fn mcp(c: &mut Obj<'_>) -> Option<(Executor, Option<Duration>)> {
    let sink = c.sink();
    let timeout = common::timeout(c, "timeout", Unit::Millis);
    let (command, url) = (c.has("command"), c.has("url"));
    let transport = c.opt_text("transport");
    let mode = match transport {
        Some("stdio") => None,
        Some("streamable-http") => Some(HttpMode::Streamable),
        Some("sse") => Some(HttpMode::Sse),
        None if command && url => {
            sink.error(
                c.pointer().to_owned(),
                "an `mcp` server has either `command` (stdio) or `url` (streamable HTTP or SSE), not both",
            );
            c.allow_unknown();
            return None;
        }
        None if command => None,
        None if url => Some(HttpMode::Detect),
        None => {
            sink.error(
                c.pointer().to_owned(),
                "missing required field `command` or `url` (how to reach the MCP server)",
            );
            c.allow_unknown();
            return None;
        }
        Some(other) => {
            sink.error(
                c.at("transport"),
                format!("unknown transport `{other}`: `stdio`, `streamable-http` or `sse`"),
            );
            c.allow_unknown();
            return None;
        }
    };
    let Some(mode) = mode else {
        if url {
            sink.error(
                c.at("url"),
                "a `stdio` server is started with `command`; `url` is for `streamable-http` and `sse`",
            );
            c.ignore("url");
        }
        no_cwd(c, "the server starts in the descriptor's folder");
        return process(c).map(|p| (Executor::Mcp(McpServer::Stdio(p)), timeout));
    };
    if command {
        sink.error(
            c.at("command"),
            "an HTTP server is reached at `url`; `command` is for `stdio`",
        );
        c.allow_unknown();
    }
    let address = c.req_text("url");
    let headers = c.opt_str_map("headers").unwrap_or_default();
    warn_of_secrets(sink, &c.at("headers"), &headers);
    let mut ok = true;
    for (name, _) in &headers {
        if let Some(why) = header_name_problem(name) {
            sink.error(c.at("headers"), why);
            ok = false;
        }
    }
    let address = address?;
    (check_url(sink, &c.at("url"), address) && ok).then(|| {
        (
            Executor::Mcp(McpServer::Http {
                url: address.to_owned(),
                headers,
                mode,
            }),
            timeout,
        )
    })
}

/// A skill's folder (`path`); a skill by `url` is refused.
fn skill(c: &mut Obj<'_>) -> Option<Executor> {
    if c.has("url") {
        c.sink().error(
            c.at("url"),
            "a skill by `url` is not supported: the gateway reads skills from disk and fetches none; download the skill's folder and give its `path`",
        );
        c.ignore("url");
        c.ignore("path");
        return None;
    }
    let path = c.req_text("path")?;
    Some(Executor::Skill(SkillFolder {
        path: path.to_owned(),
    }))
}

/// The parameters of a tool this parser writes. Ours always load; were one not to, the
/// file is rejected with the reason rather than a panic.
fn schema(sink: &crate::diagnostic::Sink, tool: &str, json: serde_json::Value) -> Option<Schema> {
    match Schema::load(&json) {
        Ok(schema) => Some(schema),
        Err(e) => {
            sink.error(
                "",
                format!("the `{tool}` tool's parameters do not load: {e}"),
            );
            None
        }
    }
}

/// The tool of a skill: the one the gateway writes for the skills it finds.
fn skill_tool(sink: &crate::diagnostic::Sink) -> Option<Tool> {
    let parameters = schema(
        sink,
        "read",
        serde_json::json!({
            "type": "object",
            "properties": {
                "section": {"type": "string", "description": "A heading of SKILL.md"},
                "file": {"type": "string", "description": "A file of the skill, relative to its folder"},
            },
        }),
    )?;
    Some(Tool {
        name: "read".to_owned(),
        description: "Read this skill: with no argument, its instructions (SKILL.md without its front matter); `section` for one section by its heading; `file` for one of its files (a path inside the skill's folder).".to_owned(),
        parameters,
        returns: None,
        timeout: None,
        read_only: true,
        undo: None,
        call: ToolCall::Forward,
        overridden: None,
    })
}

/// The tool of an ACP agent: the one the gateway's built-in coding agents have.
fn agent_tool(sink: &crate::diagnostic::Sink, name: &str, id: &str) -> Option<Tool> {
    let parameters = schema(
        sink,
        "ask",
        serde_json::json!({
            "type": "object",
            "properties": {"prompt": {
                "type": "string",
                "description": "The task or question, as you would type it to the agent",
            }},
            "required": ["prompt"],
        }),
    )?;
    Some(Tool {
        name: "ask".to_owned(),
        description: format!(
            "Give {name} a task or a question. It works in `cwd` (else the gateway's `apps.{id}.cwd`, else the home folder), may ask the user for permission, and returns its answer with the tool calls it made. Pass the returned `sessionId` to continue the conversation."
        ),
        parameters: with_session_arguments(&parameters),
        returns: None,
        timeout: None,
        read_only: false,
        undo: None,
        call: ToolCall::Envelope,
        overridden: None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::{Check, Dialect, Executor, McpServer, Origin, Platform, Severity};

    fn doc() -> Value {
        json!({
            "schemaVersion": "2.0", "version": "1.0.0",
            "app": {"name": {"default": "Tool", "de": "Werkzeug"}},
            "access": {"protocol": "mcp", "config": {"command": "tool-mcp"}},
            "exposure": {"summary": "Use when the user wants a tool."}
        })
    }

    fn parse_in(doc: &Value, id: Option<&str>) -> crate::Parsed {
        let origin = Origin {
            id,
            platform: Some(Platform::Windows),
        };
        crate::parse_with(&doc.to_string(), "t.json", &origin)
    }

    fn lines(parsed: &crate::Parsed) -> Vec<String> {
        parsed.diagnostics.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn version_two_with_access_is_this_form_and_other_files_keep_theirs() {
        let access = parse_in(&doc(), Some("tool"));
        let app = access.app.expect("loads");
        assert_eq!(app.dialect, Dialect::Access);
        assert!(access.id_from_origin);
        assert_eq!(
            (app.id.as_str(), app.bindings[0].platform),
            ("tool", Platform::Windows)
        );
        assert_eq!(app.name.resolve(Some("de-AT")), "Werkzeug");
        assert_eq!(app.name.resolve(Some("fr")), "Tool");

        // 2.0 without `access` but with a camelCase execution stays camelCase (and says
        // its version is newer than it knows).
        let camel = json!({
            "schemaVersion": "2.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": "com.example.x", "name": {"en": "X"}, "defaultLang": "en",
                    "description": "x"},
            "execution": {"type": "stdio", "command": "x"},
            "tools": []
        });
        let parsed = parse_in(&camel, Some("ignored"));
        assert_eq!(parsed.app.map(|a| a.dialect), Some(Dialect::CamelCase));
        assert!(!parsed.id_from_origin);
        // 1.0 without `execution` is a camelCase desktop file (`ipc`), never this form.
        let mut ipc = camel.clone();
        ipc["schemaVersion"] = json!("1.0");
        ipc.as_object_mut().unwrap().remove("execution");
        let parsed = parse_in(&ipc, None);
        assert_eq!(parsed.app.map(|a| a.dialect), Some(Dialect::CamelCase));
        // 2.0 with nothing of either form is read as this one, and says what it lacks.
        let bare = json!({"schemaVersion": "2.0", "version": "1.0.0", "app": {"name": "B"}});
        let parsed = parse_in(&bare, Some("b"));
        assert_eq!(
            lines(&parsed),
            [
                "t.json: error: missing required field `exposure`",
                "t.json: error: missing required field `access`"
            ]
        );
    }

    #[test]
    fn the_id_is_the_files_own_else_its_place_else_an_error_that_says_so() {
        let mut own = doc();
        own["app"]["id"] = json!("com.example.tool");
        let parsed = parse_in(&own, Some("folder"));
        assert_eq!(parsed.app.unwrap().id, "com.example.tool");
        assert!(!parsed.id_from_origin);

        let parsed = parse_in(&doc(), None);
        assert!(parsed.app.is_none());
        assert_eq!(
            lines(&parsed),
            [
                "t.json: /app: error: missing `id`: a file in this form takes its app id from its place (the folder of `<id>/aai.json`, or the name of `<id>.json`), and none was given; write `app.id` to read it on its own"
            ]
        );

        let parsed = parse_in(&doc(), Some("My Tool"));
        assert_eq!(
            lines(&parsed),
            [
                "t.json: /app: error: the app id taken from the file's folder or name, `My Tool` contains ` `; use letters, digits, `.`, `-` and `_` (reverse-DNS, e.g. `com.example.app`)"
            ]
        );
        // A short name from the place is no reverse-DNS warning.
        assert!(parse_in(&doc(), Some("tool")).diagnostics.is_empty());
    }

    #[test]
    fn unknown_fields_are_warned_with_the_field_meant() {
        let mut d = doc();
        d["exposure"]["keyword"] = json!(["x"]);
        d["access"]["config"]["agrs"] = json!(["--stdio"]);
        d["discovery"] = json!({"checks": [{"kind": "command", "command": "tool", "comand": "x"}]});
        d["app"]["iconURL"] = json!("https://example.com/i.png");
        d["acess"] = json!({});
        let parsed = parse_in(&d, Some("tool"));
        assert!(parsed.app.is_some(), "warnings only: {:?}", lines(&parsed));
        let mut warnings = lines(&parsed);
        warnings.sort();
        assert_eq!(
            warnings,
            [
                "t.json: /access/config/agrs: warning: unknown field `agrs` is ignored; did you mean `args`?",
                "t.json: /acess: warning: unknown field `acess` is ignored; did you mean `access`?",
                "t.json: /app/iconURL: warning: unknown field `iconURL` is ignored; did you mean `iconUrl`?",
                "t.json: /discovery/checks/0/comand: warning: unknown field `comand` is ignored; did you mean `command`?",
                "t.json: /exposure/keyword: warning: unknown field `keyword` is ignored; did you mean `keywords`?",
            ]
        );
        assert!(
            parsed
                .diagnostics
                .iter()
                .all(|d| d.severity == Severity::Warning)
        );
    }

    #[test]
    fn checks_keywords_and_transports_map_onto_the_model() {
        let mut d = doc();
        d["discovery"] = json!({"checks": [
            {"kind": "command", "command": "npx"},
            {"kind": "file", "path": "~/.tool/config.toml"},
            {"kind": "path", "path": "/opt/tool"}]});
        d["exposure"]["keywords"] = json!(["build", "deploy"]);
        d["access"]["config"] = json!({"url": "http://127.0.0.1:9000/mcp", "timeout": 1500});
        let app = parse_in(&d, Some("tool")).app.expect("loads");
        assert_eq!(
            app.checks,
            [
                Check::Command {
                    command: "npx".into()
                },
                Check::File {
                    path: "~/.tool/config.toml".into()
                },
                Check::Path {
                    path: "/opt/tool".into()
                },
            ]
        );
        assert_eq!(app.keywords, ["build", "deploy"]);
        let binding = &app.bindings[0];
        assert_eq!(
            binding.timeout,
            Some(std::time::Duration::from_millis(1500))
        );
        assert!(binding.tools.is_empty(), "the server lists its tools");
        let Executor::Mcp(McpServer::Http { mode, .. }) = &binding.executor else {
            panic!("{:?}", binding.executor)
        };
        assert_eq!(*mode, crate::HttpMode::Detect, "no transport: detect");

        for (transport, mode) in [
            ("sse", crate::HttpMode::Sse),
            ("streamable-http", crate::HttpMode::Streamable),
        ] {
            d["access"]["config"]["transport"] = json!(transport);
            let app = parse_in(&d, Some("tool")).app.expect("loads");
            let Executor::Mcp(McpServer::Http { mode: m, .. }) = &app.bindings[0].executor else {
                panic!()
            };
            assert_eq!(*m, mode);
        }
    }

    #[test]
    fn what_is_not_supported_is_refused_or_warned_where_it_is_written() {
        let mut cli = doc();
        cli["access"] = json!({"protocol": "cli", "config": {"command": "git"}});
        let parsed = parse_in(&cli, Some("git"));
        assert!(parsed.app.is_none());
        assert_eq!(parsed.diagnostics.len(), 1, "{:?}", lines(&parsed));
        assert!(
            lines(&parsed)[0].starts_with(
                "t.json: /access/protocol: error: protocol `cli` is not supported: no executor"
            ),
            "{:?}",
            lines(&parsed)
        );

        let mut agent = doc();
        agent["access"] =
            json!({"protocol": "acp-agent", "config": {"command": "agent", "cwd": "/work"}});
        let parsed = parse_in(&agent, Some("agent"));
        let app = parsed.app.clone().expect("a warning only");
        assert!(
            lines(&parsed)[0].starts_with(
                "t.json: /access/config/cwd: warning: `cwd` is not supported and is ignored"
            ),
            "{:?}",
            parsed.diagnostics
        );
        let tool = &app.bindings[0].tools[0];
        assert_eq!(tool.name, "ask");
        let props = tool.parameters.json()["properties"].as_object().unwrap();
        assert!(
            ["prompt", "sessionId", "cwd"]
                .iter()
                .all(|p| props.contains_key(*p))
        );
    }
}
