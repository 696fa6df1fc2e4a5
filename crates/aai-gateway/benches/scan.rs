//! Scan-to-model benchmark: list, read, parse (all three dialects), compile every tool
//! schema, merge. Prints the median and spread of repeated scans of 1,000 and 10,000
//! descriptor files. Run: `cargo bench -p aai-gateway --bench scan`.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use aai_gateway::testing::catalog::{self, Layout, SearchDir, SourceKind};

/// One descriptor in dialect `i % 3`, with three tools.
fn descriptor(i: usize) -> (String, String) {
    let id = format!("com.bench.app{i}");
    let params = format!(
        r#"{{"type":"object","properties":{{"query":{{"type":"string","description":"What to look for in app {i}"}},"limit":{{"type":"integer","minimum":1,"maximum":100,"default":10}}}},"required":["query"]}}"#
    );
    let text = match i % 3 {
        0 => {
            let tools: Vec<String> = (0..3)
                .map(|t| format!(r#"{{"name":"tool_{t}","description":"Tool {t} of app {i}","parameters":{params},"method":"Method{t}"}}"#))
                .collect();
            format!(
                r#"{{"schema_version":"1.0","appId":"{id}","name":"App {i}|应用{i}","description":"Benchmark app {i}","version":"1.0","platforms":{{"linux":{{"automation":"dbus","service":"com.bench.App{i}","object":"/com/bench/App{i}","interface":"com.bench.App{i}","tools":[{}]}}}}}}"#,
                tools.join(",")
            )
        }
        1 => {
            let tools: Vec<String> = (0..3)
                .map(|t| format!(r#"{{"name":"tool_{t}","description":"Tool {t} of app {i}","parameters":{params},"execution":{{"path":"/items/{t}","method":"GET"}}}}"#))
                .collect();
            format!(
                r#"{{"schema_version":"1.0","version":"1.0.0","platform":"web","app":{{"id":"{id}","name":"App {i}|应用{i}","description":"Benchmark app {i}","aliases":["bench","b{i}"]}},"execution":{{"type":"http","base_url":"https://api{i}.example.com/v1"}},"tools":[{}]}}"#,
                tools.join(",")
            )
        }
        _ => {
            let tools: Vec<String> = (0..3)
                .map(|t| format!(r#"{{"name":"tool{t}","description":"Tool {t} of app {i}","parameters":{params}}}"#))
                .collect();
            format!(
                r#"{{"schemaVersion":"1.0","version":"1.0.0","platform":"linux","app":{{"id":"{id}","name":{{"en":"App {i}","zh-CN":"应用{i}"}},"defaultLang":"en","description":"Benchmark app {i}"}},"execution":{{"type":"stdio","command":"bench-adapter","args":["--app","{i}"]}},"tools":[{}]}}"#,
                tools.join(",")
            )
        }
    };
    (id, text)
}

fn populate(dir: &Path, n: usize) {
    for i in 0..n {
        let (id, text) = descriptor(i);
        let folder = dir.join(id);
        fs::create_dir_all(&folder).unwrap();
        fs::write(folder.join("aai.json"), text).unwrap();
    }
}

fn bench(n: usize, runs: usize) {
    let tmp = tempfile::tempdir().unwrap();
    populate(tmp.path(), n);
    let dirs = [SearchDir {
        kind: SourceKind::User,
        dir: tmp.path().to_owned(),
        layout: Layout::AppDirs,
    }];
    // Warm the page cache and check the result once.
    let catalog = catalog::scan(&dirs);
    assert_eq!(catalog.apps.len(), n);
    assert!(
        catalog.diagnostics.is_empty(),
        "{:?}",
        &catalog.diagnostics[..1]
    );
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let catalog = catalog::scan(&dirs);
            let elapsed = start.elapsed();
            assert_eq!(catalog.apps.len(), n);
            elapsed
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "scan {n:>6} descriptors ({} tools): median {:>8.2} ms  min {:>8.2} ms  max {:>8.2} ms  ({runs} runs, {} threads)",
        n * 3,
        ms(times[runs / 2]),
        ms(times[0]),
        ms(times[runs - 1]),
        rayon::current_num_threads(),
    );
}

fn main() {
    // `cargo test --benches` runs benches with `--bench` absent; keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    if quick {
        bench(100, 3);
        return;
    }
    bench(1_000, 21);
    bench(10_000, 11);
}
