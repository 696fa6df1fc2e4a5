//! Diagnostics: what is wrong with a descriptor, where (file + JSON pointer), and how bad.
//!
//! An `Error` rejects the whole file (its app is not loaded); a `Warning` is reported and
//! the file still loads. Diagnostics never carry argument values or secrets: they quote
//! field names and the descriptor's own text only.

use std::cell::RefCell;
use std::fmt;

use serde::Serialize;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The file is rejected.
    Error,
    /// Reported; the file still loads.
    Warning,
}

/// One problem found in one descriptor (or config) file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The file (or URL) the problem is in.
    pub source: String,
    /// RFC 6901 JSON pointer to the offending value; `""` is the whole document.
    pub pointer: String,
    /// Error or warning.
    pub severity: Severity,
    /// What was found and what was expected.
    pub message: String,
}

impl Diagnostic {
    /// Whether this diagnostic rejects its file.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        if self.pointer.is_empty() {
            write!(f, "{}: {level}: {}", self.source, self.message)
        } else {
            write!(
                f,
                "{}: {}: {level}: {}",
                self.source, self.pointer, self.message
            )
        }
    }
}

/// Collects the diagnostics of one file while it is read.
///
/// Interior mutability lets every reader of the file report through a shared `&Sink`
/// while the readers themselves borrow the document.
#[derive(Debug)]
pub struct Sink {
    source: String,
    items: RefCell<Vec<Diagnostic>>,
}

impl Sink {
    /// A sink for the file named `source`.
    pub fn new(source: impl Into<String>) -> Self {
        Self {
            source: source.into(),
            items: RefCell::new(Vec::new()),
        }
    }

    /// Reports an error at `pointer`.
    pub fn error(&self, pointer: impl Into<String>, message: impl Into<String>) {
        self.push(Severity::Error, pointer.into(), message.into());
    }

    /// Reports a warning at `pointer`.
    pub fn warning(&self, pointer: impl Into<String>, message: impl Into<String>) {
        self.push(Severity::Warning, pointer.into(), message.into());
    }

    fn push(&self, severity: Severity, pointer: String, message: String) {
        self.items.borrow_mut().push(Diagnostic {
            source: self.source.clone(),
            pointer,
            severity,
            message,
        });
    }

    /// Whether any error has been reported so far.
    pub fn has_errors(&self) -> bool {
        self.items.borrow().iter().any(Diagnostic::is_error)
    }

    /// The diagnostics, in the order they were found.
    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.items.into_inner()
    }
}

/// Appends `key` to `pointer` with RFC 6901 escaping (`~` → `~0`, `/` → `~1`).
pub fn join_pointer(pointer: &str, key: &str) -> String {
    let mut out = String::with_capacity(pointer.len() + key.len() + 1);
    out.push_str(pointer);
    out.push('/');
    for c in key.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}
