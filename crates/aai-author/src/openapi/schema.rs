//! Schema conversion: local `$ref`s resolved (cycles and depth stop at a named stub),
//! OpenAPI 3.0 keywords turned into draft-07, and the node budgets that bound the output.

use serde_json::{Map, Value, json};

use super::{Importer, MAX_DESCRIPTION, MAX_SCHEMA_NODES, clip, object};

/// Which way a schema is read: in a request, `readOnly` properties are left out; in a
/// response, `writeOnly` ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dir {
    Request,
    Response,
}

impl<'a> Importer<'a> {
    /// `value`, or what its `$ref` points to (followed up to a few times).
    pub(super) fn deref(&mut self, mut value: &'a Value) -> &'a Value {
        for _ in 0..8 {
            let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
                return value;
            };
            match self.lookup(reference) {
                Some(target) => value = target,
                None => return &Value::Null,
            }
        }
        value
    }

    /// The target of a local `$ref` (`#/a/b~1c`).
    fn lookup(&mut self, reference: &str) -> Option<&'a Value> {
        let Some(pointer) = reference.strip_prefix('#') else {
            self.notes.push(format!(
                "`$ref: {reference}` points outside the document and is not followed"
            ));
            return None;
        };
        // A `$ref` fragment is a percent-encoded JSON pointer.
        let pointer = percent_encoding::percent_decode_str(pointer).decode_utf8_lossy();
        let found = self.doc.pointer(&pointer);
        if found.is_none() {
            self.notes
                .push(format!("`$ref: {reference}` points at nothing"));
        }
        found
    }

    /// An OpenAPI schema as a draft-07 JSON Schema, `$ref`s inlined up to `depth`.
    pub(super) fn schema(&mut self, s: &'a Value, dir: Dir, depth: usize) -> Value {
        let mut stack = Vec::new();
        self.budget = MAX_SCHEMA_NODES.min(self.total);
        let before = self.converted;
        let out = self.convert(s, dir, depth, &mut stack);
        let had = self.total;
        self.total = self.total.saturating_sub(self.converted - before);
        if had > 0 && self.total == 0 {
            self.notes.push(
                "the operations' schemas expand to more nodes than the import takes (twice the document's, at least 200,000); references past that are stubs that name their schema".to_owned(),
            );
        }
        out
    }

    fn convert(&mut self, s: &'a Value, dir: Dir, depth: usize, stack: &mut Vec<&'a str>) -> Value {
        let Some(map) = s.as_object() else {
            // 3.1 allows `true` and `false` as schemas.
            return if s.is_boolean() { s.clone() } else { json!({}) };
        };
        self.converted += 1;
        self.budget = self.budget.saturating_sub(1);
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            let short = reference.rsplit('/').next().unwrap_or(reference);
            let Some(target) = self.lookup(reference) else {
                return json!({});
            };
            // A cycle, too deep, or the schema has grown enough (references that fan out
            // grow it exponentially with depth).
            if stack.contains(&reference) || stack.len() >= depth || self.budget == 0 {
                // A stub that keeps the type and names what was not expanded.
                let mut stub = Map::new();
                if let Some(t) = target.get("type") {
                    stub.insert("type".into(), t.clone());
                }
                stub.insert(
                    "description".into(),
                    Value::String(format!("a {short} (see the API's documentation)")),
                );
                return Value::Object(stub);
            }
            stack.push(reference);
            let mut out = self.convert(target, dir, depth, stack);
            stack.pop();
            // 3.1: keywords beside a `$ref` apply too; the description is the useful one.
            if let (Some(d), Some(o)) = (map.get("description"), out.as_object_mut()) {
                o.insert("description".into(), d.clone());
            }
            return out;
        }
        let mut out = Map::new();
        for (k, v) in map {
            let converted = match k.as_str() {
                "type" | "enum" | "const" | "default" | "format" | "minimum" | "maximum"
                | "minLength" | "maxLength" | "pattern" | "minItems" | "maxItems"
                | "uniqueItems" | "minProperties" | "maxProperties" | "multipleOf" | "readOnly"
                | "writeOnly" | "required" => v.clone(),
                "description" => match v.as_str() {
                    Some(d) => Value::String(clip(d, MAX_DESCRIPTION)),
                    None => continue,
                },
                "exclusiveMinimum" | "exclusiveMaximum" => match v {
                    // 3.0 (draft 4): a flag on `minimum`/`maximum`.
                    Value::Bool(false) => continue,
                    Value::Bool(true) => {
                        let bound = if k == "exclusiveMinimum" {
                            "minimum"
                        } else {
                            "maximum"
                        };
                        match map.get(bound) {
                            Some(b) => {
                                out.insert(k.clone(), b.clone());
                                continue;
                            }
                            None => continue,
                        }
                    }
                    n => n.clone(),
                },
                "example" => {
                    if !map.contains_key("examples") && small(v) {
                        out.insert("examples".into(), json!([v]));
                    }
                    continue;
                }
                "examples" => match v {
                    Value::Array(items) if small(v) && !items.is_empty() => v.clone(),
                    _ => continue,
                },
                "items" | "not" | "additionalProperties" | "contains" | "propertyNames" => {
                    if v.is_boolean() {
                        v.clone()
                    } else {
                        self.convert(v, dir, depth, stack)
                    }
                }
                "allOf" | "anyOf" | "oneOf" => match v.as_array() {
                    Some(items) => Value::Array(
                        items
                            .iter()
                            .map(|i| self.convert(i, dir, depth, stack))
                            .collect(),
                    ),
                    None => continue,
                },
                "properties" | "patternProperties" => {
                    let mut props = Map::new();
                    for (name, p) in object(Some(v)) {
                        props.insert(name.clone(), self.convert(p, dir, depth, stack));
                    }
                    Value::Object(props)
                }
                _ => continue,
            };
            out.insert(k.clone(), converted);
        }
        // `exclusiveMinimum: true` replaced `minimum`.
        for (flag, bound) in [
            ("exclusiveMinimum", "minimum"),
            ("exclusiveMaximum", "maximum"),
        ] {
            if map.get(flag) == Some(&Value::Bool(true)) {
                out.remove(bound);
            }
        }
        if map.get("nullable") == Some(&Value::Bool(true)) {
            if let Some(Value::String(t)) = out.get("type").cloned() {
                out.insert("type".into(), json!([t, "null"]));
            }
            if let Some(Value::Array(values)) = out.get_mut("enum")
                && !values.contains(&Value::Null)
            {
                values.push(Value::Null);
            }
        }
        // Properties the other side owns are not arguments (or results).
        let hidden = if dir == Dir::Request {
            "readOnly"
        } else {
            "writeOnly"
        };
        if let Some(Value::Object(props)) = out.get_mut("properties") {
            let gone: Vec<String> = props
                .iter()
                .filter(|(_, p)| p.get(hidden) == Some(&Value::Bool(true)))
                .map(|(k, _)| k.clone())
                .collect();
            for name in &gone {
                props.shift_remove(name);
            }
            if let Some(Value::Array(req)) = out.get_mut("required") {
                req.retain(|r| !r.as_str().is_some_and(|r| gone.iter().any(|g| g == r)));
            }
        }
        if let Some(Value::Array(req)) = out.get("required")
            && (req.is_empty() || !req.iter().all(Value::is_string))
        {
            out.remove("required");
        }
        Value::Object(out)
    }
}

/// How many objects `doc` holds (a schema node is one).
pub(super) fn nodes(doc: &Value) -> usize {
    let mut count = 0;
    let mut stack = vec![doc];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                count += 1;
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    count
}

/// Whether an example is small enough to keep.
fn small(value: &Value) -> bool {
    value.to_string().len() <= 200
}
