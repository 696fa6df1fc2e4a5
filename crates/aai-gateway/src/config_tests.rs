//! Tests of `config.rs`.

use super::*;

fn parse(text: &str) -> Result<(Config, Vec<Diagnostic>), Vec<Diagnostic>> {
    Config::parse(text, Path::new("/home/u/.aai/config.json"))
}

#[test]
fn the_shared_store_is_read_strictly_and_never_shows_its_password() {
    let (c, warnings) = parse(
            r#"{"store": {"url": "postgres://aai:pw-s3cret@db:5432/aai?sslmode=require", "keyFile": "store.key", "poolSize": 4}}"#,
        )
        .unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let store = c.store.unwrap();
    assert_eq!(
        store.key_file.as_deref(),
        Some(Path::new("/home/u/.aai/store.key"))
    );
    assert_eq!(
        (store.pool_size, store.timeout),
        (4, Duration::from_secs(10))
    );
    assert_eq!(
        store.shown(),
        "postgres://aai:***@db:5432/aai?sslmode=require"
    );
    assert!(!format!("{store:?}").contains("pw-s3cret"));
    // A Unix socket folder as host.
    assert!(parse(r#"{"store": {"url": "postgresql://aai@%2Frun%2Fpostgresql/aai"}}"#).is_ok());
    let error = |text: &str| {
        let e = parse(text).unwrap_err();
        let all = e
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(!all.contains("pw-s3cret"), "{all}");
        all
    };
    assert!(error(r#"{"store": {}}"#).contains("/store"));
    assert!(
        error(r#"{"store": {"url": "mysql://aai:pw-s3cret@db/aai"}}"#)
            .contains("`mysql://aai:***@db/aai` is not a PostgreSQL URL")
    );
    assert!(
        error(r#"{"store": {"url": "postgres://db:5432"}}"#)
            .contains("must name its user and database")
    );
    assert!(
        error(r#"{"store": {"url": "postgres://aai:pw-s3cret@db/aai?sslmode=sometimes"}}"#)
            .contains("not a usable PostgreSQL URL")
    );
    assert!(
        error(r#"{"store": {"url": "postgres://a@db/aai", "poolSize": 0}}"#).contains("poolSize")
    );
    assert!(
        error(r#"{"store": {"url": "postgres://a@db/aai"}, "credentials": {"store": "file"}}"#)
            .contains("cannot both be set")
    );
}

#[test]
fn the_basic_example_loads() {
    let (c, d) = parse(
            r#"{"scanPaths":["~/.aai","extra"],"defaultTimeout":30,"logLevel":"info","enableWebUI":true,"httpPort":3000}"#,
        )
        .unwrap();
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(c.scan_paths[1], PathBuf::from("/home/u/.aai/extra"));
    assert_eq!(c.http_port, 3000);
}

#[test]
fn durations_are_bounded_and_never_panic() {
    for text in [
        r#"{"defaultTimeout": 1.5e300}"#,
        r#"{"defaultTimeout": 86401}"#,
        r#"{"scanInterval": 1e308}"#,
    ] {
        let errors = parse(text).unwrap_err();
        assert!(
            errors[0].to_string().contains("must be at most"),
            "{text}: {errors:?}"
        );
    }
    let (c, _) = parse(r#"{"defaultTimeout": 86400, "scanInterval": 0}"#).unwrap();
    assert_eq!(c.default_timeout, Duration::from_secs(86_400));
    assert_eq!(c.scan_interval, None);
}

#[test]
fn unknown_keys_warn_and_bad_values_name_key_and_file() {
    let (c, d) = parse(r#"{"exposure":"flat","scanIntervall":5}"#).unwrap();
    assert_eq!(c.exposure, Exposure::Flat);
    assert_eq!(
        d[0].to_string(),
        "/home/u/.aai/config.json: /scanIntervall: warning: unknown field `scanIntervall` is ignored; did you mean `scanInterval`?"
    );
    let errors = parse(
        r#"{"httpPort":70000,"exposure":"all","consent":{"mode":"yes"},"defaultTimeout":"30"}"#,
    )
    .unwrap_err();
    let lines: Vec<_> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "/home/u/.aai/config.json: /defaultTimeout: error: expected a number, found a string",
            "/home/u/.aai/config.json: /httpPort: error: `httpPort` must be a whole number from 1 to 65535, found 70000",
            "/home/u/.aai/config.json: /exposure: error: `all` is not a valid `exposure`; expected `progressive`, `search`, `flat`",
            "/home/u/.aai/config.json: /consent/mode: error: `yes` is not a valid `mode`; expected `prompt`, `allow`, `deny`",
        ]
    );
}

#[test]
fn rate_limits_are_read_strictly() {
    let (c, d) = parse(
            r#"{"rateLimits":{"perPerson":{"perMinute":120,"burst":20},
                "perApp":{"default":{"perMinute":600},"com.example.a":{"perMinute":6,"burst":1}}}}"#,
        )
        .unwrap();
    assert!(d.is_empty(), "{d:?}");
    let r = &c.rate_limits;
    assert_eq!(
        r.per_person,
        Some(Limit {
            per_minute: 120,
            burst: 20
        })
    );
    assert_eq!(r.app("com.example.a").unwrap().burst, 1);
    assert_eq!(
        r.app("other"),
        Some(Limit {
            per_minute: 600,
            burst: 600
        }),
        "burst defaults to perMinute"
    );
    assert!(Config::defaults(PathBuf::new()).rate_limits.is_empty());
    for (text, said) in [
        (
            r#"{"rateLimits":{"perPersn":{"perMinute":1}}}"#,
            "/rateLimits/perPersn: error: unknown field `perPersn`; expected `perPerson` or `perApp`",
        ),
        (
            r#"{"rateLimits":{"perPerson":{"perMinute":10,"brust":2}}}"#,
            "/rateLimits/perPerson/brust: error: unknown field `brust`",
        ),
        (
            r#"{"rateLimits":{"perPerson":{"burst":2}}}"#,
            "/rateLimits/perPerson: error: missing required field `perMinute`",
        ),
        (
            r#"{"rateLimits":{"perPerson":{"perMinute":0}}}"#,
            "`perMinute` must be a whole number from 1 to 600000, found 0",
        ),
        (
            r#"{"rateLimits":{"perPerson":{"perMinute":1.5}}}"#,
            "found 1.5",
        ),
        (
            r#"{"rateLimits":{"perApp":{"x":{"perMinute":1,"burst":100001}}}}"#,
            "/rateLimits/perApp/x/burst: error: `burst` must be a whole number from 1 to 100000",
        ),
        (
            r#"{"rateLimits":{"perApp":{"":{"perMinute":1}}}}"#,
            "is not an app id",
        ),
        (r#"{"rateLimits":{"perApp":[]}}"#, "found an array"),
        (
            r#"{"rateLimits":true}"#,
            "expected an object, found a boolean",
        ),
    ] {
        let errors = parse(text).unwrap_err();
        let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert!(shown.iter().any(|e| e.contains(said)), "{text}: {shown:?}");
    }
}

#[test]
fn missing_default_file_means_defaults_but_explicit_file_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.json");
    let (c, d) = Config::load(&file, false).unwrap();
    assert!(d.is_empty());
    assert_eq!(c.max_listed_apps, 50);
    let err = Config::load(&file, true).unwrap_err();
    assert!(err[0].message.starts_with("cannot read config:"), "{err:?}");
}

#[test]
fn telemetry_is_read_strictly() {
    let (c, d) = parse(r#"{}"#).unwrap();
    assert!(c.telemetry.is_none() && d.is_empty());
    let (c, d) = parse(
            r#"{"telemetry":{"otlp":{"endpoint":"https://otel.example.com/otlp/","headers":{"Authorization":"Bearer abc"},"serviceName":"team-gw","maxQueue":64,"batchDelayMs":20,"shutdownSeconds":1}}}"#,
        )
        .unwrap();
    assert!(d.is_empty(), "{d:?}");
    let t = c.telemetry.unwrap();
    assert_eq!(t.url.as_str(), "https://otel.example.com/otlp/v1/traces");
    assert_eq!(t.service_name, "team-gw");
    assert_eq!((t.max_queue, t.max_batch), (64, 512));
    assert_eq!(t.batch_delay, Duration::from_millis(20));
    assert_eq!(t.shutdown, Duration::from_secs(1));
    assert_eq!(t.headers[0].0, "Authorization");
    assert!(
        !format!("{t:?}").contains("abc"),
        "a header value is never shown"
    );
    let errors = |text: &str| -> Vec<String> {
        parse(text)
            .unwrap_err()
            .iter()
            .map(|d| d.to_string().replace("/home/u/.aai/config.json: ", ""))
            .collect()
    };
    assert_eq!(
        errors(r#"{"telemetry":{"otlp":{"endpoint":"http://c:4318","endpiont":1}}}"#),
        [
            "/telemetry/otlp/endpiont: error: unknown key `endpiont`; expected `endpoint`, `headers`, `serviceName`, `timeoutSeconds`, `maxQueue`, `maxBatch`, `batchDelayMs`, `shutdownSeconds`"
        ]
    );
    assert_eq!(
        errors(r#"{"telemetry":{"otlp":{}}}"#),
        ["/telemetry/otlp: error: missing required field `endpoint`"]
    );
    assert!(errors(r#"{"telemetry":{"otpl":{}}}"#)[0].contains("unknown key `otpl`"));
    assert!(errors(r#"{"telemetry":true}"#)[0].contains("expected an object"));
    assert!(
        errors(r#"{"telemetry":{"otlp":{"endpoint":"grpc://c:4317"}}}"#)[0]
            .contains("http or https")
    );
    assert!(
        errors(r#"{"telemetry":{"otlp":{"endpoint":"http://u:p@c:4318"}}}"#)[0]
            .contains("user name")
    );
    // A credential never goes over plain http off this machine, and never shows.
    let e = errors(
        r#"{"telemetry":{"otlp":{"endpoint":"http://collector:4318","headers":{"Authorization":"Bearer s3cr3t"}}}}"#,
    );
    assert!(e[0].contains("only over https"), "{e:?}");
    let e = errors(
        r#"{"telemetry":{"otlp":{"endpoint":"https://c","headers":{"Authorization":"Bearer s3cr3t\n","Content-Type":"x"}}}}"#,
    );
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e.iter().all(|l| !l.contains("s3cr3t")), "{e:?}");
    // `${NAME}` is read from the environment.
    let sink = Sink::new("t".to_owned());
    let v: Value = serde_json::from_str(
        r#"{"endpoint":"http://127.0.0.1:4318","headers":{"x-api-key":"${KEY}"}}"#,
    )
    .unwrap();
    let t = otlp_settings(&sink, &v, String::new(), &|k| {
        (k == "KEY").then(|| "k3y".to_owned())
    })
    .unwrap();
    assert_eq!(t.headers[0].1.0, "k3y");
    let t = otlp_settings(&sink, &v, String::new(), &|_| None);
    assert!(t.is_some());
    assert!(sink.into_vec()[0].message.contains("`KEY` is not set"));
}
