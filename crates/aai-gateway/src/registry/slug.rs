//! Client-safe names. A slug is the app id with every character outside
//! `[A-Za-z0-9_-]` turned into `_`, so `app_<slug>` passes Claude's and Copilot's
//! tool-name rules. Slugs that would collide, or make `app_<slug>` longer than 48
//! characters, get a stable 6-hex-digit hash of the id.

use std::collections::HashMap;

use super::Entry;

/// Longest listed `app_<slug>` name.
pub(crate) const MAX_LISTED_NAME: usize = 48;

/// `text` with every character outside `[A-Za-z0-9_-]` turned into `_`: the one rule for
/// every name a client sees (`app_<slug>`, flat `<slug>__<tool>`).
pub(crate) fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A short stable hash of an id, for disambiguating slugs.
fn short_hash(id: &str) -> String {
    format!("{:06x}", aai_descriptor::hash::stable(id) & 0x00ff_ffff)
}

/// Gives colliding or over-long slugs a stable hash suffix.
pub(crate) fn assign(entries: &mut [Entry]) {
    let max_slug = MAX_LISTED_NAME - "app_".len();
    let mut count: HashMap<&str, u32> = HashMap::with_capacity(entries.len());
    for e in entries.iter() {
        *count.entry(&e.slug).or_default() += 1;
    }
    let collides: Vec<bool> = entries.iter().map(|e| count[e.slug.as_str()] > 1).collect();
    drop(count);
    for (e, collides) in entries.iter_mut().zip(collides) {
        if collides || e.slug.len() > max_slug {
            let hash = short_hash(&e.app.id);
            let keep = max_slug - hash.len() - 1;
            let mut cut = e.slug.clone();
            cut.truncate(keep);
            e.slug = format!("{cut}_{hash}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn slugs_are_client_safe_short_and_unique() {
        assert_eq!(sanitize("com.apple.mail"), "com_apple_mail");
        assert_eq!(sanitize("org.ex-ample.a b"), "org_ex-ample_a_b");
        let app = |id: &str| {
            let text = format!(
                r#"{{"schemaVersion":"1.0","version":"1.0.0","platform":"web","app":{{"id":"{id}","name":"N","description":"d"}},"execution":{{"type":"http","baseUrl":"https://x.example"}},"tools":[]}}"#
            );
            aai_descriptor::parse(&text, "t").app.unwrap()
        };
        let mut entries: Vec<Entry> = [
            "com.a_b",
            "com.a.b",
            "com.very.long.identifier.of.an.application.that.goes.on",
        ]
        .iter()
        .map(|id| Entry {
            app: app(id).into(),
            binding: 0,
            slug: sanitize(id),
            source: PathBuf::new().into(),
            keys: Default::default(),
        })
        .collect();
        assign(&mut entries);
        let slugs: Vec<&str> = entries.iter().map(|e| e.slug.as_str()).collect();
        assert_ne!(slugs[0], slugs[1]);
        assert!(slugs[0].starts_with("com_a_b_") && slugs[1].starts_with("com_a_b_"));
        for s in &slugs {
            assert!(format!("app_{s}").len() <= MAX_LISTED_NAME, "{s}");
            assert!(
                s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            );
        }
        assert_eq!(short_hash("com.a.b"), short_hash("com.a.b"));
    }
}
