//! The Android executor (D0 `automation: intent`) through `adb`.
//!
//! * [`render`] (pure): `adb [-s $ANDROID_SERIAL] shell am broadcast -a <action> -p
//!   <package> <typed extras…>`. `adb shell` hands its words to the device's shell, so every
//!   word is single-quoted for that shell (`'` → `'\''`): an argument value is one word of
//!   data, whatever it holds. Extras keep their type: a value that is exactly one
//!   placeholder takes its argument's JSON type — string `--es`, integer `--ei` (or `--el`
//!   beyond 32 bits), number `--ef`, boolean `--ez`, missing/null `--esn` — and a mixed
//!   template is a string. NUL cannot pass through a shell word and is refused.
//! * Results: `result_type: content_provider` runs `adb shell content query --uri <uri>`
//!   after the broadcast and reads its `Row: N key=value, …` lines into objects;
//!   `broadcast` reads the broadcast's result data (`Broadcast completed: result=…,
//!   data="…"`), as JSON when it is JSON.

use aai_descriptor::{Executor, IntentResult, ToolCall};
use serde_json::{Map, Value};

#[cfg(test)]
use super::process::{self, Limits, Spec};
use super::{Execute, Request};
use crate::error::{Code, GatewayError};
use crate::exec::process::RunError;

/// How an Android call failed. `From<Error> for GatewayError` below gives the wire codes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The tool is not an intent tool (the loader pairs them; a guard).
    #[error("not an intent tool")]
    NotIntentTool,
    /// An extra's value or key holds NUL.
    #[error("the value of extra `{0}` holds a NUL character, which Android's shell cannot carry")]
    Nul(String),
    /// `adb` could not be run.
    #[error(transparent)]
    Run(#[from] RunError),
    /// `adb` failed; `absent`: no device, or no such package.
    #[error("adb said: {said}")]
    Adb {
        /// Its stderr, cut.
        said: String,
        /// No device, an offline one, or no such package.
        absent: bool,
    },
    /// The broadcast did not complete.
    #[error("`am broadcast` did not complete: {0}")]
    Incomplete(String),
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match e {
            Error::Run(run) => return run.into(),
            Error::NotIntentTool => Code::AaiJsonInvalid,
            Error::Nul(_) => Code::InvalidParams,
            Error::Adb { absent: true, .. } => Code::AppNotRunning,
            Error::Adb { .. } | Error::Incomplete(_) => Code::AutomationFailed,
        };
        GatewayError::new(code, e.to_string())
    }
}

/// Most output kept.
const MAX_OUTPUT: usize = 4 * 1024 * 1024;

/// One word for the device's shell.
pub(crate) fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The `adb` arguments of one intent.
pub(crate) fn render(
    serial: Option<&str>,
    package: &str,
    action: &str,
    extras: &[(String, Value)],
    args: &Value,
) -> Result<Vec<String>, Error> {
    let mut words: Vec<String> = Vec::new();
    if let Some(serial) = serial {
        words.extend(["-s".to_owned(), serial.to_owned()]);
    }
    words.push("shell".into());
    let mut device = vec![
        "am".to_owned(),
        "broadcast".to_owned(),
        "-a".to_owned(),
        quote(action),
        "-p".to_owned(),
        quote(package),
    ];
    for (key, template) in extras {
        let value = super::template::fill(template, args);
        let (flag, text) = match &value {
            Value::Null => ("--esn", None),
            Value::Bool(b) => ("--ez", Some(b.to_string())),
            Value::Number(n) if n.is_i64() || n.is_u64() => {
                let fits = n.as_i64().is_some_and(|i| i32::try_from(i).is_ok());
                (if fits { "--ei" } else { "--el" }, Some(n.to_string()))
            }
            Value::Number(n) => ("--ef", Some(n.to_string())),
            Value::String(s) => ("--es", Some(s.clone())),
            other => ("--es", Some(other.to_string())),
        };
        if text.as_deref().is_some_and(|t| t.contains('\0')) || key.contains('\0') {
            return Err(Error::Nul(key.clone()));
        }
        device.push(flag.to_owned());
        device.push(quote(key));
        if let Some(text) = text {
            device.push(quote(&text));
        }
    }
    words.extend(device);
    Ok(words)
}

/// `adb [-s serial] shell content query --uri <uri>`.
pub(crate) fn render_query(serial: Option<&str>, uri: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    if let Some(serial) = serial {
        words.extend(["-s".to_owned(), serial.to_owned()]);
    }
    words.extend(
        ["shell", "content", "query", "--uri"]
            .map(str::to_owned)
            .into_iter()
            .chain([quote(uri)]),
    );
    words
}

/// `Row: 0 id=1, title=Hi, there` lines → objects (a value runs to the next `, key=`).
pub(crate) fn read_rows(text: &str) -> Value {
    let rows = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Row: "))
        .map(|row| {
            let fields = row.split_once(' ').map_or("", |(_, f)| f);
            let mut map = Map::new();
            let mut rest = fields;
            while let Some((key, after)) = rest.split_once('=') {
                // The value ends where `, <word>=` begins.
                let mut end = after.len();
                let mut search = 0;
                while let Some(comma) = after[search..].find(", ") {
                    let at = search + comma;
                    let next = &after[at + 2..];
                    let word_len = next
                        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .unwrap_or(next.len());
                    if word_len > 0 && next[word_len..].starts_with('=') {
                        end = at;
                        break;
                    }
                    search = at + 2;
                }
                let value = &after[..end];
                map.insert(
                    key.trim().to_owned(),
                    if value == "NULL" {
                        Value::Null
                    } else {
                        Value::String(value.to_owned())
                    },
                );
                rest = after.get(end + 2..).unwrap_or("");
            }
            Value::Object(map)
        })
        .collect();
    Value::Array(rows)
}

/// The result data of `am broadcast`'s `Broadcast completed: result=0, data="…"`.
pub(crate) fn read_broadcast(text: &str) -> Result<Value, Error> {
    let line = text
        .lines()
        .find(|l| l.starts_with("Broadcast completed"))
        .ok_or_else(|| Error::Incomplete(crate::text::excerpt(text.trim(), 300)))?;
    let Some(at) = line.find("data=\"") else {
        return Ok(Value::Null);
    };
    let data = &line[at + 6..];
    let data = data.strip_suffix('"').unwrap_or(data);
    Ok(serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_owned())))
}

/// Runs Android tools.
#[derive(Debug, Default)]
pub(crate) struct IntentExecutor;

impl Execute for IntentExecutor {
    async fn execute(&self, req: Request<'_>) -> Result<Value, super::Error> {
        let (
            Executor::Intent(target),
            ToolCall::Intent {
                action,
                extras,
                result,
            },
        ) = (req.executor, &req.tool.call)
        else {
            return Err(Error::NotIntentTool.into());
        };
        let serial = std::env::var("ANDROID_SERIAL")
            .ok()
            .filter(|s| !s.is_empty());
        let words = render(
            serial.as_deref(),
            &target.package,
            action,
            extras,
            &req.args,
        )?;
        let out = adb(&req, &words).await?;
        match result {
            IntentResult::Broadcast => Ok(read_broadcast(&out)?),
            IntentResult::ContentProvider { uri } => {
                // The broadcast must have gone out before its results are read.
                read_broadcast(&out)?;
                let rows = adb(&req, &render_query(serial.as_deref(), uri)).await?;
                Ok(read_rows(&rows))
            }
        }
    }
}

/// Runs `adb` with `words`; its stdout.
async fn adb(req: &Request<'_>, words: &[String]) -> Result<String, Error> {
    let out = super::run_once(req, "adb", words, b"", MAX_OUTPUT).await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.success() {
        let said = crate::text::excerpt(stderr.trim(), 400);
        let absent = said.contains("no devices")
            || said.contains("device offline")
            || said.contains("not found");
        return Err(Error::Adb { said, absent });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
#[path = "intent_tests.rs"]
mod tests;
