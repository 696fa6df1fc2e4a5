//! The executor through `execute`, as the pipeline calls it, against an object served on
//! the other end of a peer-to-peer connection (a socket pair, no bus daemon).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use aai_descriptor::{Bus, Dbus, DbusOutput, Executor, Schema, Tool, ToolCall};
use serde_json::{Value as Json, json};
use tokio_util::sync::CancellationToken;
use zbus::zvariant::OwnedValue;
use zbus::{Connection, Guid, connection, fdo, interface};

use super::DbusExecutor;
use crate::error::{Code, GatewayError};
use crate::exec::{CallContext, Execute, Request};

const SERVICE: &str = "org.example.Test";
const PATH: &str = "/org/example/Test";
const IFACE: &str = "org.example.Test";

/// An app's error with its own name.
#[derive(Debug, zbus::DBusError)]
#[zbus(prefix = "org.example.Test.Error")]
enum AppError {
    #[zbus(error)]
    ZBus(zbus::Error),
    Jammed(String),
}

/// The app's object. It counts the calls of `Describe` that reached it.
struct TestApp {
    described: Arc<AtomicUsize>,
}

#[interface(name = "org.example.Test")]
impl TestApp {
    /// Answers with what arrived, changed so the reply shows the call went through; the
    /// last value is the D-Bus type of each hint as it arrived.
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::type_complexity)]
    async fn describe(
        &self,
        name: String,
        count: i32,
        limit: u32,
        loud: bool,
        ratio: f64,
        tags: Vec<String>,
        hints: HashMap<String, OwnedValue>,
    ) -> (
        String,
        i32,
        u32,
        bool,
        f64,
        Vec<String>,
        HashMap<String, OwnedValue>,
        HashMap<String, String>,
    ) {
        self.described.fetch_add(1, Ordering::SeqCst);
        let kinds = hints
            .iter()
            .map(|(k, v)| (k.clone(), v.value_signature().to_string()))
            .collect();
        (
            format!("hello {name}"),
            count * 2,
            limit + 1,
            !loud,
            ratio / 2.0,
            tags.into_iter().rev().collect(),
            hints,
            kinds,
        )
    }

    /// A string reply that holds JSON.
    async fn report(&self) -> String {
        r#"{"volume": 0.5, "muted": false}"#.to_owned()
    }

    /// Fails the way `how` says, with a standard error.
    async fn fail(&self, how: String) -> fdo::Result<()> {
        Err(match how.as_str() {
            "denied" => fdo::Error::AccessDenied("the user said no".to_owned()),
            "invalid" => fdo::Error::InvalidArgs("volume too high".to_owned()),
            _ => fdo::Error::Failed("it broke".to_owned()),
        })
    }

    /// Fails with the app's own error.
    async fn jam(&self) -> Result<(), AppError> {
        Err(AppError::Jammed("the tray is stuck".to_owned()))
    }

    /// Never answers.
    async fn hang(&self) {
        std::future::pending::<()>().await;
    }
}

/// An executor whose buses are a peer-to-peer connection to a served `TestApp`; the
/// server's connection must live as long as the test.
async fn serve() -> (DbusExecutor, Connection, Arc<AtomicUsize>) {
    let described = Arc::new(AtomicUsize::new(0));
    let app = TestApp {
        described: described.clone(),
    };
    let (ours, theirs) = tokio::net::UnixStream::pair().expect("a socket pair");
    let server = connection::Builder::unix_stream(theirs)
        .server(Guid::generate())
        .expect("a GUID")
        .p2p()
        .serve_at(PATH, app)
        .expect("the object")
        .build();
    let client = connection::Builder::unix_stream(ours).p2p().build();
    let (server, client) = tokio::try_join!(server, client).expect("the handshake");
    assert!(!client.is_bus());
    (DbusExecutor::over(client), server, described)
}

fn target(bus: Bus) -> Executor {
    Executor::Dbus(Dbus {
        bus,
        service: SERVICE.to_owned(),
        object_path: PATH.to_owned(),
        interface: IFACE.to_owned(),
    })
}

fn method(name: &str, interface: Option<&str>, output: DbusOutput, properties: Json) -> Tool {
    Tool {
        name: name.to_lowercase(),
        description: String::new(),
        parameters: Schema::compile(&json!({"type": "object", "properties": properties}))
            .expect("a schema"),
        returns: None,
        timeout: None,
        read_only: false,
        undo: None,
        call: ToolCall::DbusMethod {
            method: name.to_owned(),
            interface: interface.map(str::to_owned),
            output,
        },
        overridden: None,
    }
}

/// One call as the pipeline makes it.
async fn run(
    exec: &DbusExecutor,
    executor: &Executor,
    tool: &Tool,
    args: Json,
    timeout: Duration,
    cancel: CancellationToken,
) -> Result<Json, GatewayError> {
    exec.execute(Request {
        app: "test",
        executor,
        base_dir: Path::new("."),
        tool,
        args,
        auth: None,
        who: crate::identity::Who::Shared,
        secrets: Vec::new(),
        ctx: CallContext {
            timeout,
            cancel,
            progress: None,
            retries: 0,
            permission: None,
            cwd: None,
            upstream: None,
            trace: None,
        },
    })
    .await
    .map_err(GatewayError::from)
}

async fn call(exec: &DbusExecutor, tool: &Tool, args: Json) -> Result<Json, GatewayError> {
    let executor = target(Bus::Session);
    run(
        exec,
        &executor,
        tool,
        args,
        Duration::from_secs(5),
        CancellationToken::new(),
    )
    .await
}

/// `(code, detail, data)` of an error.
fn parts(e: GatewayError) -> (Code, String, Json) {
    let data = e.extra.map_or(Json::Null, |m| Json::Object(*m));
    (e.code, e.detail, data)
}

fn describe_tool() -> Tool {
    method(
        "Describe",
        None,
        DbusOutput::Json,
        json!({"name": {}, "count": {}, "limit": {}, "loud": {}, "ratio": {}, "tags": {}, "hints": {}}),
    )
}

fn describe_args() -> Json {
    json!({
        "name": "Ada",
        "count": -5,
        "limit": 4_000_000_000u32,
        "loud": true,
        "ratio": 1.5,
        "tags": ["a", "b", "c"],
        "hints": {
            "urgency": {"$type": "y", "value": 2},
            "category": "im",
            "n": 7,
            "scale": 0.25,
            "list": ["x", "y"],
            "flag": true,
        },
    })
}

fn describe_reply() -> Json {
    json!([
        "hello Ada",
        -10,
        4_000_000_001u32,
        false,
        0.75,
        ["c", "b", "a"],
        {"urgency": 2, "category": "im", "n": 7, "scale": 0.25, "list": ["x", "y"], "flag": true},
        {"urgency": "y", "category": "s", "n": "i", "scale": "d", "list": "as", "flag": "b"},
    ])
}

#[tokio::test]
async fn arguments_convert_to_their_dbus_types_and_the_reply_back_to_json() {
    let (exec, _server, described) = serve().await;
    let tool = describe_tool();
    let reply = call(&exec, &tool, describe_args()).await.expect("a reply");
    assert_eq!(reply, describe_reply());
    assert_eq!(described.load(Ordering::SeqCst), 1);

    // Argument names match with letter case and `_` ignored; the system bus is the same peer.
    let mut args = describe_args();
    let object = args.as_object_mut().expect("an object");
    let name = object.shift_remove("name").expect("name");
    object.insert("NA_ME".to_owned(), name);
    let system = target(Bus::System);
    let again = run(
        &exec,
        &system,
        &tool,
        args,
        Duration::from_secs(5),
        CancellationToken::new(),
    )
    .await
    .expect("a reply");
    assert_eq!(again, describe_reply());
    assert_eq!(described.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_string_reply_holding_json_is_parsed_unless_the_tool_wants_text() {
    let (exec, _server, _) = serve().await;
    let as_json = method("Report", None, DbusOutput::Json, json!({}));
    assert_eq!(
        call(&exec, &as_json, json!({})).await.expect("a reply"),
        json!({"volume": 0.5, "muted": false})
    );
    let as_text = method("Report", None, DbusOutput::String, json!({}));
    assert_eq!(
        call(&exec, &as_text, json!({})).await.expect("a reply"),
        json!(r#"{"volume": 0.5, "muted": false}"#)
    );
}

#[tokio::test]
async fn a_missing_method_or_interface_is_named_with_what_is_there() {
    let (exec, _server, described) = serve().await;
    let tool = method("Explode", None, DbusOutput::Json, json!({}));
    let (code, detail, data) = parts(call(&exec, &tool, json!({})).await.unwrap_err());
    assert_eq!(code, Code::AutomationFailed);
    assert_eq!(
        detail,
        "`org.example.Test` at `/org/example/Test` has no method `Explode` on `org.example.Test`; \
         it has: Describe, Fail, Hang, Jam, Report"
    );
    assert_eq!(data, Json::Null);

    let elsewhere = method(
        "Describe",
        Some("org.example.Other"),
        DbusOutput::Json,
        json!({}),
    );
    let (code, detail, _) = parts(call(&exec, &elsewhere, describe_args()).await.unwrap_err());
    assert_eq!(code, Code::AutomationFailed);
    assert_eq!(
        detail,
        "`org.example.Test` at `/org/example/Test` has no method `Describe` on `org.example.Other` \
         (the interface is not there)"
    );
    assert_eq!(described.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn dbus_error_replies_map_to_the_gateway_codes() {
    let (exec, _server, _) = serve().await;
    // The JSON key is not the method's argument name: the tool's property order fills it.
    let tool = method(
        "Fail",
        None,
        DbusOutput::Json,
        json!({"reason": {"type": "string"}}),
    );
    let cases = [
        (
            "denied",
            Code::PermissionDenied,
            "org.freedesktop.DBus.Error.AccessDenied",
            "the user said no",
        ),
        (
            "invalid",
            Code::InvalidParams,
            "org.freedesktop.DBus.Error.InvalidArgs",
            "volume too high",
        ),
        (
            "failed",
            Code::AutomationFailed,
            "org.freedesktop.DBus.Error.Failed",
            "it broke",
        ),
    ];
    for (how, want, name, text) in cases {
        let (code, detail, data) = parts(
            call(&exec, &tool, json!({"reason": how}))
                .await
                .unwrap_err(),
        );
        assert_eq!(code, want, "{how}");
        assert_eq!(
            detail,
            format!("org.example.Test.Fail failed: {name}: {text}"),
            "{how}"
        );
        assert_eq!(data, json!({"dbusError": name}), "{how}");
    }

    // An app's own error name is kept.
    let jam = method("Jam", None, DbusOutput::Json, json!({}));
    let (code, detail, data) = parts(call(&exec, &jam, json!({})).await.unwrap_err());
    assert_eq!(code, Code::AutomationFailed);
    assert_eq!(
        detail,
        "org.example.Test.Jam failed: org.example.Test.Error.Jammed: the tray is stuck"
    );
    assert_eq!(data, json!({"dbusError": "org.example.Test.Error.Jammed"}));
}

#[tokio::test]
async fn a_wrong_argument_type_is_refused_before_anything_is_sent() {
    let (exec, _server, described) = serve().await;
    let tool = describe_tool();
    let wrong = |key: &str, value: Json| {
        let mut args = describe_args();
        args[key] = value;
        args
    };
    let cases = [
        (
            wrong("count", json!("seven")),
            "argument `count` must be a D-Bus `i` (32-bit integer), but a JSON string was given",
            "/count",
        ),
        (
            wrong("limit", json!(-1)),
            "argument `limit` is out of range for D-Bus `u` (unsigned 32-bit integer) (0 to 4294967295)",
            "/limit",
        ),
        (
            wrong("tags", json!(["a", 2])),
            "argument `tags[1]` must be a D-Bus `s` (string), but a JSON number was given",
            "/tags",
        ),
        (
            wrong("hints", json!(["not", "a", "dict"])),
            "argument `hints` must be a D-Bus `a{sv}` (dict (JSON object)), but a JSON array was given",
            "/hints",
        ),
    ];
    for (args, want, field) in cases {
        let (code, detail, data) = parts(call(&exec, &tool, args).await.unwrap_err());
        assert_eq!(code, Code::InvalidParams, "{want}");
        assert_eq!(detail, want);
        assert_eq!(data, json!({"field": field}), "{want}");
    }
    assert_eq!(
        described.load(Ordering::SeqCst),
        0,
        "nothing reached the app"
    );
}

#[tokio::test]
async fn a_method_that_never_answers_ends_at_the_timeout_or_on_cancel() {
    let (exec, _server, described) = serve().await;
    let hang = method("Hang", None, DbusOutput::Json, json!({}));
    let executor = target(Bus::Session);

    let started = Instant::now();
    let result = run(
        &exec,
        &executor,
        &hang,
        json!({}),
        Duration::from_millis(300),
        CancellationToken::new(),
    )
    .await;
    let took = started.elapsed();
    let (code, detail, _) = parts(result.unwrap_err());
    assert_eq!(code, Code::Timeout);
    assert_eq!(detail, "`org.example.Test` did not reply within 0.3 s");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(10),
        "{took:?}"
    );

    let cancel = CancellationToken::new();
    let later = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        later.cancel();
    });
    let started = Instant::now();
    let result = run(
        &exec,
        &executor,
        &hang,
        json!({}),
        Duration::from_secs(30),
        cancel,
    )
    .await;
    let (code, detail, _) = parts(result.unwrap_err());
    assert_eq!(code, Code::AutomationFailed);
    assert_eq!(detail, "the call was cancelled");
    assert!(started.elapsed() < Duration::from_secs(10));

    // The calls left hanging do not hold up the next one.
    let reply = call(&exec, &describe_tool(), describe_args())
        .await
        .expect("a reply");
    assert_eq!(reply, describe_reply());
    assert_eq!(described.load(Ordering::SeqCst), 1);
}
