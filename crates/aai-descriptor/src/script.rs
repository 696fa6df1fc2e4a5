//! Script templates of the macOS executors (AppleScript, JXA): where each `${param}`
//! placeholder sits — inside which kind of string literal, in a comment, or in code.
//!
//! A small lexer per language knows its string literals, comments and other quoted forms
//! (AppleScript `«…»` and `|…|`, JavaScript template literals and regular expressions),
//! so that the gateway can render an argument value as data in exactly the literal it
//! sits in, and a descriptor that puts a placeholder where a value would be code fails to
//! load. [`skeleton`] reduces a script to its code (literals emptied, comments dropped):
//! rendering must leave it unchanged, which is how the tests prove that no value became
//! code.

/// Why a script cannot be read: what it leaves unclosed, and the message that says so.
pub type Error = crate::Failure<ErrorKind>;

/// What a script leaves unclosed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A string literal (at the end of the script, or, for JavaScript's `'…'` and `"…"`,
    /// at the end of its line).
    String,
    /// A block comment.
    Comment,
    /// An AppleScript `«…»` form.
    Chevron,
    /// An AppleScript `|…|` identifier.
    Pipe,
    /// A JavaScript regular expression.
    Regex,
    /// A JavaScript template literal's `${`.
    Interpolation,
}

/// A script language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// AppleScript.
    AppleScript,
    /// JavaScript for Automation.
    JavaScript,
}

/// The kind of string literal a placeholder sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quote {
    /// `"…"`.
    Double,
    /// `'…'` (JavaScript).
    Single,
    /// `` `…` `` (JavaScript template literal).
    Backtick,
}

/// Where a placeholder sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// Inside a string literal: the value is rendered as escaped text.
    String(Quote),
    /// In code: only numbers and booleans may go there.
    Code,
    /// In a comment: it renders as nothing.
    Comment,
}

/// A template, split at its placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Template text, copied as it is.
    Text(&'a str),
    /// `${name}`.
    Slot {
        /// The parameter.
        name: &'a str,
        /// Where it sits.
        context: Context,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Code,
    Str(Quote),
    LineComment,
    /// AppleScript `(* … *)` (nested) or JavaScript `/* … */`.
    BlockComment(u32),
    /// AppleScript `«…»`.
    Chevron,
    /// AppleScript `|identifier|`.
    Pipe,
    /// JavaScript `/regex/flags`; `true` inside a `[…]` class.
    Regex(bool),
}

/// What the scanner reports.
enum Event<'a> {
    Text(&'a str, State),
    Slot(&'a str, State),
}

/// Splits `template` at its placeholders. Fails when a literal or comment is not closed
/// (the script would not compile, and placeholders could not be placed).
pub fn parse(lang: Lang, template: &str) -> Result<Vec<Piece<'_>>, Error> {
    let mut pieces = Vec::new();
    scan(lang, template, true, |event| match event {
        Event::Text(t, _) => pieces.push(Piece::Text(t)),
        Event::Slot(name, state) => pieces.push(Piece::Slot {
            name,
            context: match state {
                State::Str(q) => Context::String(q),
                State::LineComment | State::BlockComment(_) => Context::Comment,
                _ => Context::Code,
            },
        }),
    })?;
    Ok(pieces)
}

/// The code of `script`: every string literal emptied (`""`), comments dropped, other
/// text kept. Two scripts with the same skeleton differ only inside literals.
pub fn skeleton(lang: Lang, script: &str) -> Result<String, Error> {
    let mut out = String::new();
    let mut last = State::Code;
    scan(lang, script, false, |event| {
        let Event::Text(text, state) = event else {
            return;
        };
        match state {
            State::Str(q) => {
                if last != state {
                    out.push_str(open(q));
                    out.push_str(open(q));
                }
            }
            State::LineComment | State::BlockComment(_) => {}
            _ => out.push_str(text),
        }
        last = state;
    })?;
    Ok(out)
}

fn open(q: Quote) -> &'static str {
    match q {
        Quote::Double => "\"",
        Quote::Single => "'",
        Quote::Backtick => "`",
    }
}

/// The length of the character at byte `i` (1 past the end).
fn char_len(text: &str, i: usize) -> usize {
    text.get(i..)
        .and_then(|r| r.chars().next())
        .map_or(1, char::len_utf8)
}

/// `${name}` at the start of `rest`: the name and the placeholder's length.
fn placeholder(rest: &str) -> Option<(&str, usize)> {
    let inner = rest.strip_prefix("${")?;
    let end = inner.find('}')?;
    let name = &inner[..end];
    let mut chars = name.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() || first == '_')
        .then_some(())
        .filter(|()| chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))?;
    Some((name, end + 3))
}

/// Walks `text`, reporting runs of text with the state they are in, and placeholders
/// (when `slots`; otherwise `${…}` is ordinary text).
fn scan<'a>(
    lang: Lang,
    text: &'a str,
    slots: bool,
    mut emit: impl FnMut(Event<'a>),
) -> Result<(), Error> {
    let bytes = text.as_bytes();
    let mut state = State::Code;
    // JavaScript: the template-literal nesting (`${ … }` inside backticks returns to code
    // until its brace closes); depth of braces opened in code since then.
    let mut templates: Vec<u32> = Vec::new();
    let mut start = 0;
    let mut i = 0;
    // JavaScript regex-vs-division: the last significant code character.
    let mut prev_sig: Option<u8> = None;
    macro_rules! flush {
        ($to:expr) => {
            if $to > start {
                emit(Event::Text(&text[start..$to], state));
            }
        };
    }
    while i < bytes.len() {
        let rest = &text[i..];
        if slots
            && !matches!(state, State::Chevron | State::Pipe | State::Regex(_))
            && let Some((name, len)) = placeholder(rest)
        {
            flush!(i);
            emit(Event::Slot(name, state));
            i += len;
            start = i;
            if state == State::Code {
                prev_sig = Some(b'0');
            }
            continue;
        }
        let c = bytes[i];
        let next = bytes.get(i + 1).copied();
        match (lang, state) {
            (_, State::Str(q)) => {
                let close = match q {
                    Quote::Double => b'"',
                    Quote::Single => b'\'',
                    Quote::Backtick => b'`',
                };
                if c == b'\\' {
                    i += 1 + char_len(text, i + 1);
                    continue;
                }
                if lang == Lang::JavaScript && q == Quote::Backtick && rest.starts_with("${") {
                    // A JavaScript interpolation: code until its brace closes.
                    flush!(i + 2);
                    i += 2;
                    start = i;
                    templates.push(0);
                    state = State::Code;
                    prev_sig = Some(b'{');
                    continue;
                }
                if lang == Lang::JavaScript && q != Quote::Backtick && (c == b'\n' || c == b'\r') {
                    return Err(Error::new(
                        ErrorKind::String,
                        "a string literal is not closed before the end of its line",
                    ));
                }
                if c == close {
                    flush!(i + 1);
                    i += 1;
                    start = i;
                    state = State::Code;
                    prev_sig = Some(b'"');
                    continue;
                }
            }
            (_, State::LineComment) => {
                if c == b'\n' || c == b'\r' {
                    flush!(i);
                    start = i;
                    state = State::Code;
                }
            }
            (Lang::AppleScript, State::BlockComment(depth)) => {
                if rest.starts_with("(*") {
                    state = State::BlockComment(depth + 1);
                    i += 2;
                    continue;
                }
                if rest.starts_with("*)") {
                    i += 2;
                    if depth == 1 {
                        flush!(i);
                        start = i;
                        state = State::Code;
                    } else {
                        state = State::BlockComment(depth - 1);
                    }
                    continue;
                }
            }
            (Lang::JavaScript, State::BlockComment(_)) => {
                if rest.starts_with("*/") {
                    i += 2;
                    flush!(i);
                    start = i;
                    state = State::Code;
                    continue;
                }
            }
            (_, State::Chevron) => {
                if rest.starts_with('»') {
                    i += '»'.len_utf8();
                    flush!(i);
                    start = i;
                    state = State::Code;
                    continue;
                }
            }
            (_, State::Pipe) => {
                if c == b'|' {
                    i += 1;
                    flush!(i);
                    start = i;
                    state = State::Code;
                    continue;
                }
            }
            (_, State::Regex(in_class)) => match c {
                b'\\' => {
                    i += 1 + char_len(text, i + 1);
                    continue;
                }
                b'[' => state = State::Regex(true),
                b']' if in_class => state = State::Regex(false),
                b'/' if !in_class => {
                    i += 1;
                    while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                        i += 1;
                    }
                    flush!(i);
                    start = i;
                    state = State::Code;
                    prev_sig = Some(b'0');
                    continue;
                }
                b'\n' | b'\r' => {
                    return Err(Error::new(
                        ErrorKind::Regex,
                        "a regular expression is not closed",
                    ));
                }
                _ => {}
            },
            (Lang::AppleScript, State::Code) => {
                let enter = if c == b'"' {
                    Some((State::Str(Quote::Double), 1))
                } else if rest.starts_with("--") || c == b'#' {
                    Some((State::LineComment, 1))
                } else if rest.starts_with("(*") {
                    Some((State::BlockComment(1), 2))
                } else if rest.starts_with('«') {
                    Some((State::Chevron, '«'.len_utf8()))
                } else if c == b'|' {
                    Some((State::Pipe, 1))
                } else {
                    None
                };
                if let Some((to, len)) = enter {
                    flush!(i);
                    start = i;
                    state = to;
                    i += len;
                    continue;
                }
            }
            (Lang::JavaScript, State::Code) => {
                let regex_may_start = matches!(
                    prev_sig,
                    None | Some(
                        b'(' | b','
                            | b'='
                            | b':'
                            | b'['
                            | b'!'
                            | b'&'
                            | b'|'
                            | b'?'
                            | b'{'
                            | b'}'
                            | b';'
                            | b'+'
                            | b'-'
                            | b'*'
                            | b'%'
                            | b'<'
                            | b'>'
                            | b'~'
                            | b'^'
                    )
                );
                let enter = match c {
                    b'"' => Some((State::Str(Quote::Double), 1)),
                    b'\'' => Some((State::Str(Quote::Single), 1)),
                    b'`' => Some((State::Str(Quote::Backtick), 1)),
                    b'/' if next == Some(b'/') => Some((State::LineComment, 2)),
                    b'/' if next == Some(b'*') => Some((State::BlockComment(1), 2)),
                    b'/' if regex_may_start => Some((State::Regex(false), 1)),
                    _ => None,
                };
                if let Some((to, len)) = enter {
                    flush!(i);
                    start = i;
                    state = to;
                    i += len;
                    continue;
                }
                match c {
                    b'{' => {
                        if let Some(depth) = templates.last_mut() {
                            *depth += 1;
                        }
                    }
                    b'}' => {
                        if let Some(depth) = templates.last_mut() {
                            if *depth == 0 {
                                templates.pop();
                                flush!(i);
                                start = i;
                                state = State::Str(Quote::Backtick);
                                i += 1;
                                continue;
                            }
                            *depth -= 1;
                        }
                    }
                    _ => {}
                }
                if !c.is_ascii_whitespace() {
                    prev_sig = Some(if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' {
                        b'0'
                    } else {
                        c
                    });
                    // `return /x/` and friends: a keyword before `/` starts a regex.
                    if c.is_ascii_alphabetic() {
                        let word_end = rest
                            .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                            .unwrap_or(rest.len());
                        let word = &rest[..word_end];
                        let at_word_start = i == 0
                            || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
                        if at_word_start {
                            if matches!(word, "return" | "typeof" | "case" | "in" | "of" | "void") {
                                prev_sig = Some(b'(');
                            }
                            i += word_end;
                            continue;
                        }
                    }
                }
            }
        }
        i += char_len(text, i);
    }
    let unclosed = match state {
        State::Code | State::LineComment => None,
        State::Str(_) => Some((ErrorKind::String, "a string literal")),
        State::BlockComment(_) => Some((ErrorKind::Comment, "a block comment")),
        State::Chevron => Some((ErrorKind::Chevron, "a «…» form")),
        State::Pipe => Some((ErrorKind::Pipe, "a |…| identifier")),
        State::Regex(_) => Some((ErrorKind::Regex, "a regular expression")),
    };
    if let Some((kind, what)) = unclosed {
        return Err(Error::new(kind, format!("{what} is not closed")));
    }
    if !templates.is_empty() {
        return Err(Error::new(
            ErrorKind::Interpolation,
            "a template literal's `${` is not closed",
        ));
    }
    if bytes.len() > start {
        emit(Event::Text(&text[start..], state));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(lang: Lang, t: &str) -> Vec<(String, Context)> {
        parse(lang, t)
            .unwrap()
            .into_iter()
            .filter_map(|p| match p {
                Piece::Slot { name, context } => Some((name.to_owned(), context)),
                Piece::Text(_) => None,
            })
            .collect()
    }

    #[test]
    fn applescript_contexts() {
        let t = "tell application \"Mail\" -- ${c1}\n set x to {subject:\"${subject}\", n:${n}}\n (* ${c2} (* nested *) ${c3} *) # ${c4}\n «event AAI ${e}» |a ${p}| \"a \\\" ${s2}\"";
        let got = slots(Lang::AppleScript, t);
        let names: Vec<(&str, Context)> = got.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        assert_eq!(
            names,
            [
                ("c1", Context::Comment),
                ("subject", Context::String(Quote::Double)),
                ("n", Context::Code),
                ("c2", Context::Comment),
                ("c3", Context::Comment),
                ("c4", Context::Comment),
                ("s2", Context::String(Quote::Double)),
            ]
        );
        assert!(parse(Lang::AppleScript, "\"open").is_err());
        assert!(parse(Lang::AppleScript, "(* (* *)").is_err());
    }

    #[test]
    fn errors_say_what_is_not_closed() {
        for (lang, text, kind, message) in [
            (
                Lang::AppleScript,
                "\"open",
                ErrorKind::String,
                "a string literal is not closed",
            ),
            (
                Lang::AppleScript,
                "(* (* *)",
                ErrorKind::Comment,
                "a block comment is not closed",
            ),
            (
                Lang::AppleScript,
                "«event",
                ErrorKind::Chevron,
                "a «…» form is not closed",
            ),
            (
                Lang::AppleScript,
                "|a b",
                ErrorKind::Pipe,
                "a |…| identifier is not closed",
            ),
            (
                Lang::JavaScript,
                "'open\n'",
                ErrorKind::String,
                "a string literal is not closed before the end of its line",
            ),
            (
                Lang::JavaScript,
                "x = /ab\n",
                ErrorKind::Regex,
                "a regular expression is not closed",
            ),
            (
                Lang::JavaScript,
                "`a ${b",
                ErrorKind::Interpolation,
                "a template literal's `${` is not closed",
            ),
        ] {
            let e = parse(lang, text).unwrap_err();
            assert_eq!(
                (e.kind(), e.to_string().as_str()),
                (kind, message),
                "{text}"
            );
        }
    }

    #[test]
    fn javascript_contexts() {
        let t = "const a = '${s1}', b = \"${s2}\"; // ${c}\n/* ${c2} */ let r = /[\"]${x}/g; let t = `v ${t1} ${a + `${t2}`} end`; f(${n}); return x / ${n2};";
        let got = slots(Lang::JavaScript, t);
        let names: Vec<(&str, Context)> = got.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        assert_eq!(
            names,
            [
                ("s1", Context::String(Quote::Single)),
                ("s2", Context::String(Quote::Double)),
                ("c", Context::Comment),
                ("c2", Context::Comment),
                ("t1", Context::String(Quote::Backtick)),
                ("t2", Context::String(Quote::Backtick)),
                ("n", Context::Code),
                ("n2", Context::Code),
            ]
        );
        assert!(parse(Lang::JavaScript, "'open\n'").is_err());
    }

    #[test]
    fn skeletons_empty_literals_and_drop_comments() {
        assert_eq!(
            skeleton(Lang::AppleScript, "set a to \"x\\\"y\" -- c\nreturn a").unwrap(),
            "set a to \"\" \nreturn a"
        );
        assert_eq!(
            skeleton(Lang::JavaScript, "f('a', \"b\", `c${d}e`) /* x */").unwrap(),
            "f('', \"\", ``d``) "
        );
    }

    #[test]
    fn any_text_lexes_without_panicking() {
        // A small xorshift: the same inputs every run.
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        let alphabet: Vec<char> = "\"'`\\${}()*-#/|«»[]\n\r a1_é😀\u{2028}".chars().collect();
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 24) as usize;
            let text: String = (0..len)
                .map(|k| alphabet[((seed >> (k % 50)) as usize + k * 7) % alphabet.len()])
                .collect();
            for lang in [Lang::AppleScript, Lang::JavaScript] {
                let _ = parse(lang, &text);
                let _ = skeleton(lang, &text);
            }
        }
    }
}
