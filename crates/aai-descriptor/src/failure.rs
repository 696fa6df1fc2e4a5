//! The error of an operation of this crate or of `aai-author`: what went wrong (`K`, the
//! operation's own kinds, for callers that decide on it) and the message a user is shown.

use std::fmt;

/// What went wrong (`kind`) and the message that says so (what `Display` writes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure<K> {
    kind: K,
    message: String,
}

impl<K: Copy> Failure<K> {
    /// A failure of `kind`, shown as `message`.
    pub fn new(kind: K, message: impl Into<String>) -> Failure<K> {
        Failure {
            kind,
            message: message.into(),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> K {
        self.kind
    }
}

impl<K> fmt::Display for Failure<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<K: fmt::Debug> std::error::Error for Failure<K> {}
