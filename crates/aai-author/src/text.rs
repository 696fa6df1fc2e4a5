//! Text helpers of the drafts.

/// `name` as lowercase ASCII letters and digits joined by single `-` (`Swagger Petstore!`
/// → `swagger-petstore`); empty when it has neither.
pub(crate) fn slug(name: &str) -> String {
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
pub(crate) fn replace_outside(text: &str, keep: impl Fn(char) -> bool, with: char) -> String {
    text.chars()
        .map(|c| if keep(c) { c } else { with })
        .collect()
}

/// `1 tool`, `2 tools`.
pub(crate) fn count(n: usize, singular: &str, plural: &str) -> String {
    if n == 1 {
        format!("1 {singular}")
    } else {
        format!("{n} {plural}")
    }
}
