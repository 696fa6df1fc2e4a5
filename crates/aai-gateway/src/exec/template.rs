//! `${param}` templates outside scripts (COM action values, Android extras, iOS URLs):
//! a value that is exactly one placeholder keeps its argument's JSON type; anything else
//! is text, each placeholder replaced by its argument (strings as they are, other values
//! as JSON, missing or null as nothing) after `encode`.

use serde_json::Value;

/// Fills a template value: one placeholder keeps its type, mixed strings are text, arrays
/// and objects are filled inside.
pub(crate) fn fill(template: &Value, args: &Value) -> Value {
    match template {
        Value::String(s) => match sole_placeholder(s) {
            Some(name) => args.get(name).cloned().unwrap_or(Value::Null),
            None => Value::String(fill_text(s, args, |v| v.to_owned())),
        },
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, args)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, args)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Replaces every `${name}` of `template` with `encode(argument as text)`.
pub(crate) fn fill_text(template: &str, args: &Value, encode: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[at..]);
            return out;
        };
        match args.get(&after[..end]) {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) => out.push_str(&encode(v)),
            Some(other) => out.push_str(&encode(&other.to_string())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `name` when `s` is exactly `${name}`.
fn sole_placeholder(s: &str) -> Option<&str> {
    let name = s.strip_prefix("${")?.strip_suffix('}')?;
    (!name.contains(['$', '{', '}'])).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_placeholder_keeps_its_type_and_mixed_templates_are_text() {
        let args = json!({"n": 5, "flag": true, "name": "Bob"});
        assert_eq!(fill(&json!("${n}"), &args), json!(5));
        assert_eq!(fill(&json!("${flag}"), &args), json!(true));
        assert_eq!(
            fill(&json!("Dear ${name}, ${n} items${missing}"), &args),
            json!("Dear Bob, 5 items")
        );
        assert_eq!(
            fill(&json!(["${n}", {"k": "${name}"}]), &args),
            json!([5, {"k": "Bob"}])
        );
        assert_eq!(fill(&json!("${missing}"), &args), Value::Null);
        assert_eq!(fill(&json!("a ${open"), &args), json!("a ${open"));
        assert_eq!(
            fill_text("x=${name}&y=${n}", &args, |v| v.to_uppercase()),
            "x=BOB&y=5"
        );
    }
}
