//! What a call works out from an app's definition alone, kept while that app is served:
//! each called tool's consent fingerprint ([`Definition`]: SHA-256 over canonical JSON)
//! and what starting the app runs ([`Start`]: a digest and a shell-quoted command line).
//! Made afresh they were a fifth of a forwarded call's instructions.
//!
//! Rendered guides are kept too ([`Memo::guide`]): by app object, binding, the name shown
//! and the client's order of use, in at most [`GUIDES_MAX_BYTES`]; rendering one (escaping,
//! linting every description, the script declarations) was most of a guide call's own cost.
//!
//! Kept per app *object*: a reload that changes a descriptor makes a new `App`, so its
//! tools are worked out again, and an app dropped from the catalog is forgotten (its slot
//! is found empty, by its weak reference, and given up).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use aai_descriptor::{App, Tool};

use crate::consent::Start;
use crate::consent::fingerprint::Definition;
use crate::registry::Entry;

/// Past this many apps, the slots of apps no longer served are given up.
const PRUNE_AT: usize = 1024;

/// Rendered guides kept, in bytes of text; past it they are all given up (an agent reads
/// a handful of guides again and again, not all of them).
const GUIDES_MAX_BYTES: usize = 2 << 20;

#[derive(Debug, Default)]
pub(super) struct Memo {
    apps: Mutex<HashMap<usize, Kept>>,
    guides: Mutex<Guides>,
}

#[derive(Debug, Default)]
struct Guides {
    kept: HashMap<GuideKey, (Weak<App>, Arc<str>)>,
    bytes: usize,
}

/// What a rendered guide depends on: the app object (by address; the weak reference kept
/// with the guide holds the address, so no other app can take it), the binding, the name
/// shown (the locale's) and the tools the client uses most, in order.
#[derive(Debug, PartialEq, Eq, Hash)]
struct GuideKey {
    app: usize,
    binding: usize,
    name: String,
    first: Vec<String>,
}

#[derive(Debug)]
struct Kept {
    app: Weak<App>,
    /// By binding and tool name.
    definitions: HashMap<(usize, String), Arc<Definition>>,
    /// By binding.
    starts: HashMap<usize, Option<Start>>,
}

impl Memo {
    /// The definition of `tool`, one of the tools of `entry`'s binding.
    pub(super) fn definition(&self, entry: &Entry, tool: &Tool) -> Arc<Definition> {
        self.with(&entry.app, |kept| {
            kept.definitions
                .entry((entry.binding, tool.name.clone()))
                .or_insert_with(|| Arc::new(Definition::of(tool)))
                .clone()
        })
    }

    /// What starting `entry`'s app runs ([`crate::exec::start::start_of`]).
    pub(super) fn start(&self, entry: &Entry) -> Option<Start> {
        self.with(&entry.app, |kept| {
            kept.starts
                .entry(entry.binding)
                .or_insert_with(|| {
                    crate::exec::start::start_of(&entry.binding().executor, super::base_dir(entry))
                })
                .clone()
        })
    }

    /// `entry`'s guide as `render` makes it, made once per app object, binding, `name`
    /// and `first` (the client's most used tools).
    pub(super) fn guide(
        &self,
        entry: &Entry,
        name: &str,
        first: &[String],
        render: impl FnOnce() -> String,
    ) -> Arc<str> {
        let key = GuideKey {
            app: Arc::as_ptr(&entry.app) as usize,
            binding: entry.binding,
            name: name.to_owned(),
            first: first.to_vec(),
        };
        if let Some((app, guide)) = self.guides.lock().expect("guides lock").kept.get(&key)
            && app.strong_count() > 0
        {
            return guide.clone();
        }
        let guide: Arc<str> = render().into();
        let mut guides = self.guides.lock().expect("guides lock");
        if guides.bytes + guide.len() > GUIDES_MAX_BYTES {
            guides.kept.clear();
            guides.bytes = 0;
        }
        if guide.len() <= GUIDES_MAX_BYTES {
            guides.bytes += guide.len();
            let old = guides
                .kept
                .insert(key, (Arc::downgrade(&entry.app), guide.clone()));
            if let Some((_, old)) = old {
                guides.bytes -= old.len();
            }
        }
        guide
    }

    fn with<T>(&self, app: &Arc<App>, f: impl FnOnce(&mut Kept) -> T) -> T {
        let mut apps = self.apps.lock().expect("memo lock");
        if apps.len() >= PRUNE_AT {
            apps.retain(|_, kept| kept.app.strong_count() > 0);
        }
        let key = Arc::as_ptr(app) as usize;
        // A slot whose app is gone may hold another app at the same address now.
        let fresh = apps.get(&key).is_none_or(|kept| {
            !std::ptr::eq(kept.app.as_ptr(), Arc::as_ptr(app)) || kept.app.strong_count() == 0
        });
        if fresh {
            apps.insert(
                key,
                Kept {
                    app: Arc::downgrade(app),
                    definitions: HashMap::new(),
                    starts: HashMap::new(),
                },
            );
        }
        f(apps.get_mut(&key).expect("inserted above"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, command: &str) -> Entry {
        let text = serde_json::json!({"schemaVersion":"1.0","version":"1.0.0","platform":"linux",
            "app":{"id": id,"name":"N","description":"d"},
            "execution":{"type":"stdio","command": command},
            "tools":[{"name":"t","description":"d","parameters":{"type":"object"}}]});
        Entry {
            app: aai_descriptor::parse(&text.to_string(), "t")
                .app
                .unwrap()
                .into(),
            binding: 0,
            slug: id.to_owned(),
            source: std::path::PathBuf::from("/apps/x/aai.json").into(),
            keys: Default::default(),
        }
    }

    #[test]
    fn an_app_is_worked_out_once_and_a_changed_one_again() {
        let memo = Memo::default();
        let a = entry("com.example.a", "one");
        let tool = &a.app.bindings[0].tools[0];
        let first = memo.definition(&a, tool);
        assert!(Arc::ptr_eq(&first, &memo.definition(&a, tool)));
        assert_eq!(memo.start(&a).unwrap().shown, "one");
        // The same id, changed: another app object, worked out again.
        let b = entry("com.example.a", "two");
        assert_eq!(memo.start(&b).unwrap().shown, "two");
        assert_eq!(memo.start(&a).unwrap().shown, "one");
        assert!(!Arc::ptr_eq(
            &first,
            &memo.definition(&b, &b.app.bindings[0].tools[0])
        ));
    }

    #[test]
    fn a_guide_is_rendered_once_per_app_object_and_order() {
        let memo = Memo::default();
        let a = entry("com.example.a", "one");
        let made = std::cell::Cell::new(0);
        let render = |text: &str| {
            made.set(made.get() + 1);
            text.to_owned()
        };
        let first = memo.guide(&a, "N", &[], || render("a"));
        assert!(Arc::ptr_eq(
            &first,
            &memo.guide(&a, "N", &[], || render("x"))
        ));
        assert_eq!(made.get(), 1);
        // Another order of use, another name, another app object: rendered again.
        assert_eq!(
            &*memo.guide(&a, "N", &["t".into()], || render("ranked")),
            "ranked"
        );
        assert_eq!(&*memo.guide(&a, "Nom", &[], || render("fr")), "fr");
        let b = entry("com.example.a", "two");
        assert_eq!(&*memo.guide(&b, "N", &[], || render("b")), "b");
        assert_eq!(made.get(), 4);
        // Past the bound the kept guides are given up, and the bytes counted again.
        let big = "x".repeat(GUIDES_MAX_BYTES / 2 + 1);
        memo.guide(&a, "big", &[], || big.clone());
        memo.guide(&b, "big", &[], || big.clone());
        let guides = memo.guides.lock().unwrap();
        assert_eq!(guides.kept.len(), 1);
        assert_eq!(guides.bytes, big.len());
    }

    #[test]
    fn apps_no_longer_served_are_given_up() {
        let memo = Memo::default();
        let served: Vec<Entry> = (0..PRUNE_AT)
            .map(|i| entry(&format!("com.example.a{i}"), "x"))
            .collect();
        served.iter().for_each(|e| drop(memo.start(e)));
        assert_eq!(memo.apps.lock().unwrap().len(), PRUNE_AT);
        drop(served);
        let late = entry("com.example.late", "x");
        memo.start(&late);
        assert_eq!(memo.apps.lock().unwrap().len(), 1);
    }
}
