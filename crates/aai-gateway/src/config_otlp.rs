//! `telemetry.otlp` in `config.json`: where traces go, checked strictly.

use std::time::Duration;

use serde_json::Value;

use aai_descriptor::Sink;
use aai_descriptor::read::{Obj, type_name};

use super::{integer, strict_keys};

/// `telemetry.otlp`: `endpoint` (required: an http(s) URL without user or fragment;
/// plain http carries no `headers` unless it goes to this machine), `headers` (values
/// literal or one `${NAME}` of the gateway's environment), `serviceName`,
/// `timeoutSeconds`, `maxQueue`, `maxBatch`, `batchDelayMs`, `shutdownSeconds`. Every
/// key outside these is an error: a typo must not leave traces silently off.
pub(super) fn otlp_settings(
    sink: &Sink,
    value: &Value,
    at: String,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<crate::telemetry::Settings> {
    use crate::telemetry::{HeaderValue, Settings};
    const KEYS: &[&str] = &[
        "endpoint",
        "headers",
        "serviceName",
        "timeoutSeconds",
        "maxQueue",
        "maxBatch",
        "batchDelayMs",
        "shutdownSeconds",
    ];
    let known = strict_keys(sink, value, &at, KEYS);
    let mut otlp = Obj::new(sink, value, at)?;
    otlp.allow_unknown();
    if !known {
        return None;
    }
    let endpoint = otlp.req_text("endpoint")?;
    let url = match reqwest::Url::parse(endpoint) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => u,
        _ => {
            sink.error(
                otlp.at("endpoint"),
                "`endpoint` must be an http or https URL (the collector's OTLP/HTTP base, such as http://127.0.0.1:4318)",
            );
            return None;
        }
    };
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        sink.error(
            otlp.at("endpoint"),
            "`endpoint` must not carry a user name, password or fragment; give credentials in `headers`",
        );
        return None;
    }
    let mut settings = Settings::new(Settings::traces_url(url.clone()));
    if let Some(headers) = otlp.opt_obj("headers") {
        let at = headers.pointer().to_owned();
        for (name, value) in headers.entries() {
            let pointer = aai_descriptor::diagnostic::join_pointer(&at, name);
            if !crate::telemetry::header_allowed(name) {
                sink.error(
                    &pointer,
                    format!("`{name}` is not a header the exporter may send"),
                );
                continue;
            }
            let Value::String(text) = value else {
                sink.error(
                    &pointer,
                    format!("expected a string, found {}", type_name(value)),
                );
                continue;
            };
            let text = match text.strip_prefix("${").and_then(|t| t.strip_suffix('}')) {
                Some(var) => match env(var) {
                    Some(v) => v,
                    None => {
                        sink.error(
                            &pointer,
                            format!("the environment variable `{var}` is not set"),
                        );
                        continue;
                    }
                },
                None => text.clone(),
            };
            // The value is a secret: the error never shows it.
            if reqwest::header::HeaderValue::from_str(&text).is_err() {
                sink.error(&pointer, "the value is not a valid HTTP header value");
                continue;
            }
            settings.headers.push((name.clone(), HeaderValue(text)));
        }
        let loopback = crate::net::check_fetchable(&url).is_ok();
        if !settings.headers.is_empty() && !loopback {
            sink.error(
                otlp.at("endpoint"),
                "`headers` are sent only over https (or plain http to this machine): they usually carry a credential",
            );
        }
    }
    if let Some(name) = otlp.opt_text("serviceName") {
        settings.service_name = name.to_owned();
    }
    if let Some(n) = integer(&mut otlp, "timeoutSeconds", 1, 60) {
        settings.timeout = Duration::from_secs(n);
    }
    if let Some(n) = integer(&mut otlp, "maxQueue", 16, 1_000_000) {
        settings.max_queue = n as usize;
    }
    if let Some(n) = integer(&mut otlp, "maxBatch", 1, 10_000) {
        settings.max_batch = n as usize;
    }
    if let Some(n) = integer(&mut otlp, "batchDelayMs", 10, 60_000) {
        settings.batch_delay = Duration::from_millis(n);
    }
    if let Some(n) = integer(&mut otlp, "shutdownSeconds", 0, 30) {
        settings.shutdown = Duration::from_secs(n);
    }
    Some(settings)
}
