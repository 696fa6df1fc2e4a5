//! The call path on its own: a `Pipeline` built from explicit parts — apps from an
//! in-memory snapshot (no gateway, no watcher), the consent gate with no state file, an
//! in-memory credential store, a recording history sink — and the stdio executor with a
//! `sh` adapter. No MCP, no peer.
//!
//! Run: `cargo test -p aai-gateway --test pipeline`

// The adapter is started through the gateway's executor.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aai_gateway::testing::auth::Authenticator;
use aai_gateway::testing::auth::store::Store;
use aai_gateway::testing::config::{ConsentMode, Limit, RateLimits};
use aai_gateway::testing::consent::Gate;
use aai_gateway::testing::error::{Code, GatewayError};
use aai_gateway::testing::exec::Executors;
use aai_gateway::testing::history::{Record, Sink};
use aai_gateway::testing::host::Os;
use aai_gateway::testing::identity::Caller;
use aai_gateway::testing::pipeline::{Apps, AppsFuture, Origin, Parts, Pipeline, Settings};
use aai_gateway::testing::ratelimit::Limiter;
use aai_gateway::testing::registry::Snapshot;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod common;

/// Echoes each request line back as its result; writes a mark file for every call, so a
/// test can tell whether the adapter ran.
const ADAPTER: &str = r#"while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"request_id":"\([^"]*\)".*/\1/p')
  echo x >> "$MARKS/called"
  printf '{"version":"1.0","request_id":"%s","status":"success","result":{"request":%s}}\n' "$id" "$line"
done"#;

/// Apps from one scan of `home`; counts the web discoveries it is asked for.
struct Fixed {
    snapshot: Arc<Snapshot>,
    discovered: AtomicUsize,
}

impl Apps for Fixed {
    fn snapshot(&self) -> AppsFuture<'_, Arc<Snapshot>> {
        Box::pin(async move { self.snapshot.clone() })
    }

    fn listed<'a>(
        &'a self,
        snapshot: Arc<Snapshot>,
        _app: &'a str,
        _caller: &'a aai_gateway::testing::identity::Caller,
    ) -> AppsFuture<'a, Result<Arc<Snapshot>, GatewayError>> {
        Box::pin(async move { Ok(snapshot) })
    }

    fn discover_web<'a>(&'a self, url: &'a str) -> AppsFuture<'a, Result<String, GatewayError>> {
        self.discovered.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            Err(GatewayError::new(
                Code::ServiceUnavailable,
                format!("no network in this test ({url})"),
            ))
        })
    }
}

/// Keeps every record.
#[derive(Debug, Default)]
struct Recorded(Mutex<Vec<Record>>);

impl Sink for Recorded {
    fn record(&self, record: Record) {
        self.0.lock().unwrap().push(record);
    }
}

struct Bench {
    pipeline: Pipeline,
    metrics: Arc<aai_gateway::testing::metrics::Metrics>,
    apps: Arc<Fixed>,
    history: Arc<Recorded>,
    marks: tempfile::TempDir,
    _home: tempfile::TempDir,
}

fn bench(mode: ConsentMode) -> Bench {
    bench_limited(mode, RateLimits::default())
}

fn bench_limited(mode: ConsentMode, limits: RateLimits) -> Bench {
    let home = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    let doc = json!({
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
        "app": {"id": "com.example.sh", "name": {"en": "Shell echo"}, "defaultLang": "en",
                "description": "Echoes requests"},
        "execution": {"type": "stdio", "command": "sh", "args": ["-c", ADAPTER],
                      "env": {"MARKS": marks.path().to_str().unwrap()}},
        "tools": [{"name": "echo", "description": "Echo",
                   "parameters": {"type": "object",
                                  "properties": {"text": {"type": "string"},
                                                 "password": {"type": "string"},
                                                 "count": {"type": "integer", "default": 1}},
                                  "required": ["text"]}}]
    });
    common::put(home.path(), &doc);
    let apps = Arc::new(Fixed {
        snapshot: Arc::new(common::snapshot_of(home.path(), None)),
        discovered: AtomicUsize::new(0),
    });
    let history = Arc::new(Recorded::default());
    let metrics = Arc::new(aai_gateway::testing::metrics::Metrics::new());
    let parts = Parts {
        executors: Arc::new(Executors::default()),
        consent: Arc::new(Gate::new(mode, Default::default(), Duration::ZERO, None)),
        auth: Arc::new(Authenticator::new(
            Store::memory(),
            None,
            Default::default(),
        )),
        history: Some(history.clone() as Arc<dyn Sink>),
        sites: Arc::default(),
        manage: None,
        metrics: Some(metrics.clone()),
        limits: (!limits.is_empty()).then(|| Arc::new(Limiter::new(limits, None))),
        settings: Settings {
            default_timeout: Duration::from_secs(10),
            retries: 0,
            secrets_from_environment: false,
            cwd: Default::default(),
            os: Os::Linux,
            batch_max_calls: 10,
            batch_concurrency: 2,
            undo_timeout: Duration::from_secs(60),
            scope_access: Default::default(),
            shared_sign_ins: Default::default(),
        },
    };
    Bench {
        pipeline: Pipeline::new(apps.clone(), parts),
        metrics,
        apps,
        history,
        marks,
        _home: home,
    }
}

fn origin() -> Origin {
    Origin {
        caller: Caller {
            name: "test".into(),
            transport: "stdio",
            token: None,
            person: None,
        },
        prompter: None,
        client: None,
        trace: None,
        within: None,
    }
}

impl Bench {
    async fn call(&self, app: &str, args: Value) -> Result<Value, GatewayError> {
        self.pipeline
            .call(
                app,
                "echo",
                Some(args),
                CancellationToken::new(),
                None,
                &origin(),
            )
            .await
            .map(|o| o.value)
    }

    fn adapter_ran(&self) -> bool {
        marks_in(self.marks.path())
    }
}

fn marks_in(dir: &Path) -> bool {
    dir.join("called").exists()
}

#[tokio::test]
async fn a_call_runs_with_defaults_and_is_recorded_masked() {
    let b = bench(ConsentMode::Allow);
    let value = b
        .call(
            "com.example.sh",
            json!({"text": "hi", "password": "hunter2"}),
        )
        .await
        .unwrap();
    // The adapter got the defaults filled in.
    assert_eq!(value["request"]["params"]["count"], 1, "{value}");
    assert!(b.adapter_ran());
    let records = b.history.0.lock().unwrap();
    assert_eq!(records.len(), 1);
    let r = &records[0];
    assert_eq!(
        (r.app.as_str(), r.tool.as_str()),
        ("com.example.sh", "echo")
    );
    assert_eq!(r.status, "ok");
    assert_eq!(r.caller, "test@stdio");
    assert!(!r.args.to_string().contains("hunter2"), "{}", r.args);
    b.pipeline.executors().shutdown();
}

#[tokio::test]
async fn bad_arguments_are_refused_before_anything_runs() {
    let b = bench(ConsentMode::Allow);
    let e = b
        .call("com.example.sh", json!({"text": 7}))
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::InvalidParams, "{e}");
    assert!(!b.adapter_ran());
    let records = b.history.0.lock().unwrap();
    assert_eq!(records[0].code.as_deref(), Some("INVALID_PARAMS"));
}

#[tokio::test]
async fn nothing_runs_without_consent() {
    let b = bench(ConsentMode::Deny);
    let e = b
        .call("com.example.sh", json!({"text": "hi"}))
        .await
        .unwrap_err();
    assert!(
        matches!(e.code, Code::PermissionDenied | Code::ConsentRequired),
        "{e}"
    );
    assert!(!b.adapter_ran());
    // Asked with no way to ask and no time to wait: refused too, and still nothing ran.
    let b = bench(ConsentMode::Prompt);
    let e = b
        .call("com.example.sh", json!({"text": "hi"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::ConsentRequired, "{e}");
    assert!(!b.adapter_ran());
}

#[tokio::test]
async fn an_unknown_id_never_reaches_the_network_and_a_url_does() {
    let b = bench(ConsentMode::Allow);
    for typo in ["nope.app", "com.example.shh", "example.com"] {
        let e = b.call(typo, json!({"text": "hi"})).await.unwrap_err();
        assert_eq!(e.code, Code::AppNotFound, "{typo}: {e}");
    }
    assert_eq!(b.apps.discovered.load(Ordering::SeqCst), 0);
    let e = b
        .call("https://example.com", json!({"text": "hi"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::ServiceUnavailable, "{e}");
    assert_eq!(b.apps.discovered.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_batch_keeps_the_order_and_stops_after_a_failure_when_asked() {
    use aai_gateway::testing::batch::{Batch, Call, Mode};
    let b = bench(ConsentMode::Allow);
    let call = |text: Value| {
        Ok(Call {
            app: "com.example.sh".into(),
            tool: "echo".into(),
            args: Some(json!({"text": text})),
        })
    };
    let batch = Batch {
        calls: vec![call(json!("a")), call(json!(1)), call(json!("c"))],
        mode: Mode::Sequence,
        stop_on_error: true,
        atomic: false,
    };
    let statuses = b
        .pipeline
        .batch(batch, CancellationToken::new(), None, &origin())
        .await
        .unwrap()
        .statuses;
    let names: Vec<&str> = statuses.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["ok", "error", "skipped"]);
    let empty = Batch {
        calls: Vec::new(),
        mode: Mode::Parallel,
        stop_on_error: false,
        atomic: false,
    };
    let e = b
        .pipeline
        .batch(empty, CancellationToken::new(), None, &origin())
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::InvalidParams);
    b.pipeline.executors().shutdown();
}

/// The value of the sample `line` starts (name and labels) in a scrape, if there is one.
fn sample(text: &str, line: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn calls_are_counted_by_catalog_names_and_status() {
    let b = bench(ConsentMode::Allow);
    b.call(
        "com.example.sh",
        json!({"text": "hi", "password": "hunter2"}),
    )
    .await
    .unwrap();
    b.call("com.example.sh", json!({"text": 7}))
        .await
        .unwrap_err();
    for made_up in ["nope-1", "nope-2", "nope-3"] {
        b.call(made_up, json!({"text": "x"})).await.unwrap_err();
    }
    let e = b
        .pipeline
        .call(
            "com.example.sh",
            "no-such-tool-secret",
            None,
            CancellationToken::new(),
            None,
            &origin(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::ToolNotFound);
    let text = b.metrics.render(&[], &[]);
    let calls = |labels: &str| sample(&text, &format!("aai_calls_total{{{labels}}}"));
    assert_eq!(
        calls(r#"app="com.example.sh",tool="echo",status="ok""#),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        calls(r#"app="com.example.sh",tool="echo",status="INVALID_PARAMS""#),
        Some(1.0)
    );
    assert_eq!(
        calls(r#"app="_unknown",tool="_unknown",status="APP_NOT_FOUND""#),
        Some(3.0),
        "made-up ids share one series"
    );
    assert_eq!(
        calls(r#"app="com.example.sh",tool="_unknown",status="TOOL_NOT_FOUND""#),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"aai_call_duration_seconds_count{app="com.example.sh",tool="echo"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"aai_consent_decisions_total{app="com.example.sh",decision="mode_allow"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "aai_calls_in_flight"), Some(0.0));
    for never in ["nope-", "hunter2", "no-such-tool", "test@stdio"] {
        assert!(!text.contains(never), "`{never}` in:\n{text}");
    }
    b.pipeline.executors().shutdown();
}

#[tokio::test]
async fn a_rate_limited_call_is_refused_before_consent_and_before_it_runs() {
    let limits = RateLimits {
        per_person: Some(Limit {
            per_minute: 1,
            burst: 2,
        }),
        ..RateLimits::default()
    };
    // Consent would ask (and, with no channel and no wait, refuse): a limited call must
    // not even ask.
    let b = bench_limited(ConsentMode::Prompt, limits);
    for _ in 0..2 {
        let e = b
            .call("com.example.sh", json!({"text": "hi"}))
            .await
            .unwrap_err();
        assert_eq!(e.code, Code::ConsentRequired, "{e}");
    }
    let e = b
        .call("com.example.sh", json!({"text": "hi"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::RateLimited, "{e}");
    let data = e.data();
    assert_eq!(data["scope"], "person");
    let wait = data["retryAfterSecs"].as_u64().unwrap();
    assert!((1..=60).contains(&wait), "{data}");
    // Unknown apps count too: every call a person makes does.
    let e = b.call("nope", json!({})).await.unwrap_err();
    assert_eq!(e.code, Code::RateLimited);
    assert!(!b.adapter_ran());
    let text = b.metrics.render(&[], &[]);
    assert_eq!(
        sample(
            &text,
            r#"aai_consent_decisions_total{app="com.example.sh",decision="asked"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"aai_consent_decisions_total{app="com.example.sh",decision="unanswered"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"aai_rate_limited_calls_total{app="com.example.sh",scope="person"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"aai_rate_limited_calls_total{app="_unknown",scope="person"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"aai_calls_total{app="com.example.sh",tool="echo",status="RATE_LIMITED"}"#
        ),
        Some(1.0),
    );
    // History keeps the refusal like any failure.
    let code = b.history.0.lock().unwrap()[2].code.clone();
    assert_eq!(code.as_deref(), Some("RATE_LIMITED"));
    // The user at the command line has no person bucket.
    let mut user = origin();
    user.caller = Caller::cli();
    b.pipeline
        .call(
            "com.example.sh",
            "echo",
            Some(json!({"text": "mine"})),
            CancellationToken::new(),
            None,
            &user,
        )
        .await
        .unwrap();
    assert!(b.adapter_ran());
    b.pipeline.executors().shutdown();
}

#[tokio::test]
async fn an_app_limit_counts_every_caller_and_each_call_of_a_batch() {
    use aai_gateway::testing::batch::{Batch, Call, Mode};
    let limits = RateLimits {
        per_app_default: Some(Limit {
            per_minute: 1,
            burst: 3,
        }),
        ..RateLimits::default()
    };
    let b = bench_limited(ConsentMode::Allow, limits);
    let call = || {
        Ok(Call {
            app: "com.example.sh".into(),
            tool: "echo".into(),
            args: Some(json!({"text": "x"})),
        })
    };
    let results = b
        .pipeline
        .batch(
            Batch {
                calls: vec![call(), call(), call(), call()],
                mode: Mode::Sequence,
                stop_on_error: false,
                atomic: false,
            },
            CancellationToken::new(),
            None,
            &origin(),
        )
        .await
        .unwrap()
        .statuses;
    let codes: Vec<Option<Code>> = results
        .iter()
        .map(|r| match r {
            aai_gateway::testing::batch::Status::Failed(e) => Some(e.code),
            _ => None,
        })
        .collect();
    assert_eq!(codes, [None, None, None, Some(Code::RateLimited)]);
    // The user's own call counts against the app too (it protects the app).
    let mut user = origin();
    user.caller = Caller::ui();
    let e = b
        .pipeline
        .call(
            "com.example.sh",
            "echo",
            Some(json!({"text": "mine"})),
            CancellationToken::new(),
            None,
            &user,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::RateLimited);
    assert_eq!(e.data()["scope"], "app");
    assert_eq!(e.data()["app"], "com.example.sh");
    let text = b.metrics.render(&[], &[]);
    assert_eq!(
        sample(
            &text,
            r#"aai_rate_limited_calls_total{app="com.example.sh",scope="app"}"#
        ),
        Some(2.0),
        "{text}"
    );
    b.pipeline.executors().shutdown();
}
