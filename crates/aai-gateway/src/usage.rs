//! Each client's own use of apps and tools (docs/workflows.md, "Usage-ranked discovery"):
//! `aai_search` ranks apps of equal relevance by it, and an app's guide lists the tools the
//! client uses most first.
//!
//! A client's tally is read from the history the first time it is needed (the calls that
//! succeeded, within the history's retention), then counted as its calls succeed. A use
//! weighs less as it ages (halved every 30 days). Everything stays in this process and
//! its history: nothing leaves the machine. A client is its name and transport, and the
//! person behind it in team mode.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::history::Sink;

/// Most clients whose tallies are kept at once; past it, one is forgotten (and read
/// again from the history when it comes back).
const MAX_CLIENTS: usize = 1024;
/// Most (app, tool) pairs kept per client; past it, the least recent goes.
const MAX_PAIRS: usize = 10_000;
/// A use's weight halves in this time.
const HALF_LIFE_MS: f64 = 30.0 * 86_400_000.0;

/// One tool's use by one client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Use {
    /// Calls that succeeded.
    pub count: u64,
    /// The last one, in Unix ms.
    pub last_ms: u64,
}

impl Use {
    /// How much it weighs now: the count, halved for every 30 days since the last use,
    /// in thousandths.
    fn weight(self, now_ms: u64) -> u64 {
        let age = now_ms.saturating_sub(self.last_ms) as f64;
        (self.count as f64 * 1000.0 * 0.5f64.powf(age / HALF_LIFE_MS)) as u64
    }
}

/// One client's uses: app id → tool → use.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    apps: HashMap<String, HashMap<String, Use>>,
    pairs: usize,
}

impl Tally {
    fn add(&mut self, app: &str, tool: &str, count: u64, last_ms: u64) {
        if self.pairs >= MAX_PAIRS && !self.has(app, tool) {
            self.forget_oldest();
        }
        let tools = self.apps.entry(app.to_owned()).or_default();
        let entry = tools.entry(tool.to_owned()).or_insert_with(|| {
            self.pairs += 1;
            Use::default()
        });
        entry.count += count;
        entry.last_ms = entry.last_ms.max(last_ms);
    }

    fn has(&self, app: &str, tool: &str) -> bool {
        self.apps.get(app).is_some_and(|t| t.contains_key(tool))
    }

    fn forget_oldest(&mut self) {
        let oldest = self
            .apps
            .iter()
            .flat_map(|(app, tools)| tools.iter().map(move |(tool, u)| (u.last_ms, app, tool)))
            .min()
            .map(|(_, app, tool)| (app.clone(), tool.clone()));
        if let Some((app, tool)) = oldest
            && let Some(tools) = self.apps.get_mut(&app)
        {
            tools.remove(&tool);
            self.pairs -= 1;
            if tools.is_empty() {
                self.apps.remove(&app);
            }
        }
    }

    /// How much the client used `app`, all its tools together.
    pub(crate) fn app(&self, app: &str, now_ms: u64) -> u64 {
        self.apps
            .get(app)
            .map_or(0, |tools| tools.values().map(|u| u.weight(now_ms)).sum())
    }

    /// The tools of `app` the client used, most used first (ties: the more recent).
    pub(crate) fn tools(&self, app: &str, now_ms: u64) -> Vec<String> {
        let Some(tools) = self.apps.get(app) else {
            return Vec::new();
        };
        let mut used: Vec<(&String, &Use)> = tools.iter().collect();
        used.sort_by(|a, b| {
            b.1.weight(now_ms)
                .cmp(&a.1.weight(now_ms))
                .then(b.1.last_ms.cmp(&a.1.last_ms))
                .then(a.0.cmp(b.0))
        });
        used.into_iter().map(|(t, _)| t.clone()).collect()
    }
}

/// Every client's tally.
#[derive(Debug)]
pub(crate) struct Usage {
    history: Option<Arc<dyn Sink>>,
    clients: Mutex<HashMap<String, Arc<Slot>>>,
}

/// One client's tally, and whether the history has been read into it (once; calls that
/// need it meanwhile wait for that read).
#[derive(Debug, Default)]
struct Slot {
    tally: Arc<Mutex<Tally>>,
    read: tokio::sync::OnceCell<()>,
}

impl Usage {
    /// Tallies read from `history` (none: counted from this process's calls only).
    pub(crate) fn new(history: Option<Arc<dyn Sink>>) -> Usage {
        Usage {
            history,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The tally of `caller` (and `person`), read from the history on first use (a full
    /// history of 100,000 rows takes about 40 ms: [`Usage::prefetch`] starts it early). A
    /// history that cannot be read gives an empty tally (and a warning): ranking is a
    /// nicety.
    pub(crate) async fn of(&self, caller: &str, person: Option<&str>) -> Arc<Mutex<Tally>> {
        let slot = {
            let mut clients = self.clients.lock().expect("usage lock");
            let key = key(caller, person);
            if !clients.contains_key(key.as_ref())
                && clients.len() >= MAX_CLIENTS
                && let Some(any) = clients.keys().next().cloned()
            {
                clients.remove(&any);
            }
            clients.entry(key.into_owned()).or_default().clone()
        };
        slot.read
            .get_or_init(|| async {
                let Some(history) = &self.history else {
                    return;
                };
                match history
                    .usage(caller.to_owned(), person.map(str::to_owned))
                    .await
                {
                    Ok(rows) => {
                        let mut tally = slot.tally.lock().expect("tally lock");
                        for (app, tool, count, last) in rows {
                            tally.add(&app, &tool, count, last);
                        }
                    }
                    // Not a warning: a history being created or migrated by the writer
                    // at this moment reads so too, and ranking is a nicety.
                    Err(e) => tracing::info!("this client's use of apps cannot be read: {e}"),
                }
            })
            .await;
        slot.tally.clone()
    }

    /// Starts reading `caller`'s tally (a client that has just connected), so that its
    /// first search does not wait for the history.
    pub(crate) fn prefetch(self: &Arc<Self>, caller: String) {
        let usage = self.clone();
        tokio::spawn(async move {
            usage.of(&caller, None).await;
        });
    }

    /// Counts a call of `tool` of `app` by `caller` that succeeded at `at_ms`, when that
    /// client's tally has been read (else the history has it for when it is).
    pub(crate) fn note(
        &self,
        caller: &str,
        person: Option<&str>,
        app: &str,
        tool: &str,
        at_ms: u64,
    ) {
        let tally = self
            .clients
            .lock()
            .expect("usage lock")
            .get(key(caller, person).as_ref())
            .cloned();
        if let Some(slot) = tally {
            slot.tally
                .lock()
                .expect("tally lock")
                .add(app, tool, 1, at_ms);
        }
    }
}

/// A client's key: its caller key, and its person when there is one (no copy without:
/// the common case, on every call).
fn key<'a>(caller: &'a str, person: Option<&str>) -> std::borrow::Cow<'a, str> {
    match person {
        Some(p) => std::borrow::Cow::Owned(format!("{caller}\u{0}{p}")),
        None => std::borrow::Cow::Borrowed(caller),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400_000;

    #[test]
    fn more_and_more_recent_use_weighs_more() {
        let now = 100 * DAY;
        let mut t = Tally::default();
        t.add("a", "x", 4, now - DAY);
        t.add("a", "y", 6, now - 90 * DAY);
        t.add("b", "z", 1, now);
        // 6 uses three months ago weigh less than 4 yesterday.
        assert_eq!(t.tools("a", now), ["x", "y"]);
        assert!(t.app("a", now) > t.app("b", now));
        assert_eq!(t.app("c", now), 0);
        assert!(t.tools("c", now).is_empty());
        t.add("a", "y", 10, now);
        assert_eq!(t.tools("a", now), ["y", "x"]);
    }

    #[test]
    fn a_tally_keeps_at_most_its_pairs_and_forgets_the_oldest() {
        let mut t = Tally::default();
        for i in 0..MAX_PAIRS as u64 {
            t.add("a", &format!("t{i}"), 1, 1_000 + i);
        }
        t.add("b", "new", 1, 1);
        assert_eq!(t.pairs, MAX_PAIRS);
        assert!(!t.has("a", "t0") && t.has("b", "new") && t.has("a", "t1"));
        // Counting again what is there forgets nothing.
        t.add("b", "new", 1, 2);
        assert_eq!(t.pairs, MAX_PAIRS);
        assert!(t.has("a", "t1"));
    }

    #[tokio::test]
    async fn calls_are_counted_once_the_tally_is_read() {
        let usage = Usage::new(None);
        usage.note("agent@stdio", None, "a", "x", 5);
        let tally = usage.of("agent@stdio", None).await;
        assert_eq!(
            tally.lock().unwrap().app("a", 5),
            0,
            "not read then: the history has it"
        );
        usage.note("agent@stdio", None, "a", "x", 5);
        usage.note("other@stdio", None, "a", "x", 5);
        assert_eq!(tally.lock().unwrap().app("a", 5), 1000);
        let bob = usage.of("agent@stdio", Some("bob")).await;
        assert_eq!(
            bob.lock().unwrap().app("a", 5),
            0,
            "a person is a client of its own"
        );
    }
}
