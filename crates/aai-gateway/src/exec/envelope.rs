//! The JSON envelope (docs/design.md, Executors), shared by every executor that talks to an
//! adapter rather than to an app's own API (stdio, the D-Bus JSON convention, and the
//! platform conventions that carry it).
//!
//! Request: `{"version":"1.0","tool":…,"params":{…},"request_id":"…"}`.
//! Reply: `{"version":"1.0","request_id":"…","status":"success","result":…}` or
//! `{…,"status":"error","error":{"code":…,"message":"…"}}`, where `code` is an AAI number
//! such as -32005 or a type such as `"INVALID_PARAMS"` (anything else is
//! AUTOMATION_FAILED). Our extension: `{"request_id":"…","status":"progress",
//! "progress":0.5,"total":1,"message":"…"}`.

use serde_json::{Value, json};

use super::Progress;
use crate::error::{Code, GatewayError};

/// The request envelope.
pub(crate) fn request(tool: &str, params: &Value, request_id: &str) -> Value {
    json!({
        "version": "1.0",
        "tool": tool,
        "params": params,
        "request_id": request_id,
    })
}

/// What a reply envelope says.
#[derive(Debug)]
pub(crate) enum Reply {
    /// A final answer.
    Done(Result<Value, Failure>),
    /// Progress of a running request.
    Progress(Progress),
}

/// A reply envelope that is not a success.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The other side reported an error: its code (a number or a type name it sent, when
    /// the gateway knows it) and its message.
    #[error("{message}")]
    Reported {
        /// The code it sent.
        code: Option<Code>,
        /// Its message, cut.
        message: String,
    },
    /// A status that is neither `success`, `error` nor `progress`.
    #[error("{who} replied with status `{status}`; expected `success` or `error`")]
    Status {
        /// "the adapter", "the app".
        who: &'static str,
        /// The status it sent, cut.
        status: String,
    },
}

impl From<Failure> for GatewayError {
    fn from(e: Failure) -> GatewayError {
        let code = match &e {
            Failure::Reported { code, .. } => code.unwrap_or(Code::AutomationFailed),
            Failure::Status { .. } => Code::AutomationFailed,
        };
        GatewayError::new(code, e.to_string())
    }
}

/// A reply line that is not an envelope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// Not a JSON object.
    #[error("not a JSON envelope: `{0}`")]
    NotJson(String),
}

/// The `request_id` of a reply, as text (numbers are accepted).
pub(crate) fn request_id(envelope: &Value) -> Option<String> {
    match envelope.get("request_id")? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Parses a reply line into a JSON object; `Malformed::NotJson` carries an excerpt.
pub(crate) fn parse(text: &str) -> Result<Value, Malformed> {
    match serde_json::from_str(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(Malformed::NotJson(excerpt(text, 200))),
    }
}

/// What a parsed reply envelope means. `who` names the other side in messages ("the
/// adapter", "the app").
pub(crate) fn reply(envelope: &Value, who: &'static str) -> Reply {
    let status = envelope.get("status").and_then(Value::as_str).unwrap_or("");
    match status {
        "success" => Reply::Done(Ok(envelope.get("result").cloned().unwrap_or(Value::Null))),
        "error" => Reply::Done(Err(error(envelope.get("error"), who))),
        "progress" => Reply::Progress(Progress {
            progress: envelope
                .get("progress")
                .and_then(Value::as_f64)
                .unwrap_or(0.0),
            total: envelope.get("total").and_then(Value::as_f64),
            message: envelope
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }),
        other => Reply::Done(Err(Failure::Status {
            who,
            status: excerpt(other, 40),
        })),
    }
}

fn error(error: Option<&Value>, who: &str) -> Failure {
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map(|m| excerpt(m, 2000))
        .unwrap_or_else(|| format!("{who} reported an error without a message"));
    let code = error.and_then(|e| e.get("code")).and_then(Code::parse);
    Failure::Reported { code, message }
}

pub(crate) use crate::text::excerpt;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_map_to_results_errors_and_progress() {
        let ok = parse(r#"{"request_id":"1","status":"success","result":{"a":1}}"#).unwrap();
        assert_eq!(request_id(&ok).as_deref(), Some("1"));
        assert!(matches!(reply(&ok, "x"), Reply::Done(Ok(v)) if v == json!({"a":1})));
        let err =
            parse(r#"{"request_id":2,"status":"error","error":{"code":"TIMEOUT","message":"m"}}"#)
                .unwrap();
        assert_eq!(request_id(&err).as_deref(), Some("2"));
        let Reply::Done(Err(e)) = reply(&err, "x") else {
            panic!()
        };
        let e = GatewayError::from(e);
        assert_eq!((e.code, e.detail.as_str()), (Code::Timeout, "m"));
        let e = parse(r#"{"status":"error","error":{"code":-32005}}"#).unwrap();
        let Reply::Done(Err(e)) = reply(&e, "the app") else {
            panic!()
        };
        let e = GatewayError::from(e);
        assert_eq!(e.code, Code::InvalidParams);
        assert_eq!(e.detail, "the app reported an error without a message");
        let odd = parse(r#"{"status":"error","error":{"code":"NOPE","message":"m"}}"#).unwrap();
        let Reply::Done(Err(e)) = reply(&odd, "the app") else {
            panic!()
        };
        assert_eq!(GatewayError::from(e).code, Code::AutomationFailed);
        let p =
            parse(r#"{"request_id":"1","status":"progress","progress":0.5,"total":1}"#).unwrap();
        assert!(
            matches!(reply(&p, "x"), Reply::Progress(Progress { progress, .. }) if progress == 0.5)
        );
        assert!(matches!(
            reply(&json!({"status":"weird"}), "x"),
            Reply::Done(Err(_))
        ));
        assert_eq!(parse("[1]"), Err(Malformed::NotJson("[1]".into())));
        assert_eq!(excerpt("abcdef", 3), "abc…");
    }
}
