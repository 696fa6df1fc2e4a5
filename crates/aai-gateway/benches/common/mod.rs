//! What the MCP benchmarks share: the measured gateway binary, a raw line-oriented
//! JSON-RPC client over a child's stdio, and the timing loop; one call at a time from a
//! one-thread client, placed on CPUs on purpose, in `lean.rs`.

// Each bench uses part of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{Mutex, oneshot};

mod lean;
// Not every bench calls one at a time.
#[allow(unused_imports)]
pub(crate) use lean::*;

/// The gateway binary measured: this build's, or `AAI_BENCH_GATEWAY` (an older build, to
/// compare side by side on the same machine).
pub(crate) static GATEWAY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    std::env::var("AAI_BENCH_GATEWAY")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_aai-gateway").to_owned())
});

/// Waiting requests, by id, with where to send the reply line and its length.
pub(crate) type Pending = Arc<std::sync::Mutex<HashMap<String, oneshot::Sender<(Value, usize)>>>>;

/// A call's future.
pub(crate) type CallFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// One benchmarked call.
pub(crate) type Call = dyn Fn() -> CallFuture + Send + Sync;

pub(crate) fn boxed(f: impl std::future::Future<Output = ()> + Send + 'static) -> CallFuture {
    Box::pin(f)
}

/// A line-oriented JSON-RPC (or envelope) client over a child's stdio.
pub(crate) struct Client {
    pub(crate) child: Child,
    stdin: Mutex<ChildStdin>,
    pending: Pending,
    next: AtomicU64,
}

impl Client {
    pub(crate) fn spawn(program: &str, args: &[&str], id_key: &'static str) -> Client {
        Client::spawn_with(program, args, id_key, &[])
    }

    pub(crate) fn spawn_with(
        program: &str,
        args: &[&str],
        id_key: &'static str,
        envs: &[(&str, &str)],
    ) -> Client {
        let mut child = Command::new(program)
            .args(args)
            .envs(envs.iter().copied())
            .env("AAI_SYSTEM_ROOT", "/nonexistent")
            .env("AAI_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn");
        let stdout = child.stdout.take().unwrap();
        let pending: Pending = Arc::default();
        let p = pending.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let v: Value = serde_json::from_str(&line).expect("JSON line");
                let id = match &v[id_key] {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => continue,
                };
                if let Some(tx) = p.lock().unwrap().remove(&id) {
                    let _ = tx.send((v, line.len()));
                }
            }
        });
        Client {
            stdin: Mutex::new(child.stdin.take().unwrap()),
            child,
            pending,
            next: AtomicU64::new(1),
        }
    }

    /// Sends `make(id)` and waits for the line carrying that id.
    pub(crate) async fn request(&self, make: impl FnOnce(u64) -> Value) -> (Value, usize) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id.to_string(), tx);
        let mut line = serde_json::to_vec(&make(id)).unwrap();
        line.push(b'\n');
        self.stdin.lock().await.write_all(&line).await.unwrap();
        rx.await.expect("reply")
    }

    pub(crate) async fn rpc(&self, method: &str, params: Value) -> (Value, usize) {
        self.request(|id| json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
            .await
    }

    pub(crate) async fn notify(&self, method: &str) {
        let line = format!("{}\n", json!({"jsonrpc":"2.0","method":method}));
        self.stdin
            .lock()
            .await
            .write_all(line.as_bytes())
            .await
            .unwrap();
    }

    /// The 2026-07-28 start: `server/discover`, no handshake; every request then carries
    /// [`modern_meta`].
    pub(crate) async fn discover(&self) {
        let (r, _) = self
            .rpc("server/discover", json!({"_meta": modern_meta()}))
            .await;
        assert!(r.get("result").is_some(), "{r}");
    }

    /// The gateway measured, on `home`, initialized.
    pub(crate) async fn gateway(home: &Path) -> Client {
        let gw = Client::spawn(&GATEWAY, &["--home", home.to_str().unwrap()], "id");
        gw.initialize().await;
        gw
    }

    pub(crate) async fn initialize(&self) {
        self.rpc(
            "initialize",
            json!({"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}),
        )
        .await;
        self.notify("notifications/initialized").await;
    }

    pub(crate) fn rss_kib(&self) -> (u64, u64) {
        (self.status_kib("VmRSS:"), self.status_kib("VmHWM:"))
    }

    /// A field of `/proc/<pid>/status`, in KiB.
    pub(crate) fn status_kib(&self, name: &str) -> u64 {
        let status =
            fs::read_to_string(format!("/proc/{}/status", self.child.id().unwrap())).unwrap();
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
}

/// The bench measures calls, not the consent prompt: its homes allow every call.
pub(crate) fn allow_calls(home: &Path) {
    fs::create_dir_all(home).unwrap();
    fs::write(
        home.join("config.json"),
        r#"{"consent": {"mode": "allow"}}"#,
    )
    .unwrap();
}

/// The `_meta` every request of a 2026-07-28 client carries.
pub(crate) fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28",
           "io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},
           "io.modelcontextprotocol/clientCapabilities":{}})
}

pub(crate) fn stats(mut us: Vec<f64>) -> (f64, f64) {
    us.sort_by(f64::total_cmp);
    (us[us.len() / 2], us[us.len() * 99 / 100])
}

pub(crate) async fn measure(label: &str, calls: usize, call: Arc<Call>) {
    for _ in 0..200 {
        call().await;
    }
    let mut us = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        call().await;
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (median, p99) = stats(us);
    let total = calls * 4;
    let started = Instant::now();
    let per_task = total / 8;
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let call = call.clone();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    call().await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let rate = total as f64 / started.elapsed().as_secs_f64();
    println!(
        "{label:<28} median {median:>7.1} µs  p99 {p99:>7.1} µs  {rate:>8.0} calls/s with 8 in flight"
    );
}

/// The CPU time (user and system) `gw` has used so far, in µs (10 ms ticks).
pub(crate) fn cpu_us(gw: &Client) -> f64 {
    proc_cpu_us(gw.child.id().unwrap())
}

/// The CPU time (user and system) process `pid` has used so far, in µs (10 ms ticks).
pub(crate) fn proc_cpu_us(pid: u32) -> f64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command's closing parenthesis; utime and stime are the 12th and
    // 13th of them (14th and 15th of the line), in clock ticks of 10 ms.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse().unwrap())
        .collect();
    (fields[0] + fields[1]) as f64 * 10_000.0
}

/// A peer installed by `tests/install-peers`, or `None` (and a message) when it is missing.
pub(crate) fn peer(path: &str) -> Option<std::path::PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    if p.exists() {
        Some(p)
    } else {
        println!("skipped: {path} is missing (run tests/install-peers)");
        None
    }
}
