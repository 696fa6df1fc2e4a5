//! Prometheus metrics ([docs/metrics.md](../../../docs/metrics.md)), served at `/metrics`
//! by the listener in the Prometheus text format (version 0.0.4), through the official
//! `prometheus-client` crate.
//!
//! The pipeline records every call here (one sink part, like the history): count by app,
//! tool and status, latency by app and tool, rate-limited calls; the consent gate tells
//! its decisions through its observer. What is a state rather than an event (downstream
//! servers, open MCP sessions) is read when scraped.
//!
//! Label values come only from the catalog (app ids, tool names) and from fixed sets
//! (statuses are wire error names, decisions and states are enums): a name a client made
//! up is [`UNKNOWN`], so no client can add series. No argument value, caller or secret is
//! ever a label.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The label value of an app or tool that is not in the catalog.
pub(crate) const UNKNOWN: &str = "_unknown";

/// The `Content-Type` of `/metrics`.
pub(crate) const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Upper bounds of the call latency buckets, in seconds (a D-Bus call takes a
/// millisecond, an agent's prompt minutes).
const LATENCY_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    app: String,
    tool: String,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    app: String,
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    app: String,
    decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitedLabels {
    app: String,
    scope: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    app: String,
    state: &'static str,
}

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// What a finished call is counted under.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The app's id in the catalog; `None`: not in it.
    pub app: Option<&'a str>,
    /// The tool's name in the app; `None`: not one of its tools.
    pub tool: Option<&'a str>,
    /// `ok`, or the wire error's name (`TIMEOUT`, `CONSENT_REQUIRED`…).
    pub status: &'static str,
    /// How long it took.
    pub elapsed: Duration,
}

/// Reads a value when scraped.
type Probe = Box<dyn Fn() -> Option<i64> + Send + Sync>;

/// The gateway's metrics: cheap to record (atomics; a label set is looked up, and made
/// once per new series).
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    latency: Family<ToolLabels, Histogram, fn() -> Histogram>,
    in_flight: Gauge,
    consent: Family<DecisionLabels, Counter>,
    limited: Family<LimitedLabels, Counter>,
    servers: Family<ServerLabels, Gauge>,
    sessions: Gauge,
    /// Open MCP sessions of the listener, read when scraped.
    session_probe: OnceLock<Probe>,
    /// One scrape at a time (the scrape-time gauges are reset and set).
    scrape: Mutex<()>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric, registered under the `aai_` prefix.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("aai");
        let calls = Family::<CallLabels, Counter>::default();
        let latency = Family::<ToolLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        let in_flight = Gauge::default();
        let consent = Family::<DecisionLabels, Counter>::default();
        let limited = Family::<LimitedLabels, Counter>::default();
        let servers = Family::<ServerLabels, Gauge>::default();
        let sessions = Gauge::default();
        registry.register(
            "calls",
            "Tool calls finished, by app, tool and status (ok or the error's name)",
            calls.clone(),
        );
        registry.register(
            "call_duration_seconds",
            "How long tool calls took, by app and tool",
            latency.clone(),
        );
        registry.register(
            "calls_in_flight",
            "Tool calls running now",
            in_flight.clone(),
        );
        registry.register(
            "consent_decisions",
            "Consent checks by app and how they were decided (asked counts the questions put)",
            consent.clone(),
        );
        registry.register(
            "rate_limited_calls",
            "Calls refused by a rate limit, by app and scope (person or app)",
            limited.clone(),
        );
        registry.register(
            "mcp_server_state",
            "Downstream MCP servers used in this run: 1 for the state each is in",
            servers.clone(),
        );
        registry.register(
            "mcp_sessions",
            "Streamable HTTP MCP sessions open on this listener",
            sessions.clone(),
        );
        Metrics {
            registry,
            calls,
            latency,
            in_flight,
            consent,
            limited,
            servers,
            sessions,
            session_probe: OnceLock::new(),
            scrape: Mutex::new(()),
        }
    }

    /// A call started (`calls_in_flight`); [`Metrics::finished`] ends it.
    pub fn started(&self) {
        self.in_flight.inc();
    }

    /// A call finished.
    pub fn finished(&self, call: Call<'_>) {
        self.in_flight.dec();
        let app = call.app.unwrap_or(UNKNOWN);
        // A tool of an app that is not in the catalog is not known either.
        let tool = call.tool.filter(|_| call.app.is_some()).unwrap_or(UNKNOWN);
        let labels = ToolLabels {
            app: app.to_owned(),
            tool: tool.to_owned(),
        };
        self.latency
            .get_or_create(&labels)
            .observe(call.elapsed.as_secs_f64());
        self.calls
            .get_or_create(&CallLabels {
                app: labels.app,
                tool: labels.tool,
                status: call.status,
            })
            .inc();
    }

    /// A consent decision about app `app` (an id of the catalog).
    pub fn decided(&self, app: &str, decision: &'static str) {
        self.consent
            .get_or_create(&DecisionLabels {
                app: app.to_owned(),
                decision,
            })
            .inc();
    }

    /// A call refused by a rate limit of `scope` (`person`, `app`); `app`: its catalog
    /// id when known.
    pub fn limited(&self, app: Option<&str>, scope: &'static str) {
        self.limited
            .get_or_create(&LimitedLabels {
                app: app.unwrap_or(UNKNOWN).to_owned(),
                scope,
            })
            .inc();
    }

    /// Reads the open MCP sessions from `probe` at each scrape (the first probe set
    /// stays; `None` from it keeps the last value).
    pub fn probe_sessions(&self, probe: impl Fn() -> Option<i64> + Send + Sync + 'static) {
        let _ = self.session_probe.set(Box::new(probe));
    }

    /// The text of a scrape; `servers`: each downstream server's state now
    /// (`(app id, state)`), `states`: every state's name.
    pub fn render(&self, servers: &[(String, &'static str)], states: &[&'static str]) -> String {
        let _one = self.scrape.lock().expect("scrape lock");
        self.servers.clear();
        for (app, state) in servers {
            for s in states {
                self.servers
                    .get_or_create(&ServerLabels {
                        app: app.clone(),
                        state: s,
                    })
                    .set(i64::from(s == state));
            }
        }
        if let Some(n) = self.session_probe.get().and_then(|probe| probe()) {
            self.sessions.set(n);
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_with_catalog_labels_only() {
        let m = Metrics::new();
        for status in ["ok", "ok", "TIMEOUT"] {
            m.started();
            m.finished(Call {
                app: Some("com.example.notes"),
                tool: Some("search"),
                status,
                elapsed: Duration::from_millis(20),
            });
        }
        for i in 0..100 {
            m.started();
            m.finished(Call {
                app: None,
                tool: Some(&format!("made-up-{i}")),
                status: "APP_NOT_FOUND",
                elapsed: Duration::from_millis(1),
            });
        }
        m.decided("com.example.notes", "denied");
        m.limited(None, "person");
        m.probe_sessions(|| Some(3));
        let text = m.render(
            &[("com.example.srv".to_owned(), "failing")],
            &["connected", "failing"],
        );
        for line in [
            "# TYPE aai_calls_total counter",
            r#"aai_calls_total{app="com.example.notes",tool="search",status="ok"} 2"#,
            r#"aai_calls_total{app="com.example.notes",tool="search",status="TIMEOUT"} 1"#,
            r#"aai_calls_total{app="_unknown",tool="_unknown",status="APP_NOT_FOUND"} 100"#,
            r#"aai_call_duration_seconds_count{app="com.example.notes",tool="search"} 3"#,
            r#"aai_call_duration_seconds_bucket{app="com.example.notes",tool="search",le="0.025"} 3"#,
            "aai_calls_in_flight 0",
            r#"aai_consent_decisions_total{app="com.example.notes",decision="denied"} 1"#,
            r#"aai_rate_limited_calls_total{app="_unknown",scope="person"} 1"#,
            r#"aai_mcp_server_state{app="com.example.srv",state="failing"} 1"#,
            r#"aai_mcp_server_state{app="com.example.srv",state="connected"} 0"#,
            "aai_mcp_sessions 3",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
        assert!(!text.contains("made-up"), "{text}");
        // A server that is gone is no longer listed.
        assert!(!m.render(&[], &["connected"]).contains("com.example.srv"));
    }
}
