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

pub mod guide;
pub mod search;
pub(crate) mod slug;
pub(crate) mod typescript;
pub(crate) mod view;

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, RwLock};

use aai_descriptor::{App, Binding, Diagnostic, Platform};

use crate::catalog::Catalog;
use crate::host::{Host, Os};

/// One served app.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The app, all bindings included (shared with the scan that read it).
    pub app: Arc<App>,
    /// Index of the binding calls go through.
    pub binding: usize,
    /// Client-safe name part.
    pub slug: String,
    /// The file that defined the chosen binding.
    pub source: std::sync::Arc<std::path::Path>,
    /// Lower-cased search text, computed once per app object.
    pub keys: Arc<search::Keys>,
}

impl Entry {
    /// The binding calls go through.
    pub fn binding(&self) -> &Binding {
        &self.app.bindings[self.binding]
    }
}

/// Why an app id that is not served is missing.
#[derive(Debug, Clone)]
pub enum Missing {
    /// Its descriptor failed to load.
    Broken(crate::catalog::Broken),
    /// It loaded, but none of its bindings can run on this host: `(platform, type)` of
    /// each binding it has.
    Unsupported(Vec<(Platform, &'static str)>),
    /// It loaded, but one of its `discovery.checks` does not hold on this machine.
    Inactive(crate::catalog::Inactive),
}

/// The served apps at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Served apps, sorted by id.
    pub entries: Vec<Entry>,
    /// Indexes of `entries` sorted by slug (ids need none: `entries` are sorted by id).
    by_slug: Vec<u32>,
    /// Apps found but not served, by id.
    missing: HashMap<String, Missing>,
    /// What the scan reported.
    pub diagnostics: Vec<Diagnostic>,
    /// Locale for names.
    pub locale: Option<String>,
    /// Who sees what (config `clients` and `$AAI_HOME/apps.json`, read with the scan).
    pub visibility: Arc<crate::visibility::Visibility>,
    fingerprint: u64,
    /// Made on the first lookup by name or alias: each lower-cased id, name and alias by
    /// its hash ([`Named`]), sorted.
    named: std::sync::OnceLock<Box<[Named]>>,
}

/// One lower-cased id, name or alias of an entry, by its hash.
#[derive(Debug, Clone, Copy)]
struct Named {
    hash: u64,
    entry: u32,
    alias: bool,
}

impl Snapshot {
    /// Builds the served set from a scan.
    pub fn build(catalog: Catalog, host: &Host, locale: Option<String>) -> Snapshot {
        Snapshot::build_after(catalog, host, locale, None)
    }

    /// [`Snapshot::build`], reusing what `previous` worked out of the apps that are the
    /// same objects (the scan kept their parse): their search keys.
    pub fn build_after(
        catalog: Catalog,
        host: &Host,
        locale: Option<String>,
        previous: Option<&Snapshot>,
    ) -> Snapshot {
        let mut missing = HashMap::new();
        for broken in catalog.broken {
            for id in &broken.ids {
                missing.insert(id.clone(), Missing::Broken(broken.clone()));
            }
        }
        // An app another file of the same id serves is not missing.
        for inactive in catalog.inactive {
            if !catalog.apps.iter().any(|l| l.app.id == inactive.id) {
                missing.insert(inactive.id.clone(), Missing::Inactive(inactive));
            }
        }
        // Both are sorted by id: the previous entry of each app is found walking along.
        let mut before = previous
            .map_or(&[][..], |p| &p.entries[..])
            .iter()
            .peekable();
        let mut entries: Vec<Entry> = catalog
            .apps
            .into_iter()
            .filter_map(|loaded| {
                let Some(binding) = choose_binding(&loaded.app, host) else {
                    let bindings = loaded
                        .app
                        .bindings
                        .iter()
                        .map(|b| (b.platform, b.executor.kind().as_str()))
                        .collect();
                    missing.insert(loaded.app.id.clone(), Missing::Unsupported(bindings));
                    return None;
                };
                while before.next_if(|p| p.app.id < loaded.app.id).is_some() {}
                // The very same parse, bound the same way: the same entry, but for its slug,
                // which depends on the other apps (`slug::assign`).
                if let Some(p) = before.next_if(|p| p.app.id == loaded.app.id)
                    && Arc::ptr_eq(&p.app, &loaded.app)
                    && p.binding == binding
                {
                    return Some(Entry {
                        slug: slug::sanitize(&p.app.id),
                        ..p.clone()
                    });
                }
                let source = loaded.binding_sources[binding].clone();
                let mut entry = Entry {
                    slug: slug::sanitize(&loaded.app.id),
                    app: loaded.app,
                    binding,
                    source,
                    keys: Arc::default(),
                };
                entry.keys = Arc::new(search::Keys::of(&entry));
                Some(entry)
            })
            .collect();
        // The snapshot lives until the next scan: no room to grow.
        entries.shrink_to_fit();
        entries.sort_by(|a, b| a.app.id.cmp(&b.app.id));
        slug::assign(&mut entries);
        Snapshot::indexed(entries, missing, catalog.diagnostics, locale)
    }

    /// This snapshot with only the apps `keep_app` keeps (by id) and, of theirs, the tools
    /// `keep_tool` keeps (app id, tool names: a renamed tool has two): a client's
    /// view (`view.rs`). Slugs stay as they are; an app left out is not among the missing
    /// either.
    pub fn filtered(
        &self,
        keep_app: impl Fn(&str) -> bool,
        keep_tool: impl Fn(&str, &[&str]) -> bool,
    ) -> Snapshot {
        let entries = self
            .entries
            .iter()
            .filter(|e| keep_app(&e.app.id))
            .map(|e| {
                // A rule may name a tool the user renamed (config `apps.<id>.tools`) by
                // either name: each rule is asked of both.
                let keep = |t: &aai_descriptor::Tool| {
                    let defined = t.as_defined().name.as_str();
                    if defined == t.name {
                        keep_tool(&e.app.id, &[&t.name])
                    } else {
                        keep_tool(&e.app.id, &[&t.name, defined])
                    }
                };
                // Shared with the full snapshot unless the view hides some of its tools.
                let mut app = e.app.clone();
                let mut changed = false;
                if e.binding().tools.iter().any(|t| !keep(t))
                    && let Some(binding) = Arc::make_mut(&mut app).bindings.get_mut(e.binding)
                {
                    binding.tools.retain(keep);
                    changed = true;
                }
                let mut entry = Entry {
                    app,
                    binding: e.binding,
                    slug: e.slug.clone(),
                    source: e.source.clone(),
                    keys: e.keys.clone(),
                };
                if changed {
                    entry.keys = Arc::new(search::Keys::of(&entry));
                }
                entry
            })
            .collect();
        let missing = self
            .missing
            .iter()
            .filter(|(id, _)| keep_app(id))
            .map(|(id, m)| (id.clone(), m.clone()))
            .collect();
        Snapshot::indexed(
            entries,
            missing,
            self.diagnostics.clone(),
            self.locale.clone(),
        )
    }

    /// A snapshot of sorted, slugged entries, with its lookup tables.
    fn indexed(
        entries: Vec<Entry>,
        missing: HashMap<String, Missing>,
        diagnostics: Vec<Diagnostic>,
        locale: Option<String>,
    ) -> Snapshot {
        debug_assert!(
            entries.windows(2).all(|w| w[0].app.id < w[1].app.id),
            "entries are sorted by id, each once: `find` searches them"
        );
        let mut by_slug: Vec<u32> = (0..entries.len())
            .map(|i| u32::try_from(i).expect("fewer than 4 billion apps"))
            .collect();
        by_slug.sort_by(|&a, &b| entries[a as usize].slug.cmp(&entries[b as usize].slug));
        let fingerprint = fingerprint(&entries);
        Snapshot {
            entries,
            by_slug,
            missing,
            diagnostics,
            locale,
            visibility: Arc::default(),
            fingerprint,
            named: std::sync::OnceLock::new(),
        }
    }

    /// Finds an app by id, slug, `app_<slug>`, `app:<id>`, or a name or alias (any
    /// language, any case) when exactly one app has it.
    pub fn find(&self, key: &str) -> Option<&Entry> {
        let (key, bare) = keys(key);
        if let Some(entry) = self.exact(key).or_else(|| self.exact(bare)) {
            return Some(entry);
        }
        // Names and aliases are a fallback (an id or slug is what agents send): looked up
        // by hash in an index made on first use (a walk of 10,000 apps' keys cost 2 ms
        // for every unknown name), each hit checked against the keys.
        let folded = key.to_lowercase();
        let hash = name_hash(&folded);
        let named = self.named.get_or_init(|| self.index_names());
        let from = named.partition_point(|n| n.hash < hash);
        let hits = named[from..].iter().take_while(|n| n.hash == hash);
        let unique = |alias: bool, has: &dyn Fn(&search::Keys) -> bool| {
            let mut found = hits
                .clone()
                .filter(|n| n.alias == alias)
                .map(|n| &self.entries[n.entry as usize])
                .filter(|e| has(&e.keys));
            let one = found.next()?;
            found.all(|other| std::ptr::eq(other, one)).then_some(one)
        };
        unique(false, &|k| {
            k.id() == folded || k.names().any(|n| n == folded)
        })
        .or_else(|| unique(true, &|k| k.aliases().any(|a| a == folded)))
    }

    /// Every entry's lower-cased id, names and aliases by hash, sorted.
    fn index_names(&self) -> Box<[Named]> {
        let mut named = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            let entry = u32::try_from(i).expect("fewer than 4 billion apps");
            let mut add = |text: &str, alias: bool| {
                named.push(Named {
                    hash: name_hash(text),
                    entry,
                    alias,
                });
            };
            add(e.keys.id(), false);
            e.keys.names().for_each(|n| add(n, false));
            e.keys.aliases().for_each(|a| add(a, true));
        }
        named.sort_unstable_by_key(|n| n.hash);
        named.into_boxed_slice()
    }

    /// The entry whose id is `key`.
    pub(crate) fn exact_id(&self, key: &str) -> Option<&Entry> {
        let i = self
            .entries
            .binary_search_by(|e| e.app.id.as_str().cmp(key))
            .ok()?;
        Some(&self.entries[i])
    }

    /// The entry whose id is `key`, else the one whose slug is.
    fn exact(&self, key: &str) -> Option<&Entry> {
        if let Some(entry) = self.exact_id(key) {
            return Some(entry);
        }
        let at = self
            .by_slug
            .partition_point(|&i| self.entries[i as usize].slug.as_str() < key);
        let i = *self.by_slug.get(at)? as usize;
        (self.entries[i].slug == key).then(|| &self.entries[i])
    }

    /// Why `key` (an app id) is not served, when it was found but is broken, cannot run
    /// here or is not active here.
    pub fn missing(&self, key: &str) -> Option<&Missing> {
        let (key, bare) = keys(key);
        self.missing.get(key).or_else(|| self.missing.get(bare))
    }

    /// Every app id found but not served, with why, sorted by id.
    pub fn missing_all(&self) -> Vec<(&str, &Missing)> {
        let mut all: Vec<(&str, &Missing)> =
            self.missing.iter().map(|(k, m)| (k.as_str(), m)).collect();
        all.sort_by_key(|(k, _)| *k);
        all
    }

    /// Up to `n` served app ids close to `key` in sorted order that share a good part of
    /// its prefix (`com.example.ehco` → `com.example.echo`): "did you mean" for the error
    /// path, in O(log n) — it must not walk every app.
    pub fn nearby(&self, key: &str, n: usize) -> Vec<&str> {
        let at = self.entries.partition_point(|e| e.app.id.as_str() < key);
        let from = at.saturating_sub(n);
        let to = (at + n).min(self.entries.len());
        let shared = |id: &str| {
            id.chars()
                .zip(key.chars())
                .take_while(|(a, b)| a == b)
                .count()
        };
        let mut close: Vec<(usize, &str)> = self.entries[from..to]
            .iter()
            .map(|e| (shared(&e.app.id), e.app.id.as_str()))
            .filter(|(common, _)| *common >= 3 && *common * 2 >= key.chars().count())
            .collect();
        close.sort_by_key(|c| std::cmp::Reverse(c.0));
        close.into_iter().take(n).map(|(_, id)| id).collect()
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

/// A lookup key trimmed, and without an `app:`/`app_` prefix.
fn keys(key: &str) -> (&str, &str) {
    let key = key.trim();
    let bare = key
        .strip_prefix("app:")
        .or_else(|| key.strip_prefix("app_"))
        .unwrap_or(key);
    (key, bare)
}

fn name_hash(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

fn fingerprint(entries: &[Entry]) -> u64 {
    let mut h = DefaultHasher::new();
    for e in entries {
        e.slug.hash(&mut h);
        e.keys.digest().hash(&mut h);
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

/// The current snapshot, replaceable at any time.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    current: RwLock<Arc<Snapshot>>,
}

impl Registry {
    /// The current snapshot (cheap: one `Arc` clone).
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.current.read().expect("registry lock").clone()
    }

    /// Installs `snapshot`; returns whether what agents see changed.
    pub(crate) fn replace(&self, snapshot: Snapshot) -> bool {
        let mut current = self.current.write().expect("registry lock");
        // A change of who sees what changes what some client sees.
        let changed = current.fingerprint() != snapshot.fingerprint()
            || current.visibility != snapshot.visibility;
        *current = Arc::new(snapshot);
        changed
    }
}
