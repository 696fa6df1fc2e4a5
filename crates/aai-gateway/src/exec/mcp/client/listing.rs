//! What a downstream server lists: its tools (read leniently, one bad tool does not cost
//! the list) and its resources and prompts, all pages within bounds.

use std::collections::HashSet;
use std::time::Duration;

use rmcp::model::{ClientRequest, CustomRequest, ServerResult};
use serde_json::{Value, json};

use super::{CallError, Connection, RemoteTool, without_type_names};

impl Connection {
    /// Every item of a paged list (`resources/list` → `resources`, `prompts/list` →
    /// `prompts`), at most [`MAX_LISTED`] items and [`MAX_PAGES`] pages, read as JSON.
    pub(in crate::exec::mcp) async fn list_all(
        &self,
        method: &str,
        key: &str,
        deadline: Duration,
    ) -> Result<Vec<Value>, String> {
        let listing = async {
            let mut items = Vec::new();
            let mut cursor: Option<String> = None;
            for _ in 0..MAX_PAGES {
                let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
                let page = self.raw(method, params).await.map_err(|e| match e {
                    CallError::Rpc { message, .. } | CallError::Closed(message) => {
                        format!("{method} failed: {message}")
                    }
                    _ => format!("{method} failed"),
                })?;
                let Some(listed) = page.get(key).and_then(Value::as_array) else {
                    return Err(format!("the server's {method} answer has no `{key}` list"));
                };
                for item in listed {
                    if items.len() >= MAX_LISTED {
                        tracing::warn!(
                            "{method}: more than {MAX_LISTED} items; the rest are left out"
                        );
                        return Ok(items);
                    }
                    items.push(item.clone());
                }
                cursor = next_cursor(&page);
                if cursor.is_none() {
                    return Ok(items);
                }
            }
            Ok(items)
        };
        tokio::time::timeout(deadline, listing)
            .await
            .map_err(|_| format!("{method} got no answer within {} s", deadline.as_secs()))?
    }

    /// Every tool, all pages, read leniently: a tool the gateway cannot offer (no name, a
    /// name used before, too many tools) is left out with a warning, and a tool whose
    /// `inputSchema` is not an object schema takes any object (the server still checks).
    /// rmcp's typed listing would refuse the whole list for one such tool.
    pub(in crate::exec::mcp) async fn list_tools(
        &self,
        deadline: Duration,
    ) -> Result<Vec<RemoteTool>, String> {
        let listing = async {
            let mut tools = Vec::new();
            let mut seen = HashSet::new();
            let mut cursor: Option<String> = None;
            for _ in 0..MAX_PAGES {
                let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
                let request =
                    ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
                let page =
                    match self.service.peer().send_request(request).await {
                        Ok(ServerResult::ListToolsResult(r)) => {
                            serde_json::to_value(r).unwrap_or_default()
                        }
                        Ok(ServerResult::CustomResult(r)) => r.0,
                        Ok(_) => return Err(
                            "the server answered tools/list with something other than a tool list"
                                .to_owned(),
                        ),
                        Err(e) => {
                            return Err(format!(
                                "tools/list failed: {}",
                                self.clean(&without_type_names(&e.to_string()))
                            ));
                        }
                    };
                let Some(listed) = page.get("tools").and_then(Value::as_array) else {
                    return Err("the server's tools/list answer has no `tools` list".to_owned());
                };
                for raw in listed {
                    match read_tool(raw, &seen) {
                        Ok(_) if tools.len() >= MAX_TOOLS => {
                            tracing::warn!(
                                "the server lists more than {MAX_TOOLS} tools; the rest are left out"
                            );
                            return Ok(tools);
                        }
                        Ok(tool) => {
                            seen.insert(tool.name.clone());
                            tools.push(tool);
                        }
                        Err(why) => tracing::warn!("a listed tool is left out: {why}"),
                    }
                }
                cursor = next_cursor(&page);
                if cursor.is_none() {
                    return Ok(tools);
                }
            }
            tracing::warn!(
                "the server's tool list has more than {MAX_PAGES} pages; the rest are left out"
            );
            Ok(tools)
        };
        tokio::time::timeout(deadline, listing)
            .await
            .map_err(|_| format!("tools/list got no answer within {} s", deadline.as_secs()))?
    }
}

/// The cursor of a list's next page, when the page names one.
fn next_cursor(page: &Value) -> Option<String> {
    page.get("nextCursor")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
}

/// Most pages of a tool list read, and most tools kept: a server listing more is broken
/// or hostile, and a guide of more would not fit any agent's context.
const MAX_PAGES: usize = 100;
const MAX_TOOLS: usize = 1000;
/// Most resources (or prompts) of a server the gateway lists in its guide.
const MAX_LISTED: usize = 200;

/// One listed tool as the gateway can offer it, or why it cannot (`seen`: names so far).
fn read_tool(raw: &Value, seen: &HashSet<String>) -> Result<RemoteTool, String> {
    let name = raw.get("name").and_then(Value::as_str).unwrap_or("");
    let shown = crate::text::excerpt(&name.escape_debug().to_string(), 60);
    if !valid_tool_name(name) {
        return Err(format!(
            "the name `{shown}` is not a tool name (1–128 letters, digits, `_`, `-`, `.`, `/`)"
        ));
    }
    if seen.contains(name) {
        return Err(format!("`{shown}` is listed twice; the first is kept"));
    }
    let input_schema = match raw.get("inputSchema") {
        Some(s) if s.get("type").and_then(Value::as_str) == Some("object") => s.clone(),
        _ => {
            tracing::warn!(
                tool = name,
                "the tool's inputSchema is not an object schema; it takes any object"
            );
            json!({"type": "object"})
        }
    };
    Ok(RemoteTool {
        name: name.to_owned(),
        description: raw
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        input_schema,
        output_schema: raw.get("outputSchema").filter(|s| s.is_object()).cloned(),
        // A hint from the server, trusted only as far as `consent.readOnly` says.
        read_only: raw
            .pointer("/annotations/readOnlyHint")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        listing: None,
        ui: crate::exec::mcp::ui::read(raw),
    })
}

/// The MCP specification's tool names: 1–128 of `A–Z a–z 0–9 _ - . /`.
fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_tools_are_read_leniently() {
        let mut seen = HashSet::new();
        let ok = read_tool(&json!({"name": "echo", "inputSchema": "nope"}), &seen).unwrap();
        assert_eq!(ok.input_schema, json!({"type": "object"}));
        seen.insert("echo".to_owned());
        assert!(
            read_tool(&json!({"name": "echo"}), &seen)
                .unwrap_err()
                .contains("twice")
        );
        for bad in [
            "",
            "has space",
            "new\nline",
            "`tick`|pipe",
            &"x".repeat(129),
        ] {
            assert!(read_tool(&json!({"name": bad}), &seen).is_err(), "{bad:?}");
        }
        let err = read_tool(&json!({"name": "a\u{1b}[31mred"}), &seen).unwrap_err();
        assert!(!err.contains('\u{1b}'), "{err}");
    }
}
