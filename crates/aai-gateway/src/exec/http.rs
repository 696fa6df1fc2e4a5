//! The `http` executor (docs/web.md, Requests) on reqwest, one client (connection pool)
//! per gateway.
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

/// How an HTTP call failed, in HTTP's terms. `From<Error> for GatewayError` below is the
/// one place these get a wire code (the status table in this module's docs).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The tool has no `execution.path`.
    #[error("this http tool has no `execution.path`")]
    NoPath,
    /// The shared client could not be built.
    #[error("cannot start the HTTP client: {0}")]
    Client(#[from] net::Error),
    /// A header name of the binding is not valid HTTP.
    #[error("`{0}` is not a valid header name")]
    HeaderName(String),
    /// A header value (after filling) is not valid HTTP.
    #[error("the value of header `{0}` is not valid")]
    HeaderValue(String),
    /// Base URL + path do not make a URL.
    #[error("the tool's URL is invalid: {0}")]
    Url(url::ParseError),
    /// The filled URL is not under `baseUrl`.
    #[error("the filled URL would leave the API's base URL; refused")]
    LeavesBase,
    /// A `{name}` of the path has no argument.
    #[error("missing argument `{0}` (it is part of the URL path)")]
    PathMissing(String),
    /// A path argument is not a string or number.
    #[error("argument `{0}` must be a string or a number (it is part of the URL path)")]
    PathNotScalar(String),
    /// A path argument is empty.
    #[error("argument `{0}` must not be empty (it is part of the URL path)")]
    PathEmpty(String),
    /// The path arguments make a `.` or `..` segment.
    #[error(
        "the path arguments would make a `.` or `..` URL segment, which leaves the API's path; they are refused"
    )]
    DotSegment,
    /// A header argument is not a scalar.
    #[error(
        "argument `{param}` must be a string, number or boolean (it is sent in the `{header}` header)"
    )]
    HeaderNotScalar {
        /// The argument.
        param: String,
        /// The header it fills.
        header: String,
    },
    /// A header argument holds a line break or NUL.
    #[error(
        "argument `{param}` must not contain line breaks (it is sent in the `{header}` header)"
    )]
    HeaderLineBreak {
        /// The argument.
        param: String,
        /// The header it fills.
        header: String,
    },
    /// The client cancelled the call.
    #[error("the call was cancelled")]
    Cancelled,
    /// No whole response within the call's time.
    #[error("no response within {:.1} s", .0.as_secs_f64())]
    TimedOut(Duration),
    /// The connection failed (`connect`: before anything was sent).
    #[error("{detail}")]
    Transport {
        /// What failed, from `net::describe`.
        detail: String,
        /// The connection could not be made.
        connect: bool,
    },
    /// The response body could not be read whole (too large, or the connection failed).
    #[error("{0}")]
    Body(BodyError),
    /// The service answered with an error status.
    #[error("HTTP {status}{}", excerpt_suffix(.excerpt))]
    Status {
        /// The status.
        status: StatusCode,
        /// The start of the response body.
        excerpt: String,
        /// The `Retry-After` it sent, when usable.
        retry_after: Option<Duration>,
    },
}

fn excerpt_suffix(excerpt: &str) -> String {
    if excerpt.is_empty() {
        String::new()
    } else {
        format!(": {excerpt}")
    }
}

impl Error {
    /// The service refused the credential the request carried (401).
    pub fn unauthorized(&self) -> bool {
        matches!(self, Error::Status { status, .. } if *status == StatusCode::UNAUTHORIZED)
    }

    /// The argument a failure is about (INVALID_PARAMS's `field`).
    fn field(&self) -> Option<&str> {
        match self {
            Error::PathMissing(name) | Error::PathNotScalar(name) | Error::PathEmpty(name) => {
                Some(name)
            }
            Error::HeaderNotScalar { param, .. } | Error::HeaderLineBreak { param, .. } => {
                Some(param)
            }
            _ => None,
        }
    }
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match &e {
            Error::NoPath | Error::HeaderName(_) | Error::HeaderValue(_) | Error::Url(_) => {
                Code::AaiJsonInvalid
            }
            Error::LeavesBase
            | Error::PathMissing(_)
            | Error::PathNotScalar(_)
            | Error::PathEmpty(_)
            | Error::DotSegment
            | Error::HeaderNotScalar { .. }
            | Error::HeaderLineBreak { .. } => Code::InvalidParams,
            Error::TimedOut(_) => Code::Timeout,
            Error::Transport { connect: true, .. } => Code::ServiceUnavailable,
            Error::Status { status, .. } => match status.as_u16() {
                400 | 422 => Code::InvalidParams,
                401 => Code::AuthRequired,
                403 => Code::AuthDenied,
                404 => Code::NotFound,
                429 => Code::RateLimited,
                500..=599 => Code::ServiceUnavailable,
                _ => Code::AutomationFailed,
            },
            Error::Client(_) | Error::Cancelled | Error::Transport { .. } | Error::Body(_) => {
                Code::AutomationFailed
            }
        };
        let mut wire = GatewayError::new(code, e.to_string());
        if let Some(field) = e.field() {
            wire = wire.with("field", format!("/{field}"));
        }
        if let Error::Status {
            status,
            retry_after,
            ..
        } = &e
        {
            wire = wire.with("httpStatus", status.as_u16());
            if let Some(wait) = retry_after {
                wire = wire.with("retryAfterSecs", wait.as_secs());
            }
        }
        wire
    }
}

/// Longest `Retry-After` worth waiting for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// Makes HTTP requests for web apps (through the shared client of `net`).
#[derive(Debug, Default)]
pub(crate) struct HttpExecutor;

impl Execute for HttpExecutor {
    async fn execute(&self, mut req: Request<'_>) -> Result<Value, super::Error> {
        let Executor::Http(http) = req.executor else {
            unreachable!("dispatched by executor type");
        };
        let ToolCall::Http {
            method,
            path,
            headers,
            query,
            body,
        } = &req.tool.call
        else {
            return Err(Error::NoPath.into());
        };
        let client = net::client(Purpose::Api).map_err(Error::from)?;
        let args = match std::mem::take(&mut req.args) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let wire = Wire::new(
            &http.base_url,
            &Binding {
                method: *method,
                path,
                headers,
                query,
                body: body.as_deref(),
            },
            args,
        )?;
        let mut url = wire.url;
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
        let mut header_map = header_map(
            http.default_headers
                .iter()
                .chain(&auth_headers)
                .chain(&wire.headers),
        )?;
        // The trace context goes to every web app: it names a trace, nothing else.
        if let Some(trace) = &req.ctx.trace {
            trace_headers(&mut header_map, trace);
        }
        let sent = Sent {
            method: *method,
            url,
            headers: header_map,
            body: wire.body.map(|b| b.to_string()),
        };
        Ok(sent.send(client, &req).await?)
    }
}

/// One request as it goes out, sent again after a failed connection or a `Retry-After`.
struct Sent {
    method: HttpMethod,
    url: Url,
    headers: reqwest::header::HeaderMap,
    body: Option<String>,
}

impl Sent {
    /// Sends within the call's deadline, retrying what may be retried (a connection
    /// that failed before anything was sent; 429 and 503 with a `Retry-After` that
    /// fits), and reads the answer.
    async fn send(&self, client: &reqwest::Client, req: &Request<'_>) -> Result<Value, Error> {
        let deadline = Instant::now() + req.ctx.timeout;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut builder = client
                .request(reqwest_method(self.method), self.url.clone())
                .headers(self.headers.clone());
            if let Some(body) = &self.body {
                builder = builder
                    .header("content-type", "application/json")
                    .body(body.clone());
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            let sent = tokio::select! {
                r = builder.timeout(remaining).send() => r,
                () = req.ctx.cancel.cancelled() => return Err(Error::Cancelled),
            };
            let response = match sent {
                Ok(r) => r,
                Err(e) if e.is_timeout() => return Err(Error::TimedOut(req.ctx.timeout)),
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
                Err(e) => {
                    return Err(Error::Transport {
                        detail: net::describe(&e),
                        connect: e.is_connect(),
                    });
                }
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
            return self.answer(response, retry_after, deadline, req).await;
        }
    }

    /// The answer's body as the call's result: JSON when it says so, else text; an
    /// error status with the start of its body.
    async fn answer(
        &self,
        response: reqwest::Response,
        retry_after: Option<Duration>,
        deadline: Instant,
        req: &Request<'_>,
    ) -> Result<Value, Error> {
        let status = response.status();
        let is_json = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.contains("json"));
        let body = tokio::select! {
            b = read_body(response, req.ctx.timeout) => b?,
            () = tokio::time::sleep(deadline.saturating_duration_since(Instant::now())) => {
                return Err(Error::TimedOut(req.ctx.timeout));
            }
            () = req.ctx.cancel.cancelled() => return Err(Error::Cancelled),
        };
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            return Err(Error::Status {
                status,
                excerpt: text.trim().chars().take(300).collect(),
                retry_after,
            });
        }
        if self.method == HttpMethod::Head || body.is_empty() {
            return Ok(Value::Null);
        }
        Ok(if is_json {
            serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(text.into_owned()))
        } else {
            Value::String(text.into_owned())
        })
    }
}

/// The W3C trace context of the call, replacing any the descriptor's headers set.
fn trace_headers(headers: &mut reqwest::header::HeaderMap, trace: &crate::telemetry::Context) {
    use crate::telemetry::{TRACEPARENT, TRACESTATE};
    if let Ok(v) = reqwest::header::HeaderValue::from_str(&trace.traceparent()) {
        headers.insert(TRACEPARENT, v);
    }
    match trace
        .tracestate()
        .and_then(|s| reqwest::header::HeaderValue::from_str(s).ok())
    {
        Some(v) => {
            headers.insert(TRACESTATE, v);
        }
        None => {
            headers.remove(TRACESTATE);
        }
    }
}

/// Headers in order, a later one replacing an earlier one of the same name.
fn header_map<'a>(
    pairs: impl Iterator<Item = &'a (String, String)>,
) -> Result<reqwest::header::HeaderMap, Error> {
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        let name =
            HeaderName::from_bytes(k.as_bytes()).map_err(|_| Error::HeaderName(k.clone()))?;
        let value = HeaderValue::from_str(v).map_err(|_| Error::HeaderValue(k.clone()))?;
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

/// A tool's HTTP binding: where each argument goes.
#[derive(Debug)]
pub(crate) struct Binding<'a> {
    /// The method.
    pub method: HttpMethod,
    /// Path below the base URL with `{name}` segments.
    pub path: &'a str,
    /// The tool's headers, with `{name}` placeholders.
    pub headers: &'a [(String, String)],
    /// Arguments always sent in the query string.
    pub query: &'a [String],
    /// The argument that is the whole body.
    pub body: Option<&'a str>,
}

/// One request as it goes on the wire (before auth).
#[derive(Debug)]
pub(crate) struct Wire {
    /// `baseUrl` + the filled path + the query string.
    pub url: Url,
    /// The tool's headers, filled.
    pub headers: Vec<(String, String)>,
    /// The JSON body, if any.
    pub body: Option<Value>,
}

impl Wire {
    /// Places the arguments: `{name}` path segments and header placeholders first, then
    /// the binding's `query` names; then the `body` argument, with what is left going to
    /// the query string; without `body`, what is left is the query string for GET,
    /// DELETE and HEAD and a JSON object body otherwise.
    pub(crate) fn new(
        base: &str,
        binding: &Binding<'_>,
        mut args: Map<String, Value>,
    ) -> Result<Self, Error> {
        let mut filled = fill_path(base, binding.path, &mut args)?;
        let headers = fill_headers(binding.headers, &mut args)?;
        let mut query: Vec<(String, Value)> = binding
            .query
            .iter()
            .filter_map(|name| args.shift_remove_entry(name))
            .collect();
        let body = match binding.body {
            Some(name) => {
                let body = args.shift_remove(name).filter(|b| !b.is_null());
                query.extend(std::mem::take(&mut args));
                body
            }
            None if matches!(
                binding.method,
                HttpMethod::Get | HttpMethod::Delete | HttpMethod::Head
            ) =>
            {
                query.extend(std::mem::take(&mut args));
                None
            }
            None => Some(Value::Object(args)),
        };
        append_query(&mut filled, &query);
        let url = Url::parse(&filled).map_err(Error::Url)?;
        // Whatever the template and the arguments, the request stays under `baseUrl`.
        if let Ok(base) = Url::parse(base) {
            let root = base.path().trim_end_matches('/');
            let inside = url.origin() == base.origin()
                && (url.path() == root
                    || url.path().starts_with(&format!("{root}/"))
                    || root.is_empty());
            if !inside {
                return Err(Error::LeavesBase);
            }
        }
        Ok(Self { url, headers, body })
    }
}

/// `base` + `path` with `{name}` segments filled (and removed from `args`).
fn fill_path(base: &str, path: &str, args: &mut Map<String, Value>) -> Result<String, Error> {
    let mut filled = String::with_capacity(base.len() + path.len());
    filled.push_str(base.trim_end_matches('/'));
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        filled.push_str(&rest[..open]);
        let name = &rest[open + 1..open + close];
        let value = args
            .shift_remove(name)
            .ok_or_else(|| Error::PathMissing(name.to_owned()))?;
        let text = scalar_text(&value).ok_or_else(|| Error::PathNotScalar(name.to_owned()))?;
        if text.is_empty() {
            return Err(Error::PathEmpty(name.to_owned()));
        }
        filled.push_str(&crate::text::percent_encode(&text));
        rest = &rest[open + close + 1..];
    }
    filled.push_str(rest);
    // `.` and `..` segments would be resolved away by URL normalization (encoded ones
    // too: the URL standard treats `%2e%2e` as `..`), moving the request out of the
    // API's path. No encoding survives that, so such a path is refused.
    let base_len = base.trim_end_matches('/').len();
    let added = filled[base_len..].split(['?', '#']).next().unwrap_or("");
    if added.split('/').any(is_dot_segment) {
        return Err(Error::DotSegment);
    }
    Ok(filled)
}

/// The tool's headers with `{name}` placeholders filled from (and removed from) `args`;
/// a header whose argument is absent or null is left out.
fn fill_headers(
    headers: &[(String, String)],
    args: &mut Map<String, Value>,
) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::with_capacity(headers.len());
    let mut used = Vec::new();
    'header: for (name, template) in headers {
        let mut value = template.clone();
        for param in aai_descriptor::header_params(template) {
            used.push(param.to_owned());
            let text = match args.get(param) {
                None | Some(Value::Null) => continue 'header,
                Some(v) => scalar_text(v).ok_or_else(|| Error::HeaderNotScalar {
                    param: param.to_owned(),
                    header: name.clone(),
                })?,
            };
            if text.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                return Err(Error::HeaderLineBreak {
                    param: param.to_owned(),
                    header: name.clone(),
                });
            }
            value = value.replace(&format!("{{{param}}}"), &text);
        }
        out.push((name.clone(), value));
    }
    for param in used {
        args.shift_remove(&param);
    }
    Ok(out)
}

/// Appends `pairs` to `url` as a query string (arrays as repeated keys, objects as JSON
/// text, nulls left out).
fn append_query(url: &mut String, pairs: &[(String, Value)]) {
    let mut query = String::new();
    for (k, v) in pairs {
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
            query.push_str(&crate::text::percent_encode(k));
            query.push('=');
            query.push_str(&crate::text::percent_encode(&value));
        }
    }
    if !query.is_empty() {
        if url.contains('?') {
            query.replace_range(0..1, "&");
        }
        url.push_str(&query);
    }
}

/// `.` or `..`, also percent-encoded (`%2e`, `.%2E`, …), as the URL standard reads them.
fn is_dot_segment(segment: &str) -> bool {
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(segment).collect();
    matches!(decoded.as_slice(), b"." | b"..")
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100 * 2u64.pow(attempt.min(5)))
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

async fn read_body(response: reqwest::Response, limit: Duration) -> Result<Vec<u8>, Error> {
    net::read_capped(response, net::MAX_API_BODY)
        .await
        .map_err(|e| match e {
            BodyError::TimedOut => Error::TimedOut(limit),
            other => Error::Body(other),
        })
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
