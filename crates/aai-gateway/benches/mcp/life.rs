//! A gateway over its life (`AAI_BENCH_ONLY=life`, `rescans`): RSS after init, after
//! changes, rescans and `web_discover`, and how soon a written descriptor is callable
//! (docs/performance.md, "Over a gateway's life", "A rescan in steps, and two malloc
//! arenas").

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::common::*;
use super::write_apps;

/// Polls `app`'s guide every 2 ms until its answer passes `done`; how long that took
/// from `since`.
async fn guide_until(
    gw: &Client,
    app: &str,
    since: Instant,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Duration {
    loop {
        let (r, _) = gw
            .rpc(
                "tools/call",
                json!({"name":"aai_guide","arguments":{"app": app}}),
            )
            .await;
        if done(&r) {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "{app}: {what} never came"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Waits until `app` is callable (its guide answers); how long that took from `since`.
pub(crate) async fn callable(gw: &Client, app: &str, since: Instant) -> Duration {
    let answers = |r: &Value| r["result"]["isError"] != json!(true) && r.get("error").is_none();
    guide_until(gw, app, since, "an answer", answers).await
}

/// Until `app`'s guide says `text`.
async fn says(gw: &Client, app: &str, text: &str) {
    let said = |r: &Value| {
        r["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains(text))
    };
    guide_until(gw, app, Instant::now(), text, said).await;
}

/// RSS once the gateway has settled (a second after the last step).
async fn settled_mib(gw: &Client) -> f64 {
    tokio::time::sleep(Duration::from_secs(1)).await;
    gw.rss_kib().0 as f64 / 1024.0
}

/// A gateway over its life (docs/performance.md, "Over a gateway's life"): RSS after
/// init, after 10 single-file changes, after a full rescan (every file rewritten) and
/// after `web_discover`, at 1,000 and 10,000 apps; and the time from a descriptor
/// written to its app being callable (the watcher's wait plus the apply).
pub(crate) async fn life(tmp: &Path, adapter: &Path) {
    for n in [1_000, 10_000] {
        let home = tmp.join(format!("life{n}"));
        write_apps(&home, n, adapter);
        let gw = Client::spawn(&GATEWAY, &["--home", home.to_str().unwrap()], "id");
        gw.initialize().await;
        callable(&gw, "com.bench.app0", Instant::now()).await;
        let init = settled_mib(&gw).await;
        let mut latency = Vec::new();
        for k in 0..10 {
            let id = format!("com.bench.new{k}");
            let doc = fs::read_to_string(home.join("com.bench.app1/aai.json"))
                .unwrap()
                .replace("com.bench.app1", &id);
            fs::create_dir_all(home.join(&id)).unwrap();
            let written = Instant::now();
            fs::write(home.join(&id).join("aai.json"), doc).unwrap();
            latency.push(callable(&gw, &id, written).await.as_secs_f64() * 1e3);
        }
        let changed = settled_mib(&gw).await;
        // Every file rewritten (and one more, to know when the rescan is done).
        let started = Instant::now();
        for i in 0..n {
            let file = home.join(format!("com.bench.app{i}/aai.json"));
            let text = fs::read_to_string(&file).unwrap();
            fs::write(
                &file,
                text.replace("Benchmark app number", "Benchmark app no."),
            )
            .unwrap();
        }
        let doc = fs::read_to_string(home.join("com.bench.app1/aai.json"))
            .unwrap()
            .replace("com.bench.app1", "com.bench.last");
        fs::create_dir_all(home.join("com.bench.last")).unwrap();
        fs::write(home.join("com.bench.last/aai.json"), doc).unwrap();
        let rescan = callable(&gw, "com.bench.last", started).await;
        let rescanned = settled_mib(&gw).await;
        let port = descriptor_site("com.bench.site").await;
        let discovered_at = Instant::now();
        let (r, _) = gw
            .rpc(
                "tools/call",
                json!({"name":"web_discover","arguments":{"url": format!("http://127.0.0.1:{port}")}}),
            )
            .await;
        assert_ne!(r["result"]["isError"], json!(true), "{r}");
        let discover = discovered_at.elapsed();
        let discovered = settled_mib(&gw).await;
        let (_, peak) = gw.rss_kib();
        latency.sort_by(f64::total_cmp);
        println!(
            "life {n} apps: RSS after init {init:.1} MiB, after 10 changes {changed:.1}, after a full rescan {rescanned:.1}, after web_discover {discovered:.1} (peak {:.1}); written -> callable median {:.0} ms (max {:.0}); full rescan -> callable {:.0} ms; web_discover {:.0} ms",
            peak as f64 / 1024.0,
            latency[latency.len() / 2],
            latency[latency.len() - 1],
            rescan.as_secs_f64() * 1e3,
            discover.as_secs_f64() * 1e3,
        );
    }
}

/// Rescans over a gateway's life at 10,000 apps (docs/performance.md, "A rescan in steps,
/// and two malloc arenas"): RSS after init, then after each of three whole rescans (a
/// scan path, a symlink, turned to a folder where every descriptor differs, which the
/// periodic check finds); and on a second gateway after each of three rewrites of every
/// file, 500 at a time, 200 ms apart, each burst reloaded by the watcher alone.
pub(crate) async fn rescans(tmp: &Path, adapter: &Path) {
    let n = 10_000;
    let base = tmp.join("rescans");
    for name in ["a", "b"] {
        write_apps(&base.join(name), n, adapter);
        for i in 0..n {
            let file = base.join(format!("{name}/com.bench.app{i}/aai.json"));
            let text = fs::read_to_string(&file).unwrap();
            fs::write(&file, text.replace("app number", &format!("app {name}"))).unwrap();
        }
    }
    let link = base.join("current");
    std::os::unix::fs::symlink(base.join("a"), &link).unwrap();
    let home = base.join("home");
    fs::create_dir_all(&home).unwrap();
    let config = json!({"consent": {"mode": "allow"}, "scanInterval": 1, "scanPaths": [link]});
    fs::write(home.join("config.json"), config.to_string()).unwrap();
    let last = format!("com.bench.app{}", n - 1);
    let gw = Client::spawn(&GATEWAY, &["--home", home.to_str().unwrap()], "id");
    gw.initialize().await;
    says(&gw, &last, &format!("app a {}", n - 1)).await;
    let init = settled_mib(&gw).await;
    let mut whole = Vec::new();
    for round in 0..3 {
        let name = ["b", "a"][round % 2];
        let turned = base.join("turned");
        std::os::unix::fs::symlink(base.join(name), &turned).unwrap();
        fs::rename(&turned, &link).unwrap();
        says(&gw, &last, &format!("app {name} {}", n - 1)).await;
        whole.push(settled_mib(&gw).await);
    }
    drop(gw);
    let home = tmp.join("rescans-watched");
    write_apps(&home, n, adapter);
    let gw = Client::spawn(&GATEWAY, &["--home", home.to_str().unwrap()], "id");
    gw.initialize().await;
    callable(&gw, &last, Instant::now()).await;
    let watched_init = settled_mib(&gw).await;
    let mut bursts = Vec::new();
    for round in 0..3 {
        let word = format!("round {round}");
        for i in 0..n {
            let file = home.join(format!("com.bench.app{i}/aai.json"));
            let text = fs::read_to_string(&file).unwrap();
            let from = if round == 0 {
                "app number".to_owned()
            } else {
                format!("round {}", round - 1)
            };
            fs::write(&file, text.replace(&from, &word)).unwrap();
            if i % 500 == 499 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        says(&gw, &last, &word).await;
        bursts.push(settled_mib(&gw).await);
    }
    let ratios = |init: f64, after: &[f64]| {
        let each: Vec<String> = after
            .iter()
            .map(|m| format!("{m:.1} ({:.2}×)", m / init))
            .collect();
        each.join(", ")
    };
    println!(
        "rescans {n} apps: RSS after init {init:.1} MiB, after each of 3 whole rescans {}",
        ratios(init, &whole)
    );
    println!(
        "rescans {n} apps: RSS after init {watched_init:.1} MiB, after each of 3 rewrites seen by the watcher in bursts {}",
        ratios(watched_init, &bursts)
    );
}

/// A web app's descriptor on a loopback site (`web_discover` fetches it).
async fn descriptor_site(id: &'static str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = json!({"schemaVersion":"1.0","version":"1.0.0","platform":"web",
        "app":{"id":id,"name":"Site","description":"A web app found by web_discover"},
        "execution":{"type":"http","baseUrl":format!("http://127.0.0.1:{port}")},
        "tools":[{"name":"get","description":"Gets it","parameters":{"type":"object"},
                  "execution":{"path":"/x","method":"GET"}}]})
    .to_string();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = socket.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(body.as_bytes()).await;
            });
        }
    });
    port
}
