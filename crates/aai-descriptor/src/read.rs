//! A reader over `serde_json::Value` that knows where it is.
//!
//! Every accessor reports a precise diagnostic (JSON pointer + expected type) instead of
//! failing, so one pass over a file finds *all* of its problems. Keys a reader never asked
//! for are reported as unknown-field warnings when the reader is dropped, with a
//! "did you mean" when the key is a known key in the other case convention
//! (`baseUrl` vs `base_url`) or differs only in letter case.
//!
//! Also used by the gateway to read `config.json`.

use serde_json::{Map, Value};

use crate::diagnostic::{Sink, join_pointer};

/// The JSON type of a value, as written in messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A JSON object being read field by field.
#[derive(Debug)]
pub struct Obj<'a> {
    sink: &'a Sink,
    map: &'a Map<String, Value>,
    pointer: String,
    asked: Vec<&'static str>,
    silent_unknown: bool,
}

impl<'a> Obj<'a> {
    /// Reads `value` as an object; reports an error and returns `None` if it is not one.
    pub fn new(sink: &'a Sink, value: &'a Value, pointer: String) -> Option<Self> {
        match value {
            Value::Object(map) => Some(Self {
                sink,
                map,
                pointer,
                asked: Vec::new(),
                silent_unknown: false,
            }),
            other => {
                sink.error(
                    pointer,
                    format!("expected an object, found {}", type_name(other)),
                );
                None
            }
        }
    }

    /// The pointer of this object.
    pub fn pointer(&self) -> &str {
        &self.pointer
    }

    /// The pointer of field `key` of this object.
    pub fn at(&self, key: &str) -> String {
        join_pointer(&self.pointer, key)
    }

    /// The diagnostics sink this reader reports to.
    pub fn sink(&self) -> &'a Sink {
        self.sink
    }

    /// Whether field `key` is present (does not count as reading it).
    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// Do not warn about unknown fields of this object (free-form maps).
    pub fn allow_unknown(&mut self) {
        self.silent_unknown = true;
    }

    /// Marks `key` as known without reading it.
    pub fn ignore(&mut self, key: &'static str) {
        self.asked.push(key);
    }

    /// The raw value of `key`, if present.
    pub fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.asked.push(key);
        self.map.get(key)
    }

    /// The raw value of a required `key`; reports it missing.
    pub fn req(&mut self, key: &'static str) -> Option<&'a Value> {
        let value = self.get(key);
        if value.is_none() {
            self.missing(key);
        }
        value
    }

    /// Reports that required field `key` is missing.
    pub fn missing(&self, key: &str) {
        self.sink.error(
            self.pointer.clone(),
            format!("missing required field `{key}`"),
        );
    }

    fn typed<T>(
        &mut self,
        key: &'static str,
        required: bool,
        expected: &str,
        conv: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Option<T> {
        let value = if required {
            self.req(key)?
        } else {
            self.get(key)?
        };
        let converted = conv(value);
        if converted.is_none() {
            self.sink.error(
                self.at(key),
                format!("expected {expected}, found {}", type_name(value)),
            );
        }
        converted
    }

    /// An optional string field.
    pub fn opt_str(&mut self, key: &'static str) -> Option<&'a str> {
        self.typed(key, false, "a string", Value::as_str)
    }

    /// A required string field (may be empty).
    pub fn req_str(&mut self, key: &'static str) -> Option<&'a str> {
        self.typed(key, true, "a string", Value::as_str)
    }

    /// A required string field that must not be empty or only white space.
    pub fn req_text(&mut self, key: &'static str) -> Option<&'a str> {
        let text = self.req_str(key)?;
        if text.trim().is_empty() {
            self.sink
                .error(self.at(key), format!("`{key}` must not be empty"));
            return None;
        }
        Some(text)
    }

    /// An optional string field that must not be empty when present.
    pub fn opt_text(&mut self, key: &'static str) -> Option<&'a str> {
        let text = self.opt_str(key)?;
        if text.trim().is_empty() {
            self.sink
                .error(self.at(key), format!("`{key}` must not be empty"));
            return None;
        }
        Some(text)
    }

    /// An optional boolean field.
    pub fn opt_bool(&mut self, key: &'static str) -> Option<bool> {
        self.typed(key, false, "a boolean", Value::as_bool)
    }

    /// An optional non-negative number field.
    pub fn opt_non_negative(&mut self, key: &'static str) -> Option<f64> {
        let n = self.typed(key, false, "a number", Value::as_f64)?;
        if n < 0.0 || !n.is_finite() {
            self.sink
                .error(self.at(key), format!("`{key}` must not be negative"));
            return None;
        }
        Some(n)
    }

    /// An optional object field.
    pub fn opt_obj(&mut self, key: &'static str) -> Option<Obj<'a>> {
        let value = self.get(key)?;
        Obj::new(self.sink, value, self.at(key))
    }

    /// A required object field.
    pub fn req_obj(&mut self, key: &'static str) -> Option<Obj<'a>> {
        let value = self.req(key)?;
        Obj::new(self.sink, value, self.at(key))
    }

    /// An optional array field.
    pub fn opt_array(&mut self, key: &'static str) -> Option<Arr<'a>> {
        let value = self.get(key)?;
        Arr::new(self.sink, value, self.at(key))
    }

    /// A required array field.
    pub fn req_array(&mut self, key: &'static str) -> Option<Arr<'a>> {
        let value = self.req(key)?;
        Arr::new(self.sink, value, self.at(key))
    }

    /// An optional array of strings.
    pub fn opt_str_list(&mut self, key: &'static str) -> Option<Vec<String>> {
        let arr = self.opt_array(key)?;
        Some(arr.strings())
    }

    /// An optional object whose values must all be strings (headers, env).
    pub fn opt_str_map(&mut self, key: &'static str) -> Option<Vec<(String, String)>> {
        let obj = self.opt_obj(key)?;
        Some(obj.string_entries())
    }

    /// Every entry of a free-form object whose values must be strings.
    pub fn string_entries(mut self) -> Vec<(String, String)> {
        self.allow_unknown();
        let mut out = Vec::with_capacity(self.map.len());
        for (k, v) in self.map {
            match v.as_str() {
                Some(s) => out.push((k.clone(), s.to_owned())),
                None => self.sink.error(
                    self.at(k),
                    format!("expected a string, found {}", type_name(v)),
                ),
            }
        }
        out
    }

    /// Every entry of this object, for free-form maps.
    pub fn entries(mut self) -> impl Iterator<Item = (&'a String, &'a Value)> {
        self.allow_unknown();
        self.map.iter()
    }
}

impl Drop for Obj<'_> {
    fn drop(&mut self) {
        if self.silent_unknown || std::thread::panicking() {
            return;
        }
        for key in self.map.keys() {
            if self.asked.iter().any(|k| k == key) {
                continue;
            }
            let hint = suggestion(key, &self.asked)
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            self.sink.warning(
                join_pointer(&self.pointer, key),
                format!("unknown field `{key}` is ignored{hint}"),
            );
        }
    }
}

/// A known key that `unknown` is probably a misspelling of: the same key in the other
/// case convention or letter case, else a key at most two edits away.
fn suggestion(unknown: &str, known: &[&'static str]) -> Option<&'static str> {
    let fold = |s: &str| -> Vec<char> {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let folded = fold(unknown);
    if let Some(k) = known.iter().copied().find(|k| fold(k) == folded) {
        return Some(k);
    }
    if folded.len() < 4 {
        return None;
    }
    known
        .iter()
        .copied()
        .map(|k| (edit_distance(&fold(k), &folded), k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// A JSON array being read element by element.
#[derive(Debug)]
pub struct Arr<'a> {
    sink: &'a Sink,
    items: &'a [Value],
    pointer: String,
}

impl<'a> Arr<'a> {
    /// Reads `value` as an array; reports an error and returns `None` if it is not one.
    pub fn new(sink: &'a Sink, value: &'a Value, pointer: String) -> Option<Self> {
        match value {
            Value::Array(items) => Some(Self {
                sink,
                items,
                pointer,
            }),
            other => {
                sink.error(
                    pointer,
                    format!("expected an array, found {}", type_name(other)),
                );
                None
            }
        }
    }

    /// The pointer of this array.
    pub fn pointer(&self) -> &str {
        &self.pointer
    }

    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// How many elements it has.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// The elements with their indexes and pointers.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &'a Value, String)> + '_ {
        self.items
            .iter()
            .enumerate()
            .map(|(i, v)| (i, v, self.at(i)))
    }

    /// The elements with their indexes (use [`Arr::at`] for a pointer when reporting).
    pub fn values(&self) -> impl Iterator<Item = (usize, &'a Value)> + 'a {
        self.items.iter().enumerate()
    }

    /// The pointer of element `index`.
    pub fn at(&self, index: usize) -> String {
        format!("{}/{index}", self.pointer)
    }

    /// The elements as written, for checks across them.
    pub fn raw(&self) -> &'a [Value] {
        self.items
    }

    /// The elements read as objects; non-objects are reported and skipped.
    pub fn objects(&self) -> impl Iterator<Item = (usize, Obj<'a>)> + '_ {
        let sink = self.sink;
        self.iter()
            .filter_map(move |(i, v, p)| Obj::new(sink, v, p).map(|o| (i, o)))
    }

    /// The elements read as strings; non-strings are reported and skipped.
    pub fn strings(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.items.len());
        for (i, v) in self.values() {
            match v.as_str() {
                Some(s) => out.push(s.to_owned()),
                None => self.sink.error(
                    self.at(i),
                    format!("expected a string, found {}", type_name(v)),
                ),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_warned_with_a_hint() {
        let sink = Sink::new("t.json");
        let doc = json!({"base_url": "x", "baseUrl": "y", "Type": "http", "zzz": 1});
        {
            let mut o = Obj::new(&sink, &doc, String::new()).unwrap();
            assert_eq!(o.opt_str("base_url"), Some("x"));
            o.ignore("type");
        }
        let d = sink.into_vec();
        let msgs: Vec<_> = d
            .iter()
            .map(|d| (d.pointer.as_str(), d.message.as_str()))
            .collect();
        assert_eq!(
            msgs,
            [
                (
                    "/baseUrl",
                    "unknown field `baseUrl` is ignored; did you mean `base_url`?"
                ),
                (
                    "/Type",
                    "unknown field `Type` is ignored; did you mean `type`?"
                ),
                ("/zzz", "unknown field `zzz` is ignored"),
            ]
        );
    }

    #[test]
    fn type_errors_name_the_pointer_and_both_types() {
        let sink = Sink::new("t.json");
        let doc = json!({"a/b": 3, "list": ["x", 1]});
        {
            let mut o = Obj::new(&sink, &doc, String::new()).unwrap();
            assert_eq!(o.req_str("a/b"), None);
            assert_eq!(o.opt_str_list("list"), Some(vec!["x".to_owned()]));
            assert_eq!(o.req_str("gone"), None);
        }
        let d: Vec<_> = sink.into_vec().into_iter().map(|d| d.to_string()).collect();
        assert_eq!(
            d,
            [
                "t.json: /a~1b: error: expected a string, found an integer",
                "t.json: /list/1: error: expected a string, found an integer",
                "t.json: error: missing required field `gone`",
            ]
        );
    }
}
