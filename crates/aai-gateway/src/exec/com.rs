//! The COM executor (Windows) through PowerShell.
//!
//! * [`render`] (pure, tested on every OS) turns a D0 action list (`create`, `call`,
//!   `set`, `get`, `return`) into one PowerShell script, or a D2 `progId` binding into a
//!   call of `Execute(<JSON envelope>)` on the object. **No argument value is ever part of
//!   the script**: every value a step uses (literal or `${param}` template) is filled in
//!   here and handed to PowerShell as one JSON document on standard input, which the
//!   script reads with `ConvertFrom-Json` and refers to by index (`$in.values[3]`). The
//!   script holds only what the descriptor fixed and the parser validated: ProgIDs,
//!   variable, method and property names (identifiers).
//! * A value that is exactly one placeholder (`"${count}"`) keeps its JSON type; a mixed
//!   template becomes text.
//! * PowerShell runs as `powershell.exe` (else `pwsh`) with `-NoProfile -NonInteractive
//!   -ExecutionPolicy Bypass -EncodedCommand <script>`; the JSON document is its standard
//!   input.
//! * `output_parser: last_result`: the script prints the last value as JSON.
//! * Errors print `HRESULT 0x…: message`; [`failure`] maps the HRESULT to the codes of
//!   docs/design.md, Errors, and the executor retries a busy app (`RPC_E_CALL_REJECTED`,
//!   `RPC_E_SERVERCALL_RETRYLATER`) with bounded backoff (docs/design.md, Executors).

use std::fmt::Write as _;
use std::time::Duration;

use aai_descriptor::{ComStep, Executor, ToolCall};
use serde_json::{Value, json};

use super::{Execute, Request};
use crate::error::{Code, GatewayError};
use crate::exec::process::RunError;

/// How a COM call failed. `From<Error> for GatewayError` below gives the wire codes
/// (HRESULTs: docs/design.md, Errors).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The binding is not a COM binding (the loader pairs them; a guard).
    #[error("not a COM binding")]
    NotCom,
    /// Neither an action list nor a `progId`.
    #[error("a COM tool needs an action list or the binding's `progId`")]
    NoCall,
    /// A name in the action list is not an identifier.
    #[error("`{0}` is not a COM member name")]
    Member(String),
    /// PowerShell could not be run.
    #[error(transparent)]
    Run(#[from] RunError),
    /// REGDB_E_CLASSNOTREG.
    #[error(
        "`{app}`'s COM class is not registered on this machine (is the app installed?): {said}"
    )]
    NotRegistered {
        /// The app id.
        app: String,
        /// What PowerShell said, cut.
        said: String,
    },
    /// MK_E_UNAVAILABLE.
    #[error("`{app}` is not running (MK_E_UNAVAILABLE): {said}")]
    NotRunning {
        /// The app id.
        app: String,
        /// What PowerShell said, cut.
        said: String,
    },
    /// E_ACCESSDENIED.
    #[error("access to `{app}` was denied (E_ACCESSDENIED): {said}")]
    Denied {
        /// The app id.
        app: String,
        /// What PowerShell said, cut.
        said: String,
    },
    /// RPC_E_CALL_REJECTED or RPC_E_SERVERCALL_RETRYLATER: worth trying again.
    #[error("`{app}` stayed busy and rejected the call: {said}")]
    Busy {
        /// The app id.
        app: String,
        /// What PowerShell said, cut.
        said: String,
    },
    /// Any other failure of the script.
    #[error("{}", super::said("PowerShell", .0))]
    PowerShell(String),
    /// The client cancelled the call while the app was busy.
    #[error("the call was cancelled")]
    Cancelled,
    /// `Execute` answered something that is not a reply envelope.
    #[error("the app's Execute: {0}")]
    Envelope(String),
    /// `Execute` answered with progress instead of a result.
    #[error("the app's Execute answered with progress, not a result")]
    ProgressOnly,
    /// `Execute` answered with an error envelope.
    #[error(transparent)]
    Reported(#[from] super::envelope::Failure),
}

impl Error {
    /// The app was busy: the call may be tried again.
    pub fn busy(&self) -> bool {
        matches!(self, Error::Busy { .. })
    }
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match e {
            Error::Run(run) => return run.into(),
            Error::Reported(failure) => return failure.into(),
            Error::NotCom | Error::NotRegistered { .. } => Code::AutomationNotSupported,
            Error::NoCall | Error::Member(_) => Code::AaiJsonInvalid,
            Error::NotRunning { .. } => Code::AppNotRunning,
            Error::Denied { .. } => Code::PermissionDenied,
            Error::Busy { .. } => Code::ServiceUnavailable,
            Error::PowerShell(_) | Error::Cancelled | Error::Envelope(_) | Error::ProgressOnly => {
                Code::AutomationFailed
            }
        };
        GatewayError::new(code, e.to_string())
    }
}

/// Most output kept.
const MAX_OUTPUT: usize = 4 * 1024 * 1024;
/// Attempts of a call whose app is busy, and the first pause between them.
const BUSY_ATTEMPTS: u32 = 4;
const BUSY_PAUSE: Duration = Duration::from_millis(250);

/// A PowerShell run, ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rendered {
    /// The arguments of PowerShell (the script, encoded, is the last).
    pub args: Vec<String>,
    /// Standard input: the JSON document with every value.
    pub stdin: String,
    /// The script (for golden files and tests).
    pub script: String,
}

/// The arguments every PowerShell run gets before its script.
pub(crate) const ARGS: [&str; 5] = [
    "-NoProfile",
    "-NonInteractive",
    "-ExecutionPolicy",
    "Bypass",
    "-EncodedCommand",
];

/// `'…'` for PowerShell: single quotes doubled. Used only for names the parser checked
/// (ProgIDs, identifiers), as a second wall.
fn quoted(name: &str) -> String {
    format!("'{}'", name.replace('\'', "''"))
}

/// A checked identifier (method, property), or an error naming it.
fn ident(name: &str) -> Result<&str, Error> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(name)
    } else {
        Err(Error::Member(name.to_owned()))
    }
}

const PROLOGUE: &str = "$ErrorActionPreference = 'Stop'
$in = [Console]::In.ReadToEnd() | ConvertFrom-Json
$v = @{}
$last = $null
try {
";

const EPILOGUE: &str =
    "  [Console]::Out.Write((ConvertTo-Json -InputObject $last -Depth 16 -Compress))
} catch {
  $e = $_.Exception
  while ($e.InnerException) { $e = $e.InnerException }
  [Console]::Error.Write(('HRESULT 0x{0:X8}: {1}' -f $e.HResult, $e.Message))
  exit 1
}
";

/// The PowerShell run of a D0 action list with `args`.
pub(crate) fn render_steps(steps: &[ComStep], args: &Value) -> Result<Rendered, Error> {
    let mut values = Vec::new();
    let mut value = |v: &Value| {
        values.push(super::template::fill(v, args));
        format!("$in.values[{}]", values.len() - 1)
    };
    let mut script = String::from(PROLOGUE);
    for step in steps {
        match step {
            ComStep::Create { var, prog_id } => {
                let _ = writeln!(
                    script,
                    "  $v[{}] = New-Object -ComObject {}\n  $last = $v[{0}]",
                    quoted(ident(var)?),
                    quoted(prog_id)
                );
            }
            ComStep::Call {
                var,
                object,
                method,
                args: call_args,
            } => {
                let list: Vec<String> = call_args.iter().map(&mut value).collect();
                let _ = writeln!(
                    script,
                    "  $last = $v[{}].{}({})",
                    quoted(ident(object)?),
                    ident(method)?,
                    list.join(", ")
                );
                if let Some(var) = var {
                    let _ = writeln!(script, "  $v[{}] = $last", quoted(ident(var)?));
                }
            }
            ComStep::Set {
                object,
                property,
                value: v,
            } => {
                let _ = writeln!(
                    script,
                    "  $v[{}].{} = {}",
                    quoted(ident(object)?),
                    ident(property)?,
                    value(v)
                );
            }
            ComStep::Get {
                var,
                object,
                property,
            } => {
                let _ = writeln!(
                    script,
                    "  $last = $v[{}].{}",
                    quoted(ident(object)?),
                    ident(property)?
                );
                if let Some(var) = var {
                    let _ = writeln!(script, "  $v[{}] = $last", quoted(ident(var)?));
                }
            }
            ComStep::Return { value: v, var } => match (v, var) {
                (_, Some(var)) => {
                    let _ = writeln!(script, "  $last = $v[{}]", quoted(ident(var)?));
                }
                (Some(v), None) => {
                    let _ = writeln!(script, "  $last = {}", value(v));
                }
                (None, None) => {}
            },
        }
    }
    script.push_str(EPILOGUE);
    Ok(finish(script, json!({ "values": values })))
}

/// The PowerShell run of a D2 `progId` binding: `Execute(<envelope>)` on the object.
pub(crate) fn render_envelope(prog_id: &str, envelope: &Value) -> Rendered {
    let mut script = String::from(PROLOGUE);
    let _ = writeln!(
        script,
        "  $o = New-Object -ComObject {}\n  $last = $o.Execute([string]$in.envelope)",
        quoted(prog_id)
    );
    script.push_str(EPILOGUE);
    finish(
        script,
        json!({ "envelope": serde_json::to_string(envelope).unwrap_or_default() }),
    )
}

fn finish(script: String, values: Value) -> Rendered {
    let mut args: Vec<String> = ARGS.iter().map(|s| (*s).to_owned()).collect();
    args.push(crate::text::powershell_encoded(&script));
    Rendered {
        args,
        stdin: values.to_string(),
        script,
    }
}

/// What went wrong, from the `HRESULT 0x…: message` the script prints.
pub(crate) fn failure(app: &str, stderr: &str) -> Error {
    let said = crate::text::excerpt(stderr.trim(), 500);
    let hresult = stderr
        .find("HRESULT 0x")
        .and_then(|at| u32::from_str_radix(stderr.get(at + 10..at + 18)?, 16).ok());
    let app = app.to_owned();
    match hresult {
        Some(0x8004_0154) => Error::NotRegistered { app, said },
        Some(0x8004_01E3) => Error::NotRunning { app, said },
        Some(0x8007_0005) => Error::Denied { app, said },
        Some(0x8001_0001 | 0x8001_010A) => Error::Busy { app, said },
        _ => Error::PowerShell(said),
    }
}

/// What the script printed: its last value as JSON (text when it is not JSON). A string
/// that itself holds a JSON object or array (the `return` of `"{\"success\":true}"` in the
/// Outlook example, `fixtures/valid/d0-mail.json`) is that object or array, as
/// `result as text` reads it on macOS.
pub(crate) fn read(stdout: &str) -> Value {
    let text = stdout.trim();
    if text.is_empty() {
        return Value::Null;
    }
    match serde_json::from_str(text) {
        Ok(Value::String(inner)) => match serde_json::from_str::<Value>(&inner) {
            Ok(v @ (Value::Object(_) | Value::Array(_))) => v,
            _ => Value::String(inner),
        },
        Ok(v) => v,
        Err(_) => Value::String(text.to_owned()),
    }
}

/// Runs COM tools.
#[derive(Debug, Default)]
pub(crate) struct ComExecutor;

impl Execute for ComExecutor {
    async fn execute(&self, req: Request<'_>) -> Result<Value, super::Error> {
        let Executor::Com(com) = req.executor else {
            return Err(Error::NotCom.into());
        };
        let rendered = match (&req.tool.call, &com.prog_id) {
            (ToolCall::ComScript { steps }, _) => render_steps(steps, &req.args)?,
            (ToolCall::Envelope, Some(prog_id)) => {
                let id = format!("{:016x}", rand::random_id());
                let envelope = super::envelope::request(&req.tool.name, &req.args, &id);
                render_envelope(prog_id, &envelope)
            }
            _ => return Err(Error::NoCall.into()),
        };
        let program = if crate::host::on_path("powershell.exe").is_some() {
            "powershell.exe"
        } else {
            "pwsh"
        };
        let mut pause = BUSY_PAUSE;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let out = super::run_once(
                &req,
                program,
                &rendered.args,
                rendered.stdin.as_bytes(),
                MAX_OUTPUT,
            )
            .await
            .map_err(Error::from)?;
            if out.success() {
                let value = read(&String::from_utf8_lossy(&out.stdout));
                return match &req.tool.call {
                    ToolCall::Envelope => Ok(envelope_reply(&value)?),
                    _ => Ok(value),
                };
            }
            let failed = failure(req.app, &String::from_utf8_lossy(&out.stderr));
            if !failed.busy() || attempt == BUSY_ATTEMPTS {
                return Err(failed.into());
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = req.ctx.cancel.cancelled() => return Err(Error::Cancelled.into()),
            }
            pause *= 2;
        }
    }
}

/// What `Execute` answered: the reply envelope, as text (or already parsed).
fn envelope_reply(value: &Value) -> Result<Value, Error> {
    let envelope = match value {
        Value::String(text) => {
            super::envelope::parse(text).map_err(|e| Error::Envelope(e.to_string()))?
        }
        other => other.clone(),
    };
    match super::envelope::reply(&envelope, "the app") {
        super::envelope::Reply::Done(result) => result.map_err(Error::Reported),
        super::envelope::Reply::Progress(_) => Err(Error::ProgressOnly),
    }
}

mod rand {
    /// A random request id.
    pub(super) fn random_id() -> u64 {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b).expect("the OS has randomness");
        u64::from_le_bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outlook() -> Vec<ComStep> {
        let app = aai_descriptor::parse(
            include_str!("../../../../fixtures/valid/d0-mail.json"),
            "d0-mail.json",
        )
        .app
        .unwrap();
        let windows = app
            .bindings
            .iter()
            .find(|b| matches!(b.executor, Executor::Com(_)))
            .unwrap();
        match &windows.tools[0].call {
            ToolCall::ComScript { steps } => steps.clone(),
            other => panic!("{other:?}"),
        }
    }

    const OUTLOOK_SCRIPT: &str = "$ErrorActionPreference = 'Stop'
$in = [Console]::In.ReadToEnd() | ConvertFrom-Json
$v = @{}
$last = $null
try {
  $v['app'] = New-Object -ComObject 'Outlook.Application'
  $last = $v['app']
  $last = $v['app'].CreateItem($in.values[0])
  $v['mail'] = $last
  $v['mail'].To = $in.values[1]
  $v['mail'].Subject = $in.values[2]
  $v['mail'].Body = $in.values[3]
  $last = $v['mail'].Send()
  $last = $in.values[4]
  [Console]::Out.Write((ConvertTo-Json -InputObject $last -Depth 16 -Compress))
} catch {
  $e = $_.Exception
  while ($e.InnerException) { $e = $e.InnerException }
  [Console]::Error.Write(('HRESULT 0x{0:X8}: {1}' -f $e.HResult, $e.Message))
  exit 1
}
";

    #[test]
    fn the_spec_outlook_action_list_becomes_this_script() {
        let r = render_steps(
            &outlook(),
            &json!({"to": "bob@example.com", "subject": "Hi", "body": "Text"}),
        )
        .unwrap();
        assert_eq!(r.script, OUTLOOK_SCRIPT);
        assert_eq!(
            serde_json::from_str::<Value>(&r.stdin).unwrap(),
            json!({"values": [0, "bob@example.com", "Hi", "Text", "{\"success\":true, \"message_id\":\"generated\"}"]})
        );
        assert_eq!(r.args[..5], ARGS);
        assert_eq!(r.args.len(), 6);
    }

    #[test]
    fn no_value_reaches_the_script() {
        for value in [
            "'; Remove-Item -Recurse ~; '",
            "\"$(Get-Process)\" `n `$env:PATH",
            "@'\nhere\n'@",
            "\u{2018}smart\u{2019} \u{201C}quotes\u{201D}",
            "nul\u{0}",
            &"x".repeat(100 * 1024),
        ] {
            let r = render_steps(
                &outlook(),
                &json!({"to": value, "subject": value, "body": value}),
            )
            .unwrap();
            assert_eq!(r.script, OUTLOOK_SCRIPT, "the script never changes");
            let values: Value = serde_json::from_str(&r.stdin).unwrap();
            assert_eq!(values["values"][2], json!(value));
        }
    }

    #[test]
    fn execute_envelopes_are_data_too() {
        let envelope = json!({"version": "1.0", "tool": "search", "params": {"query": "'; rm"}, "request_id": "1"});
        let r = render_envelope("Example.Application", &envelope);
        assert!(
            r.script
                .contains("New-Object -ComObject 'Example.Application'")
        );
        assert!(r.script.contains("$o.Execute([string]$in.envelope)"));
        assert!(!r.script.contains("rm"));
        let sent: Value = serde_json::from_str(&r.stdin).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(sent["envelope"].as_str().unwrap()).unwrap(),
            envelope
        );
    }

    #[test]
    fn hresults_map_to_the_documented_codes() {
        let code = |stderr: &str| {
            let e = failure("com.example", stderr);
            (e.busy(), GatewayError::from(e).code)
        };
        assert_eq!(
            code("HRESULT 0x80040154: Class not registered"),
            (false, Code::AutomationNotSupported)
        );
        assert_eq!(
            code("HRESULT 0x800401E3: Operation unavailable"),
            (false, Code::AppNotRunning)
        );
        assert_eq!(
            code("HRESULT 0x80070005: Access is denied."),
            (false, Code::PermissionDenied)
        );
        assert_eq!(
            code("HRESULT 0x80010001: Call was rejected by callee."),
            (true, Code::ServiceUnavailable)
        );
        assert_eq!(
            code("HRESULT 0x8001010A: The message filter indicated that the application is busy."),
            (true, Code::ServiceUnavailable)
        );
        assert_eq!(
            code("HRESULT 0x80020009: Exception occurred."),
            (false, Code::AutomationFailed)
        );
        assert_eq!(code("something else"), (false, Code::AutomationFailed));
    }

    #[test]
    fn results_are_json() {
        assert_eq!(read("{\"success\":true}"), json!({"success": true}));
        assert_eq!(read("\"{\\\"a\\\":1}\""), json!({"a": 1}));
        assert_eq!(read("\"plain\""), json!("plain"));
        assert_eq!(read(""), Value::Null);
        assert_eq!(read("not json"), json!("not json"));
    }
}
