//! MCP server benchmarks against the release binary, with a raw JSON-RPC client so the
//! client's own cost stays out of the figures:
//!
//! * start → `initialize` reply, and RSS once the catalog is loaded, at 0/1,000/10,000 apps;
//! * `tools/list` bytes in each exposure mode at 10/100/1,000 apps;
//! * `aai_exec` round trip to a warm stdio adapter (median, p99) and throughput with 8
//!   calls in flight — beside the same adapter called directly, so the difference is the
//!   gateway's overhead;
//! * a gateway over its life (`AAI_BENCH_ONLY=life`): RSS after init, changes, a full
//!   rescan and `web_discover`, and how soon a written descriptor is callable;
//! * rescans (`AAI_BENCH_ONLY=rescans`): RSS after three whole rescans, and after three
//!   rewrites of every file seen by the watcher in bursts, at 10,000 apps;
//! * an app's guide at 1,000 apps (`AAI_BENCH_ONLY=guide`): latency and the gateway's CPU
//!   per call, fresh and after 10 catalog changes; then from a one-thread client with the
//!   processes placed three ways, beside `ping` and a server that answers at once with
//!   the same bytes (`common/lean.rs`).
//!
//! This binary is also the adapter (`--adapter`): a minimal envelope echo server; and that
//! server (`--canned <file>`). A leading `--cpu <n>` places it on CPU `n`.
//! Run: `cargo bench -p aai-gateway --bench mcp`.

// Tests and benchmarks drive the binary and peers as separate processes.
#![allow(clippy::disallowed_methods)]

use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

mod common;
use common::*;
#[path = "mcp/guide.rs"]
mod guide;
#[path = "mcp/life.rs"]
mod life;

fn write_apps(home: &Path, n: usize, adapter: &Path) {
    allow_calls(home);
    for i in 0..n {
        let id = format!("com.bench.app{i}");
        let tools: Vec<Value> = (0..3).map(|t| json!({
            "name": format!("tool{t}"), "description": format!("Tool {t} of app {i}"),
            "parameters": {"type":"object","properties":{"text":{"type":"string","description":format!("Text for app {i}")}},"required":["text"]}
        })).collect();
        let doc = json!({"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
            "app":{"id":id,"name":{"en":format!("App {i}"),"zh-CN":format!("应用{i}")},"defaultLang":"en",
                   "description":format!("Benchmark app number {i}"),"aliases":["bench"]},
            "execution":{"type":"stdio","command":adapter,"args":["--adapter"]},
            "tools":tools});
        fs::create_dir_all(home.join(&id)).unwrap();
        fs::write(home.join(&id).join("aai.json"), doc.to_string()).unwrap();
    }
}

async fn startup(tmp: &Path, adapter: &Path) {
    for n in [0, 1_000, 10_000] {
        let home = tmp.join(format!("start{n}"));
        write_apps(&home, n, adapter);
        let mut times = Vec::new();
        let mut rss = (0, 0);
        for run in 0..9 {
            let started = Instant::now();
            let c = Client::gateway(&home).await;
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            if run == 0 {
                c.rpc("tools/list", json!({})).await;
                tokio::time::sleep(Duration::from_millis(300)).await;
                rss = c.rss_kib();
            }
        }
        let (median, _) = stats(times);
        println!(
            "start→initialize {n:>6} apps: median {median:>6.2} ms; after loading: RSS {:.1} MiB (peak {:.1} MiB)",
            rss.0 as f64 / 1024.0,
            rss.1 as f64 / 1024.0
        );
    }
}

/// The standard memory run at 1,000 apps: RSS after init, then `tools/list` ×50 and
/// `aai_guide`, `aai_exec` and cached `web_discover` calls ×200 each, 8 in flight; then
/// RSS and peak RSS.
async fn memory(tmp: &Path, adapter: &Path) {
    let home = tmp.join("memory");
    write_apps(&home, 1_000, adapter);
    let cached = home.join("web/com.bench.web");
    fs::create_dir_all(&cached).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    fs::write(cached.join("aai.json"), json!({"schemaVersion":"1.0","version":"1.0.0","platform":"web",
        "app":{"id":"com.bench.web","name":"Web","description":"A cached web app"},
        "execution":{"type":"http","baseUrl":"http://127.0.0.1:9"},
        "tools":[{"name":"get","description":"d","parameters":{"type":"object"},"execution":{"path":"/x","method":"GET"}}]}).to_string()).unwrap();
    fs::write(
        cached.join("meta.json"),
        json!({"sourceUrl":"http://127.0.0.1:9/.well-known/aai.json",
        "fetchedAt": now, "ttlSecs": 86400, "etag": null})
        .to_string(),
    )
    .unwrap();
    let gw = Arc::new(Client::gateway(&home).await);
    gw.rpc("tools/list", json!({})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (after_init, _) = gw.rss_kib();
    // File pages are the binary's own and the shared libraries'; anonymous, the heap,
    // malloc's arenas and the stacks.
    let (file, anon) = (gw.status_kib("RssFile:"), gw.status_kib("RssAnon:"));
    for _ in 0..50 {
        gw.rpc("tools/list", json!({})).await;
    }
    let calls: Vec<Value> = (0..200)
        .flat_map(|i| {
            let app = format!("com.bench.app{}", i % 8);
            [
                json!({"name":"aai_guide","arguments":{"app": app}}),
                json!({"name":"aai_exec","arguments":{"app": app,"tool":"tool0","args":{"text":"hi"}}}),
                json!({"name":"web_discover","arguments":{"url":"http://127.0.0.1:9"}}),
            ]
        })
        .collect();
    let calls = Arc::new(calls);
    let next = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (gw, calls, next) = (gw.clone(), calls.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                    let Some(call) = calls.get(i) else { break };
                    gw.rpc("tools/call", call.clone()).await;
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    let (rss, peak) = gw.rss_kib();
    println!(
        "memory 1000 apps: RSS after init {:.1} MiB (files {:.1}, anonymous {:.1}); after tools/list ×50 and 600 calls (8 in flight): RSS {:.1} MiB, peak {:.1} MiB",
        after_init as f64 / 1024.0,
        file as f64 / 1024.0,
        anon as f64 / 1024.0,
        rss as f64 / 1024.0,
        peak as f64 / 1024.0
    );
}

async fn list_bytes(tmp: &Path, adapter: &Path) {
    for n in [10, 100, 1_000] {
        let home = tmp.join(format!("list{n}"));
        write_apps(&home, n, adapter);
        let mut sizes = Vec::new();
        for mode in ["progressive", "search", "flat"] {
            fs::write(
                home.join("config.json"),
                json!({"exposure": mode, "maxListedApps": 100_000}).to_string(),
            )
            .unwrap();
            let c = Client::gateway(&home).await;
            let (_, bytes) = c.rpc("tools/list", json!({})).await;
            sizes.push(bytes);
        }
        println!(
            "tools/list {n:>5} apps: progressive {:>7} B ({:.0} B/app over search), search {:>5} B, flat {:>8} B",
            sizes[0],
            (sizes[0] - sizes[1]) as f64 / n as f64,
            sizes[1],
            sizes[2]
        );
    }
}

/// Calls that must not cost more with more apps: a cached `web_discover`, the error path
/// of `aai_exec` (an unknown app), and `aai_search`; then the peak RSS. At 0 and 1,000
/// apps.
async fn scaling(tmp: &Path, adapter: &Path) {
    for n in [0, 1_000] {
        let home = tmp.join(format!("scaling{n}"));
        write_apps(&home, n, adapter);
        // A fresh web cache entry, as `web_discover` leaves it.
        let cached = home.join("web/com.bench.web");
        fs::create_dir_all(&cached).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        fs::write(cached.join("aai.json"), json!({"schemaVersion":"1.0","version":"1.0.0","platform":"web",
            "app":{"id":"com.bench.web","name":"Web","description":"A cached web app"},
            "execution":{"type":"http","baseUrl":"http://127.0.0.1:9"},
            "tools":[{"name":"get","description":"d","parameters":{"type":"object"},"execution":{"path":"/x","method":"GET"}}]}).to_string()).unwrap();
        fs::write(
            cached.join("meta.json"),
            json!({"sourceUrl":"http://127.0.0.1:9/.well-known/aai.json",
            "fetchedAt": now, "ttlSecs": 86400, "etag": null})
            .to_string(),
        )
        .unwrap();
        let gw = Arc::new(Client::gateway(&home).await);
        for (label, args) in [
            (
                "web_discover, cached",
                json!({"name":"web_discover","arguments":{"url":"http://127.0.0.1:9"}}),
            ),
            (
                "aai_exec, unknown app",
                json!({"name":"aai_exec","arguments":{"app":"com.nothing.here","tool":"t"}}),
            ),
            (
                "aai_search",
                json!({"name":"aai_search","arguments":{"query":"bench app 7"}}),
            ),
        ] {
            let g = gw.clone();
            measure(
                &format!("{label} ({n} apps)"),
                500,
                Arc::new(move || {
                    let (g, args) = (g.clone(), args.clone());
                    boxed(async move {
                        g.rpc("tools/call", args).await;
                    })
                }),
            )
            .await;
        }
        let (rss, peak) = gw.rss_kib();
        println!(
            "scaling {n:>5} apps: RSS {:.1} MiB, peak {:.1} MiB",
            rss as f64 / 1024.0,
            peak as f64 / 1024.0
        );
    }
}

async fn exec(tmp: &Path, adapter: &Path) {
    let home = tmp.join("exec");
    write_apps(&home, 1, adapter);
    let direct = Arc::new(Client::spawn(
        adapter.to_str().unwrap(),
        &["--adapter"],
        "request_id",
    ));
    let d = direct.clone();
    measure(
        "adapter directly",
        5_000,
        Arc::new(move || {
            let d = d.clone();
            boxed(async move {
                d.request(|id| json!({"version":"1.0","tool":"tool0","params":{"text":"hi"},"request_id":id.to_string()}))
                    .await;
            })
        }),
    )
    .await;
    let gw = Arc::new(Client::gateway(&home).await);
    let g = gw.clone();
    measure(
        "aai_exec through gateway",
        5_000,
        Arc::new(move || {
            let g = g.clone();
            boxed(async move {
                let (reply, _) = g
                    .rpc("tools/call", json!({"name":"aai_exec","arguments":{"app":"com.bench.app0","tool":"tool0","args":{"text":"hi"}}}))
                    .await;
                assert!(reply.get("result").is_some(), "{reply}");
            })
        }),
    )
    .await;
    drop(gw);

    // The same call from a client of 2026-07-28 (every request carries its own `_meta`),
    // on a fresh gateway and again after the app's descriptor changed three times (each
    // a reload of the catalog).
    let modern = Arc::new(Client::spawn(
        &GATEWAY,
        &["--home", home.to_str().unwrap()],
        "id",
    ));
    modern.discover().await;
    let call = |label: &'static str, m: Arc<Client>| {
        measure(
            label,
            5_000,
            Arc::new(move || {
                let m = m.clone();
                boxed(async move {
                    let (reply, _) = m
                        .rpc("tools/call", json!({"name":"aai_exec","_meta":modern_meta(),
                            "arguments":{"app":"com.bench.app0","tool":"tool0","args":{"text":"hi"}}}))
                        .await;
                    assert!(reply.get("result").is_some(), "{reply}");
                })
            }),
        )
    };
    call("aai_exec, 2026-07-28 client", modern.clone()).await;
    let descriptor = home.join("com.bench.app0").join("aai.json");
    for round in 0..3 {
        let mut doc: Value = serde_json::from_slice(&fs::read(&descriptor).unwrap()).unwrap();
        doc["app"]["description"] = json!(format!("Benchmark app number 0, edit {round}"));
        fs::write(&descriptor, doc.to_string()).unwrap();
        // The reload is debounced; give it time to land.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    call(
        "aai_exec, 2026-07-28 client, after 3 catalog changes",
        modern.clone(),
    )
    .await;
    let (rss, peak) = modern.rss_kib();
    println!("gateway RSS after the 2026-07-28 calls: {rss} KiB (peak {peak} KiB)");
}

/// 50 calls of the stdio adapter: one `aai_batch` (parallel, the default concurrency of 8)
/// beside 50 `aai_exec` one after the other, and 50 `aai_exec` sent at once.
async fn batch(tmp: &Path, adapter: &Path) {
    let home = tmp.join("batch");
    write_apps(&home, 1, adapter);
    let gw = Arc::new(Client::gateway(&home).await);
    let one = json!({"app":"com.bench.app0","tool":"tool0","args":{"text":"hi"}});
    let calls: Vec<Value> = (0..50).map(|_| one.clone()).collect();
    let exec = json!({"name":"aai_exec","arguments": one});
    let mut times: [Vec<f64>; 3] = Default::default();
    for run in 0..220 {
        let t = Instant::now();
        let (reply, _) = gw
            .rpc(
                "tools/call",
                json!({"name":"aai_batch","arguments":{"calls": calls}}),
            )
            .await;
        assert_eq!(reply["result"]["structuredContent"]["ok"], 50, "{reply}");
        let batched = t.elapsed();
        let t = Instant::now();
        for _ in 0..50 {
            gw.rpc("tools/call", exec.clone()).await;
        }
        let sequential = t.elapsed();
        let t = Instant::now();
        let all: Vec<_> = (0..50)
            .map(|_| {
                let (gw, exec) = (gw.clone(), exec.clone());
                tokio::spawn(async move { gw.rpc("tools/call", exec).await })
            })
            .collect();
        for call in all {
            call.await.unwrap();
        }
        let at_once = t.elapsed();
        if run >= 20 {
            for (i, d) in [batched, sequential, at_once].into_iter().enumerate() {
                times[i].push(d.as_secs_f64() * 1000.0);
            }
        }
    }
    let [b, s, a] = times.map(|t| stats(t).0);
    println!(
        "50 calls: one aai_batch median {b:.2} ms; 50 aai_exec in turn {s:.2} ms; 50 aai_exec at once {a:.2} ms"
    );
}

/// `aai_exec` of a trivial D-Bus method (`Ping() → s` of the tests' typed service on a
/// private bus) beside a direct zbus call and `gdbus call` for the same method.
async fn dbus(tmp: &Path) {
    let daemon = std::process::Command::new("dbus-daemon")
        .args([
            "--session",
            "--fork",
            "--print-address=1",
            "--print-pid=1",
            "--nopidfile",
        ])
        .output();
    let Ok(daemon) = daemon else {
        println!("D-Bus: dbus-daemon not installed; skipped");
        return;
    };
    let out = String::from_utf8_lossy(&daemon.stdout).to_string();
    let mut words = out.split_whitespace();
    let (address, pid) = (
        words.next().unwrap().to_owned(),
        words.next().unwrap().to_owned(),
    );
    // The daemon forked away from us (and holds our inherited descriptors, such as a
    // build lock): it is stopped however this function ends, a failed assertion included.
    struct Daemon(String);
    impl Drop for Daemon {
        fn drop(&mut self) {
            let _ = std::process::Command::new("kill").arg(&self.0).status();
        }
    }
    let _daemon = Daemon(pid);
    let services = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/dbus_services.py");
    let mut service = std::process::Command::new("python3")
        .args([services.to_str().unwrap(), "typed", "com.example.Typed"])
        .env("DBUS_SESSION_BUS_ADDRESS", &address)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(service.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(
        ready.trim(),
        "ready",
        "the test service needs PyPI dbus-fast"
    );

    let home = tmp.join("dbus");
    allow_calls(&home);
    fs::create_dir_all(home.join("com.example.typed")).unwrap();
    fs::write(
        home.join("com.example.typed/aai.json"),
        json!({"schema_version":"1.0","appId":"com.example.typed","name":"Typed","platforms":{"linux":{
            "automation":"dbus","service":"com.example.Typed","object":"/com/example/Typed","interface":"com.example.Typed",
            "tools":[{"name":"ping","description":"Ping","method":"Ping","parameters":{"type":"object"}}]}}})
        .to_string(),
    )
    .unwrap();

    let conn = Arc::new(
        zbus::connection::Builder::address(address.as_str())
            .unwrap()
            .build()
            .await
            .unwrap(),
    );
    let c = conn.clone();
    measure(
        "D-Bus Ping via zbus directly",
        2_000,
        Arc::new(move || {
            let c = c.clone();
            boxed(async move {
                c.call_method(
                    Some("com.example.Typed"),
                    "/com/example/Typed",
                    Some("com.example.Typed"),
                    "Ping",
                    &(),
                )
                .await
                .unwrap();
            })
        }),
    )
    .await;
    let gw = Arc::new(Client::spawn_with(
        &GATEWAY,
        &["--home", home.to_str().unwrap()],
        "id",
        &[("DBUS_SESSION_BUS_ADDRESS", &address)],
    ));
    gw.initialize().await;
    let g = gw.clone();
    measure(
        "D-Bus Ping via aai_exec",
        2_000,
        Arc::new(move || {
            let g = g.clone();
            boxed(async move {
                let (reply, _) = g
                    .rpc("tools/call", json!({"name":"aai_exec","arguments":{"app":"com.example.typed","tool":"ping"}}))
                    .await;
                assert_eq!(reply["result"]["content"][0]["text"], "pong", "{reply}");
            })
        }),
    )
    .await;
    let mut us = Vec::new();
    for _ in 0..40 {
        let t = Instant::now();
        let status = std::process::Command::new("gdbus")
            .args([
                "call",
                "--address",
                &address,
                "--dest",
                "com.example.Typed",
                "--object-path",
                "/com/example/Typed",
                "--method",
                "com.example.Typed.Ping",
            ])
            .stdout(Stdio::null())
            .status()
            .expect("gdbus");
        assert!(status.success());
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (median, p99) = stats(us);
    println!(
        "{:<28} median {median:>7.1} µs  p99 {p99:>7.1} µs  (one process per call)",
        "D-Bus Ping via gdbus call"
    );
    let _ = service.kill();
    let _ = service.wait();
}

/// A minimal keep-alive HTTP/1.1 server answering every request with `{"ok":true}`.
async fn tiny_http_server() -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            socket.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut pending = Vec::new();
                loop {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        let body = b"{\"ok\":true}";
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            body.len()
                        );
                        if socket.write_all(head.as_bytes()).await.is_err()
                            || socket.write_all(body).await.is_err()
                        {
                            return;
                        }
                    }
                }
            });
        }
    });
    port
}

/// `aai_exec` of a GET against a local keep-alive server, beside the same GET made
/// directly with reqwest.
/// `aai_exec` to a warm stdio adapter through `--web` (Streamable HTTP, a session, SSE
/// answers), beside the same call over stdio in `exec`.
async fn http_transport(tmp: &Path, adapter: &Path) {
    let home = tmp.join("transport");
    write_apps(&home, 1, adapter);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(&*GATEWAY)
        .args(["--home", home.to_str().unwrap(), "--web", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .env("AAI_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    while let Some(line) = stderr.next_line().await.unwrap() {
        if line.contains("serving MCP on") {
            break;
        }
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let post = |body: Value, session: Option<String>| {
        let mut req = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        req.send()
    };
    let init = post(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}), None)
        .await
        .unwrap();
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    init.text().await.unwrap();
    post(
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        Some(session.clone()),
    )
    .await
    .unwrap();
    let next = Arc::new(AtomicU64::new(1));
    let (client, url) = (client.clone(), url.clone());
    measure(
        "aai_exec over Streamable HTTP",
        3_000,
        Arc::new(move || {
            let (client, url, session, next) = (client.clone(), url.clone(), session.clone(), next.clone());
            boxed(async move {
                let id = next.fetch_add(1, Ordering::Relaxed);
                let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"aai_exec",
                    "arguments":{"app":"com.bench.app0","tool":"tool0","args":{"text":"hi"}}}});
                let text = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-session-id", &session)
                    .body(body.to_string())
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap();
                assert!(text.contains("\"result\""), "{text}");
            })
        }),
    )
    .await;
    let _ = child.kill().await;
}

async fn http(tmp: &Path) {
    let port = tiny_http_server().await;
    let base = format!("http://127.0.0.1:{port}");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let url = format!("{base}/items?q=hi");
    measure(
        "HTTP GET directly (reqwest)",
        5_000,
        Arc::new(move || {
            let (client, url) = (client.clone(), url.clone());
            boxed(async move {
                client
                    .get(&url)
                    .send()
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap();
            })
        }),
    )
    .await;
    let home = tmp.join("http");
    allow_calls(&home);
    fs::create_dir_all(home.join("com.example.web")).unwrap();
    fs::write(
        home.join("com.example.web/aai.json"),
        json!({"schemaVersion":"1.0","version":"1.0.0","platform":"web",
            "app":{"id":"com.example.web","name":"Web","description":"bench"},
            "execution":{"type":"http","baseUrl":base},
            "tools":[{"name":"get","description":"get","execution":{"path":"/items","method":"GET"},
                      "parameters":{"type":"object","properties":{"q":{"type":"string"}}}}]})
        .to_string(),
    )
    .unwrap();
    let gw = Arc::new(Client::gateway(&home).await);
    measure(
        "HTTP GET via aai_exec",
        5_000,
        Arc::new(move || {
            let g = gw.clone();
            boxed(async move {
                let (reply, _) = g
                    .rpc("tools/call", json!({"name":"aai_exec","arguments":{"app":"com.example.web","tool":"get","args":{"q":"hi"}}}))
                    .await;
                assert_eq!(reply["result"]["content"][0]["text"], "{\"ok\":true}", "{reply}");
            })
        }),
    )
    .await;
}

/// The same Python SDK server (`tests/mcp/asking_server.py`, its `slow` tool with 0 s)
/// through the gateway, spoken to at 2025-11-25 and at 2026-07-28 (`--2026`).
async fn revisions(tmp: &Path) {
    let (Some(python), Some(server)) = (
        peer("target/test-venv/bin/python"),
        peer("tests/mcp/asking_server.py"),
    ) else {
        return;
    };
    for (revision, extra) in [("2025-11-25", None), ("2026-07-28", Some("--2026"))] {
        let home = tmp.join(format!("revision-{revision}"));
        allow_calls(&home);
        let mut args = vec![json!(server)];
        args.extend(extra.map(|e| json!(e)));
        let doc = json!({"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
            "app":{"id":"dev.mcp.asking","name":{"en":"Asking"},"defaultLang":"en","description":"bench"},
            "execution":{"type":"mcp","command":python,"args":args}});
        fs::create_dir_all(home.join("dev.mcp.asking")).unwrap();
        fs::write(home.join("dev.mcp.asking/aai.json"), doc.to_string()).unwrap();
        let gw = Arc::new(Client::gateway(&home).await);
        let label = format!("aai_exec → Python SDK server at {revision}");
        let g = gw.clone();
        measure(
            &label,
            1_000,
            Arc::new(move || {
                let g = g.clone();
                boxed(async move {
                    let (r, _) = g
                        .rpc("tools/call", json!({"name":"aai_exec","arguments":{"app":"dev.mcp.asking","tool":"slow","args":{"seconds":0}}}))
                        .await;
                    assert_eq!(r["result"]["content"][0]["text"], "slept", "{r}");
                })
            }),
        )
        .await;
    }
}

/// A downstream MCP server (`server-everything`'s `echo` over stdio) through the gateway
/// beside the same server called directly; then the first call of a cold ACP agent (the
/// Rust crate's echo agent) beside its warm calls and the agent driven directly.
async fn downstream(tmp: &Path) {
    let Some(everything) =
        peer("tests/mcp/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    else {
        return;
    };
    let everything = everything.to_str().unwrap().to_owned();
    let direct = Arc::new(Client::spawn("node", &[&everything, "stdio"], "id"));
    direct.initialize().await;
    let d = direct.clone();
    measure(
        "server-everything directly",
        2_000,
        Arc::new(move || {
            let d = d.clone();
            boxed(async move {
                let (r, _) = d
                    .rpc(
                        "tools/call",
                        json!({"name":"echo","arguments":{"message":"hi"}}),
                    )
                    .await;
                assert!(r.get("result").is_some(), "{r}");
            })
        }),
    )
    .await;
    let home = tmp.join("downstream");
    allow_calls(&home);
    let doc = json!({"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
        "app":{"id":"dev.mcp.everything","name":{"en":"Everything"},"defaultLang":"en","description":"bench"},
        "execution":{"type":"mcp","command":"node","args":[everything,"stdio"]}});
    fs::create_dir_all(home.join("dev.mcp.everything")).unwrap();
    fs::write(home.join("dev.mcp.everything/aai.json"), doc.to_string()).unwrap();
    let gw = Arc::new(Client::gateway(&home).await);
    let g = gw.clone();
    measure(
        "aai_exec → server-everything",
        2_000,
        Arc::new(move || {
            let g = g.clone();
            boxed(async move {
                let (r, _) = g
                    .rpc("tools/call", json!({"name":"aai_exec","arguments":{"app":"dev.mcp.everything","tool":"echo","args":{"message":"hi"}}}))
                    .await;
                assert!(r.get("result").is_some(), "{r}");
            })
        }),
    )
    .await;
    drop(gw);
    revisions(tmp).await;

    let Some(agent) = peer("target/test-peers/acp/bin/agent") else {
        return;
    };
    let agent = agent.to_str().unwrap().to_owned();
    let home = tmp.join("acp");
    allow_calls(&home);
    let doc = json!({"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
        "app":{"id":"dev.acp.echo","name":{"en":"Echo"},"defaultLang":"en","description":"bench"},
        "execution":{"type":"acp","start":{"command":agent}},
        "tools":[{"name":"ask","description":"Ask","parameters":{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}}]});
    fs::create_dir_all(home.join("dev.acp.echo")).unwrap();
    fs::write(home.join("dev.acp.echo/aai.json"), doc.to_string()).unwrap();
    let ask = json!({"name":"aai_exec","arguments":{"app":"dev.acp.echo","tool":"ask","args":{"prompt":"hi"}}});
    let (mut cold, mut warm, mut direct_cold) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..20 {
        let gw = Client::gateway(&home).await;
        // The catalog is loaded in the background: wait for it outside the timing.
        gw.rpc("tools/list", json!({})).await;
        let t = Instant::now();
        let (r, _) = gw.rpc("tools/call", ask.clone()).await;
        cold.push(t.elapsed().as_secs_f64() * 1e6);
        assert!(r.get("result").is_some(), "{r}");
        for _ in 0..10 {
            let t = Instant::now();
            gw.rpc("tools/call", ask.clone()).await;
            warm.push(t.elapsed().as_secs_f64() * 1e6);
        }

        let t = Instant::now();
        let a = Client::spawn(&agent, &[], "id");
        a.rpc(
            "initialize",
            json!({"protocolVersion":1,"clientCapabilities":{}}),
        )
        .await;
        let (s, _) = a
            .rpc("session/new", json!({"cwd":"/","mcpServers":[]}))
            .await;
        let session = s["result"]["sessionId"].clone();
        a.rpc(
            "session/prompt",
            json!({"sessionId":session,"prompt":[{"type":"text","text":"hi"}]}),
        )
        .await;
        direct_cold.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (c, _) = stats(cold);
    let (w, _) = stats(warm);
    let (d, _) = stats(direct_cold);
    println!(
        "ACP echo agent: first call through a fresh gateway median {c:.0} µs; warm calls median {w:.0} µs; the agent alone (start, initialize, session, prompt) median {d:.0} µs"
    );
}

/// The adapter: echoes `params` back for every envelope, as fast as it can.
fn adapter() {
    use std::io::{BufRead, Write};
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout());
    let mut lines = stdin.lock().lines();
    while let Some(Ok(line)) = lines.next() {
        let req: Value = serde_json::from_str(&line).unwrap();
        let reply = json!({"version":"1.0","request_id":req["request_id"],"status":"success","result":req["params"]});
        serde_json::to_writer(&mut out, &reply).unwrap();
        out.write_all(b"\n").unwrap();
        out.flush().unwrap();
    }
}

fn main() {
    let args = placed_args();
    match args.get(1).map(String::as_str) {
        Some("--adapter") => return adapter(),
        Some("--canned") => return canned(Path::new(&args[2])),
        _ => {}
    }
    let full = args.iter().any(|a| a == "--bench");
    if full && std::env::var_os("AAI_BENCH_GATEWAY").is_none() {
        // `cargo bench` builds the binary with the dev-dependencies' features, so its
        // symbols differ from the release build's and the link order does not apply.
        eprintln!(
            "mcp bench: measuring the bench profile's build, not the release build; for \
             release figures: cargo build --release -p aai-gateway, copy \
             target/release/aai-gateway elsewhere (cargo bench overwrites it), and pass \
             AAI_BENCH_GATEWAY=<the copy> (docs/performance.md, \"Link order\")"
        );
    }
    let adapter = std::env::current_exe().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        if !full {
            // `cargo test --benches`: a smoke run only.
            let home = tmp.path().join("smoke");
            write_apps(&home, 3, &adapter);
            let c = Client::gateway(&home).await;
            let (r, _) = c.rpc("tools/call", json!({"name":"aai_exec","arguments":{"app":"com.bench.app0","tool":"tool0","args":{"text":"hi"}}})).await;
            assert_eq!(r["result"]["content"][0]["text"], "{\"text\":\"hi\"}");
            return;
        }
        let only = std::env::var("AAI_BENCH_ONLY").unwrap_or_default();
        if only.is_empty() || only == "startup" {
            startup(tmp.path(), &adapter).await;
        }
        if only.is_empty() || only == "memory" {
            memory(tmp.path(), &adapter).await;
        }
        if only.is_empty() || only == "life" {
            life::life(tmp.path(), &adapter).await;
        }
        if only.is_empty() || only == "rescans" {
            life::rescans(tmp.path(), &adapter).await;
        }
        if only.is_empty() || only == "guide" {
            guide::guide(tmp.path(), &adapter).await;
        }
        if only.is_empty() || only == "list" {
            list_bytes(tmp.path(), &adapter).await;
        }
        if only.is_empty() || only == "exec" {
            exec(tmp.path(), &adapter).await;
        }
        if only.is_empty() || only == "scaling" {
            scaling(tmp.path(), &adapter).await;
        }
        if only.is_empty() || only == "http" {
            http(tmp.path()).await;
        }
        if only.is_empty() || only == "transport" {
            http_transport(tmp.path(), &adapter).await;
        }
        if only.is_empty() || only == "dbus" {
            dbus(tmp.path()).await;
        }
        if only.is_empty() || only == "batch" {
            batch(tmp.path(), &adapter).await;
        }
        if only.is_empty() || only == "downstream" {
            downstream(tmp.path()).await;
        }
    });
}
