//! Small text helpers shared by the CLI and the MCP surface.

/// `bytes` as lower-case hex (ids, tokens and digests).
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(2 * bytes.len());
    push_hex(&mut out, bytes);
    out
}

/// Appends `bytes` to `out` as lower-case hex.
pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
}

/// `1 app`, `2 apps`: a count with its noun in the right number (`plural` for anything
/// but one).
pub(crate) fn count(n: usize, singular: &str, plural: &str) -> String {
    if n == 1 {
        format!("1 {singular}")
    } else {
        format!("{n} {plural}")
    }
}

/// At most `max` characters of `text`, with `…` when cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

/// `text` with what could redraw a terminal or reorder what a reader sees shown as
/// `\u{…}`: control characters other than line breaks and tabs (escape sequences,
/// carriage returns), and direction and zero-width marks. For multi-line text from a
/// client (a script) that goes into a question.
pub(crate) fn printable_lines(text: &str) -> String {
    let hidden = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    };
    if !text.chars().any(hidden) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` with every form in `forms` replaced by `***` (longest first is the caller's
/// order): services echo secrets, and nothing that leaves the gateway may carry them.
pub(crate) fn scrub(text: &str, forms: &[String]) -> String {
    let mut out = text.to_owned();
    for f in forms.iter().filter(|f| !f.is_empty()) {
        if out.contains(f.as_str()) {
            out = out.replace(f.as_str(), "***");
        }
    }
    out
}

/// `text` with what it carries of secrets masked: a URL's password and the values of
/// secret-looking query parameters (`postgres://u:***@h/db`, `…?api_key=***`), and a
/// `Bearer …` or `Basic …` credential.
pub(crate) fn mask_secrets(text: &str) -> String {
    mask_secrets_with(text, aai_descriptor::looks_secret)
}

/// [`mask_secrets`], with `secret` deciding which query parameter names are secret.
pub(crate) fn mask_secrets_with(text: &str, secret: impl Fn(&str) -> bool) -> String {
    let mut out = text.to_owned();
    // Byte searches first (`:`, a space): most values hold no URL and no credential, and a
    // search for a word sets up a searcher each time.
    if text.contains(':')
        && let Some(scheme_end) = text.find("://")
    {
        let rest = &text[scheme_end + 3..];
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@')
            && let Some(colon) = rest[..at].find(':')
        {
            let start = scheme_end + 3 + colon + 1;
            out.replace_range(start..scheme_end + 3 + at, "***");
        }
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let masked: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if secret(name) => format!("{name}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        out = format!("{head}{}", masked.join("&"));
    }
    // Each scheme is followed by a space.
    if out.contains(' ') {
        for scheme in ["Bearer ", "bearer ", "Basic ", "basic "] {
            if let Some(at) = out.find(scheme) {
                let start = at + scheme.len();
                let end = out[start..]
                    .find(char::is_whitespace)
                    .map_or(out.len(), |e| start + e);
                out.replace_range(start..end, "***");
            }
        }
    }
    out
}

/// A connection URL without its password (`postgres://u:***@host/db`): the user part's
/// password and a `password` query parameter are replaced by `***`. Text that is not a URL
/// loses everything between `://` and its last `@`.
pub(crate) fn redact_url(text: &str) -> String {
    if let Ok(mut u) = url::Url::parse(text) {
        if u.password().is_some() {
            let _ = u.set_password(Some("***"));
        }
        if u.query_pairs()
            .any(|(k, _)| k.eq_ignore_ascii_case("password"))
        {
            let pairs: Vec<(String, String)> = u
                .query_pairs()
                .map(|(k, v)| {
                    let v = if k.eq_ignore_ascii_case("password") {
                        "***".to_owned()
                    } else {
                        v.into_owned()
                    };
                    (k.into_owned(), v)
                })
                .collect();
            u.query_pairs_mut().clear().extend_pairs(pairs);
        }
        return u.to_string();
    }
    match (text.find("://"), text.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme + 3 => {
            format!("{}***{}", &text[..scheme + 3], &text[at..])
        }
        _ => text.to_owned(),
    }
}

/// `word` quoted for a POSIX shell (`sh`, `bash`, `zsh`): left as it is when it needs no
/// quotes, else in single quotes. A NUL, which no shell can pass, becomes the text `\0`.
pub(crate) fn sh_quote(word: &str) -> String {
    let word = word.replace('\0', "\\0");
    match shlex::try_quote(&word) {
        Ok(quoted) => quoted.into_owned(),
        Err(_) => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

/// `word` as a PowerShell single-quoted string: PowerShell reads the typographic single
/// quotes (U+2018–U+201B) as quotes too, so each of them is doubled like `'`.
pub(crate) fn ps_quote(word: &str) -> String {
    let mut out = String::with_capacity(word.len() + 2);
    out.push('\'');
    for c in word.chars() {
        if matches!(c, '\'' | '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}') {
            out.push(c);
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// What [`percent_encode`] encodes: every byte but RFC 3986's unreserved characters
/// (`A-Z a-z 0-9 - . _ ~`).
const NOT_UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes everything but the unreserved characters (RFC 3986), as UTF-8 bytes
/// with upper-case hex.
pub(crate) fn percent_encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, NOT_UNRESERVED).to_string()
}

/// What PowerShell's `-EncodedCommand` takes: base64 of the UTF-16LE text.
pub(crate) fn powershell_encoded(script: &str) -> String {
    use base64::Engine;
    let bytes: Vec<u8> = script.encode_utf16().flat_map(u16::to_le_bytes).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The front matter of a markdown text (`---` … `---` at its top: a `SKILL.md`'s) and the
/// text after it.
pub(crate) fn front_matter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((
                &rest[..offset],
                rest[offset + line.len()..].trim_start_matches(['\r', '\n']),
            ));
        }
        offset += line.len();
    }
    None
}

/// The Markdown headings of `body` outside code fences: (level, text).
pub(crate) fn headings(body: &str) -> impl Iterator<Item = (usize, &str)> {
    heading_lines(body).map(|(_, level, text)| (level, text))
}

/// The Markdown headings of `body` outside code fences: (line number from 0, level,
/// text).
pub(crate) fn heading_lines(body: &str) -> impl Iterator<Item = (usize, usize, &str)> {
    let mut fenced = false;
    body.lines().enumerate().filter_map(move |(i, line)| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return None;
        }
        if fenced {
            return None;
        }
        let level = line.chars().take_while(|c| *c == '#').count();
        let text = line[level..].strip_prefix(' ')?;
        (1..=6).contains(&level).then(|| (i, level, text.trim()))
    })
}

#[cfg(test)]
mod tests {
    use super::{hex, redact_url};

    #[test]
    fn bytes_as_lower_case_hex() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
    }

    #[test]
    fn connection_urls_lose_their_password() {
        assert_eq!(
            redact_url("postgres://aai:s3cret@db.example:5432/aai"),
            "postgres://aai:***@db.example:5432/aai"
        );
        assert_eq!(
            redact_url("postgresql://aai@%2Frun%2Fpostgresql/aai?password=s3cret&sslmode=disable"),
            "postgresql://aai@%2Frun%2Fpostgresql/aai?password=***&sslmode=disable"
        );
        assert_eq!(redact_url("postgres://aai@h/db"), "postgres://aai@h/db");
        assert_eq!(
            redact_url("postgres://a:b c@h:x/db"),
            "postgres://***@h:x/db"
        );
    }

    #[test]
    fn percent_encoding_keeps_only_the_unreserved_characters() {
        assert_eq!(
            super::percent_encode("Az09-._~ :/?#[]@!$&'()*+,;=%é😀"),
            "Az09-._~%20%3A%2F%3F%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D%25%C3%A9%F0%9F%98%80"
        );
        assert_eq!(super::percent_encode(""), "");
    }

    #[test]
    fn counts_agree_with_their_nouns() {
        assert_eq!(super::count(0, "app", "apps"), "0 apps");
        assert_eq!(super::count(1, "app", "apps"), "1 app");
        assert_eq!(super::count(2, "match", "matches"), "2 matches");
    }

    #[test]
    fn words_are_quoted_for_each_shell() {
        use super::{ps_quote, sh_quote};
        assert_eq!(sh_quote("com.example.mail"), "com.example.mail");
        for hostile in [
            "x'; touch /tmp/p; '",
            "$(touch p)",
            "`id`",
            "a\"b\\c",
            "two\nlines",
            "~user",
            "*",
        ] {
            assert_eq!(
                shlex::split(&sh_quote(hostile)).unwrap(),
                [hostile],
                "{hostile}"
            );
        }
        assert_eq!(sh_quote(""), "''");
        assert_eq!(ps_quote("a'b"), "'a''b'");
        assert_eq!(ps_quote("a\u{2019}; calc"), "'a\u{2019}\u{2019}; calc'");
        assert_eq!(ps_quote("$env:X `n"), "'$env:X `n'");
    }
}
