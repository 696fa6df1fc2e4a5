//! Small text helpers shared by the CLI and the MCP surface.

/// `1 app`, `2 apps`: a count with its noun in the right number (`plural` for anything
/// but one).
pub fn count(n: usize, singular: &str, plural: &str) -> String {
    if n == 1 {
        format!("1 {singular}")
    } else {
        format!("{n} {plural}")
    }
}

/// At most `max` characters of `text`, with `…` when cut.
pub fn excerpt(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

/// `text` with every form in `forms` replaced by `***` (longest first is the caller's
/// order): services echo secrets, and nothing that leaves the gateway may carry them.
pub fn scrub(text: &str, forms: &[String]) -> String {
    let mut out = text.to_owned();
    for f in forms.iter().filter(|f| !f.is_empty()) {
        if out.contains(f.as_str()) {
            out = out.replace(f.as_str(), "***");
        }
    }
    out
}

/// `name` as lowercase ASCII letters and digits joined by single `-` (`Swagger Petstore!`
/// → `swagger-petstore`); empty when it has neither.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.truncate(out.trim_end_matches('-').len());
    out
}

/// `text` with every character `keep` refuses replaced by `with`.
pub fn replace_outside(text: &str, keep: impl Fn(char) -> bool, with: char) -> String {
    text.chars()
        .map(|c| if keep(c) { c } else { with })
        .collect()
}

/// `word` quoted for a POSIX shell (`sh`, `bash`, `zsh`): left as it is when it needs no
/// quotes, else in single quotes. A NUL, which no shell can pass, becomes the text `\0`.
pub fn sh_quote(word: &str) -> String {
    let word = word.replace('\0', "\\0");
    match shlex::try_quote(&word) {
        Ok(quoted) => quoted.into_owned(),
        Err(_) => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

/// `word` as a PowerShell single-quoted string: PowerShell reads the typographic single
/// quotes (U+2018–U+201B) as quotes too, so each of them is doubled like `'`.
pub fn ps_quote(word: &str) -> String {
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

#[cfg(test)]
mod tests {
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
