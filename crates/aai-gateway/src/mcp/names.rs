//! Listed tool names and descriptions.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::{Map, Value, json};

use crate::registry::{Entry, Snapshot};

/// Longest listed name (Claude counts its `mcp__<server>__` prefix against 64).
const MAX_NAME: usize = 64;

/// `app_<slug>`: `【names】description. Aliases: …. Call to get guide.`
pub(super) fn app_tool(snapshot: &Snapshot, entry: &Entry) -> Tool {
    let app = &entry.app;
    let mut names = vec![snapshot.name(entry)];
    for n in app.name.all() {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let mut description = format!(
        "【{}】{}",
        names.join("|"),
        app.description.trim_end_matches('.')
    );
    if !app.aliases.is_empty() {
        description.push_str(&format!(". Aliases: {}", app.aliases.join(", ")));
    }
    description.push_str(". Call to get guide.");
    Tool::new(format!("app_{}", entry.slug), description, empty_object())
}

fn empty_object() -> Arc<Map<String, Value>> {
    static EMPTY: std::sync::OnceLock<Arc<Map<String, Value>>> = std::sync::OnceLock::new();
    EMPTY
        .get_or_init(|| match json!({"type": "object"}) {
            Value::Object(m) => Arc::new(m),
            _ => unreachable!(),
        })
        .clone()
}

/// The flat name of a tool: `<slug>__<tool>` with unsafe characters as `_`, cut to 64.
pub(super) fn flat_name(entry: &Entry, tool: &str) -> String {
    let mut name = format!("{}__{}", entry.slug, crate::registry::slug::sanitize(tool));
    if name.len() > MAX_NAME {
        name.truncate(MAX_NAME);
    }
    name
}

/// Every tool of an app, with its full schema (`flat` exposure).
pub(super) fn flat_tools(entry: &Entry) -> Vec<Tool> {
    entry
        .binding()
        .tools
        .iter()
        .map(|t| {
            let mut schema = t.parameters.json().as_object().cloned().unwrap_or_default();
            schema.entry("type").or_insert_with(|| json!("object"));
            let description = format!("{} ({})", t.description, entry.app.id);
            Tool::new(flat_name(entry, &t.name), description, Arc::new(schema))
        })
        .collect()
}

/// The app and tool a flat name points at.
pub(super) fn flat_target<'a>(snapshot: &'a Snapshot, name: &str) -> Option<(&'a Entry, &'a str)> {
    let (slug, _) = name.split_once("__")?;
    let entry = snapshot.entries.iter().find(|e| e.slug == slug)?;
    let tool = entry
        .binding()
        .tools
        .iter()
        .find(|t| flat_name(entry, &t.name) == name)?;
    Some((entry, tool.name.as_str()))
}
