//! The AppleScript and JXA executors (macOS, D0 `automation: applescript | jxa`).
//!
//! * [`render`] (pure, tested on every OS): the template's `${param}` placeholders are
//!   filled by where they sit (`aai_descriptor::script`). Inside a string literal the value
//!   is escaped for exactly that literal — AppleScript `"…"`: `\` and `"` escaped, and
//!   characters that could end or upset the literal (curly quotes, control characters, NUL,
//!   line separators) spliced in as `" & (character id N) & "`; JavaScript `'…'`, `"…"`,
//!   `` `…` ``: everything but letters, digits and a few safe marks as `\uXXXX`. In code
//!   only numbers and booleans are accepted (the descriptor is refused otherwise); a
//!   missing value there is `missing value` / `null`. In a comment: nothing. A missing or
//!   null value renders as empty text inside a literal; arrays and objects as their JSON.
//! * The script goes to `osascript` on standard input (never on the command line, never
//!   through a shell): `osascript -l AppleScript|JavaScript -s h|s`.
//! * [`read`]: `result as text` is the text (parsed as JSON when it is JSON); `result as
//!   record` is osascript's source form (`-s s`) of a record, parsed into a JSON object
//!   ([`record`]).
//! * [`failure`]: osascript's error number becomes an error code (docs/macos.md,
//!   Errors). An Apple event that finds its app not running (-600, -609) launches the
//!   app once and is sent again: it never reached the app, so it had no effect. A
//!   script is not run again (it may have done part of its work).

pub(crate) mod record;

use std::fmt::Write as _;

use aai_descriptor::script::{Context, Lang, Piece, Quote};
use aai_descriptor::{Executor, ScriptOutput, ToolCall};
use serde_json::Value;

use super::{Execute, Request};
use crate::error::{Code, GatewayError};
use crate::exec::process::RunError;

/// How a script or Apple event call failed. `From<Error> for GatewayError` below gives
/// the wire codes (osascript's error numbers: docs/design.md, Errors).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The binding is not a script binding (the loader pairs them; a guard).
    #[error("not a script binding: {0}")]
    NotScript(&'static str),
    /// The tool has no script.
    #[error("a script binding's tool has no script")]
    NoScript,
    /// The script's placeholders cannot be read.
    #[error("the tool's script cannot be read: {0}")]
    Unreadable(String),
    /// An argument placed in code is not a number or boolean.
    #[error("`{0}` must be a number or a boolean here")]
    NotCode(String),
    /// osascript could not be run.
    #[error(transparent)]
    Run(#[from] RunError),
    /// -1743: macOS refused the Apple events.
    #[error(
        "macOS does not allow this process to control `{app}` (Apple events were refused, -1743). Allow it in System Settings › Privacy & Security › Automation: the entry of the program that started aai-gateway (your terminal or MCP client) needs `{app}` switched on. osascript said: {said}"
    )]
    NotAllowed {
        /// The app id.
        app: String,
        /// osascript's report, cut.
        said: String,
    },
    /// -600, -609: the app is not running.
    #[error(
        "`{app}` is not running or quit during the call; start it and try again. osascript said: {said}"
    )]
    NotRunning {
        /// The app id.
        app: String,
        /// osascript's report, cut.
        said: String,
    },
    /// -2740, -2741: the script does not compile.
    #[error("the tool's script does not compile: {0}")]
    Compile(String),
    /// -1712: the app did not answer in time.
    #[error("`{app}` did not answer the Apple event in time: {said}")]
    NoAnswer {
        /// The app id.
        app: String,
        /// osascript's report, cut.
        said: String,
    },
    /// -128: the user cancelled.
    #[error("the user cancelled: {0}")]
    UserCancelled(String),
    /// Any other osascript failure.
    #[error("{}", super::said("osascript", .0))]
    Osascript(String),
    /// A record result that is not a record.
    #[error("the script's result is not a record: {0}")]
    NotRecord(String),
    /// The reply to an Apple event is not an envelope.
    #[error("the app's reply: {0}")]
    Reply(String),
    /// The reply to an Apple event is progress.
    #[error("the app answered the Apple event with progress, not a result")]
    ProgressOnly,
    /// The app answered with an error envelope.
    #[error(transparent)]
    Reported(#[from] super::envelope::Failure),
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match e {
            Error::Run(run) => return run.into(),
            Error::Reported(failure) => return failure.into(),
            Error::NotScript(_) => Code::AutomationNotSupported,
            Error::NoScript | Error::Unreadable(_) => Code::AaiJsonInvalid,
            Error::NotCode(_) => Code::InvalidParams,
            Error::NotAllowed { .. } | Error::UserCancelled(_) => Code::PermissionDenied,
            Error::NotRunning { .. } => Code::AppNotRunning,
            Error::Compile(_) => Code::ScriptParseError,
            Error::NoAnswer { .. } => Code::Timeout,
            Error::Osascript(_) | Error::NotRecord(_) | Error::Reply(_) | Error::ProgressOnly => {
                Code::AutomationFailed
            }
        };
        GatewayError::new(code, e.to_string())
    }
}

/// Most output kept from a script.
const MAX_OUTPUT: usize = 4 * 1024 * 1024;

/// A script ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rendered {
    /// The program.
    pub program: &'static str,
    /// Its arguments.
    pub args: Vec<String>,
    /// The script, sent on standard input.
    pub stdin: String,
}

/// Fills `source` with `args` for `lang`; `output` decides how osascript prints.
pub(crate) fn render(
    lang: Lang,
    source: &str,
    output: ScriptOutput,
    args: &Value,
) -> Result<Rendered, Error> {
    let pieces = aai_descriptor::script::parse(lang, source)
        .map_err(|e| Error::Unreadable(e.to_string()))?;
    let mut script = String::with_capacity(source.len());
    for piece in pieces {
        match piece {
            Piece::Text(t) => script.push_str(t),
            Piece::Slot { name, context } => {
                let value = args.get(name).unwrap_or(&Value::Null);
                match context {
                    Context::Comment => {}
                    Context::String(quote) => match lang {
                        Lang::AppleScript => applescript_text(&mut script, &text_of(value)),
                        Lang::JavaScript => javascript_text(&mut script, &text_of(value), quote),
                    },
                    Context::Code => script.push_str(&code_of(lang, name, value)?),
                }
            }
        }
    }
    let language = match lang {
        Lang::AppleScript => "AppleScript",
        Lang::JavaScript => "JavaScript",
    };
    let form = match output {
        ScriptOutput::Text => "h",
        ScriptOutput::Record => "s",
    };
    Ok(Rendered {
        program: "osascript",
        args: ["-l", language, "-s", form].map(str::to_owned).to_vec(),
        stdin: script,
    })
}

/// The osascript run that sends the JSON `envelope` as the direct parameter of the Apple
/// event `«event <class><id>»` to the app `bundle_id` (D2 `apple-events`, D1 `ipc` on
/// macOS). Class and id are four checked characters; the bundle id and the envelope are
/// escaped string literals.
pub(crate) fn render_event(events: &aai_descriptor::AppleEvents, envelope: &Value) -> Rendered {
    let mut script = String::from("tell application id \"");
    applescript_text(&mut script, &events.bundle_id);
    script.push_str("\" to return «event ");
    script.push_str(&events.event_class);
    script.push_str(&events.event_id);
    script.push_str("» \"");
    applescript_text(&mut script, &envelope.to_string());
    script.push('"');
    Rendered {
        program: "osascript",
        args: ["-l", "AppleScript", "-s", "h"].map(str::to_owned).to_vec(),
        stdin: script,
    }
}

/// The app's reply to an Apple event: the JSON envelope it returned, read like the D-Bus
/// JSON convention's.
pub(crate) fn read_event_reply(stdout: &str) -> Result<Value, Error> {
    let envelope =
        super::envelope::parse(stdout.trim()).map_err(|e| Error::Reply(e.to_string()))?;
    match super::envelope::reply(&envelope, "the app") {
        super::envelope::Reply::Done(result) => result.map_err(Error::Reported),
        super::envelope::Reply::Progress(_) => Err(Error::ProgressOnly),
    }
}

/// A value as the text a string literal receives.
fn text_of(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value placed in code: numbers and booleans only.
fn code_of(lang: Lang, name: &str, value: &Value) -> Result<String, Error> {
    match value {
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Ok(match lang {
            Lang::AppleScript => "missing value".to_owned(),
            Lang::JavaScript => "null".to_owned(),
        }),
        _ => Err(Error::NotCode(name.to_owned())),
    }
}

/// Appends `text` inside an AppleScript `"…"` literal.
fn applescript_text(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' | '\t' => out.push(c),
            // Curly quotes (AppleScript reads “…” as quotes too), controls, NUL and line
            // separators never appear raw: the literal is closed, the character is added
            // by its number, and the literal goes on.
            c if c.is_control()
                || matches!(
                    c,
                    '\u{201C}' | '\u{201D}' | '\u{2028}' | '\u{2029}' | '\u{FEFF}'
                ) =>
            {
                let _ = write!(out, "\" & (character id {}) & \"", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

/// Appends `text` inside a JavaScript string or template literal: everything but a few
/// inert characters as `\uXXXX`, so no quote, backslash, `${` or line end can appear.
fn javascript_text(out: &mut String, text: &str, _quote: Quote) {
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '.' | ',' | ':' | '@' | '-' | '+') {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
    }
}

/// What the script printed, as the tool's result.
pub(crate) fn read(output: ScriptOutput, stdout: &str) -> Result<Value, Error> {
    let text = stdout.strip_suffix('\n').unwrap_or(stdout);
    let json = || serde_json::from_str::<Value>(text.trim()).ok();
    match output {
        ScriptOutput::Text => Ok(json().unwrap_or_else(|| Value::String(text.to_owned()))),
        ScriptOutput::Record => {
            if let Some(v) = json() {
                return Ok(v);
            }
            let text = text.trim();
            let value = record::parse(text).map_err(Error::NotRecord)?;
            // Bare text that is no AppleScript value at all is not a record either.
            if matches!(value, Value::String(_)) && !text.starts_with('"') {
                return Err(Error::NotRecord(format!(
                    "`{}`",
                    crate::text::excerpt(text, 80)
                )));
            }
            Ok(value)
        }
    }
}

/// The error number osascript ends its report with (`… (-1743)`).
fn error_number(stderr: &str) -> Option<i32> {
    stderr
        .trim()
        .strip_suffix(')')
        .and_then(|m| m.rsplit_once('('))
        .and_then(|(_, n)| n.trim().parse::<i32>().ok())
}

/// osascript's error (`… execution error: Not authorized … (-1743)`), by its number.
pub(crate) fn failure(app: &str, stderr: &str) -> Error {
    let message = stderr.trim();
    let said = crate::text::excerpt(message, 500);
    let app = app.to_owned();
    match error_number(message) {
        Some(-1743) => Error::NotAllowed { app, said },
        Some(-600 | -609) => Error::NotRunning { app, said },
        Some(-2740 | -2741) => Error::Compile(said),
        Some(-1712) => Error::NoAnswer { app, said },
        Some(-128) => Error::UserCancelled(said),
        _ => Error::Osascript(said),
    }
}

/// The code of an AppleScript (literals emptied, comments dropped), with the joins that
/// splicing a character by number adds (`" & (character id N) & "`) taken out: what a
/// rendered value must never change (tests).
#[cfg(test)]
pub(crate) fn applescript_code(script: &str) -> String {
    let mut s = aai_descriptor::script::skeleton(Lang::AppleScript, script).unwrap();
    while let Some(at) = s.find(" & (character id ") {
        let end = s[at..].find(") & ").map_or(s.len(), |e| at + e + 4);
        // `"" & (character id N) & ""` → `""`
        s.replace_range(at..(end + 2).min(s.len()), "");
    }
    s
}

/// Runs AppleScript and JXA tools, and sends Apple events.
#[derive(Debug, Default)]
pub(crate) struct ScriptExecutor;

impl ScriptExecutor {
    /// One tool call as an Apple event carrying the JSON envelope.
    async fn send_event(
        &self,
        events: &aai_descriptor::AppleEvents,
        req: &Request<'_>,
    ) -> Result<Value, Error> {
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).expect("the OS has randomness");
        let envelope = super::envelope::request(
            &req.tool.name,
            &req.args,
            &format!("{:016x}", u64::from_le_bytes(id)),
        );
        let rendered = render_event(events, &envelope);
        let stdout = match osascript(&rendered, req).await {
            // The event never reached the app: launch it once, then send it again.
            Err(Osa::Refused(e)) if e.app_not_running() => {
                tracing::info!(app = %req.app, "the app is not running; launching it once");
                run(&render_launch(&events.bundle_id), req).await?;
                run(&rendered, req).await?
            }
            other => other.map_err(|e| e.into_error(req.app))?,
        };
        read_event_reply(&stdout)
    }
}

/// `tell application id "…" to launch`: starts the app without bringing it forward.
pub(crate) fn render_launch(bundle_id: &str) -> Rendered {
    let mut script = String::from("tell application id \"");
    applescript_text(&mut script, bundle_id);
    script.push_str("\" to launch");
    Rendered {
        program: "osascript",
        args: ["-l", "AppleScript", "-s", "h"].map(str::to_owned).to_vec(),
        stdin: script,
    }
}

/// How running osascript went wrong.
enum Osa {
    /// It could not run, or ran out of time.
    Run(RunError),
    /// It ran and reported an error.
    Refused(OsaError),
}

/// osascript's own error report.
struct OsaError {
    stderr: String,
}

impl OsaError {
    /// The AppleScript error number at the end of the report (`… (-1743)`).
    fn number(&self) -> Option<i32> {
        error_number(&self.stderr)
    }

    /// The app was not running (an Apple event could not reach it).
    fn app_not_running(&self) -> bool {
        matches!(self.number(), Some(-600 | -609))
    }
}

impl Osa {
    fn into_error(self, app: &str) -> Error {
        match self {
            Osa::Run(e) => e.into(),
            Osa::Refused(e) => failure(app, &e.stderr),
        }
    }
}

/// Runs osascript; its stdout, or how it failed.
async fn osascript(rendered: &Rendered, req: &Request<'_>) -> Result<String, Osa> {
    let out = super::run_once(
        req,
        rendered.program,
        &rendered.args,
        rendered.stdin.as_bytes(),
        MAX_OUTPUT,
    )
    .await
    .map_err(Osa::Run)?;
    if !out.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        return Err(Osa::Refused(OsaError { stderr }));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs osascript; its stdout, or the mapped error.
async fn run(rendered: &Rendered, req: &Request<'_>) -> Result<String, Error> {
    osascript(rendered, req)
        .await
        .map_err(|e| e.into_error(req.app))
}

impl Execute for ScriptExecutor {
    async fn execute(&self, req: Request<'_>) -> Result<Value, super::Error> {
        let lang = match req.executor {
            Executor::Applescript => Lang::AppleScript,
            Executor::Jxa => Lang::JavaScript,
            Executor::AppleEvents(events) => return Ok(self.send_event(events, &req).await?),
            other => return Err(Error::NotScript(other.kind().as_str()).into()),
        };
        let ToolCall::Script { source, output } = &req.tool.call else {
            return Err(Error::NoScript.into());
        };
        let rendered = render(lang, source, *output, &req.args)?;
        let stdout = run(&rendered, &req).await?;
        Ok(read(*output, &stdout)?)
    }
}

#[cfg(test)]
#[path = "script_tests.rs"]
mod tests;
