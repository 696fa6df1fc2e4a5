//! `aai_search`: rank apps and tools by names in any language, aliases, keywords
//! (access-form `exposure.keywords`), descriptions and tool text.
//!
//! Queries are split into words on white space and punctuation; a word matches a field
//! when the field contains it. Names and aliases also match when the *query* contains
//! them, so a Chinese sentence such as 发邮件 finds an app named 邮件 without word
//! segmentation. Exact matches weigh most.

use std::borrow::Cow;

use crate::registry::{Entry, Snapshot};

/// Longest app description in a search result, in characters: one line of a list
/// (`aai_guide` shows up to `guide::DESCRIPTION_MAX`).
pub const DESCRIPTION_MAX: usize = 200;

/// An app's description as a search result shows it: cut to [`DESCRIPTION_MAX`]
/// characters, with a note when it was.
pub fn description(text: &str) -> Cow<'_, str> {
    crate::registry::guide::cut(text, DESCRIPTION_MAX)
}

/// An entry's text, lower-cased once when the snapshot is built, so a query allocates
/// nothing per app. Every field sits end to end in one string (two allocations per app,
/// not one per field: at 1,000 apps this is ≈0.3 MB less resident): the id, the names,
/// aliases and keywords, the description, then each tool's name and description.
///
/// Kept while the app object is the same: a rebuilt snapshot and a client's view share the
/// keys of every app that did not change.
#[derive(Debug, Default)]
pub struct Keys {
    text: Box<str>,
    /// Where each field ends in `text`.
    ends: Box<[u32]>,
    /// How many names, aliases and keywords there are.
    names: u32,
    aliases: u32,
    keywords: u32,
    /// A hash of what agents see of the app in lists (the snapshot's fingerprint, but for
    /// the slug).
    digest: u64,
}

impl Keys {
    /// The keys of `entry`.
    pub fn of(entry: &Entry) -> Keys {
        let app = &entry.app;
        let names = app.name.all();
        let tools = &entry.binding().tools;
        let mut text = String::new();
        let mut ends = Vec::with_capacity(
            2 + names.len() + app.aliases.len() + app.keywords.len() + 2 * tools.len(),
        );
        let mut push = |field: &str| {
            text.push_str(&field.to_lowercase());
            // A descriptor is far smaller than 4 GiB (the catalog's size limit).
            ends.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
        };
        push(&app.id);
        names.iter().for_each(|n| push(n));
        app.aliases.iter().for_each(|a| push(a));
        app.keywords.iter().for_each(|k| push(k));
        push(&app.description);
        for tool in tools {
            push(&tool.name);
            push(&tool.description);
        }
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let digest = {
            use std::hash::{Hash, Hasher};
            let mut h = std::hash::DefaultHasher::new();
            app.id.hash(&mut h);
            names.hash(&mut h);
            app.description.hash(&mut h);
            app.aliases.hash(&mut h);
            for t in tools {
                t.name.hash(&mut h);
                t.description.hash(&mut h);
                t.parameters.text().hash(&mut h);
                // Listed in `flat` exposure as `readOnlyHint`.
                t.read_only.hash(&mut h);
            }
            h.finish()
        };
        Keys {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
            names: count(names.len()),
            aliases: count(app.aliases.len()),
            keywords: count(app.keywords.len()),
            digest,
        }
    }

    /// A hash of what agents see of the app in lists, but for its slug.
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// Field `i`, or "" past the last (a default `Keys` has none).
    fn field(&self, i: usize) -> &str {
        let end = |i: usize| self.ends.get(i).map_or(0, |&e| e as usize);
        let start = i.checked_sub(1).map_or(0, end);
        self.text.get(start..end(i)).unwrap_or_default()
    }

    fn fields(&self, from: usize, n: u32) -> impl Iterator<Item = &str> {
        (from..from + n as usize).map(|i| self.field(i))
    }

    /// The id, lower-cased.
    pub fn id(&self) -> &str {
        self.field(0)
    }

    /// The names in every language, lower-cased.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.fields(1, self.names)
    }

    /// The aliases, lower-cased.
    pub fn aliases(&self) -> impl Iterator<Item = &str> {
        self.fields(1 + self.names as usize, self.aliases)
    }

    fn keywords(&self) -> impl Iterator<Item = &str> {
        self.fields(1 + (self.names + self.aliases) as usize, self.keywords)
    }

    fn tools_from(&self) -> usize {
        1 + (self.names + self.aliases + self.keywords) as usize
    }

    fn description(&self) -> &str {
        self.field(self.tools_from())
    }

    /// Per tool of the binding in use: its name and its description.
    fn tools(&self) -> impl Iterator<Item = (&str, &str)> {
        let from = self.tools_from() + 1;
        (from..self.ends.len())
            .step_by(2)
            .map(|i| (self.field(i), self.field(i + 1)))
    }
}

/// One ranked app.
#[derive(Debug)]
pub struct Hit<'a> {
    /// The app.
    pub entry: &'a Entry,
    /// Relevance; higher is better.
    pub score: u32,
    /// Tools whose name or description matched.
    pub tools: Vec<&'a str>,
}

/// The best `limit` apps for `query`, best first; ties by id.
pub fn search<'a>(snapshot: &'a Snapshot, query: &str, limit: usize) -> Vec<Hit<'a>> {
    search_ranked(snapshot, query, limit, &|_| 0)
}

/// The best `limit` apps for `query`, best first: by relevance, then by how much the
/// client used the app (`used` of its id), then by id.
pub fn search_ranked<'a>(
    snapshot: &'a Snapshot,
    query: &str,
    limit: usize,
    used: &dyn Fn(&str) -> u64,
) -> Vec<Hit<'a>> {
    let query = query.trim().to_lowercase();
    let mut words: Vec<&str> = query
        .split(|c: char| c.is_whitespace() || (c.is_ascii_punctuation() && c != '-' && c != '_'))
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() {
        return Vec::new();
    }
    if words.len() > 1 {
        words.push(query.as_str());
    }
    let mut hits: Vec<(Hit<'a>, u64)> = snapshot
        .entries
        .iter()
        .filter_map(|entry| score(entry, &query, &words))
        .map(|hit| {
            let used = used(&hit.entry.app.id);
            (hit, used)
        })
        .collect();
    hits.sort_by(|(a, a_used), (b, b_used)| {
        b.score
            .cmp(&a.score)
            .then_with(|| b_used.cmp(a_used))
            .then_with(|| a.entry.app.id.cmp(&b.entry.app.id))
    });
    hits.truncate(limit);
    hits.into_iter().map(|(hit, _)| hit).collect()
}

fn score<'a>(entry: &'a Entry, query: &str, words: &[&str]) -> Option<Hit<'a>> {
    let keys = &entry.keys;
    let mut total = 0;
    for name in keys.names() {
        total += short_field(name, words, query, 10, 5);
    }
    for alias in keys.aliases() {
        total += short_field(alias, words, query, 8, 4);
    }
    // Keywords say what the app is for, not what it is called: below names and aliases.
    for keyword in keys.keywords() {
        total += short_field(keyword, words, query, 6, 3);
    }
    let (id, description) = (keys.id(), keys.description());
    for word in words {
        if id == *word {
            total += 10;
        } else if id.contains(word) {
            total += 3;
        }
        if description.contains(word) {
            total += 2;
        }
    }
    let mut tools = Vec::new();
    for (tool, (name, desc)) in entry.binding().tools.iter().zip(keys.tools()) {
        let mut tool_score = 0;
        for word in words {
            if name == *word {
                tool_score += 4;
            } else if name.contains(word) || contains_spaced(name, word) {
                tool_score += 2;
            }
            if desc.contains(word) {
                tool_score += 1;
            }
        }
        if tool_score > 0 {
            tools.push(tool.name.as_str());
            total += tool_score;
        }
    }
    (total > 0).then_some(Hit {
        entry,
        score: total,
        tools,
    })
}

/// Whether `name` has `word` when its `_` read as spaces: `send_mail` has "send mail" (the
/// whole query is one of the words). Bytes are compared: `_` and ` ` are ASCII, and a match
/// of valid UTF-8 inside valid UTF-8 starts and ends on characters.
fn contains_spaced(name: &str, word: &str) -> bool {
    let (name, word) = (name.as_bytes(), word.as_bytes());
    !word.is_empty()
        && word.contains(&b' ')
        && name.windows(word.len()).any(|window| {
            window
                .iter()
                .zip(word)
                .all(|(&n, &w)| if n == b'_' { w == b' ' } else { n == w })
        })
}

/// Names, aliases and keywords: the best of exact (a word is the field) and partial (the field
/// contains a word, or the query contains the field — at least two characters, so 邮件
/// in 发邮件 counts but a one-letter alias does not).
fn short_field(field: &str, words: &[&str], query: &str, exact: u32, partial: u32) -> u32 {
    if words.contains(&field) {
        exact
    } else if words.iter().any(|w| field.contains(w))
        || (field.chars().count() >= 2 && query.contains(field))
    {
        partial
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::contains_spaced;

    #[test]
    fn a_tool_name_read_with_spaces() {
        for (name, word, expect) in [
            ("send_mail", "send mail", true),
            ("send_mail", "d m", true),
            ("bulk_send_mail", "send mail", true),
            // Words without a space are matched on the name as it is, elsewhere.
            ("send_mail", "send_mail", false),
            ("send_mail", "send", false),
            ("send_mail", "mail send", false),
            ("send_mail", "send  mail", false),
            ("sendmail", "send mail", false),
            // A `_` of the name is a space, never a `_` of the query.
            ("a_b_c", "a_b c", false),
            ("get_user_info", "get_user info", false),
            ("邮件_发送", "件 发", true),
            ("", "a b", false),
            ("a_b", "", false),
        ] {
            assert_eq!(contains_spaced(name, word), expect, "{name:?} {word:?}");
        }
    }

    #[test]
    fn default_keys_have_no_fields() {
        let keys = super::Keys::default();
        assert_eq!(keys.id(), "");
        assert_eq!(keys.names().count() + keys.aliases().count(), 0);
        assert_eq!(keys.description(), "");
        assert_eq!(keys.tools().count(), 0);
    }
}
