//! `--generate`: what a language model is asked, how its answer is read and checked, and
//! what it is told when the answer is wrong. The conversation itself and the loop are the
//! command line's; this module is pure.
//!
//! The instructions are `prompts/generate.md` (compiled in). The first user message gives
//! the source (D-Bus introspection XML, a `.sdef`, an OpenAPI document, `--help` text) and
//! the app id to use; each repair message lists the `validate` diagnostics of the last
//! answer and asks for the whole descriptor again.

use std::fmt::Write as _;

use serde_json::Value;

/// One message of the conversation.
#[derive(Debug, Clone)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: &'static str,
    /// Its text.
    pub content: String,
}

/// The model's instructions.
pub const PROMPT: &str = include_str!("../prompts/generate.md");

/// Most characters of source text sent (the rest is cut, and the model told so).
pub const MAX_SOURCE: usize = 120_000;

/// What the model is shown about the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// `org.freedesktop.DBus.Introspectable` XML of the app's objects.
    DbusIntrospection,
    /// A macOS scripting definition.
    Sdef,
    /// An OpenAPI document.
    OpenApi,
    /// A command's `--help` text.
    Help,
}

impl SourceKind {
    /// How the source is named to the model and the user.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::DbusIntrospection => "D-Bus introspection XML",
            SourceKind::Sdef => "macOS scripting definition (.sdef)",
            SourceKind::OpenApi => "OpenAPI document",
            SourceKind::Help => "command's --help text",
        }
    }

    /// The kind of a file's text: `.sdef` dictionaries, D-Bus `<node>`s, OpenAPI documents
    /// (JSON or YAML with an `openapi` key); anything else is help text.
    pub fn of_text(text: &str) -> SourceKind {
        let head: String = text.chars().take(4096).collect();
        if head.contains("<dictionary") {
            SourceKind::Sdef
        } else if head.contains("<node") {
            SourceKind::DbusIntrospection
        } else if head.contains("\"openapi\"") || head.lines().any(|l| l.starts_with("openapi:")) {
            SourceKind::OpenApi
        } else {
            SourceKind::Help
        }
    }
}

/// What the model is asked to describe.
#[derive(Debug)]
pub struct Source {
    /// What kind of text `text` is.
    pub kind: SourceKind,
    /// The app id the descriptor must have.
    pub id: String,
    /// Where it came from, in words (`the session bus name org.example.Notes`).
    pub origin: String,
    /// The text.
    pub text: String,
}

/// The conversation's start: instructions, then the source.
pub fn first_messages(source: &Source) -> Vec<Message> {
    let mut text: String = source.text.chars().take(MAX_SOURCE).collect();
    let cut = text.len() < source.text.len();
    if cut {
        text.push_str("\n[… cut here: the rest was too long]");
    }
    let mut user = String::new();
    let _ = writeln!(
        user,
        "Write the aai.json of the app with id `{}`, from the {} of {}.",
        source.id,
        source.kind.as_str(),
        source.origin
    );
    if cut {
        let _ = writeln!(user, "The source was cut; describe what you are shown.");
    }
    let _ = write!(user, "\n```\n{text}\n```\n");
    vec![
        Message {
            role: "system",
            content: PROMPT.to_owned(),
        },
        Message {
            role: "user",
            content: user,
        },
    ]
}

/// What is wrong with one answer.
#[derive(Debug)]
pub enum Verdict {
    /// It validates: the descriptor, pretty-printed, and its warnings.
    Valid {
        /// The descriptor as it will be written.
        text: String,
        /// What it describes.
        app: Box<aai_descriptor::App>,
        /// Warnings (not fed back).
        warnings: Vec<String>,
    },
    /// It does not: what to tell the model.
    Invalid(Vec<String>),
}

/// Reads and checks one answer: the JSON object in it (in a code block or bare), parsed
/// and validated as a descriptor, with the expected app id and at least one tool.
pub fn check(answer: &str, id: &str) -> Verdict {
    let Some(json) = json_in(answer) else {
        return Verdict::Invalid(vec![
            "the answer has no JSON object; answer with the descriptor in one ```json block"
                .to_owned(),
        ]);
    };
    let value: Value = match serde_json::from_str(json) {
        Ok(v) => v,
        Err(e) => return Verdict::Invalid(vec![format!("the JSON does not parse: {e}")]),
    };
    let text = format!("{}\n", serde_json::to_string_pretty(&value).expect("JSON"));
    let parsed = aai_descriptor::parse(&text, "aai.json");
    let mut problems: Vec<String> = parsed
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| format!("{}: {}", pointer_or_root(&d.pointer), d.message))
        .collect();
    // Said even when other errors reject the file, so one round fixes both.
    let written_id = value
        .pointer("/app/id")
        .or_else(|| value.get("appId"))
        .and_then(Value::as_str);
    if let Some(got) = written_id.filter(|got| *got != id) {
        problems.push(format!("/app/id: the id must be `{id}`, not `{got}`"));
    }
    if let Some(app) = &parsed.app
        && app.bindings.iter().all(|b| b.tools.is_empty())
    {
        problems
            .push("/tools: the descriptor has no tools; describe what the app can do".to_owned());
    }
    match parsed.app {
        Some(app) if problems.is_empty() => {
            let warnings = parsed
                .diagnostics
                .iter()
                .map(|d| format!("{}: {}", pointer_or_root(&d.pointer), d.message))
                .collect();
            Verdict::Valid {
                text,
                app: Box::new(app),
                warnings,
            }
        }
        _ => Verdict::Invalid(problems),
    }
}

/// The message asking for a repair.
pub fn repair_message(problems: &[String]) -> Message {
    let mut text = String::from("`aai-gateway validate` rejects that descriptor:\n");
    for p in problems.iter().take(40) {
        let _ = writeln!(text, "- {p}");
    }
    if problems.len() > 40 {
        let _ = writeln!(text, "- … and {} more", problems.len() - 40);
    }
    text.push_str("\nAnswer with the whole corrected descriptor in one ```json block.");
    Message {
        role: "user",
        content: text,
    }
}

fn pointer_or_root(pointer: &str) -> &str {
    if pointer.is_empty() { "/" } else { pointer }
}

/// The JSON object of an answer: the first ```json (or ```) block holding one, else the
/// text from the first `{` to the last `}`.
fn json_in(answer: &str) -> Option<&str> {
    let mut rest = answer;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map_or(after.len(), |n| n + 1);
        let body = &after[body_start..];
        let Some(end) = body.find("```") else {
            break;
        };
        let block = body[..end].trim();
        if block.starts_with('{') {
            return Some(block);
        }
        rest = &body[end + 3..];
    }
    let start = answer.find('{')?;
    let end = answer.rfind('}')?;
    (end > start).then(|| &answer[start..=end])
}

/// `app` as an app id: as given when it is reverse-DNS, else `local.<app>` (letters,
/// digits, `.`, `-`, `_` only).
pub fn app_id(app: &str) -> String {
    let clean = crate::text::replace_outside(
        app,
        |c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'),
        '-',
    );
    let clean: String = clean.trim_matches(['.', '-']).chars().take(120).collect();
    if clean.contains('.') && !clean.contains("..") {
        clean
    } else {
        format!("local.{}", if clean.is_empty() { "app" } else { &clean })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
      "app":{"id":"org.example.Notes","name":{"en":"Notes"},"defaultLang":"en","description":"Notes"},
      "execution":{"type":"dbus","service":"org.example.Notes","objectPath":"/org/example/Notes","interface":"org.example.Notes"},
      "tools":[{"name":"create","description":"Create","method":"Create","parameters":{"type":"object"}}]}"#;

    #[test]
    fn answers_are_read_from_code_blocks_or_bare() {
        let fenced = format!("Here it is:\n```json\n{GOOD}\n```\nDone.");
        assert!(matches!(
            check(&fenced, "org.example.Notes"),
            Verdict::Valid { .. }
        ));
        let prose_first = format!("```text\nnot json\n```\n```\n{GOOD}\n```");
        assert!(matches!(
            check(&prose_first, "org.example.Notes"),
            Verdict::Valid { .. }
        ));
        assert!(matches!(
            check(GOOD, "org.example.Notes"),
            Verdict::Valid { .. }
        ));
    }

    #[test]
    fn problems_are_said_with_their_place() {
        let Verdict::Invalid(p) = check("no json here", "x.y") else {
            panic!()
        };
        assert!(p[0].contains("no JSON object"));
        let Verdict::Invalid(p) = check("{\"a\": }", "x.y") else {
            panic!()
        };
        assert!(p[0].contains("does not parse"));
        let Verdict::Invalid(p) = check(GOOD, "org.other.App") else {
            panic!()
        };
        assert_eq!(
            p,
            ["/app/id: the id must be `org.other.App`, not `org.example.Notes`"]
        );
        let broken = GOOD.replace("\"1.0.0\"", "\"one\"");
        let Verdict::Invalid(p) = check(&broken, "org.example.Notes") else {
            panic!()
        };
        assert!(p.iter().any(|p| p.starts_with("/version")), "{p:?}");
        let message = repair_message(&p);
        assert!(message.content.contains("- /version"));
    }

    #[test]
    fn sources_are_told_apart_and_cut() {
        for (text, kind) in [
            ("<node name=\"/\"><interface", SourceKind::DbusIntrospection),
            ("<?xml?><dictionary title=\"x\">", SourceKind::Sdef),
            ("openapi: 3.1.0\ninfo:", SourceKind::OpenApi),
            ("{\n \"openapi\": \"3.0.0\"", SourceKind::OpenApi),
            ("Usage: tool [OPTIONS]", SourceKind::Help),
        ] {
            assert_eq!(SourceKind::of_text(text), kind, "{text}");
        }
        let source = Source {
            kind: SourceKind::Help,
            id: "a.b".into(),
            origin: "`tool`".into(),
            text: "x".repeat(MAX_SOURCE + 10),
        };
        let m = first_messages(&source);
        assert_eq!(m[0].content, PROMPT);
        assert!(m[1].content.contains("cut here") && m[1].content.contains("`a.b`"));
    }
}
