//! What agents see of the served apps, data-driven: `aai_search` ranking (`check(query,
//! expect)`), the guides, and the hint for a tool that does not exist. Descriptors are
//! written to a temporary folder and scanned; no gateway, no peer.
//!
//! Run: `cargo test -p aai-gateway --test registry`

use std::sync::Arc;

mod common;

use aai_gateway::testing::registry::{Snapshot, guide, search};
use serde_json::{Value, json};

fn app(id: &str, names: Value, description: &str, aliases: &[&str], tools: Value) -> Value {
    json!({
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
        "app": {"id": id, "name": names, "defaultLang": "en", "description": description,
                "aliases": aliases},
        "execution": {"type": "stdio", "command": "true"},
        "tools": tools
    })
}

fn tool(name: &str, description: &str, parameters: Value) -> Value {
    json!({"name": name, "description": description, "parameters": parameters})
}

fn snapshot() -> (Arc<Snapshot>, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let object = json!({"type": "object"});
    let docs = [
        app(
            "com.example.mail",
            json!({"en": "Mail", "zh-CN": "邮件"}),
            "Read and send email",
            &["email"],
            json!([
                tool(
                    "send_email",
                    "Send a message",
                    json!({"type": "object",
                    "properties": {"to": {"type": "string", "description": "Recipient"},
                                   "subject": {"type": "string"},
                                   "priority": {"type": "string", "enum": ["low", "high"],
                                                "default": "low"}},
                    "required": ["to"]})
                ),
                tool("list_unread", "List unread messages", object.clone()),
            ]),
        ),
        app(
            "com.example.player",
            json!({"en": "Player"}),
            "Plays music and video",
            &["music", "媒体"],
            json!([
                tool("play", "Start playback", object.clone()),
                tool("pause", "Pause playback", object.clone())
            ]),
        ),
        app(
            "com.example.notes",
            json!({"en": "Notes"}),
            "Notes you write down, mail to yourself",
            &[],
            json!([tool("create_note", "Write a note", object.clone())]),
        ),
    ];
    for doc in &docs {
        common::put(home.path(), doc);
    }
    let snapshot = common::snapshot_of(home.path(), Some("en"));
    (Arc::new(snapshot), home)
}

/// `query` finds exactly `expect` (app ids, best first), and for the first hit the tools
/// in `tools`.
fn check(snapshot: &Snapshot, query: &str, expect: &[&str], tools: &[&str]) {
    let hits = search::search(snapshot, query, 10);
    let ids: Vec<&str> = hits.iter().map(|h| h.entry.app.id.as_str()).collect();
    assert_eq!(ids, expect, "query {query:?}");
    if let Some(first) = hits.first() {
        for t in tools {
            assert!(
                first.tools.contains(t),
                "query {query:?}: {:?}",
                first.tools
            );
        }
    }
}

#[test]
fn search_ranks_names_aliases_descriptions_and_tools() {
    let (s, _home) = snapshot();
    check(&s, "mail", &["com.example.mail", "com.example.notes"], &[]);
    check(&s, "send email", &["com.example.mail"], &["send_email"]);
    // A name in another language, inside a sentence with no spaces.
    check(&s, "发邮件", &["com.example.mail"], &[]);
    check(&s, "媒体", &["com.example.player"], &[]);
    check(&s, "music", &["com.example.player"], &[]);
    check(&s, "pause", &["com.example.player"], &["pause"]);
    // An id: that app first (its parts `com`, `example` match the others too).
    check(
        &s,
        "com.example.notes",
        &[
            "com.example.notes",
            "com.example.mail",
            "com.example.player",
            // The gateway's own app: `com` is in its tools' "command".
            "aai",
        ],
        &[],
    );
    check(&s, "NOTES", &["com.example.notes"], &[]);
    check(&s, "", &[], &[]);
    check(&s, "   ", &[], &[]);
    check(&s, "zzzz", &[], &[]);
    assert_eq!(search::search(&s, "e", 1).len(), 1, "the limit holds");
    // The whole query is one of the words, with a tool's `_` read as a space.
    check(
        &s,
        "list unread",
        &["com.example.mail", "aai"],
        &["list_unread"],
    );
}

#[test]
fn apps_are_found_by_id_slug_name_or_alias() {
    let (s, _home) = snapshot();
    let found = |key: &str| s.find(key).map(|e| e.app.id.as_str());
    for key in [
        "com.example.mail",
        " com.example.mail ",
        "app:com.example.mail",
        "com_example_mail",
        "app_com_example_mail",
        "Mail",
        "邮件",
        "EMAIL",
    ] {
        assert_eq!(found(key), Some("com.example.mail"), "{key:?}");
    }
    assert_eq!(found("媒体"), Some("com.example.player"));
    assert_eq!(found("COM.EXAMPLE.NOTES"), Some("com.example.notes"));
    // Ids and slugs are exact; a name or alias must be one app's only.
    for key in ["com.example", "com_example", "nope.app", "", "mai"] {
        assert_eq!(found(key), None, "{key:?}");
    }
}

#[test]
fn a_name_or_alias_two_apps_share_finds_neither() {
    let home = tempfile::tempdir().unwrap();
    let object = json!([tool("t", "d", json!({"type": "object"}))]);
    for (id, name, aliases) in [
        ("com.example.a", "Shared", &["both", "only-a"][..]),
        ("com.example.b", "Shared", &["both"][..]),
        // Its name is its id: one app, found once.
        ("com.example.c", "com.example.c", &["c"][..]),
    ] {
        common::put(
            home.path(),
            &app(id, json!({"en": name}), "d", aliases, object.clone()),
        );
    }
    let s = common::snapshot_of(home.path(), Some("en"));
    let found = |key: &str| s.find(key).map(|e| e.app.id.as_str());
    assert_eq!(found("shared"), None);
    assert_eq!(found("BOTH"), None);
    assert_eq!(found("only-a"), Some("com.example.a"));
    assert_eq!(found("COM.EXAMPLE.C"), Some("com.example.c"));
    assert_eq!(found("c"), Some("com.example.c"));
}

#[test]
fn a_changed_read_only_annotation_changes_the_fingerprint() {
    // `flat` exposure lists it (`readOnlyHint`): clients must hear of the change.
    let fingerprint = |read_only: bool| {
        let home = tempfile::tempdir().unwrap();
        let mut t = tool("t", "d", json!({"type": "object"}));
        t["readOnly"] = json!(read_only);
        common::put(
            home.path(),
            &app("com.example.a", json!({"en": "A"}), "d", &[], json!([t])),
        );
        common::snapshot_of(home.path(), Some("en")).fingerprint()
    };
    assert_ne!(fingerprint(true), fingerprint(false));
}

#[test]
fn guides_show_parameters_and_a_ready_call() {
    let (s, _home) = snapshot();
    let mail = s.find("com.example.mail").unwrap();
    let text = guide::render(&s, mail);
    for expected in [
        "# Mail (`com.example.mail`)",
        "Read and send email",
        "- Names: Mail / 邮件",
        "- Aliases: email",
        "- Runs via: stdio (linux)",
        "## Tools (2)",
        "send_email",
        "Recipient",
        "`aai_exec`",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
    let one = guide::render_tool(&s, mail, "send_email").unwrap();
    assert!(
        one.starts_with("# Mail (`com.example.mail`): one tool"),
        "{one}"
    );
    assert!(
        one.contains("low") && one.contains("high"),
        "the enum is shown: {one}"
    );
    assert!(!one.contains("list_unread"), "{one}");
    assert!(guide::render_tool(&s, mail, "nope").is_none());
}

#[test]
fn a_missing_tool_is_answered_with_the_tools_there_are() {
    let small = ["play", "pause"];
    assert_eq!(
        guide::tool_hint(&small, "stop", "com.example.player"),
        "its tools are: play, pause"
    );
    let many: Vec<String> = (0..60).map(|i| format!("tool_{i}")).collect();
    let names: Vec<&str> = many.iter().map(String::as_str).collect();
    let hint = guide::tool_hint(&names, "tool_4", "com.example.big");
    assert!(hint.starts_with("close names: tool_4, tool_40"), "{hint}");
    assert!(hint.ends_with("lists all 60"), "{hint}");
    let none = guide::tool_hint(&names, "xyz", "com.example.big");
    assert_eq!(
        none,
        "`aai_guide {\"app\": \"com.example.big\"}` lists all 60"
    );
}
