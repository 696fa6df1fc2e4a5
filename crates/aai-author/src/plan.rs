//! What writing a draft would do. A draft goes to `$AAI_HOME/<appId>/aai.json`, and
//! beside it `.generated` keeps a fingerprint of what was written; a file whose content no
//! longer matches (the user edited it) or that was not written this way is never
//! overwritten unless `--force`. A draft that does not validate is never written. The
//! command line reads and writes the files; this module only decides.

use aai_descriptor::Diagnostic;

/// What to do with one discovered app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// No descriptor yet: write it.
    New,
    /// We wrote it before and nobody edited it: rewrite if different.
    Update,
    /// Unchanged since we wrote it.
    Unchanged,
    /// The user wrote or edited it: skip unless `--force`.
    Edited,
    /// Nothing to describe (no interfaces of its own).
    Empty,
    /// The generated descriptor does not pass validation (a bug of ours): never written.
    Invalid,
    /// A built-in app already serves this name: skipped unless `--all`.
    BuiltIn,
    /// The source cannot be imported (the summary says why).
    Skipped,
    /// A file the user named already exists: kept unless `--force`.
    Exists,
}

impl Plan {
    /// The word shown in summaries.
    pub fn as_str(&self) -> &'static str {
        match self {
            Plan::New => "new",
            Plan::Update => "update",
            Plan::Unchanged => "unchanged",
            Plan::Edited => "edited by you (kept; --force to overwrite)",
            Plan::Empty => "nothing to describe",
            Plan::Invalid => "generated descriptor is invalid (not written)",
            Plan::BuiltIn => "served by a built-in app (skipped; --all to include)",
            Plan::Skipped => "skipped",
            Plan::Exists => "file exists (kept; --force to overwrite)",
        }
    }
}

/// The fingerprint recorded in `.generated`.
pub fn fingerprint(text: &str) -> String {
    format!("{:016x}", aai_descriptor::hash::stable(text))
}

/// The problems that keep `text` from being written (it must parse with no error).
pub fn check(text: &str) -> Result<(), Vec<Diagnostic>> {
    let parsed = aai_descriptor::parse(text, "generated");
    if parsed.app.is_none() || parsed.diagnostics.iter().any(|d| d.is_error()) {
        return Err(parsed.diagnostics);
    }
    Ok(())
}

/// What writing `text` (already checked) would do to a file holding `current` (`None`:
/// no file), beside which `recorded` is the fingerprint left when it was written (`None`:
/// none).
pub fn plan(current: Option<&str>, recorded: Option<&str>, text: &str) -> Plan {
    let Some(current) = current else {
        return Plan::New;
    };
    if recorded.unwrap_or_default().trim() != fingerprint(current) {
        return Plan::Edited;
    }
    if current == text {
        Plan::Unchanged
    } else {
        Plan::Update
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRAFT: &str = r#"{"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
        "app":{"id":"com.example.x","name":"X","description":"d"},
        "execution":{"type":"dbus","service":"com.example.X","objectPath":"/","interface":"com.example.X"},
        "tools":[{"name":"t","description":"d","parameters":{"type":"object"}}]}"#;

    #[test]
    fn plans_follow_the_file_and_its_fingerprint() {
        let written = fingerprint(DRAFT);
        assert_eq!(plan(None, None, DRAFT), Plan::New);
        assert_eq!(plan(Some(DRAFT), Some(&written), DRAFT), Plan::Unchanged);
        assert_eq!(
            plan(Some("old"), Some(&fingerprint("old")), DRAFT),
            Plan::Update
        );
        // Edited since it was written, or never written by us.
        assert_eq!(plan(Some("edited"), Some(&written), DRAFT), Plan::Edited);
        assert_eq!(plan(Some(DRAFT), None, DRAFT), Plan::Edited);
    }

    #[test]
    fn only_a_valid_draft_passes() {
        assert!(check(DRAFT).is_ok(), "{:?}", check(DRAFT));
        assert!(!check("{\"appId\": 1}").unwrap_err().is_empty());
        assert!(check("not json").is_err());
    }
}
