//! `aai_run`: what a script costs beside the calls it makes. Against one stdio adapter
//! (this binary, `--adapter`: it answers each envelope at once), over the stdio front door:
//!
//! * an empty script (`return 1`): the engine's start and end, per run;
//! * ten `echo` calls as ten `aai_exec` requests one after another, and as one script of
//!   ten calls: the time per call each way;
//! * the gateway's RSS after 2,000 runs of the ten-call script (a run must leave nothing
//!   behind).
//!
//! Run: `cargo bench -p aai-gateway --bench run`, with `AAI_BENCH_GATEWAY` naming a
//! release build for release figures (`docs/performance.md`).

// Tests and benchmarks drive the binary and peers as separate processes.
#![allow(clippy::disallowed_methods)]

use std::fs;
use std::io::{BufRead, Write};
use std::time::Instant;

use serde_json::{Value, json};

mod common;
use common::*;

/// Runs (or request groups) timed per figure, and runs before the second RSS reading;
/// `cargo test` (no `--bench`) runs a few of each, to keep the benchmark working.
const ROUNDS: usize = 300;
const MORE: usize = 2_000;

fn main() {
    if std::env::args().any(|a| a == "--adapter") {
        return adapter();
    }
    let full = std::env::args().any(|a| a == "--bench");
    let (rounds, more) = if full { (ROUNDS, MORE) } else { (5, 20) };
    let me = std::env::current_exe().unwrap();
    let me = me.to_str().unwrap().to_owned();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("aai");
    allow_calls(&home);
    let app = home.join("com.example.bench");
    fs::create_dir_all(&app).unwrap();
    fs::write(
        app.join("aai.json"),
        json!({
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": "com.example.bench", "name": {"en": "Bench"}, "defaultLang": "en", "description": "Echoes"},
            "execution": {"type": "stdio", "command": me, "args": ["--adapter"]},
            "tools": [{"name": "echo", "description": "Echo", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}],
        })
        .to_string(),
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let gw = Client::gateway(&home).await;
        let run = |script: &'static str| {
            let gw = &gw;
            async move {
                let (r, _) = gw
                    .rpc("tools/call", json!({"name": "aai_run", "arguments": {"script": script}}))
                    .await;
                assert_eq!(r["result"]["isError"], Value::Bool(false), "{r}");
            }
        };
        let exec = |n: usize| {
            let gw = &gw;
            async move {
                let (r, _) = gw
                    .rpc(
                        "tools/call",
                        json!({"name": "aai_exec", "arguments": {"app": "com.example.bench", "tool": "echo", "args": {"n": n}}}),
                    )
                    .await;
                assert!(r["result"].is_object(), "{r}");
            }
        };
        const TEN: &str = "for (let i = 0; i < 10; i++) await call('com.example.bench', 'echo', {n: i}); return 10;";
        for _ in 0..rounds.min(50) {
            run(TEN).await;
            exec(0).await;
        }
        let mut empty = Vec::with_capacity(rounds);
        let mut scripted = Vec::with_capacity(rounds);
        let mut single = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            run("return 1;").await;
            empty.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            run(TEN).await;
            scripted.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            for i in 0..10 {
                exec(i).await;
            }
            single.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let (e, e99) = stats(empty);
        let (s, s99) = stats(scripted);
        let (d, d99) = stats(single);
        println!("empty script (engine start and end) median {e:>8.1} µs  p99 {e99:>8.1} µs");
        println!("10 calls as one aai_run                 median {s:>8.1} µs  p99 {s99:>8.1} µs  ({:.1} µs per call)", s / 10.0);
        println!("10 calls as 10 aai_exec                 median {d:>8.1} µs  p99 {d99:>8.1} µs  ({:.1} µs per call)", d / 10.0);
        let (before, _) = gw.rss_kib();
        for _ in 0..more {
            run(TEN).await;
        }
        let (after, peak) = gw.rss_kib();
        println!(
            "gateway RSS: {:.1} MiB before {more} more runs, {:.1} MiB after (peak {:.1} MiB)",
            before as f64 / 1024.0,
            after as f64 / 1024.0,
            peak as f64 / 1024.0
        );
    });
}

/// A stdio adapter that answers every envelope at once with its params.
fn adapter() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(req) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let reply = json!({"version": "1.0", "request_id": req["request_id"], "status": "success", "result": req["params"]});
        let _ = writeln!(out, "{reply}");
        let _ = out.flush();
    }
}
