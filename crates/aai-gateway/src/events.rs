//! Apps' events (docs/workflows.md, "Events"): one feed per (app, event) while anybody
//! listens, shared by every listener — per person of the team when the app is reached with
//! each person's own sign-in (`Opening::who`), so nobody hears what another's reaches.
//!
//! The first listener of an event starts its source (a D-Bus match on the bus, through
//! the executors); the last one to go stops it. Each event that fires gets a number and the
//! time, and its data cut to [`MAX_DATA`] bytes of JSON; the last [`RECENT`] are kept for
//! reading (`resources/read` of the event's resource). A listener that falls more than
//! [`BACKLOG`] events behind skips the oldest and is told how many it missed: a flood of
//! signals costs a bounded amount of memory whoever listens.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use aai_descriptor::{Event, Executor};
use futures_util::StreamExt as _;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::exec::Executors;

/// Events a listener may be behind before it skips some.
const BACKLOG: usize = 64;
/// Events kept per feed for reading.
pub(crate) const RECENT: usize = 16;
/// Most bytes (as JSON) of one event's data; more is replaced by a note of its size.
pub(crate) const MAX_DATA: usize = 64 * 1024;

/// One event that fired.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Fired {
    /// Its number in this feed, from 1.
    pub seq: u64,
    /// When it arrived (Unix ms).
    pub at_ms: u64,
    /// What it carries (a signal's arguments, a property's new value).
    pub data: Value,
}

/// The feeds that are listened to.
#[derive(Debug)]
pub(crate) struct Hub {
    executors: Arc<Executors>,
    /// By (the app's store account for the listener's sign-in, the event's topic).
    topics: Mutex<HashMap<(String, String), Weak<Topic>>>,
}

/// One (app, event) feed while it has listeners.
#[derive(Debug)]
struct Topic {
    /// Taken when the source ends: its listeners then hear the end.
    tx: Arc<Mutex<Option<broadcast::Sender<Arc<Fired>>>>>,
    recent: Arc<Mutex<VecDeque<Arc<Fired>>>>,
    task: tokio::task::AbortHandle,
}

impl Drop for Topic {
    fn drop(&mut self) {
        // Nobody listens any more: the match leaves the bus with its stream.
        self.task.abort();
    }
}

/// A listener of one feed.
#[derive(Debug)]
pub(crate) struct Feed {
    /// Held: the feed's source runs while a listener does.
    _topic: Arc<Topic>,
    rx: broadcast::Receiver<Arc<Fired>>,
    /// Events skipped since the last one given (the listener was too slow).
    pub missed: u64,
}

impl Feed {
    /// The next event, or `None` when the source ended (the bus or the app went away).
    pub(crate) async fn next(&mut self) -> Option<Arc<Fired>> {
        loop {
            match self.rx.recv().await {
                Ok(fired) => return Some(fired),
                Err(broadcast::error::RecvError::Lagged(n)) => self.missed += n,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Takes the events waiting without waiting for more: how many there were.
    pub(crate) fn drain(&mut self) -> usize {
        let mut n = 0;
        loop {
            match self.rx.try_recv() {
                Ok(_) => n += 1,
                Err(broadcast::error::TryRecvError::Lagged(skipped)) => {
                    self.missed += skipped;
                    n += 1;
                }
                Err(_) => return n,
            }
        }
    }
}

impl Hub {
    /// A hub whose sources the executors open.
    pub(crate) fn new(executors: Arc<Executors>) -> Hub {
        Hub {
            executors,
            topics: Mutex::new(HashMap::new()),
        }
    }

    /// A listener of `event` of `app` (reached through `executor`), from now on; the
    /// first one starts the source.
    pub(crate) async fn feed(
        &self,
        app: &str,
        executor: &Executor,
        event: &Event,
        opening: &crate::exec::Opening<'_>,
    ) -> Result<Feed, crate::exec::Error> {
        let key = (
            crate::auth::store::account(app, &opening.who).into_owned(),
            event.topic(),
        );
        if let Some((topic, rx)) = self.live(&key) {
            return Ok(Feed {
                _topic: topic,
                rx,
                missed: 0,
            });
        }
        let mut source = self
            .executors
            .events(app, executor, &event.source, opening)
            .await?;
        let (tx, rx) = broadcast::channel(BACKLOG);
        let recent: Arc<Mutex<VecDeque<Arc<Fired>>>> = Arc::default();
        let tx = Arc::new(Mutex::new(Some(tx)));
        let (slot, kept) = (tx.clone(), recent.clone());
        let task = tokio::spawn(async move {
            let Some(sender) = slot.lock().expect("topic lock").clone() else {
                return;
            };
            let seq = AtomicU64::new(0);
            while let Some(data) = source.next().await {
                let fired = Arc::new(Fired {
                    seq: seq.fetch_add(1, Ordering::Relaxed) + 1,
                    at_ms: crate::history::now_ms(),
                    data: bounded(data),
                });
                {
                    let mut kept = kept.lock().expect("recent lock");
                    if kept.len() == RECENT {
                        kept.pop_front();
                    }
                    kept.push_back(fired.clone());
                }
                // No listener at this instant: kept for reading all the same.
                let _ = sender.send(fired);
            }
            // The source ended (the app or its connection went away): the listeners hear
            // the end, and the next listener starts the source again.
            slot.lock().expect("topic lock").take();
        });
        let topic = Arc::new(Topic {
            tx,
            recent,
            task: task.abort_handle(),
        });
        let mut topics = self.topics.lock().expect("topics lock");
        topics.retain(|_, t| t.strong_count() > 0);
        // Another listener started the same feed meanwhile: join it, drop ours.
        if let Some(other) = topics.get(&key).and_then(Weak::upgrade) {
            let joined = other
                .tx
                .lock()
                .expect("topic lock")
                .as_ref()
                .map(broadcast::Sender::subscribe);
            if let Some(rx) = joined {
                return Ok(Feed {
                    _topic: other,
                    rx,
                    missed: 0,
                });
            }
        }
        topics.insert(key, Arc::downgrade(&topic));
        Ok(Feed {
            _topic: topic,
            rx,
            missed: 0,
        })
    }

    /// The feed `key` while its source runs, and a listener of it.
    fn live(
        &self,
        key: &(String, String),
    ) -> Option<(Arc<Topic>, broadcast::Receiver<Arc<Fired>>)> {
        let topic = self
            .topics
            .lock()
            .expect("topics lock")
            .get(key)
            .and_then(Weak::upgrade)?;
        let rx = topic.tx.lock().expect("topic lock").as_ref()?.subscribe();
        Some((topic, rx))
    }

    /// The events kept of `event` of `app`, oldest first (none while nobody listens).
    pub(crate) fn recent(
        &self,
        app: &str,
        who: &crate::identity::Who,
        event: &str,
    ) -> Vec<Arc<Fired>> {
        self.live(&(
            crate::auth::store::account(app, who).into_owned(),
            event.to_owned(),
        ))
        .map(|(t, _)| {
            t.recent
                .lock()
                .expect("recent lock")
                .iter()
                .cloned()
                .collect()
        })
        .unwrap_or_default()
    }
}

/// `data`, or a note of its size when it is larger than [`MAX_DATA`] as JSON.
fn bounded(data: Value) -> Value {
    let bytes = serde_json::to_vec(&data).map_or(0, |v| v.len());
    if bytes <= MAX_DATA {
        data
    } else {
        serde_json::json!({"cut": true, "bytes": bytes})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_data_is_replaced_by_its_size() {
        assert_eq!(bounded(Value::from(3)), Value::from(3));
        let big = Value::String("x".repeat(MAX_DATA));
        assert_eq!(bounded(big)["cut"], Value::Bool(true));
    }
}
