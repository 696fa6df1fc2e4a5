//! `aai_search`: rank apps and tools by names in any language, aliases, keywords
//! (access-form `exposure.keywords`), descriptions and tool text.
//!
//! Queries are split into words on white space and punctuation; a word matches a field
//! when the field contains it. Names and aliases also match when the *query* contains
//! them, so a Chinese sentence such as 发邮件 finds an app named 邮件 without word
//! segmentation. Exact matches weigh most.

use crate::registry::{Entry, Snapshot};

/// An entry's text, lower-cased once when the snapshot is built, so a query allocates
/// nothing per app.
#[derive(Debug, Default)]
pub struct Keys {
    id: String,
    names: Vec<String>,
    aliases: Vec<String>,
    keywords: Vec<String>,
    description: String,
    /// Per tool of the binding in use: name, name with `_` as spaces, description.
    tools: Vec<(String, String, String)>,
}

impl Keys {
    /// The keys of `entry`.
    pub fn of(entry: &Entry) -> Keys {
        let app = &entry.app;
        Keys {
            id: app.id.to_lowercase(),
            names: app.name.all().iter().map(|n| n.to_lowercase()).collect(),
            aliases: app.aliases.iter().map(|a| a.to_lowercase()).collect(),
            keywords: app.keywords.iter().map(|k| k.to_lowercase()).collect(),
            description: app.description.to_lowercase(),
            tools: entry
                .binding()
                .tools
                .iter()
                .map(|t| {
                    let name = t.name.to_lowercase();
                    let spaced = name.replace('_', " ");
                    (name, spaced, t.description.to_lowercase())
                })
                .collect(),
        }
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
    let mut hits: Vec<Hit<'a>> = snapshot
        .entries
        .iter()
        .filter_map(|entry| score(entry, &query, &words))
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .cmp(&a.score)
            .then_with(|| a.entry.app.id.cmp(&b.entry.app.id))
    });
    hits.truncate(limit);
    hits
}

fn score<'a>(entry: &'a Entry, query: &str, words: &[&str]) -> Option<Hit<'a>> {
    let keys = &entry.keys;
    let mut total = 0;
    for name in &keys.names {
        total += short_field(name, words, query, 10, 5);
    }
    for alias in &keys.aliases {
        total += short_field(alias, words, query, 8, 4);
    }
    // Keywords say what the app is for, not what it is called: below names and aliases.
    for keyword in &keys.keywords {
        total += short_field(keyword, words, query, 6, 3);
    }
    for word in words {
        if keys.id == *word {
            total += 10;
        } else if keys.id.contains(word) {
            total += 3;
        }
        if keys.description.contains(word) {
            total += 2;
        }
    }
    let mut tools = Vec::new();
    for (tool, (name, spaced, desc)) in entry.binding().tools.iter().zip(&keys.tools) {
        let mut tool_score = 0;
        for word in words {
            if name == word {
                tool_score += 4;
            } else if name.contains(word) || spaced.contains(word) {
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
