//! `aai_search`: rank apps and tools by names in any language, aliases, descriptions
//! and tool text.
//!
//! Queries are split into words on white space and punctuation; a word matches a field
//! when the field contains it. Names and aliases also match when the *query* contains
//! them, so a Chinese sentence such as 发邮件 finds an app named 邮件 without word
//! segmentation. Exact matches weigh most.

use crate::registry::{Entry, Snapshot};

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
    let app = &entry.app;
    let mut total = 0;
    let names: Vec<String> = app.name.all().iter().map(|n| n.to_lowercase()).collect();
    let aliases: Vec<String> = app.aliases.iter().map(|a| a.to_lowercase()).collect();
    let id = app.id.to_lowercase();
    let description = app.description.to_lowercase();
    for name in &names {
        total += short_field(name, words, query, 10, 5);
    }
    for alias in &aliases {
        total += short_field(alias, words, query, 8, 4);
    }
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
    for tool in &entry.binding().tools {
        let name = tool.name.to_lowercase();
        let desc = tool.description.to_lowercase();
        let mut tool_score = 0;
        for word in words {
            if name == *word {
                tool_score += 4;
            } else if name.contains(word) || name.replace('_', " ").contains(word) {
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

/// Names and aliases: the best of exact (a word is the field) and partial (the field
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
