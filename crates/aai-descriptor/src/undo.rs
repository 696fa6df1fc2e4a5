//! A tool's inverse (descriptor `undo`): another tool of the same app, with arguments
//! taken from the call being undone, so that an atomic run or batch can take back its
//! completed steps when a later one fails.
//!
//! ```json
//! "undo": {"tool": "deleteNote", "args": {"id": "/result/id", "force": true}}
//! ```
//!
//! Each argument is a JSON pointer into `{"args": …, "result": …}` of the call (a string
//! starting with `/args` or `/result`), or a fixed value: a number, a boolean, `null`, or
//! `{"value": …}` for any value (a fixed string is written `{"value": "text"}`). The result
//! is the one a script sees: a downstream MCP server's `structuredContent`, else its text
//! (parsed when it is JSON); other tools' result values as they are.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::diagnostic::Sink;
use crate::read::Obj;

/// How to undo one call of a tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Undo {
    /// The tool that undoes it, of the same app.
    pub tool: String,
    /// Its arguments, by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub args: BTreeMap<String, UndoArg>,
}

/// One argument of an undo.
#[derive(Debug, Clone, PartialEq)]
pub enum UndoArg {
    /// A JSON pointer into the call's `{"args": …, "result": …}`.
    Pointer(String),
    /// A fixed value.
    Value(Value),
}

impl Serialize for UndoArg {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            UndoArg::Pointer(p) => s.serialize_str(p),
            UndoArg::Value(v) => {
                let mut map = Map::new();
                map.insert("value".to_owned(), v.clone());
                Value::Object(map).serialize(s)
            }
        }
    }
}

/// Why an undo's arguments could not be made from a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The undo tool.
    pub tool: String,
    /// The argument.
    pub arg: String,
    /// The pointer that found nothing.
    pub pointer: String,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the undo `{}` needs `{}` for its argument `{}`, and the call has none",
            self.tool, self.pointer, self.arg
        )
    }
}

impl std::error::Error for Missing {}

impl Undo {
    /// The undo tool's arguments for a call that had `args` and gave `result`.
    pub fn arguments(&self, args: &Value, result: &Value) -> Result<Value, Missing> {
        let mut out = Map::new();
        for (name, arg) in &self.args {
            let value = match arg {
                UndoArg::Value(v) => v.clone(),
                UndoArg::Pointer(p) => {
                    let (root, rest) = if let Some(rest) = p.strip_prefix("/args") {
                        (args, rest)
                    } else {
                        (result, p.strip_prefix("/result").unwrap_or(p))
                    };
                    root.pointer(rest).cloned().ok_or_else(|| Missing {
                        tool: self.tool.clone(),
                        arg: name.clone(),
                        pointer: p.clone(),
                    })?
                }
            };
            out.insert(name.clone(), value);
        }
        Ok(Value::Object(out))
    }
}

/// Reads a tool's `undo`, when it has one; a malformed one is reported and left out.
pub(crate) fn read(tool: &mut Obj<'_>) -> Option<Undo> {
    let mut undo = tool.opt_obj("undo")?;
    let sink = undo.sink();
    let name = undo.req_text("tool").map(str::to_owned);
    let mut args = BTreeMap::new();
    let mut ok = true;
    if let Some(written) = undo.opt_obj("args") {
        let at = written.pointer().to_owned();
        for (key, value) in written.entries() {
            let at = crate::diagnostic::join_pointer(&at, key);
            match argument(sink, &at, value) {
                Some(arg) => {
                    args.insert(key.clone(), arg);
                }
                None => ok = false,
            }
        }
    }
    ok.then_some(Undo { tool: name?, args })
}

/// One argument as written: a pointer, a plain scalar, or `{"value": …}`.
fn argument(sink: &Sink, at: &str, value: &Value) -> Option<UndoArg> {
    match value {
        Value::String(p) => match pointer_problem(p) {
            None => Some(UndoArg::Pointer(p.clone())),
            Some(why) => {
                sink.error(at.to_owned(), why);
                None
            }
        },
        Value::Object(map) if map.len() == 1 && map.contains_key("value") => {
            Some(UndoArg::Value(map["value"].clone()))
        }
        Value::Object(_) | Value::Array(_) => {
            sink.error(
                at.to_owned(),
                "an undo argument is a JSON pointer (`/result/id`, `/args/name`), a number, a boolean, null, or `{\"value\": …}`",
            );
            None
        }
        scalar => Some(UndoArg::Value(scalar.clone())),
    }
}

/// Why `p` is not a pointer into `{"args", "result"}`, if it is not one.
fn pointer_problem(p: &str) -> Option<String> {
    let rest = p
        .strip_prefix("/args")
        .or_else(|| p.strip_prefix("/result"));
    let Some(rest) = rest.filter(|r| r.is_empty() || r.starts_with('/')) else {
        return Some(format!(
            "`{p}` is not a JSON pointer into the call: it must start with `/args` or `/result` (a fixed string is written `{{\"value\": \"…\"}}`)"
        ));
    };
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Some(format!(
                "`{p}` is not a well-formed JSON pointer: `~` must be followed by `0` or `1`"
            ));
        }
    }
    None
}

/// Checks the undos of a binding's tools (`tools`, as written at `tools_pointer`): each
/// names a tool of the same binding, and its arguments are that tool's parameters
/// (warnings: the undo still runs, and the tool's own validation has the last word).
pub(crate) fn check_all(sink: &Sink, tools_pointer: &str, tools: &[Value]) {
    let by_name: BTreeMap<&str, &Value> = tools
        .iter()
        .filter_map(|t| Some((t.get("name")?.as_str()?, t)))
        .collect();
    for (i, tool) in tools.iter().enumerate() {
        let Some(undo) = tool.get("undo").and_then(Value::as_object) else {
            continue;
        };
        let Some(name) = undo.get("tool").and_then(Value::as_str) else {
            continue;
        };
        let at = format!("{tools_pointer}/{i}/undo");
        let Some(target) = by_name.get(name) else {
            let known: Vec<&str> = by_name.keys().copied().collect();
            sink.error(
                format!("{at}/tool"),
                format!(
                    "undo tool `{name}` is not a tool of this app (its tools: {})",
                    known.join(", ")
                ),
            );
            continue;
        };
        let params = target.get("parameters");
        let properties = params
            .and_then(|p| p.get("properties"))
            .and_then(Value::as_object);
        // `args` that is not an object was reported when the tool was read.
        let given = match undo.get("args") {
            None => None,
            Some(Value::Object(given)) => Some(given),
            Some(_) => continue,
        };
        if let (Some(properties), Some(given)) = (properties, given) {
            let unknown: Vec<&String> = given
                .keys()
                .filter(|a| !properties.contains_key(*a))
                .collect();
            for arg in unknown.iter().take(SHOWN) {
                sink.warning(
                    crate::diagnostic::join_pointer(&format!("{at}/args"), arg),
                    format!("`{name}` has no parameter `{arg}`"),
                );
            }
            if unknown.len() > SHOWN {
                sink.warning(
                    format!("{at}/args"),
                    format!(
                        "and {} more arguments `{name}` has no parameter for",
                        unknown.len() - SHOWN
                    ),
                );
            }
        }
        let required = params
            .and_then(|p| p.get("required"))
            .and_then(Value::as_array);
        let missing: Vec<&str> = required
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|needed| !given.is_some_and(|g| g.contains_key(*needed)))
            .collect();
        if !missing.is_empty() {
            let mut named: Vec<String> = missing
                .iter()
                .take(SHOWN)
                .map(|m| format!("`{m}`"))
                .collect();
            if missing.len() > SHOWN {
                named.push(format!("{} more", missing.len() - SHOWN));
            }
            sink.warning(
                format!("{at}/args"),
                format!(
                    "`{name}` requires {}, which the undo does not give",
                    named.join(", ")
                ),
            );
        }
    }
}

/// Most arguments one warning of [`check_all`] names; the rest are counted.
const SHOWN: usize = 5;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn undo(args: Value) -> (Option<Undo>, Vec<String>) {
        let sink = Sink::new("aai.json");
        let doc = json!({"undo": {"tool": "deleteNote", "args": args}});
        let mut obj = Obj::new(&sink, &doc, String::new()).expect("an object");
        let read = read(&mut obj);
        drop(obj);
        let messages = sink
            .into_vec()
            .into_iter()
            .map(|d| format!("{} {}", d.pointer, d.message))
            .collect();
        (read, messages)
    }

    #[test]
    fn pointers_and_values_are_read_and_applied() {
        let (read, problems) = undo(json!({
            "id": "/result/id", "title": "/args/title", "force": true,
            "why": {"value": "/not a pointer"}, "n": 3,
        }));
        assert!(problems.is_empty(), "{problems:?}");
        let read = read.expect("read");
        let made = read
            .arguments(&json!({"title": "a"}), &json!({"id": 7}))
            .expect("made");
        assert_eq!(
            made,
            json!({"id": 7, "title": "a", "force": true, "why": "/not a pointer", "n": 3})
        );
        let missing = read.arguments(&json!({}), &json!({"id": 7})).unwrap_err();
        assert_eq!(missing.pointer, "/args/title");
        assert_eq!(
            serde_json::to_value(&read).expect("json")["args"]["why"],
            json!({"value": "/not a pointer"})
        );
    }

    #[test]
    fn bad_pointers_are_errors() {
        for (bad, says) in [
            ("id", "must start with `/args` or `/result`"),
            ("/resultid", "must start with"),
            ("/result/a~2b", "`~` must be followed"),
            ("/result/a~", "`~` must be followed"),
        ] {
            let (read, problems) = undo(json!({ "id": bad }));
            assert!(read.is_none(), "{bad}");
            assert!(
                problems.iter().any(|p| p.contains(says)),
                "{bad}: {problems:?}"
            );
            assert!(
                problems.iter().any(|p| p.starts_with("/undo/args/id")),
                "{problems:?}"
            );
        }
        let (read, problems) = undo(json!({ "id": [1] }));
        assert!(read.is_none());
        assert!(problems[0].contains("`{\"value\": …}`"), "{problems:?}");
        // Escapes are read as JSON pointers read them.
        let (read, _) = undo(json!({ "id": "/result/a~1b" }));
        let made = read
            .expect("read")
            .arguments(&json!({}), &json!({"a/b": 1}));
        assert_eq!(made.expect("made"), json!({"id": 1}));
    }

    fn checked(tools: Vec<Value>) -> Vec<String> {
        let sink = Sink::new("aai.json");
        check_all(&sink, "/tools", &tools);
        sink.into_vec()
            .into_iter()
            .map(|d| format!("{} {}", d.pointer, d.message))
            .collect()
    }

    #[test]
    fn malformed_or_huge_undo_args_give_one_true_warning_each() {
        let remove = json!({"name": "remove", "parameters": {"type": "object", "properties": {"id": {}}, "required": ["id"]}});
        // `args` that is not an object is an error of the reader, not a missing `id`.
        let found = checked(vec![
            json!({"name": "add", "undo": {"tool": "remove", "args": [1]}}),
            remove.clone(),
        ]);
        assert!(found.is_empty(), "{found:?}");
        let many: serde_json::Map<String, Value> =
            (0..10_000).map(|i| (format!("a{i}"), json!(1))).collect();
        let found = checked(vec![
            json!({"name": "add", "undo": {"tool": "remove", "args": many}}),
            remove,
        ]);
        assert_eq!(found.len(), 7, "{found:?}");
        assert!(found[5].contains("and 9995 more arguments"), "{found:?}");
        assert!(found[6].contains("requires `id`"), "{found:?}");
    }

    #[test]
    fn the_undo_tool_must_exist_and_take_its_arguments() {
        let sink = Sink::new("aai.json");
        let tools = vec![
            json!({"name": "add", "undo": {"tool": "remove", "args": {"id": "/result/id", "extra": 1}}}),
            json!({"name": "remove", "parameters": {"type": "object", "properties": {"id": {}, "why": {}}, "required": ["id", "why"]}}),
            json!({"name": "send", "undo": {"tool": "unsend"}}),
        ];
        check_all(&sink, "/tools", &tools);
        let found: Vec<String> = sink
            .into_vec()
            .into_iter()
            .map(|d| format!("{} {}", d.pointer, d.message))
            .collect();
        assert_eq!(
            found,
            vec![
                "/tools/0/undo/args/extra `remove` has no parameter `extra`".to_owned(),
                "/tools/0/undo/args `remove` requires `why`, which the undo does not give"
                    .to_owned(),
                "/tools/2/undo/tool undo tool `unsend` is not a tool of this app (its tools: add, remove, send)"
                    .to_owned(),
            ]
        );
    }
}
