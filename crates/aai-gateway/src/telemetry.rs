//! OpenTelemetry traces over OTLP/HTTP (docs/telemetry.md): one span per tool call
//! (`aai.call`) with child spans for consent (`aai.consent`), credential resolution
//! (`aai.credentials`) and the executor (`aai.execute`), and W3C trace context
//! (`traceparent`, `tracestate`) taken from the caller and passed on to web apps and
//! downstream MCP servers.
//!
//! Off unless config `telemetry.otlp` is set: then there is no exporter and no thread,
//! and a call's only cost is passing on the caller's context unchanged. On, spans go
//! through a bounded queue to one exporter thread (its own single-threaded runtime),
//! which sends batches as OTLP protobuf (`application/x-protobuf`) to
//! `<endpoint>/v1/traces` through `net.rs`'s client. A full queue drops spans (counted);
//! a call never waits for the collector. At shutdown what is queued is sent within a
//! deadline, and the process does not wait longer than that.
//!
//! The protobuf encoding is written here (a dozen fields of the stable OTLP v1 messages)
//! rather than pulled in with `opentelemetry-proto`/`prost`, whose `trace` feature brings
//! the whole OpenTelemetry SDK; the end-to-end tests decode every request with the
//! official `opentelemetry-proto` Python package.
//!
//! Spans carry names, ids, durations and codes: never an argument value, a result, a
//! credential or an error's text.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::error::{Code, GatewayError};

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The exporter's thread or runtime could not be made.
    #[error("the trace exporter could not start: {0}")]
    Start(#[from] std::io::Error),
    /// The HTTP client could not be built.
    #[error("the trace exporter has no HTTP client: {0}")]
    Client(#[from] crate::net::Error),
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        GatewayError::new(Code::ServiceUnavailable, e.to_string())
    }
}

/// A header value that may be a secret: never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct HeaderValue(pub String);

impl std::fmt::Debug for HeaderValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"…\"")
    }
}

/// Config `telemetry.otlp`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Where batches are POSTed: `endpoint` + `/v1/traces` (or `endpoint` itself when its
    /// path already ends so).
    pub url: reqwest::Url,
    /// Extra request headers (authentication); values are secrets.
    pub headers: Vec<(String, HeaderValue)>,
    /// Resource attribute `service.name`.
    pub service_name: String,
    /// Time for one export request.
    pub timeout: Duration,
    /// Spans waiting to be sent at most; more are dropped.
    pub max_queue: usize,
    /// Spans in one request at most.
    pub max_batch: usize,
    /// How long spans are gathered before a batch is sent.
    pub batch_delay: Duration,
    /// How long the process waits at shutdown for what is queued to be sent.
    pub shutdown: Duration,
}

impl Settings {
    /// The settings for `endpoint` with every other value at its default.
    pub fn new(url: reqwest::Url) -> Settings {
        Settings {
            url,
            headers: Vec::new(),
            service_name: "aai-gateway".to_owned(),
            timeout: Duration::from_secs(10),
            max_queue: 2048,
            max_batch: 512,
            batch_delay: Duration::from_secs(1),
            shutdown: Duration::from_secs(2),
        }
    }

    /// The URL batches go to for `endpoint`: its path with `/v1/traces` appended, unless
    /// it already ends with it.
    pub fn traces_url(mut endpoint: reqwest::Url) -> reqwest::Url {
        let path = endpoint.path().trim_end_matches('/').to_owned();
        if !path.ends_with("/v1/traces") {
            endpoint.set_path(&format!("{path}/v1/traces"));
        }
        endpoint
    }
}

// ---------------------------------------------------------------------------------------
// W3C trace context

/// A W3C trace context: a `traceparent` (with its `tracestate`), as received or as
/// passed on.
#[derive(Clone, PartialEq, Eq)]
pub struct Context {
    /// The trace.
    pub trace_id: [u8; 16],
    /// The span the next one is a child of.
    pub span_id: [u8; 8],
    /// Trace flags (bit 0: sampled).
    pub flags: u8,
    /// The vendors' `tracestate`, passed on as it came (when it is well formed).
    pub state: Option<Arc<str>>,
    /// A span of this gateway (a script run's): a span under it has a local parent.
    pub(crate) local: bool,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.traceparent())
    }
}

/// The W3C header (and MCP `_meta` key) naming a call's trace and parent span.
pub(crate) const TRACEPARENT: &str = "traceparent";
/// The W3C header (and MCP `_meta` key) with the trace's vendor state.
pub(crate) const TRACESTATE: &str = "tracestate";

/// Longest `tracestate` passed on (the W3C limit).
const MAX_TRACESTATE: usize = 512;

impl Context {
    /// Reads a `traceparent` (and its `tracestate`); `None` for anything malformed
    /// (W3C Trace Context level 1: version `00` exactly, a later version's first four
    /// fields; lower-case hex; no all-zero id; version `ff` refused). A malformed
    /// `tracestate` is dropped, the `traceparent` kept.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Context> {
        let t = traceparent.trim_matches([' ', '\t']);
        let b = t.as_bytes();
        if b.len() < 55 {
            return None;
        }
        let version = hex_byte(&b[0..2])?;
        if version == 0xff || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        if (version == 0 && b.len() != 55) || (b.len() > 55 && b[55] != b'-') {
            return None;
        }
        let mut trace_id = [0u8; 16];
        for (i, byte) in trace_id.iter_mut().enumerate() {
            *byte = hex_byte(&b[3 + 2 * i..5 + 2 * i])?;
        }
        let mut span_id = [0u8; 8];
        for (i, byte) in span_id.iter_mut().enumerate() {
            *byte = hex_byte(&b[36 + 2 * i..38 + 2 * i])?;
        }
        let flags = hex_byte(&b[53..55])?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Context {
            trace_id,
            span_id,
            // Version 00 defines only `sampled`; other bits are not passed on.
            flags: flags & 1,
            state: tracestate.and_then(valid_tracestate).map(Arc::from),
            local: false,
        })
    }

    /// Whether the trace is sampled (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The `traceparent` header value (version 00).
    pub fn traceparent(&self) -> String {
        let mut out = String::with_capacity(55);
        out.push_str("00-");
        crate::text::push_hex(&mut out, &self.trace_id);
        out.push('-');
        crate::text::push_hex(&mut out, &self.span_id);
        out.push('-');
        crate::text::push_hex(&mut out, &[self.flags]);
        out
    }

    /// The `tracestate` header value, when there is one.
    pub fn tracestate(&self) -> Option<&str> {
        self.state.as_deref()
    }
}

/// `state` when it is a well-formed `tracestate` list small enough to pass on: printable
/// ASCII, at most 32 non-empty `key=value` members, at most 512 characters.
fn valid_tracestate(state: &str) -> Option<&str> {
    let state = state.trim_matches([' ', '\t']);
    if state.is_empty()
        || state.len() > MAX_TRACESTATE
        || !state.bytes().all(|c| (0x20..=0x7e).contains(&c))
    {
        return None;
    }
    let mut members = 0;
    for member in state.split(',') {
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        let (key, value) = member.split_once('=')?;
        if key.is_empty() || value.is_empty() || key.contains(' ') {
            return None;
        }
        members += 1;
    }
    (1..=32).contains(&members).then_some(state)
}

fn hex_byte(pair: &[u8]) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    Some(digit(pair[0])? << 4 | digit(pair[1])?)
}

fn random_bytes<const N: usize>() -> [u8; N] {
    loop {
        let mut b = [0u8; N];
        getrandom::fill(&mut b).expect("the OS has randomness");
        if b != [0u8; N] {
            return b;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Spans

/// What a span is to its trace (OTLP `SpanKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Work inside the gateway.
    Internal = 1,
    /// A call the gateway serves.
    Server = 2,
    /// A request the gateway makes.
    Client = 3,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Text.
    Str(String),
    /// A whole number.
    Int(i64),
    /// Yes or no.
    Bool(bool),
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Int(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

/// A finished span, as exported.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanData {
    /// The trace.
    pub trace_id: [u8; 16],
    /// This span.
    pub span_id: [u8; 8],
    /// Its parent (`None`: a root).
    pub parent: Option<[u8; 8]>,
    /// Whether the parent came from another process.
    pub remote_parent: bool,
    /// The trace's `tracestate`.
    pub state: Option<Arc<str>>,
    /// Trace flags.
    pub flags: u8,
    /// `aai.call`, `aai.consent`, …
    pub name: &'static str,
    /// Its kind.
    pub kind: Kind,
    /// Start, in nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// End, in nanoseconds since the Unix epoch.
    pub end_ns: u64,
    /// Attributes (names and codes only).
    pub attributes: Vec<(&'static str, Value)>,
    /// `None`: unset; `Some(None)`: ok; `Some(Some(code))`: an error with its code.
    pub status: Option<Option<&'static str>>,
}

/// The running exporter: a bounded queue and the thread that empties it.
pub struct Telemetry {
    queue: tokio::sync::mpsc::Sender<SpanData>,
    dropped: Arc<AtomicU64>,
    stop: tokio_util::sync::CancellationToken,
    done: std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    shutdown: Duration,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Starts the exporter thread for `settings`.
    pub fn start(settings: Settings) -> Result<Arc<Telemetry>, Error> {
        let client = crate::net::client(crate::net::Purpose::Telemetry)?.clone();
        let (queue, spans) = tokio::sync::mpsc::channel(settings.max_queue);
        let dropped = Arc::new(AtomicU64::new(0));
        let stop = tokio_util::sync::CancellationToken::new();
        let (done_tx, done) = std::sync::mpsc::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let exporter = Exporter {
            client,
            resource: resource(&settings.service_name),
            headers: header_map(&settings.headers),
            failing: false,
            dropped: dropped.clone(),
            settings: settings.clone(),
        };
        let stopped = stop.clone();
        std::thread::Builder::new()
            .name("aai-otlp".to_owned())
            .spawn(move || {
                runtime.block_on(exporter.run(spans, stopped));
                let _ = done_tx.send(());
            })?;
        Ok(Arc::new(Telemetry {
            queue,
            dropped,
            stop,
            done: std::sync::Mutex::new(Some(done)),
            shutdown: settings.shutdown,
        }))
    }

    /// Queues a finished span; a full queue drops it (counted). Never waits.
    pub fn record(&self, span: SpanData) {
        if self.queue.try_send(span).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Spans dropped so far (the queue was full, or the collector refused or did not
    /// answer).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Sends what is queued and stops the exporter, waiting at most the configured
    /// `shutdownSeconds`. Later calls return at once.
    pub fn shutdown(&self) {
        self.stop.cancel();
        let done = self.done.lock().expect("telemetry lock").take();
        if let Some(done) = done
            && done.recv_timeout(self.shutdown).is_err()
        {
            tracing::warn!(
                "the trace collector did not take the last spans within {} ms; they are dropped",
                self.shutdown.as_millis()
            );
        }
        let dropped = self.dropped();
        if dropped > 0 {
            tracing::warn!("{dropped} trace spans were dropped in this run");
        }
    }
}

/// The exporter thread's state.
struct Exporter {
    client: reqwest::Client,
    settings: Settings,
    resource: Vec<u8>,
    headers: reqwest::header::HeaderMap,
    /// Whether the last export failed (a failure is warned about once, until one works).
    failing: bool,
    dropped: Arc<AtomicU64>,
}

impl Exporter {
    async fn run(
        mut self,
        mut spans: tokio::sync::mpsc::Receiver<SpanData>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let max = self.settings.max_batch;
        let mut batch = Vec::with_capacity(max);
        let mut stopping = false;
        while !stopping {
            tokio::select! {
                () = stop.cancelled() => break,
                n = spans.recv_many(&mut batch, max) => {
                    if n == 0 {
                        break;
                    }
                }
            }
            let until = tokio::time::Instant::now() + self.settings.batch_delay;
            while batch.len() < max {
                let room = max - batch.len();
                tokio::select! {
                    () = stop.cancelled() => {
                        stopping = true;
                        break;
                    }
                    () = tokio::time::sleep_until(until) => break,
                    n = spans.recv_many(&mut batch, room) => {
                        if n == 0 {
                            stopping = true;
                            break;
                        }
                    }
                }
            }
            self.export(&batch, self.settings.timeout).await;
            batch.clear();
        }
        // Stopping: what is queued now goes out, within the shutdown deadline.
        let deadline = Instant::now() + self.settings.shutdown;
        spans.close();
        loop {
            while batch.len() < max {
                match spans.try_recv() {
                    Ok(span) => batch.push(span),
                    Err(_) => break,
                }
            }
            if batch.is_empty() {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.dropped
                    .fetch_add(batch.len() as u64 + spans.len() as u64, Ordering::Relaxed);
                break;
            }
            self.export(&batch, left.min(self.settings.timeout)).await;
            batch.clear();
        }
    }

    /// Sends one batch; a failure drops it (counted) and is warned about once.
    async fn export(&mut self, batch: &[SpanData], timeout: Duration) {
        let body = encode_request(&self.resource, batch);
        let sent = self
            .client
            .post(self.settings.url.clone())
            .headers(self.headers.clone())
            .header("content-type", "application/x-protobuf")
            .timeout(timeout)
            .body(body)
            .send()
            .await;
        let failure = match sent {
            Ok(response) if response.status().is_success() => {
                // The answer (an ExportTraceServiceResponse, maybe with partial success)
                // is read so that the connection can be reused; its content is not used.
                let _ = crate::net::read_capped(response, 64 * 1024).await;
                None
            }
            Ok(response) => Some(format!("it answered {}", response.status())),
            Err(e) if e.is_timeout() => Some(format!(
                "it did not answer within {} ms",
                timeout.as_millis()
            )),
            Err(e) => Some(crate::net::describe(&e)),
        };
        match failure {
            None => self.failing = false,
            Some(why) => {
                self.dropped
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                if !self.failing {
                    tracing::warn!(
                        "sending {} trace spans to {} failed ({why}); spans are dropped until the collector takes them",
                        batch.len(),
                        crate::net::redact(&self.settings.url)
                    );
                } else {
                    tracing::debug!("sending {} trace spans failed: {why}", batch.len());
                }
                self.failing = true;
            }
        }
    }
}

/// The configured headers as a map (config checked names and values).
fn header_map(headers: &[(String, HeaderValue)]) -> reqwest::header::HeaderMap {
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        if let (Ok(name), Ok(mut value)) = (
            reqwest::header::HeaderName::from_bytes(name.as_bytes()),
            reqwest::header::HeaderValue::from_str(&value.0),
        ) {
            value.set_sensitive(true);
            map.insert(name, value);
        }
    }
    map
}

/// Whether `name` may be a configured export header (a token for HTTP, and none the
/// exporter sets itself).
pub(crate) fn header_allowed(name: &str) -> bool {
    reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
        && !matches!(
            name.to_ascii_lowercase().as_str(),
            "content-type" | "content-length" | "host" | "transfer-encoding" | "connection"
        )
}

// ---------------------------------------------------------------------------------------
// One call's spans

/// A span that is running: its context, start, and attributes so far.
#[derive(Debug)]
pub(crate) struct Span {
    recorded: bool,
    ctx: Option<Context>,
    parent: Option<[u8; 8]>,
    remote_parent: bool,
    name: &'static str,
    kind: Kind,
    start_ns: u64,
    started: Instant,
    attributes: Vec<(&'static str, Value)>,
}

impl Span {
    /// Adds an attribute (a name or a code: never a value a caller sent).
    pub(crate) fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        if self.recorded {
            self.attributes.push((key, value.into()));
        }
    }

    /// The context to pass on from inside this span (its own id, when recorded; else the
    /// caller's context as it came).
    pub(crate) fn context(&self) -> Option<&Context> {
        self.ctx.as_ref()
    }
}

/// The call span's name.
pub(crate) const CALL: &str = "aai.call";
/// The consent check's span.
pub(crate) const CONSENT: &str = "aai.consent";
/// Credential resolution's span.
pub(crate) const CREDENTIALS: &str = "aai.credentials";
/// The executor's span.
pub(crate) const EXECUTE: &str = "aai.execute";
/// A script run's span, the parent of its calls'.
pub(crate) const RUN: &str = "aai.run";
/// A batch's span, the parent of its calls'.
pub(crate) const BATCH: &str = "aai.batch";

/// One call's trace: the call span when it is recorded, and the context its executor
/// passes on. Without an exporter (or under a caller's unsampled trace) nothing is
/// recorded and the caller's context is passed on unchanged.
#[derive(Debug)]
pub(crate) struct Call {
    telemetry: Option<Arc<Telemetry>>,
    span: Span,
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl Call {
    /// Starts a call's span under `incoming` (the caller's context), recorded when
    /// `telemetry` is on and the caller's trace (if any) is sampled.
    pub(crate) fn start(telemetry: Option<&Arc<Telemetry>>, incoming: Option<&Context>) -> Call {
        let recording = telemetry.filter(|_| incoming.is_none_or(Context::sampled));
        let Some(telemetry) = recording else {
            return Call {
                telemetry: None,
                span: Span {
                    recorded: false,
                    ctx: incoming.cloned(),
                    parent: None,
                    remote_parent: false,
                    name: "",
                    kind: Kind::Server,
                    start_ns: 0,
                    started: Instant::now(),
                    attributes: Vec::new(),
                },
            };
        };
        let ctx = Context {
            trace_id: incoming.map_or_else(random_bytes, |c| c.trace_id),
            span_id: random_bytes(),
            flags: 1,
            state: incoming.and_then(|c| c.state.clone()),
            local: false,
        };
        Call {
            telemetry: Some(telemetry.clone()),
            span: Span {
                recorded: true,
                parent: incoming.map(|c| c.span_id),
                remote_parent: incoming.is_some_and(|c| !c.local),
                ctx: Some(ctx),
                name: CALL,
                kind: Kind::Server,
                start_ns: unix_ns(),
                started: Instant::now(),
                attributes: Vec::with_capacity(8),
            },
        }
    }

    /// Starts a span named `name` that is not a call's (a script run's), under
    /// `incoming` as [`Call::start`] does: the spans of the calls under it have it as
    /// their local parent (pass on [`Span::context`]).
    pub(crate) fn start_as(
        name: &'static str,
        telemetry: Option<&Arc<Telemetry>>,
        incoming: Option<&Context>,
    ) -> Call {
        let mut call = Call::start(telemetry, incoming);
        if call.span.recorded {
            call.span.name = name;
            call.span.kind = Kind::Internal;
            if let Some(ctx) = &mut call.span.ctx {
                ctx.local = true;
            }
        }
        call
    }

    /// Whether this call's spans are recorded.
    pub(crate) fn recording(&self) -> bool {
        self.telemetry.is_some()
    }

    /// The call span, for its attributes.
    pub(crate) fn span(&mut self) -> &mut Span {
        &mut self.span
    }

    /// A child span of the call (not recorded when the call is not).
    pub(crate) fn child(&self, name: &'static str, kind: Kind) -> Span {
        match (&self.telemetry, &self.span.ctx) {
            (Some(_), Some(parent)) => Span {
                recorded: true,
                ctx: Some(Context {
                    span_id: random_bytes(),
                    ..parent.clone()
                }),
                parent: Some(parent.span_id),
                remote_parent: false,
                name,
                kind,
                start_ns: unix_ns(),
                started: Instant::now(),
                attributes: Vec::new(),
            },
            _ => Span {
                recorded: false,
                ctx: self.span.ctx.clone(),
                parent: None,
                remote_parent: false,
                name: "",
                kind,
                start_ns: 0,
                started: Instant::now(),
                attributes: Vec::new(),
            },
        }
    }

    /// Ends a child span with its outcome (`Err`: the error's code name).
    pub(crate) fn end(&self, span: Span, outcome: Result<(), &'static str>) {
        if let Some(telemetry) = &self.telemetry
            && span.recorded
        {
            telemetry.record(finish(span, Some(outcome.err())));
        }
    }

    /// Ends the call span with its outcome.
    pub(crate) fn finish(self, outcome: Result<(), &'static str>) {
        if let Some(telemetry) = &self.telemetry {
            telemetry.record(finish(self.span, Some(outcome.err())));
        }
    }
}

fn finish(span: Span, status: Option<Option<&'static str>>) -> SpanData {
    let elapsed = u64::try_from(span.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let ctx = span.ctx.expect("a recorded span has a context");
    SpanData {
        trace_id: ctx.trace_id,
        span_id: ctx.span_id,
        parent: span.parent,
        remote_parent: span.remote_parent,
        state: ctx.state,
        flags: ctx.flags,
        name: span.name,
        kind: span.kind,
        start_ns: span.start_ns,
        end_ns: span.start_ns.saturating_add(elapsed),
        attributes: span.attributes,
        status,
    }
}

// ---------------------------------------------------------------------------------------
// OTLP protobuf (opentelemetry/proto/collector/trace/v1, trace/v1, common/v1, resource/v1)

/// Protobuf wire encoding, the few shapes OTLP needs.
mod pb {
    pub(super) fn varint(out: &mut Vec<u8>, mut n: u64) {
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }

    fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
        varint(out, (u64::from(field) << 3) | u64::from(wire));
    }

    pub(super) fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
        key(out, field, 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }

    pub(super) fn string(out: &mut Vec<u8>, field: u32, s: &str) {
        bytes(out, field, s.as_bytes());
    }

    pub(super) fn uint(out: &mut Vec<u8>, field: u32, n: u64) {
        key(out, field, 0);
        varint(out, n);
    }

    pub(super) fn fixed64(out: &mut Vec<u8>, field: u32, n: u64) {
        key(out, field, 1);
        out.extend_from_slice(&n.to_le_bytes());
    }

    pub(super) fn fixed32(out: &mut Vec<u8>, field: u32, n: u32) {
        key(out, field, 5);
        out.extend_from_slice(&n.to_le_bytes());
    }

    /// A nested message, written by `inner`.
    pub(super) fn message(out: &mut Vec<u8>, field: u32, inner: impl FnOnce(&mut Vec<u8>)) {
        let mut body = Vec::new();
        inner(&mut body);
        bytes(out, field, &body);
    }
}

/// `KeyValue { key = 1; AnyValue value = 2 }`, `AnyValue { string_value = 1; bool_value
/// = 2; int_value = 3 }`.
fn key_value(out: &mut Vec<u8>, field: u32, key: &str, value: &Value) {
    pb::message(out, field, |kv| {
        pb::string(kv, 1, key);
        pb::message(kv, 2, |v| match value {
            Value::Str(s) => pb::string(v, 1, s),
            Value::Bool(b) => pb::uint(v, 2, u64::from(*b)),
            Value::Int(n) => pb::uint(v, 3, *n as u64),
        });
    });
}

/// `Resource { repeated KeyValue attributes = 1 }`, encoded once.
fn resource(service_name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let instance: [u8; 8] = random_bytes();
    let mut id = String::new();
    crate::text::push_hex(&mut id, &instance);
    for (k, v) in [
        ("service.name", service_name),
        ("service.version", env!("CARGO_PKG_VERSION")),
        ("service.instance.id", id.as_str()),
        ("telemetry.sdk.name", "aai-gateway"),
        ("telemetry.sdk.language", "rust"),
    ] {
        key_value(&mut out, 1, k, &Value::Str(v.to_owned()));
    }
    out
}

/// `Span` (trace.proto): trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5,
/// kind 6, start 7, end 8, attributes 9, status 15 (message 2, code 3), flags 16.
fn encode_span(out: &mut Vec<u8>, span: &SpanData) {
    pb::message(out, 2, |s| {
        pb::bytes(s, 1, &span.trace_id);
        pb::bytes(s, 2, &span.span_id);
        if let Some(state) = &span.state {
            pb::string(s, 3, state);
        }
        if let Some(parent) = &span.parent {
            pb::bytes(s, 4, parent);
        }
        pb::string(s, 5, span.name);
        pb::uint(s, 6, span.kind as u64);
        pb::fixed64(s, 7, span.start_ns);
        pb::fixed64(s, 8, span.end_ns);
        for (k, v) in &span.attributes {
            key_value(s, 9, k, v);
        }
        match span.status {
            None => {}
            Some(None) => pb::message(s, 15, |st| pb::uint(st, 3, 1)),
            Some(Some(code)) => pb::message(s, 15, |st| {
                pb::string(st, 2, code);
                pb::uint(st, 3, 2);
            }),
        }
        // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK (0x100), _IS_REMOTE_MASK (0x200).
        let remote = if span.remote_parent { 0x300 } else { 0x100 };
        pb::fixed32(s, 16, remote | u32::from(span.flags));
    });
}

/// `ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1 }`;
/// `ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2 }`;
/// `ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2 }`.
pub(crate) fn encode_request(resource: &[u8], spans: &[SpanData]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 * spans.len() + 256);
    pb::message(&mut out, 1, |rs| {
        pb::bytes(rs, 1, resource);
        pb::message(rs, 2, |ss| {
            pb::message(ss, 1, |scope| {
                pb::string(scope, 1, "aai-gateway");
                pb::string(scope, 2, env!("CARGO_PKG_VERSION"));
            });
            for span in spans {
                encode_span(ss, span);
            }
        });
    });
    out
}

#[cfg(test)]
#[path = "telemetry_tests.rs"]
mod tests;
