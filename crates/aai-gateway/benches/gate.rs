//! What consent and history add to a call, measured on the library: the consent check of
//! a granted call (prompt mode, the grant in memory), masking the arguments, building and
//! queueing the history record, and the excerpt; what counting a call for `/metrics` and
//! the rate limits (a person's and an app's bucket) add; then the history writer's
//! throughput.
//!
//! Run: `cargo bench -p aai-gateway --bench gate`.

use std::time::{Duration, Instant};

use aai_gateway::testing::config::ConsentMode;
use aai_gateway::testing::consent::state::State;
use aai_gateway::testing::consent::{Choice, Fixed, Gate, Question, Reply};
use aai_gateway::testing::history::{self, Record, Retention, Sink, Sqlite};
use aai_gateway::testing::identity::Caller;
use serde_json::json;

fn median(mut us: Vec<f64>) -> f64 {
    us.sort_by(f64::total_cmp);
    us[us.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let runs = if full { 20_000 } else { 50 };
    let dir = tempfile::tempdir().unwrap();
    let file = State::file_in(dir.path());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let gate = Gate::new(
        ConsentMode::Prompt,
        Default::default(),
        Duration::ZERO,
        Some(std::sync::Arc::new(State::open(&file).unwrap())),
    );
    let caller = Caller {
        name: "bench".into(),
        transport: "stdio",
        token: None,
        person: None,
    };
    let question = Question::for_call(&caller, "com.bench.app0", "App 0", "tool0", "Tool 0");
    // "Always allow this tool", once; every later check finds the grant in memory.
    rt.block_on(gate.check(&question, Some(&Fixed(Reply::Chosen(Choice::Tool)))))
        .unwrap();
    let sink = Sqlite::open(
        &file,
        Retention {
            days: 30,
            rows: 1_000_000,
        },
    )
    .unwrap();
    let args = json!({"text": "hi", "count": 3, "token": "x"});
    let result = json!({"text": "hi", "ok": true});
    let mut us = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        rt.block_on(gate.check(&question, None)).unwrap();
        let masked = history::mask(&args);
        let excerpt = history::excerpt(&history::mask(&result).to_string());
        sink.record(Record {
            at_ms: history::now_ms(),
            caller: question.caller.key(),
            person: None,
            app: question.app.clone(),
            asked: None,
            tool: question.tool.clone(),
            args: masked,
            status: "ok".into(),
            code: None,
            duration_ms: 0,
            excerpt,
            fingerprint: None,
            run: None,
        });
        us.push(t.elapsed().as_secs_f64() * 1e6);
        if !full {
            continue;
        }
        // Keep the queue from filling: this measures the call's cost, not back-pressure.
        if us.len() % 5_000 == 0 {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    println!(
        "consent check + history record per call: median {:.2} µs",
        median(us)
    );

    // Counting a call for `/metrics`: in flight, then finished (one series).
    let metrics = aai_gateway::testing::metrics::Metrics::new();
    let mut us = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        metrics.started();
        metrics.finished(aai_gateway::testing::metrics::Call {
            app: Some("com.bench.app0"),
            tool: Some("tool0"),
            status: "ok",
            elapsed: Duration::from_millis(3),
        });
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    println!("metrics per call: median {:.2} µs", median(us));
    let t = Instant::now();
    let text = metrics.render(&[], &[]);
    println!(
        "a scrape of {} bytes: {:.1} µs",
        text.len(),
        t.elapsed().as_secs_f64() * 1e6
    );

    // Rate limits: the person's bucket, then the app's (never refused here).
    let limit = aai_gateway::testing::config::Limit {
        per_minute: 600_000,
        burst: 100_000,
    };
    let limiter = aai_gateway::testing::ratelimit::Limiter::new(
        aai_gateway::testing::config::RateLimits {
            per_person: Some(limit),
            per_app_default: Some(limit),
            ..Default::default()
        },
        None,
    );
    // This process's buckets (no shared store): the futures never wait.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let us = rt.block_on(async {
        let mut us = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            limiter.admit_person(&question.caller).await.unwrap();
            limiter.admit_app(&question.app).await.unwrap();
            us.push(t.elapsed().as_secs_f64() * 1e6);
        }
        us
    });
    println!("rate limits per call: median {:.2} µs", median(us));

    // Writer throughput: queue records as fast as possible, time until all are on disk.
    let n = if full { 100_000 } else { 100 };
    let file2 = dir.path().join("throughput.db");
    let sink = Sqlite::open(
        &file2,
        Retention {
            days: 30,
            rows: 10_000_000,
        },
    )
    .unwrap();
    let started = Instant::now();
    let mut sent = 0;
    while sent < n {
        // Never more than the queue holds: the writer's pace is what is measured.
        for _ in 0..5_000.min(n - sent) {
            sink.record(Record {
                at_ms: history::now_ms(),
                caller: "bench@stdio".into(),
                person: None,
                app: "com.bench.app0".into(),
                asked: None,
                tool: "tool0".into(),
                args: json!({"i": sent}),
                status: "ok".into(),
                code: None,
                duration_ms: 1,
                excerpt: "{\"ok\":true}".into(),
                fingerprint: None,
                run: None,
            });
            sent += 1;
        }
        while history::count(&file2).unwrap() < sent as u64 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "history writer: {n} records in {secs:.2} s ({:.0} records/s)",
        n as f64 / secs
    );
}
