//! Tests of `telemetry.rs`.

use super::*;

const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn traceparent_round_trips() {
    let c = Context::parse(TP, Some("congo=t61rcWkgMzE, rojo=00f067aa0ba902b7")).unwrap();
    assert_eq!(c.traceparent(), TP);
    assert!(c.sampled());
    assert_eq!(
        c.tracestate(),
        Some("congo=t61rcWkgMzE, rojo=00f067aa0ba902b7")
    );
    assert_eq!(c.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
    let unsampled = Context::parse(&TP.replace("-01", "-00"), None).unwrap();
    assert!(!unsampled.sampled());
    // Flags other than `sampled` are not passed on.
    assert_eq!(
        Context::parse(&TP.replace("-01", "-ff"), None)
            .unwrap()
            .traceparent(),
        TP
    );
    // A later version: its first four fields, more after a dash.
    let v = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever";
    assert_eq!(Context::parse(v, None).unwrap().traceparent(), TP);
}

#[test]
fn malformed_traceparents_are_refused() {
    for bad in [
        "",
        "00",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\u{e9}",
    ] {
        assert!(Context::parse(bad, None).is_none(), "{bad:?}");
    }
    // A bad tracestate is dropped, the traceparent kept.
    for bad in [
        "a",
        "=b",
        "a=b,c",
        &"k=v,".repeat(40),
        "k=v\u{1}",
        &format!("k={}", "v".repeat(600)),
    ] {
        let c = Context::parse(TP, Some(bad)).unwrap();
        assert_eq!(c.tracestate(), None, "{bad:?}");
    }
}

#[test]
fn traces_url_appends_the_signal_path_once() {
    let url = |s: &str| Settings::traces_url(s.parse().unwrap()).to_string();
    assert_eq!(
        url("http://127.0.0.1:4318"),
        "http://127.0.0.1:4318/v1/traces"
    );
    assert_eq!(url("http://c:4318/otlp/"), "http://c:4318/otlp/v1/traces");
    assert_eq!(url("https://c/v1/traces"), "https://c/v1/traces");
}

#[test]
fn unconfigured_calls_pass_the_callers_context_on() {
    let incoming = Context::parse(TP, None).unwrap();
    let call = Call::start(None, Some(&incoming));
    assert!(!call.recording());
    assert_eq!(call.child(EXECUTE, Kind::Client).context(), Some(&incoming));
    assert!(
        Call::start(None, None)
            .child(EXECUTE, Kind::Client)
            .context()
            .is_none()
    );
}

/// Reads a protobuf message into (field, wire type, payload) triples.
fn fields(mut b: &[u8]) -> Vec<(u64, u8, Vec<u8>)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut n = 0u64;
        let mut shift = 0;
        loop {
            let byte = b[0];
            *b = &b[1..];
            n |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return n;
            }
            shift += 7;
        }
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        let wire = (key & 7) as u8;
        let payload = match wire {
            0 => varint(&mut b).to_le_bytes().to_vec(),
            1 => {
                let (p, rest) = b.split_at(8);
                b = rest;
                p.to_vec()
            }
            5 => {
                let (p, rest) = b.split_at(4);
                b = rest;
                p.to_vec()
            }
            2 => {
                let len = varint(&mut b) as usize;
                let (p, rest) = b.split_at(len);
                b = rest;
                p.to_vec()
            }
            w => panic!("wire type {w}"),
        };
        out.push((key >> 3, wire, payload));
    }
    out
}

fn field(msg: &[(u64, u8, Vec<u8>)], n: u64) -> Vec<Vec<u8>> {
    msg.iter()
        .filter(|(f, _, _)| *f == n)
        .map(|(_, _, p)| p.clone())
        .collect()
}

#[test]
fn spans_encode_as_otlp_protobuf() {
    let span = SpanData {
        trace_id: [1; 16],
        span_id: [2; 8],
        parent: Some([3; 8]),
        remote_parent: true,
        state: Some("k=v".into()),
        flags: 1,
        name: CALL,
        kind: Kind::Server,
        start_ns: 1_700_000_000_000_000_000,
        end_ns: 1_700_000_000_500_000_000,
        attributes: vec![
            ("aai.app.id", "com.example.echo".into()),
            ("aai.duration_ms", Value::Int(500)),
            ("aai.ok", Value::Bool(false)),
        ],
        status: Some(Some("TOOL_NOT_FOUND")),
    };
    let bytes = encode_request(&resource("svc"), &[span]);
    let request = fields(&bytes);
    let rs = fields(&field(&request, 1)[0]);
    let res = fields(&field(&rs, 1)[0]);
    let attrs: Vec<_> = field(&res, 1).iter().map(|a| fields(a)).collect();
    assert_eq!(field(&attrs[0], 1)[0], b"service.name");
    assert_eq!(fields(&field(&attrs[0], 2)[0])[0].2, b"svc");
    let ss = fields(&field(&rs, 2)[0]);
    let scope = fields(&field(&ss, 1)[0]);
    assert_eq!(field(&scope, 1)[0], b"aai-gateway");
    let spans = field(&ss, 2);
    assert_eq!(spans.len(), 1);
    let s = fields(&spans[0]);
    assert_eq!(field(&s, 1)[0], [1; 16]);
    assert_eq!(field(&s, 2)[0], [2; 8]);
    assert_eq!(field(&s, 3)[0], b"k=v");
    assert_eq!(field(&s, 4)[0], [3; 8]);
    assert_eq!(field(&s, 5)[0], b"aai.call");
    assert_eq!(field(&s, 6)[0][0], 2);
    assert_eq!(field(&s, 7)[0], 1_700_000_000_000_000_000u64.to_le_bytes());
    assert_eq!(field(&s, 8)[0], 1_700_000_000_500_000_000u64.to_le_bytes());
    let attrs: Vec<_> = field(&s, 9).iter().map(|a| fields(a)).collect();
    assert_eq!(attrs.len(), 3);
    assert_eq!(field(&attrs[1], 1)[0], b"aai.duration_ms");
    let int = fields(&field(&attrs[1], 2)[0]);
    assert_eq!((int[0].0, int[0].2[0], int[0].2[1]), (3, 0xf4, 0x01));
    let status = fields(&field(&s, 15)[0]);
    assert_eq!(field(&status, 2)[0], b"TOOL_NOT_FOUND");
    assert_eq!(field(&status, 3)[0][0], 2);
    assert_eq!(field(&s, 16)[0], 0x301u32.to_le_bytes());
}

#[test]
fn varints_and_negative_ints_encode_like_protobuf() {
    let mut out = Vec::new();
    pb::varint(&mut out, 300);
    assert_eq!(out, [0xac, 0x02]);
    let mut out = Vec::new();
    key_value(&mut out, 1, "n", &Value::Int(-1));
    // int64 -1 is ten bytes of varint.
    assert_eq!(out.len(), 2 + 3 + 2 + 1 + 10);
}

#[test]
fn a_hanging_collector_drops_spans_and_never_holds_the_caller() {
    // A collector that takes the connection and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mut settings = Settings::new(Settings::traces_url(url.parse().unwrap()));
    settings.max_queue = 16;
    settings.max_batch = 1;
    settings.batch_delay = Duration::from_millis(10);
    settings.timeout = Duration::from_secs(60);
    settings.shutdown = Duration::from_millis(300);
    let telemetry = Telemetry::start(settings).unwrap();
    let incoming = Context::parse(TP, None).unwrap();
    let started = Instant::now();
    for _ in 0..1000 {
        let call = Call::start(Some(&telemetry), Some(&incoming));
        let child = call.child(EXECUTE, Kind::Client);
        call.end(child, Ok(()));
        call.finish(Err("TIMEOUT"));
    }
    // Bounds for "never waits on the stuck collector", with room for a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(telemetry.dropped() >= 1900, "{}", telemetry.dropped());
    let stopping = Instant::now();
    telemetry.shutdown();
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "{:?}",
        stopping.elapsed()
    );
    drop(listener);
}

#[test]
fn header_values_never_show() {
    let s = format!("{:?}", HeaderValue("Bearer s3cret".into()));
    assert!(!s.contains("s3cret"));
    assert!(header_allowed("Authorization") && header_allowed("x-api-key"));
    assert!(!header_allowed("Content-Type") && !header_allowed("bad header"));
}
