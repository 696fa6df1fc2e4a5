//! The meta tools: one table that both `tools/list` and `tools/call` read, so a name and
//! its colon spelling (docs/design.md, Colon spellings) can never drift apart.

use std::sync::{Arc, OnceLock};

use rmcp::model::Tool;
use serde_json::{Map, Value, json};

/// What a meta tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Meta {
    /// `aai_search {query, limit?}`.
    Search,
    /// `aai_guide {app, tool?}`.
    Guide,
    /// `web_discover {url}`.
    WebDiscover,
    /// `aai_exec {app, tool, args}`.
    Exec,
    /// `aai_batch {calls, mode?, stopOnError?, atomic?}`.
    Batch,
    /// `aai_run {script, input?, atomic?}`.
    Run,
}

/// One row: the listed name, the colon spelling also accepted on `tools/call`, the meaning.
struct Row {
    name: &'static str,
    colon: &'static str,
    meta: Meta,
    description: &'static str,
    schema: fn() -> Value,
}

const TABLE: &[Row] = &[
    Row {
        name: "aai_search",
        colon: "aai:search",
        meta: Meta::Search,
        description: "Find apps and tools by name (any language), alias or purpose; returns app ids.",
        schema: || {
            json!({"type":"object","properties":{
                "query":{"type":"string","description":"What to look for, e.g. \"send email\" or \"提醒事项\""},
                "limit":{"type":"integer","maximum":50,"default":10},
                "remote":{"type":"boolean","description":"Also search the MCP Registry"}},
                "required":["query"]})
        },
    },
    Row {
        name: "aai_guide",
        colon: "aai:guide",
        meta: Meta::Guide,
        description: "An app's tools and parameters (with `tool`: that tool only). Without `app`: how this gateway works.",
        schema: || {
            json!({"type":"object","properties":{
                "app":{"type":"string","description":"App id (or name) from aai_search"},
                "tool":{"type":"string","description":"Only this tool"}}})
        },
    },
    Row {
        name: "web_discover",
        colon: "web:discover",
        meta: Meta::WebDiscover,
        description: "Add a web app by URL or domain (its /.well-known/aai.json) and show its guide.",
        schema: || {
            json!({"type":"object","properties":{
                "url":{"type":"string","description":"A URL or domain, e.g. \"yuque.com\""}},
                "required":["url"]})
        },
    },
    Row {
        name: "aai_exec",
        colon: "aai:exec",
        meta: Meta::Exec,
        description: "Run an app's tool; aai_guide shows its arguments.",
        schema: || {
            json!({"type":"object","properties":{
                "app":{"type":"string","description":"App id, or a web app's URL"},
                "tool":{"type":"string","description":"Tool name from the guide"},
                "args":{"type":"object","description":"The tool's arguments"}},
                "required":["app","tool"]})
        },
    },
    Row {
        name: "aai_batch",
        colon: "aai:batch",
        meta: Meta::Batch,
        description: "Run several aai_exec calls in one request; one result each.",
        schema: || {
            json!({"type":"object","properties":{
                "calls":{"type":"array","items":{
                    "type":"object","properties":{
                        "app":{"type":"string"},"tool":{"type":"string"},"args":{"type":"object"}},
                    "required":["app","tool"]}},
                "mode":{"type":"string","enum":["parallel","sequence"]},
                "stopOnError":{"type":"boolean"},"atomic":{"type":"boolean"}},
                "required":["calls"]})
        },
    },
    Row {
        name: "aai_run",
        colon: "aai:run",
        meta: Meta::Run,
        description: "Run a JavaScript that calls tools; aai_guide without app explains.",
        schema: || {
            json!({"type":"object","properties":{"script":{"type":"string"},"input":{},
                "atomic":{"type":"boolean"}},
                "required":["script"]})
        },
    },
];

/// The meta tool a `tools/call` name means (listed name or colon spelling).
pub(super) fn lookup(name: &str) -> Option<Meta> {
    TABLE
        .iter()
        .find(|r| r.name == name || r.colon == name)
        .map(|r| r.meta)
}

/// The listed meta tools (built once).
pub(super) fn listed() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        TABLE
            .iter()
            .map(|r| Tool::new(r.name, r.description, object((r.schema)())))
            .collect()
    })
}

fn object(value: Value) -> Arc<Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_listed_and_found_by_both_spellings() {
        assert_eq!(listed().len(), TABLE.len());
        for row in TABLE {
            assert_eq!(lookup(row.name), Some(row.meta));
            assert_eq!(lookup(row.colon), Some(row.meta));
            assert!(listed().iter().any(|t| t.name == row.name));
        }
        assert_eq!(lookup("aai_other"), None);
    }
}
