//! Tools as a script calls them: TypeScript-style signatures made from their JSON Schemas
//! (`addNote(args: {text: string; pinned?: boolean}): Promise<{id: number}>`), for the
//! guides an `aai_run` script is written from.
//!
//! A schema becomes the type it describes as far as TypeScript can say it in one line:
//! `string`, `number`, `boolean`, `null`, arrays (`T[]`), objects with their properties
//! (`?` when not required), enums and constants as literal unions, `anyOf`/`oneOf` as
//! unions, local `$ref`s followed. What it cannot say (patterns, ranges, a depth past 4,
//! a type of more than [`MAX_TYPE`] characters) is `unknown` or the nearest wider type:
//! the guide's parameter list has the details.

use aai_descriptor::Tool;
use aai_descriptor::schema::follow_ref as deref;
use serde_json::Value;

use crate::registry::{Entry, Snapshot};

/// Longest type written for one schema, in characters; past it, the widest type of its
/// kind (`object`, `unknown[]`, …).
const MAX_TYPE: usize = 400;
/// Deepest nesting written.
const MAX_DEPTH: usize = 4;

/// `tool`'s signature: `name(args: {...}): Promise<R>` (`args?` when nothing is required).
pub(crate) fn signature(tool: &Tool) -> String {
    let params = tool.parameters.json();
    let args = ts(params, params, 0);
    let optional = params
        .get("required")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    let returns = tool
        .returns
        .as_ref()
        .map_or_else(|| "unknown".to_owned(), |r| ts(r.json(), r.json(), 0));
    let name = if is_identifier(&tool.name) {
        tool.name.clone()
    } else {
        serde_json::to_string(&tool.name).unwrap_or_default()
    };
    format!(
        "{name}(args{}: {args}): Promise<{returns}>",
        if optional { "?" } else { "" }
    )
}

/// `entry`'s tools as a script reaches them: a TypeScript block declaring
/// `apps["<id>"]` with one signature per tool.
pub(crate) fn declaration(entry: &Entry) -> String {
    let id = serde_json::to_string(&entry.app.id).unwrap_or_default();
    let mut out = format!("apps[{id}]: {{\n");
    for tool in &entry.binding().tools {
        out.push_str("  ");
        out.push_str(&signature(tool));
        out.push_str(";\n");
    }
    out.push('}');
    out
}

/// The apps of `snapshot` as a script reaches them, one declaration each, for the
/// gateway's own guide: at most `budget` characters (apps with at most
/// [`crate::registry::guide::FULL_GUIDE_MAX`] tools, in id order), then how many were left
/// out.
pub(crate) fn declarations(snapshot: &Snapshot, budget: usize) -> String {
    let mut out = String::new();
    let mut left = 0;
    for entry in &snapshot.entries {
        if entry.binding().tools.is_empty() {
            continue;
        }
        let block = declaration(entry);
        if entry.binding().tools.len() > crate::registry::guide::FULL_GUIDE_MAX
            || out.len() + block.len() > budget
        {
            left += 1;
            continue;
        }
        out.push_str(&block);
        out.push('\n');
    }
    if left > 0 {
        out.push_str(&format!(
            "// and {}: `aai_guide {{\"app\": <id>}}` declares each one's tools\n",
            crate::text::count(left, "more app", "more apps")
        ));
    }
    out
}

/// Whether `name` can follow a `.` in JavaScript (else it is quoted: `apps[id]["a-b"]`).
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// The type `schema` describes (inside `root`, for `$ref`s).
fn ts(root: &Value, schema: &Value, depth: usize) -> String {
    let text = ts_inner(root, schema, depth);
    if text.chars().count() <= MAX_TYPE {
        return text;
    }
    // Too long for one line: the widest type of its kind.
    match deref(root, schema).get("type").and_then(Value::as_str) {
        Some("object") => "object".to_owned(),
        Some("array") => "unknown[]".to_owned(),
        _ => "unknown".to_owned(),
    }
}

fn ts_inner(root: &Value, schema: &Value, depth: usize) -> String {
    let schema = deref(root, schema);
    if depth > MAX_DEPTH {
        return "unknown".to_owned();
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let literals: Vec<String> = values.iter().map(Value::to_string).collect();
        return union(literals);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            return union(options.iter().map(|o| ts(root, o, depth + 1)).collect());
        }
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ if schema.get("properties").is_some() => vec!["object"],
        _ if schema.get("items").is_some() => vec!["array"],
        _ => return "unknown".to_owned(),
    };
    union(
        types
            .into_iter()
            .map(|t| match t {
                "string" => "string".to_owned(),
                "number" | "integer" => "number".to_owned(),
                "boolean" => "boolean".to_owned(),
                "null" => "null".to_owned(),
                "array" => array(root, schema, depth),
                "object" => object(root, schema, depth),
                _ => "unknown".to_owned(),
            })
            .collect(),
    )
}

fn array(root: &Value, schema: &Value, depth: usize) -> String {
    let item = schema
        .get("items")
        .filter(|i| i.is_object())
        .map_or_else(|| "unknown".to_owned(), |i| ts(root, i, depth + 1));
    if item.contains(['|', ' ']) && !item.starts_with('{') {
        format!("({item})[]")
    } else {
        format!("{item}[]")
    }
}

fn object(root: &Value, schema: &Value, depth: usize) -> String {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return if schema
            .get("additionalProperties")
            .is_some_and(Value::is_object)
        {
            let value = ts(root, &schema["additionalProperties"], depth + 1);
            format!("Record<string, {value}>")
        } else {
            "object".to_owned()
        };
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = props
        .iter()
        .map(|(name, prop)| {
            let key = if is_identifier(name) {
                name.clone()
            } else {
                serde_json::to_string(name).unwrap_or_default()
            };
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!("{key}{optional}: {}", ts(root, prop, depth + 1))
        })
        .collect();
    if fields.is_empty() {
        "{}".to_owned()
    } else {
        format!("{{{}}}", fields.join("; "))
    }
}

fn union(mut members: Vec<String>) -> String {
    members.dedup();
    match members.len() {
        0 => "never".to_owned(),
        _ => members.join(" | "),
    }
}

#[cfg(test)]
mod tests {
    use aai_descriptor::{Schema, ToolCall};
    use serde_json::json;

    use super::*;

    fn tool(name: &str, parameters: Value, returns: Option<Value>) -> Tool {
        Tool {
            name: name.into(),
            description: String::new(),
            parameters: Schema::compile(&parameters).expect("schema"),
            returns: returns.map(|r| Schema::compile(&r).expect("schema")),
            timeout: None,
            read_only: false,
            undo: None,
            call: ToolCall::Envelope,
            overridden: None,
        }
    }

    #[test]
    fn schemas_read_as_typescript() {
        let t = tool(
            "addNote",
            json!({"type": "object", "properties": {
                "text": {"type": "string"},
                "pinned": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "kind": {"enum": ["memo", "todo"]},
                "due": {"type": ["string", "null"]},
                "at": {"$ref": "#/definitions/point"},
                "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
                "odd-name": {}},
                "required": ["text"],
                "definitions": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}}),
            Some(
                json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
            ),
        );
        assert_eq!(
            signature(&t),
            "addNote(args: {text: string; pinned?: boolean; tags?: string[]; kind?: \"memo\" | \"todo\"; due?: string | null; at?: {x: number}; extra?: Record<string, number>; \"odd-name\"?: unknown}): Promise<{id: number}>"
        );
        let none = tool(
            "list-all",
            json!({"type": "object", "properties": {}}),
            None,
        );
        assert_eq!(
            signature(&none),
            "\"list-all\"(args?: {}): Promise<unknown>"
        );
        let union_items = tool(
            "u",
            json!({"type": "object", "properties": {"v": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "number"}]}}}}),
            None,
        );
        assert_eq!(
            signature(&union_items),
            "u(args?: {v?: (string | number)[]}): Promise<unknown>"
        );
    }

    #[test]
    fn deep_or_long_types_are_widened() {
        let mut deep = json!({"type": "string"});
        for _ in 0..8 {
            deep = json!({"type": "object", "properties": {"a": deep}});
        }
        let t = tool(
            "deep",
            json!({"type": "object", "properties": {"d": deep}}),
            None,
        );
        assert!(signature(&t).contains("unknown"), "{}", signature(&t));
        let many: serde_json::Map<String, Value> = (0..100)
            .map(|i| (format!("field{i}"), json!({"type": "string"})))
            .collect();
        let t = tool("wide", json!({"type": "object", "properties": many}), None);
        assert_eq!(signature(&t), "wide(args?: object): Promise<unknown>");
        // Recursion through a $ref stops at the depth limit.
        let t = tool(
            "tree",
            json!({"type": "object", "properties": {"node": {"$ref": "#/definitions/n"}},
                   "definitions": {"n": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/definitions/n"}}}}}}),
            None,
        );
        assert!(signature(&t).len() < 500, "{}", signature(&t));
    }
}
