//! ARCHITECTURE.md's "must never" rules that are about who may use what, checked on the
//! source text (clippy.toml bans the constructors; this checks the imports too).

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Source files (relative to `src/`, with `/`) whose code — comments left out — contains
/// `needle`.
fn users(needle: &str) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut found: Vec<String> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f).unwrap().lines().any(|line| {
                let code = line.split("//").next().unwrap_or("");
                code.contains(needle)
            })
        })
        .map(|f| {
            f.strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .collect();
    found.sort();
    found
}

fn only_under(needle: &str, allowed: &[&str]) {
    let bad: Vec<String> = users(needle)
        .into_iter()
        .filter(|f| !allowed.iter().any(|a| f.starts_with(a)))
        .collect();
    assert!(
        bad.is_empty(),
        "`{needle}` is used outside {allowed:?}: {bad:?}"
    );
}

#[test]
fn only_mcp_knows_rmcp() {
    only_under("rmcp::", &["mcp/"]);
    only_under("axum::", &["mcp/", "listen.rs", "ui/"]);
    // The `mcp` executor drives its downstream server through `mcp/downstream.rs`;
    // logging takes rmcp's log directives from `mcp`.
    only_under(
        "crate::mcp",
        &[
            "mcp/",
            "cli/mod.rs",
            "listen.rs",
            "exec/mcp.rs",
            "logging.rs",
        ],
    );
    only_under("crate::ui", &["listen.rs"]);
}

#[test]
fn only_process_spawns_and_only_net_builds_http_clients() {
    only_under("Command::new", &["exec/process.rs"]);
    only_under("Client::builder", &["net.rs"]);
    only_under("ClientBuilder", &["net.rs"]);
}

#[test]
fn only_the_store_touches_the_keyring_and_only_dbus_modules_know_zbus() {
    only_under("keyring::", &["auth/store.rs"]);
    only_under(
        "zbus::",
        &["exec/dbus/", "catalog/bus.rs", "catalog/generate.rs"],
    );
}

#[test]
fn the_checker_sees_what_it_checks() {
    // A rule that finds nothing proves nothing: each needle is really used somewhere.
    for needle in [
        "rmcp::",
        "Command::new",
        "Client::builder",
        "keyring::",
        "zbus::",
    ] {
        assert!(!users(needle).is_empty(), "`{needle}` is used nowhere");
    }
}
