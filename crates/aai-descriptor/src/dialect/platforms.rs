//! Dialect D0, "platforms" (docs/descriptors.md, platforms): one file, one app,
//! one `platforms.<os>` section per platform, each with its own automation and tools.
//!
//! Timeouts are seconds except Android's milliseconds. Defaults are the format's: 30 s,
//! Android 5,000 ms, iOS 10 s.

use std::time::Duration;

use serde_json::Value;

use super::common::{
    self, DbusName, ToolBase, Unit, app_id, check_dbus_name, check_placeholders,
    check_unique_names, check_value_placeholders, fold, tool_base,
};
use crate::model::*;
use crate::name::AppName;
use crate::read::Obj;

pub(crate) fn parse(root: &mut Obj<'_>) -> Option<App> {
    root.ignore("$schema");
    let schema_version = root.req_str("schema_version");
    if let Some(v) = schema_version {
        let ok = v
            .split_once('.')
            .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok());
        if !ok {
            root.sink().warning(
                root.at("schema_version"),
                format!("`{v}` is not of the form MAJOR.MINOR (e.g. \"1.0\")"),
            );
        }
    }
    let id = app_id(root, "appId");
    let name = root.req_text("name").map(AppName::from_pipe);
    let description = root.opt_str("description").unwrap_or_default().to_owned();
    let version = root.opt_str("version").map(str::to_owned);
    let aliases = root.opt_str_list("aliases").unwrap_or_default();
    let mut platforms = root.req_obj("platforms")?;

    let mut bindings = Vec::new();
    let mut any = false;
    for platform in [
        Platform::Macos,
        Platform::Windows,
        Platform::Linux,
        Platform::Android,
        Platform::Ios,
    ] {
        let Some(mut section) = platforms.opt_obj(platform.as_str()) else {
            any |= platforms.has(platform.as_str());
            continue;
        };
        any = true;
        if let Some(b) = binding(&mut section, platform) {
            bindings.push(b);
        }
    }
    if !any {
        root.sink().error(
            platforms.pointer().to_owned(),
            "no platform defined; expected at least one of `macos`, `windows`, `linux`, `android`, `ios`",
        );
    }
    Some(App {
        id: id?,
        name: name?,
        description,
        aliases,
        keywords: Vec::new(),
        checks: Vec::new(),
        version,
        schema_version: schema_version?.to_owned(),
        dialect: Dialect::Platforms,
        bindings,
    })
}

fn binding(section: &mut Obj<'_>, platform: Platform) -> Option<Binding> {
    let (expected, default_timeout, unit): (&[&str], Duration, Unit) = match platform {
        Platform::Macos => (
            &["applescript", "jxa"],
            Duration::from_secs(30),
            Unit::Seconds,
        ),
        Platform::Windows => (&["com"], Duration::from_secs(30), Unit::Seconds),
        Platform::Linux => (&["dbus"], Duration::from_secs(30), Unit::Seconds),
        Platform::Android => (&["intent"], Duration::from_millis(5000), Unit::Millis),
        Platform::Ios => (&["url_scheme"], Duration::from_secs(10), Unit::Seconds),
        Platform::Web => unreachable!("D0 has no web platform"),
    };
    let automation = section.req_str("automation")?;
    let Some(automation) = expected
        .iter()
        .copied()
        .find(|e| fold(e) == fold(automation))
    else {
        section.sink().error(
            section.at("automation"),
            format!(
                "`{automation}` is not an automation type for {}; expected {}",
                platform.as_str(),
                expected
                    .iter()
                    .map(|e| format!("`{e}`"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        );
        section.allow_unknown();
        return None;
    };
    // The settings may be broken while the tools are fine (or the reverse): read both,
    // so one pass reports every problem.
    let executor = match automation {
        "applescript" => Some(Executor::Applescript),
        "jxa" => Some(Executor::Jxa),
        "com" => Some(Executor::Com(Com {
            prog_id: section.opt_text("progid").map(str::to_owned),
        })),
        "dbus" => dbus(section).map(Executor::Dbus),
        "intent" => section.req_text("package").map(|p| {
            Executor::Intent(Intent {
                package: p.to_owned(),
            })
        }),
        "url_scheme" => section.req_text("scheme").map(|s| {
            Executor::UrlScheme(UrlScheme {
                scheme: s.to_owned(),
            })
        }),
        other => unreachable!("{other} is in the expected list"),
    };
    let tools_array = section.req_array("tools")?;
    // Exact: a large catalog keeps every app's tools for as long as it runs.
    let mut tools = Vec::with_capacity(tools_array.len());
    for (_, mut obj) in tools_array.objects() {
        if let Some(t) = tool(&mut obj, automation, executor.as_ref(), unit) {
            tools.push(t);
        }
    }
    check_unique_names(
        section.sink(),
        tools_array.pointer(),
        tools_array
            .values()
            .filter_map(|(i, v)| Some((i, v.get("name")?.as_str()?))),
    );
    crate::undo::check_all(section.sink(), tools_array.pointer(), tools_array.raw());
    let events = crate::event::read(section, automation == "dbus");
    Some(Binding {
        platform,
        executor: executor?,
        auth: None,
        timeout: Some(default_timeout),
        tools,
        events,
    })
}

fn dbus(section: &mut Obj<'_>) -> Option<Dbus> {
    let sink = section.sink();
    let service = section.req_text("service")?;
    let object = section
        .opt_text("object")
        .map(str::to_owned)
        .unwrap_or_else(|| common::path_from_id(service));
    let interface = section.opt_text("interface").unwrap_or(service).to_owned();
    let bus = match section.opt_str("bus") {
        None | Some("session") => Bus::Session,
        Some("system") => Bus::System,
        Some(other) => {
            sink.error(
                section.at("bus"),
                format!("`{other}` is not a bus; expected `session` or `system`"),
            );
            return None;
        }
    };
    let ok = check_dbus_name(sink, &section.at("service"), DbusName::Bus, service)
        & check_dbus_name(sink, &section.at("object"), DbusName::Path, &object)
        & check_dbus_name(
            sink,
            &section.at("interface"),
            DbusName::Interface,
            &interface,
        );
    ok.then(|| Dbus {
        bus,
        service: service.to_owned(),
        object_path: object,
        interface,
    })
}

fn tool(
    obj: &mut Obj<'_>,
    automation: &str,
    executor: Option<&Executor>,
    unit: Unit,
) -> Option<Tool> {
    let base = tool_base(obj);
    let timeout = common::timeout(obj, "timeout", unit);
    let call = match (automation, executor) {
        ("applescript", _) => script(obj, crate::script::Lang::AppleScript, base.as_ref()),
        ("jxa", _) => script(obj, crate::script::Lang::JavaScript, base.as_ref()),
        ("com", Some(Executor::Com(com))) => com_script(obj, com, base.as_ref()),
        ("dbus", _) => dbus_method(obj),
        ("intent", _) => intent(obj, base.as_ref()),
        ("url_scheme", u) => {
            let scheme = match u {
                Some(Executor::UrlScheme(u)) => Some(u.scheme.as_str()),
                _ => None,
            };
            url(obj, scheme, base.as_ref())
        }
        _ => unreachable!("D0 automation types only"),
    };
    let ToolBase {
        name,
        description,
        parameters,
        returns,
        read_only,
        undo,
        ..
    } = base?;
    Some(Tool {
        name,
        description,
        parameters,
        returns,
        timeout,
        read_only,
        undo,
        call: call?,
        overridden: None,
    })
}

fn script(
    obj: &mut Obj<'_>,
    lang: crate::script::Lang,
    base: Option<&ToolBase>,
) -> Option<ToolCall> {
    let source = obj.req_text("script")?;
    if let Some(b) = base {
        check_placeholders(obj.sink(), &obj.at("script"), source, b.params_json);
    }
    if !check_script_slots(obj, lang, source, base) {
        return None;
    }
    let output = match obj.opt_str("output_parser").map(fold).as_deref() {
        None | Some("resultastext") => ScriptOutput::Text,
        Some("resultasrecord") => ScriptOutput::Record,
        Some(_) => {
            obj.sink().error(
                obj.at("output_parser"),
                "expected `result as text` or `result as record`",
            );
            return None;
        }
    };
    Some(ToolCall::Script {
        source: source.to_owned(),
        output,
    })
}

/// Every placeholder of a script must be data: inside a string literal, in a comment, or
/// (in code) a parameter the schema types as number, integer or boolean. A script whose
/// literals do not close is refused too (its placeholders could not be placed).
fn check_script_slots(
    obj: &mut Obj<'_>,
    lang: crate::script::Lang,
    source: &str,
    base: Option<&ToolBase>,
) -> bool {
    use crate::script::{Context, Piece};
    let at = obj.at("script");
    let pieces = match crate::script::parse(lang, source) {
        Ok(p) => p,
        Err(e) => {
            obj.sink()
                .error(at, format!("the script cannot be read: {e}"));
            return false;
        }
    };
    let mut ok = true;
    for piece in pieces {
        let Piece::Slot {
            name,
            context: Context::Code,
        } = piece
        else {
            continue;
        };
        let ty = base
            .and_then(|b| b.params_json.pointer(&format!("/properties/{name}/type")))
            .and_then(Value::as_str);
        if !matches!(ty, Some("number" | "integer" | "boolean")) {
            obj.sink().error(
                at.clone(),
                format!(
                    "placeholder `${{{name}}}` is outside a string literal, where a value would become code; put it inside quotes, or declare `{name}` as a number, integer or boolean"
                ),
            );
            ok = false;
        }
    }
    ok
}

fn dbus_method(obj: &mut Obj<'_>) -> Option<ToolCall> {
    native_dbus(obj).unwrap_or_else(|| {
        // Still check the rest of the tool, so one pass reports everything.
        dbus_output(obj);
        obj.sink().error(
            obj.pointer().to_owned(),
            "missing required field `method` (or `property`, to read or write a D-Bus property)",
        );
        None
    })
}

/// A native D-Bus tool: `method` (the format's convention) or `property` (our extension),
/// each with an optional `interface`. `None` when the tool has neither.
pub(crate) fn native_dbus(obj: &mut Obj<'_>) -> Option<Option<ToolCall>> {
    let sink = obj.sink();
    let interface = obj.opt_text("interface").map(str::to_owned);
    if let Some(i) = &interface
        && !check_dbus_name(sink, &obj.at("interface"), DbusName::Interface, i)
    {
        return Some(None);
    }
    if obj.has("method") {
        let method = obj.req_text("method");
        let output = dbus_output(obj);
        return Some((|| {
            let method = method?;
            check_dbus_name(sink, &obj.at("method"), DbusName::Member, method).then_some(())?;
            Some(ToolCall::DbusMethod {
                method: method.to_owned(),
                interface,
                output: output?,
            })
        })());
    }
    if obj.has("property") {
        let property = obj.req_text("property");
        let write = match obj.opt_str("access") {
            None | Some("read") => Some(false),
            Some("write") => Some(true),
            Some(other) => {
                sink.error(
                    obj.at("access"),
                    format!("`{other}` is not a property access; expected `read` or `write`"),
                );
                None
            }
        };
        return Some((|| {
            let property = property?;
            check_dbus_name(sink, &obj.at("property"), DbusName::Member, property).then_some(())?;
            Some(ToolCall::DbusProperty {
                property: property.to_owned(),
                interface,
                write: write?,
            })
        })());
    }
    None
}

/// `output_parser` of a native D-Bus tool: `json` (default) or `string`.
pub(crate) fn dbus_output(obj: &mut Obj<'_>) -> Option<DbusOutput> {
    match obj.opt_str("output_parser") {
        None | Some("json") => Some(DbusOutput::Json),
        Some("string") => Some(DbusOutput::String),
        Some(other) => {
            obj.sink().error(
                obj.at("output_parser"),
                format!("`{other}` is not an output parser; expected `json` or `string`"),
            );
            None
        }
    }
}

fn com_script(obj: &mut Obj<'_>, com: &Com, base: Option<&ToolBase>) -> Option<ToolCall> {
    match obj.opt_str("output_parser") {
        None | Some("last_result") => {}
        Some(other) => obj.sink().error(
            obj.at("output_parser"),
            format!("`{other}` is not an output parser; expected `last_result`"),
        ),
    }
    let steps_array = obj.req_array("script")?;
    if steps_array.is_empty() {
        obj.sink().error(
            steps_array.pointer().to_owned(),
            "the COM action list is empty",
        );
        return None;
    }
    let mut vars: Vec<String> = Vec::new();
    let mut steps = Vec::new();
    let mut ok = true;
    for (_, mut step) in steps_array.objects() {
        match com_step(&mut step, com, &mut vars, base) {
            Some(s) => steps.push(s),
            None => ok = false,
        }
    }
    ok.then_some(ToolCall::ComScript { steps })
}

fn com_step(
    step: &mut Obj<'_>,
    com: &Com,
    vars: &mut Vec<String>,
    base: Option<&ToolBase>,
) -> Option<ComStep> {
    let sink = step.sink();
    let action = step.req_str("action")?;
    let object = |step: &mut Obj<'_>, vars: &Vec<String>| -> Option<String> {
        let name = step.req_text("object")?;
        if !vars.iter().any(|v| v == name) {
            sink.error(
                step.at("object"),
                format!("object `{name}` is not defined by an earlier step's `var`"),
            );
            return None;
        }
        Some(name.to_owned())
    };
    let templ = |step: &Obj<'_>, key: &str, v: &Value| {
        if let Some(b) = base {
            check_value_placeholders(sink, &step.at(key), v, b.params_json);
        }
    };
    let parsed = match action {
        "create" => {
            let var = step.req_text("var");
            let prog_id = step
                .opt_text("progid")
                .or(com.prog_id.as_deref())
                .map(str::to_owned);
            if prog_id.is_none() && !step.has("progid") {
                step.missing("progid");
            }
            ComStep::Create {
                var: var?.to_owned(),
                prog_id: prog_id?,
            }
        }
        "call" => {
            let var = step.opt_text("var").map(str::to_owned);
            let object = object(step, vars);
            let method = step.req_text("method");
            let args = match step.opt_array("args") {
                Some(a) => a.values().map(|(_, v)| v.clone()).collect(),
                None if step.has("args") => return None,
                None => Vec::new(),
            };
            if let Some(v) = step.get("args") {
                templ(step, "args", v);
            }
            ComStep::Call {
                var,
                object: object?,
                method: method?.to_owned(),
                args,
            }
        }
        "set" => {
            let object = object(step, vars);
            let property = step.req_text("property");
            let value = step.req("value").cloned();
            if let Some(v) = &value {
                templ(step, "value", v);
            }
            ComStep::Set {
                object: object?,
                property: property?.to_owned(),
                value: value?,
            }
        }
        "get" => ComStep::Get {
            var: step.opt_text("var").map(str::to_owned),
            object: object(step, vars)?,
            property: step.req_text("property")?.to_owned(),
        },
        "return" => {
            let value = step.get("value").cloned();
            let var = step.opt_text("var").map(str::to_owned);
            if let Some(v) = &value {
                templ(step, "value", v);
            }
            if let Some(name) = &var
                && !vars.contains(name)
            {
                sink.error(
                    step.at("var"),
                    format!("variable `{name}` is not defined by an earlier step"),
                );
                return None;
            }
            if value.is_none() && var.is_none() {
                sink.error(
                    step.pointer().to_owned(),
                    "a `return` step needs `value` or `var`",
                );
                return None;
            }
            ComStep::Return { value, var }
        }
        other => {
            sink.error(
                step.at("action"),
                format!("`{other}` is not a COM action; expected `create`, `call`, `set`, `get` or `return`"),
            );
            return None;
        }
    };
    if !com_names_ok(step, &parsed) {
        return None;
    }
    if let ComStep::Create { var, .. }
    | ComStep::Call { var: Some(var), .. }
    | ComStep::Get { var: Some(var), .. } = &parsed
    {
        vars.push(var.clone());
    }
    Some(parsed)
}

/// Names that go into the PowerShell script must be plain: variables, methods and
/// properties are identifiers, ProgIDs dotted identifiers (`Outlook.Application.16`).
fn com_names_ok(step: &Obj<'_>, parsed: &ComStep) -> bool {
    let ident = |s: &str| {
        let mut c = s.chars();
        c.next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
            && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
    };
    let prog = |s: &str| {
        let mut parts = s.split('.');
        parts.next().is_some_and(ident)
            && parts.all(|p| {
                !p.is_empty() && p.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
            })
    };
    let mut names: Vec<(&str, &str, bool)> = Vec::new();
    match parsed {
        ComStep::Create { var, prog_id } => {
            names.push(("var", var, ident(var)));
            names.push(("progid", prog_id, prog(prog_id)));
        }
        ComStep::Call { var, method, .. } => {
            names.extend(var.as_deref().map(|v| ("var", v, ident(v))));
            names.push(("method", method, ident(method)));
        }
        ComStep::Set { property, .. } => names.push(("property", property, ident(property))),
        ComStep::Get { var, property, .. } => {
            names.extend(var.as_deref().map(|v| ("var", v, ident(v))));
            names.push(("property", property, ident(property)));
        }
        ComStep::Return { .. } => {}
    }
    let mut ok = true;
    for (key, name, good) in names {
        if !good {
            step.sink().error(
                step.at(key),
                format!("`{name}` is not a valid COM name here; letters, digits and `_` (and `.` between the parts of a ProgID)"),
            );
            ok = false;
        }
    }
    ok
}

fn intent(obj: &mut Obj<'_>, base: Option<&ToolBase>) -> Option<ToolCall> {
    let action = obj.req_text("action");
    let extras = match obj.opt_obj("extras") {
        Some(e) => {
            let at = e.pointer().to_owned();
            let extras: Vec<(String, Value)> =
                e.entries().map(|(k, v)| (k.clone(), v.clone())).collect();
            if let Some(b) = base {
                for (k, v) in &extras {
                    check_value_placeholders(
                        obj.sink(),
                        &crate::diagnostic::join_pointer(&at, k),
                        v,
                        b.params_json,
                    );
                }
            }
            extras
        }
        None if obj.has("extras") => return None,
        None => Vec::new(),
    };
    let result = match obj.opt_str("result_type") {
        None | Some("broadcast") => {
            obj.ignore("result_uri");
            IntentResult::Broadcast
        }
        Some("content_provider") => IntentResult::ContentProvider {
            uri: obj.req_text("result_uri")?.to_owned(),
        },
        Some(other) => {
            obj.sink().error(
                obj.at("result_type"),
                format!(
                    "`{other}` is not a result type; expected `content_provider` or `broadcast`"
                ),
            );
            return None;
        }
    };
    Some(ToolCall::Intent {
        action: action?.to_owned(),
        extras,
        result,
    })
}

fn url(obj: &mut Obj<'_>, scheme: Option<&str>, base: Option<&ToolBase>) -> Option<ToolCall> {
    let template = obj.req_text("url_template")?;
    let at = obj.at("url_template");
    if let Some(b) = base {
        check_placeholders(obj.sink(), &at, template, b.params_json);
    }
    if let Some(scheme) = scheme.filter(|s| !template.starts_with(&format!("{s}:"))) {
        obj.sink().warning(
            at,
            format!("URL template does not start with the app's scheme `{scheme}:`"),
        );
    }
    let result = match obj.opt_str("result_type") {
        None => None,
        Some("clipboard") => Some(UrlResult::Clipboard),
        Some("app_group") => Some(UrlResult::AppGroup {
            group_id: obj.req_text("app_group_id")?.to_owned(),
        }),
        Some(other) => {
            obj.sink().error(
                obj.at("result_type"),
                format!("`{other}` is not a result type; expected `app_group` or `clipboard`"),
            );
            return None;
        }
    };
    if !matches!(result, Some(UrlResult::AppGroup { .. })) {
        obj.ignore("app_group_id");
    }
    Some(ToolCall::Url {
        template: template.to_owned(),
        result,
    })
}
