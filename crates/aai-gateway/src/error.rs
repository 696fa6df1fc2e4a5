//! The gateway's error model (docs/design.md, Errors): one code per failure kind, the
//! documented JSON shape, and one function that builds it.
//!
//! `{"code": -32001, "message": "Automation failed", "data": {"type": "AUTOMATION_FAILED",
//! "detail": "...", "appId": "...", "tool": "...", "retryable": false}}`
//!
//! Details never carry argument values or secrets; executors say what failed, not what
//! was sent.

use std::fmt;

use serde_json::{Map, Value, json};

/// JSON-RPC 2.0's -32600 Invalid Request: the message is not a valid request.
pub(crate) const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC 2.0's -32601 Method not found.
pub(crate) const METHOD_NOT_FOUND: i32 = -32601;
/// JSON-RPC 2.0's -32602 Invalid params (a tool's own arguments are
/// [`Code::InvalidParams`]).
pub(crate) const INVALID_PARAMS: i32 = -32602;
/// JSON-RPC 2.0's -32603 Internal error.
pub(crate) const INTERNAL_ERROR: i32 = -32603;

/// Every failure kind; the discriminant is its JSON-RPC code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Code {
    /// -32001: the automation ran and failed.
    AutomationFailed = -32001,
    /// -32002: no such app.
    AppNotFound = -32002,
    /// -32003: no such tool in the app.
    ToolNotFound = -32003,
    /// -32004: the OS or app refused.
    PermissionDenied = -32004,
    /// -32005: arguments do not match the tool's schema.
    InvalidParams = -32005,
    /// -32006: this host cannot run the app's binding.
    AutomationNotSupported = -32006,
    /// -32007: the descriptor is broken.
    AaiJsonInvalid = -32007,
    /// -32008: the call took too long.
    Timeout = -32008,
    /// -32009: the app is not running and could not be started.
    AppNotRunning = -32009,
    /// -32010: a script did not parse.
    ScriptParseError = -32010,
    /// -32011: a credential is needed.
    AuthRequired = -32011,
    /// -32012: the service refused the credential.
    AuthDenied = -32012,
    /// -32013: the credential expired and could not be renewed.
    AuthExpired = -32013,
    /// -32014: the user has not allowed this call.
    ConsentRequired = -32014,
    /// -32015: the service asks to slow down.
    RateLimited = -32015,
    /// -32016: the service is down.
    ServiceUnavailable = -32016,
    /// -32017: the remote resource does not exist.
    NotFound = -32017,
}

impl Code {
    /// Every code, in numeric order.
    pub const ALL: [Code; 17] = [
        Code::AutomationFailed,
        Code::AppNotFound,
        Code::ToolNotFound,
        Code::PermissionDenied,
        Code::InvalidParams,
        Code::AutomationNotSupported,
        Code::AaiJsonInvalid,
        Code::Timeout,
        Code::AppNotRunning,
        Code::ScriptParseError,
        Code::AuthRequired,
        Code::AuthDenied,
        Code::AuthExpired,
        Code::ConsentRequired,
        Code::RateLimited,
        Code::ServiceUnavailable,
        Code::NotFound,
    ];

    /// The JSON-RPC error code.
    pub fn number(self) -> i32 {
        self as i32
    }

    /// `data.type`.
    pub fn name(self) -> &'static str {
        match self {
            Code::AutomationFailed => "AUTOMATION_FAILED",
            Code::AppNotFound => "APP_NOT_FOUND",
            Code::ToolNotFound => "TOOL_NOT_FOUND",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::InvalidParams => "INVALID_PARAMS",
            Code::AutomationNotSupported => "AUTOMATION_NOT_SUPPORTED",
            Code::AaiJsonInvalid => "AAI_JSON_INVALID",
            Code::Timeout => "TIMEOUT",
            Code::AppNotRunning => "APP_NOT_RUNNING",
            Code::ScriptParseError => "SCRIPT_PARSE_ERROR",
            Code::AuthRequired => "AUTH_REQUIRED",
            Code::AuthDenied => "AUTH_DENIED",
            Code::AuthExpired => "AUTH_EXPIRED",
            Code::ConsentRequired => "CONSENT_REQUIRED",
            Code::RateLimited => "RATE_LIMITED",
            Code::ServiceUnavailable => "SERVICE_UNAVAILABLE",
            Code::NotFound => "NOT_FOUND",
        }
    }

    /// The short `message`.
    pub fn message(self) -> &'static str {
        match self {
            Code::AutomationFailed => "Automation failed",
            Code::AppNotFound => "App not found",
            Code::ToolNotFound => "Tool not found",
            Code::PermissionDenied => "Permission denied",
            Code::InvalidParams => "Invalid params",
            Code::AutomationNotSupported => "Automation not supported",
            Code::AaiJsonInvalid => "aai.json invalid",
            Code::Timeout => "Timeout",
            Code::AppNotRunning => "App not running",
            Code::ScriptParseError => "Script parse error",
            Code::AuthRequired => "Authentication required",
            Code::AuthDenied => "Authentication denied",
            Code::AuthExpired => "Authentication expired",
            Code::ConsentRequired => "Consent required",
            Code::RateLimited => "Rate limited",
            Code::ServiceUnavailable => "Service unavailable",
            Code::NotFound => "Not found",
        }
    }

    /// A code from its number or its `type` name (adapters may send either).
    pub fn parse(value: &Value) -> Option<Code> {
        match value {
            Value::Number(n) => {
                let n = n.as_i64()?;
                Code::ALL.into_iter().find(|c| i64::from(c.number()) == n)
            }
            Value::String(s) => Code::ALL.into_iter().find(|c| c.name() == s),
            _ => None,
        }
    }

    /// Whether trying again later may succeed.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            Code::Timeout | Code::RateLimited | Code::ServiceUnavailable | Code::AppNotRunning
        )
    }
}

/// A failed call, as the agent will see it.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayError {
    /// What kind of failure.
    pub code: Code,
    /// What happened, for the agent (no argument values, no secrets).
    pub detail: String,
    /// The app, when known.
    pub app: Option<String>,
    /// The tool, when known.
    pub tool: Option<String>,
    /// Extra fields merged into `data` (e.g. `field` for INVALID_PARAMS); boxed because
    /// most errors have none and errors travel by value.
    pub extra: Option<Box<Map<String, Value>>>,
    /// What the user can do about it, for the end of `message` whole (CONSENT_REQUIRED:
    /// where to approve and the command that grants it); also `data.hint`.
    pub hint: Option<String>,
}

impl GatewayError {
    /// An error of `code` with `detail`.
    pub fn new(code: Code, detail: impl Into<String>) -> GatewayError {
        GatewayError {
            code,
            detail: detail.into(),
            app: None,
            tool: None,
            extra: None,
            hint: None,
        }
    }

    /// The detail and, when there is one, the hint: what a person at a terminal reads.
    pub fn explain(&self) -> String {
        match &self.hint {
            Some(hint) => format!("{}. {hint}", self.detail),
            None => self.detail.clone(),
        }
    }

    /// Sets what the user can do about it: shown whole at the end of `message`, since a
    /// client that shows only `message` must still tell the user the way out.
    pub fn with_hint(mut self, hint: impl Into<String>) -> GatewayError {
        self.hint = Some(hint.into());
        self
    }

    /// Names the app and tool, unless already named.
    pub fn at(mut self, app: &str, tool: &str) -> GatewayError {
        self.app.get_or_insert_with(|| app.to_owned());
        self.tool.get_or_insert_with(|| tool.to_owned());
        self
    }

    /// Adds a field to `data`.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> GatewayError {
        self.extra
            .get_or_insert_with(Default::default)
            .insert(key.to_owned(), value.into());
        self
    }

    /// Replaces every occurrence of the given secret forms (longest first) in the detail
    /// and in the extra fields with `***`: a service that echoes a key, cookie or secret
    /// back must not carry it into the error, the CLI output or the log.
    pub fn scrub(mut self, forms: &[String]) -> GatewayError {
        let clean = crate::text::scrub;
        self.detail = clean(&self.detail, forms);
        if let Some(hint) = &mut self.hint {
            *hint = clean(hint, forms);
        }
        if let Some(extra) = &mut self.extra {
            for value in extra.values_mut() {
                if let Value::String(s) = value {
                    *s = clean(s, forms);
                }
            }
        }
        self
    }

    /// The wire `message`: the code's short text, then the first part of the detail, so a
    /// client that shows only `message` still says what went wrong
    /// (``Invalid params: `/text` is a required property``). `data.detail` has it all.
    pub fn message(&self) -> String {
        const MAX: usize = 160;
        let first = self.detail.split("; ").next().unwrap_or("").trim();
        if first.is_empty() {
            return self.code.message().to_owned();
        }
        let mut short: String = first.chars().take(MAX).collect();
        if first.chars().count() > MAX {
            short.push('…');
        }
        match &self.hint {
            Some(hint) => format!("{}: {short}. {hint}", self.code.message()),
            None => format!("{}: {short}", self.code.message()),
        }
    }

    /// The `data` object (docs/design.md, Errors).
    pub fn data(&self) -> Value {
        let mut data = json!({
            "type": self.code.name(),
            "detail": self.detail,
            "retryable": self.code.retryable(),
        });
        let map = data.as_object_mut().expect("object literal");
        if let Some(app) = &self.app {
            map.insert("appId".into(), app.clone().into());
        }
        if let Some(tool) = &self.tool {
            map.insert("tool".into(), tool.clone().into());
        }
        if let Some(hint) = &self.hint {
            map.insert("hint".into(), hint.clone().into());
        }
        if let Some(extra) = &self.extra {
            map.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        data
    }

    /// The whole error object `{code, message, data}`.
    pub fn to_json(&self) -> Value {
        json!({ "code": self.code.number(), "message": self.message(), "data": self.data() })
    }
}

#[cfg(test)]
mod message_tests {
    use super::*;

    #[test]
    fn the_message_carries_the_first_part_of_the_detail() {
        let e = GatewayError::new(
            Code::InvalidParams,
            "`/text` is a required property; `/n`: the value is not of type \"integer\"",
        );
        assert_eq!(
            e.message(),
            "Invalid params: `/text` is a required property"
        );
        assert_eq!(GatewayError::new(Code::Timeout, "").message(), "Timeout");
        let long = GatewayError::new(Code::AutomationFailed, "x".repeat(500));
        assert!(long.message().ends_with('…') && long.message().chars().count() < 200);
    }
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code.message(),
            self.code.number(),
            self.detail
        )
    }
}

impl std::error::Error for GatewayError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_documented_table() {
        assert_eq!(Code::AutomationFailed.number(), -32001);
        assert_eq!(Code::ScriptParseError.number(), -32010);
        assert_eq!(Code::AuthRequired.number(), -32011);
        assert_eq!(Code::NotFound.number(), -32017);
        assert_eq!(Code::parse(&json!(-32008)), Some(Code::Timeout));
        assert_eq!(
            Code::parse(&json!("INVALID_PARAMS")),
            Some(Code::InvalidParams)
        );
        assert_eq!(Code::parse(&json!(-1)), None);
        for (i, code) in Code::ALL.into_iter().enumerate() {
            assert_eq!(
                code.number(),
                -32001 - i as i32,
                "{code:?} is listed in order"
            );
            assert_eq!(Code::parse(&json!(code.name())), Some(code));
        }
    }

    #[test]
    fn shape_is_the_documented_one() {
        let e = GatewayError::new(Code::Timeout, "no reply after 2 s").at("com.x", "go");
        assert_eq!(
            e.to_json(),
            json!({"code": -32008, "message": "Timeout: no reply after 2 s", "data": {
                "type": "TIMEOUT", "detail": "no reply after 2 s", "retryable": true,
                "appId": "com.x", "tool": "go"}})
        );
    }
}
