//! The lifecycle guard every command goes through: `serve` ends when the gateway is asked
//! to stop, and dropping the guard leaves no process behind — not the adapter, and not a
//! grandchild it started in the background. One test in its own binary: the guard makes
//! this process a subreaper and reaps every child at the end.
//!
//! Run: `cargo test -p aai-gateway --test lifecycle`

#![cfg(target_os = "linux")]

use std::path::Path;
use std::time::Duration;

use aai_gateway::testing::auth::store::Store;
use aai_gateway::testing::config::Config;
use aai_gateway::testing::gateway::{Gateway, Lifecycle};
use aai_gateway::testing::host::{Host, Os};
use aai_gateway::testing::identity::Caller;
use aai_gateway::testing::pipeline::Origin;
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod common;

/// Starts `sleep` in the background (its pid to `$MARKS/grandchild`), then echoes.
const ADAPTER: &str = r#"sleep 300 &
echo $! > "$MARKS/grandchild"
echo $$ > "$MARKS/adapter"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"request_id":"\([^"]*\)".*/\1/p')
  printf '{"version":"1.0","request_id":"%s","status":"success","result":{"ok":true}}\n' "$id"
done"#;

fn alive(pid: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) else {
        return false;
    };
    // A zombie has exited; it only waits to be reaped.
    !stat
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn serving_ends_on_stop_and_the_teardown_leaves_nothing_running() {
    let home = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    let doc = json!({
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
        "app": {"id": "com.example.bg", "name": {"en": "Background"}, "defaultLang": "en",
                "description": "Leaves a process behind"},
        "execution": {"type": "stdio", "command": "sh", "args": ["-c", ADAPTER],
                      "env": {"MARKS": marks.path().to_str().unwrap()}},
        "tools": [{"name": "ping", "description": "Ping", "parameters": {"type": "object"}}]
    });
    common::put(home.path(), &doc);
    let (config, _) = Config::parse(
        r#"{"consent": {"mode": "allow"}}"#,
        &home.path().join("config.json"),
    )
    .unwrap();
    let gateway = Gateway::with_parts(
        config,
        home.path().to_owned(),
        None,
        Host::new(Os::Linux),
        common::dirs(home.path()),
        Store::memory(),
    );
    let life = Lifecycle::new(gateway).unwrap();
    // `serve` starts the background work (the first scan among it), serves until the
    // gateway is asked to stop, tears everything down and returns what the transport
    // returned.
    let stopper = life.gateway().clone();
    let served = life.serve(|gateway| async move {
        let origin = Origin {
            caller: Caller::cli(),
            prompter: None,
            client: None,
            trace: None,
            within: None,
        };
        let called = gateway
            .pipeline()
            .call(
                "com.example.bg",
                "ping",
                None,
                CancellationToken::new(),
                None,
                &origin,
            )
            .await;
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            stopper.stop();
        });
        gateway.stopping().await;
        called.map(|o| o.value)
    });
    assert_eq!(served.unwrap(), json!({"ok": true}));
    let (adapter, grandchild) = (
        read(&marks.path().join("adapter")),
        read(&marks.path().join("grandchild")),
    );
    assert!(
        !adapter.is_empty() && !grandchild.is_empty(),
        "the adapter ran"
    );
    // `serve` took the guard: when it returned, the teardown had run, and nothing the
    // gateway started runs any more.
    assert!(
        !alive(&adapter),
        "the adapter {adapter} outlived the lifecycle"
    );
    assert!(
        !alive(&grandchild),
        "the adapter's background process {grandchild} outlived the lifecycle"
    );
}
