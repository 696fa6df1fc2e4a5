//! The gateway's own tools for a downstream server's resources and prompts
//! (`mcp.resources.read`, `mcp.prompts.get`): made from what the server listed, and
//! answered by reading or getting the item (or, for a person's own, listing theirs).

use serde_json::{Value, json};

use super::client::{CallError, Connection, Listing, RemoteTool};
use super::{LIST_DEADLINE, LISTING_MAX, PROMPTS_TOOL, RESOURCES_TOOL};

/// The name of the gateway's tool for a server's resources or prompts.
pub(super) fn listing_tool(listing: Listing) -> &'static str {
    match listing {
        Listing::Resources => RESOURCES_TOOL,
        Listing::Prompts => PROMPTS_TOOL,
    }
}

/// The gateway's tool for a server's resources or prompts: one argument naming the item
/// (an `enum` of what was listed), and the list in its description — what an agent reads
/// in the app's guide, and nowhere before. Listed with a person's own sign-in
/// (`per_person`), it names none of their items (the tool is everyone's): the argument is
/// any name, and a call without it lists the caller's own.
pub(super) fn listing_remote(
    listing: Listing,
    items: &[Value],
    templates: &[Value],
    per_person: bool,
) -> RemoteTool {
    let items = if per_person { &[][..] } else { items };
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let mut lines = Vec::new();
    let mut names = Vec::new();
    let mut patterns = Vec::new();
    for template in templates {
        let key = text(template, "uriTemplate");
        let Some(pattern) = template_pattern(&key) else {
            continue;
        };
        if patterns.contains(&pattern) {
            continue;
        }
        let about = [
            text(template, "title"),
            text(template, "name"),
            text(template, "description"),
        ]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" — ");
        lines.push(crate::text::excerpt(
            &format!(
                "- `{key}` (a template: fill in each `{{…}}`){}",
                described(&about)
            ),
            300,
        ));
        patterns.push(pattern);
    }
    for item in items {
        let key = match listing {
            Listing::Resources => text(item, "uri"),
            Listing::Prompts => text(item, "name"),
        };
        if key.is_empty() || names.contains(&key) {
            continue;
        }
        let about = [
            text(item, "title"),
            text(item, "name"),
            text(item, "description"),
        ]
        .into_iter()
        .filter(|s| !s.is_empty() && *s != key)
        .collect::<Vec<_>>()
        .join(" — ");
        let arguments: Vec<String> = item
            .get("arguments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|a| {
                let required = a.get("required").and_then(Value::as_bool) == Some(true);
                format!("{}{}", text(a, "name"), if required { "" } else { "?" })
            })
            .collect();
        let args = if arguments.is_empty() {
            String::new()
        } else {
            format!(" ({})", arguments.join(", "))
        };
        lines.push(crate::text::excerpt(
            &format!("- `{key}`{args}{}", described(&about)),
            300,
        ));
        names.push(key);
    }
    let listing_text = crate::text::excerpt(&lines.join("\n"), LISTING_MAX);
    if per_person {
        let (arg, what) = match listing {
            Listing::Resources => ("uri", "resources"),
            Listing::Prompts => ("name", "prompts"),
        };
        let (read, result) = match listing {
            Listing::Resources => (
                "Read one of this server's resources (MCP resources/read)",
                "its contents",
            ),
            Listing::Prompts => (
                "Get one of this server's prompts (MCP prompts/get) with its arguments",
                "its messages",
            ),
        };
        let mut properties = json!({arg: {"type": "string"}});
        if listing == Listing::Prompts {
            properties["arguments"] =
                json!({"type": "object", "additionalProperties": {"type": "string"}});
        }
        return RemoteTool {
            name: listing_tool(listing).to_owned(),
            description: format!(
                "{read}; the result holds {result}. Each person has their own {what} here: call it without `{arg}` to list yours.\n{listing_text}"
            ),
            input_schema: json!({"type": "object", "properties": properties}),
            output_schema: None,
            read_only: false,
            listing: Some(listing),
            ui: None,
        };
    }
    let (description, schema) = match listing {
        Listing::Resources => (
            format!(
                "Read one of this server's resources (MCP resources/read); the result holds its contents.\n{listing_text}"
            ),
            {
                // A listed URI, or one a template makes.
                let mut any: Vec<Value> = vec![json!({"enum": names})];
                any.extend(patterns.iter().map(|p| json!({"pattern": p})));
                let uri = if any.len() == 1 {
                    json!({"type": "string", "enum": names})
                } else {
                    json!({"type": "string", "anyOf": any})
                };
                json!({"type": "object", "properties": {"uri": uri}, "required": ["uri"]})
            },
        ),
        Listing::Prompts => (
            format!(
                "Get one of this server's prompts (MCP prompts/get) with its arguments; the result holds its messages.\n{listing_text}"
            ),
            json!({"type": "object", "properties": {
                "name": {"type": "string", "enum": names},
                "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
            }, "required": ["name"]}),
        ),
    };
    RemoteTool {
        name: listing_tool(listing).to_owned(),
        description,
        input_schema: schema,
        output_schema: None,
        read_only: false,
        listing: Some(listing),
        ui: None,
    }
}

/// The pattern of the URIs an RFC 6570 URI template makes (whole match): literal parts
/// as they are, `{var}` one segment, `{+var}`/`{#var}` anything, `{?…}`/`{&…}` a query
/// part, `{/var}` more segments. `None` for a template too odd to match safely.
pub(super) fn template_pattern(template: &str) -> Option<String> {
    if template.is_empty() || template.len() > 1000 {
        return None;
    }
    let mut out = String::from("^");
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&regex_escape(&rest[..open]));
        let close = rest[open..].find('}')? + open;
        let expression = &rest[open + 1..close];
        out.push_str(match expression.chars().next()? {
            '+' | '#' => ".*",
            '?' | '&' => "([?&][^#]*)?",
            '/' => "(/[^?#]*)?",
            '.' => "(\\.[^/?#]*)?",
            ';' => "(;[^/?#]*)?",
            c if c.is_ascii_alphanumeric() || c == '_' || c == '%' => "[^/?#]+",
            _ => return None,
        });
        rest = &rest[close + 1..];
    }
    if rest.contains('}') {
        return None;
    }
    out.push_str(&regex_escape(rest));
    out.push('$');
    Some(out)
}

/// `text` with regular-expression metacharacters escaped.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `resources/read` or `prompts/get` for the gateway's tool, answered as a tool result:
/// resource contents as embedded resources, prompt messages as text (the server's whole
/// answer in `structuredContent`).
pub(super) async fn read_listing(
    link: &Connection,
    listing: Listing,
    args: serde_json::Map<String, Value>,
) -> Result<Value, CallError> {
    let (arg, method, key) = match listing {
        Listing::Resources => ("uri", "resources/list", "resources"),
        Listing::Prompts => ("name", "prompts/list", "prompts"),
    };
    if !args.contains_key(arg) {
        // The caller's own list (a server that lists per person).
        let items = link
            .list_all(method, key, LIST_DEADLINE)
            .await
            .map_err(|message| CallError::Rpc {
                code: -32603,
                message,
            })?;
        let answer = json!({key: items});
        let text = serde_json::to_string_pretty(&answer).unwrap_or_default();
        return Ok(
            json!({"content": [{"type": "text", "text": text}], "structuredContent": answer, "isError": false}),
        );
    }
    match listing {
        Listing::Resources => {
            let answer = link
                .raw("resources/read", Some(json!({"uri": args.get("uri")})))
                .await?;
            let content: Vec<Value> = answer
                .get("contents")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| json!({"type": "resource", "resource": c}))
                .collect();
            Ok(json!({"content": content, "structuredContent": answer, "isError": false}))
        }
        Listing::Prompts => {
            let mut params = json!({"name": args.get("name")});
            if let Some(a) = args.get("arguments") {
                params["arguments"] = a.clone();
            }
            let answer = link.raw("prompts/get", Some(params)).await?;
            let text = serde_json::to_string_pretty(&answer).unwrap_or_default();
            Ok(
                json!({"content": [{"type": "text", "text": text}], "structuredContent": answer, "isError": false}),
            )
        }
    }
}

/// `: <about>` after a listed item, when there is anything to say.
fn described(about: &str) -> String {
    if about.is_empty() {
        String::new()
    } else {
        format!(": {about}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn uri_templates_become_whole_match_patterns() {
        let p = |t: &str| super::template_pattern(t);
        assert_eq!(p("demo://r/{id}").unwrap(), "^demo://r/[^/?#]+$");
        assert_eq!(p("file:///{+path}").unwrap(), "^file:///.*$");
        assert_eq!(p("db://t{?a,b}").unwrap(), "^db://t([?&][^#]*)?$");
        assert_eq!(p("x://a.b/{id}").unwrap(), "^x://a\\.b/[^/?#]+$");
        for odd in ["", "a/{", "a/}", "a/{!x}", "a/{}"] {
            assert!(p(odd).is_none(), "{odd}");
        }
        let schema = serde_json::json!({"type": "string", "pattern": p("demo://r/{id}").unwrap()});
        let v = jsonschema::draft7::new(&schema).unwrap();
        assert!(v.is_valid(&serde_json::json!("demo://r/7")));
        assert!(!v.is_valid(&serde_json::json!("demo://r/7/x")));
        assert!(!v.is_valid(&serde_json::json!("demo://rr/7")));
    }
}
