//! Tests of `script.rs`.

use super::*;
use serde_json::json;

const MAIL: &str = "tell application \"Mail\"\n  set newMessage to make new outgoing message with properties {subject:\"${subject}\", content:\"${body}\", visible:false}\n  tell newMessage\n    make new to recipient at beginning of to recipients with properties {address:\"${to}\"}\n    send\n  end tell\nend tell\nreturn \"{\\\"success\\\":true, \\\"message_id\\\":\\\"generated\\\"}\"";

/// Values no placeholder may turn into code.
fn hostile() -> Vec<String> {
    let mut v: Vec<String> = [
        "\"; do shell script \"rm -rf ~",
        "\\\"; do shell script \"id",
        "'; $(id); `id`; \\' \\\" \\\\",
        "“smart” ‘quotes’",
        "line\nbreak\r\nand\u{2028}sep\u{2029}",
        "-- comment\n(* block *) # hash",
        "«event sysoexec» |pipe|",
        "${other} ${subject} `${x}` \\${y}",
        "*) end tell\ndo shell script \"id\"\n(*",
        "%s %d & ; | < > ¬",
        "nul\u{0}byte\u{7}bell",
        "😀 中文 é",
        "</script>",
    ]
    .map(str::to_owned)
    .to_vec();
    v.push("x".repeat(100 * 1024));
    v
}

fn args(value: &str) -> Value {
    json!({"subject": value, "body": value, "to": value})
}

#[test]
fn the_spec_mail_example_renders_as_the_template_means() {
    let r = render(
        Lang::AppleScript,
        MAIL,
        ScriptOutput::Text,
        &json!({"to": "bob@example.com", "subject": "Hi \"Bob\"", "body": "Line 1\nLine 2"}),
    )
    .unwrap();
    assert_eq!(r.program, "osascript");
    assert_eq!(r.args, ["-l", "AppleScript", "-s", "h"]);
    assert!(
        r.stdin
            .contains("{subject:\"Hi \\\"Bob\\\"\", content:\"Line 1\nLine 2\", visible:false}")
    );
    assert!(r.stdin.contains("{address:\"bob@example.com\"}"));
}

#[test]
fn no_value_changes_the_code_of_an_applescript() {
    let template = format!("{MAIL}\n-- note ${{body}}\nset n to \"${{to}}\" & \"tail\"");
    let benign = render(Lang::AppleScript, &template, ScriptOutput::Text, &args("x")).unwrap();
    let expected = applescript_code(&benign.stdin);
    for value in hostile() {
        let r = render(
            Lang::AppleScript,
            &template,
            ScriptOutput::Text,
            &args(&value),
        )
        .unwrap();
        assert_eq!(
            applescript_code(&r.stdin),
            expected,
            "value {value:?} changed the code"
        );
        assert!(!r.stdin.contains('\0'));
    }
}

#[test]
fn no_value_changes_the_code_of_a_jxa_script() {
    let template = "const mail = Application('Mail');\nconst m = mail.OutgoingMessage({subject: '${subject}', content: \"${body}\"});\nconst t = `to ${to} and ${to}`; // ${body}\nm.send(); JSON.stringify({ok: true, n: ${count}})";
    let render_with = |value: &str| {
        let mut a = args(value);
        a["count"] = json!(3);
        render(Lang::JavaScript, template, ScriptOutput::Text, &a).unwrap()
    };
    let expected =
        aai_descriptor::script::skeleton(Lang::JavaScript, &render_with("x").stdin).unwrap();
    for value in hostile() {
        let r = render_with(&value);
        let got = aai_descriptor::script::skeleton(Lang::JavaScript, &r.stdin).unwrap();
        assert_eq!(got, expected, "value {value:?} changed the code");
        assert_eq!(r.args, ["-l", "JavaScript", "-s", "h"]);
    }
    let r = render_with("a'b");
    assert!(r.stdin.contains("subject: 'a\\u0027b'"));
    assert!(r.stdin.contains("n: 3})"));
}

#[test]
fn code_placeholders_take_numbers_and_booleans_only() {
    let t = "set n to ${n}\nset f to ${flag}";
    let r = render(
        Lang::AppleScript,
        t,
        ScriptOutput::Text,
        &json!({"n": -2.5, "flag": true}),
    )
    .unwrap();
    assert_eq!(r.stdin, "set n to -2.5\nset f to true");
    let r = render(Lang::AppleScript, t, ScriptOutput::Text, &json!({})).unwrap();
    assert_eq!(r.stdin, "set n to missing value\nset f to missing value");
    let e = render(
        Lang::AppleScript,
        t,
        ScriptOutput::Text,
        &json!({"n": "1 & do shell script \"id\""}),
    )
    .unwrap_err();
    assert!(matches!(e, Error::NotCode(ref n) if n == "n"), "{e}");
    assert!(!e.to_string().contains("shell"), "the value is not echoed");
}

#[test]
fn missing_optional_values_render_empty_and_records_use_source_form() {
    let r = render(
        Lang::AppleScript,
        "return \"[${q}]\"",
        ScriptOutput::Record,
        &json!({}),
    )
    .unwrap();
    assert_eq!(r.stdin, "return \"[]\"");
    assert_eq!(r.args, ["-l", "AppleScript", "-s", "s"]);
}

#[test]
fn results_are_read() {
    assert_eq!(
        read(ScriptOutput::Text, "{\"success\":true}\n").unwrap(),
        json!({"success": true})
    );
    assert_eq!(
        read(ScriptOutput::Text, "plain words\n").unwrap(),
        json!("plain words")
    );
    assert_eq!(
        read(
            ScriptOutput::Record,
            "{name:\"Bob\", age:30, tags:{\"a\", \"b\"}, done:false, due:missing value}\n"
        )
        .unwrap(),
        json!({"name": "Bob", "age": 30, "tags": ["a", "b"], "done": false, "due": null})
    );
    assert_eq!(
        GatewayError::from(read(ScriptOutput::Record, "not a record").unwrap_err()).code,
        Code::AutomationFailed
    );
}

#[test]
fn error_numbers_map_to_the_documented_codes() {
    let cases = [
        (
            "25:31: execution error: Not authorized to send Apple events to Mail. (-1743)",
            Code::PermissionDenied,
        ),
        (
            "execution error: Mail got an error: Application isn’t running. (-600)",
            Code::AppNotRunning,
        ),
        (
            "execution error: Connection is invalid. (-609)",
            Code::AppNotRunning,
        ),
        (
            "0:5: syntax error: Expected end of line but found identifier. (-2741)",
            Code::ScriptParseError,
        ),
        (
            "syntax error: A identifier can’t go after this identifier. (-2740)",
            Code::ScriptParseError,
        ),
        (
            "execution error: Mail got an error: AppleEvent timed out. (-1712)",
            Code::Timeout,
        ),
        (
            "execution error: User canceled. (-128)",
            Code::PermissionDenied,
        ),
        (
            "execution error: Can’t get message 1. (-1728)",
            Code::AutomationFailed,
        ),
        ("", Code::AutomationFailed),
    ];
    for (stderr, code) in cases {
        assert_eq!(
            GatewayError::from(failure("com.apple.mail", stderr)).code,
            code,
            "{stderr}"
        );
    }
    let e = GatewayError::from(failure("com.apple.mail", cases[0].0));
    assert!(e.detail.contains("Privacy & Security › Automation"));
}

#[test]
fn apple_events_carry_the_envelope_as_an_escaped_literal() {
    let events = aai_descriptor::AppleEvents {
        bundle_id: "com.example.reminders".into(),
        event_class: "AAI ".into(),
        event_id: "call".into(),
    };
    let envelope = json!({"version": "1.0", "tool": "createReminder", "params": {"title": "\"» end tell do shell script \"id"}, "request_id": "1"});
    let r = render_event(&events, &envelope);
    assert_eq!(r.args, ["-l", "AppleScript", "-s", "h"]);
    assert!(r.stdin.starts_with(
        "tell application id \"com.example.reminders\" to return «event AAI call» \"{\\\""
    ));
    assert!(r.stdin.contains(r#"\\\"» end tell do shell script \\\"id"#));
    let skeleton = aai_descriptor::script::skeleton(Lang::AppleScript, &r.stdin).unwrap();
    assert_eq!(
        skeleton,
        "tell application id \"\" to return «event AAI call» \"\""
    );
    assert_eq!(
            read_event_reply("{\"version\":\"1.0\",\"request_id\":\"1\",\"status\":\"success\",\"result\":{\"id\":\"r1\"}}\n").unwrap(),
            json!({"id": "r1"})
        );
    let reported =
        read_event_reply("{\"status\":\"error\",\"error\":{\"code\":-32005,\"message\":\"bad\"}}")
            .unwrap_err();
    assert_eq!(GatewayError::from(reported).code, Code::InvalidParams);
}
