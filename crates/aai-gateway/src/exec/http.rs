//! The `http` executor (DESIGN §6) on reqwest, one client (connection pool) per gateway.
//!
//! URL: `baseUrl` + the tool's `path`, each `{name}` filled with the argument of that name,
//! percent-encoded as one path segment and removed from the arguments. The rest go to the
//! query string for GET, DELETE and HEAD (arrays as repeated keys, objects as JSON text,
//! nulls left out) and to a JSON body otherwise. Headers: `defaultHeaders`, then auth
//! (resolved by the pipeline, see `auth`), then the tool's `headers`.
//!
//! Only the origin of `baseUrl` is ever contacted: a redirect elsewhere is refused. Plain
//! http is allowed only for loopback (checked at load). Responses over 10 MiB are refused.
//! JSON responses become JSON results, anything else text.
//!
//! Status → error: 400 INVALID_PARAMS, 401 AUTH_REQUIRED, 403 AUTH_DENIED, 404 NOT_FOUND,
//! 429 RATE_LIMITED, 5xx SERVICE_UNAVAILABLE, other 4xx AUTOMATION_FAILED; the detail
//! quotes the start of the response body. 429 and 503 with a `Retry-After` the deadline
//! allows, and connections refused before anything was sent, are retried (config
//! `retries`); nothing that may have reached the app otherwise is.

use std::time::{Duration, Instant};

use aai_descriptor::{Executor, HttpMethod, ToolCall};
use reqwest::{Method, StatusCode, Url};
use serde_json::{Map, Value};

use super::{Execute, Request};
use crate::error::{Code, GatewayError};
use crate::net::{self, BodyError, Purpose};

/// Longest `Retry-After` worth waiting for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// Makes HTTP requests for web apps (through the shared client of `net`).
#[derive(Debug, Default)]
pub struct HttpExecutor;

impl Execute for HttpExecutor {
    async fn execute(&self, mut req: Request<'_>) -> Result<Value, super::Error> {
        let Executor::Http(http) = req.executor else {
            unreachable!("dispatched by executor type");
        };
        let ToolCall::Http {
            method,
            path,
            headers,
        } = &req.tool.call
        else {
            return Err(GatewayError::new(
                Code::AaiJsonInvalid,
                "this http tool has no `execution.path`",
            )
            .into());
        };
        let client = net::client(Purpose::Api).map_err(|e| {
            GatewayError::new(
                Code::AutomationFailed,
                format!("cannot start the HTTP client: {e}"),
            )
        })?;
        let mut args = match std::mem::take(&mut req.args) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let mut url = build_url(&http.base_url, path, &mut args, *method)?;
        let auth = req.auth.take().unwrap_or_default();
        if !auth.query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in &auth.query {
                pairs.append_pair(k, v.expose());
            }
        }
        let auth_headers: Vec<(String, String)> = auth
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_owned()))
            .collect();
        let header_map = header_map(
            http.default_headers
                .iter()
                .chain(&auth_headers)
                .chain(headers),
        )?;
        let body = (!matches!(
            method,
            HttpMethod::Get | HttpMethod::Delete | HttpMethod::Head
        ))
        .then(|| Value::Object(args).to_string());
        let deadline = Instant::now() + req.ctx.timeout;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut builder = client
                .request(reqwest_method(*method), url.clone())
                .headers(header_map.clone());
            if let Some(body) = &body {
                builder = builder
                    .header("content-type", "application/json")
                    .body(body.clone());
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            let sent = tokio::select! {
                r = builder.timeout(remaining).send() => r,
                () = req.ctx.cancel.cancelled() => {
                    return Err(GatewayError::new(Code::AutomationFailed, "the call was cancelled").into());
                }
            };
            let response = match sent {
                Ok(r) => r,
                Err(e) if e.is_timeout() => return Err(timeout(req.ctx.timeout).into()),
                Err(e)
                    if e.is_connect()
                        && attempt <= req.ctx.retries + 1
                        && remaining > Duration::from_millis(200) =>
                {
                    tracing::info!(
                        app = req.app,
                        "connection failed before sending; retrying: {}",
                        net::describe(&e)
                    );
                    tokio::time::sleep(backoff(attempt)).await;
                    continue;
                }
                Err(e) => return Err(transport_error(&e).into()),
            };
            let status = response.status();
            let retry_after = retry_after(&response);
            if matches!(
                status,
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
            ) && attempt <= req.ctx.retries
                && let Some(wait) = retry_after.filter(|w| Instant::now() + *w < deadline)
            {
                tracing::info!(app = req.app, %status, ?wait, "honouring Retry-After");
                tokio::time::sleep(wait).await;
                continue;
            }
            let is_json = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|t| t.contains("json"));
            let body = tokio::select! {
                b = read_body(response, req.ctx.timeout) => b?,
                () = tokio::time::sleep(deadline.saturating_duration_since(Instant::now())) => {
                    return Err(timeout(req.ctx.timeout).into());
                }
                () = req.ctx.cancel.cancelled() => {
                    return Err(GatewayError::new(Code::AutomationFailed, "the call was cancelled").into());
                }
            };
            let text = String::from_utf8_lossy(&body);
            if status.is_success() {
                if *method == HttpMethod::Head || body.is_empty() {
                    return Ok(Value::Null);
                }
                return Ok(if is_json {
                    serde_json::from_slice(&body)
                        .unwrap_or_else(|_| Value::String(text.into_owned()))
                } else {
                    Value::String(text.into_owned())
                });
            }
            let error = status_error(status, &text, retry_after);
            return Err(if status == StatusCode::UNAUTHORIZED {
                super::Error::Unauthorized(error)
            } else {
                error.into()
            });
        }
    }
}

/// Headers in order, a later one replacing an earlier one of the same name.
fn header_map<'a>(
    pairs: impl Iterator<Item = &'a (String, String)>,
) -> Result<reqwest::header::HeaderMap, GatewayError> {
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
            GatewayError::new(
                Code::AaiJsonInvalid,
                format!("`{k}` is not a valid header name"),
            )
        })?;
        let value = HeaderValue::from_str(v).map_err(|_| {
            GatewayError::new(
                Code::AaiJsonInvalid,
                format!("the value of header `{k}` is not valid"),
            )
        })?;
        map.insert(name, value);
    }
    Ok(map)
}

fn reqwest_method(m: HttpMethod) -> Method {
    match m {
        HttpMethod::Get => Method::GET,
        HttpMethod::Post => Method::POST,
        HttpMethod::Put => Method::PUT,
        HttpMethod::Patch => Method::PATCH,
        HttpMethod::Delete => Method::DELETE,
        HttpMethod::Head => Method::HEAD,
    }
}

/// `base` + `path` with `{name}` segments filled (and removed from `args`); the remaining
/// arguments in the query string for GET, DELETE and HEAD.
pub fn build_url(
    base: &str,
    path: &str,
    args: &mut Map<String, Value>,
    method: HttpMethod,
) -> Result<Url, GatewayError> {
    let mut filled = String::with_capacity(base.len() + path.len());
    filled.push_str(base.trim_end_matches('/'));
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        filled.push_str(&rest[..open]);
        let name = &rest[open + 1..open + close];
        let value = args.shift_remove(name).ok_or_else(|| {
            GatewayError::new(
                Code::InvalidParams,
                format!("missing argument `{name}` (it is part of the URL path)"),
            )
            .with("field", format!("/{name}"))
        })?;
        let text = scalar_text(&value).ok_or_else(|| {
            GatewayError::new(
                Code::InvalidParams,
                format!(
                    "argument `{name}` must be a string or a number (it is part of the URL path)"
                ),
            )
            .with("field", format!("/{name}"))
        })?;
        if text.is_empty() {
            return Err(GatewayError::new(
                Code::InvalidParams,
                format!("argument `{name}` must not be empty (it is part of the URL path)"),
            )
            .with("field", format!("/{name}")));
        }
        filled.push_str(&encode(&text));
        rest = &rest[open + close + 1..];
    }
    filled.push_str(rest);
    // `.` and `..` segments would be resolved away by URL normalization (encoded ones
    // too: the URL standard treats `%2e%2e` as `..`), moving the request out of the
    // API's path. No encoding survives that, so such a path is refused.
    let base_len = base.trim_end_matches('/').len();
    let added = filled[base_len..].split(['?', '#']).next().unwrap_or("");
    if added.split('/').any(is_dot_segment) {
        return Err(GatewayError::new(
            Code::InvalidParams,
            "the path arguments would make a `.` or `..` URL segment, which leaves the API's path; they are refused",
        ));
    }
    if matches!(
        method,
        HttpMethod::Get | HttpMethod::Delete | HttpMethod::Head
    ) {
        let mut query = String::new();
        for (k, v) in args.iter() {
            let values: Vec<String> = match v {
                Value::Null => continue,
                Value::Array(items) => items
                    .iter()
                    .map(|i| scalar_text(i).unwrap_or_else(|| i.to_string()))
                    .collect(),
                other => vec![scalar_text(other).unwrap_or_else(|| other.to_string())],
            };
            for value in values {
                query.push(if query.is_empty() { '?' } else { '&' });
                query.push_str(&encode(k));
                query.push('=');
                query.push_str(&encode(&value));
            }
        }
        if !query.is_empty() {
            if filled.contains('?') {
                query.replace_range(0..1, "&");
            }
            filled.push_str(&query);
        }
        args.clear();
    }
    let url = Url::parse(&filled).map_err(|e| {
        GatewayError::new(
            Code::AaiJsonInvalid,
            format!("the tool's URL is invalid: {e}"),
        )
    })?;
    // Whatever the template and the arguments, the request stays under `baseUrl`.
    if let Ok(base) = Url::parse(base) {
        let root = base.path().trim_end_matches('/');
        let inside = url.origin() == base.origin()
            && (url.path() == root
                || url.path().starts_with(&format!("{root}/"))
                || root.is_empty());
        if !inside {
            return Err(GatewayError::new(
                Code::InvalidParams,
                "the filled URL would leave the API's base URL; refused",
            ));
        }
    }
    Ok(url)
}

/// `.` or `..`, also percent-encoded (`%2e`, `.%2E`, …), as the URL standard reads them.
fn is_dot_segment(segment: &str) -> bool {
    let lower = segment.to_ascii_lowercase();
    let decoded = lower.replace("%2e", ".");
    decoded == "." || decoded == ".."
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Percent-encodes everything but the unreserved characters (RFC 3986).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100 * 2u64.pow(attempt.min(5)))
}

fn timeout(limit: Duration) -> GatewayError {
    GatewayError::new(
        Code::Timeout,
        format!("no response within {:.1} s", limit.as_secs_f64()),
    )
}

fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let secs: u64 = response
        .headers()
        .get("retry-after")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs)).filter(|d| *d <= MAX_RETRY_AFTER)
}

async fn read_body(response: reqwest::Response, limit: Duration) -> Result<Vec<u8>, GatewayError> {
    net::read_capped(response, net::MAX_API_BODY)
        .await
        .map_err(|e| match e {
            BodyError::TooLarge(_) | BodyError::Transport(_) => {
                GatewayError::new(Code::AutomationFailed, e.to_string())
            }
            BodyError::TimedOut => timeout(limit),
        })
}

fn transport_error(e: &reqwest::Error) -> GatewayError {
    let code = if e.is_connect() {
        Code::ServiceUnavailable
    } else {
        Code::AutomationFailed
    };
    GatewayError::new(code, net::describe(e))
}

fn status_error(status: StatusCode, body: &str, retry_after: Option<Duration>) -> GatewayError {
    let code = match status.as_u16() {
        400 | 422 => Code::InvalidParams,
        401 => Code::AuthRequired,
        403 => Code::AuthDenied,
        404 => Code::NotFound,
        429 => Code::RateLimited,
        500..=599 => Code::ServiceUnavailable,
        _ => Code::AutomationFailed,
    };
    let excerpt: String = body.trim().chars().take(300).collect();
    let mut detail = format!("HTTP {status}");
    if !excerpt.is_empty() {
        detail.push_str(&format!(": {excerpt}"));
    }
    let mut err = GatewayError::new(code, detail).with("httpStatus", status.as_u16());
    if let Some(wait) = retry_after {
        err = err.with("retryAfterSecs", wait.as_secs());
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn url(path: &str, args: Value, method: HttpMethod) -> (String, Value) {
        let mut map = args.as_object().unwrap().clone();
        let u = build_url("http://127.0.0.1:8080/api/", path, &mut map, method).unwrap();
        (u.to_string(), Value::Object(map))
    }

    #[test]
    fn path_segments_are_encoded_and_taken_from_the_arguments() {
        let (u, rest) = url(
            "/repos/{ns}/docs/{slug}",
            json!({"ns": "a b/c?d", "slug": 7, "x": 1}),
            HttpMethod::Post,
        );
        assert_eq!(u, "http://127.0.0.1:8080/api/repos/a%20b%2Fc%3Fd/docs/7");
        assert_eq!(rest, json!({"x": 1}));
    }

    #[test]
    fn get_and_delete_put_the_rest_in_the_query() {
        let (u, rest) = url(
            "/items/{id}",
            json!({"id": "é", "tag": ["a", "b&c"], "n": 2, "skip": null, "f": {"k": 1}}),
            HttpMethod::Delete,
        );
        assert_eq!(
            u,
            "http://127.0.0.1:8080/api/items/%C3%A9?tag=a&tag=b%26c&n=2&f=%7B%22k%22%3A1%7D"
        );
        assert_eq!(rest, json!({}));
    }

    #[test]
    fn dot_segments_never_climb_out_of_the_base_path() {
        let base = "https://api.example.com/api/v2";
        let attempt = |path: &str, args: Value| {
            let Value::Object(mut m) = args else { panic!() };
            build_url(base, path, &mut m, HttpMethod::Delete)
        };
        for args in [json!({"id": ".."}), json!({"id": "."})] {
            let e = attempt("/users/{id}/sessions", args).unwrap_err();
            assert_eq!(e.code, Code::InvalidParams, "{e}");
        }
        let e = attempt("/{a}/{b}/{c}", json!({"a": "..", "b": "..", "c": ".."})).unwrap_err();
        assert_eq!(e.code, Code::InvalidParams);
        // Two arguments that only together make `..`.
        let e = attempt("/files/{a}{b}", json!({"a": ".", "b": "."})).unwrap_err();
        assert_eq!(e.code, Code::InvalidParams);
        // Dots inside a segment, and encoded slashes, stay data under the base path.
        let ok = attempt("/files/{a}", json!({"a": "../etc/passwd"})).unwrap();
        assert_eq!(
            ok.as_str(),
            "https://api.example.com/api/v2/files/..%2Fetc%2Fpasswd"
        );
        let ok = attempt("/files/{a}", json!({"a": "a..b"})).unwrap();
        assert_eq!(ok.path(), "/api/v2/files/a..b");
        assert!(is_dot_segment("%2E%2e") && is_dot_segment(".%2E") && !is_dot_segment("..."));
    }

    #[test]
    fn path_arguments_must_be_present_and_scalar() {
        let mut args = json!({"id": {"no": 1}}).as_object().unwrap().clone();
        let e = build_url("http://x.test", "/i/{id}", &mut args, HttpMethod::Get).unwrap_err();
        assert_eq!(e.code, Code::InvalidParams);
        let mut args = Map::new();
        let e = build_url("http://x.test", "/i/{id}", &mut args, HttpMethod::Get).unwrap_err();
        assert!(e.detail.contains("missing argument `id`"));
    }
}
