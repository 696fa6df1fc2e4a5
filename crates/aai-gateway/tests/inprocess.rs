//! The gateway as a library, with no external peer: the MCP handler driven by an rmcp
//! client over an in-process duplex pipe, the stdio executor with a `sh` adapter, the
//! authenticator over an in-memory credential store, and the file watcher.
//!
//! Run: `cargo test -p aai-gateway --test inprocess`

// This test is an MCP client (rmcp) and starts adapters through the gateway.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use aai_gateway::testing::auth::store::{Credential, Store};
use aai_gateway::testing::auth::{Authenticator, Secret};
use aai_gateway::testing::catalog::{Layout, SearchDir, SourceKind};
use aai_gateway::testing::config::Config;
use aai_gateway::testing::error::{Code, GatewayError};
use aai_gateway::testing::gateway::Gateway;
use aai_gateway::testing::host::{Host, Os};
use aai_gateway::testing::identity::Who;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// An adapter in plain `sh` + `sed`: echoes each request line back as its result; the
/// `sleep` tool sleeps first.
const ADAPTER: &str = r#"while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"request_id":"\([^"]*\)".*/\1/p')
  case "$line" in *'"tool":"sleep"'*) sleep 30 ;; esac
  printf '{"version":"1.0","request_id":"%s","status":"success","result":{"request":%s}}\n' "$id" "$line"
done"#;

fn descriptor(id: &str, timeout_ms: Option<u64>) -> Value {
    let mut execution = json!({"type": "stdio", "command": "sh", "args": ["-c", ADAPTER]});
    if let Some(ms) = timeout_ms {
        execution["timeout"] = json!(ms);
    }
    json!({
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
        "app": {"id": id, "name": {"en": "Shell echo"}, "defaultLang": "en",
                "description": "Echoes requests", "aliases": ["echo"]},
        "execution": execution,
        "tools": [
            {"name": "echo", "description": "Echo the arguments",
             "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                            "required": ["text"]}},
            {"name": "sleep", "description": "Never answers in time",
             "parameters": {"type": "object"}}
        ]
    })
}

fn put(home: &Path, id: &str, doc: &Value) {
    let dir = home.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let tmp = dir.join("aai.json.tmp");
    std::fs::write(&tmp, doc.to_string()).unwrap();
    std::fs::rename(tmp, dir.join("aai.json")).unwrap();
}

/// A gateway over `home` only (no system paths, no keyring), with `config` JSON.
fn gateway(home: &Path, config: &str) -> Arc<Gateway> {
    let (config, _) = Config::parse(config, &home.join("config.json")).unwrap();
    let dirs = vec![SearchDir {
        kind: SourceKind::User,
        dir: home.to_owned(),
        layout: Layout::AppDirs,
    }];
    Gateway::with_parts(
        config,
        home.to_owned(),
        None,
        Host::new(Os::Linux),
        dirs,
        Store::memory(),
    )
}

/// A client that reports `tools/list_changed`.
#[derive(Clone)]
struct Client(mpsc::UnboundedSender<()>);

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.0.send(());
    }
}

struct Session {
    client: RunningService<RoleClient, Client>,
    changed: mpsc::UnboundedReceiver<()>,
    running: Option<aai_gateway::testing::gateway::Running>,
}

async fn connect(gw: &Arc<Gateway>) -> Session {
    let running = gw.start();
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let server = aai_gateway::testing::mcp::Server::new(gw.handle(), "stdio");
    tokio::spawn(async move {
        if let Ok(service) = server.serve(server_io).await {
            let _ = service.waiting().await;
        }
    });
    let (tx, changed) = mpsc::unbounded_channel();
    let client = Client(tx).serve(client_io).await.unwrap();
    Session {
        client,
        changed,
        running: Some(running),
    }
}

impl Session {
    async fn call(
        &self,
        name: &str,
        args: Value,
    ) -> Result<rmcp::model::CallToolResult, rmcp::ErrorData> {
        let Value::Object(args) = args else { panic!() };
        let request = CallToolRequestParams::new(name.to_owned()).with_arguments(args);
        match self.client.call_tool(request).await {
            Ok(r) => Ok(r),
            Err(rmcp::ServiceError::McpError(e)) => Err(e),
            Err(e) => panic!("transport failure: {e}"),
        }
    }

    fn stop(&mut self) {
        drop(self.running.take());
    }
}

fn text(result: &rmcp::model::CallToolResult) -> String {
    result.content[0].as_text().unwrap().text.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_handler_lists_guides_runs_and_refuses_over_a_duplex_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("aai");
    put(
        &home,
        "com.example.sh",
        &descriptor("com.example.sh", Some(500)),
    );
    let gw = gateway(&home, r#"{"consent": {"mode": "allow"}}"#);
    let mut s = connect(&gw).await;

    let info = s.client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "aai-gateway");
    let names: Vec<String> = s
        .client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(
        names,
        [
            "app_aai",
            "app_com_example_sh",
            "aai_search",
            "aai_guide",
            "web_discover",
            "aai_exec",
            "aai_batch",
            "aai_run"
        ]
    );

    let guide = text(&s.call("app_com_example_sh", json!({})).await.unwrap());
    assert!(
        guide.starts_with("# Shell echo (`com.example.sh`)"),
        "{guide}"
    );
    let found = s
        .call("aai_search", json!({"query": "echo"}))
        .await
        .unwrap();
    let found = found.structured_content.unwrap();
    assert_eq!(found["results"][0]["app"], "com.example.sh");
    // A client whose model reads the structured result (Claude Code) reads the way on too.
    assert!(found["next"].as_str().unwrap().starts_with("aai_guide"));

    // Every spelling reaches the same tool.
    for (name, args) in [
        (
            "aai_exec",
            json!({"app": "com.example.sh", "tool": "echo", "args": {"text": "a"}}),
        ),
        (
            "aai:exec",
            json!({"app": "com.example.sh", "tool": "echo", "args": {"text": "a"}}),
        ),
        ("com.example.sh:echo", json!({"text": "a"})),
    ] {
        let r = s.call(name, args).await.unwrap();
        let reply: Value = serde_json::from_str(&text(&r)).unwrap();
        assert_eq!(reply["request"]["params"], json!({"text": "a"}), "{name}");
        assert_eq!(reply["request"]["tool"], "echo");
    }

    // Refusals carry the documented shape (docs/design.md, Errors) and a useful message.
    let e = s
        .call(
            "aai_exec",
            json!({"app": "com.example.sh", "tool": "echo", "args": {}}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code.0, Code::InvalidParams.number());
    assert_eq!(e.message, "Invalid params: `/text` is a required property");
    let e = s
        .call("aai_exec", json!({"app": "com.example.sh", "tool": "nope"}))
        .await
        .unwrap_err();
    assert_eq!(e.code.0, Code::ToolNotFound.number());
    let e = s
        .call(
            "aai_exec",
            json!({"app": "com.example.sh", "tool": "sleep"}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code.0, Code::Timeout.number(), "{e:?}");
    // The timed-out adapter was stopped; the next call gets a fresh one.
    s.call(
        "aai_exec",
        json!({"app": "com.example.sh", "tool": "echo", "args": {"text": "b"}}),
    )
    .await
    .unwrap();

    // A new app on disk: the session hears of it.
    put(
        &home,
        "com.example.two",
        &descriptor("com.example.two", None),
    );
    assert!(gw.rescan(), "what agents see changed");
    tokio::time::timeout(Duration::from_secs(10), s.changed.recv())
        .await
        .expect("tools/list_changed arrives")
        .unwrap();
    let names: Vec<String> = s
        .client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(
        names.contains(&"app_com_example_two".to_owned()),
        "{names:?}"
    );
    s.stop();
    s.client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_mode_lists_short_meta_tools_and_the_guide_holds_the_details() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("aai");
    put(&home, "com.example.sh", &descriptor("com.example.sh", None));
    let gw = gateway(
        &home,
        r#"{"consent": {"mode": "allow"}, "exposure": "search"}"#,
    );
    let mut s = connect(&gw).await;
    let tools = s.client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "aai_search",
            "aai_guide",
            "web_discover",
            "aai_exec",
            "aai_batch",
            "aai_run"
        ]
    );
    // What a client reads on every start stays small (docs/performance.md).
    let listed = serde_json::to_string(&json!({"tools": tools})).unwrap();
    assert!(listed.len() <= 2_048, "{} B: {listed}", listed.len());
    // The details are one call away.
    let guide = text(&s.call("aai_guide", json!({})).await.unwrap());
    assert!(guide.starts_with("# Using this gateway"), "{guide}");
    for tool in [
        "aai_search",
        "aai_guide",
        "aai_exec",
        "aai_batch",
        "aai_run",
        "web_discover",
    ] {
        assert!(guide.contains(tool), "{tool} is not explained");
    }
    // An app's guide is still there, and a non-string `app` is still refused.
    let app = text(
        &s.call("aai_guide", json!({"app": "com.example.sh"}))
            .await
            .unwrap(),
    );
    assert!(app.contains("`com.example.sh`"), "{app}");
    assert!(s.call("aai_guide", json!({"app": 7})).await.is_err());
    s.stop();
}

/// The stdio transport's framing layer over two in-process pipes: the client's end of
/// its input and of its output.
fn stdio_session(
    gw: &Arc<Gateway>,
    output_buffer: usize,
) -> (
    tokio::io::DuplexStream,
    tokio::io::BufReader<tokio::io::DuplexStream>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let (to_server, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, from_server) = tokio::io::duplex(output_buffer);
    let served = tokio::spawn(aai_gateway::testing::mcp::stdio::serve_on(
        gw.handle(),
        server_in,
        server_out,
    ));
    (to_server, tokio::io::BufReader::new(from_server), served)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
"#;

/// [`stdio_session`] with 64 bytes of pipe to the client (answers go out a little at a
/// time, as the client reads them), past `initialize`.
async fn initialized_stdio_session(
    gw: &Arc<Gateway>,
) -> (
    tokio::io::DuplexStream,
    tokio::io::BufReader<tokio::io::DuplexStream>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let (mut to_server, mut from_server, served) = stdio_session(gw, 64);
    to_server.write_all(INITIALIZE.as_bytes()).await.unwrap();
    let mut line = String::new();
    from_server.read_line(&mut line).await.unwrap();
    assert!(line.contains(r#""id":1"#), "{line}");
    (to_server, from_server, served)
}

/// Asks for `tools/list` (an answer of a few KiB) with `id`.
async fn list_tools(to_server: &mut tokio::io::DuplexStream, id: u32) {
    let list = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/list\"}}\n");
    tokio::io::AsyncWriteExt::write_all(to_server, list.as_bytes())
        .await
        .unwrap();
}

/// The stdio session ends, within a bound far above the transport's own.
async fn ends(served: tokio::task::JoinHandle<anyhow::Result<()>>, why: &str) {
    tokio::time::timeout(Duration::from_secs(30), served)
        .await
        .expect(why)
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_before_the_clients_initialize_ends_the_stdio_session() {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(dir.path(), "{}");
    let (_to_server, _from_server, served) = stdio_session(&gw, 1 << 16);
    tokio::time::sleep(Duration::from_millis(50)).await;
    gw.stop();
    ends(served, "a stop ends the wait for `initialize`").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_gets_the_last_answer_whole_after_a_stop() {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(dir.path(), "{}");
    let _running = gw.start();
    let (mut to_server, mut from_server, served) = initialized_stdio_session(&gw).await;
    list_tools(&mut to_server, 2).await;
    // The answer is being written when the gateway is asked to stop (its first bytes
    // came; the rest waits on the 64-byte pipe), and the client reads nothing for longer
    // than the grace the answers get.
    let begun = tokio::io::AsyncBufReadExt::fill_buf(&mut from_server)
        .await
        .unwrap();
    assert!(!begun.is_empty(), "the answer never began");
    gw.stop();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // The process ends when the transport returns: it must not while a line is partway.
    assert!(
        !served.is_finished(),
        "the session ended with its last answer partway written"
    );
    let mut rest = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut from_server, &mut rest)
        .await
        .unwrap();
    assert!(
        rest.ends_with('\n'),
        "the last line was cut: …{}",
        &rest[rest.len().saturating_sub(80)..]
    );
    let answer: Value = serde_json::from_str(rest.trim_end()).unwrap();
    assert_eq!(answer["id"], 2);
    assert!(answer["result"]["tools"].as_array().unwrap().len() > 1);
    served.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_nothing_does_not_hold_a_stopped_session() {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(dir.path(), "{}");
    let _running = gw.start();
    let (mut to_server, _from_server, served) = initialized_stdio_session(&gw).await;
    list_tools(&mut to_server, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    gw.stop();
    // Bounded by the grace for the answers and the one for the line being written.
    ends(served, "the session ends though its client reads nothing").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_closes_its_input_and_stops_reading_does_not_hold_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(dir.path(), "{}");
    let _running = gw.start();
    let (mut to_server, _from_server, served) = initialized_stdio_session(&gw).await;
    // More answers than the pipes between rmcp and the client hold: rmcp's sends wait,
    // and at the end of input it cannot close its side.
    for id in 2..60 {
        list_tools(&mut to_server, id).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(to_server);
    ends(served, "the session ends though its client stopped reading").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_sees_changes_and_stays_idle_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("aai");
    std::fs::create_dir_all(&home).unwrap();
    let gw = gateway(
        &home,
        r#"{"scanInterval": 0, "consent": {"mode": "allow"}}"#,
    );
    let mut s = connect(&gw).await;
    s.client.list_all_tools().await.unwrap(); // waits for the first scan

    put(
        &home,
        "com.example.new",
        &descriptor("com.example.new", None),
    );
    tokio::time::timeout(Duration::from_secs(10), s.changed.recv())
        .await
        .expect("a new descriptor is picked up without a rescan interval")
        .unwrap();

    // Idle, with the gateway reading its own files (calls, guides): no rescans.
    let before = gw.rescans();
    for _ in 0..5 {
        s.call("aai_guide", json!({"app": "com.example.new"}))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    std::fs::read_to_string(home.join("com.example.new/aai.json")).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(gw.rescans(), before, "reading files is not a change");

    std::fs::remove_dir_all(home.join("com.example.new")).unwrap();
    tokio::time::timeout(Duration::from_secs(10), s.changed.recv())
        .await
        .expect("a removed descriptor is picked up")
        .unwrap();
    s.stop();
    s.client.cancel().await.unwrap();
}

fn web_auth(auth: Value) -> aai_descriptor::Auth {
    let doc = json!({
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "web",
        "app": {"id": "com.example.api", "name": "Api", "description": "d"},
        "execution": {"type": "http", "baseUrl": "https://api.example.com/v1"},
        "auth": auth,
        "tools": [{"name": "t", "description": "d", "parameters": {"type": "object"},
                   "execution": {"path": "/t", "method": "GET"}}]
    });
    let parsed = aai_descriptor::parse(&doc.to_string(), "t");
    let app = parsed
        .app
        .unwrap_or_else(|| panic!("{:?}", parsed.diagnostics));
    app.bindings[0].auth.clone().unwrap()
}

#[tokio::test]
async fn credentials_become_request_material_and_their_absence_guidance() {
    let store = Store::memory();
    let auth = Authenticator::new(store.clone(), Some("zh-CN".into()), Default::default());
    let header = web_auth(json!({"type": "apiKey", "apiKey": {
        "location": "header", "name": "Authorization", "prefix": "Bearer",
        "obtainUrl": "https://example.com/keys",
        "instructions": {"short": "Create a key"}}}));
    let base = "https://api.example.com/v1";

    let e = auth
        .material("com.example.api", &Who::Shared, &header, base)
        .await
        .unwrap_err();
    let e = GatewayError::from(e);
    assert_eq!(e.code, Code::AuthRequired);
    let data = e.data();
    assert_eq!(data["command"], "aai-gateway auth set com.example.api");
    assert_eq!(data["obtainUrl"], "https://example.com/keys");
    assert_eq!(data["authType"], "apiKey");
    assert_eq!(data["locale"], "zh-CN");

    store
        .set(
            "com.example.api",
            Credential::ApiKey {
                value: Secret::new("k3y"),
            },
        )
        .await
        .unwrap();
    let m = auth
        .material("com.example.api", &Who::Shared, &header, base)
        .await
        .unwrap();
    assert_eq!(m.headers.len(), 1);
    assert_eq!(m.headers[0].0, "Authorization");
    assert_eq!(m.headers[0].1.expose(), "Bearer k3y");
    assert!(
        !format!("{m:?}").contains("k3y"),
        "material never prints a secret"
    );

    let query = web_auth(json!({"type": "apiKey", "apiKey": {
        "location": "query", "name": "key", "obtainUrl": "https://example.com/keys"}}));
    let m = auth
        .material("com.example.api", &Who::Shared, &query, base)
        .await
        .unwrap();
    assert_eq!(
        (m.query[0].0.as_str(), m.query[0].1.expose()),
        ("key", "k3y")
    );

    // A credential of the wrong type is not used.
    let cookie = web_auth(json!({"type": "cookie", "cookie": {
        "loginUrl": "https://example.com/login", "domain": ".example.com",
        "requiredCookies": ["sid"]}}));
    let e = auth
        .material("com.example.api", &Who::Shared, &cookie, base)
        .await
        .unwrap_err();
    let e = GatewayError::from(e);
    assert_eq!(e.code, Code::AuthRequired);
    store
        .set(
            "com.example.api",
            Credential::Cookie {
                value: Secret::new("a=1; sid=s3"),
            },
        )
        .await
        .unwrap();
    let m = auth
        .material("com.example.api", &Who::Shared, &cookie, base)
        .await
        .unwrap();
    assert_eq!(m.headers[0].1.expose(), "a=1; sid=s3");
    // A credential goes only where it was first sent.
    let e = auth
        .material(
            "com.example.api",
            &Who::Shared,
            &cookie,
            "https://evil.test/v1",
        )
        .await
        .unwrap_err();
    let e = GatewayError::from(e);
    assert_eq!(e.code, Code::AuthRequired);
    assert!(
        e.detail.contains("stored for https://api.example.com"),
        "{}",
        e.detail
    );
    assert!(!e.detail.contains("s3"));
    // Cookies are only sent within their domain (a fresh credential is not bound to a
    // server it was refused for).
    store
        .set(
            "com.example.api",
            Credential::Cookie {
                value: Secret::new("a=1; sid=s3"),
            },
        )
        .await
        .unwrap();
    let e = auth
        .material(
            "com.example.api",
            &Who::Shared,
            &cookie,
            "https://evil.test/v1",
        )
        .await
        .unwrap_err();
    let e = GatewayError::from(e);
    assert_eq!(e.code, Code::AaiJsonInvalid);
    assert!(!e.detail.contains("s3"));
    auth.material("com.example.api", &Who::Shared, &cookie, base)
        .await
        .unwrap();
    assert!(store.delete("com.example.api").await.unwrap());
    assert!(store.get("com.example.api").await.unwrap().is_none());
}

#[test]
#[cfg(unix)]
fn a_rescan_that_cannot_read_keeps_the_apps_it_had() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    let home = dir.path().join("home");
    put(
        &real,
        "com.example.kept",
        &descriptor("com.example.kept", None),
    );
    std::os::unix::fs::symlink(&real, &home).unwrap();
    let gw = gateway(&home, "{}");
    gw.rescan();
    assert!(gw.registry_snapshot().find("com.example.kept").is_some());
    // The folder cannot be listed now (a symlink loop stands in for EMFILE or EIO).
    std::fs::remove_file(&home).unwrap();
    std::os::unix::fs::symlink(&home, &home).unwrap();
    assert!(!gw.rescan(), "nothing changed for clients");
    assert!(
        gw.registry_snapshot().find("com.example.kept").is_some(),
        "the last good catalog stays"
    );
    // Readable again: rescans work as before.
    std::fs::remove_file(&home).unwrap();
    std::os::unix::fs::symlink(&real, &home).unwrap();
    std::fs::remove_dir_all(real.join("com.example.kept")).unwrap();
    assert!(gw.rescan());
    assert!(gw.registry_snapshot().find("com.example.kept").is_none());
}

#[tokio::test]
async fn a_remote_client_keeps_a_bounded_number_of_sessions() {
    use tower::ServiceExt;
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(dir.path(), "{}");
    let addr: std::net::SocketAddr = "127.0.0.1:3000".parse().unwrap();
    let setup = aai_gateway::testing::mcp::http::Setup {
        token: Some("t0ken-id".into()),
        remote_hosts: true,
        ..Default::default()
    };
    let router = aai_gateway::testing::mcp::http::service(gw.handle(), addr, setup);
    let from = |ip: &str| {
        router
            .clone()
            .layer(axum::Extension(aai_gateway::testing::access::Remote(
                ip.parse().unwrap(),
            )))
    };
    let initialize = || {
        axum::http::Request::post("/mcp")
            .header("host", "192.0.2.1")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(axum::body::Body::from(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "remote", "version": "1"}}})
                .to_string(),
            ))
            .unwrap()
    };
    let cap = aai_gateway::testing::mcp::http::MAX_SESSIONS_PER_CLIENT;
    for _ in 0..cap {
        let r = from("192.0.2.7").oneshot(initialize()).await.unwrap();
        assert_eq!(r.status(), 200);
    }
    let refused = from("192.0.2.7").oneshot(initialize()).await.unwrap();
    assert_eq!(
        refused.status(),
        503,
        "one client may not take every session"
    );
    let other = from("192.0.2.8").oneshot(initialize()).await.unwrap();
    assert_eq!(other.status(), 200, "another client still gets one");
}

#[tokio::test]
async fn a_replicas_sessions_carry_its_name_and_others_are_not_found() {
    use tower::ServiceExt;
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(dir.path(), "{}");
    let addr: std::net::SocketAddr = "127.0.0.1:3000".parse().unwrap();
    let setup = aai_gateway::testing::mcp::http::Setup {
        replica: Some("east-1".into()),
        ..Default::default()
    };
    let router = aai_gateway::testing::mcp::http::service(gw.handle(), addr, setup);
    let post = |session: Option<&str>, body: serde_json::Value| {
        let mut req = axum::http::Request::post("/mcp")
            .header("host", "127.0.0.1:3000")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(id) = session {
            req = req.header("mcp-session-id", id);
        }
        req.body(axum::body::Body::from(body.to_string())).unwrap()
    };
    let r = router
        .clone()
        .oneshot(post(
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"}}}),
        ))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let id = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let uuid = id
        .strip_prefix("east-1.")
        .expect("the replica's name first");
    let ping = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let ok = router
        .clone()
        .oneshot(post(Some(&id), ping.clone()))
        .await
        .unwrap();
    assert_eq!(ok.status(), 202);
    // The bare id, or another replica's, is a session this one does not hold.
    for other in [uuid.to_owned(), format!("west-2.{uuid}")] {
        let r = router
            .clone()
            .oneshot(post(Some(&other), ping.clone()))
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{other}");
    }
}
