//! Native consent dialogs, the channel after MCP elicitation: when the gateway runs where a
//! person sees a screen, it asks them itself.
//!
//! * Linux: `zenity` (else `kdialog`) when `DISPLAY` or `WAYLAND_DISPLAY` is set.
//! * macOS (`osascript`) and Windows (PowerShell) dialogs are not built yet.
//!
//! The question reaches the dialog as data: argv entries (never a shell), with Pango markup
//! escaped for zenity (the caller's name is chosen by the client). The dialog gives up
//! after two minutes; closing it is no answer.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use crate::consent::{Choice, Prompter, Question};
use crate::exec::process::{self, Limits, Spec};

/// How long a dialog waits for the person.
const WAIT: Duration = Duration::from_secs(120);

/// A dialog program and how to ask with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialog {
    /// GNOME's zenity.
    Zenity,
    /// KDE's kdialog.
    Kdialog,
}

impl Dialog {
    /// The dialog this machine can show, if any: a display and a dialog program.
    pub fn available() -> Option<Dialog> {
        let display = ["DISPLAY", "WAYLAND_DISPLAY"]
            .iter()
            .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()));
        if !display {
            return None;
        }
        if crate::host::on_path("zenity").is_some() {
            Some(Dialog::Zenity)
        } else if crate::host::on_path("kdialog").is_some() {
            Some(Dialog::Kdialog)
        } else {
            None
        }
    }

    /// The program and its arguments for `question` (pure: tested on every OS).
    pub fn render(self, question: &Question) -> (&'static str, Vec<String>) {
        let mut args: Vec<String> = Vec::new();
        match self {
            Dialog::Zenity => {
                args.extend(
                    [
                        "--list",
                        "--radiolist",
                        "--title",
                        "aai-gateway: allow this call?",
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
                ("zenity", args)
            }
            Dialog::Kdialog => {
                args.extend(
                    ["--title", "aai-gateway: allow this call?", "--radiolist"].map(str::to_owned),
                );
                args.push(question.text());
                for (i, (_, value, title)) in Choice::ALL.iter().enumerate() {
                    args.push((*value).into());
                    args.push((*title).into());
                    args.push(if i == 0 { "on" } else { "off" }.into());
                }
                ("kdialog", args)
            }
        }
    }
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
    ) -> Pin<Box<dyn Future<Output = Option<Choice>> + Send + 'a>> {
        Box::pin(async move {
            let (program, args) = self.render(question);
            let spec = Spec {
                program,
                args: &args,
                env: &[],
                base_dir: Path::new("/"),
                label: "consent dialog",
            };
            let limits = Limits {
                deadline: WAIT,
                max_output: 1024,
                cancel: tokio_util::sync::CancellationToken::new(),
            };
            let output = process::run(&spec, b"", &limits)
                .await
                .map_err(|e| tracing::info!("the consent dialog gave no answer: {e}"))
                .ok()?;
            if !output.success() {
                return None;
            }
            Choice::parse(String::from_utf8_lossy(&output.stdout).trim())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consent::Caller;

    #[test]
    fn the_question_is_data_and_markup_is_escaped() {
        let question = Question {
            caller: Caller {
                name: "<b>evil</b> & \"$(rm -rf ~)\"".into(),
                transport: "stdio",
            },
            app: "com.a".into(),
            app_name: "A".into(),
            tool: "send".into(),
            description: "Send".into(),
        };
        let (program, args) = Dialog::Zenity.render(&question);
        assert_eq!(program, "zenity");
        let text = &args[args.iter().position(|a| a == "--text").unwrap() + 1];
        assert!(
            text.starts_with("&lt;b&gt;evil&lt;/b&gt; &amp; \"$(rm -rf ~)\" wants to run `send`")
        );
        assert_eq!(
            &args[args.len() - 12..args.len() - 9],
            ["TRUE", "once", "Allow once"]
        );
        let (program, args) = Dialog::Kdialog.render(&question);
        assert_eq!(program, "kdialog");
        assert!(args.contains(&"deny".to_owned()));
    }
}
