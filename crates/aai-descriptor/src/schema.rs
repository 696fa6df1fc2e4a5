//! Tool `parameters`/`returns` schemas: JSON Schema draft-07, compiled once at load.
//!
//! Compilation never does I/O: the `jsonschema` crate is built without its HTTP/file
//! resolvers, so a remote `$ref` is a load-time diagnostic, not a network fetch.

use std::fmt;
use std::sync::Arc;

use serde::{Serialize, Serializer};
use serde_json::Value;

/// A compiled JSON Schema with its source.
#[derive(Clone)]
pub struct Schema {
    json: Arc<Value>,
    validator: Arc<jsonschema::Validator>,
}

impl Schema {
    /// Compiles `json` as a draft-07 schema (after checking it against the meta-schema).
    pub fn compile(json: &Value) -> Result<Schema, String> {
        let validator = jsonschema::draft7::new(json).map_err(|e| {
            if let jsonschema::error::ValidationErrorKind::Referencing(r) = e.kind() {
                return match r {
                    jsonschema::ReferencingError::Unretrievable { uri, .. } => format!(
                        "`$ref` to `{uri}` points outside the descriptor, and the gateway never fetches schemas; put shared parts in `definitions` and use `#/definitions/...`"
                    ),
                    other => format!("bad `$ref`: {other}"),
                };
            }
            let at = e.instance_path().as_str();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{e} (at `{at}` inside the schema)")
            }
        })?;
        Ok(Schema {
            json: Arc::new(json.clone()),
            validator: Arc::new(validator),
        })
    }

    /// The schema as written.
    pub fn json(&self) -> &Value {
        &self.json
    }

    /// The compiled validator.
    pub fn validator(&self) -> &jsonschema::Validator {
        &self.validator
    }

    /// The names of the top-level `properties`, in document order.
    pub fn property_names(&self) -> impl Iterator<Item = &str> {
        self.json
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.keys().map(String::as_str))
    }

    /// Whether `name` is a top-level property.
    pub fn has_property(&self, name: &str) -> bool {
        self.property_names().any(|p| p == name)
    }
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Schema").field(&self.json).finish()
    }
}

impl Serialize for Schema {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}
