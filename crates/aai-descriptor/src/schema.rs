//! Tool `parameters`/`returns` schemas: JSON Schema draft-07.
//!
//! Loading checks everything that can make a schema unusable, so a broken schema is a
//! load-time diagnostic: the draft-07 meta-schema (which also checks every `pattern` and
//! `patternProperties` regex with the validator's engine) and every `$ref` (it must be
//! local and resolve inside the schema — the gateway never fetches schemas). Building the
//! full validator costs ≈20× those checks (measured: 5.6 µs vs 0.27 µs for a typical
//! two-property schema), so it happens once, on first use, and is shared by every clone.
//!
//! A loaded schema is kept as compact JSON text (one allocation, ≈8× smaller than the
//! parsed tree); the tree is parsed on first use too. A gateway with thousands of apps
//! only ever expands the schemas agents look at. Nothing here does I/O: the
//! `jsonschema` crate is built without its HTTP/file resolvers.

use std::fmt::{self, Write as _};
use std::sync::{Arc, OnceLock};

use serde::{Serialize, Serializer};
use serde_json::Value;

/// A checked JSON Schema with its validator, built on first use.
#[derive(Clone)]
pub struct Schema {
    inner: Arc<Inner>,
}

/// What a schema builds on first use is boxed: most tools of a large catalog are never
/// called, and an empty slot costs a pointer instead of a parsed value or a validator.
struct Inner {
    text: Box<str>,
    json: OnceLock<Box<Value>>,
    validator: OnceLock<Box<Result<jsonschema::Validator, Error>>>,
    has_patterns: bool,
}

/// Why a schema does not load (or, rarely, does not build): what went wrong and a message
/// that says where inside the schema.
pub type Error = crate::Failure<ErrorKind>;

/// What was wrong with a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// More regular expressions than [`MAX_PATTERNS`].
    TooManyPatterns,
    /// A regular expression longer than [`MAX_PATTERN_LEN`].
    PatternTooLong,
    /// Not a draft-07 schema: the meta-schema rejects it.
    Invalid,
    /// A `$ref` that points outside the schema (the gateway never fetches schemas).
    ExternalRef,
    /// A `$ref` that resolves to nothing in the schema.
    UnresolvedRef,
    /// A regular expression the validator's engine cannot compile within its limits.
    Regex,
    /// The schema passed the load checks but its validator does not build.
    Build,
}

/// Most backtracking steps one regex match may take (fancy-regex; only patterns with
/// backreferences or look-around backtrack). Beyond it the value fails to validate, so a
/// pattern like `^(a|aa)+\1$` cannot stall a call for seconds.
pub const BACKTRACK_LIMIT: usize = 20_000;
/// Largest compiled regex, in bytes; a pattern that needs more does not load.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Longest `pattern` (and `patternProperties` key), in characters.
pub const MAX_PATTERN_LEN: usize = 1_000;
/// Most regexes one schema may hold: with the size limit, this bounds what one tool's
/// schema can cost to compile and keep (a descriptor fetched from a site included).
pub const MAX_PATTERNS: usize = 100;

/// The validator options every schema is built with: draft-07, bounded regexes.
fn options() -> jsonschema::ValidationOptions<'static> {
    jsonschema::draft7::options().with_pattern_options(
        jsonschema::PatternOptions::fancy_regex()
            .backtrack_limit(BACKTRACK_LIMIT)
            .size_limit(REGEX_SIZE_LIMIT),
    )
}

impl Schema {
    /// Checks `json` as a draft-07 schema. The error says what is wrong and where inside
    /// the schema.
    pub fn load(json: &Value) -> Result<Schema, Error> {
        let patterns = check_pattern_budget(json)?;
        if let Err(e) = jsonschema::draft7::meta::validate(json) {
            let at = e.instance_path().as_str();
            return Err(Error::new(
                ErrorKind::Invalid,
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{e} (at `{at}` inside the schema)")
                },
            ));
        }
        check_refs(json, json, &mut String::new())?;
        check_patterns(json)?;
        let has_patterns = patterns > 0;
        Ok(Schema {
            inner: Arc::new(Inner {
                text: json.to_string().into_boxed_str(),
                json: OnceLock::new(),
                validator: OnceLock::new(),
                has_patterns,
            }),
        })
    }

    /// Loads and builds the validator at once.
    pub fn compile(json: &Value) -> Result<Schema, Error> {
        let schema = Schema::load(json)?;
        schema.validator()?;
        Ok(schema)
    }

    /// The schema as written (parsed on first call).
    pub fn json(&self) -> &Value {
        self.inner.json.get_or_init(|| {
            serde_json::from_str(&self.inner.text).expect("the text was serialized from a Value")
        })
    }

    /// The schema as compact JSON text.
    pub fn text(&self) -> &str {
        &self.inner.text
    }

    /// The validator, built on first call. Fails only for schemas that passed the load
    /// checks but still do not compile (not seen in practice; reported, never panics).
    pub fn validator(&self) -> Result<&jsonschema::Validator, Error> {
        self.inner
            .validator
            .get_or_init(|| {
                Box::new(
                    options()
                        .build(self.json())
                        .map_err(|e| Error::new(ErrorKind::Build, e.to_string())),
                )
            })
            .as_ref()
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Whether the schema has a `pattern` or `patternProperties` anywhere: validating
    /// against it runs regexes, which the gateway keeps off its async workers.
    pub fn has_patterns(&self) -> bool {
        self.inner.has_patterns
    }

    /// The names of the top-level `properties`, in document order.
    pub fn property_names(&self) -> impl Iterator<Item = &str> {
        self.json()
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

/// `schema` with a local `$ref` (`#` or `#/json/pointer`) followed once; anything else
/// as it is. Load-time checks guarantee local refs resolve.
pub fn follow_ref<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some("#") => root,
        Some(r) => r
            .strip_prefix('#')
            .and_then(|p| root.pointer(p))
            .unwrap_or(schema),
        None => schema,
    }
}

/// Every `pattern` and `patternProperties` regex of the schema, with where it is.
fn patterns<'a>(value: &'a Value, at: &mut String, out: &mut Vec<(String, &'a str, bool)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
                    continue;
                }
                let len = at.len();
                push_segment(at, key);
                match (key.as_str(), child) {
                    ("pattern", Value::String(p)) => out.push((at.clone(), p, false)),
                    ("patternProperties", Value::Object(props)) => {
                        for (p, sub) in props {
                            out.push((at.clone(), p, true));
                            patterns(sub, at, out);
                        }
                    }
                    _ => patterns(child, at, out),
                }
                at.truncate(len);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| patterns(item, at, out)),
        _ => {}
    }
}

/// The schema's regexes are few and short enough to compile (checked before anything
/// compiles them, the meta-schema's `regex` format included): what one schema can cost is
/// bounded, whoever wrote it.
fn check_pattern_budget(json: &Value) -> Result<usize, Error> {
    let mut found = Vec::new();
    patterns(json, &mut String::new(), &mut found);
    if found.len() > MAX_PATTERNS {
        return Err(Error::new(
            ErrorKind::TooManyPatterns,
            format!(
                "the schema has {} regular expressions; at most {MAX_PATTERNS} are allowed",
                found.len()
            ),
        ));
    }
    for (at, pattern, _) in &found {
        let len = pattern.chars().count();
        if len > MAX_PATTERN_LEN {
            return Err(Error::new(
                ErrorKind::PatternTooLong,
                format!(
                    "the regular expression at `{at}` inside the schema is {len} characters long; at most {MAX_PATTERN_LEN} are allowed"
                ),
            ));
        }
    }
    Ok(found.len())
}

/// Every `pattern` and `patternProperties` regex must compile with the validator's engine
/// and limits (the meta-schema checks them with its own).
fn check_patterns(json: &Value) -> Result<(), Error> {
    let mut found = Vec::new();
    patterns(json, &mut String::new(), &mut found);
    for (at, pattern, is_key) in found {
        let probe = if is_key {
            serde_json::json!({ "patternProperties": { pattern: {} } })
        } else {
            serde_json::json!({ "pattern": pattern })
        };
        options().build(&probe).map(drop).map_err(|e| {
            Error::new(
                ErrorKind::Regex,
                format!("the regular expression at `{at}` inside the schema does not compile: {e}"),
            )
        })?;
    }
    Ok(())
}

/// Appends `/key` to a JSON pointer, escaped.
fn push_segment(at: &mut String, key: &str) {
    at.push('/');
    for c in key.chars() {
        match c {
            '~' => at.push_str("~0"),
            '/' => at.push_str("~1"),
            c => at.push(c),
        }
    }
}

/// Walks the schema: every `$ref` must be local and resolve.
fn check_refs(root: &Value, value: &Value, at: &mut String) -> Result<(), Error> {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                // `enum`, `const`, `default` and `examples` hold data, not schemas.
                if matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
                    continue;
                }
                let len = at.len();
                push_segment(at, key);
                if let ("$ref", Value::String(r)) = (key.as_str(), child) {
                    check_ref(root, r, at)?;
                } else {
                    check_refs(root, child, at)?;
                }
                at.truncate(len);
            }
            Ok(())
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = at.len();
                let _ = write!(at, "/{i}");
                check_refs(root, item, at)?;
                at.truncate(len);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn check_ref(root: &Value, reference: &str, at: &str) -> Result<(), Error> {
    let Some(fragment) = reference.strip_prefix('#') else {
        return Err(Error::new(
            ErrorKind::ExternalRef,
            format!(
                "`$ref` to `{reference}` (at `{at}` inside the schema) points outside the descriptor, and the gateway never fetches schemas; put shared parts in `definitions` and use `#/definitions/...`"
            ),
        ));
    };
    let found = if fragment.is_empty() || fragment.starts_with('/') {
        root.pointer(&percent_decode(fragment)).is_some()
    } else {
        has_anchor(root, reference)
    };
    if found {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::UnresolvedRef,
            format!(
                "`$ref` to `{reference}` (at `{at}` inside the schema) does not resolve to anything in the schema"
            ),
        ))
    }
}

/// Draft-07 plain-name fragments: a subschema with `"$id": "#name"`.
fn has_anchor(value: &Value, id: &str) -> bool {
    match value {
        Value::Object(map) => {
            map.get("$id").and_then(Value::as_str) == Some(id)
                || map.values().any(|v| has_anchor(v, id))
        }
        Value::Array(items) => items.iter().any(|v| has_anchor(v, id)),
        _ => false,
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Schema").field(&self.inner.text).finish()
    }
}

impl Serialize for Schema {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json().serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unused_schema_costs_its_text_and_a_few_words() {
        // A catalog holds one per tool, most never called: what is built on first use is
        // behind a pointer (docs/performance.md, "Link order and smaller keys").
        assert!(
            std::mem::size_of::<Inner>() <= 56,
            "{}",
            std::mem::size_of::<Inner>()
        );
    }

    #[test]
    fn errors_say_what_went_wrong() {
        for (schema, kind) in [
            (json!({"type": "strng"}), ErrorKind::Invalid),
            (
                json!({"properties": {"a": {"$ref": "#/definitions/missing"}}}),
                ErrorKind::UnresolvedRef,
            ),
            (
                json!({"properties": {"a": {"$ref": "other.json#/x"}}}),
                ErrorKind::ExternalRef,
            ),
            (
                json!({"properties": {"a": {"pattern": "((a{1000}){1000}){1000}"}}}),
                ErrorKind::Regex,
            ),
        ] {
            assert_eq!(Schema::load(&schema).unwrap_err().kind(), kind, "{schema}");
        }
    }

    #[test]
    fn load_catches_what_compilation_would() {
        let bad = [
            (
                json!({"type": "strng"}),
                "is not valid under any of the schemas listed in the 'anyOf' keyword",
            ),
            (
                json!({"properties": {"a": {"$ref": "#/definitions/missing"}}}),
                "`$ref` to `#/definitions/missing` (at `/properties/a/$ref` inside the schema) does not resolve",
            ),
            (
                json!({"properties": {"a": {"$ref": "other.json#/x"}}}),
                "points outside the descriptor",
            ),
            (
                json!({"properties": {"a": {"type": "string", "pattern": "(unclosed"}}}),
                "\"(unclosed\" is not a \"regex\" (at `/properties/a/pattern` inside the schema)",
            ),
            (
                json!({"patternProperties": {"[z-a]": {}}}),
                "\"[z-a]\" is not a \"regex\" (at `/patternProperties` inside the schema)",
            ),
            (
                json!({"properties": {"a": {"pattern": "((a{1000}){1000}){1000}"}}}),
                "the regular expression at `/properties/a/pattern` inside the schema does not compile",
            ),
            (
                json!({"patternProperties": {"((a{1000}){1000}){1000}": {}}}),
                "the regular expression at `/patternProperties` inside the schema does not compile",
            ),
        ];
        for (schema, expected) in bad {
            let err = Schema::load(&schema).unwrap_err().to_string();
            assert!(err.contains(expected), "{schema}: {err}");
            assert!(
                options().build(&schema).is_err(),
                "{schema} compiles after all"
            );
        }
    }

    #[test]
    fn regexes_have_a_budget() {
        let long = json!({"properties": {"a": {"pattern": "a".repeat(MAX_PATTERN_LEN + 1)}}});
        assert_eq!(
            Schema::load(&long).unwrap_err().to_string(),
            "the regular expression at `/properties/a/pattern` inside the schema is 1001 characters long; at most 1000 are allowed"
        );
        let many = json!({"properties": (0..=MAX_PATTERNS)
            .map(|i| (format!("p{i}"), json!({"pattern": "^a$"})))
            .collect::<serde_json::Map<_, _>>()});
        assert_eq!(
            Schema::load(&many).unwrap_err().to_string(),
            "the schema has 101 regular expressions; at most 100 are allowed"
        );
        assert_eq!(
            Schema::load(&long).unwrap_err().kind(),
            ErrorKind::PatternTooLong
        );
        assert_eq!(
            Schema::load(&many).unwrap_err().kind(),
            ErrorKind::TooManyPatterns
        );
        // Patterns real APIs use still load.
        for p in [
            "^\\w{1,64}$",
            "^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
            "^(?:[0-9]{1,3}\\.){3}[0-9]{1,3}$",
        ] {
            Schema::load(&json!({"type": "string", "pattern": p}))
                .unwrap_or_else(|e| panic!("{p}: {e}"));
        }
    }

    #[test]
    fn backtracking_is_bounded() {
        let schema = Schema::load(&json!({
            "type": "object",
            "patternProperties": {"^(a|aa)+\\1$": {"type": "string"}},
        }))
        .unwrap();
        assert!(schema.has_patterns());
        let mut instance = serde_json::Map::new();
        // Unbounded, one of these keys alone would take ~2^40 steps; bounded, 50 take a
        // fraction of a second in a debug build (1,000 took 5 s, too close to the bound).
        for i in 0..50 {
            instance.insert(format!("{}b{i}", "a".repeat(40)), json!("x"));
        }
        let started = std::time::Instant::now();
        let _ = schema
            .validator()
            .unwrap()
            .is_valid(&Value::Object(instance));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "bounded: {:?}",
            started.elapsed()
        );
        assert!(
            !Schema::load(&json!({"type": "string"}))
                .unwrap()
                .has_patterns()
        );
    }

    #[test]
    fn good_schemas_load_and_compile_once() {
        let good = json!({
            "definitions": {"id": {"type": "string", "pattern": "^[a-z]+\\d*$"}},
            "type": "object",
            "properties": {
                "a": {"$ref": "#/definitions/id"},
                "b": {"$ref": "#"},
                "c": {"$ref": "#item"},
                "d": {"enum": [{"$ref": "not a ref, just data"}]}
            },
            "items": {"$id": "#item", "type": "integer"}
        });
        let s = Schema::load(&good).unwrap();
        let clone = s.clone();
        assert!(s.validator().unwrap().is_valid(&json!({"a": "abc1"})));
        assert!(std::ptr::eq(
            s.validator().unwrap(),
            clone.validator().unwrap()
        ));
        assert!(!clone.validator().unwrap().is_valid(&json!({"a": "ABC"})));
    }
}
