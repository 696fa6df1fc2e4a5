//! Tests of `intent.rs`.

use super::*;
use serde_json::json;

fn extras() -> Vec<(String, Value)> {
    vec![
        ("to".into(), json!("${to}")),
        ("subject".into(), json!("Re: ${subject}")),
        ("count".into(), json!("${count}")),
        ("urgent".into(), json!("${urgent}")),
        ("big".into(), json!("${big}")),
        ("ratio".into(), json!("${ratio}")),
        ("none".into(), json!("${none}")),
    ]
}

#[test]
fn extras_are_typed_words_for_the_device_shell() {
    let args = json!({"to": "a'; reboot; '", "subject": "$(id) `id` \"x\"", "count": 3, "urgent": true, "big": 5_000_000_000_i64, "ratio": 0.5});
    let words = render(
        Some("emulator-5554"),
        "com.example.mail",
        "com.example.MAIL_SEND",
        &extras(),
        &args,
    )
    .unwrap();
    assert_eq!(
        words,
        [
            "-s",
            "emulator-5554",
            "shell",
            "am",
            "broadcast",
            "-a",
            "'com.example.MAIL_SEND'",
            "-p",
            "'com.example.mail'",
            "--es",
            "'to'",
            "'a'\\''; reboot; '\\'''",
            "--es",
            "'subject'",
            "'Re: $(id) `id` \"x\"'",
            "--ei",
            "'count'",
            "'3'",
            "--ez",
            "'urgent'",
            "'true'",
            "--el",
            "'big'",
            "'5000000000'",
            "--ef",
            "'ratio'",
            "'0.5'",
            "--esn",
            "'none'"
        ]
    );
    let e = render(None, "p", "a", &extras(), &json!({"to": "nul\u{0}"})).unwrap_err();
    assert!(matches!(e, Error::Nul(ref k) if k == "to"), "{e}");
    assert_eq!(GatewayError::from(e).code, Code::InvalidParams);
}

/// A real POSIX shell (the device's is one) reads each quoted word back unchanged.
#[tokio::test]
async fn quoted_words_survive_a_posix_shell_unchanged() {
    for value in [
        "a'b", "''", "$(id)", "`id`", "\\", "\n;|&", "'\"'\"'", "é😀",
    ] {
        let args = ["-c".to_owned(), format!("printf %s {}", quote(value))];
        let spec = Spec {
            program: "sh",
            args: &args,
            env: &[],
            base_dir: std::path::Path::new("/"),
            label: "quoting test",
        };
        let limits = Limits {
            deadline: std::time::Duration::from_secs(10),
            max_output: 4096,
            cancel: tokio_util::sync::CancellationToken::new(),
        };
        let out = process::run(&spec, b"", &limits).await.unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), value);
    }
}

#[test]
fn results_are_read() {
    assert_eq!(
        read_rows("Row: 0 id=1, title=Hi, there, done=NULL\nRow: 1 id=2, title=x=y\n"),
        json!([{"id": "1", "title": "Hi, there", "done": null}, {"id": "2", "title": "x=y"}])
    );
    assert_eq!(read_rows("No result found.\n"), json!([]));
    assert_eq!(
            read_broadcast("Broadcasting: Intent { act=x }\nBroadcast completed: result=-1, data=\"{\"ok\":true}\"\n").unwrap(),
            json!({"ok": true})
        );
    assert_eq!(
        read_broadcast("Broadcast completed: result=0\n").unwrap(),
        Value::Null
    );
    assert!(read_broadcast("Error: no devices").is_err());
}
