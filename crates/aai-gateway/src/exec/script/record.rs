//! Reads osascript's source form of a result (`osascript -s s`) into JSON: records
//! (`{name:"Bob", age:30}`) become objects, lists (`{1, 2}`) arrays, strings strings,
//! numbers numbers, `true`/`false` booleans and `missing value` null. Anything else
//! (`date "…"`, `application "Mail"`, object specifiers) is kept as its text.

use serde_json::{Map, Number, Value};

/// Parses one value that fills `text`.
pub(super) fn parse(text: &str) -> Result<Value, String> {
    let mut p = Parser {
        s: text,
        i: 0,
        depth: 0,
    };
    let v = p.value()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("unexpected text at {}", p.i));
    }
    Ok(v)
}

/// How deep records and lists may nest.
const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    s: &'a str,
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.s[self.i..]
    }

    fn ws(&mut self) {
        let trimmed = self.rest().trim_start();
        self.i = self.s.len() - trimmed.len();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.ws();
        if self.rest().starts_with(token) {
            self.i += token.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.ws();
        let rest = self.rest();
        if rest.starts_with('{') {
            return self.braces();
        }
        if rest.starts_with('"') {
            return self.string().map(Value::String);
        }
        for (word, v) in [
            ("missing value", Value::Null),
            ("true", Value::Bool(true)),
            ("false", Value::Bool(false)),
        ] {
            if rest.starts_with(word) && !self.continues_word(word.len()) {
                self.i += word.len();
                return Ok(v);
            }
        }
        if rest.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
            && let Some(n) = self.number()
        {
            return Ok(n);
        }
        self.other()
    }

    fn continues_word(&self, len: usize) -> bool {
        self.rest()[len..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    }

    fn braces(&mut self) -> Result<Value, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("records nest too deeply".into());
        }
        self.i += 1;
        if self.eat("}") {
            self.depth -= 1;
            return Ok(Value::Array(Vec::new()));
        }
        let save = self.i;
        let is_record = self.key().is_ok() && self.eat(":");
        self.i = save;
        let v = if is_record {
            let mut map = Map::new();
            loop {
                let key = self.key()?;
                if !self.eat(":") {
                    return Err(format!("expected `:` after `{key}`"));
                }
                let v = self.value()?;
                map.insert(key, v);
                if self.eat(",") {
                    continue;
                }
                if self.eat("}") {
                    break;
                }
                return Err(format!("expected `,` or `}}` at {}", self.i));
            }
            Value::Object(map)
        } else {
            let mut items = Vec::new();
            loop {
                items.push(self.value()?);
                if self.eat(",") {
                    continue;
                }
                if self.eat("}") {
                    break;
                }
                return Err(format!("expected `,` or `}}` at {}", self.i));
            }
            Value::Array(items)
        };
        self.depth -= 1;
        Ok(v)
    }

    /// A record key: `name`, `name with spaces`, or `|anything|`.
    fn key(&mut self) -> Result<String, String> {
        self.ws();
        if let Some(inner) = self.rest().strip_prefix('|') {
            let end = inner.find('|').ok_or("a |key| is not closed")?;
            let key = inner[..end].to_owned();
            self.i += end + 2;
            return Ok(key);
        }
        let len = self
            .rest()
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ' '))
            .unwrap_or(self.rest().len());
        let key = self.rest()[..len].trim_end().to_owned();
        if key.is_empty() {
            return Err(format!("expected a key at {}", self.i));
        }
        self.i += len;
        Ok(key)
    }

    fn string(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '"' => {
                    self.i += at + 1;
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, 'r')) => out.push('\r'),
                    Some((_, other)) => out.push(other),
                    None => break,
                },
                c => out.push(c),
            }
        }
        Err("a string is not closed".into())
    }

    fn number(&mut self) -> Option<Value> {
        let len = self
            .rest()
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'E' | 'e')))
            .unwrap_or(self.rest().len());
        let text = &self.rest()[..len];
        let v = if let Ok(i) = text.parse::<i64>() {
            Value::Number(i.into())
        } else {
            Value::Number(Number::from_f64(text.parse::<f64>().ok()?)?)
        };
        self.i += len;
        Some(v)
    }

    /// Any other form, kept as its text up to the next `,` or `}` outside quotes and
    /// braces.
    fn other(&mut self) -> Result<Value, String> {
        let start = self.i;
        let mut depth = 0usize;
        let mut quoted = false;
        let mut escaped = false;
        let mut end = self.s.len();
        for (at, c) in self.rest().char_indices() {
            if quoted {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => quoted = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => quoted = true,
                '{' => depth += 1,
                '}' if depth > 0 => depth -= 1,
                ',' | '}' if depth == 0 => {
                    end = start + at;
                    break;
                }
                _ => {}
            }
        }
        let text = self.s[start..end].trim();
        if text.is_empty() {
            return Err(format!("expected a value at {start}"));
        }
        self.i = end;
        Ok(Value::String(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn records_lists_and_scalars() {
        assert_eq!(
            parse("{name:\"Bob \\\"B\\\"\", age:30, ratio:-1.5E+2, tags:{\"a\", \"b\"}, done:false, due:missing value, |odd key|:{}, nested:{x:1}}").unwrap(),
            json!({"name": "Bob \"B\"", "age": 30, "ratio": -150.0, "tags": ["a", "b"], "done": false, "due": null, "odd key": [], "nested": {"x": 1}})
        );
        assert_eq!(parse("{1, 2, 3}").unwrap(), json!([1, 2, 3]));
        assert_eq!(
            parse("{when:date \"Monday, 23 November 2026 at 10:00:00\", app:application \"Mail\"}")
                .unwrap(),
            json!({"when": "date \"Monday, 23 November 2026 at 10:00:00\"", "app": "application \"Mail\""})
        );
        assert_eq!(parse("\"just text\"").unwrap(), json!("just text"));
        assert_eq!(parse("true").unwrap(), json!(true));
    }

    #[test]
    fn broken_input_is_an_error_not_a_panic() {
        for bad in ["{", "{a:", "{a:1", "\"open", "", "{,}", &"{".repeat(10_000)] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
