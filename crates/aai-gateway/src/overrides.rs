//! The user's changes to apps' tools (config `apps.<appId>.tools.<tool>`, docs/config.md
//! "Tool overrides"): another name, description or read-only annotation, arguments fixed
//! to a value (agents neither see nor send them), other defaults.
//!
//! They are applied to each scan's apps before the snapshot is built ([`apply`]), so that
//! `tools/list`, guides, search, the resource `app:<id>`, consent and history all see the
//! effective tool, whatever its executor. The executor gets the tool as the app defines
//! it ([`aai_descriptor::Tool::as_defined`]) and the arguments with the fixed ones
//! ([`without_fixed`] before validation, [`with_fixed`] after). The consent fingerprint
//! covers the name the app is called by and the fixed values, so changing either asks
//! again.
//!
//! An override that cannot be applied (an unknown argument, a value its schema refuses,
//! a name another tool has) is an error of `config.json` (logged once, shown by
//! `validate`, `--scan` and the app's page), and its tool is not served: served as
//! defined, it would run without the arguments the user fixed. The app's own schema
//! still checks what the app gets (`pipeline/call.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use aai_descriptor::diagnostic::join_pointer;
use aai_descriptor::read::Obj;
use aai_descriptor::{App, Overridden, Schema, Sink, Tool};
use serde_json::{Map, Value};

use crate::error::{Code, GatewayError};

/// What the diagnostics of overrides name as their file.
const SOURCE: &str = "config.json";

/// Keywords at the top of a parameters schema that say more of its arguments than
/// `properties` and `required`.
const COMPOSED: [&str; 14] = [
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "$ref",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "minProperties",
    "maxProperties",
    "propertyNames",
    "patternProperties",
    "unevaluatedProperties",
];

/// The keys of one tool's override.
const KEYS: [&str; 5] = ["name", "description", "readOnly", "fixed", "defaults"];

/// One tool's override (`apps.<appId>.tools.<tool>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolOverride {
    /// `name`: the name agents see and call.
    pub name: Option<String>,
    /// `description`: what agents read.
    pub description: Option<String>,
    /// `readOnly`: the read-only annotation (`consent.readOnly: "allow"` runs read-only
    /// tools without asking).
    pub read_only: Option<bool>,
    /// `fixed`: arguments every call gets with these values, left out of the schema.
    pub fixed: Map<String, Value>,
    /// `defaults`: arguments' defaults (an argument with one is no longer required).
    pub defaults: Map<String, Value>,
}

/// Reads `apps.<appId>.tools` (`at`), by the tool's own name.
pub(crate) fn parse(sink: &Sink, value: &Value, at: String) -> BTreeMap<String, ToolOverride> {
    let Some(tools) = Obj::new(sink, value, at.clone()) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for (tool, value) in tools.entries() {
        let pointer = join_pointer(&at, tool);
        let Some(mut o) = Obj::new(sink, value, pointer) else {
            continue;
        };
        // A misspelt key would leave an argument the user meant to fix open: an error.
        o.allow_unknown();
        if let Value::Object(given) = value {
            for key in given.keys().filter(|k| !KEYS.contains(&k.as_str())) {
                sink.error(
                    o.at(&printable(key)),
                    format!(
                        "unknown key `{}`; expected one of {}",
                        printable(key),
                        KEYS.join(", ")
                    ),
                );
            }
        }
        let mut map = |key: &'static str| match o.get(key) {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                sink.error(o.at(key), "expected an object of argument names and values");
                Map::new()
            }
        };
        let fixed = map("fixed");
        let defaults = map("defaults");
        let name = o.opt_text("name").map(str::to_owned);
        if let Some(bad) = name
            .as_deref()
            .filter(|n| !aai_descriptor::portable_tool_name(n))
        {
            sink.error(
                o.at("name"),
                format!(
                    "`{}` is not 1-64 characters of letters, digits, `_`, `-` and `.`",
                    crate::text::excerpt(bad, 80)
                ),
            );
        }
        let read = ToolOverride {
            name,
            description: o.opt_str("description").map(str::to_owned),
            read_only: o.opt_bool("readOnly"),
            fixed,
            defaults,
        };
        out.insert(tool.clone(), read);
    }
    out
}

/// Applies `overrides` (by the tool's own name) to the tools of every binding of `app`;
/// what cannot be applied is reported to `sink` (at `apps/<id>/tools/<tool>`), and its
/// tool is not served. Applying them again to an app that has them starts from the tools
/// as defined.
pub(crate) fn apply(app: &mut App, overrides: &BTreeMap<String, ToolOverride>, sink: &Sink) {
    let at = |tool: &str| {
        let app = join_pointer("/apps", &app.id);
        join_pointer(&join_pointer(&app, "tools"), &printable(tool))
    };
    let mut unknown: Vec<&String> = overrides.keys().collect();
    let mut pending = Vec::new();
    for binding in &app.bindings {
        let mut renamed = BTreeMap::new();
        let mut tools = binding.tools.clone();
        // A new name may be no other tool's, as defined or as renamed (nor the same in
        // `flat` exposure, where `.` becomes `_`).
        let mut taken: Vec<String> = tools.iter().map(|t| flat(&t.as_defined().name)).collect();
        let mut withheld = Vec::new();
        for tool in &mut tools {
            let defined = tool.as_defined().clone();
            *tool = defined.clone();
            let Some(o) = overrides.get(&defined.name) else {
                continue;
            };
            unknown.retain(|name| **name != defined.name);
            // The gateway's own tools of a server (`mcp.resources.read`, …): it calls
            // them by name itself; they stay as they are.
            if defined.name.starts_with("mcp.") {
                sink.error(
                    at(&defined.name),
                    "tools named `mcp.…` are the gateway's own reading of a server's resources and prompts; they cannot be changed",
                );
                continue;
            }
            match effective(&defined, o, &taken) {
                Ok(changed) => {
                    if changed.name != defined.name {
                        taken.push(flat(&changed.name));
                        renamed.insert(defined.name.clone(), changed.name.clone());
                    }
                    *tool = changed;
                }
                Err(why) => {
                    sink.error(
                        at(&defined.name),
                        format!("{why}; the tool is not served until this is fixed"),
                    );
                    withheld.push(defined.name.clone());
                }
            }
        }
        // An override that cannot apply keeps its tool from agents: served as defined it
        // would run without the arguments the user fixed (an app can make an override
        // fail at any time, by a new tool or a changed schema).
        tools.retain(|t| t.overridden.is_some() || !withheld.contains(&t.name));
        // An undo names the tool that undoes: by the name it is called by now.
        for tool in &mut tools {
            if let Some(undo) = &mut tool.undo
                && let Some(new) = renamed.get(&undo.tool)
            {
                undo.tool.clone_from(new);
            }
        }
        pending.push(tools);
    }
    for (binding, tools) in app.bindings.iter_mut().zip(pending) {
        binding.tools = tools;
    }
    // A server that has not listed its tools yet has none to change.
    if app.bindings.iter().any(|b| !b.tools.is_empty()) {
        for name in unknown {
            sink.error(
                at(name),
                format!(
                    "`{}` has no tool `{}`; nothing is changed",
                    app.id,
                    printable(name)
                ),
            );
        }
    }
}

/// `tool` as `o` changes it, or why it cannot be; `taken`: the names a new name may not
/// be.
fn effective(tool: &Tool, o: &ToolOverride, taken: &[String]) -> Result<Tool, String> {
    let mut out = tool.clone();
    if let Some(name) = &o.name {
        if !aai_descriptor::portable_tool_name(name) {
            return Err(format!(
                "the name `{}` is not 1-64 characters of letters, digits, `_`, `-` and `.`",
                crate::text::excerpt(name, 80)
            ));
        }
        // Another tool's name, as defined or renamed, or the same in `flat` exposure
        // (this tool's own entry in `taken` aside).
        let own = usize::from(flat(name) == flat(&tool.name));
        if *name != tool.name && taken.iter().filter(|t| **t == flat(name)).count() > own {
            return Err(format!(
                "another tool of the app is named `{name}` (or the same with `_` for `.`)"
            ));
        }
        out.name.clone_from(name);
    }
    if let Some(description) = &o.description {
        out.description.clone_from(description);
    }
    if let Some(read_only) = o.read_only {
        out.read_only = read_only;
    }
    if !o.fixed.is_empty() || !o.defaults.is_empty() {
        out.parameters = parameters(tool, o)?;
    }
    out.overridden = Some(Arc::new(Overridden {
        original: tool.clone(),
        fixed: o.fixed.clone(),
    }));
    Ok(out)
}

/// `tool`'s parameter schema without the fixed arguments and with the new defaults; each
/// value checked against the argument's own schema.
fn parameters(tool: &Tool, o: &ToolOverride) -> Result<Schema, String> {
    let mut json = tool.parameters.json().clone();
    let Some(schema) = json.as_object_mut() else {
        return Err("its parameters are not an object schema".into());
    };
    // Arguments are taken out of `properties` and `required`: a schema that says more of
    // them elsewhere at its top (`allOf`, a `$ref`, counts) would still ask for them.
    if let Some(key) = COMPOSED.iter().find(|k| schema.contains_key(**k)) {
        return Err(format!(
            "its parameters' schema has `{key}` at its top; arguments can be fixed or given defaults only in a plain object schema"
        ));
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (name, value) in o.fixed.iter().chain(&o.defaults) {
        let declared = tool.parameters.has_property(name);
        if !declared && (closed || o.defaults.contains_key(name)) {
            return Err(format!("the tool has no argument `{}`", printable(name)));
        }
        fits(tool, name, value)?;
    }
    if let Some(both) = o.fixed.keys().find(|k| o.defaults.contains_key(*k)) {
        return Err(format!(
            "`{}` is both fixed and given a default",
            printable(both)
        ));
    }
    let properties = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(properties) = properties.as_object_mut() {
        for name in o.fixed.keys() {
            properties.remove(name);
        }
        for (name, value) in &o.defaults {
            if let Some(Value::Object(property)) = properties.get_mut(name) {
                property.insert("default".into(), value.clone());
            }
        }
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|r| {
            r.as_str()
                .is_none_or(|r| !o.fixed.contains_key(r) && !o.defaults.contains_key(r))
        });
        if required.is_empty() {
            schema.remove("required");
        }
    }
    Schema::compile(&json).map_err(|e| format!("its changed parameters do not compile: {e}"))
}

/// Whether `value` fits the schema of `tool`'s argument `name` (what the tool's whole
/// schema says of it). The error names where in the schema it failed, never the value
/// (nor its keys): a fixed value may be something the user keeps to themselves.
fn fits(tool: &Tool, name: &str, value: &Value) -> Result<(), String> {
    let validator = tool
        .parameters
        .validator()
        .map_err(|e| format!("its parameters do not compile: {e}"))?;
    let mut one = Map::new();
    one.insert(name.to_owned(), value.clone());
    let one = Value::Object(one);
    let prefix = join_pointer("", name);
    let refused = validator.iter_errors(&one).find(|e| {
        use jsonschema::error::ValidationErrorKind as Kind;
        let path = e.instance_path().as_str();
        path == prefix
            || path.starts_with(&format!("{prefix}/"))
            // An argument the schema does not declare, refused by the object itself.
            || (path.is_empty() && !matches!(e.kind(), Kind::Required { .. }))
    });
    match refused {
        None => Ok(()),
        Some(e) => Err(format!(
            "the value for `{}` does not fit its schema (at `{}`)",
            printable(name),
            e.schema_path().as_str()
        )),
    }
}

/// A call sent an argument the user fixed with another value.
#[derive(Debug, thiserror::Error)]
#[error("the argument `{argument}` of `{tool}` is fixed by the user's configuration; leave it out")]
pub(crate) struct Fixed {
    argument: String,
    tool: String,
}

impl From<Fixed> for GatewayError {
    fn from(e: Fixed) -> GatewayError {
        GatewayError::new(Code::InvalidParams, e.to_string())
    }
}

/// The caller's `args` without the arguments the user fixed for `tool` (they are added
/// back after validation, [`with_fixed`]): one sent with its fixed value is taken out (an
/// undo made from a recorded call sends it), one sent with another value is refused.
pub(crate) fn without_fixed(tool: &Tool, mut args: Option<Value>) -> Result<Option<Value>, Fixed> {
    let Some(o) = tool.overridden.as_ref().filter(|o| !o.fixed.is_empty()) else {
        return Ok(args);
    };
    if let Some(Value::Object(given)) = &mut args {
        for (name, value) in &o.fixed {
            match given.remove(name) {
                Some(sent) if !same(&sent, value) => {
                    return Err(Fixed {
                        argument: name.clone(),
                        tool: tool.name.clone(),
                    });
                }
                _ => {}
            }
        }
    }
    Ok(args)
}

/// `args` with the arguments the user fixed for `tool`: what its app gets.
pub(crate) fn with_fixed(tool: &Tool, mut args: Value) -> Value {
    if let (Some(o), Value::Object(given)) = (&tool.overridden, &mut args) {
        for (name, value) in &o.fixed {
            given.insert(name.clone(), value.clone());
        }
    }
    args
}

/// What the user changed of `tool`, in one line for people (`validate`, the web UI): the
/// tool as its app defines it, next to the effective one; `None` when it is unchanged.
pub(crate) fn summary(tool: &Tool) -> Option<String> {
    let o = tool.overridden.as_ref()?;
    let was = &o.original;
    let mut parts = Vec::new();
    if was.name != tool.name {
        parts.push(format!("the app names it `{}`", was.name));
    }
    if was.description != tool.description {
        parts.push(format!(
            "the app describes it as \u{201c}{}\u{201d}",
            crate::text::excerpt(&was.description, 160)
        ));
    }
    if was.read_only != tool.read_only {
        parts.push(if tool.read_only {
            "read-only here (the app does not say so)".to_owned()
        } else {
            "not read-only here (the app says it is)".to_owned()
        });
    }
    let shown = |v: &Value| crate::text::excerpt(&v.to_string(), 80);
    if !o.fixed.is_empty() {
        let fixed: Vec<String> = o
            .fixed
            .iter()
            .map(|(k, v)| format!("`{k}` = {}", shown(v)))
            .collect();
        parts.push(format!("fixed: {}", fixed.join(", ")));
    }
    let default = |t: &Tool, name: &str| {
        t.parameters.json()["properties"][name]
            .get("default")
            .cloned()
    };
    let defaults: Vec<String> = tool
        .parameters
        .property_names()
        .filter_map(|name| {
            let now = default(tool, name)?;
            (default(was, name).as_ref() != Some(&now))
                .then(|| format!("`{name}` = {}", shown(&now)))
        })
        .collect();
    if !defaults.is_empty() {
        parts.push(format!("defaults: {}", defaults.join(", ")));
    }
    if parts.is_empty() {
        parts.push("as the app defines it".to_owned());
    }
    Some(parts.join("; "))
}

/// Whether a value sent is the fixed one: numbers by value (`5.0` is `5`), the rest as
/// JSON.
fn same(sent: &Value, fixed: &Value) -> bool {
    match (sent, fixed) {
        (Value::Number(a), Value::Number(b)) => a == b || a.as_f64() == b.as_f64(),
        _ => sent == fixed,
    }
}

/// A name from the config on one line, with control and direction characters escaped.
fn printable(text: &str) -> String {
    crate::text::printable_lines(&text.replace('\n', "\\n").replace('\t', "\\t"))
}

/// `name` as `flat` exposure names it (`.` becomes `_`; the other characters of a valid
/// name stay).
fn flat(name: &str) -> String {
    name.replace('.', "_")
}

/// Applies to each of `apps` the overrides `of` gives for its id; what cannot be applied,
/// as diagnostics.
pub(crate) fn apply_all<'a>(
    of: impl Fn(&str) -> Option<&'a BTreeMap<String, ToolOverride>>,
    apps: impl Iterator<Item = &'a mut Arc<App>>,
) -> Vec<aai_descriptor::Diagnostic> {
    let sink = Sink::new(SOURCE);
    for app in apps {
        if let Some(overrides) = of(&app.id).filter(|o| !o.is_empty()) {
            apply(Arc::make_mut(app), overrides, &sink);
        }
    }
    sink.into_vec()
}

#[cfg(test)]
#[path = "overrides_tests.rs"]
mod tests;
