//! The JSON-RPC rules a line from the client is held to before rmcp (or the direct path)
//! sees it: see the module above.

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::model::ErrorCode;
use serde_json::{Value, json};

/// `Ok(message)` to pass the line on; `Err(Some(answer))` to answer it here; `Err(None)`
/// to drop it silently (a broken notification: JSON-RPC never answers those).
pub(super) fn check(
    line: &[u8],
    in_flight: &Mutex<HashMap<String, usize>>,
) -> Result<Value, Option<String>> {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t.trim(),
        Err(_) => {
            let id = recover_id(&String::from_utf8_lossy(line));
            return Err(error(
                id.as_ref(),
                ErrorCode::PARSE_ERROR,
                "Parse error: the message is not UTF-8",
            ));
        }
    };
    if text.is_empty() {
        return Err(None);
    }
    if let Some(problem) = crate::budget::problem(text.as_bytes()) {
        return Err(error(
            recover_id(text).as_ref(),
            ErrorCode::INVALID_REQUEST,
            &format!("Invalid Request: {problem}"),
        ));
    }
    let message: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Err(error(
                recover_id(text).as_ref(),
                ErrorCode::PARSE_ERROR,
                &format!("Parse error: {e}"),
            ));
        }
    };
    let Value::Object(map) = &message else {
        return Err(error(
            None,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: a message is one JSON object (batches are not part of MCP)",
        ));
    };
    let id = map.get("id").filter(|id| id.is_string() || id.is_number());
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(error(
            id,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: `jsonrpc` must be \"2.0\"",
        ));
    }
    let Some(method) = map.get("method") else {
        // A response to one of our requests (elicitation, roots): rmcp's business.
        return if map.contains_key("result") || map.contains_key("error") {
            Ok(message)
        } else {
            Err(error(
                id,
                ErrorCode::INVALID_REQUEST,
                "Invalid Request: no `method`",
            ))
        };
    };
    let Some(method) = method.as_str() else {
        return Err(error(
            id,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: `method` must be a string",
        ));
    };
    match map.get("id") {
        // A notification: never answered. One whose `_meta` rmcp cannot read is dropped
        // here: rmcp would answer it, with no id.
        None if meta_problem(map.get("params")).is_some() => return Err(None),
        None => return Ok(message),
        Some(Value::String(_)) => {}
        // rmcp reads integer ids only (as i64): another number would come back changed.
        Some(Value::Number(n)) if n.is_i64() => {}
        Some(Value::Number(_)) => {
            // Echoed as the client wrote it (serde would turn 2^64 into a float).
            let raw = raw_id(text).unwrap_or("null");
            let message =
                json!("Invalid Request: a numeric `id` must be an integer of at most 64 bits");
            let code = ErrorCode::INVALID_REQUEST.0;
            return Err(Some(format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{raw},\"error\":{{\"code\":{code},\"message\":{message}}}}}\n"
            )));
        }
        Some(_) => {
            return Err(error(
                None,
                ErrorCode::INVALID_REQUEST,
                "Invalid Request: `id` must be a string or a number",
            ));
        }
    }
    if let Some(problem) = params_problem(method, map.get("params")) {
        return Err(error(
            id,
            ErrorCode::INVALID_PARAMS,
            &format!("Invalid params: {problem}"),
        ));
    }
    admit(id, line.len(), in_flight)?;
    Ok(message)
}

/// Counts a request as in flight, or refuses it when too many (or too much data) are, or
/// when one with the same id still is.
fn admit(
    id: Option<&Value>,
    len: usize,
    in_flight: &Mutex<HashMap<String, usize>>,
) -> Result<(), Option<String>> {
    let key = id.map(Value::to_string).unwrap_or_default();
    let mut in_flight = in_flight.lock().expect("in-flight lock");
    // Refused rather than left unread: the client's answers to our own requests
    // (elicitation) must still get through.
    let held: usize = in_flight.values().sum();
    if in_flight.len() >= crate::budget::MAX_IN_FLIGHT
        || held + len > crate::budget::MAX_IN_FLIGHT_BYTES
    {
        return Err(error(
            id,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: too many requests (or too much data) are already in progress; send more when some are answered",
        ));
    }
    if in_flight.contains_key(&key) {
        return Err(error(
            id,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: a request with this id is still in progress",
        ));
    }
    in_flight.insert(key, len);
    Ok(())
}

/// What is wrong with the `params` of the methods whose wrong params rmcp misreports.
fn params_problem(method: &str, params: Option<&Value>) -> Option<&'static str> {
    let obj = match params {
        Some(Value::Object(o)) => Some(o),
        None | Some(Value::Null) => None,
        Some(_) => return Some("`params` must be an object"),
    };
    if let Some(problem) = meta_problem(params) {
        return Some(problem);
    }
    let text = |k: &str| obj.and_then(|o| o.get(k)).is_some_and(Value::is_string);
    let object_or_absent = |k: &str| {
        obj.and_then(|o| o.get(k))
            .is_none_or(|v| v.is_object() || v.is_null())
    };
    match method {
        "tools/call" if !text("name") => Some("`name` must be a string"),
        "tools/call" if !object_or_absent("arguments") => Some("`arguments` must be an object"),
        "resources/read" if !text("uri") => Some("`uri` must be a string"),
        "initialize" if !text("protocolVersion") => Some("`protocolVersion` must be a string"),
        "initialize"
            if !obj
                .and_then(|o| o.get("clientInfo"))
                .is_some_and(|c| c.get("name").is_some_and(Value::is_string)) =>
        {
            Some("`clientInfo.name` must be a string")
        }
        "initialize"
            if !obj
                .and_then(|o| o.get("capabilities"))
                .is_some_and(Value::is_object) =>
        {
            Some("`capabilities` must be an object")
        }
        _ => None,
    }
}

/// What is wrong with `params._meta` (rmcp reads every message's, and answers one that is
/// not an object with -32600 and no id at all).
fn meta_problem(params: Option<&Value>) -> Option<&'static str> {
    params
        .and_then(|p| p.get("_meta"))
        .filter(|m| !(m.is_object() || m.is_null()))
        .map(|_| "`_meta` must be an object")
}

/// The id of an outgoing response (`{"jsonrpc":"2.0","id":…,"result"|"error":…}`), as
/// the JSON text it was sent with; `None` for requests and notifications.
pub(super) fn response_id(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head {
        id: Option<Value>,
        method: Option<serde::de::IgnoredAny>,
    }
    let head: Head = serde_json::from_slice(line).ok()?;
    if head.method.is_some() {
        return None;
    }
    head.id.map(|id| id.to_string())
}

/// The top-level `"id": <integer or string>` of broken (or cut) JSON text: keys inside
/// nested objects (`params.arguments.id`) are not the message's id.
pub(super) fn recover_id(text: &str) -> Option<Value> {
    id_value(raw_id(text)?)
}

/// The text of the top-level `id`'s value (a string with its quotes, or a number).
fn raw_id(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    // Whether the string that starts next, at depth 1, is a key.
    let mut expecting_key = false;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => {
                depth += 1;
                expecting_key = depth == 1;
            }
            b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => expecting_key = true,
            b'"' => {
                let end = string_end(bytes, i)?;
                if depth == 1 && expecting_key && &bytes[i..=end] == b"\"id\"" {
                    let rest = text[end + 1..].trim_start().strip_prefix(':')?.trim_start();
                    let len = if rest.starts_with('"') {
                        string_end(rest.as_bytes(), 0)? + 1
                    } else {
                        rest.find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
                            .unwrap_or(rest.len())
                    };
                    return Some(&rest[..len]);
                }
                expecting_key = false;
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Where the string starting at `start` (a `"`) ends (its closing `"`).
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// A JSON string or an i64 written as `raw`, as JSON writes them: `01` and `+1` are no
/// JSON numbers, so they recover no id (the answer's id is `null`).
fn id_value(raw: &str) -> Option<Value> {
    match serde_json::from_str::<Value>(raw).ok()? {
        id @ Value::String(_) => Some(id),
        Value::Number(n) => n.as_i64().map(Value::from),
        _ => None,
    }
}

/// A JSON-RPC error answer line.
pub(super) fn error(id: Option<&Value>, code: ErrorCode, message: &str) -> Option<String> {
    let id = id.cloned().unwrap_or(Value::Null);
    Some(format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code.0, "message": message}})
    ))
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
