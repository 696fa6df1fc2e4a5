//! The proxy path: ten downstream MCP servers behind one stdio front door in `flat`
//! exposure, each tool called by its flat name, against the same server spoken to
//! directly. Per path: the median and p99 of one call after another, calls per second with
//! 8 in flight (spread over the servers), and what the gateway itself spends: its CPU per
//! forwarded call (its own user + system time from `/proc`, children excluded) and its RSS
//! after init and at its peak.
//!
//! Two sets of servers:
//! * ten minimal Rust echo servers (this binary, `--mcp-echo`): they cost almost nothing,
//!   so the difference to calling one directly is the gateway's own;
//! * nine Python SDK echo servers (`tests/mcp/echo_server.py`) and `server-everything`,
//!   the set the issue measured with (skipped with a message when the peers are missing:
//!   `tests/install-peers`).
//!
//! Beside them, a bare relay (this binary, `--relay`): two threads passing lines, the least
//! any proxy costs on this machine. Then one Rust echo server called one at a time from a
//! one-thread client, directly, through the relay and through the gateway, with the
//! processes placed three ways (`common/lean.rs`; a leading `--cpu <n>` places this binary
//! on CPU `n`).
//!
//! Run: `cargo bench -p aai-gateway --bench proxy`, with `AAI_BENCH_GATEWAY` naming a
//! release build for release figures (`docs/performance.md`); `AAI_BENCH_ONLY=rust` or
//! `python` runs one set.

// Tests and benchmarks drive the binary and peers as separate processes.
#![allow(clippy::disallowed_methods)]

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::{Value, json};

mod common;
use common::*;

/// Calls timed one after another, and (four times as many) with 8 in flight.
const CALLS: usize = 5_000;

/// One downstream server: how to start it, and its echo tool's name and arguments.
struct Server {
    id: String,
    command: String,
    args: Vec<String>,
    tool: &'static str,
    arguments: Value,
}

fn main() {
    let args = placed_args();
    match args.get(1).map(String::as_str) {
        Some("--mcp-echo") => return mcp_echo(),
        Some("--relay") => return relay(&args[2..]),
        _ => {}
    }
    let full = args.iter().any(|a| a == "--bench");
    let me = std::env::current_exe().unwrap();
    let me = me.to_str().unwrap().to_owned();
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let rust: Vec<Server> = (0..10)
            .map(|i| Server {
                id: format!("dev.bench.echo{i}"),
                command: me.clone(),
                args: vec!["--mcp-echo".into()],
                tool: "echo",
                arguments: json!({"message": "hi"}),
            })
            .collect();
        if !full {
            // `cargo test --benches`: a smoke run only.
            let gw = front_door(&tmp.path().join("smoke"), &rust[..2]).await;
            let (r, _) = gw
                .rpc(
                    "tools/call",
                    json!({"name": flat_names(&gw, &rust[..2]).await[1], "arguments": {"message": "hi"}}),
                )
                .await;
            assert_eq!(r["result"]["content"][0]["text"], "hi", "{r}");
            return;
        }
        let only = std::env::var("AAI_BENCH_ONLY").unwrap_or_default();
        if only.is_empty() || only == "rust" {
            compare("rust echo", &tmp.path().join("rust"), &rust).await;
            bare_relay(&me).await;
            let (me, home) = (me.clone(), tmp.path().join("placed"));
            tokio::task::spawn_blocking(move || by_placement(&me, &home))
                .await
                .unwrap();
        }
        if (only.is_empty() || only == "python")
            && let Some(python) = python_set()
        {
            compare("python echo", &tmp.path().join("python"), &python).await;
        }
    });
}

/// The issue's set: nine Python SDK echo servers and `server-everything`, called on the
/// first Python server (the other nine take the calls in flight with it).
fn python_set() -> Option<Vec<Server>> {
    let python = peer("target/test-venv/bin/python")?;
    let echo = peer("tests/mcp/echo_server.py")?;
    let everything =
        peer("tests/mcp/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js")?;
    let mut set: Vec<Server> = (0..9)
        .map(|i| Server {
            id: format!("dev.bench.python{i}"),
            command: python.to_str().unwrap().to_owned(),
            args: vec![echo.to_str().unwrap().to_owned()],
            tool: "echo",
            arguments: json!({"message": "hi"}),
        })
        .collect();
    set.push(Server {
        id: "dev.bench.everything".into(),
        command: "node".into(),
        args: vec![everything.to_str().unwrap().to_owned(), "stdio".into()],
        tool: "echo",
        arguments: json!({"message": "hi"}),
    });
    Some(set)
}

/// The first server spoken to directly, then all of them through a gateway.
async fn compare(label: &str, home: &Path, servers: &[Server]) {
    let first = &servers[0];
    let args: Vec<&str> = first.args.iter().map(String::as_str).collect();
    let direct = Arc::new(Client::spawn(&first.command, &args, "id"));
    direct.initialize().await;
    let (call, arguments) = (first.tool, first.arguments.clone());
    let d = direct.clone();
    measure(
        &format!("{label} directly"),
        CALLS,
        Arc::new(move || {
            let (d, arguments) = (d.clone(), arguments.clone());
            boxed(async move {
                let (r, _) = d
                    .rpc("tools/call", json!({"name": call, "arguments": arguments}))
                    .await;
                assert!(r.get("result").is_some(), "{r}");
            })
        }),
    )
    .await;
    drop(direct);

    let started = Instant::now();
    let gw = Arc::new(front_door(home, servers).await);
    let init_ms = started.elapsed().as_secs_f64() * 1e3;
    let names = flat_names(&gw, servers).await;
    // Every server started and warm before the clock starts.
    for (name, s) in names.iter().zip(servers) {
        let (r, _) = gw
            .rpc(
                "tools/call",
                json!({"name": name, "arguments": s.arguments.clone()}),
            )
            .await;
        assert!(r.get("result").is_some(), "{r}");
    }
    let (rss_init, _) = gw.rss_kib();
    let next = Arc::new(AtomicUsize::new(0));
    let calls: Arc<Vec<Value>> = Arc::new(
        names
            .iter()
            .zip(servers)
            .map(|(n, s)| json!({"name": n, "arguments": s.arguments.clone()}))
            .collect(),
    );
    // One after another on the first server; in flight, over all of them.
    let g = gw.clone();
    let c = calls.clone();
    let serial = Arc::new(move || {
        let (g, c) = (g.clone(), c.clone());
        boxed(async move {
            let (r, _) = g.rpc("tools/call", c[0].clone()).await;
            assert!(r.get("result").is_some(), "{r}");
        })
    });
    let g = gw.clone();
    let spread = Arc::new(move || {
        let (g, c) = (g.clone(), calls.clone());
        let i = next.fetch_add(1, Ordering::Relaxed) % c.len();
        boxed(async move {
            let (r, _) = g.rpc("tools/call", c[i].clone()).await;
            assert!(r.get("result").is_some(), "{r}");
        })
    });
    let before = cpu_us(&gw);
    timed_serial(&format!("{label} through the gateway"), serial.clone()).await;
    let serial_cpu = (cpu_us(&gw) - before) / CALLS as f64;
    let before = cpu_us(&gw);
    let rate = in_flight(spread).await;
    let flight_cpu = (cpu_us(&gw) - before) / (CALLS * 4) as f64;
    let (rss, peak) = gw.rss_kib();
    println!(
        "{label} through the gateway: start → initialize {init_ms:.1} ms; {rate:.0} calls/s \
         with 8 in flight over {} servers; gateway CPU per call {serial_cpu:.0} µs one at a \
         time, {flight_cpu:.0} µs in flight; RSS after init {:.1} MiB, now {:.1}, peak {:.1}",
        servers.len(),
        rss_init as f64 / 1024.0,
        rss as f64 / 1024.0,
        peak as f64 / 1024.0
    );
}

/// The least any proxy costs on this machine: a relay of two blocking threads that pass
/// each line from stdin to one echo server and back, parsing nothing. Each forwarded call
/// wakes it twice (the request, the answer), as it does the gateway.
async fn bare_relay(me: &str) {
    let relay = Arc::new(Client::spawn(me, &["--relay"], "id"));
    relay.initialize().await;
    let r = relay.clone();
    let call = Arc::new(move || {
        let r = r.clone();
        boxed(async move {
            let (reply, _) = r
                .rpc(
                    "tools/call",
                    json!({"name": "echo", "arguments": {"message": "hi"}}),
                )
                .await;
            assert!(reply.get("result").is_some(), "{reply}");
        })
    });
    let before = cpu_us(&relay);
    timed_serial("rust echo through a bare relay", call.clone()).await;
    let serial_cpu = (cpu_us(&relay) - before) / CALLS as f64;
    let before = cpu_us(&relay);
    let rate = in_flight(call).await;
    let flight_cpu = (cpu_us(&relay) - before) / (CALLS * 4) as f64;
    println!(
        "rust echo through a bare relay: {rate:.0} calls/s with 8 in flight; relay CPU per \
         call {serial_cpu:.0} µs one at a time, {flight_cpu:.0} µs in flight"
    );
}

/// One Rust echo server called one call at a time from a one-thread client ([`Lean`]):
/// directly, through a bare relay and through the gateway (flat), each placed three ways
/// ([`Placement`]). The relay is the floor under any proxy placed the same way.
fn by_placement(me: &str, home: &Path) {
    let echo = |name: &str| {
        (
            "tools/call",
            json!({"name": name, "arguments": {"message": "hi"}}),
        )
    };
    let answered = |a: &str| assert!(a.contains("\"result\""), "{a}");
    for placement in Placement::all() {
        // The echo server behind a relay or the gateway, placed with the client.
        let echo_args: Vec<String> = placement
            .server_args()
            .into_iter()
            .chain(["--mcp-echo".to_owned()])
            .collect();
        let direct = on_own_thread(|| {
            let mut s = Lean::spawn(me, &["--mcp-echo"], placement);
            s.initialize();
            s.round(CALLS, |_| echo("echo"), answered)
        });
        let relay = on_own_thread(|| {
            let args: Vec<&str> = std::iter::once("--relay")
                .chain(echo_args.iter().map(String::as_str))
                .collect();
            let mut r = Lean::spawn(me, &args, placement);
            r.initialize();
            r.round(CALLS, |_| echo("echo"), answered)
        });
        let home = home.join(format!("{placement:?}"));
        let servers = [Server {
            id: "dev.bench.placed".into(),
            command: me.to_owned(),
            args: echo_args.clone(),
            tool: "echo",
            arguments: json!({"message": "hi"}),
        }];
        write_front_door(&home, &servers);
        let gateway = on_own_thread(|| {
            let mut gw = Lean::spawn(&GATEWAY, &["--home", home.to_str().unwrap()], placement);
            gw.initialize();
            gw.call(
                "tools/call",
                &json!({"name":"aai_guide","arguments":{"app": servers[0].id}}),
            );
            let (_, list) = gw.call("tools/list", &json!({}));
            let list: Value = serde_json::from_str(list).unwrap();
            let name = list["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["name"].as_str())
                .find(|n| n.ends_with("__echo"))
                .expect("the echo tool")
                .to_owned();
            gw.round(CALLS, |_| echo(&name), answered)
        });
        println!(
            "one at a time, one-thread client, {:<32} directly {:>6.1} µs | bare relay {:>6.1} \
             µs (+{:.1}), CPU {:.0} µs | gateway {:>6.1} µs (+{:.1}, p99 {:.0}), CPU {:.0} µs",
            placement.label(),
            direct.median,
            relay.median,
            relay.median - direct.median,
            relay.cpu,
            gateway.median,
            gateway.median - direct.median,
            gateway.p99,
            gateway.cpu,
        );
    }
}

/// `CALLS` calls one after another: the median and p99.
async fn timed_serial(label: &str, call: Arc<Call>) {
    for _ in 0..200 {
        call().await;
    }
    let mut us = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        call().await;
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (median, p99) = stats(us);
    println!("{label:<40} median {median:>7.1} µs  p99 {p99:>7.1} µs");
}

/// `4 × CALLS` calls, 8 in flight: calls per second.
async fn in_flight(call: Arc<Call>) -> f64 {
    let started = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let call = call.clone();
            tokio::spawn(async move {
                for _ in 0..CALLS * 4 / 8 {
                    call().await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (CALLS * 4) as f64 / started.elapsed().as_secs_f64()
}

/// A gateway in `flat` exposure with one app per server, initialized.
async fn front_door(home: &Path, servers: &[Server]) -> Client {
    write_front_door(home, servers);
    Client::gateway(home).await
}

/// A home in `flat` exposure with one app per server.
fn write_front_door(home: &Path, servers: &[Server]) {
    fs::create_dir_all(home).unwrap();
    fs::write(
        home.join("config.json"),
        r#"{"consent": {"mode": "allow"}, "exposure": "flat"}"#,
    )
    .unwrap();
    for s in servers {
        let doc = json!({"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
            "app":{"id":s.id,"name":{"en":s.id},"defaultLang":"en","description":"bench"},
            "execution":{"type":"mcp","command":s.command,"args":s.args}});
        fs::create_dir_all(home.join(&s.id)).unwrap();
        fs::write(home.join(&s.id).join("aai.json"), doc.to_string()).unwrap();
    }
}

/// Each server's echo tool as `tools/list` names it.
async fn flat_names(gw: &Client, servers: &[Server]) -> Vec<String> {
    // The first list starts nothing: the servers' tools come with their first guide or
    // call. Call each once by its app tool's guide, then list.
    for s in servers {
        let (r, _) = gw
            .rpc(
                "tools/call",
                json!({"name":"aai_guide","arguments":{"app": s.id}}),
            )
            .await;
        assert!(r.get("result").is_some(), "{r}");
    }
    let (list, _) = gw.rpc("tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().expect("tools").clone();
    servers
        .iter()
        .map(|s| {
            tools
                .iter()
                .find(|t| {
                    t["name"]
                        .as_str()
                        .unwrap()
                        .ends_with(&format!("__{}", s.tool))
                        && t["description"].as_str().unwrap().contains(&s.id)
                })
                .unwrap_or_else(|| panic!("no flat tool of {} in {list}", s.id))["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// The gateway's own CPU time so far (user + system, all threads, children excluded), µs.
/// Passes lines between stdin/stdout and an echo server (see [`bare_relay`]): this
/// binary started with `server` (`--mcp-echo` by default).
fn relay(server: &[String]) {
    use std::io::{BufRead, Write};
    let me = std::env::current_exe().unwrap();
    let default = ["--mcp-echo".to_owned()];
    let mut child = std::process::Command::new(me)
        .args(if server.is_empty() {
            &default[..]
        } else {
            server
        })
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_child = child.stdin.take().unwrap();
    let from_child = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut out = std::io::stdout().lock();
        for line in std::io::BufReader::new(from_child).lines() {
            let Ok(mut line) = line else { break };
            line.push('\n');
            out.write_all(line.as_bytes()).unwrap();
            out.flush().unwrap();
        }
    });
    for line in std::io::stdin().lock().lines() {
        let Ok(mut line) = line else { break };
        line.push('\n');
        to_child.write_all(line.as_bytes()).unwrap();
        to_child.flush().unwrap();
    }
    drop(to_child);
    let _ = child.wait();
}

/// A minimal MCP server on stdio with one tool, `echo {message}`: the cheapest downstream
/// server there is, so that what a call through the gateway adds is the gateway's.
fn mcp_echo() {
    use std::io::{BufRead, Write};
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout());
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let req: Value = serde_json::from_str(&line).unwrap();
        let Some(id) = req.get("id") else { continue };
        let result = match req["method"].as_str().unwrap_or("") {
            "initialize" => json!({"protocolVersion": req["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "echo", "version": "1"}}),
            "tools/list" => json!({"tools": [{"name": "echo", "description": "Echoes",
                "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}},
                                "required": ["message"]}}]}),
            "tools/call" => json!({"content": [{"type": "text",
                "text": req["params"]["arguments"]["message"]}]}),
            "ping" => json!({}),
            _ => {
                let e = json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": "method not found"}});
                serde_json::to_writer(&mut out, &e).unwrap();
                out.write_all(b"\n").unwrap();
                out.flush().unwrap();
                continue;
            }
        };
        let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
        serde_json::to_writer(&mut out, &reply).unwrap();
        out.write_all(b"\n").unwrap();
        out.flush().unwrap();
    }
}
