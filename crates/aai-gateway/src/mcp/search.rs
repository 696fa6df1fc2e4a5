//! `aai_search`'s result: the matching apps as text and as structured content, and what
//! the MCP Registry found when asked.

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::registry::Snapshot;
use crate::registry::search::Hit;

pub(super) fn search_result(snapshot: &Snapshot, query: &str, hits: &[Hit<'_>]) -> CallToolResult {
    let mut body = if hits.is_empty() {
        format!(
            "No app matches \"{query}\". There are {}; try other words or another language.",
            crate::text::count(snapshot.entries.len(), "app", "apps")
        )
    } else {
        let verb = if hits.len() == 1 { "matches" } else { "match" };
        format!(
            "{} {verb} \"{query}\":\n",
            crate::text::count(hits.len(), "app", "apps")
        )
    };
    let mut results = Vec::new();
    for (i, hit) in hits.iter().enumerate() {
        let app = &hit.entry.app;
        let name = snapshot.name(hit.entry);
        let tools: Vec<&str> = if hit.tools.is_empty() {
            hit.entry
                .binding()
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .take(8)
                .collect()
        } else {
            hit.tools.clone()
        };
        let description = crate::registry::search::description(&app.description);
        body.push_str(&format!(
            "{}. {name} (`{}`) — {description} Tools: {}\n",
            i + 1,
            app.id,
            tools.join(", ")
        ));
        results.push(json!({
            "app": app.id, "name": name, "description": description,
            "score": hit.score, "tools": tools,
        }));
    }
    const NEXT: &str =
        "aai_guide {\"app\": <id>} shows parameters; then aai_exec {\"app\", \"tool\", \"args\"}.";
    if !hits.is_empty() {
        body.push_str("\nNext: ");
        body.push_str(NEXT);
    }
    let mut result = super::text(body);
    // Some clients (Claude Code) give their model the structured result instead of the
    // text: it carries the way on too.
    let mut structured = json!({ "results": results });
    if !hits.is_empty() {
        structured["next"] = NEXT.into();
    }
    result.structured_content = Some(structured);
    result
}

/// Appends what the MCP Registry found (or why it was not searched) to a search result:
/// each server with the `aai` `import` call that previews its installation.
pub(super) fn add_registry_hits(
    result: &mut CallToolResult,
    found: Result<Vec<crate::catalog::mcp_registry::Found>, crate::catalog::mcp_registry::Error>,
) {
    let mut body = String::new();
    let mut hits = Vec::new();
    match found {
        Err(why) => body.push_str(&format!("\n\n{why}.")),
        Ok(found) if found.is_empty() => {
            body.push_str("\n\nThe MCP Registry has no server of that name.")
        }
        Ok(found) => {
            body.push_str("\n\nIn the MCP Registry (not installed):\n");
            for (i, f) in found.iter().enumerate() {
                let install = f.source.as_ref().map(|source| {
                    json!({"app": crate::manage::APP_ID, "tool": "import", "args": {"source": source}})
                });
                body.push_str(&format!(
                    "{}. {} {} — {} ({})\n",
                    i + 1,
                    f.name,
                    f.version,
                    f.description,
                    f.how
                ));
                if let Some(install) = &install {
                    body.push_str(&format!(
                        "   preview its installation: aai_exec {install}\n"
                    ));
                }
                hits.push(
                    json!({"name": f.name, "version": f.version, "description": f.description,
                                 "how": f.how, "install": install}),
                );
            }
            body.push_str("The preview writes nothing; calling it again with `\"confirm\": true` in `args` asks the user, then installs.");
        }
    }
    if let Some(rmcp::model::ContentBlock::Text(first)) = result.content.first_mut() {
        first.text.push_str(&body);
    }
    if let Some(Value::Object(structured)) = &mut result.structured_content {
        structured.insert("registry".into(), Value::Array(hits));
    }
}
