//! MCP Apps: a downstream tool's interactive view (`_meta.ui`, the ext-apps extension),
//! kept as the server lists it, its `ui://` resource named per app so that two servers'
//! views never collide (docs/agents.md, "MCP Apps").
//!
//! A server's `ui://get-time/app.html` is the gateway's `ui://<app id>/get-time/app.html`:
//! still a `ui://` URI (hosts render only those), and reading it reads the server's.

use serde_json::{Map, Value};

/// Most bytes of a tool's `_meta.ui` as JSON; a larger one is left out.
const MAX_UI: usize = 16 * 1024;
/// Most bytes of a view's URI.
const MAX_URI: usize = 2048;
/// The scheme of views.
const SCHEME: &str = "ui://";

/// A listed tool's view (`_meta.ui`, or the earlier `_meta["ui/resourceUri"]`), when it
/// has a well-formed one: an object whose `resourceUri`, if any, is a `ui://` URI (a tool
/// without one may still say who sees it: `visibility: ["app"]` is a tool its view calls).
pub(super) fn read(tool: &Value) -> Option<Value> {
    let meta = tool.get("_meta")?;
    let mut ui = match (meta.get("ui"), meta.get("ui/resourceUri")) {
        (Some(Value::Object(ui)), _) => ui.clone(),
        (_, Some(Value::String(uri))) => {
            let mut ui = Map::new();
            ui.insert("resourceUri".into(), Value::String(uri.clone()));
            ui
        }
        _ => return None,
    };
    if !ui.contains_key("resourceUri")
        && let Some(Value::String(uri)) = meta.get("ui/resourceUri")
    {
        ui.insert("resourceUri".into(), Value::String(uri.clone()));
    }
    let well_formed = match ui.get("resourceUri") {
        None => true,
        Some(Value::String(uri)) => {
            uri.starts_with(SCHEME)
                && uri.len() > SCHEME.len()
                && uri.len() <= MAX_URI
                && !uri.chars().any(char::is_control)
        }
        Some(_) => false,
    };
    let ui = Value::Object(ui);
    (well_formed && ui.to_string().len() <= MAX_UI).then_some(ui)
}

/// `ui` with its `resourceUri` named for `app`: `ui://<app>/<the rest>`.
pub(crate) fn namespaced(app: &str, ui: &Value) -> Value {
    let mut ui = ui.clone();
    if let Some(uri) = ui.get("resourceUri").and_then(Value::as_str) {
        let rest = uri.strip_prefix(SCHEME).unwrap_or(uri);
        ui["resourceUri"] = Value::String(format!("{SCHEME}{app}/{rest}"));
    }
    ui
}

/// `ui://<app>/<rest>` → `(app, ui://<rest>)`: the app, and the URI its server gave.
pub(crate) fn parse(uri: &str) -> Option<(&str, String)> {
    let (app, rest) = uri.strip_prefix(SCHEME)?.split_once('/')?;
    (!app.is_empty() && !rest.is_empty()).then(|| (app, format!("{SCHEME}{rest}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_view_is_read_kept_whole_and_named_per_app() {
        let tool = json!({"name": "t", "_meta": {"ui": {"resourceUri": "ui://get-time/app.html",
            "visibility": ["model", "app"], "csp": {"connectDomains": []}}}});
        let ui = read(&tool).expect("a view");
        let ours = namespaced("dev.mcp.clock", &ui);
        assert_eq!(ours["resourceUri"], "ui://dev.mcp.clock/get-time/app.html");
        assert_eq!(
            ours["visibility"],
            json!(["model", "app"]),
            "the rest is kept"
        );
        assert_eq!(
            parse("ui://dev.mcp.clock/get-time/app.html"),
            Some(("dev.mcp.clock", "ui://get-time/app.html".to_owned()))
        );
        // The earlier key alone.
        let legacy = json!({"_meta": {"ui/resourceUri": "ui://x/y"}});
        assert_eq!(read(&legacy), Some(json!({"resourceUri": "ui://x/y"})));
        // A tool only its view calls has no view of its own, and keeps who sees it.
        let app_only = json!({"_meta": {"ui": {"visibility": ["app"]}}});
        assert_eq!(read(&app_only), Some(json!({"visibility": ["app"]})));
        assert_eq!(
            namespaced("a", &json!({"visibility": ["app"]})),
            json!({"visibility": ["app"]})
        );
    }

    #[test]
    fn malformed_views_are_left_out() {
        for meta in [
            json!({"ui": {"resourceUri": "https://evil.example/app.html"}}),
            json!({"ui": {"resourceUri": "ui://"}}),
            json!({"ui": {"resourceUri": "ui://a/\u{1b}[2J"}}),
            json!({"ui": {"resourceUri": format!("ui://{}", "a".repeat(3000))}}),
            json!({"ui": {"resourceUri": "ui://a/b", "csp": "x".repeat(MAX_UI)}}),
            json!({"ui": "ui://a/b"}),
            json!({"ui": {"resourceUri": 7}}),
        ] {
            assert_eq!(read(&json!({ "_meta": meta })), None, "{meta}");
        }
        for uri in ["ui://", "ui://app", "ui:///x", "app:x/resources/y"] {
            assert_eq!(parse(uri), None, "{uri}");
        }
    }
}
