//! A downstream server's requests of the client (elicitation, sampling, roots), made
//! during a call: which call's client each belongs to, how many one call may make, and
//! what the user is shown of them (docs/agents.md, "What a server asks of the client").
//!
//! A request goes to the client of the call it belongs to, or is refused: it belongs to
//! the call whose response stream it came on (Streamable HTTP), else to the call whose
//! progress token its `_meta` carries, else to the calls in flight when they all come from
//! one client session. With calls of several clients in flight and nothing to tell them
//! apart, it is refused rather than put to the wrong person.

// rmcp's client types are allowed here, as in `client.rs` (clippy.toml bans them elsewhere).
#![allow(clippy::disallowed_types)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::ErrorData;
use rmcp::model::{RequestId, RequestMetaObject};
use rmcp::service::{InboundStreamOrigin, RequestContext, RoleClient};
use serde_json::{Map, Value, json};

use crate::exec::{Ask, UpstreamRef};

/// The `_meta` key naming the app a passed-through request came from.
pub(super) const APP_META: &str = "io.github.aai-gateway/app";

/// At most this many of one call's requests wait for the client at once; more are
/// refused at once (a server cannot queue without bound through the gateway).
const MAX_WAITING: usize = 4;
/// At most this many requests of any kind in one call.
const MAX_REQUESTS: usize = 1000;
/// At most this many questions (elicitations and samplings) put to the user in one call,
/// as for an ACP agent's turn; later ones are refused without asking.
const MAX_QUESTIONS: usize = 20;
/// The longest sampling request shown to the user; a longer one is refused, since what
/// the user is asked about must be all that is sent.
const MAX_SAMPLING_SHOWN: usize = 4000;
/// The longest elicitation message passed on.
const MAX_MESSAGE: usize = 1000;

/// A call in flight on a connection: where the server's requests of the client go.
#[derive(Clone)]
pub(in crate::exec) struct Caller {
    /// The app id (labels what the server asks).
    pub app: String,
    /// The client the call came from.
    pub upstream: Option<UpstreamRef>,
    /// Asks the user whether the server may sample the client's model.
    pub permission: Option<crate::exec::Asker>,
    /// The trace context the call passes on (`_meta.traceparent`, and the header over
    /// Streamable HTTP).
    pub trace: Option<crate::telemetry::Context>,
}

/// What one call's requests have used of their bounds.
#[derive(Default)]
struct Used {
    waiting: AtomicUsize,
    requests: AtomicUsize,
    questions: AtomicUsize,
}

struct Flight {
    number: u64,
    caller: Caller,
    /// The `tools/call` request's id and progress token (as a key), once sent.
    sent: Option<(RequestId, String)>,
    used: Arc<Used>,
}

impl Flight {
    fn session(&self) -> Option<u64> {
        self.caller.upstream.as_ref().map(|u| u.session())
    }
}

/// The calls in flight on one connection.
#[derive(Clone, Default)]
pub(super) struct Calls {
    flights: Arc<Mutex<Vec<Flight>>>,
    next: Arc<AtomicU64>,
}

/// A call's place on its connection's list, taken off when the call ends, however it ends.
pub(super) struct InFlight {
    calls: Calls,
    number: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.calls
            .flights
            .lock()
            .expect("calls lock")
            .retain(|f| f.number != self.number);
    }
}

impl InFlight {
    /// Records the call's request id and progress token once it is sent: requests on its
    /// response stream, or naming its token, are its own.
    pub(super) fn sent(&self, id: RequestId, token: String) {
        if let Some(f) = self
            .calls
            .flights
            .lock()
            .expect("calls lock")
            .iter_mut()
            .find(|f| f.number == self.number)
        {
            f.sent = Some((id, token));
        }
    }

    /// The id of the call's latest request, once sent.
    pub(super) fn id(&self) -> Option<RequestId> {
        let flights = self.calls.flights.lock().expect("calls lock");
        let flight = flights.iter().find(|f| f.number == self.number)?;
        flight.sent.as_ref().map(|(id, _)| id.clone())
    }
}

/// A request routed to its call's client, counted as waiting until dropped.
struct Routed {
    caller: Caller,
    upstream: UpstreamRef,
    used: Arc<Used>,
}

impl Drop for Routed {
    fn drop(&mut self) {
        self.used.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Calls {
    /// Puts `caller`'s call on the list (before it is sent: a server may ask at once).
    pub(super) fn enter(&self, caller: Caller) -> InFlight {
        let number = self.next.fetch_add(1, Ordering::SeqCst);
        self.flights.lock().expect("calls lock").push(Flight {
            number,
            caller,
            sent: None,
            used: Arc::default(),
        });
        InFlight {
            calls: self.clone(),
            number,
        }
    }

    /// The call `context`'s request belongs to, within its bounds, and its client when it
    /// takes `ask`.
    fn route(
        &self,
        ask: Ask,
        context: &RequestContext<RoleClient>,
        question: bool,
    ) -> Result<Routed, ErrorData> {
        let stream = match context.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id),
            _ => None,
        };
        let token = progress_token(&context.meta);
        let flights = self.flights.lock().expect("calls lock");
        let Some(flight) = belongs_to(&flights, stream, token.as_deref()) else {
            let why = if flights.is_empty() {
                format!(
                    "{} outside a tool call: the gateway has no client to ask",
                    ask.method()
                )
            } else {
                format!(
                    "{} is refused: calls of more than one client are in flight on this server, and the request does not say which it belongs to (the gateway does not guess whom to ask)",
                    ask.method()
                )
            };
            return Err(ErrorData::invalid_request(why, None));
        };
        let used = flight.used.clone();
        let caller = flight.caller.clone();
        drop(flights);
        let Some(upstream) = caller.upstream.clone().filter(|u| u.offers(ask)) else {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "the client calling through the gateway does not support {}",
                    ask.method()
                ),
                None,
            ));
        };
        if used.requests.fetch_add(1, Ordering::SeqCst) >= MAX_REQUESTS {
            return Err(refused(format!(
                "{} is refused: this call made {MAX_REQUESTS} requests of the client already",
                ask.method()
            )));
        }
        if question && used.questions.fetch_add(1, Ordering::SeqCst) >= MAX_QUESTIONS {
            tracing::warn!(app = %caller.app, "the server asked the user more than {MAX_QUESTIONS} times in one call; refused without asking");
            return Err(refused(format!(
                "{} is refused: this call asked the user {MAX_QUESTIONS} times already",
                ask.method()
            )));
        }
        if used.waiting.fetch_add(1, Ordering::SeqCst) >= MAX_WAITING {
            used.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(refused(format!(
                "{} is refused: {MAX_WAITING} requests of this call wait for the client already",
                ask.method()
            )));
        }
        Ok(Routed {
            caller,
            upstream,
            used,
        })
    }
}

/// The flight a request belongs to: the call whose response stream it came on, or whose
/// progress token it names, or the newest call when all come from one client session.
fn belongs_to<'a>(
    flights: &'a [Flight],
    stream: Option<&RequestId>,
    token: Option<&str>,
) -> Option<&'a Flight> {
    let sent = |f: &&Flight, check: &dyn Fn(&(RequestId, String)) -> bool| {
        f.sent.as_ref().is_some_and(check)
    };
    if let Some(id) = stream
        && let Some(f) = flights.iter().find(|f| sent(f, &|(r, _)| r == id))
    {
        return Some(f);
    }
    if let Some(token) = token
        && let Some(f) = flights.iter().find(|f| sent(f, &|(_, t)| t == token))
    {
        return Some(f);
    }
    let first = flights.first()?.session();
    flights
        .iter()
        .all(|f| f.session() == first)
        .then(|| flights.last())
        .flatten()
}

fn progress_token(meta: &RequestMetaObject) -> Option<String> {
    meta.get_progress_token()
        .map(|t| super::client::token_key(&t))
}

fn refused(why: String) -> ErrorData {
    ErrorData::invalid_request(why, None)
}

/// `text` on one line: line breaks, tabs and other control and direction characters
/// become spaces, so that a server's text cannot push the app's name out of view or
/// pose as the gateway's own question.
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let blank = c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}');
        let c = if blank { ' ' } else { c };
        if c == ' ' && (out.is_empty() || out.ends_with(' ')) {
            continue;
        }
        out.push(c);
    }
    out.trim_end().to_owned()
}

/// An elicitation's message as the user sees it: the app first, then the server's text on
/// one line, cut.
fn message_shown(app: &str, message: &str) -> String {
    format!(
        "{app}: {}",
        crate::text::excerpt(&one_line(message), MAX_MESSAGE)
    )
}

/// What a sampling request sends, in full, as the user is asked about it; `Err` for one
/// that cannot be shown (other servers' context, or too long).
fn sampling_shown(app: &str, params: &Value) -> Result<String, String> {
    if let Some(context) = params.get("includeContext").and_then(Value::as_str)
        && context != "none"
    {
        return Err(format!(
            "includeContext `{}` is not passed on: it would send context the user is not shown",
            crate::text::excerpt(context, 40)
        ));
    }
    let mut parts = Vec::new();
    if let Some(system) = params.get("systemPrompt").and_then(Value::as_str) {
        parts.push(format!("system prompt: {}", one_line(system)));
    }
    let messages = params
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        let content = match m.get("content") {
            Some(Value::Array(items)) => items.iter().map(content_shown).collect::<Vec<_>>(),
            Some(item) => vec![content_shown(item)],
            None => Vec::new(),
        };
        parts.push(format!("{}: {}", one_line(role), content.join(" ")));
    }
    if let Some(max) = params.get("maxTokens").and_then(Value::as_u64) {
        parts.push(format!("at most {max} tokens"));
    }
    let shown = format!(
        "`{app}` asks your client's model ({}): {}",
        crate::text::count(messages.len(), "message", "messages"),
        parts.join(" | ")
    );
    let length = shown.chars().count();
    if length > MAX_SAMPLING_SHOWN {
        return Err(format!(
            "the request is too long to show the user in full ({length} characters; at most {MAX_SAMPLING_SHOWN})"
        ));
    }
    Ok(shown)
}

fn content_shown(item: &Value) -> String {
    match item.get("type").and_then(Value::as_str) {
        Some("text") => one_line(item.get("text").and_then(Value::as_str).unwrap_or("")),
        Some(other) => format!("[{}]", one_line(other)),
        None => "[content]".to_owned(),
    }
}

/// Passes a request to the caller's client, labelled with the app (`_meta`), and reads
/// its answer as `T`.
async fn pass<T: serde::de::DeserializeOwned>(
    routed: &Routed,
    ask: Ask,
    mut params: Value,
) -> Result<T, ErrorData> {
    if let Value::Object(p) = &mut params {
        let meta = p.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.insert(
                APP_META.to_owned(),
                Value::String(routed.caller.app.clone()),
            );
        }
    }
    let answer = routed
        .upstream
        .request(ask, params)
        .await
        .map_err(|e| ErrorData::internal_error(e.0, None))?;
    serde_json::from_value(answer).map_err(|e| {
        ErrorData::internal_error(format!("the client's answer is not valid: {e}"), None)
    })
}

impl Calls {
    /// The server's `elicitation/create`, put to its call's client with the app named
    /// first.
    pub(super) async fn elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        context: &RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, ErrorData> {
        let routed = self.route(Ask::Elicitation, context, true)?;
        let mut params = serde_json::to_value(&request)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        if let Some(Value::String(message)) = params.get_mut("message") {
            *message = message_shown(&routed.caller.app, message);
        }
        let schema = params.get("requestedSchema").cloned();
        let mut answer: Value = pass(&routed, Ask::Elicitation, params).await?;
        if answer.get("action").and_then(Value::as_str) == Some("accept")
            && let Some(schema) = &schema
        {
            if !answer.get("content").is_some_and(Value::is_object) {
                answer["content"] = json!({});
            }
            if let Some(Value::Object(content)) = answer.get_mut("content") {
                apply_defaults(schema, content);
            }
        }
        serde_json::from_value(answer).map_err(|e| {
            ErrorData::internal_error(format!("the client's answer is not valid: {e}"), None)
        })
    }

    /// The server's `sampling/createMessage`: the user is asked first, shown all that is
    /// sent; other servers' context is never asked for.
    pub(super) async fn sampling(
        &self,
        params: Value,
        context: &RequestContext<RoleClient>,
    ) -> Result<Value, ErrorData> {
        let routed = self.route(Ask::Sampling, context, true)?;
        let shown = sampling_shown(&routed.caller.app, &params)
            .map_err(|why| refused(format!("sampling is refused: {why}")))?;
        let Some(permission) = &routed.caller.permission else {
            return Err(refused(
                "nobody can approve sampling for this call".to_owned(),
            ));
        };
        permission(crate::exec::Permission {
            kind: "sampling".to_owned(),
            title: shown,
        })
        .await
        .map_err(|why| refused(format!("the user did not allow sampling: {why}")))?;
        pass(&routed, Ask::Sampling, params).await
    }

    /// The server's `roots/list`, answered by its call's client.
    #[allow(deprecated)] // roots: deprecated from 2026-07-28, used before it
    pub(super) async fn roots(
        &self,
        context: &RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, ErrorData> {
        let routed = self.route(Ask::Roots, context, false)?;
        pass(&routed, Ask::Roots, json!({})).await
    }
}

/// Fills in what the user left out of an accepted form with the schema's defaults
/// (SEP-1034: the client applies them).
fn apply_defaults(schema: &Value, content: &mut Map<String, Value>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        if let Some(default) = property.get("default")
            && !content.contains_key(name)
        {
            content.insert(name.clone(), default.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Session(u64);

    impl crate::exec::Upstream for Session {
        fn offers(&self, _: Ask) -> bool {
            true
        }
        fn session(&self) -> u64 {
            self.0
        }
        fn request(
            &self,
            _: Ask,
            _: Value,
        ) -> std::pin::Pin<Box<dyn Future<Output = Result<Value, crate::exec::Unanswered>> + Send>>
        {
            Box::pin(async { Ok(json!({})) })
        }
    }

    fn caller(app: &str, session: Option<u64>) -> Caller {
        Caller {
            app: app.to_owned(),
            upstream: session.map(|s| Arc::new(Session(s)) as UpstreamRef),
            permission: None,
            trace: None,
        }
    }

    fn flight(number: u64, app: &str, session: Option<u64>, sent: Option<(i64, &str)>) -> Flight {
        Flight {
            number,
            caller: caller(app, session),
            sent: sent.map(|(id, t)| (RequestId::Number(id), t.to_owned())),
            used: Arc::default(),
        }
    }

    #[test]
    fn a_request_goes_to_its_own_call_or_to_nobody() {
        let alice = flight(0, "alice", Some(1), Some((7, "\"t7\"")));
        let bob = flight(1, "bob", Some(2), Some((8, "\"t8\"")));
        let both = [alice, bob];
        let to = |stream: Option<i64>, token: Option<&str>| {
            belongs_to(&both, stream.map(RequestId::Number).as_ref(), token)
                .map(|f| f.caller.app.clone())
        };
        // The stream it came on, or the token it names, decide.
        assert_eq!(to(Some(7), None).as_deref(), Some("alice"));
        assert_eq!(to(None, Some("\"t7\"")).as_deref(), Some("alice"));
        assert_eq!(to(Some(8), Some("\"t7\"")).as_deref(), Some("bob"));
        // Nothing to tell two clients apart: nobody, not the newest caller.
        assert_eq!(to(None, None), None);
        assert_eq!(to(Some(99), Some("\"other\"")), None);
        // One client's calls only: its newest.
        let one = [
            flight(0, "first", Some(1), None),
            flight(1, "second", Some(1), None),
        ];
        assert_eq!(
            belongs_to(&one, None, None).map(|f| f.caller.app.as_str()),
            Some("second")
        );
        assert!(belongs_to(&[], None, None).is_none());
    }

    #[test]
    fn what_a_server_says_stays_on_one_line_after_the_app() {
        let shown = message_shown(
            "com.example.evil",
            "\n\n\n\n\n\n\nclaude-code wants to run `send`\u{2028}of Mail\u{202e}: allow?",
        );
        assert_eq!(
            shown,
            "com.example.evil: claude-code wants to run `send` of Mail : allow?"
        );
        assert!(message_shown("a", &"x".repeat(5000)).chars().count() < 1100);
    }

    #[test]
    fn sampling_shows_everything_it_sends_or_is_refused() {
        let params = json!({
            "systemPrompt": "You are\nhelpful",
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "first secret"}},
                {"role": "assistant", "content": [{"type": "text", "text": "second"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}]},
                {"role": "user", "content": {"type": "text", "text": "last"}}
            ],
            "maxTokens": 512
        });
        let shown = sampling_shown("dev.x", &params).unwrap();
        for part in [
            "your client's model (3 messages)",
            "system prompt: You are helpful",
            "user: first secret",
            "assistant: second [image]",
            "user: last",
            "at most 512 tokens",
        ] {
            assert!(shown.contains(part), "{part} missing from {shown}");
        }
        for context in ["allServers", "thisServer"] {
            let mut p = params.clone();
            p["includeContext"] = json!(context);
            assert!(
                sampling_shown("dev.x", &p)
                    .unwrap_err()
                    .contains("not passed on")
            );
        }
        let mut p = params.clone();
        p["includeContext"] = json!("none");
        assert!(sampling_shown("dev.x", &p).is_ok());
        p["messages"][0]["content"]["text"] = json!("x".repeat(5000));
        assert!(
            sampling_shown("dev.x", &p)
                .unwrap_err()
                .contains("too long")
        );
    }
}
