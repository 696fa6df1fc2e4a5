//! Dialect detection and dispatch.
//!
//! | dialect | recognised by |
//! |---|---|
//! | D0 platforms | root `platforms` or `appId` |
//! | access (the reference gateway's 2.0) | root `schemaVersion` `2.x`, with `access` or with none of `execution`, `platform`, `tools` |
//! | D2 camelCase | root `schemaVersion`, or `app.name` is an object |
//! | D1 snake_case | root `schema_version` with `app` |

pub(crate) mod access;
pub(crate) mod app;
pub(crate) mod common;
pub(crate) mod platforms;

use std::fmt;

use serde_json::Value;

use crate::model::Dialect;

/// Why the dialect of a document cannot be told; its text is the diagnostic's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Error {
    /// The top level is not a JSON object: the type it is.
    NotAnObject(&'static str),
    /// An object that matches no dialect.
    Unknown,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotAnObject(found) => {
                write!(f, "expected a JSON object at the top level, found {found}")
            }
            Error::Unknown => f.write_str(
                "not an aai.json descriptor: expected `appId` and `platforms` (platforms form), or `app` with `schema_version` (snake_case form) or `schemaVersion` (camelCase form), or `\"schemaVersion\": \"2.0\"` with `access` (access form)",
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Which dialect `root` is written in, or why it cannot be told.
pub(crate) fn detect(root: &Value) -> Result<Dialect, Error> {
    let Some(map) = root.as_object() else {
        return Err(Error::NotAnObject(crate::read::type_name(root)));
    };
    if map.contains_key("platforms") || map.contains_key("appId") {
        return Ok(Dialect::Platforms);
    }
    if let Some(version) = map.get("schemaVersion") {
        let access = map.contains_key("access")
            || !["execution", "platform", "tools"]
                .iter()
                .any(|k| map.contains_key(*k));
        return Ok(if major(version) == Some(2) && access {
            Dialect::Access
        } else {
            Dialect::CamelCase
        });
    }
    if let Some(app) = map.get("app") {
        let tagged_name = app.get("name").is_some_and(Value::is_object);
        return Ok(if tagged_name && !map.contains_key("schema_version") {
            Dialect::CamelCase
        } else {
            Dialect::SnakeCase
        });
    }
    Err(Error::Unknown)
}

/// The major version of a `schemaVersion` value (`"2.0"`, `"2"`, `2`).
fn major(version: &Value) -> Option<u64> {
    match version {
        Value::String(s) => s.trim().split('.').next()?.parse().ok(),
        Value::Number(n) => n.as_f64().filter(|f| *f >= 0.0).map(|f| f.trunc() as u64),
        _ => None,
    }
}
