//! The script run or batch a call is part of ([`Within`], carried by the call's origin): its id goes into each call's
//! history record (`run`) and its span is the parent of each call's span; each consent
//! question of its calls says so, the first one showing the script (docs/workflows.md,
//! "Consent").

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Most characters of a script a question shows.
const SHOWN_SCRIPT: usize = 2_000;

/// A script run or a batch, shared by its calls.
#[derive(Debug)]
pub struct Within {
    /// `run-` or `batch-` and 8 hex digits: unique enough to find its calls in history.
    pub id: String,
    /// The script, for a run.
    script: Option<String>,
    /// A question has shown the script.
    shown: AtomicBool,
    /// An atomic run or batch: its completed calls are undone when a later one fails.
    pub atomic: bool,
    /// For an atomic batch: the tools it calls that have no undo (`app tool`), named in
    /// its first question.
    irreversible: Vec<String>,
    /// The undos of a run or batch that did not finish (its id is the run's).
    pub undoing: bool,
}

impl Within {
    /// A script run.
    pub fn run(script: &str, atomic: bool) -> Within {
        Within {
            id: new_id("run"),
            script: Some(crate::text::printable_lines(&crate::text::excerpt(
                script.trim(),
                SHOWN_SCRIPT,
            ))),
            shown: AtomicBool::new(false),
            atomic,
            irreversible: Vec::new(),
            undoing: false,
        }
    }

    /// A batch; `irreversible` names its calls that an atomic batch could not undo.
    pub fn batch(atomic: bool, irreversible: Vec<String>) -> Within {
        Within {
            id: new_id("batch"),
            script: None,
            shown: AtomicBool::new(false),
            atomic,
            irreversible,
            undoing: false,
        }
    }

    /// The rollback of this run or batch: its undo calls carry it (the same id in
    /// history, and questions that say what a denial leaves behind).
    pub fn undoing(&self) -> Within {
        Within {
            id: self.id.clone(),
            script: None,
            shown: AtomicBool::new(true),
            atomic: false,
            irreversible: Vec::new(),
            undoing: true,
        }
    }

    /// What a consent question about a call of `tool` adds: which run or batch it is
    /// part of; the first question shown also the script (or the calls an atomic batch
    /// cannot undo); and for an atomic one, whether this call could be undone.
    pub(crate) fn note(&self, tool: &aai_descriptor::Tool) -> Note {
        Note {
            within: Some(Arc::new(Shown {
                first: std::sync::OnceLock::new(),
            })),
            read_only: tool.read_only,
            undoable: tool.undo.is_some(),
        }
    }

    /// The text of `note` for a question: call once per question shown.
    pub(crate) fn describe(&self, note: &Note) -> String {
        let first = note.within.as_ref().is_some_and(|s| {
            *s.first
                .get_or_init(|| !self.shown.swap(true, Ordering::AcqRel))
        });
        if self.undoing {
            let kind = if self.id.starts_with("batch") {
                "batch"
            } else {
                "script run"
            };
            return format!(
                "an undo: {kind} {} did not finish, and this call takes back one of its completed steps; if you deny it, that step stays done",
                self.id
            );
        }
        let mut text = match (&self.script, first) {
            (Some(script), true) => format!(
                "part of script run {}, which may make more calls; the script:\n{script}\n",
                self.id
            ),
            (Some(_), false) => format!(
                "part of script run {} (its script was shown with its first question)",
                self.id
            ),
            (None, _) => format!("part of batch {}", self.id),
        };
        if self.atomic {
            if !note.read_only && !note.undoable {
                text.push_str(
                    " — this tool has no undo: if a later step fails, this call stays done",
                );
            }
            if first && !self.irreversible.is_empty() {
                text.push_str(" — steps of this atomic batch that cannot be undone: ");
                text.push_str(&self.irreversible.join(", "));
            }
        }
        text
    }
}

/// What a question carries of its run or batch.
#[derive(Debug, Clone, Default)]
pub struct Note {
    within: Option<Arc<Shown>>,
    read_only: bool,
    undoable: bool,
}

/// Whether this question is the one that showed the script (decided the first time its
/// text is made, shared by its clones).
#[derive(Debug)]
struct Shown {
    first: std::sync::OnceLock<bool>,
}

fn new_id(kind: &str) -> String {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).expect("the OS has randomness");
    format!("{kind}-{}", crate::text::hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(read_only: bool, undo: bool) -> aai_descriptor::Tool {
        aai_descriptor::Tool {
            name: "t".into(),
            description: String::new(),
            parameters: aai_descriptor::Schema::compile(&serde_json::json!({"type": "object"}))
                .expect("schema"),
            returns: None,
            timeout: None,
            read_only,
            undo: undo.then(|| aai_descriptor::Undo {
                tool: "u".into(),
                args: Default::default(),
            }),
            call: aai_descriptor::ToolCall::Envelope,
            overridden: None,
        }
    }

    #[test]
    fn the_first_question_shows_the_script_and_the_next_ones_refer_to_it() {
        let run = Within::run("await call('a', 'b', {})", true);
        let first = run.note(&tool(false, false));
        let text = run.describe(&first);
        assert!(text.contains("await call('a', 'b', {})"), "{text}");
        assert!(text.contains("has no undo"), "{text}");
        // The same question made again (each channel makes its text) still shows it.
        assert_eq!(run.describe(&first.clone()), text);
        let second = run.note(&tool(false, true));
        let text = run.describe(&second);
        assert!(!text.contains("await call"), "{text}");
        assert!(text.contains("shown with its first question"), "{text}");
        assert!(!text.contains("no undo"), "{text}");
        assert!(text.contains(&run.id) && run.id.starts_with("run-") && run.id.len() == 12);
    }

    #[test]
    fn an_undo_says_what_denying_it_leaves_and_a_script_cannot_redraw_the_question() {
        let run = Within::run("call('a')\u{1b}[2J\u{202e}x\r\n\treturn 1", true);
        let text = run.describe(&run.note(&tool(false, true)));
        assert!(
            text.contains("call('a')\\u{1b}[2J\\u{202e}x\\u{d}\n\treturn 1"),
            "{text}"
        );
        let undoing = run.undoing();
        let text = undoing.describe(&undoing.note(&tool(false, false)));
        assert!(
            text.contains("an undo: script run") && text.contains(&run.id),
            "{text}"
        );
        assert!(
            text.contains("if you deny it, that step stays done"),
            "{text}"
        );
        assert!(
            !text.contains("no undo") && !text.contains("call('a')"),
            "{text}"
        );
    }

    #[test]
    fn an_atomic_batch_names_what_it_cannot_undo_first() {
        let batch = Within::batch(true, vec!["com.a send".into()]);
        let text = batch.describe(&batch.note(&tool(true, false)));
        assert!(text.contains("cannot be undone: com.a send"), "{text}");
        assert!(!text.contains("this tool has no undo"), "read-only: {text}");
        let text = batch.describe(&batch.note(&tool(false, true)));
        assert!(!text.contains("com.a send"), "{text}");
    }
}
