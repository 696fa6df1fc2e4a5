//! The apps the gateway serves: a snapshot built from a discovery scan, swapped whole
//! on reload so readers never lock for long and never see half an update.
//!
//! Only apps with a binding that can run on this host are served (`--scan` shows the
//! rest). When several bindings can run, the host's own platform wins, then `web`.
//!
//! Each app gets a client-safe slug: the id with every character outside
//! `[A-Za-z0-9_-]` turned into `_`, so `app_<slug>` passes Claude's and Copilot's tool-name
//! rules. Slugs that would collide, or make `app_<slug>` longer than 48 characters, get a
//! stable 6-hex-digit hash of the id.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use aai_descriptor::{App, Binding, Diagnostic, Platform};

use crate::discovery::Catalog;
use crate::host::{Host, Os};

/// Longest listed `app_<slug>` name.
pub const MAX_LISTED_NAME: usize = 48;

/// One served app.
#[derive(Debug)]
pub struct Entry {
    /// The app, all bindings included.
    pub app: App,
    /// Index of the binding calls go through.
    pub binding: usize,
    /// Client-safe name part.
    pub slug: String,
    /// The file that defined the chosen binding.
    pub source: PathBuf,
}

impl Entry {
    /// The binding calls go through.
    pub fn binding(&self) -> &Binding {
        &self.app.bindings[self.binding]
    }
}

/// The served apps at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Served apps, sorted by id.
    pub entries: Vec<Entry>,
    by_key: HashMap<String, usize>,
    /// What the scan reported.
    pub diagnostics: Vec<Diagnostic>,
    /// Locale for names.
    pub locale: Option<String>,
    fingerprint: u64,
}

impl Snapshot {
    /// Builds the served set from a scan.
    pub fn build(catalog: Catalog, host: &Host, locale: Option<String>) -> Snapshot {
        let mut entries: Vec<Entry> = catalog
            .apps
            .into_iter()
            .filter_map(|loaded| {
                let binding = choose_binding(&loaded.app, host)?;
                let source = loaded.binding_sources[binding].clone();
                Some(Entry {
                    slug: base_slug(&loaded.app.id),
                    app: loaded.app,
                    binding,
                    source,
                })
            })
            .collect();
        entries.sort_by(|a, b| a.app.id.cmp(&b.app.id));
        assign_slugs(&mut entries);
        let mut by_key = HashMap::with_capacity(entries.len() * 2);
        for (i, e) in entries.iter().enumerate() {
            by_key.insert(e.app.id.clone(), i);
            by_key.entry(e.slug.clone()).or_insert(i);
        }
        let fingerprint = fingerprint(&entries);
        Snapshot {
            entries,
            by_key,
            diagnostics: catalog.diagnostics,
            locale,
            fingerprint,
        }
    }

    /// Finds an app by id, slug, `app_<slug>`, `app:<id>`, or a name or alias (any
    /// language, any case) when exactly one app has it.
    pub fn find(&self, key: &str) -> Option<&Entry> {
        let key = key.trim();
        let bare = key
            .strip_prefix("app:")
            .or_else(|| key.strip_prefix("app_"))
            .unwrap_or(key);
        if let Some(&i) = self.by_key.get(key).or_else(|| self.by_key.get(bare)) {
            return Some(&self.entries[i]);
        }
        let unique = |matches: &dyn Fn(&Entry) -> bool| {
            let mut found = self.entries.iter().filter(|e| matches(e));
            let first = found.next()?;
            found.next().is_none().then_some(first)
        };
        unique(&|e| {
            e.app.id.eq_ignore_ascii_case(key)
                || e.app.name.all().iter().any(|n| n.eq_ignore_ascii_case(key))
        })
        .or_else(|| unique(&|e| e.app.aliases.iter().any(|a| a.eq_ignore_ascii_case(key))))
    }

    /// The localized name of an entry.
    pub fn name<'a>(&self, entry: &'a Entry) -> &'a str {
        entry.app.name.resolve(self.locale.as_deref())
    }

    /// A hash of everything agents see in lists; equal hashes mean nothing to announce.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
}

fn fingerprint(entries: &[Entry]) -> u64 {
    let mut h = DefaultHasher::new();
    for e in entries {
        e.app.id.hash(&mut h);
        e.slug.hash(&mut h);
        e.app.name.all().hash(&mut h);
        e.app.description.hash(&mut h);
        e.app.aliases.hash(&mut h);
        for t in &e.binding().tools {
            t.name.hash(&mut h);
            t.description.hash(&mut h);
            t.parameters.text().hash(&mut h);
        }
    }
    h.finish()
}

/// The host's own platform first, then web, then any other runnable binding.
fn choose_binding(app: &App, host: &Host) -> Option<usize> {
    let own = match host.os() {
        Os::Linux => Some(Platform::Linux),
        Os::Macos => Some(Platform::Macos),
        Os::Windows => Some(Platform::Windows),
        Os::Other => None,
    };
    let runnable = |i: &usize| host.can_run(&app.bindings[*i]);
    let indexes = 0..app.bindings.len();
    let by_platform = |p: Option<Platform>| {
        indexes
            .clone()
            .filter(runnable)
            .find(|i| Some(app.bindings[*i].platform) == p)
    };
    by_platform(own)
        .or_else(|| by_platform(Some(Platform::Web)))
        .or_else(|| indexes.clone().find(runnable))
}

fn base_slug(id: &str) -> String {
    id.chars()
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
    format!("{:06x}", crate::hash::stable(id) & 0x00ff_ffff)
}

fn assign_slugs(entries: &mut [Entry]) {
    let max_slug = MAX_LISTED_NAME - "app_".len();
    let mut count: HashMap<String, usize> = HashMap::new();
    for e in entries.iter() {
        *count.entry(e.slug.clone()).or_default() += 1;
    }
    for e in entries.iter_mut() {
        let collides = count[&e.slug] > 1;
        if collides || e.slug.len() > max_slug {
            let hash = short_hash(&e.app.id);
            let keep = max_slug - hash.len() - 1;
            let mut cut = e.slug.clone();
            cut.truncate(keep);
            e.slug = format!("{cut}_{hash}");
        }
    }
}

/// The current snapshot, replaceable at any time.
#[derive(Debug, Default)]
pub struct Registry {
    current: RwLock<Arc<Snapshot>>,
}

impl Registry {
    /// A registry serving `snapshot`.
    pub fn new(snapshot: Snapshot) -> Registry {
        Registry {
            current: RwLock::new(Arc::new(snapshot)),
        }
    }

    /// The current snapshot (cheap: one `Arc` clone).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.read().expect("registry lock").clone()
    }

    /// Installs `snapshot`; returns whether what agents see changed.
    pub fn replace(&self, snapshot: Snapshot) -> bool {
        let mut current = self.current.write().expect("registry lock");
        let changed = current.fingerprint() != snapshot.fingerprint();
        *current = Arc::new(snapshot);
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_client_safe_short_and_unique() {
        assert_eq!(base_slug("com.apple.mail"), "com_apple_mail");
        assert_eq!(base_slug("org.ex-ample.a b"), "org_ex-ample_a_b");
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
            app: app(id),
            binding: 0,
            slug: base_slug(id),
            source: PathBuf::new(),
        })
        .collect();
        assign_slugs(&mut entries);
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
