//! Tests of `clients.rs`.

use super::*;

fn npx() -> Launch {
    Launch {
        command: "npx".into(),
        args: vec!["-y".into(), "aai-gateway".into()],
    }
}

fn client(id: &str) -> Client {
    find(id).unwrap()
}

#[test]
fn names_find_clients() {
    for (typed, id) in [
        ("claude", "claude-code"),
        ("Claude Code", "claude-code"),
        ("VS Code", "vscode"),
        ("gemini-cli", "gemini"),
        ("ZED", "zed"),
        ("GitHub Copilot", "copilot"),
        ("Copilot CLI", "copilot"),
        ("OpenCode", "opencode"),
        ("Qwen Code", "qwen"),
        ("qwen_code", "qwen"),
    ] {
        assert_eq!(find(typed).map(|c| c.id), Some(id), "{typed}");
    }
    assert!(find("notepad").is_none());
    assert_eq!(ALL.len(), 13);
}

#[test]
fn jsonc_keeps_comments_and_other_servers() {
    let text = "{\n  // my editor\n  \"editor.fontSize\": 14,\n  \"context_servers\": {\n    \"other\": {\"source\": \"custom\", \"command\": \"x\", \"args\": []}, // keep\n  },\n}\n";
    let added = client("zed").add(text, "aai", &npx()).unwrap().unwrap();
    assert!(
        added.contains("// my editor") && added.contains("// keep"),
        "{added}"
    );
    assert!(added.contains("\"other\""), "{added}");
    let parsed = json_value(&added).unwrap();
    assert_eq!(
        parsed["context_servers"]["aai"],
        serde_json::json!({"source": "custom", "command": "npx", "args": ["-y", "aai-gateway"], "env": {}})
    );
    assert_eq!(
        client("zed").status(&added, "aai").unwrap().as_deref(),
        Some("aai")
    );
    // Again: nothing to do. Removed: the text as it was.
    assert!(client("zed").add(&added, "aai", &npx()).unwrap().is_none());
    let removed = client("zed").remove(&added, "aai").unwrap().unwrap();
    assert_eq!(removed, text);
    assert!(client("zed").remove(&removed, "aai").unwrap().is_none());
}

#[test]
fn an_empty_file_gets_the_shape_of_the_client() {
    let vscode = client("vscode").add("", "aai", &npx()).unwrap().unwrap();
    let v: Value = serde_json::from_str(&vscode).unwrap();
    assert_eq!(v["servers"]["aai"]["type"], "stdio");
    assert!(vscode.ends_with('\n'));
    let claude = client("claude-code")
        .add("{}", "aai", &npx())
        .unwrap()
        .unwrap();
    let v: Value = serde_json::from_str(&claude).unwrap();
    assert_eq!(v["mcpServers"]["aai"]["env"], serde_json::json!({}));
    let cline = client("cline").add("", "aai", &npx()).unwrap().unwrap();
    let v: Value = serde_json::from_str(&cline).unwrap();
    assert_eq!(v["mcpServers"]["aai"]["disabled"], false);
    let continue_ = client("continue");
    let removed = continue_.remove(
        &client("continue").add("", "aai", &npx()).unwrap().unwrap(),
        "aai",
    );
    assert!(continue_.only_empty_servers(&removed.unwrap().unwrap()));
}

#[test]
fn a_changed_entry_is_replaced_and_others_are_recognised() {
    let text = r#"{"mcpServers": {"aai": {"command": "/old/aai-gateway", "args": []}}}"#;
    let out = client("cursor").add(text, "aai", &npx()).unwrap().unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["mcpServers"]["aai"]["command"], "npx");
    let elsewhere = r#"{"mcpServers": {"gw": {"command": "uvx", "args": ["aai-gateway"]}}}"#;
    assert_eq!(
        client("gemini")
            .status(elsewhere, "aai")
            .unwrap()
            .as_deref(),
        Some("gw")
    );
    let nested =
        r#"{"context_servers": {"a": {"command": {"path": "/x/aai-gateway", "args": []}}}}"#;
    assert_eq!(
        client("zed").status(nested, "aai").unwrap().as_deref(),
        Some("a")
    );
    let unrelated = r#"{"mcpServers": {"t": {"command": "aai-gateway-helper"}}}"#;
    assert_eq!(client("cursor").status(unrelated, "aai").unwrap(), None);
}

#[test]
fn malformed_files_are_refused() {
    for (id, text) in [
        ("cursor", "{\"mcpServers\": {"),
        ("cursor", "[1, 2]"),
        ("cursor", "{\"mcpServers\": [1]}"),
        ("codex", "[mcp_servers\ncommand = 1"),
        ("codex", "mcp_servers = 3\n"),
    ] {
        assert!(client(id).add(text, "aai", &npx()).is_err(), "{id}: {text}");
        assert!(client(id).status(text, "aai").is_err(), "{id}: {text}");
    }
}

#[test]
fn codex_toml_keeps_comments_and_order() {
    let text = "# my settings\nmodel = \"o3\"\n\n[mcp_servers.time]\ncommand = \"uvx\" # keep\nargs = [\"mcp-server-time\"]\n";
    let added = client("codex").add(text, "aai", &npx()).unwrap().unwrap();
    assert!(added.starts_with(text), "{added}");
    assert!(
        added.contains("[mcp_servers.aai]\ncommand = \"npx\"\nargs = [\"-y\", \"aai-gateway\"]\n"),
        "{added}"
    );
    assert!(
        client("codex")
            .add(&added, "aai", &npx())
            .unwrap()
            .is_none()
    );
    assert_eq!(
        client("codex").status(&added, "aai").unwrap().as_deref(),
        Some("aai")
    );
    assert_eq!(
        client("codex").remove(&added, "aai").unwrap().unwrap(),
        text
    );
    let fresh = client("codex").add("", "aai", &npx()).unwrap().unwrap();
    assert_eq!(
        fresh,
        "[mcp_servers.aai]\ncommand = \"npx\"\nargs = [\"-y\", \"aai-gateway\"]\n"
    );
    assert_eq!(client("codex").remove(&fresh, "aai").unwrap().unwrap(), "");
}

#[test]
fn copilot_opencode_and_qwen_get_their_own_shapes() {
    let copilot = client("copilot").add("", "aai", &npx()).unwrap().unwrap();
    let v: Value = serde_json::from_str(&copilot).unwrap();
    assert_eq!(
        v["mcpServers"]["aai"],
        serde_json::json!({"type": "local", "command": "npx", "args": ["-y", "aai-gateway"], "tools": ["*"]})
    );
    let text = "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  // mine\n  \"mcp\": {\n    \"x\": {\"type\": \"remote\", \"url\": \"https://x.test/mcp\"}\n  }\n}\n";
    let opencode = client("opencode")
        .add(text, "aai", &npx())
        .unwrap()
        .unwrap();
    assert!(opencode.contains("// mine"), "{opencode}");
    let v = json_value(&opencode).unwrap();
    assert_eq!(
        v["mcp"]["aai"],
        serde_json::json!({"type": "local", "command": ["npx", "-y", "aai-gateway"], "enabled": true})
    );
    assert_eq!(v["mcp"]["x"]["url"], "https://x.test/mcp");
    // opencode's one-list command is recognised as the gateway under any name.
    let renamed =
        r#"{"mcp": {"gw": {"type": "local", "command": ["/opt/aai-gateway", "--home", "/h"]}}}"#;
    assert_eq!(
        client("opencode")
            .status(renamed, "aai")
            .unwrap()
            .as_deref(),
        Some("gw")
    );
    assert_eq!(
        client("opencode")
            .remove(&opencode, "aai")
            .unwrap()
            .unwrap(),
        text
    );
    let qwen = client("qwen").add("{}", "aai", &npx()).unwrap().unwrap();
    let v: Value = serde_json::from_str(&qwen).unwrap();
    assert_eq!(
        v["mcpServers"]["aai"],
        serde_json::json!({"command": "npx", "args": ["-y", "aai-gateway"]})
    );
}

#[test]
fn trust_on_the_entry_is_added_kept_and_removed() {
    let gemini = client("gemini");
    assert_eq!(
        gemini.tool_permission(Os::Linux, &|_| None),
        Some(ToolPermission::Entry)
    );
    let added = gemini.add("", "aai", &npx()).unwrap().unwrap();
    let trusted = gemini.allow_tools(&added, "aai").unwrap().unwrap();
    let v: Value = serde_json::from_str(&trusted).unwrap();
    assert_eq!(v["mcpServers"]["aai"]["trust"], true);
    assert!(gemini.allow_tools(&trusted, "aai").unwrap().is_none());
    // Adding again keeps the user's trust; a changed entry keeps it too.
    assert!(gemini.add(&trusted, "aai", &npx()).unwrap().is_none());
    let moved = Launch {
        command: "/opt/aai-gateway".into(),
        args: vec![],
    };
    let changed = gemini.add(&trusted, "aai", &moved).unwrap().unwrap();
    let v: Value = serde_json::from_str(&changed).unwrap();
    assert_eq!(v["mcpServers"]["aai"]["command"], "/opt/aai-gateway");
    assert_eq!(v["mcpServers"]["aai"]["trust"], true);
    assert_eq!(
        gemini.disallow_tools(&trusted, "aai").unwrap().unwrap(),
        added
    );
    // No entry: nothing to trust.
    assert!(client("qwen").allow_tools("{}", "aai").unwrap().is_none());
    assert!(
        client("cursor")
            .tool_permission(Os::Linux, &|_| None)
            .is_none()
    );
}

#[test]
fn codex_approval_mode_is_added_kept_and_removed() {
    let codex = client("codex");
    let added = codex.add("", "aai", &npx()).unwrap().unwrap();
    let approved = codex.allow_tools(&added, "aai").unwrap().unwrap();
    assert_eq!(
        approved,
        "[mcp_servers.aai]\ncommand = \"npx\"\nargs = [\"-y\", \"aai-gateway\"]\ndefault_tools_approval_mode = \"approve\"\n"
    );
    assert!(codex.allow_tools(&approved, "aai").unwrap().is_none());
    assert!(codex.add(&approved, "aai", &npx()).unwrap().is_none());
    let moved = Launch {
        command: "/opt/aai-gateway".into(),
        args: vec![],
    };
    let changed = codex.add(&approved, "aai", &moved).unwrap().unwrap();
    assert!(
        changed.contains("default_tools_approval_mode = \"approve\""),
        "{changed}"
    );
    assert_eq!(
        codex.disallow_tools(&approved, "aai").unwrap().unwrap(),
        added
    );
    assert!(codex.allow_tools("", "aai").unwrap().is_none());
}

#[test]
fn claude_code_rule_goes_into_its_settings_and_out_again() {
    let claude = client("claude-code");
    let env = |k: &str| (k == "HOME").then(|| "/home/u".to_owned());
    assert_eq!(
        claude.tool_permission(Os::Linux, &env),
        Some(ToolPermission::File(PathBuf::from(
            "/home/u/.claude/settings.json"
        )))
    );
    let moved = |k: &str| match k {
        "HOME" => Some("/home/u".to_owned()),
        "CLAUDE_CONFIG_DIR" => Some("/cfg".to_owned()),
        _ => None,
    };
    assert_eq!(
        claude.tool_permission(Os::Linux, &moved),
        Some(ToolPermission::File(PathBuf::from("/cfg/settings.json")))
    );
    assert_eq!(
        claude.config_path(Os::Linux, &moved),
        Some(PathBuf::from("/cfg/.claude.json"))
    );
    let text = "{\n  \"model\": \"opus\",\n  \"permissions\": {\n    \"allow\": [\"Bash(npm test:*)\"]\n  }\n}\n";
    let allowed = claude.allow_tools(text, "aai").unwrap().unwrap();
    let v: Value = serde_json::from_str(&allowed).unwrap();
    assert_eq!(
        v["permissions"]["allow"],
        serde_json::json!(["Bash(npm test:*)", "mcp__aai"])
    );
    assert!(claude.allow_tools(&allowed, "aai").unwrap().is_none());
    assert_eq!(
        claude.disallow_tools(&allowed, "aai").unwrap().unwrap(),
        text
    );
    assert!(claude.disallow_tools(text, "aai").unwrap().is_none());
    // A file without permissions: they are made, and go again whole.
    let bare = "{\n  \"model\": \"opus\"\n}\n";
    let allowed = claude.allow_tools(bare, "aai").unwrap().unwrap();
    let v: Value = serde_json::from_str(&allowed).unwrap();
    assert_eq!(v["permissions"]["allow"], serde_json::json!(["mcp__aai"]));
    assert_eq!(
        claude.disallow_tools(&allowed, "aai").unwrap().unwrap(),
        bare
    );
    let fresh = claude.allow_tools("", "aai").unwrap().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&fresh).unwrap(),
        serde_json::json!({"permissions": {"allow": ["mcp__aai"]}})
    );
    assert!(matches!(
        claude.allow_tools(r#"{"permissions": {"allow": "all"}}"#, "aai"),
        Err(Malformed::NotAnArray(_))
    ));
    assert!(claude.allow_tools(r#"{"permissions": 1}"#, "aai").is_err());
}

#[test]
fn paths_follow_the_os() {
    let env = |k: &str| match k {
        "HOME" => Some("/home/u".to_owned()),
        "USERPROFILE" => Some("C:\\Users\\u".to_owned()),
        "APPDATA" => Some("C:\\Users\\u\\AppData\\Roaming".to_owned()),
        _ => None,
    };
    let path = |id: &str, os| client(id).config_path(os, &env).unwrap();
    assert_eq!(
        path("claude-code", Os::Linux),
        PathBuf::from("/home/u/.claude.json")
    );
    assert_eq!(
        path("vscode", Os::Macos),
        PathBuf::from("/home/u/Library/Application Support/Code/User/mcp.json")
    );
    assert_eq!(
        path("zed", Os::Linux),
        PathBuf::from("/home/u/.config/zed/settings.json")
    );
    assert_eq!(
        path("codex", Os::Linux),
        PathBuf::from("/home/u/.codex/config.toml")
    );
    assert!(path("claude-desktop", Os::Windows).starts_with("C:\\Users\\u\\AppData\\Roaming"));
    assert_eq!(
        path("copilot", Os::Macos),
        PathBuf::from("/home/u/.copilot/mcp-config.json")
    );
    assert_eq!(
        path("opencode", Os::Macos),
        PathBuf::from("/home/u/.config/opencode/opencode.json")
    );
    assert_eq!(
        path("qwen", Os::Windows),
        PathBuf::from("C:\\Users\\u")
            .join(".qwen")
            .join("settings.json")
    );
    let homes = |k: &str| match k {
        "HOME" => Some("/home/u".to_owned()),
        "COPILOT_HOME" => Some("/c".to_owned()),
        "QWEN_HOME" => Some("/q".to_owned()),
        "XDG_CONFIG_HOME" => Some("/x".to_owned()),
        _ => None,
    };
    let moved = |id: &str| client(id).config_path(Os::Linux, &homes).unwrap();
    assert_eq!(moved("copilot"), PathBuf::from("/c/mcp-config.json"));
    assert_eq!(moved("qwen"), PathBuf::from("/q/settings.json"));
    assert_eq!(
        moved("opencode"),
        PathBuf::from("/x/opencode/opencode.json")
    );
    assert_eq!(
        client("opencode").alternate_path(&moved("opencode")),
        Some(PathBuf::from("/x/opencode/opencode.jsonc"))
    );
    assert_eq!(client("cursor").alternate_path(&moved("copilot")), None);
}
