//! What an "always allow this tool" answer approved, so that a changed tool asks again
//! (docs/consent.md, "A changed tool asks again").
//!
//! A tool's [`Definition`] is a SHA-256 fingerprint of what the user approves of it — its
//! name, description, parameter schema, read-only annotation, and what running it means
//! (a script, an HTTP method and path, a D-Bus method; a downstream server's tool is
//! forwarded as it is) — with a compact summary of those parts: the description (cut),
//! a digest of each argument's schema, the required arguments, digests of the rest. A
//! grant keeps it; a call whose tool no longer has that fingerprint is asked about again,
//! and the question says what changed ([`Definition::changes`]). Object keys are sorted
//! and `required` is a set, so a server that lists the same tool in another order does
//! not ask again.
//!
//! * What starts (a server's or agent's command) is not part of it: a start grant is tied
//!   to the command's own digest (`exec::start`), and a web app's grant to its
//!   certificate.
//! * A grant without a definition (written before grants kept one, from the command
//!   line, or answered before a server had listed its tools) adopts the tool as it is at
//!   its next use ([`Cover::Adopt`]).
//! * "Always allow every tool of this app" (`*`) covers tools the app does not have yet,
//!   so it is tied to no tool's definition: it is not protected against a changed tool.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::consent::{Gate, Key, Question};

/// Longest description kept with a grant (characters); a change beyond it is still seen
/// by its digest.
const KEPT_DESCRIPTION: usize = 2000;
/// A description at most this long is shown whole when it changed; a longer one around
/// what changed.
const SHOWN_WHOLE: usize = 160;
/// Characters shown before and after a change inside a long description.
const CONTEXT: usize = 30;
/// Longest changed part of a description shown.
const SHOWN_CHANGE: usize = 200;
/// Most argument names one phrase lists.
const SHOWN_NAMES: usize = 5;

/// What the user approved of a tool (see the module).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Definition {
    /// SHA-256 (lower-case hex) of the whole definition.
    pub fingerprint: String,
    /// The description, cut at 2,000 characters.
    pub description: String,
    /// A digest of the whole description.
    #[serde(rename = "descriptionDigest")]
    pub description_digest: String,
    /// Each argument (a top-level property of the parameter schema) and a digest of its
    /// schema.
    pub arguments: BTreeMap<String, String>,
    /// The required arguments.
    pub required: BTreeSet<String>,
    /// A digest of the rest of the parameter schema.
    pub schema: String,
    /// The read-only annotation (descriptor `readOnly`, a server's `readOnlyHint`).
    #[serde(rename = "readOnly")]
    pub read_only: bool,
    /// A digest of what running the tool means.
    pub runs: String,
}

impl Definition {
    /// The definition of `tool` as it is now.
    pub fn of(tool: &aai_descriptor::Tool) -> Definition {
        let schema = tool.parameters.json();
        let mut arguments = BTreeMap::new();
        let mut whole = Sha256::new();
        feed(
            &mut whole,
            &["aai tool definition 1", &tool.name, &tool.description],
        );
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            let mut sorted: Vec<(&String, &Value)> = properties.iter().collect();
            sorted.sort_by_key(|(name, _)| *name);
            for (name, property) in sorted {
                let text = canonical(property);
                feed(&mut whole, &["argument", name, &text]);
                arguments.insert(name.clone(), digest(&text));
            }
        }
        let required: BTreeSet<String> = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        for name in &required {
            feed(&mut whole, &["required", name]);
        }
        let rest = match schema {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "properties" | "required"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            other => other.clone(),
        };
        let rest = canonical(&rest);
        let mut runs =
            serde_json::to_value(&tool.call).map_or_else(|_| String::new(), |v| canonical(&v));
        // A tool the user changed runs as its app defines it, with the fixed arguments.
        if let Some(o) = &tool.overridden {
            let called = serde_json::json!({"as": o.original.name, "fixed": o.fixed});
            runs.push_str(&canonical(&called));
        }
        let read_only = if tool.read_only {
            "read-only"
        } else {
            "writes"
        };
        feed(&mut whole, &["schema", &rest, read_only, "runs", &runs]);
        Definition {
            fingerprint: crate::text::hex(&whole.finalize()),
            description: cut(&tool.description, KEPT_DESCRIPTION),
            description_digest: digest(&tool.description),
            arguments,
            required,
            schema: digest(&rest),
            read_only: tool.read_only,
            runs: digest(&runs),
        }
    }

    /// What changed from `self` (what was approved) to `now`, one short phrase each;
    /// nothing when the fingerprints are the same.
    pub fn changes(&self, now: &Definition) -> Vec<String> {
        if self.fingerprint == now.fingerprint {
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.description_digest != now.description_digest {
            out.push(description_change(&self.description, &now.description));
        }
        let added: Vec<&str> = now
            .arguments
            .keys()
            .filter(|a| !self.arguments.contains_key(*a))
            .map(String::as_str)
            .collect();
        let removed: Vec<&str> = self
            .arguments
            .keys()
            .filter(|a| !now.arguments.contains_key(*a))
            .map(String::as_str)
            .collect();
        let changed: Vec<&str> = now
            .arguments
            .iter()
            .filter(|(a, d)| self.arguments.get(*a).is_some_and(|old| old != *d))
            .map(|(a, _)| a.as_str())
            .collect();
        let now_required: Vec<&str> = now
            .required
            .iter()
            .filter(|a| !self.required.contains(*a) && self.arguments.contains_key(*a))
            .map(String::as_str)
            .collect();
        let not_required: Vec<&str> = self
            .required
            .iter()
            .filter(|a| !now.required.contains(*a) && now.arguments.contains_key(*a))
            .map(String::as_str)
            .collect();
        if !added.is_empty() {
            out.push(names_phrase("new argument", "new arguments", &added, ""));
        }
        if !removed.is_empty() {
            out.push(names_phrase("argument", "arguments", &removed, " removed"));
        }
        if !changed.is_empty() {
            out.push(names_phrase("argument", "arguments", &changed, " changed"));
        }
        if !now_required.is_empty() {
            out.push(names_phrase(
                "argument",
                "arguments",
                &now_required,
                " now required",
            ));
        }
        if !not_required.is_empty() {
            out.push(names_phrase(
                "argument",
                "arguments",
                &not_required,
                " no longer required",
            ));
        }
        if self.schema != now.schema {
            out.push("parameter schema changed".to_owned());
        }
        if self.read_only != now.read_only {
            out.push(
                if now.read_only {
                    "annotations changed: now marked read-only"
                } else {
                    "annotations changed: no longer marked read-only"
                }
                .to_owned(),
            );
        }
        if self.runs != now.runs {
            out.push("what it runs changed".to_owned());
        }
        if out.is_empty() {
            // Only the name can be left (a grant moved by hand): still a change.
            out.push("its definition changed".to_owned());
        }
        out
    }
}

/// What a grant in memory is tied to: a site's certificate, a tool's definition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Pins {
    /// The certificate's SHA-256 fingerprint (a web app), or for a start grant the
    /// command's digest.
    pub(crate) cert: Option<String>,
    /// What was approved of the tool.
    pub(crate) definition: Option<Arc<Definition>>,
}

impl Pins {
    /// The pins of a stored grant.
    pub(crate) fn of(grant: &crate::consent::state::Grant) -> Pins {
        Pins {
            cert: grant.cert.clone(),
            definition: grant.definition.clone().map(Arc::new),
        }
    }
}

/// Whether a grant covers a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cover {
    /// No grant, or one for another certificate or another definition of the tool.
    No,
    /// A grant covers it.
    Yes,
    /// A grant for the tool that keeps no definition yet: it covers the call, and keeps
    /// the tool's definition from now on.
    Adopt,
}

impl Gate {
    /// Whether a grant of `caller` covers `question`: one for every tool of the app, or
    /// one for the tool tied to its definition as it is now (see the module).
    pub(crate) fn cover(&self, caller: &str, question: &Question) -> Cover {
        let grants = self.grant_map().read().expect("grants lock");
        let cert_ok = |p: &Pins| p.cert.is_none() || p.cert.as_deref() == question.cert();
        let key = |tool: &str| (caller.to_owned(), question.app.clone(), tool.to_owned());
        if grants.get(&key("*")).is_some_and(cert_ok) {
            return Cover::Yes;
        }
        match grants.get(&key(&question.tool)) {
            Some(p) if cert_ok(p) => match (&p.definition, &question.definition) {
                (_, None) => Cover::Yes,
                (None, Some(_)) => Cover::Adopt,
                (Some(approved), Some(now)) if approved.fingerprint == now.fingerprint => {
                    Cover::Yes
                }
                (Some(_), Some(_)) => Cover::No,
            },
            _ => Cover::No,
        }
    }

    /// Ties the grant `key` (which keeps no definition yet) to `definition`, here and
    /// where grants are kept.
    pub(crate) fn adopt(&self, key: &Key, definition: &Arc<Definition>) {
        {
            let mut grants = self.grant_map().write().expect("grants lock");
            match grants.get_mut(key) {
                Some(pins) if pins.definition.is_none() => {
                    pins.definition = Some(definition.clone());
                }
                _ => return,
            }
        }
        tracing::info!(app = %key.1, tool = %key.2, "a grant made without the tool's definition is tied to it as it is now");
        if let Some(store) = &self.shared {
            if let Some(pins) = self.unsaved.lock().expect("unsaved lock").get_mut(key) {
                pins.definition = Some(definition.clone());
            }
            crate::consent::shared::adopt_later(store, key.clone(), (**definition).clone());
            return;
        }
        if let Some(state) = self.state.get()
            && let Err(e) = state.adopt(&key.0, &key.1, &key.2, definition)
        {
            tracing::warn!("the grant's tool definition is kept for this run only: {e}");
        }
    }

    /// What changed in `question`'s tool since `caller`'s grant for it was given, as the
    /// question shows it; `None` when there is no such grant or nothing changed.
    pub(crate) fn changes_for(&self, caller: &str, question: &Question) -> Option<String> {
        let now = question.definition.as_ref()?;
        let grants = self.grant_map().read().expect("grants lock");
        let approved = grants
            .get(&(
                caller.to_owned(),
                question.app.clone(),
                question.tool.clone(),
            ))?
            .definition
            .clone()?;
        drop(grants);
        let changes = approved.changes(now);
        (!changes.is_empty()).then(|| changes.join("; "))
    }

    /// Fills in what changed in `question`'s tool since it was allowed (for a front door
    /// that shows the question itself).
    pub fn explain(&self, question: &mut Question) {
        if question.changed.is_none() {
            question.changed = self.changes_for(&question.caller.key(), question);
        }
    }
}

/// Serializes a grant's definition as its fingerprint (`consent list --json`).
pub(crate) fn serialize_fingerprint<S: serde::Serializer>(
    definition: &Option<Definition>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match definition {
        Some(d) => s.serialize_str(&d.fingerprint),
        None => s.serialize_none(),
    }
}

/// `value` as JSON text with every object's keys sorted: the same for the same value
/// whatever order it was written in.
fn canonical(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::from(k.as_str()).to_string());
                    out.push(':');
                    write(&map[k], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// Each word with its length first, so that no two different lists feed the same bytes.
fn feed(digest: &mut Sha256, words: &[&str]) {
    digest.update((words.len() as u64).to_le_bytes());
    for w in words {
        digest.update((w.len() as u64).to_le_bytes());
        digest.update(w.as_bytes());
    }
}

/// A short digest of `text` (8 bytes of its SHA-256, hex): enough to tell what changed;
/// the fingerprint itself is the whole SHA-256.
fn digest(text: &str) -> String {
    crate::text::hex(&Sha256::digest(text.as_bytes())[..8])
}

/// At most `max` characters of `text`.
fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// Text as a question shows it inside «»: control characters (line breaks) as spaces.
fn shown(chars: &[char]) -> String {
    chars
        .iter()
        .map(|c| if c.is_control() { ' ' } else { *c })
        .collect()
}

/// "description changed: was «…» now «…»": a short description whole, a long one around
/// what changed.
fn description_change(old: &str, new: &str) -> String {
    let (a, b): (Vec<char>, Vec<char>) = (old.chars().collect(), new.chars().collect());
    if a == b {
        // The kept parts are the same: the change is past them.
        return format!("description changed after its first {KEPT_DESCRIPTION} characters");
    }
    if a.len() <= SHOWN_WHOLE && b.len() <= SHOWN_WHOLE {
        return format!(
            "description changed: was «{}» now «{}»",
            shown(&a),
            shown(&b)
        );
    }
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let room = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(room)
        .take_while(|(x, y)| x == y)
        .count();
    let from = prefix.saturating_sub(CONTEXT);
    let around = |chars: &[char]| {
        let middle_end = chars.len() - suffix;
        let to = (middle_end + CONTEXT).min(chars.len());
        let mut out = String::new();
        if from > 0 {
            out.push('…');
        }
        let middle = &chars[from..to];
        if middle.len() > SHOWN_CHANGE + 2 * CONTEXT {
            out.push_str(&shown(&middle[..SHOWN_CHANGE + CONTEXT]));
            out.push('…');
            out.push_str(&shown(&middle[middle.len() - CONTEXT..]));
        } else {
            out.push_str(&shown(middle));
        }
        if to < chars.len() {
            out.push('…');
        }
        out
    };
    format!(
        "description changed: was «{}» now «{}»",
        around(&a),
        around(&b)
    )
}

/// "new argument `a`", "arguments `a`, `b` removed": names quoted and cut, at most five.
fn names_phrase(one: &str, many: &str, names: &[&str], tail: &str) -> String {
    let mut listed: Vec<String> = names
        .iter()
        .take(SHOWN_NAMES)
        .map(|n| format!("`{}`", shown(&n.chars().take(60).collect::<Vec<_>>())))
        .collect();
    if names.len() > SHOWN_NAMES {
        listed.push(format!("{} more", names.len() - SHOWN_NAMES));
    }
    let noun = if names.len() == 1 { one } else { many };
    format!("{noun} {}{tail}", listed.join(", "))
}

#[cfg(test)]
#[path = "fingerprint_tests.rs"]
mod tests;
