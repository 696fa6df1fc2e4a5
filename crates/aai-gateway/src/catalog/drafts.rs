//! Writing generated descriptors (`--discover` on every OS): each goes to
//! `$AAI_HOME/<appId>/aai.json`, and beside it `.generated` keeps a hash of what we wrote;
//! a file whose content no longer matches (the user edited it) or that we did not write
//! is never overwritten unless `--force`. A draft that does not validate is never written.

use std::path::{Path, PathBuf};

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
    format!("{:016x}", crate::hash::stable(text))
}

/// What writing `text` to `dir/aai.json` would do. A text that does not validate is
/// never written.
pub fn plan(dir: &Path, text: &str) -> Plan {
    let parsed = aai_descriptor::parse(text, "generated");
    if parsed.app.is_none() || parsed.diagnostics.iter().any(|d| d.is_error()) {
        for d in &parsed.diagnostics {
            tracing::warn!("generated descriptor for {}: {d}", dir.display());
        }
        return Plan::Invalid;
    }
    plan_valid(dir, text)
}

/// What writing `text`, already validated, to `dir/aai.json` would do.
pub fn plan_valid(dir: &Path, text: &str) -> Plan {
    let file = dir.join("aai.json");
    let Ok(current) = std::fs::read_to_string(&file) else {
        return Plan::New;
    };
    let recorded = std::fs::read_to_string(dir.join(".generated")).unwrap_or_default();
    if recorded.trim() != fingerprint(&current) {
        return Plan::Edited;
    }
    if current == text {
        Plan::Unchanged
    } else {
        Plan::Update
    }
}

/// Writes `text` to a file the user named (no fingerprint: the user owns it), through a
/// temporary file beside it.
pub fn write_file(file: &Path, text: &str) -> std::io::Result<()> {
    // Owner-only, like every descriptor the gateway writes (it may name a server's
    // command and the names of its secrets).
    crate::files::write_private(file, text.as_bytes())
}

/// Writes `text` and its fingerprint.
pub fn write(dir: &Path, text: &str) -> std::io::Result<PathBuf> {
    crate::files::private_dir(dir)?;
    let file = dir.join("aai.json");
    crate::files::write_private(&file, text.as_bytes())?;
    crate::files::write_private(
        &dir.join(".generated"),
        format!("{}\n", fingerprint(text)).as_bytes(),
    )?;
    Ok(file)
}
