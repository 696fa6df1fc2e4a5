//! Dialect detection and dispatch.
//!
//! | dialect | recognised by |
//! |---|---|
//! | D0 platforms | root `platforms` or `appId` |
//! | D2 camelCase | root `schemaVersion`, or `app.name` is an object |
//! | D1 snake_case | root `schema_version` with `app` |

pub(crate) mod app;
pub(crate) mod common;
pub(crate) mod platforms;

use serde_json::Value;

use crate::model::Dialect;

/// Which dialect `root` is written in, or why it cannot be told.
pub(crate) fn detect(root: &Value) -> Result<Dialect, String> {
    let Some(map) = root.as_object() else {
        return Err(format!(
            "expected a JSON object at the top level, found {}",
            crate::read::type_name(root)
        ));
    };
    if map.contains_key("platforms") || map.contains_key("appId") {
        return Ok(Dialect::Platforms);
    }
    if map.contains_key("schemaVersion") {
        return Ok(Dialect::CamelCase);
    }
    if let Some(app) = map.get("app") {
        let tagged_name = app.get("name").is_some_and(Value::is_object);
        return Ok(if tagged_name && !map.contains_key("schema_version") {
            Dialect::CamelCase
        } else {
            Dialect::SnakeCase
        });
    }
    Err("not an aai.json descriptor: expected `appId` and `platforms` (platforms form), or `app` with `schema_version` (snake_case form) or `schemaVersion` (camelCase form)".to_owned())
}
