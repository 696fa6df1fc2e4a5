use serde_json::json;

use super::*;

fn app() -> App {
    let text = json!({"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
        "app":{"id":"com.example.notes","name":"Notes","description":"d"},
        "execution":{"type":"stdio","command":"notes"},
        "tools":[
            {"name":"add","description":"Add a note","parameters":{"type":"object",
                "properties":{"title":{"type":"string"},"folder":{"type":"string","enum":["work","home"]},
                              "pinned":{"type":"boolean"}},
                "required":["title","folder"],"additionalProperties":false},
             "undo":{"tool":"remove","args":{"title":"/args/title"}}},
            {"name":"remove","description":"Remove a note","parameters":{"type":"object",
                "properties":{"title":{"type":"string"}},"required":["title"]}}]});
    aai_descriptor::parse(&text.to_string(), "t").app.unwrap()
}

fn overrides(value: serde_json::Value) -> (BTreeMap<String, ToolOverride>, Vec<String>) {
    let sink = Sink::new("config.json");
    let read = parse(&sink, &value, "/apps/com.example.notes/tools".into());
    let problems = sink.into_vec().iter().map(ToString::to_string).collect();
    (read, problems)
}

/// `value`'s overrides applied to `app`: what could not be applied.
fn apply_to(app: &mut App, value: serde_json::Value) -> Vec<String> {
    let (o, _) = overrides(value);
    let sink = Sink::new("config.json");
    apply(app, &o, &sink);
    sink.into_vec().iter().map(ToString::to_string).collect()
}

/// An app with one tool, `name`, of `parameters`.
fn one_tool(name: &str, parameters: serde_json::Value) -> App {
    let text = json!({"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
        "app":{"id":"com.example.notes","name":"Notes","description":"d"},
        "execution":{"type":"stdio","command":"notes"},
        "tools":[{"name": name, "description": "d", "parameters": parameters}]});
    aai_descriptor::parse(&text.to_string(), "t").app.unwrap()
}

fn applied(value: serde_json::Value) -> (App, Vec<String>) {
    let (o, problems) = overrides(value);
    assert!(problems.is_empty(), "{problems:?}");
    let mut app = app();
    let sink = Sink::new("config.json");
    apply(&mut app, &o, &sink);
    let found = sink.into_vec().iter().map(ToString::to_string).collect();
    (app, found)
}

#[test]
fn a_tool_is_renamed_redescribed_and_its_argument_fixed() {
    let (app, problems) = applied(json!({"add": {
        "name": "add_work_note", "description": "Add a work note", "readOnly": true,
        "fixed": {"folder": "work"}, "defaults": {"pinned": true}}}));
    assert!(problems.is_empty(), "{problems:?}");
    let tool = app.bindings[0].tool("add_work_note").unwrap();
    assert_eq!(tool.description, "Add a work note");
    assert!(tool.read_only);
    let schema = tool.parameters.json();
    assert_eq!(schema["required"], json!(["title"]));
    assert!(schema["properties"].get("folder").is_none());
    assert_eq!(schema["properties"]["pinned"]["default"], json!(true));
    // The executor gets the tool as the app defines it.
    assert_eq!(tool.as_defined().name, "add");
    assert!(tool.as_defined().parameters.has_property("folder"));
    // The undo of another tool follows a rename; this one's undo is untouched.
    assert_eq!(tool.undo.as_ref().unwrap().tool, "remove");
    let said = summary(tool).unwrap();
    assert!(said.contains("the app names it `add`"), "{said}");
    assert!(said.contains("fixed: `folder` = \"work\""), "{said}");
    assert!(said.contains("defaults: `pinned` = true"), "{said}");
    assert_eq!(summary(app.bindings[0].tool("remove").unwrap()), None);
}

#[test]
fn fixed_arguments_are_added_and_may_not_be_sent_otherwise() {
    let (app, _) = applied(json!({"add": {"fixed": {"folder": "work"}}}));
    let tool = app.bindings[0].tool("add").unwrap();
    let sent = without_fixed(tool, Some(json!({"title": "t"})))
        .unwrap()
        .unwrap();
    assert_eq!(
        with_fixed(tool, sent),
        json!({"title": "t", "folder": "work"})
    );
    // The same value is taken out before validation (the schema agents see is closed):
    // an undo made from a recorded call sends it.
    let same = without_fixed(tool, Some(json!({"title": "t", "folder": "work"}))).unwrap();
    assert_eq!(same, Some(json!({"title": "t"})));
    assert!(
        tool.parameters
            .validator()
            .unwrap()
            .is_valid(&same.unwrap())
    );
    let e = GatewayError::from(
        without_fixed(tool, Some(json!({"title": "t", "folder": "home"}))).unwrap_err(),
    );
    assert_eq!(e.code, Code::InvalidParams);
    assert!(e.message().contains("`folder`"), "{}", e.message());
    assert!(!e.message().contains("home"), "the value is not echoed");
    // An unchanged tool's arguments are left as they are.
    let remove = app.bindings[0].tool("remove").unwrap();
    assert_eq!(with_fixed(remove, json!({"x": 1})), json!({"x": 1}));
}

#[test]
fn a_renamed_undo_tool_is_named_by_its_new_name() {
    let (app, problems) = applied(json!({"remove": {"name": "delete"}}));
    assert!(problems.is_empty(), "{problems:?}");
    let add = app.bindings[0].tool("add").unwrap();
    assert_eq!(add.undo.as_ref().unwrap().tool, "delete");
}

#[test]
fn what_cannot_be_applied_is_reported_and_left_out() {
    for (value, expected) in [
        (
            json!({"add": {"fixed": {"folder": "garage"}}}),
            "`folder` does not fit its schema (at `/properties/folder/enum`)",
        ),
        (
            json!({"add": {"fixed": {"colour": "red"}}}),
            "no argument `colour`",
        ),
        (
            json!({"remove": {"defaults": {"colour": "red"}}}),
            "no argument `colour`",
        ),
        (
            json!({"add": {"name": "remove"}}),
            "another tool of the app is named `remove`",
        ),
        (
            json!({"add": {"fixed": {"folder": "work"}, "defaults": {"folder": "home"}}}),
            "both fixed and given a default",
        ),
        (json!({"send": {"name": "x"}}), "has no tool `send`"),
    ] {
        let (app, problems) = applied(value.clone());
        assert_eq!(problems.len(), 1, "{value}: {problems:?}");
        assert!(
            !problems[0].contains("garage"),
            "values are not shown: {problems:?}"
        );
        assert!(problems[0].contains(expected), "{value}: {problems:?}");
        assert!(
            problems[0].starts_with("config.json: /apps/com.example.notes/tools/"),
            "{problems:?}"
        );
        // Nothing is changed, and the tool the override was for is not served (served
        // as defined, it would run without the arguments the user fixed).
        assert!(app.bindings[0].tools.iter().all(|t| t.overridden.is_none()));
        let named = value.as_object().unwrap().keys().next().unwrap();
        for tool in ["add", "remove"] {
            let served = app.bindings[0].tool(tool).is_some();
            assert_eq!(served, tool != named, "{value}: `{tool}`");
        }
    }
}

#[test]
fn a_name_the_app_takes_later_withholds_the_tool_renamed_to_it() {
    // A downstream server adds a tool with the name the user gave another: the tool the
    // user fixed an argument of is not served as the app defines it.
    let mut app = app();
    let mut purge = app.bindings[0].tool("remove").unwrap().clone();
    purge.name = "purge".into();
    app.bindings[0].tools.push(purge);
    let problems = apply_to(
        &mut app,
        json!({"remove": {"name": "purge", "fixed": {"trash": true}}}),
    );
    assert!(
        problems[0].contains("another tool of the app is named `purge`"),
        "{problems:?}"
    );
    assert!(app.bindings[0].tool("remove").is_none());
    assert!(app.bindings[0].tool("purge").unwrap().overridden.is_none());
}

#[test]
fn names_that_flat_exposure_would_join_are_refused() {
    let (app, problems) =
        applied(json!({"remove": {"name": "add.note"}, "add": {"name": "add_note"}}));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("the same with `_` for `.`"),
        "{problems:?}"
    );
    assert_eq!(app.bindings[0].tools.len(), 1);
}

#[test]
fn arguments_of_a_composed_schema_cannot_be_fixed() {
    let mut app = one_tool(
        "pick",
        json!({"type": "object",
            "allOf": [{"properties": {"m": {"type": "string"}}, "required": ["m"]}]}),
    );
    let problems = apply_to(&mut app, json!({"pick": {"fixed": {"m": "a"}}}));
    assert!(problems[0].contains("`allOf` at its top"), "{problems:?}");
}

#[test]
fn a_fixed_values_keys_are_not_shown_when_it_does_not_fit() {
    let mut app = one_tool(
        "put",
        json!({"type": "object",
            "properties": {"o": {"type": "object", "additionalProperties": false}}}),
    );
    let problems = apply_to(
        &mut app,
        json!({"put": {"fixed": {"o": {"SECRETKEY_abc": 1}}}}),
    );
    assert!(
        problems[0].contains("/properties/o/additionalProperties"),
        "{problems:?}"
    );
    assert!(!problems[0].contains("SECRETKEY"), "{problems:?}");
}

#[test]
fn a_number_sent_as_its_fixed_value_in_another_form_is_the_same() {
    let (app, _) = applied(json!({"remove": {"fixed": {"count": 5}}}));
    let tool = app.bindings[0].tool("remove").unwrap();
    assert!(without_fixed(tool, Some(json!({"title": "t", "count": 5.0}))).is_ok());
    assert!(without_fixed(tool, Some(json!({"title": "t", "count": 6}))).is_err());
}

#[test]
fn control_characters_in_names_are_escaped() {
    let (_, problems) = applied(json!({"ghost\n2026 ERROR forged": {"name": "x"}}));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(!problems[0].contains('\n'), "{problems:?}");
    assert!(problems[0].contains("ghost\\n2026"), "{problems:?}");
}

#[test]
fn a_fixed_argument_the_schema_does_not_declare_is_allowed_when_it_is_open() {
    let (app, problems) = applied(json!({"remove": {"fixed": {"trash": true}}}));
    assert!(problems.is_empty(), "{problems:?}");
    let tool = app.bindings[0].tool("remove").unwrap();
    assert_eq!(
        with_fixed(tool, json!({"title": "t"})),
        json!({"title": "t", "trash": true})
    );
}

#[test]
fn applying_again_starts_from_the_tools_as_defined() {
    let (mut app, _) = applied(json!({"add": {"name": "add_note"}}));
    let (o, _) = overrides(json!({"add": {"name": "new_note"}}));
    apply(&mut app, &o, &Sink::new("config.json"));
    let tool = app.bindings[0].tool("new_note").unwrap();
    assert_eq!(tool.as_defined().name, "add");
    assert!(tool.as_defined().overridden.is_none());
    assert!(app.bindings[0].tool("add_note").is_none());
}

#[test]
fn the_config_is_read_strictly() {
    let (read, problems) =
        overrides(json!({"add": {"nmae": "x", "fixed": [1], "name": "two words"}}));
    assert_eq!(read["add"].fixed, Map::new());
    assert!(
        problems
            .iter()
            .any(|p| p.contains("unknown key `nmae`") && p.contains("error")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("/add/fixed")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("/add/name") && p.contains("not 1-64")),
        "{problems:?}"
    );
}

#[test]
fn the_fingerprint_covers_the_fixed_values_and_the_name_called() {
    use crate::consent::fingerprint::Definition;
    let plain = app();
    let defined = Definition::of(plain.bindings[0].tool("remove").unwrap());
    let (renamed_only, _) = applied(json!({"remove": {"fixed": {"trash": true}}}));
    let (other_value, _) = applied(json!({"remove": {"fixed": {"trash": false}}}));
    let a = Definition::of(renamed_only.bindings[0].tool("remove").unwrap());
    let b = Definition::of(other_value.bindings[0].tool("remove").unwrap());
    assert_ne!(defined.fingerprint, a.fingerprint);
    assert_ne!(a.fingerprint, b.fingerprint);
}

#[test]
fn a_rename_to_the_flat_form_of_another_tool_is_refused() {
    // `add.x` and `add_x` would both be listed as `…__add_x`.
    let (mut app, _) = applied(json!({"add": {"name": "add.x"}}));
    let problems = apply_to(
        &mut app,
        json!({"add": {"name": "add.x"}, "remove": {"name": "add_x"}}),
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("/tools/remove"), "{problems:?}");
    // Renaming to a name no other tool has is no collision.
    let (app, problems) = applied(json!({"add": {"name": "add"}, "remove": {"name": "remove_"}}));
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(app.bindings[0].tools.len(), 2);
}

#[test]
fn the_gateways_own_tools_of_a_server_are_not_changed_and_stay() {
    let mut app = app();
    let mut read = app.bindings[0].tool("remove").unwrap().clone();
    read.name = "mcp.resources.read".into();
    app.bindings[0].tools.push(read);
    let problems = apply_to(&mut app, json!({"mcp.resources.read": {"name": "read"}}));
    assert!(problems[0].contains("cannot be changed"), "{problems:?}");
    assert!(app.bindings[0].tool("mcp.resources.read").is_some());
}
