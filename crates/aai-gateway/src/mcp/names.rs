//! Listed tool names and descriptions. Descriptions are cut to
//! [`DESCRIPTION_MAX`] characters, the parameters' too: a client loads `tools/list`
//! into every turn of its model.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::{Map, Value, json};

use crate::registry::guide::{DESCRIPTION_MAX, cut};
use crate::registry::{Entry, Snapshot};

/// Longest listed name. Clients prefix the tools of a server (Claude Code and Codex
/// `mcp__<server>__`) and allow 64 characters in all: 54 leaves room for a server name of
/// up to 5 characters (`aai`). `docs/mcp.md` says how to name the server.
pub(crate) const MAX_NAME: usize = 54;

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
        cut(&app.description, DESCRIPTION_MAX).trim_end_matches('.')
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

/// The flat name of a tool: `<slug>__<tool>` with unsafe characters as `_`; a longer one
/// than [`MAX_NAME`] is cut and ends in a stable hash of the whole name, so that two long
/// names with the same start stay apart.
pub(super) fn flat_name(entry: &Entry, tool: &str) -> String {
    let mut name = format!("{}__{}", entry.slug, crate::registry::slug::sanitize(tool));
    if name.len() > MAX_NAME {
        let hash = format!("{:06x}", aai_descriptor::hash::stable(&name) & 0x00ff_ffff);
        name.truncate(MAX_NAME - hash.len() - 1);
        name.push('_');
        name.push_str(&hash);
    }
    name
}

/// Every tool of an app, with its full schema and read-only annotation (`flat` exposure),
/// and its interactive view when `view` knows one (MCP Apps: `_meta.ui`, and the earlier
/// `_meta["ui/resourceUri"]`).
pub(super) fn flat_tools(entry: &Entry, view: &dyn Fn(&str) -> Option<Value>) -> Vec<Tool> {
    entry
        .binding()
        .tools
        .iter()
        .map(|t| {
            let mut schema = t.parameters.json().as_object().cloned().unwrap_or_default();
            schema.entry("type").or_insert_with(|| json!("object"));
            cut_descriptions(&mut schema);
            let description = format!(
                "{} ({})",
                cut(&t.description, DESCRIPTION_MAX),
                entry.app.id
            );
            let mut tool = Tool::new(flat_name(entry, &t.name), description, Arc::new(schema));
            // The read-only annotation (the descriptor's, a server's `readOnlyHint`, or
            // the user's override), for clients that run read-only tools more freely.
            if t.read_only {
                tool.annotations = Some(rmcp::model::ToolAnnotations::new().read_only(true));
            }
            // A server knows its tools by their own names (config `apps.<id>.tools` may
            // rename them).
            if let Some(ui) = view(&t.as_defined().name) {
                let mut meta = Map::new();
                if let Some(uri) = ui.get("resourceUri") {
                    meta.insert("ui/resourceUri".into(), uri.clone());
                }
                meta.insert("ui".into(), ui);
                tool.meta = Some(rmcp::model::MetaObject(meta));
            }
            tool
        })
        .collect()
}

/// Every `description` string in (a listed copy of) a schema, cut to
/// [`DESCRIPTION_MAX`].
fn cut_descriptions(map: &mut Map<String, Value>) {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => cut_descriptions(map),
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    for (key, v) in map.iter_mut() {
        match v {
            Value::String(s) if key == "description" => {
                if let Cow::Owned(short) = cut(s, DESCRIPTION_MAX) {
                    *s = short;
                }
            }
            v => walk(v),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, tools: &[&str]) -> Entry {
        let tools: Vec<serde_json::Value> = tools
            .iter()
            .map(|t| {
                json!({"name": t, "description": "d", "parameters": {"type": "object"},
                            "execution": {"path": "/x", "method": "GET"}})
            })
            .collect();
        let text = json!({"schemaVersion":"1.0","version":"1.0.0","platform":"web",
            "app":{"id": id,"name":"N","description":"d"},
            "execution":{"type":"http","baseUrl":"https://x.example"},"tools": tools});
        let mut entries = vec![Entry {
            app: aai_descriptor::parse(&text.to_string(), "t")
                .app
                .unwrap()
                .into(),
            binding: 0,
            slug: crate::registry::slug::sanitize(id),
            source: std::path::PathBuf::new().into(),
            keys: Default::default(),
        }];
        crate::registry::slug::assign(&mut entries);
        entries.pop().unwrap()
    }

    #[test]
    fn every_listed_name_fits_a_prefixed_client_limit() {
        let long = "get_the_repository_collaborator_permission_level_for_a_user";
        let e = entry(
            "com.very.long.identifier.of.an.application.that.goes.on",
            &[long, &format!("{long}_v2"), "ping"],
        );
        let names: Vec<String> = flat_tools(&e, &|_| None)
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        for n in &names {
            assert!(n.len() <= MAX_NAME, "{n} is {} long", n.len());
            assert!(format!("mcp__aai__{n}").len() <= 64);
        }
        assert_ne!(names[0], names[1], "long names with one start stay apart");
        assert_eq!(flat_target_of(&e, &names[1]), Some(format!("{long}_v2")));
        assert!(app_tool_name(&e).len() <= MAX_NAME);
        for t in crate::mcp::tools::listed() {
            assert!(t.name.len() <= MAX_NAME);
        }
    }

    #[test]
    fn a_huge_description_is_cut_where_it_is_listed() {
        let huge = format!("{}é", "Adds numbers. ".repeat(900_000 / 14));
        let mut e = entry("com.example.huge", &["add"]);
        let app = std::sync::Arc::make_mut(&mut e.app);
        app.description = huge.clone();
        let tool = &mut app.bindings[0].tools[0];
        tool.description = huge.clone();
        tool.parameters =
            aai_descriptor::Schema::load(&json!({"type": "object", "description": huge,
            "properties": {"description": {"type": "string", "description": huge},
                           "x": {"anyOf": [{"type": "string", "description": huge}]}}}))
            .unwrap();
        let listed = serde_json::to_string(&flat_tools(&e, &|_| None)).unwrap();
        assert!(
            listed.len() < 10_000,
            "tools/list entry is {} bytes",
            listed.len()
        );
        let listed: Value = serde_json::from_str(&listed).unwrap();
        let description = listed[0]["description"].as_str().unwrap();
        let head: String = huge.chars().take(2_000).collect();
        assert_eq!(
            description,
            format!(
                "{head}… [cut by the gateway: {} characters in all] (com.example.huge)",
                huge.chars().count()
            )
        );
        let schema = &listed[0]["inputSchema"];
        for d in [
            &schema["description"],
            &schema["properties"]["description"]["description"],
            &schema["properties"]["x"]["anyOf"][0]["description"],
        ] {
            assert!(d.as_str().unwrap().contains("[cut by the gateway"), "{d}");
        }
        let app = app_tool(&Snapshot::default(), &e);
        assert!(app.description.as_deref().unwrap().len() < 3_000);
        // The model keeps the whole text (validation, consent's fingerprint).
        assert_eq!(e.app.bindings[0].tools[0].description.len(), huge.len());
    }

    fn flat_target_of(e: &Entry, name: &str) -> Option<String> {
        e.binding()
            .tools
            .iter()
            .find(|t| flat_name(e, &t.name) == name)
            .map(|t| t.name.clone())
    }

    fn app_tool_name(e: &Entry) -> String {
        format!("app_{}", e.slug)
    }
}
