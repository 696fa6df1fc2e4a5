//! A call's arguments, as the pipeline takes them: the schema's defaults filled in, then
//! validated against the tool's schema (off the async workers, with a deadline, when the
//! schema runs regexes); a violation names the field, never the value.

use aai_descriptor::Tool;
use serde_json::{Map, Value};

use super::Error;
use crate::error::GatewayError;

/// At most this many schema violations are listed in one INVALID_PARAMS error.
const MAX_REPORTED_VIOLATIONS: usize = 5;

/// How long validating one call's arguments may take.
pub(super) const VALIDATION_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

/// [`prepare_args`], off the async workers when the schema runs regexes (whose cost
/// depends on the arguments), with a deadline.
pub(super) async fn validate(tool: &Tool, args: Option<Value>) -> Result<Value, GatewayError> {
    if !tool.parameters.has_patterns() {
        return prepare_args(tool, args);
    }
    let owned = tool.clone();
    let work = tokio::task::spawn_blocking(move || prepare_args(&owned, args));
    match tokio::time::timeout(VALIDATION_DEADLINE, work).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err(Error::ValidationFailed(e.to_string()).into()),
        Err(_) => Err(Error::ValidationSlow.into()),
    }
}

/// Applies schema defaults and validates; errors name the field, never the value.
pub(crate) fn prepare_args(tool: &Tool, args: Option<Value>) -> Result<Value, GatewayError> {
    let mut args = match args {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v,
        Some(other) => {
            return Err(Error::NotObject(aai_descriptor::read::type_name(&other)).into());
        }
    };
    let schema = tool.parameters.json();
    apply_defaults(schema, schema, &mut args, 0);
    let validator = tool
        .parameters
        .validator()
        .map_err(|e| Error::Schema(e.to_string()))?;
    let mut declared = None;
    let violations: Vec<(String, String)> = validator
        .iter_errors(&args)
        .take(MAX_REPORTED_VIOLATIONS)
        .map(|e| {
            use jsonschema::error::ValidationErrorKind as Kind;
            // Object keys are data too: only names the schema declares are shown.
            let declared = declared.get_or_insert_with(|| declared_names(schema));
            let mut field = masked_path(e.instance_path().as_str(), &args, declared);
            let message = match e.kind() {
                Kind::Required { property } => {
                    if let Some(p) = property.as_str() {
                        field = aai_descriptor::diagnostic::join_pointer(&field, p);
                    }
                    return (field, "is a required property".to_owned());
                }
                Kind::AdditionalProperties { .. } | Kind::UnevaluatedProperties { .. } => {
                    "has properties that are not allowed".to_owned()
                }
                Kind::PropertyNames { .. } => "has a property name that is not allowed".to_owned(),
                _ => e.masked_with("the value").to_string(),
            };
            (field, format!(": {message}"))
        })
        .collect();
    if let Some((field, _)) = violations.first() {
        let detail = violations
            .iter()
            .map(|(f, m)| {
                if f.is_empty() {
                    m.trim_start_matches(": ").to_owned()
                } else if let Some(m) = m.strip_prefix(": ") {
                    format!("`{f}`: {m}")
                } else {
                    format!("`{f}` {m}")
                }
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Err(Error::Invalid {
            detail,
            field: field.clone(),
        }
        .into());
    }
    Ok(args)
}

/// Every property name the schema declares (`properties` keys and `required` entries,
/// anywhere in it): the object keys an error may show.
fn declared_names(schema: &Value) -> std::collections::HashSet<&str> {
    let mut names = std::collections::HashSet::new();
    let mut todo = vec![schema];
    while let Some(v) = todo.pop() {
        match v {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    names.extend(props.keys().map(String::as_str));
                }
                if let Some(Value::Array(req)) = map.get("required") {
                    names.extend(req.iter().filter_map(Value::as_str));
                }
                todo.extend(
                    map.iter()
                        .filter(|(k, _)| {
                            !matches!(k.as_str(), "enum" | "const" | "default" | "examples")
                        })
                        .map(|(_, v)| v),
                );
            }
            Value::Array(items) => todo.extend(items),
            _ => {}
        }
    }
    names
}

/// `pointer` into `args` with every object key the schema does not declare replaced by
/// `*` (array indexes stay), so a map's keys never reach an error.
fn masked_path(pointer: &str, args: &Value, declared: &std::collections::HashSet<&str>) -> String {
    let mut out = String::new();
    let mut at = Some(args);
    for raw in pointer.split('/').skip(1) {
        let key = raw.replace("~1", "/").replace("~0", "~");
        let shown = match at {
            Some(Value::Array(_)) if key.parse::<usize>().is_ok() => raw.to_owned(),
            Some(Value::Object(_)) if declared.contains(key.as_str()) => raw.to_owned(),
            _ => "*".to_owned(),
        };
        at = at.and_then(|v| match v {
            Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            Value::Object(map) => map.get(&key),
            _ => None,
        });
        out.push('/');
        out.push_str(&shown);
    }
    out
}

/// `args` with the defaults of `tool`'s schema filled in (what its app got; not
/// validated).
pub(crate) fn with_defaults(tool: &Tool, args: &Value) -> Value {
    let mut args = args.clone();
    let schema = tool.parameters.json();
    apply_defaults(schema, schema, &mut args, 0);
    args
}

/// Fills absent properties that have a `default`, in nested objects too.
fn apply_defaults(root: &Value, schema: &Value, value: &mut Value, depth: usize) {
    if depth > 8 {
        return;
    }
    let schema = aai_descriptor::schema::follow_ref(root, schema);
    let (Some(props), Value::Object(map)) =
        (schema.get("properties").and_then(Value::as_object), value)
    else {
        return;
    };
    for (name, prop) in props {
        match map.get_mut(name) {
            Some(child) => apply_defaults(root, prop, child, depth + 1),
            None => {
                if let Some(default) = prop.get("default") {
                    map.insert(name.clone(), default.clone());
                }
            }
        }
    }
}
