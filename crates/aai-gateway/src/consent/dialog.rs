//! Native consent dialogs, the channel after MCP elicitation: when the gateway runs where a
//! person sees a screen, it asks them itself.
//!
//! * Linux: `zenity` (else `kdialog`) when `DISPLAY` or `WAYLAND_DISPLAY` is set.
//! * macOS: `osascript` (`choose from list`).
//! * Windows: Windows PowerShell (`powershell.exe`) showing a WinForms window with the four
//!   choices as buttons.
//! * `AAI_CONSENT_DIALOG=zenity|kdialog|osascript|powershell|none` picks one (or none, for
//!   a machine whose screen nobody watches).
//!
//! The question reaches the dialog as data, never as code: argv entries for zenity,
//! kdialog and osascript (the AppleScript is fixed text that reads its last argument), an
//! environment variable for PowerShell (the script, fixed text, is passed encoded). Pango
//! markup is escaped for zenity (the caller's name is chosen by the client). The dialog
//! gives up after two minutes; closing it is no answer. `render` is pure and tested on
//! every OS; only `ask` runs a program.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use crate::consent::{Choice, Prompter, Question, Reply};
use crate::exec::process::{self, Limits, Spec};
use crate::host::Os;

/// How long a dialog waits for the person.
const WAIT: Duration = Duration::from_secs(120);

/// The environment variable that carries the question to PowerShell.
const QUESTION_VAR: &str = "AAI_CONSENT_QUESTION";

/// The window title of every dialog.
const TITLE: &str = "aai-gateway: allow this call?";

/// A dialog program and how to ask with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialog {
    /// GNOME's zenity.
    Zenity,
    /// KDE's kdialog.
    Kdialog,
    /// macOS AppleScript.
    Osascript,
    /// Windows PowerShell with WinForms.
    PowerShell,
}

/// A dialog ready to run: the program, its arguments, extra environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rendered {
    /// The program (looked up on `PATH`).
    pub program: &'static str,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to its environment.
    pub env: Vec<(String, String)>,
}

impl Dialog {
    /// The dialog this machine can show, if any: `AAI_CONSENT_DIALOG`, else this OS's own
    /// (on Linux only with a display).
    pub(crate) fn available() -> Option<Dialog> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let chosen = match env("AAI_CONSENT_DIALOG").as_deref() {
            Some("none") => return None,
            Some(name) => match Dialog::named(name) {
                Some(d) => Some(d),
                None => {
                    tracing::warn!(
                        "AAI_CONSENT_DIALOG={name} is not one of zenity, kdialog, osascript, powershell, none; no dialog is shown"
                    );
                    return None;
                }
            },
            None => None,
        };
        let candidates = match (chosen, Os::current()) {
            (Some(d), _) => vec![d],
            (None, Os::Linux) => {
                if env("DISPLAY").is_none() && env("WAYLAND_DISPLAY").is_none() {
                    return None;
                }
                vec![Dialog::Zenity, Dialog::Kdialog]
            }
            (None, Os::Macos) => vec![Dialog::Osascript],
            (None, Os::Windows) => vec![Dialog::PowerShell],
            (None, Os::Other) => Vec::new(),
        };
        candidates
            .into_iter()
            .find(|d| crate::host::on_path(d.program()).is_some())
    }

    fn named(name: &str) -> Option<Dialog> {
        [
            Dialog::Zenity,
            Dialog::Kdialog,
            Dialog::Osascript,
            Dialog::PowerShell,
        ]
        .into_iter()
        .find(|d| d.name() == name)
    }

    /// The name `AAI_CONSENT_DIALOG` uses.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Dialog::Zenity => "zenity",
            Dialog::Kdialog => "kdialog",
            Dialog::Osascript => "osascript",
            Dialog::PowerShell => "powershell",
        }
    }

    /// The program it runs.
    pub(crate) fn program(self) -> &'static str {
        match self {
            Dialog::Zenity => "zenity",
            Dialog::Kdialog => "kdialog",
            Dialog::Osascript => "osascript",
            Dialog::PowerShell => "powershell.exe",
        }
    }

    /// The program, arguments and environment for `question` (pure: tested on every OS).
    pub(crate) fn render(self, question: &Question) -> Rendered {
        let mut args: Vec<String> = Vec::new();
        let mut env = Vec::new();
        match self {
            Dialog::Zenity => {
                args.extend(
                    [
                        "--list",
                        "--radiolist",
                        "--title",
                        TITLE,
                        "--width",
                        "560",
                        "--height",
                        "330",
                        "--hide-column",
                        "2",
                        "--print-column",
                        "2",
                        "--column",
                        "",
                        "--column",
                        "value",
                        "--column",
                        "Choice",
                    ]
                    .map(str::to_owned),
                );
                args.push("--text".into());
                args.push(escape_markup(&question.text()));
                for (i, (_, value, title)) in Choice::ALL.iter().enumerate() {
                    args.push(if i == 0 { "TRUE" } else { "FALSE" }.into());
                    args.push((*value).into());
                    args.push((*title).into());
                }
            }
            Dialog::Kdialog => {
                args.extend(["--title", TITLE, "--radiolist"].map(str::to_owned));
                args.push(question.text());
                for (i, (_, value, title)) in Choice::ALL.iter().enumerate() {
                    args.push((*value).into());
                    args.push((*title).into());
                    args.push(if i == 0 { "on" } else { "off" }.into());
                }
            }
            Dialog::Osascript => {
                for line in applescript() {
                    args.push("-e".into());
                    args.push(line);
                }
                // The question is the script's last argument (`item -1 of argv`), after
                // `--` so that a text starting with `-` is not read as an option.
                args.push("--".into());
                args.push(question.text());
            }
            Dialog::PowerShell => {
                args.extend(
                    [
                        "-NoProfile",
                        "-NonInteractive",
                        "-ExecutionPolicy",
                        "Bypass",
                        "-EncodedCommand",
                    ]
                    .map(str::to_owned),
                );
                args.push(crate::text::powershell_encoded(&powershell_script()));
                env.push((QUESTION_VAR.to_owned(), question.text()));
            }
        }
        Rendered {
            program: self.program(),
            args,
            env,
        }
    }
}

/// The AppleScript, one `-e` line each: the four choices by title, the answer by value.
fn applescript() -> Vec<String> {
    let list = |f: fn(&(Choice, &'static str, &'static str)) -> &'static str| {
        let items: Vec<String> = Choice::ALL
            .iter()
            .map(|c| format!("\"{}\"", f(c)))
            .collect();
        format!("{{{}}}", items.join(", "))
    };
    vec![
        "on run argv".to_owned(),
        format!("set titles to {}", list(|c| c.2)),
        format!("set answers to {}", list(|c| c.1)),
        format!(
            "set picked to choose from list titles with title \"{TITLE}\" with prompt (item -1 of argv) default items {{item 1 of titles}} OK button name \"Answer\" cancel button name \"Dismiss\""
        ),
        "if picked is false then return \"\"".to_owned(),
        "repeat with i from 1 to count of titles".to_owned(),
        "if item i of titles is item 1 of picked then return item i of answers".to_owned(),
        "end repeat".to_owned(),
        "return \"\"".to_owned(),
        "end run".to_owned(),
    ]
}

/// The PowerShell script: a small WinForms window, the question from `$env:AAI_CONSENT_QUESTION`,
/// one button per choice; prints the chosen value.
fn powershell_script() -> String {
    let buttons: Vec<String> = Choice::ALL
        .iter()
        .map(|(_, value, title)| format!("@('{value}','{title}')"))
        .collect();
    format!(
        r#"$ErrorActionPreference = 'Stop'
Add-Type -AssemblyName System.Windows.Forms
Add-Type -AssemblyName System.Drawing
$form = New-Object System.Windows.Forms.Form
$form.Text = '{TITLE}'
$form.TopMost = $true
$form.AutoSize = $true
$form.AutoSizeMode = 'GrowAndShrink'
$form.StartPosition = 'CenterScreen'
$panel = New-Object System.Windows.Forms.FlowLayoutPanel
$panel.FlowDirection = 'TopDown'
$panel.AutoSize = $true
$panel.Padding = 12
$label = New-Object System.Windows.Forms.Label
$label.Text = $env:{QUESTION_VAR}
$label.UseMnemonic = $false
$label.AutoSize = $true
$label.MaximumSize = New-Object System.Drawing.Size(480, 0)
$panel.Controls.Add($label)
foreach ($c in @({buttons})) {{
  $b = New-Object System.Windows.Forms.Button
  $b.Text = $c[1]
  $b.Tag = $c[0]
  $b.AutoSize = $true
  $b.Add_Click({{ $form.Tag = $this.Tag; $form.Close() }})
  $panel.Controls.Add($b)
}}
$form.Controls.Add($panel)
[void]$form.ShowDialog()
if ($form.Tag) {{ [Console]::Out.Write($form.Tag) }}
"#,
        buttons = buttons.join(",")
    )
}

/// `&`, `<`, `>` escaped: zenity reads its text as Pango markup.
fn escape_markup(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Prompter for Dialog {
    fn ask<'a>(
        &'a self,
        question: &'a Question,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
        Box::pin(async move {
            let mut rendered = self.render(question);
            if matches!(self, Dialog::Zenity | Dialog::Kdialog) {
                let var = |k: &str| std::env::var(k).ok();
                rendered.env.extend(utf8_locale(&var));
            }
            let spec = Spec {
                program: rendered.program,
                args: &rendered.args,
                env: &rendered.env,
                base_dir: Path::new("/"),
                label: "consent dialog",
            };
            let limits = Limits {
                deadline: WAIT,
                max_output: 4096,
                cancel: tokio_util::sync::CancellationToken::new(),
            };
            match process::run(&spec, b"", &limits).await {
                Ok(output) => read_reply(output.success(), &output.stdout, &output.stderr),
                // Two minutes without an answer: the person was asked and did not answer.
                Err(process::RunError::TimedOut(_)) => Reply::Declined,
                Err(e) => Reply::Unavailable(format!("{} did not run: {e}", rendered.program)),
            }
        })
    }
}

/// `LC_ALL=C.UTF-8` when the environment names no UTF-8 locale: GTK and Qt refuse
/// arguments that are not text in the locale's charset, and a question holds app names,
/// arguments and dashes in any script (MCP clients often start servers without `LANG`).
fn utf8_locale(var: &dyn Fn(&str) -> Option<String>) -> Option<(String, String)> {
    // The first of LC_ALL, LC_CTYPE, LANG that is set decides, as in glibc.
    let effective = ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|k| var(k).filter(|v| !v.is_empty()));
    let utf8 = effective.is_some_and(|v| {
        let v = v.to_ascii_lowercase();
        v.contains("utf-8") || v.contains("utf8")
    });
    (!utf8).then(|| ("LC_ALL".to_owned(), "C.UTF-8".to_owned()))
}

/// What a dialog's exit means: its choice, a person closing it, or a dialog that never
/// opened. zenity and kdialog exit 1 both when closed and when they cannot reach the
/// display; only their message tells the two apart.
fn read_reply(success: bool, stdout: &[u8], stderr: &[u8]) -> Reply {
    if success {
        return Choice::parse(String::from_utf8_lossy(stdout).trim())
            .map_or(Reply::Declined, Reply::Chosen);
    }
    let said = String::from_utf8_lossy(stderr).to_lowercase();
    const NO_DISPLAY: [&str; 6] = [
        "cannot open display",
        "can't open display",
        "could not connect to display",
        "cannot connect to x server",
        "failed to open display",
        "could not load the qt platform plugin",
    ];
    match NO_DISPLAY.iter().find(|m| said.contains(*m)) {
        Some(m) => Reply::Unavailable(format!("the dialog could not open: {m}")),
        None => Reply::Declined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Caller;

    const HOSTILE: &str = "-e <b>evil</b> & \"$(rm -rf ~)\" `x` \\ '";

    fn question() -> Question {
        let caller = Caller {
            name: HOSTILE.into(),
            transport: "stdio",
            token: None,
            person: None,
        };
        Question::for_call(&caller, "com.a", "A", "send", "Send")
    }

    #[test]
    fn the_question_is_data_and_markup_is_escaped() {
        let r = Dialog::Zenity.render(&question());
        assert_eq!(r.program, "zenity");
        let text = &r.args[r.args.iter().position(|a| a == "--text").unwrap() + 1];
        assert!(text.starts_with(
            "-e &lt;b&gt;evil&lt;/b&gt; &amp; \"$(rm -rf ~)\" `x` \\ ' wants to run `send`"
        ));
        assert_eq!(
            &r.args[r.args.len() - 12..r.args.len() - 9],
            ["TRUE", "once", "Allow once"]
        );
        let r = Dialog::Kdialog.render(&question());
        assert_eq!(r.program, "kdialog");
        assert!(r.args.contains(&"deny".to_owned()));
        assert!(r.args.contains(&question().text()));
    }

    #[test]
    fn osascript_reads_the_question_as_its_last_argument() {
        let q = question();
        let r = Dialog::Osascript.render(&q);
        assert_eq!(r.program, "osascript");
        assert!(r.env.is_empty());
        let n = r.args.len();
        assert_eq!(r.args[n - 2..], ["--".to_owned(), q.text()]);
        // Every other argument is a fixed `-e` script line without the question in it.
        for pair in r.args[..n - 2].chunks(2) {
            assert_eq!(pair[0], "-e");
            assert!(!pair[1].contains("evil"), "{}", pair[1]);
        }
        let script: Vec<&str> = r.args[..n - 2]
            .iter()
            .skip(1)
            .step_by(2)
            .map(String::as_str)
            .collect();
        assert_eq!(script[0], "on run argv");
        assert!(script.contains(&"set answers to {\"once\", \"tool\", \"app\", \"deny\"}"));
        assert_eq!(script.last(), Some(&"end run"));
    }

    #[test]
    fn dialogs_get_a_utf8_locale_when_the_environment_has_none() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let forced = Some(("LC_ALL".to_owned(), "C.UTF-8".to_owned()));
        assert_eq!(utf8_locale(&env(&[])), forced);
        assert_eq!(utf8_locale(&env(&[("LANG", "C")])), forced);
        assert_eq!(utf8_locale(&env(&[("LANG", "de_DE.UTF-8")])), None);
        assert_eq!(
            utf8_locale(&env(&[("LANG", "de_DE.UTF-8"), ("LC_ALL", "POSIX")])),
            forced
        );
        assert_eq!(utf8_locale(&env(&[("LC_CTYPE", "zh_CN.utf8")])), None);
    }

    #[test]
    fn powershell_gets_the_question_in_its_environment_only() {
        use base64::Engine;
        let q = question();
        let r = Dialog::PowerShell.render(&q);
        assert_eq!(r.program, "powershell.exe");
        assert_eq!(r.env, vec![(QUESTION_VAR.to_owned(), q.text())]);
        assert_eq!(
            r.args[..5],
            [
                "-NoProfile",
                "-NonInteractive",
                "-ExecutionPolicy",
                "Bypass",
                "-EncodedCommand"
            ]
        );
        assert_eq!(r.args.len(), 6);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&r.args[5])
            .unwrap();
        let units: Vec<u16> = bytes
            .chunks(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        let script = String::from_utf16(&units).unwrap();
        assert_eq!(script, powershell_script());
        assert!(!script.contains("evil"));
        assert!(script.contains("$label.Text = $env:AAI_CONSENT_QUESTION"));
        assert!(script.contains("@('app','Always allow every tool of this app')"));
    }

    #[test]
    fn dialogs_are_named_for_the_override() {
        for d in [
            Dialog::Zenity,
            Dialog::Kdialog,
            Dialog::Osascript,
            Dialog::PowerShell,
        ] {
            assert_eq!(Dialog::named(d.name()), Some(d));
        }
        assert_eq!(Dialog::named("xmessage"), None);
    }
}
