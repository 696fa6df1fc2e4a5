//! What a downstream server says about itself beyond its tools, per app: each tool's
//! interactive view ([`super::ui`]), its resource templates, and its `instructions`. Kept
//! from the last listing (and connection) in this run, for the guide and the gateway's
//! own MCP resources.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde_json::Value;

/// Most characters of a server's instructions the gateway passes on.
pub(crate) const MAX_INSTRUCTIONS: usize = 2_000;
/// Most resource templates kept per server.
const MAX_TEMPLATES: usize = 100;

/// Every server's offers, by app id.
#[derive(Debug, Default)]
pub(super) struct Offers(Mutex<HashMap<String, AppOffers>>);

#[derive(Debug, Default)]
struct AppOffers {
    /// Tool → its view, its URI named for the app.
    views: BTreeMap<String, Value>,
    /// `resources/templates/list` items, as the server gave them.
    templates: Vec<Value>,
    /// The server's `instructions`, cut.
    instructions: Option<String>,
}

impl Offers {
    fn with<T>(&self, app: &str, f: impl FnOnce(&mut AppOffers) -> T) -> T {
        let mut all = self.0.lock().expect("offers lock");
        f(all.entry(app.to_owned()).or_default())
    }

    fn read<T>(&self, app: &str, f: impl FnOnce(&AppOffers) -> T) -> Option<T> {
        self.0.lock().expect("offers lock").get(app).map(f)
    }

    /// A new listing of `app` begins: what it offered before is forgotten (not its
    /// instructions, which come with the connection).
    pub(super) fn relisted(&self, app: &str, templates: Vec<Value>) {
        self.with(app, |o| {
            o.views.clear();
            o.templates = templates.into_iter().take(MAX_TEMPLATES).collect();
        });
    }

    pub(super) fn set_view(&self, app: &str, tool: &str, view: Value) {
        self.with(app, |o| o.views.insert(tool.to_owned(), view));
    }

    pub(super) fn set_instructions(&self, app: &str, instructions: Option<&str>) {
        let cut = instructions
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .map(|i| crate::text::excerpt(i, MAX_INSTRUCTIONS));
        self.with(app, |o| o.instructions = cut);
    }

    pub(super) fn view(&self, app: &str, tool: &str) -> Option<Value> {
        self.read(app, |o| o.views.get(tool).cloned()).flatten()
    }

    /// `(tool, view URI)` of `app`'s tools with a view of their own.
    pub(super) fn views(&self, app: &str) -> Vec<(String, String)> {
        self.read(app, |o| {
            o.views
                .iter()
                .filter_map(|(tool, ui)| {
                    Some((tool.clone(), ui.get("resourceUri")?.as_str()?.to_owned()))
                })
                .collect()
        })
        .unwrap_or_default()
    }

    pub(super) fn templates(&self, app: &str) -> Vec<Value> {
        self.read(app, |o| o.templates.clone()).unwrap_or_default()
    }

    pub(super) fn instructions(&self, app: &str) -> Option<String> {
        self.read(app, |o| o.instructions.clone()).flatten()
    }
}
