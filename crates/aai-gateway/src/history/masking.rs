//! What history keeps of a value: the secrets it carries masked (by a field's name, by a
//! value's shape, in URLs, credentials and private keys), strings cut, the work bounded
//! whatever the size. The consent question shows arguments masked the same way.

use serde_json::{Map, Value};

use super::{MAX_RESULT, MAX_VALUE};

/// What a field name holds, in any case, when its value is never kept.
const SECRET_WORDS: [&str; 18] = [
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "auth",
    "bearer",
    "jwt",
    "cookie",
    "credential",
    "session",
    "otp",
    "pin",
    "mnemonic",
    "seed",
    "private",
    "signature",
    "dsn",
];

/// Whether a byte (lower-cased) begins one of [`SECRET_WORDS`].
const FIRST_LETTERS: [bool; 256] = {
    let mut first = [false; 256];
    let mut i = 0;
    while i < SECRET_WORDS.len() {
        first[SECRET_WORDS[i].as_bytes()[0] as usize] = true;
        i += 1;
    }
    first
};

/// Field names whose values are never kept. Called for every field of every call's
/// arguments and result, so it allocates nothing, and compares words only where the
/// name has one of their first letters.
pub(super) fn secret_looking(key: &str) -> bool {
    let bytes = key.as_bytes();
    (0..bytes.len()).any(|at| {
        let first = bytes[at].to_ascii_lowercase();
        FIRST_LETTERS[first as usize]
            && SECRET_WORDS.iter().any(|w| {
                let w = w.as_bytes();
                w[0] == first
                    && bytes
                        .get(at..at + w.len())
                        .is_some_and(|here| here.eq_ignore_ascii_case(w))
            })
    }) || names_ssn(key)
}

/// Whether `hay` holds `needle` (lower-case ASCII).
fn holds(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Whether a field name names a social security number: `ssn` as a word of it (`ssn`,
/// `user_ssn`, `ssnLast4`, `customerSSN`), not any three letters (`classname`), or
/// `social security` in any spelling.
fn names_ssn(key: &str) -> bool {
    // The name's letters and digits, in lower case; on the stack for a name of common
    // length.
    let mut short = [0u8; 64];
    let long: Vec<u8>;
    let squashed: &[u8] = if key.len() <= short.len() {
        let mut n = 0;
        for b in key.bytes().filter(u8::is_ascii_alphanumeric) {
            short[n] = b.to_ascii_lowercase();
            n += 1;
        }
        &short[..n]
    } else {
        long = key
            .bytes()
            .filter(u8::is_ascii_alphanumeric)
            .map(|b| b.to_ascii_lowercase())
            .collect();
        &long
    };
    if holds(squashed, b"socialsecurity") {
        return true;
    }
    // `ssn` as a word is `ssn` squashed too: most names go no further.
    if !holds(squashed, b"ssn") {
        return false;
    }
    // Words: split at anything but letters and digits, at a lower-case letter followed by
    // an upper-case one, and between letters and digits.
    let mut word = String::new();
    let mut prev: Option<char> = None;
    for c in key.chars().chain(std::iter::once(' ')) {
        let boundary = !c.is_ascii_alphanumeric()
            || prev.is_some_and(|p| {
                (p.is_ascii_lowercase() && c.is_ascii_uppercase())
                    || (p.is_ascii_alphabetic() != c.is_ascii_alphabetic())
            });
        if boundary {
            if word.eq_ignore_ascii_case("ssn") {
                return true;
            }
            word.clear();
        }
        if c.is_ascii_alphanumeric() {
            word.push(c);
            prev = Some(c);
        } else {
            prev = None;
        }
    }
    false
}

/// A string value with what it carries of secrets masked: a URL's password and the values
/// of secret-looking query parameters (`postgres://u:***@h/db`, `…?api_key=***`), a
/// `Bearer …` or `Basic …` credential, and token-shaped words and private keys wherever
/// they sit ([`mask_tokens`]).
pub(super) fn mask_text(s: &str) -> String {
    mask_tokens(&crate::text::mask_secrets_with(
        &crate::text::excerpt(s, MAX_VALUE),
        secret_looking,
    ))
}

/// `text` with the secrets it carries masked wherever they sit in it: every word shaped
/// like a token (by its prefix — `ghp_…`, `sk-…`, `xoxb-…`, AWS and Google keys — or a
/// JWT: [`aai_descriptor::looks_secret_value`]), the credential after each `Bearer `, and
/// the body of a PEM private key. Words are runs of letters, digits, `_` and `-` (with
/// `.` for JWTs); one that only contains a prefix (`task-scheduler`) is kept. In JSON
/// text a word right after an escape (`\nghp_…`) counts from after it.
pub(crate) fn mask_tokens(text: &str) -> String {
    if !may_hold_tokens(text) {
        return text.to_owned();
    }
    let text = mask_private_keys(text);
    let bytes = text.as_bytes();
    let word_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let end_of = |from: usize, dots: bool| {
        let mut end = text[from..]
            .find(|c: char| !(word_char(c) || (dots && c == '.')))
            .map_or(text.len(), |n| from + n);
        while dots && end > from && bytes[end - 1] == b'.' {
            end -= 1;
        }
        end
    };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        if !word_char(c) {
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        let (plain, dotted) = (end_of(i, false), end_of(i, true));
        let escaped = i > 0 && bytes[i - 1] == b'\\' && matches!(c, 'n' | 't' | 'r');
        let starts = [Some(i), escaped.then_some(i + 1)];
        let secret = starts.into_iter().flatten().find_map(|start| {
            [dotted, plain].into_iter().find_map(|end| {
                (end >= start + 16 && aai_descriptor::looks_secret_value(&text[start..end]))
                    .then_some((start, end))
            })
        });
        if let Some((start, end)) = secret {
            out.push_str(&text[i..start]);
            out.push_str("***");
            i = end;
            continue;
        }
        out.push_str(&text[i..plain]);
        // `Bearer <credential>`: the credential, up to a space, quote or escape.
        if text[i..plain].eq_ignore_ascii_case("bearer") && text[plain..].starts_with(' ') {
            let from = plain + 1;
            let end = text[from..]
                .find(|c: char| {
                    c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | '<' | '>' | ',')
                })
                .map_or(text.len(), |n| from + n);
            if end > from {
                out.push(' ');
                out.push_str("***");
                i = end;
                continue;
            }
        }
        i = plain;
    }
    out
}

/// Whether [`mask_tokens`] may find anything in `text`: a run of 16 word characters or
/// dots (the shortest token it masks), `bearer` in any case, or a private key's
/// `-----BEGIN ` (a run of dashes). Most texts — a short answer, a name — have none, and
/// are copied as they are after one pass.
fn may_hold_tokens(text: &str) -> bool {
    let mut run = 0;
    for &b in text.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') {
            run += 1;
            if run >= 16 {
                return true;
            }
        } else {
            run = 0;
        }
    }
    text.contains("-----BEGIN ")
        || text
            .as_bytes()
            .windows(6)
            .any(|w| w.eq_ignore_ascii_case(b"bearer"))
}

/// `text` with the body of each PEM private key (`-----BEGIN … PRIVATE KEY-----` up to its
/// `-----END`, or the end of the text when it was cut) replaced by `***`.
fn mask_private_keys(text: &str) -> std::borrow::Cow<'_, str> {
    const BEGIN: &str = "-----BEGIN ";
    // A byte search first: most texts have no dash at all.
    if !text.contains('-') || !text.contains(BEGIN) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(BEGIN) {
        let label_at = at + BEGIN.len();
        let Some(close) = rest[label_at..].find("-----") else {
            break;
        };
        let header_end = label_at + close + "-----".len();
        let private = rest[label_at..label_at + close].contains("PRIVATE KEY");
        out.push_str(&rest[..header_end]);
        rest = &rest[header_end..];
        if private {
            out.push_str("***");
            rest = &rest[rest.find("-----END").unwrap_or(rest.len())..];
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// A value as history keeps it (arguments, and results before their excerpt is taken):
/// secret-looking fields masked, the value after a secret-looking flag in a list
/// (`["--password", "…"]`) masked, URLs' passwords and secret query parameters masked,
/// strings cut, at most 50 entries per object or array, depth bounded — so the work is
/// bounded whatever the size of the value.
pub fn mask(args: &Value) -> Value {
    fn walk(v: &Value, depth: usize) -> Value {
        match v {
            Value::Object(map) if depth < 8 => Value::Object(
                map.iter()
                    .take(50)
                    .map(|(k, v)| {
                        let kept = if secret_looking(k) {
                            Value::String("***".into())
                        } else {
                            walk(v, depth + 1)
                        };
                        (crate::text::excerpt(k, MAX_VALUE), kept)
                    })
                    .collect::<Map<String, Value>>(),
            ),
            Value::Array(items) if depth < 8 => {
                let mut after_flag = false;
                Value::Array(
                    items
                        .iter()
                        .take(50)
                        .map(|i| {
                            let masked = if after_flag {
                                Value::String("***".into())
                            } else {
                                walk(i, depth + 1)
                            };
                            // `--password value`, `-p value`: the next item is the secret;
                            // `--password=value` is masked in place.
                            after_flag = i.as_str().is_some_and(|f| {
                                f.starts_with('-') && !f.contains('=') && secret_looking(f)
                            });
                            match i.as_str().and_then(|f| f.split_once('=')) {
                                Some((flag, _))
                                    if flag.starts_with('-') && secret_looking(flag) =>
                                {
                                    Value::String(format!("{flag}=***"))
                                }
                                _ => masked,
                            }
                        })
                        .collect(),
                )
            }
            Value::String(s) => {
                // URL passwords and secret query parameters are masked in place; a value
                // shaped like a token (by its prefix, not its name) whole.
                let masked = mask_text(s);
                if masked == *s && aai_descriptor::looks_secret_value(s) {
                    Value::String("***".into())
                } else {
                    Value::String(masked)
                }
            }
            Value::Object(_) | Value::Array(_) => Value::String("…".into()),
            other => other.clone(),
        }
    }
    walk(args, 0)
}

/// A result excerpt: at most 500 characters, the secrets it quotes masked first
/// ([`mask_tokens`]), so that no secret survives as a prefix.
pub fn excerpt(text: &str) -> String {
    crate::text::excerpt(&mask_tokens(text), MAX_RESULT)
}
