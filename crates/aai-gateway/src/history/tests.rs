//! Tests of `history.rs`.

use super::*;

#[test]
fn durations_read_or_say_what_they_expect() {
    let now = now_ms();
    let back = since("30m").unwrap();
    assert!((29 * 60 * 1000..31 * 60 * 1000).contains(&now.abs_diff(back)));
    assert!(since("45").is_ok(), "seconds by default");
    for bad in ["5y", "m", "-3h", "x"] {
        let e = since(bad).unwrap_err();
        assert!(matches!(e, Error::Duration(_)), "{bad}: {e}");
        assert!(e.to_string().contains("30m, 2h or 7d"), "{e}");
    }
}
use serde_json::json;

#[test]
fn secret_fields_are_masked_and_values_cut() {
    let masked = mask(
        &json!({"to": "a@b", "apiKey": "k3y", "nested": {"Password": "p"},
                                   "body": "x".repeat(1000), "list": [{"session_id": "s"}]}),
    );
    let text = masked.to_string();
    assert!(
        !text.contains("k3y") && !text.contains("\"p\"") && !text.contains("\"s\""),
        "{text}"
    );
    assert_eq!(masked["to"], "a@b");
    assert_eq!(masked["body"].as_str().unwrap().chars().count(), 201);
}

#[test]
fn secrets_in_other_shapes_are_masked_too() {
    let masked = mask(&json!({
        "pwd": "S1", "Bearer": "S2", "id_jwt": "S3", "wallet_mnemonic": "S4",
        "db": "postgres://user:S5@db.example:5432/app",
        "argv": ["run", "--password", "S6", "--token=S7", "-v", "kept"],
        "app": "https://api.example.com/v1?api_key=S8&q=kept",
        "header": "Authorization: Bearer S9",
    }));
    let text = masked.to_string();
    for n in 1..=9 {
        assert!(!text.contains(&format!("S{n}")), "S{n} leaked: {text}");
    }
    assert_eq!(masked["db"], "postgres://user:***@db.example:5432/app");
    assert_eq!(
        masked["argv"],
        json!(["run", "--password", "***", "--token=***", "-v", "kept"])
    );
    assert_eq!(
        masked["app"],
        "https://api.example.com/v1?api_key=***&q=kept"
    );
}

#[test]
fn a_social_security_number_is_masked_by_its_field_name() {
    let masked = mask(&json!({
        "ssn": "078-05-1120", "user_ssn": "S2", "customerSSN": "S3", "ssnLast4": "S4",
        "social_security_number": "S5", "SocialSecurityNo": "S6",
        // Three letters inside another word are not a name.
        "className": "kept", "lessness": "kept",
    }));
    let text = masked.to_string();
    assert!(!text.contains("078-05-1120"), "{text}");
    for n in 2..=6 {
        assert!(!text.contains(&format!("S{n}")), "S{n} leaked: {text}");
    }
    assert_eq!(masked["className"], "kept");
    assert_eq!(masked["lessness"], "kept");
}

#[test]
fn secret_field_names_are_found_in_any_case_and_at_any_length() {
    let long = format!("{}SSN", "x".repeat(80));
    let long_kept = format!("{}name", "x".repeat(80));
    for name in [
        "PASSWORD",
        "apiKey",
        "X-Auth-Token",
        "clientSecret",
        "so_cial-Secu_rity",
        "ssn",
        "SSN2",
        long.as_str(),
    ] {
        assert!(
            super::masking::secret_looking(name),
            "{name} should be masked"
        );
    }
    for name in [
        "message",
        "className",
        "lessness",
        "",
        "é",
        long_kept.as_str(),
    ] {
        assert!(
            !super::masking::secret_looking(name),
            "{name} should be kept"
        );
    }
}

/// Token-shaped values of the kinds `looks_secret_value` knows.
fn tokens() -> [String; 4] {
    [
        format!("ghp_{}", "a1B2".repeat(9)),
        format!("sk-proj-{}", "Zx9".repeat(8)),
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ".to_owned(),
        "AKIAIOSFODNN7EXAMPLE".to_owned(),
    ]
}

#[test]
fn secrets_inside_free_text_are_masked() {
    let [gh, sk, jwt, aws] = tokens();
    // A result's text (an MCP tool's content), as history keeps it.
    let text = format!(
        "Your token is {gh}. key={sk}; jwt:{jwt} ({aws}) Bearer first-credential-1 then Bearer second-credential-2"
    );
    let masked = mask(&json!({"content": [{"type": "text", "text": text}]})).to_string();
    for secret in [&gh, &sk, &jwt, &aws] {
        assert!(
            !masked.contains(secret.as_str()),
            "{secret} leaked: {masked}"
        );
    }
    assert!(!masked.contains("credential-"), "{masked}");
    assert!(masked.contains("Your token is ***. key=***"), "{masked}");
    // A private key, in an error detail or a result serialized as JSON (its line
    // breaks escaped), cut or whole.
    let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----";
    for head in [
        format!("failed to parse: {pem}"),
        json!({"text": format!("here:\n{pem}\n{gh}")}).to_string(),
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn".to_owned(),
    ] {
        let kept = excerpt(&head);
        assert!(
            !kept.contains("b3BlbnNzaC1rZXkt") && !kept.contains("MIIEpAIBAAKC"),
            "{kept}"
        );
        assert!(!kept.contains(&gh), "{kept}");
        assert!(kept.contains("PRIVATE KEY-----***"), "{kept}");
    }
    // A word that only contains a prefix stays, and so does text without secrets.
    let plain = "task-scheduler-configuration ask-me-anything-please Bearer";
    assert_eq!(mask_tokens(plain), plain);
    assert_eq!(excerpt("plain text"), "plain text");
}

#[test]
fn short_credentials_and_keys_are_masked_though_no_word_is_token_long() {
    // No run of 16 word characters: only the `bearer` and `-----BEGIN ` checks find these.
    assert_eq!(mask_tokens("auth: Bearer abc"), "auth: Bearer ***");
    assert_eq!(mask_tokens("BEARER a1"), "BEARER ***");
    let pem = "-----BEGIN PRIVATE KEY-----\nab+cd/ef+gh\n-----END PRIVATE KEY-----";
    assert_eq!(
        mask_tokens(pem),
        "-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----"
    );
    let short = "ok: 15-characters.";
    assert_eq!(mask_tokens(short), short);
}

#[test]
fn a_token_in_a_tool_name_or_a_stored_excerpt_is_masked() {
    let [gh, sk, ..] = tokens();
    let kept = prepare(Record {
        at_ms: 0,
        caller: "c@stdio".into(),
        person: None,
        app: "com.a".into(),
        asked: None,
        tool: format!("search.{gh}"),
        args: Value::Null,
        status: "error".into(),
        code: Some("TOOL_NOT_FOUND".into()),
        duration_ms: 0,
        excerpt: format!("no tool `{sk}` here"),
        fingerprint: None,
        run: None,
    });
    assert_eq!(kept.tool, "search.***");
    assert_eq!(kept.excerpt, "no tool `***` here");
}

#[test]
fn records_are_written_off_thread_filtered_and_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state.db");
    let sink = Sqlite::open(&file, Retention { days: 30, rows: 3 }).unwrap();
    for i in 0..5u64 {
        sink.record(Record {
            at_ms: now_ms() + i,
            caller: "c@stdio".into(),
            person: None,
            asked: None,
            app: if i % 2 == 0 {
                "com.a".into()
            } else {
                "com.b".into()
            },
            // Names come from clients and descriptors, at any length: they are cut.
            tool: if i == 3 {
                "t".repeat(1 << 20)
            } else {
                "t".into()
            },
            args: json!({"i": i}),
            status: if i == 4 { "error".into() } else { "ok".into() },
            code: (i == 4).then(|| "TIMEOUT".into()),
            duration_ms: i,
            excerpt: String::new(),
            fingerprint: None,
            run: None,
        });
    }
    let all = |f: &Filter| query(&file, f).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while all(&Filter {
        limit: 100,
        ..Filter::default()
    })
    .len()
        < 5
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer never wrote"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let a = all(&Filter {
        app: Some("com.a".into()),
        limit: 100,
        ..Filter::default()
    });
    assert_eq!(a.len(), 3);
    assert_eq!(a[0].args, json!({"i": 4}), "newest first");
    let errors = all(&Filter {
        status: Some("error".into()),
        limit: 100,
        ..Filter::default()
    });
    assert_eq!(errors[0].code.as_deref(), Some("TIMEOUT"));
    let long = all(&Filter {
        app: Some("com.b".into()),
        limit: 100,
        ..Filter::default()
    });
    assert_eq!(
        long[0].tool.chars().count(),
        MAX_NAME + 1,
        "cut, with its ellipsis"
    );
    drop(sink);
    // Retention applies when a writer starts.
    let _again = Sqlite::open(&file, Retention { days: 30, rows: 3 }).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while all(&Filter {
        limit: 100,
        ..Filter::default()
    })
    .len()
        > 3
    {
        assert!(std::time::Instant::now() < deadline, "never pruned");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn processes_opening_an_old_history_at_once_all_succeed() {
    // The writer and a reader (or `history`) open a file of an earlier release at the same
    // moment: both add the missing columns, and neither may fail for the other's.
    for _ in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state.db");
        rusqlite::Connection::open(&file)
            .unwrap()
            .execute_batch(
                "CREATE TABLE history (id INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, caller TEXT NOT NULL,
                 app TEXT NOT NULL, tool TEXT NOT NULL, args TEXT NOT NULL, status TEXT NOT NULL, code TEXT,
                 duration_ms INTEGER NOT NULL, excerpt TEXT NOT NULL)",
            )
            .unwrap();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
        let opened: Vec<_> = (0..6)
            .map(|_| {
                let (file, barrier) = (file.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    connect(&file).map(drop)
                })
            })
            .collect();
        for o in opened {
            o.join().unwrap().expect("every opener succeeds");
        }
    }
}
