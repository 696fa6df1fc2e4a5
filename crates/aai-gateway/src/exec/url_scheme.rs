//! The iOS executor (D0 `automation: url_scheme`) through `xcrun simctl` (the Simulator).
//!
//! * [`render`] (pure): the tool's `url_template` with every `${param}` value
//!   percent-encoded (all but RFC 3986's unreserved characters, as UTF-8 bytes), so a value
//!   is always data inside its URL component; the URL must keep the binding's scheme. It
//!   is one argv entry of `xcrun simctl openurl booted <url>` (no shell).
//! * Results: `result_type: clipboard` waits (up to the tool's timeout) for the
//!   Simulator's clipboard (`xcrun simctl pbpaste booted`) to change after the URL is
//!   opened; `app_group` waits for `aai-result.json` in the app group's container (`xcrun
//!   simctl get_app_container booted <appId> <group>`) to change. Either is read as JSON
//!   when it is JSON. Without a result type the call returns once the URL is opened.

use std::time::Duration;

use aai_descriptor::{Executor, ToolCall, UrlResult};
use serde_json::{Value, json};

use super::{Execute, Request};
use crate::error::{Code, GatewayError};
use crate::exec::process::RunError;

/// How an iOS call failed. `From<Error> for GatewayError` below gives the wire codes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The tool is not a URL-scheme tool (the loader pairs them; a guard).
    #[error("not a URL-scheme tool")]
    NotUrlTool,
    /// The filled template left the binding's scheme.
    #[error("the tool's URL does not start with the binding's scheme `{0}:`")]
    LeavesScheme(String),
    /// `xcrun` could not be run.
    #[error(transparent)]
    Run(#[from] RunError),
    /// `xcrun` failed; `booted`: because no Simulator runs or the app is not installed.
    #[error("xcrun said: {said}")]
    Xcrun {
        /// Its stderr, cut.
        said: String,
        /// No booted device, or no such app.
        absent: bool,
    },
    /// The URL was opened but no result came in time.
    #[error("the app opened the URL but wrote no result within {:.1} s", .0.as_secs_f64())]
    NoResult(Duration),
    /// The client cancelled the call.
    #[error("the call was cancelled")]
    Cancelled,
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match e {
            Error::Run(run) => return run.into(),
            Error::NotUrlTool | Error::LeavesScheme(_) => Code::AaiJsonInvalid,
            Error::Xcrun { absent: true, .. } => Code::AppNotRunning,
            Error::NoResult(_) => Code::Timeout,
            Error::Xcrun { .. } | Error::Cancelled => Code::AutomationFailed,
        };
        GatewayError::new(code, e.to_string())
    }
}

/// How often a result is looked for.
const POLL: Duration = Duration::from_millis(200);
/// The file an app writes its result to in its app group.
pub(crate) const RESULT_FILE: &str = "aai-result.json";

/// The URL of one call.
pub(crate) fn render(scheme: &str, template: &str, args: &Value) -> Result<String, Error> {
    let url = super::template::fill_text(template, args, crate::text::percent_encode);
    if !url
        .to_ascii_lowercase()
        .starts_with(&format!("{}:", scheme.to_ascii_lowercase()))
    {
        return Err(Error::LeavesScheme(scheme.to_owned()));
    }
    Ok(url)
}

/// `xcrun` arguments.
pub(crate) fn openurl(url: &str) -> Vec<String> {
    ["simctl", "openurl", "booted", url]
        .map(str::to_owned)
        .to_vec()
}

/// Runs iOS tools in the booted Simulator.
#[derive(Debug, Default)]
pub(crate) struct UrlSchemeExecutor;

impl Execute for UrlSchemeExecutor {
    async fn execute(&self, req: Request<'_>) -> Result<Value, super::Error> {
        let (Executor::UrlScheme(target), ToolCall::Url { template, result }) =
            (req.executor, &req.tool.call)
        else {
            return Err(Error::NotUrlTool.into());
        };
        let url = render(&target.scheme, template, &req.args)?;
        let open = openurl(&url);
        let open: Vec<&str> = open.iter().map(String::as_str).collect();
        let Some(kind) = result else {
            xcrun(&req, &open).await?;
            return Ok(json!({"opened": url}));
        };
        let deadline = tokio::time::Instant::now() + req.ctx.timeout;
        let before = current(&req, kind).await?;
        xcrun(&req, &open).await?;
        loop {
            let now = current(&req, kind).await?;
            if now != before {
                let text = now.trim_end();
                return Ok(
                    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
                );
            }
            if tokio::time::Instant::now() + POLL > deadline {
                return Err(Error::NoResult(req.ctx.timeout).into());
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = req.ctx.cancel.cancelled() => {
                    return Err(Error::Cancelled.into());
                }
            }
        }
    }
}

/// Where the result is looked for, read now.
async fn current(req: &Request<'_>, kind: &UrlResult) -> Result<String, Error> {
    match kind {
        UrlResult::Clipboard => xcrun(req, &["simctl", "pbpaste", "booted"]).await,
        UrlResult::AppGroup { group_id } => Ok(read_file(&group_file(req, group_id).await?).await),
    }
}

/// The result file in the app group's container.
async fn group_file(req: &Request<'_>, group: &str) -> Result<std::path::PathBuf, Error> {
    let dir = xcrun(
        req,
        &["simctl", "get_app_container", "booted", req.app, group],
    )
    .await?;
    Ok(std::path::Path::new(dir.trim()).join(RESULT_FILE))
}

async fn read_file(path: &std::path::Path) -> String {
    tokio::fs::read_to_string(path).await.unwrap_or_default()
}

/// Runs `xcrun` with `args`; its stdout.
async fn xcrun(req: &Request<'_>, args: &[&str]) -> Result<String, Error> {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let out = super::run_once(req, "xcrun", &args, b"", 1024 * 1024).await?;
    if !out.success() {
        let said = crate::text::excerpt(String::from_utf8_lossy(&out.stderr).trim(), 400);
        let absent = said.contains("No devices are booted") || said.contains("Unable to lookup");
        return Err(Error::Xcrun { said, absent });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_is_percent_encoded() {
        let url = render(
            "mailapp",
            "mailapp://send?to=${to}&subject=${subject}&body=${body}",
            &json!({"to": "a@b.c", "subject": "x&admin=1#frag", "body": "é 😀/..\n%"}),
        )
        .unwrap();
        assert_eq!(
            url,
            "mailapp://send?to=a%40b.c&subject=x%26admin%3D1%23frag&body=%C3%A9%20%F0%9F%98%80%2F..%0A%25"
        );
        assert_eq!(openurl(&url), ["simctl", "openurl", "booted", url.as_str()]);
    }

    #[test]
    fn a_template_cannot_leave_its_scheme() {
        let e = render(
            "mailapp",
            "${target}",
            &json!({"target": "https://evil.example"}),
        )
        .unwrap_err();
        assert!(matches!(e, Error::LeavesScheme(_)), "{e}");
        assert_eq!(GatewayError::from(e).code, Code::AaiJsonInvalid);
        assert!(render("mailapp", "MailApp://x", &json!({})).is_ok());
    }
}
