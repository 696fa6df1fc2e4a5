//! An app's `events` (D-Bus signals and property changes) are read in the camelCase,
//! snake_case and platforms forms, and refused where they cannot come from.

use aai_descriptor::{EventSource, Severity, parse};
use serde_json::{Value, json};

fn d2(execution: Value, events: Value) -> String {
    json!({
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
        "app": {"id": "org.example.player", "name": {"en": "Player"}, "defaultLang": "en", "description": "Plays"},
        "execution": execution,
        "tools": [{"name": "next", "description": "Next", "method": "Next", "parameters": {"type": "object"}}],
        "events": events,
    })
    .to_string()
}

fn dbus() -> Value {
    json!({"type": "dbus", "service": "org.example.Player", "interface": "org.example.Player"})
}

fn errors(text: &str) -> Vec<String> {
    parse(text, "aai.json")
        .diagnostics
        .into_iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| format!("{} {}", d.pointer, d.message))
        .collect()
}

#[test]
fn a_dbus_app_declares_signals_and_property_changes() {
    let text = d2(
        dbus(),
        json!([
            {"name": "track_changed", "description": "Another track", "property": "Metadata"},
            {"name": "seeked", "signal": "Seeked", "interface": "org.mpris.MediaPlayer2.Player"},
        ]),
    );
    let app = parse(&text, "aai.json").app.expect("parses");
    let events = &app.bindings[0].events;
    assert_eq!(events.len(), 2);
    assert_eq!(
        events[0].source,
        EventSource::DbusProperty {
            property: "Metadata".into(),
            interface: None
        }
    );
    assert_eq!(
        events[1].source,
        EventSource::DbusSignal {
            member: "Seeked".into(),
            interface: Some("org.mpris.MediaPlayer2.Player".into())
        }
    );
    // The platforms form reads the same from its linux section.
    let d0 = json!({
        "schema_version": "1.0", "appId": "org.example.player", "name": "Player", "description": "Plays",
        "version": "1.0",
        "platforms": {"linux": {"automation": "dbus", "service": "org.example.Player",
            "tools": [{"name": "next", "description": "Next", "method": "Next", "parameters": {"type": "object"}}],
            "events": [{"name": "seeked", "signal": "Seeked"}]}},
    });
    let app = parse(&d0.to_string(), "aai.json").app.expect("parses");
    assert_eq!(app.bindings[0].events[0].name, "seeked");
}

#[test]
fn events_that_cannot_be_are_errors() {
    let stdio = json!({"type": "stdio", "command": "player"});
    let stdio = d2(stdio, json!([{"name": "x", "signal": "X"}]));
    assert!(
        errors(&stdio)[0].contains("only a `dbus` app has them"),
        "{:?}",
        errors(&stdio)
    );
    for (events, says) in [
        (
            json!([{"name": "x", "signal": "X", "property": "Y"}]),
            "not both",
        ),
        (json!([{"name": "x"}]), "missing required field `signal`"),
        (
            json!([{"name": "a b", "signal": "X"}]),
            "must be 1-64 characters",
        ),
        (
            json!([{"name": "x", "signal": "X"}, {"name": "x", "property": "Y"}]),
            "duplicate event name `x`",
        ),
        (
            json!([{"name": "x", "signal": "not.a member"}]),
            "/events/0/signal",
        ),
    ] {
        let found = errors(&d2(dbus(), events.clone()));
        assert!(
            found.iter().any(|e| e.contains(says)),
            "{events}: {found:?}"
        );
    }
}
