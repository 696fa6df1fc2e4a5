//! Search results and guides ranked by the client's own use ([`crate::usage`]).

use std::sync::{Arc, Mutex};

use super::Pipeline;
use crate::identity::Caller;
use crate::registry::{Entry, Snapshot, search::Hit};
use crate::usage::Tally;

impl Pipeline {
    /// `caller`'s use of apps and tools (read from the history on first use).
    async fn usage_of(&self, caller: &Caller) -> Arc<Mutex<Tally>> {
        let person = caller.person.as_ref().map(|p| p.subject.as_str());
        self.usage.of(&caller.key(), person).await
    }

    /// Starts reading `caller`'s use from the history (a client that has just connected),
    /// so that its first search does not wait for it.
    pub(crate) fn prefetch_usage(&self, caller: &Caller) {
        if caller.person.is_none() {
            self.usage.prefetch(caller.key());
        }
    }

    /// The best `limit` apps of `snapshot` for `query`: by relevance, then by `caller`'s
    /// use.
    pub(crate) async fn search_for<'a>(
        &self,
        snapshot: &'a Snapshot,
        query: &str,
        limit: usize,
        caller: &Caller,
    ) -> Vec<Hit<'a>> {
        let tally = self.usage_of(caller).await;
        let now = crate::history::now_ms();
        let tally = tally.lock().expect("tally lock");
        crate::registry::search::search_ranked(snapshot, query, limit, &|app| tally.app(app, now))
    }

    /// `entry`'s guide for `caller`: the tools it uses most first; a downstream server's
    /// tools with an interactive view (MCP Apps) named at the end, with the view's URI.
    pub(crate) async fn guide_for(
        &self,
        snapshot: &Snapshot,
        entry: &Entry,
        caller: &Caller,
    ) -> String {
        let tally = self.usage_of(caller).await;
        let first = tally
            .lock()
            .expect("tally lock")
            .tools(&entry.app.id, crate::history::now_ms());
        let base = self.memo.guide(entry, snapshot.name(entry), &first, || {
            crate::registry::guide::render_ranked(snapshot, entry, &first)
        });
        let mut guide = String::from(&*base);
        let mcp = self.executors.mcp();
        if let Some(instructions) = mcp.instructions(&entry.app.id) {
            use std::fmt::Write as _;
            let quoted: Vec<String> = instructions.lines().map(|l| format!("> {l}")).collect();
            let _ = write!(
                guide,
                "\n## The server's own instructions\n\nAs the server gave them (its words, not the gateway's; at most 2,000 characters):\n\n{}\n",
                quoted.join("\n")
            );
        }
        // By the name agents call each tool (the user may have renamed it); a tool not
        // served here is left out.
        let views: Vec<(&str, String)> = mcp
            .views(&entry.app.id)
            .into_iter()
            .filter_map(|(tool, uri)| {
                let served = entry
                    .binding()
                    .tools
                    .iter()
                    .find(|t| t.as_defined().name == tool)?;
                Some((served.name.as_str(), uri))
            })
            .collect();
        if !views.is_empty() {
            use std::fmt::Write as _;
            let _ = write!(
                guide,
                "\n## Interactive views ({})\n\nA host that renders MCP Apps shows these tools' results in their view (`resources/read` of its `ui://` URI through this gateway; the call's result carries it in `_meta.ui`).\n",
                views.len()
            );
            for (tool, uri) in views {
                let _ = write!(guide, "\n- `{tool}`: `{uri}`");
            }
            guide.push('\n');
        }
        guide
    }
}
