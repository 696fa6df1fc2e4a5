//! An app's guide at 1,000 apps (`AAI_BENCH_ONLY=guide`): from the async client, fresh
//! and after 10 catalog changes; then from a one-thread client with the processes placed
//! three ways, beside `ping` and a server that answers at once with the same bytes
//! (docs/performance.md, "An app's guide", "One call at a time, placed on purpose").

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use super::common::*;
use super::{life, write_apps};

/// `aai_guide` of one of 1,000 apps, one call at a time: median, p99 and the gateway's
/// CPU per call, on a fresh gateway and after 10 descriptors were added; then from a
/// one-thread client, placed three ways ([`guide_by_placement`]).
pub(crate) async fn guide(tmp: &Path, adapter: &Path) {
    const CALLS: usize = 3_000;
    let home = tmp.join("guide");
    write_apps(&home, 1_000, adapter);
    let (h, me) = (home.clone(), adapter.to_owned());
    tokio::task::spawn_blocking(move || guide_by_placement(&h, &me, CALLS))
        .await
        .unwrap();
    let gw = Arc::new(Client::gateway(&home).await);
    let round = |label: &'static str| {
        let gw = gw.clone();
        async move {
            let call = |i: usize| json!({"name":"aai_guide","arguments":{"app": format!("com.bench.app{}", i % 50)}});
            for i in 0..200 {
                gw.rpc("tools/call", call(i)).await;
            }
            let before = cpu_us(&gw);
            let mut us = Vec::with_capacity(CALLS);
            for i in 0..CALLS {
                let t = Instant::now();
                let (r, _) = gw.rpc("tools/call", call(i)).await;
                us.push(t.elapsed().as_secs_f64() * 1e6);
                assert!(r["result"]["content"][0]["text"].is_string(), "{r}");
            }
            let cpu = (cpu_us(&gw) - before) / CALLS as f64;
            let (median, p99) = stats(us);
            println!(
                "aai_guide, 1,000 apps, {label:<22} median {median:>6.1} µs  p99 {p99:>7.1} µs  gateway CPU {cpu:>5.1} µs per call"
            );
        }
    };
    // The floor: what a request costs this harness and the gateway when it does nothing
    // (`ping`), so that what the guide itself costs can be told from it.
    let before = cpu_us(&gw);
    let mut us = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        gw.rpc("ping", json!({})).await;
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let cpu = (cpu_us(&gw) - before) / CALLS as f64;
    let (median, p99) = stats(us);
    println!(
        "ping (the floor),       {:<22} median {median:>6.1} µs  p99 {p99:>7.1} µs  gateway CPU {cpu:>5.1} µs per call",
        ""
    );
    round("fresh").await;
    for i in 0..10 {
        let id = format!("com.bench.added{i}");
        let dir = home.join(&id);
        fs::create_dir_all(&dir).unwrap();
        let doc = json!({"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
            "app":{"id": id,"name":{"en":"Added"},"defaultLang":"en","description":"Added later"},
            "execution":{"type":"stdio","command": adapter.to_str().unwrap(),"args":["--adapter"]},
            "tools":[{"name":"tool0","description":"d","parameters":{"type":"object"}}]});
        fs::write(dir.join("aai.json"), doc.to_string()).unwrap();
        life::callable(&gw, &id, Instant::now()).await;
    }
    round("after 10 changes").await;
}

/// `ping` and `aai_guide` from a one-thread client ([`Lean`]), each [`Placement`], beside
/// the floor: a server that answers at once with the same bytes as the guide (this
/// binary, `--canned`).
fn guide_by_placement(home: &Path, me: &Path, calls: usize) {
    let guide = |i: usize| {
        let app = format!("com.bench.app{}", i % 50);
        (
            "tools/call",
            json!({"name":"aai_guide","arguments":{"app": app}}),
        )
    };
    let answered = |a: &str| assert!(a.contains("\"result\""), "{a}");
    let answer = home.join("guide-answer.json");
    for placement in Placement::all() {
        let (ping, guided, bytes) = on_own_thread(|| {
            let mut gw = Lean::spawn(&GATEWAY, &["--home", home.to_str().unwrap()], placement);
            gw.initialize();
            let ping = gw.round(calls, |_| ("ping", json!({})), answered);
            let guided = gw.round(calls, guide, answered);
            let (method, params) = guide(7);
            let (_, line) = gw.call(method, &params);
            fs::write(&answer, line).unwrap();
            (ping, guided, line.len())
        });
        let floor = on_own_thread(|| {
            let args = ["--canned", answer.to_str().unwrap()];
            let mut canned = Lean::spawn(me.to_str().unwrap(), &args, placement);
            canned.initialize();
            canned.round(calls, guide, answered)
        });
        println!(
            "aai_guide, 1,000 apps, one-thread client, {:<32} median {:>6.1} µs  p99 {:>6.1} µs  \
             gateway CPU {:>5.1} µs | ping {:>6.1} µs | a server answering the same {bytes} \
             bytes at once {:>6.1} µs",
            placement.label(),
            guided.median,
            guided.p99,
            guided.cpu,
            ping.median,
            floor.median,
        );
    }
}
