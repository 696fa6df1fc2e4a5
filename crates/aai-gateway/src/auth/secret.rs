//! A secret value whose `Debug` never shows it. Every credential travels in one; the
//! value comes out only through [`Secret::expose`], at the one place that sends it.

use std::fmt;

/// A secret string; its `Debug` is redacted. It deserializes from a plain string but does
/// not serialize: a field that must be stored says so with
/// `#[serde(serialize_with = "expose")]`, so a secret never reaches JSON by accident.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Serializes the value itself (for the credential store only).
pub(crate) fn expose<S: serde::Serializer>(secret: &Secret, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(secret.expose())
}

/// [`expose`] for an optional secret.
pub(crate) fn expose_opt<S: serde::Serializer>(
    secret: &Option<Secret>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match secret {
        Some(v) => s.serialize_some(v.expose()),
        None => s.serialize_none(),
    }
}
