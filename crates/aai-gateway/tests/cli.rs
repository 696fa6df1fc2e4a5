//! The `aai-gateway` binary's discovery commands: `--scan [--json]`, `validate`, config
//! handling, locale, precedence. Every test runs the built binary with a cleared
//! environment, a temporary `--home` and an empty fake system root, so nothing on the
//! machine leaks in.
//!
//! Run: `cargo test -p aai-gateway --test cli`

// Tests and benchmarks drive the binary and peers as separate processes.
#![allow(clippy::disallowed_methods)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

/// A home directory, a fake system root, and the binary.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let env = Env {
            dir: tempfile::tempdir().unwrap(),
        };
        fs::create_dir_all(env.home()).unwrap();
        fs::create_dir_all(env.root()).unwrap();
        env
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home/.aai")
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// Copies a fixture to `<home>/<folder>/aai.json`.
    fn install(&self, fixture_rel: &str, folder: &str) {
        self.put(
            &self.home().join(folder).join("aai.json"),
            &fs::read_to_string(fixture(fixture_rel)).unwrap(),
        );
    }

    fn put(&self, path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_aai-gateway"));
        c.env_clear()
            .env("HOME", self.dir.path().join("home"))
            .env("AAI_SYSTEM_ROOT", self.root())
            // No session bus: built-in apps would otherwise follow the machine's desktop.
            .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
            .arg("--home")
            .arg(self.home());
        c
    }

    fn run(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut c = self.cmd();
        c.args(args);
        for (k, v) in vars {
            c.env(k, v);
        }
        c.output().unwrap()
    }

    fn scan(&self, vars: &[(&str, &str)]) -> Value {
        let out = self.run(&["--scan", "--json"], vars);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

fn app<'a>(scan: &'a Value, id: &str) -> &'a Value {
    scan["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("{id} not listed: {scan:#}"))
}

fn errors_for<'a>(scan: &'a Value, file_part: &str) -> Vec<&'a Value> {
    scan["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["source"].as_str().unwrap().contains(file_part) && d["severity"] == "error")
        .collect()
}

#[test]
fn scan_lists_all_three_dialects_and_every_broken_file() {
    let env = Env::new();
    env.install("valid/d0-mail.json", "com.apple.mail");
    env.install("valid/d1-notes-linux.json", "org.example.notes");
    env.install("valid/d1-example-api-web.json", "com.example.api");
    env.install("valid/d2-yuque-apikey.json", "com.yuque.api");
    env.install("valid/d2-files-dbus.json", "com.example.files");
    env.install("valid/d2-example-com.json", "com.example.app");
    for (i, name) in [
        "invalid-json.json",
        "d0-linux-missing-method.json",
        "d1-bad-version-ipc-web.json",
        "d2-many-problems.json",
        "not-a-descriptor.json",
    ]
    .iter()
    .enumerate()
    {
        env.install(&format!("broken/{name}"), &format!("broken.{i}"));
    }

    let scan = env.scan(&[]);
    let apps = scan["apps"].as_array().unwrap();
    let ids: Vec<&str> = apps.iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            // The gateway's own app is always served.
            "aai",
            "com.apple.mail",
            "com.example.api",
            "com.example.app",
            "com.example.files",
            "com.yuque.api",
            "org.example.notes"
        ]
    );

    let mail = app(&scan, "com.apple.mail");
    assert_eq!(mail["name"], "Mail");
    assert!(
        mail["source"]
            .as_str()
            .unwrap()
            .ends_with("com.apple.mail/aai.json")
    );
    let bindings: Vec<(String, String, bool)> = mail["bindings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["platform"].as_str().unwrap().to_owned(),
                b["type"].as_str().unwrap().to_owned(),
                b["usable"].as_bool().unwrap(),
            )
        })
        .collect();
    let linux = cfg!(target_os = "linux");
    assert_eq!(
        bindings,
        [
            (
                "macos".into(),
                "applescript".into(),
                cfg!(target_os = "macos")
            ),
            ("windows".into(), "com".into(), cfg!(windows)),
            ("linux".into(), "dbus".into(), linux),
            ("android".into(), "intent".into(), false),
            ("ios".into(), "url-scheme".into(), false),
        ]
    );
    assert_eq!(
        mail["bindings"][0]["tools"],
        serde_json::json!(["send_email", "search_emails"])
    );

    let notes = app(&scan, "org.example.notes");
    assert_eq!(
        notes["bindings"][0]["type"], "dbus",
        "D1 ipc on linux is the D-Bus JSON convention"
    );
    let yuque = app(&scan, "com.yuque.api");
    assert_eq!(yuque["bindings"][0]["usable"], true);
    assert_eq!(
        yuque["bindings"][0]["tools"],
        serde_json::json!(["getUser", "getDoc"])
    );
    assert_eq!(yuque["version"], "1.0.0");
    assert_eq!(yuque["aliases"][0], "语雀");

    // Every broken file has at least one error naming the file; the pointers are exact.
    for i in 0..5 {
        assert!(
            !errors_for(&scan, &format!("broken.{i}/")).is_empty(),
            "broken.{i} has no error"
        );
    }
    let d0 = errors_for(&scan, "broken.1/");
    let pointers: Vec<&str> = d0.iter().map(|d| d["pointer"].as_str().unwrap()).collect();
    assert!(
        pointers.contains(&"/platforms/linux/tools/0"),
        "{pointers:?}"
    );
    assert!(d0.iter().any(|d| d["pointer"] == "/platforms/linux/tools/0"
        && d["message"] == "missing required field `method` (or `property`, to read or write a D-Bus property)"));
    let invalid = errors_for(&scan, "broken.0/");
    assert!(
        invalid[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON at line 5 column 1")
    );
}

#[test]
fn human_scan_is_a_table_with_a_summary_and_diagnostics() {
    let env = Env::new();
    env.install("valid/d2-reminders-macos.json", "com.example.reminders");
    env.install("broken/d2-platform-mismatch.json", "com.example.mismatch");
    let out = env.run(&["--scan"], &[("LANG", "zh_CN.UTF-8")]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("APP  "), "{text}");
    assert!(
        lines[1].starts_with("aai                    AAI Gateway"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("com.example.reminders  提醒事项     macos     apple-events"),
        "{text}"
    );
    assert!(
        text.contains("2 apps (1 usable here) from 2 files; 2 errors, 1 warning"),
        "{text}"
    );
    assert!(text.contains("com.example.mismatch/aai.json: /execution/type: error: execution type `apple-events` needs platform `macos`"), "{text}");
    // The mismatch hides nothing else of the file.
    assert!(
        text.contains("com.example.mismatch/aai.json: /execution/eventClass: error:"),
        "{text}"
    );
}

#[test]
fn names_follow_the_locale() {
    let env = Env::new();
    env.install("valid/d2-reminders-macos.json", "com.example.reminders");
    env.install("valid/d1-example-api-web.json", "com.example.api");
    let name = |vars: &[(&str, &str)]| {
        let scan = env.scan(vars);
        (
            app(&scan, "com.example.reminders")["name"]
                .as_str()
                .unwrap()
                .to_owned(),
            app(&scan, "com.example.api")["name"]
                .as_str()
                .unwrap()
                .to_owned(),
        )
    };
    assert_eq!(name(&[("LANG", "zh_CN.UTF-8")]).0, "提醒事项");
    assert_eq!(name(&[("LANG", "zh_TW.UTF-8")]).0, "提醒事項");
    assert_eq!(name(&[("LANG", "de_DE.UTF-8")]).0, "Erinnerungen");
    assert_eq!(name(&[("LANG", "ja_JP.UTF-8")]).0, "Reminders");
    assert_eq!(name(&[]).0, "Reminders");
    assert_eq!(
        name(&[("LANG", "de_DE.UTF-8"), ("LC_ALL", "fr_FR.UTF-8")]).0,
        "Rappels",
        "LC_ALL wins"
    );
    // A pipe-separated name has no tags: the first part, whatever the locale.
    assert_eq!(name(&[("LANG", "zh_CN.UTF-8")]).1, "Example API");
    // config.locale overrides the environment.
    env.put(&env.home().join("config.json"), r#"{"locale": "zh-TW"}"#);
    assert_eq!(name(&[("LANG", "de_DE.UTF-8")]).0, "提醒事項");
}

#[test]
fn precedence_user_over_config_over_system_with_shadow_reports() {
    let env = Env::new();
    let descriptor = |platform: &str, tool: &str, base: &str| {
        format!(
            r#"{{"schemaVersion":"1.0","version":"1.0.0","platform":"{platform}",
            "app":{{"id":"com.example.dup","name":{{"en":"Dup {base}"}},"defaultLang":"en","description":"d"}},
            "execution":{{"type":"http","baseUrl":"https://{base}.example.com"}},
            "tools":[{{"name":"{tool}","description":"t","parameters":{{"type":"object"}},"execution":{{"path":"/x"}}}}]}}"#
        )
    };
    let extra = env.dir.path().join("extra");
    env.put(
        &env.home().join("config.json"),
        &format!(r#"{{"scanPaths": ["{}"]}}"#, extra.display()),
    );
    // System: /usr/share/applications/aai (flat) and /opt/<x>/aai.json.
    let share = env.root().join("usr/share/applications/aai");
    env.put(
        &share.join("dup.json"),
        &descriptor("web", "from_system", "system"),
    );
    env.put(
        &share.join("only-system.json"),
        &descriptor("web", "x", "s").replace("com.example.dup", "com.example.system"),
    );
    env.put(
        &env.root().join("opt/thing/aai.json"),
        &descriptor("web", "x", "o").replace("com.example.dup", "com.example.opt"),
    );
    // Config path: two platform files for the same app merge; a second web file is a duplicate.
    env.put(
        &extra.join("a-web.json"),
        &descriptor("web", "from_config", "config"),
    );
    env.put(
        &extra.join("b-linux.json"),
        &descriptor("linux", "from_config_linux", "config"),
    );
    env.put(
        &extra.join("c-web-again.json"),
        &descriptor("web", "again", "config2"),
    );
    env.put(
        &extra.join("config.json"),
        "{ not a descriptor, ignored by name }",
    );

    let scan = env.scan(&[]);
    let dup = app(&scan, "com.example.dup");
    assert_eq!(dup["name"], "Dup config");
    let tools: Vec<&Value> = dup["bindings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| &b["tools"][0])
        .collect();
    assert_eq!(tools, ["from_config", "from_config_linux"]);
    assert!(
        dup["bindings"][1]["source"]
            .as_str()
            .unwrap()
            .ends_with("extra/b-linux.json")
    );
    app(&scan, "com.example.system");
    app(&scan, "com.example.opt");
    let warnings: Vec<String> = scan["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d["source"].as_str().unwrap(),
                d["message"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        warnings.iter().any(
            |w| w.contains("aai/dup.json app `com.example.dup` is shadowed by")
                && w.contains("config location")
                && w.contains("over system location")
        ),
        "{warnings:#?}"
    );
    assert!(
        warnings.iter().any(|w| w
            .contains("c-web-again.json app `com.example.dup` already has a `web` binding from")),
        "{warnings:#?}"
    );
    assert_eq!(warnings.len(), 2, "{warnings:#?}");

    // Now the user dir takes the app over.
    env.put(
        &env.home().join("com.example.dup/aai.json"),
        &descriptor("web", "from_user", "user"),
    );
    let scan = env.scan(&[]);
    let dup = app(&scan, "com.example.dup");
    assert_eq!(dup["bindings"].as_array().unwrap().len(), 1);
    assert_eq!(dup["bindings"][0]["tools"][0], "from_user");
    let shadowed = scan["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["message"].as_str().unwrap().contains("is shadowed by"))
        .count();
    assert_eq!(
        shadowed, 4,
        "the three config files and the system file are shadowed"
    );
}

#[test]
fn validate_exit_status_and_messages() {
    let env = Env::new();
    let good = env.run(&["validate", fixture("valid").to_str().unwrap()], &[]);
    assert_eq!(
        good.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&good.stdout)
    );
    let text = String::from_utf8(good.stdout).unwrap();
    let files = std::fs::read_dir(fixture("valid"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count();
    assert_eq!(
        text.lines().filter(|l| l.starts_with("ok ")).count(),
        files,
        "{text}"
    );

    let bad = env.run(
        &[
            "validate",
            fixture("valid/d0-mail.json").to_str().unwrap(),
            fixture("broken/d1-bad-version-ipc-web.json")
                .to_str()
                .unwrap(),
        ],
        &[],
    );
    assert_eq!(bad.status.code(), Some(1));
    let text = String::from_utf8(bad.stdout).unwrap();
    assert!(
        text.contains(
            "d1-bad-version-ipc-web.json: /version: error: `1.0` is not a semantic version"
        ),
        "{text}"
    );

    let json = env.run(
        &[
            "validate",
            "--json",
            fixture("broken").to_str().unwrap(),
            "/nonexistent/aai.json",
        ],
        &[],
    );
    assert_eq!(json.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["valid"], false);
    let files = v["files"].as_array().unwrap();
    let broken = std::fs::read_dir(fixture("broken")).unwrap().count();
    assert_eq!(
        files.len(),
        broken + 1,
        "every broken fixture and the missing file"
    );
    assert!(files.iter().all(|f| f["valid"] == false));
    assert!(
        files.last().unwrap()["diagnostics"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("cannot read the file")
    );
}

#[test]
fn validate_reads_the_reference_gateways_descriptors_and_says_where_their_id_comes_from() {
    let env = Env::new();
    // The README's example and the three preset agents, each in a folder of its id, as
    // the reference keeps them.
    let mut args = vec!["validate".to_owned()];
    for (fixture_name, id) in [
        ("access-my-app.json", "my-app"),
        ("access-claude.json", "claude"),
        ("access-codex.json", "codex"),
        ("access-opencode.json", "opencode"),
    ] {
        env.install(&format!("valid/{fixture_name}"), id);
        args.push(env.home().join(id).join("aai.json").display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = env.run(&args, &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    for (id, tools) in [
        ("my-app", "0 tools"),
        ("claude", "1 tool"),
        ("codex", "1 tool"),
        ("opencode", "1 tool"),
    ] {
        let file = env.home().join(id).join("aai.json");
        assert!(
            text.contains(&format!(
                "ok      {} ({id}, access, {tools})\n  the file names no app id: the gateway gives it `{id}`, the name of its folder (write `app.id` to choose another)\n",
                file.display()
            )),
            "{text}"
        );
    }
    // A lone file takes its name; one with `app.id` says nothing of it.
    let out = env.run(
        &[
            "validate",
            "--json",
            fixture("valid/access-pdf-skill.json").to_str().unwrap(),
            fixture("valid/access-search-http.json").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = v["files"].as_array().unwrap();
    assert_eq!(
        (
            &files[0]["app"],
            &files[0]["idFromPlace"],
            &files[0]["dialect"]
        ),
        (
            &Value::from("access-pdf-skill"),
            &Value::from(true),
            &Value::from("access")
        )
    );
    assert_eq!(
        (&files[1]["app"], &files[1]["idFromPlace"]),
        (&Value::from("com.example.search"), &Value::from(false))
    );

    // A broken one: every problem at once, and exit status 1.
    let out = env.run(
        &[
            "validate",
            fixture("broken/access-many-problems.json")
                .to_str()
                .unwrap(),
            fixture("broken/access-cli.json").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches(": error: ").count(), 10, "{text}");
    for expected in [
        "access-many-problems.json: /app/name: error: missing required field `default`",
        "access-many-problems.json: /discovery/checks/1/kind: error: `env` is not a check",
        "access-many-problems.json: /exposure: error: missing required field `summary`",
        "access-many-problems.json: /exposure/keyword: warning: unknown field `keyword` is ignored; did you mean `keywords`?",
        "access-many-problems.json: /access/config/url: error: a `stdio` server is started with `command`",
        "access-cli.json: /access/protocol: error: protocol `cli` is not supported",
    ] {
        assert!(text.contains(expected), "{expected}\n{text}");
    }
}

#[test]
fn scan_serves_reference_descriptors_whose_checks_hold_and_says_why_the_others_are_left_out() {
    let env = Env::new();
    // The environment has no PATH: neither `npx` nor `claude` is found.
    env.install("valid/access-claude.json", "claude");
    env.install("valid/access-pdf-skill.json", "pdf");
    env.put(
        &env.home().join("pdf/skill/SKILL.md"),
        "---\nname: pdf\ndescription: PDF files\n---\n# PDF\n",
    );
    let scan = env.scan(&[]);
    let pdf = app(&scan, "pdf");
    assert_eq!(pdf["bindings"][0]["type"], "skill");
    assert_eq!(pdf["bindings"][0]["tools"], serde_json::json!(["read"]));
    assert!(
        scan["apps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["id"] != "claude"),
        "{scan:#}"
    );
    let note = scan["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["pointer"] == "/discovery/checks/0")
        .unwrap_or_else(|| panic!("no note on the unmet check: {scan:#}"));
    assert_eq!(note["severity"], "warning");
    assert_eq!(
        note["message"],
        "app `claude` is not active on this machine and is not served: check 1 (`discovery.checks[0]`): no `npx` on PATH"
    );
}

#[test]
fn config_problems_name_the_key_and_the_file() {
    let env = Env::new();
    env.install("valid/d2-yuque-apikey.json", "com.yuque.api");
    let config = env.home().join("config.json");
    env.put(&config, r#"{"httpPort": "3000", "defaultTimeout": 30}"#);
    let out = env.run(&["--scan", "--json"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(&format!(
            "{}: /httpPort: error: expected an integer, found a string",
            config.display()
        )),
        "{err}"
    );

    // Unknown keys are warnings: `--scan` reports them with the other diagnostics (stdout
    // stays pure JSON), other commands on stderr.
    env.put(&config, r#"{"scanPath": ["x"], "enableWebUI": false}"#);
    let out = env.run(&["--scan", "--json"], &[]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    app(&v, "com.yuque.api");
    assert!(
        v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["message"]
                == "unknown field `scanPath` is ignored; did you mean `scanPaths`?"),
        "{v:#}"
    );
    let out = env.run(&["auth", "status"], &[]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("unknown field `scanPath` is ignored; did you mean `scanPaths`?"),
        "{err}"
    );

    // --config names a file that must exist.
    let out = env.run(&["--scan", "--config", "/nonexistent/config.json"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("/nonexistent/config.json: error: cannot read config")
    );
}

#[test]
fn unreadable_and_odd_files_do_not_block_the_rest() {
    let env = Env::new();
    env.install("valid/d2-yuque-apikey.json", "com.yuque.api");
    fs::create_dir_all(env.home().join("latin1")).unwrap();
    fs::write(
        env.home().join("latin1/aai.json"),
        b"{\"name\": \"caf\xe9\"}",
    )
    .unwrap();
    fs::create_dir_all(env.home().join("empty-folder")).unwrap();
    fs::create_dir_all(env.home().join("logs")).unwrap();
    env.put(
        &env.home().join("web/com.xiaohongshu.web/aai.json"),
        &fs::read_to_string(fixture("valid/d2-xiaohongshu-cookie.json")).unwrap(),
    );
    // Where it was fetched from: its URLs are on that registrable domain.
    env.put(
        &env.home().join("web/com.xiaohongshu.web/meta.json"),
        r#"{"sourceUrl": "https://www.xiaohongshu.com/.well-known/aai.json", "fetchedAt": 1}"#,
    );
    env.install("valid/d2-feishu-appcredential.json", "wrong-folder");
    let scan = env.scan(&[]);
    app(&scan, "com.yuque.api");
    app(&scan, "com.feishu.api");
    let cached = app(&scan, "com.xiaohongshu.web");
    assert!(
        cached["source"]
            .as_str()
            .unwrap()
            .contains("/.aai/web/com.xiaohongshu.web/"),
        "the web cache is its own source"
    );
    let messages: Vec<String> = scan["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| format!("{} {}", d["source"], d["message"]))
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("latin1/aai.json") && m.contains("not UTF-8")),
        "{messages:#?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("the folder is `wrong-folder` but the app id is `com.feishu.api`")),
        "{messages:#?}"
    );
    assert_eq!(
        messages.len(),
        2,
        "web cache, empty folders and logs are not descriptors: {messages:#?}"
    );
}

#[test]
fn version_help_and_no_command() {
    let env = Env::new();
    let v = env.run(&["--version"], &[]);
    // `aai-gateway 0.1.0 (<commit>)`: the commit of this checkout, from build.rs.
    let version = String::from_utf8(v.stdout).unwrap();
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or("unknown".to_owned(), |o| {
            String::from_utf8_lossy(&o.stdout).trim().to_owned()
        });
    assert_eq!(
        version.trim(),
        format!("aai-gateway {} ({commit})", env!("CARGO_PKG_VERSION"))
    );
    let h = env.run(&["--help"], &[]);
    let help = String::from_utf8(h.stdout).unwrap();
    for word in ["--scan", "--json", "--home", "--config", "validate"] {
        assert!(help.contains(word), "{help}");
    }
    // No command is the stdio server; a client that leaves before `initialize` ends it
    // as one that leaves after it does (docs/mcp.md, "JSON-RPC on stdio").
    let none = env.run(&[], &[]);
    assert_eq!(none.status.code(), Some(0));
    assert!(
        none.stdout.is_empty(),
        "nothing but protocol output may reach stdout"
    );
    let json_alone = env.run(&["--json"], &[]);
    assert_eq!(json_alone.status.code(), Some(2), "--json needs --scan");
}

/// The error object a failed `call` printed on stdout; its stderr is the one line that
/// says the failure (nothing of other files).
fn call_error(out: &Output) -> Value {
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.starts_with("aai-gateway: ") && said.lines().count() == 1,
        "stderr is one line that says the failure:\n{said}"
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is only the error object ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn call_names_why_an_app_is_missing_and_says_nothing_of_other_files() {
    let env = Env::new();
    env.install("valid/d2-reminders-macos.json", "com.example.reminders");
    env.install("broken/d2-many-problems.json", "com.example.broken");
    env.install("broken/invalid-json.json", "com.example.other");

    // Only a macOS binding: not supported here, naming both sides.
    let e = call_error(&env.run(&["call", "com.example.reminders", "x"], &[]));
    assert_eq!(e["code"], -32006, "{e:#}");
    let detail = e["data"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("macos (apple-events)") && detail.contains("(linux)"),
        "{detail}"
    );
    assert_eq!(e["data"]["platforms"], serde_json::json!(["macos"]));
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("Automation not supported: "),
        "the message carries the gist: {e:#}"
    );

    // A descriptor that does not load: its file and first problems, not "no app".
    let e = call_error(&env.run(&["call", "com.example.broken", "x"], &[]));
    assert_eq!(e["code"], -32007, "{e:#}");
    let detail = e["data"]["detail"].as_str().unwrap();
    assert!(detail.contains("com.example.broken/aai.json"), "{detail}");
    assert!(detail.contains("error:"), "{detail}");
    assert!(
        e["data"]["command"]
            .as_str()
            .unwrap()
            .starts_with("aai-gateway validate "),
        "{e:#}"
    );
    assert!(
        !detail.contains("com.example.other"),
        "only the app asked about: {detail}"
    );

    // Unknown: a suggestion, and still nothing about the broken files.
    let e = call_error(&env.run(&["call", "com.example.nothing", "x"], &[]));
    assert_eq!(e["code"], -32002, "{e:#}");
    assert!(!e.to_string().contains("invalid-json"));
}

#[test]
fn scan_counts_config_warnings_in_its_summary() {
    let env = Env::new();
    env.put(
        &env.home().join("config.json"),
        r#"{"scanIntervall": 5, "exposure": "search"}"#,
    );
    let out = env.run(&["--scan"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("1 app (1 usable here) from 0 files; 0 errors, 1 warning"),
        "{text}"
    );
    assert!(text.contains("scanIntervall"), "{text}");
    assert!(
        out.stderr.is_empty(),
        "reported once, in the output: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = env.scan(&[]);
    assert!(
        json["diagnostics"][0]["message"]
            .as_str()
            .unwrap()
            .contains("scanIntervall"),
        "{json:#}"
    );
}

#[test]
fn consent_mode_deny_refuses_calls() {
    let env = Env::new();
    env.put(
        &env.home().join("config.json"),
        r#"{"consent": {"mode": "deny"}}"#,
    );
    env.put(
        &env.home().join("com.example.t/aai.json"),
        r#"{"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
            "app":{"id":"com.example.t","name":"T","description":"d"},
            "execution":{"type":"stdio","command":"sh","args":["-c","exit 1"]},
            "tools":[{"name":"go","description":"d","parameters":{"type":"object"}}]}"#,
    );
    let e = call_error(&env.run(&["call", "com.example.t", "go"], &[]));
    assert_eq!(e["code"], -32004, "{e:#}");
    assert!(
        e["data"]["detail"]
            .as_str()
            .unwrap()
            .contains("`consent.mode` is `deny`")
    );
}

#[test]
fn import_typelib_writes_a_windows_app_that_scans_on_windows() {
    let env = Env::new();
    let tlb = fixture("typelib/outlook.tlb");
    let out = env.run(
        &[
            "import",
            "typelib",
            tlb.to_str().unwrap(),
            "--yes",
            "--json",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["apps"][0]["app"], "local.acme.application");
    assert_eq!(report["apps"][0]["plan"], "new");
    let scan = env.scan(&[("AAI_HOST_OS", "windows")]);
    let app = app(&scan, "local.acme.application");
    assert_eq!(app["bindings"][0]["type"], "com", "{app:#}");
    assert_eq!(app["bindings"][0]["usable"], true, "{app:#}");
    assert_eq!(app["bindings"][0]["tools"][0], "SendMail", "{app:#}");
    // The same file again: unchanged; a text file: a clear error and exit 2.
    let again = env.run(&["import", "typelib", tlb.to_str().unwrap(), "--json"], &[]);
    let report: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(report["apps"][0]["plan"], "unchanged");
    let text = env.dir.path().join("notes.tlb");
    fs::write(&text, "not a library").unwrap();
    let bad = env.run(&["import", "typelib", text.to_str().unwrap()], &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("not a type library"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
