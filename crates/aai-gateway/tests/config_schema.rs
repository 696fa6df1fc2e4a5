//! `schema/config.schema.json` cannot drift from the config reader: it names every key
//! `docs/config.md` documents, and it accepts or refuses each sample exactly when
//! `Config::parse` does.
//!
//! Run: `cargo test -p aai-gateway --test config_schema`

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn schema() -> Value {
    let text = std::fs::read_to_string(root().join("schema/config.schema.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_documented_key_is_in_the_schema() {
    let schema = schema();
    let docs = std::fs::read_to_string(root().join("docs/config.md")).unwrap();
    let mut keys = 0;
    // The key table: from its `| key |` header to the first line that is not a row.
    let table = docs
        .lines()
        .skip_while(|l| !l.starts_with("| key |"))
        .take_while(|l| l.starts_with('|'));
    for line in table.filter(|l| l.starts_with("| `")) {
        let key = line.split('`').nth(1).unwrap();
        let mut at = &schema;
        for part in key.split('.') {
            at = if part.starts_with('<') {
                &at["additionalProperties"]
            } else {
                &at["properties"][part]
            };
            assert!(!at.is_null(), "`{key}` is documented but not in the schema");
        }
        // Every key the schema takes is read by the gateway: none is documented as not in
        // effect (a stale "no" once hid that the team's sign-in works).
        let effect = line
            .trim_end_matches('|')
            .rsplit('|')
            .next()
            .unwrap()
            .trim();
        assert_eq!(effect, "yes", "`{key}` is documented as not in effect");
        keys += 1;
    }
    assert!(keys >= 20, "only {keys} documented keys found");
}

#[test]
fn the_schema_accepts_what_the_gateway_accepts() {
    let validator = jsonschema::draft7::new(&schema()).unwrap();
    let samples = [
        json!({}),
        json!({"consent": {"mode": "allow", "waitSeconds": 30}}),
        json!({"$schema": "https://raw.githubusercontent.com/aai-protocol/aai-gateway/main/schema/config.schema.json",
               "scanPaths": ["~/apps"], "defaultTimeout": 2.5, "logLevel": "debug", "httpPort": 8080,
               "exposure": "search", "errors": "result", "retries": 0, "history": {"days": 7, "rows": 1000},
               "batch": {"maxCalls": 1000, "concurrency": 1}, "credentials": {"store": "file"},
               "apps": {"com.example.a": {"consent": "deny", "cwd": "/tmp", "clientId": "x"}}}),
        json!({"httpPort": 0}),
        json!({"httpPort": "80"}),
        json!({"batch": {"concurrency": 0}}),
        json!({"batch": {"maxCalls": 1001}}),
        json!({"consent": {"mode": "sometimes"}}),
        json!({"logLevel": "loud"}),
        json!({"retries": 11}),
        json!({"history": {"rows": 99}}),
        json!({"exposure": "all"}),
        json!({"store": {"url": "postgres://aai@127.0.0.1:5432/aai", "keyFile": "/etc/aai/key",
                         "poolSize": 4, "connectTimeoutSeconds": 3, "timeoutSeconds": 20}}),
        json!({"store": {"url": "postgresql://aai@%2Frun%2Fpostgresql/aai"}}),
        json!({"store": {}}),
        json!({"store": {"url": "mysql://aai@h/db"}}),
        json!({"store": {"url": "postgres://aai@h/db", "poolSize": 0}}),
        json!({"store": {"url": "postgres://aai@h/db", "timeoutSeconds": 601}}),
        json!({"telemetry": {"otlp": {"endpoint": "http://127.0.0.1:4318",
               "headers": {"Authorization": "Bearer x"}, "serviceName": "gw", "timeoutSeconds": 5,
               "maxQueue": 100, "maxBatch": 10, "batchDelayMs": 50, "shutdownSeconds": 0}}}),
        json!({"telemetry": {}}),
        json!({"telemetry": {"otlp": {}}}),
        json!({"telemetry": {"otlp": {"endpoint": "ftp://c:4318"}}}),
        json!({"telemetry": {"otlp": {"endpoint": "http://u:p@c:4318"}}}),
        json!({"telemetry": {"otlp": {"endpoint": "http://c:4318", "endpiont": "x"}}}),
        json!({"telemetry": {"otlp": {"endpoint": "http://c:4318", "maxQueue": 1}}}),
        json!({"telemetry": {"otpl": {"endpoint": "http://c:4318"}}}),
        json!({"telemetry": {"otlp": {"endpoint": "http://c:4318", "headers": {"x-key": 1}}}}),
        json!({"web": {"auth": {"issuer": "https://id.example.com", "audience": "https://gw.example.com/mcp",
                                "scopes": ["mcp"], "adminScope": "ops", "clientId": "aai-ui",
                                "scopeAccess": {"notes": {"apps": {"allow": ["com.example.notes"]}},
                                                "all": {"tools": {"deny": ["com.example.notes:purge"]}}}}}}),
        json!({"web": {"auth": {"audience": "https://gw.example.com/mcp"}}}),
        json!({"web": {"auth": {"issuer": "ftp://id.example.com", "audience": "https://gw.example.com/mcp"}}}),
        json!({"web": {"auth": {"issuer": "https://id.example.com", "audience": "https://gw.example.com/mcp",
                                "scopeAccess": {"notes": 5}}}}),
        json!({"rateLimits": {"perPerson": {"perMinute": 120, "burst": 20},
               "perApp": {"default": {"perMinute": 600}, "com.example.a": {"perMinute": 6, "burst": 1}}}}),
        json!({"rateLimits": {}}),
        json!({"rateLimits": {"perPersn": {"perMinute": 1}}}),
        json!({"rateLimits": {"perPerson": {"perMinute": 1, "brust": 1}}}),
        json!({"rateLimits": {"perPerson": {"burst": 1}}}),
        json!({"rateLimits": {"perPerson": {"perMinute": 0}}}),
        json!({"rateLimits": {"perPerson": {"perMinute": 600001}}}),
        json!({"rateLimits": {"perApp": {"x": {"perMinute": 1, "burst": 100001}}}}),
        json!({"rateLimits": {"perApp": {"default": {"perMinute": 1.5}}}}),
        json!({"rateLimits": {"perApp": {"": {"perMinute": 1}}}}),
        json!({"rateLimits": {"perApp": {"has space": {"perMinute": 1}}}}),
        json!({"apps": {"com.example.a": {"tools": {"send": {"name": "send_mail", "description": "d",
               "readOnly": false, "fixed": {"from": "me@example.com"}, "defaults": {"cc": []}}}}}}),
        json!({"apps": {"com.example.a": {"tools": {"send": {"nmae": "x"}}}}}),
        json!({"apps": {"com.example.a": {"tools": {"send": {"name": "two words"}}}}}),
        json!({"apps": {"com.example.a": {"tools": {"send": {"fixed": ["from"]}}}}}),
        json!({"apps": {"com.example.a": {"tools": {"send": {"readOnly": "yes"}}}}}),
        json!({"apps": {"com.example.a": {"tools": []}}}),
    ];
    for sample in samples {
        let gateway = aai_gateway::testing::config::Config::parse(
            &sample.to_string(),
            Path::new("config.json"),
        )
        .is_ok();
        assert_eq!(validator.is_valid(&sample), gateway, "{sample}");
    }
}
