//! A tool's `undo` is read the same way in the three dialects of the seeds (D0 platforms,
//! D1 snake_case, D2 camelCase), and checked the same way: the undo tool must be a tool of
//! the app, the pointers well formed, the arguments the undo tool's parameters.

use aai_descriptor::{Severity, Undo, UndoArg, parse};
use serde_json::{Value, json};

fn tools(undo: Value) -> Value {
    json!([
        {"name": "add_note", "description": "Add a note",
         "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
         "undo": undo},
        {"name": "delete_note", "description": "Delete a note",
         "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
    ])
}

fn in_each_dialect(undo: Value) -> Vec<(&'static str, Value)> {
    vec![
        (
            "D0",
            json!({
                "schema_version": "1.0", "appId": "org.example.notes", "name": "Notes",
                "description": "Notes", "version": "1.0",
                "platforms": {"linux": {"automation": "dbus", "service": "org.example.Notes",
                                        "tools": with_methods(tools(undo.clone()))}},
            }),
        ),
        (
            "D1",
            json!({
                "schema_version": "1.0", "version": "1.0.0", "platform": "linux",
                "app": {"id": "org.example.notes", "name": "Notes", "description": "Notes"},
                "execution": {"type": "ipc"}, "tools": tools(undo.clone()),
            }),
        ),
        (
            "D2",
            json!({
                "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
                "app": {"id": "org.example.notes", "name": {"en": "Notes"}, "defaultLang": "en", "description": "Notes"},
                "execution": {"type": "stdio", "command": "notes"}, "tools": tools(undo),
            }),
        ),
    ]
}

/// D0 D-Bus tools name their method.
fn with_methods(mut tools: Value) -> Value {
    for (tool, method) in tools
        .as_array_mut()
        .expect("tools")
        .iter_mut()
        .zip(["AddNote", "DeleteNote"])
    {
        tool["method"] = json!(method);
    }
    tools
}

#[test]
fn every_dialect_reads_an_undo() {
    let undo = json!({"tool": "delete_note", "args": {"id": "/result/id"}});
    for (dialect, doc) in in_each_dialect(undo) {
        let parsed = parse(&doc.to_string(), "aai.json");
        let app = parsed
            .app
            .unwrap_or_else(|| panic!("{dialect}: {:?}", parsed.diagnostics));
        let problems: Vec<_> = parsed
            .diagnostics
            .iter()
            .filter(|d| d.message.contains("undo"))
            .collect();
        assert!(problems.is_empty(), "{dialect}: {problems:?}");
        let add = app.bindings[0].tool("add_note").expect("add_note");
        assert_eq!(
            add.undo,
            Some(Undo {
                tool: "delete_note".into(),
                args: [("id".to_owned(), UndoArg::Pointer("/result/id".into()))].into(),
            }),
            "{dialect}"
        );
        assert_eq!(
            app.bindings[0].tool("delete_note").expect("delete").undo,
            None
        );
    }
}

#[test]
fn every_dialect_rejects_an_undo_of_a_tool_it_does_not_have() {
    for (undo, says) in [
        (
            json!({"tool": "erase_note", "args": {"id": "/result/id"}}),
            "undo tool `erase_note` is not a tool of this app",
        ),
        (
            json!({"tool": "delete_note", "args": {"id": "result/id"}}),
            "must start with `/args` or `/result`",
        ),
        (
            json!({"args": {"id": "/result/id"}}),
            "missing required field `tool`",
        ),
    ] {
        for (dialect, doc) in in_each_dialect(undo.clone()) {
            let parsed = parse(&doc.to_string(), "aai.json");
            let error = parsed
                .diagnostics
                .iter()
                .find(|d| d.severity == Severity::Error && d.pointer.contains("/undo"))
                .unwrap_or_else(|| panic!("{dialect} {undo}: {:?}", parsed.diagnostics));
            assert!(error.message.contains(says), "{dialect}: {}", error.message);
            assert!(parsed.app.is_none(), "{dialect}: an error rejects the file");
        }
    }
}

#[test]
fn every_dialect_warns_of_an_undo_on_a_tool_that_only_reads() {
    let undo = json!({"tool": "delete_note", "args": {"id": "/result/id"}});
    for (dialect, mut doc) in in_each_dialect(undo) {
        let tools = match dialect {
            "D0" => &mut doc["platforms"]["linux"]["tools"],
            _ => &mut doc["tools"],
        };
        tools[0]["readOnly"] = json!(true);
        let parsed = parse(&doc.to_string(), "aai.json");
        assert!(parsed.app.is_some(), "{dialect}: a warning keeps the app");
        let warning = parsed
            .diagnostics
            .iter()
            .find(|d| d.severity == Severity::Warning && d.pointer.ends_with("/undo"))
            .unwrap_or_else(|| panic!("{dialect}: {:?}", parsed.diagnostics));
        assert!(
            warning.message.contains("`readOnly`"),
            "{dialect}: {}",
            warning.message
        );
    }
}
