//! `subscriptions/listen` (MCP 2026-07-28): the stateless revision's way to hear of list
//! changes. A client opens one long request naming what it wants (`toolsListChanged`,
//! `resourcesListChanged`); rmcp acknowledges it, and [`Streams::listen`] sends a change
//! notification on it each time what agents see changes, until the client cancels it or
//! the gateway stops (then the request ends with its final result).
//!
//! Sessions of earlier revisions hear of changes through `Server::follow_changes` instead.
//! At most [`MAX_STREAMS`] streams are open at once per listener; more are refused.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{ErrorCode, SubscriptionFilter};
use rmcp::service::{SubscriptionContext, SubscriptionSendError};
use tokio::sync::broadcast::error::RecvError;

use crate::gateway::Handle;

/// Most `subscriptions/listen` streams one listener keeps open at once.
pub(super) const MAX_STREAMS: usize = 64;

/// How long an answer that follows a change (`web_discover`'s guide) waits for the open
/// streams to announce it.
const ANNOUNCE_WAIT: Duration = Duration::from_secs(2);

/// What the gateway sends on a stream: the tool and resource lists change (prompts do
/// not; it declares none), and the updates of the event and downstream resources `requested`
/// names ([`super::events`]), at most [`MAX_RESOURCES`] of them.
pub(super) fn accepted(
    requested: &SubscriptionFilter,
    subscribable: impl Fn(&str) -> bool,
) -> SubscriptionFilter {
    let mut accepted = SubscriptionFilter::builder()
        .tools_list_changed()
        .resources_list_changed()
        .build();
    let resources: Vec<String> = requested
        .resource_subscriptions
        .iter()
        .flatten()
        .filter(|uri| subscribable(uri))
        .take(MAX_RESOURCES)
        .cloned()
        .collect();
    if !resources.is_empty() {
        accepted.resource_subscriptions = Some(resources);
    }
    accepted
}

/// Most resources one stream may name.
const MAX_RESOURCES: usize = 64;

/// The open streams of one listener (stdio, or one HTTP listener): each one's newest
/// announced change generation.
#[derive(Debug, Default)]
pub(super) struct Streams {
    open: Mutex<HashMap<u64, u64>>,
    next: std::sync::atomic::AtomicU64,
    announced: tokio::sync::Notify,
}

/// A stream's place in [`Streams`], given back when it ends.
struct Slot<'a> {
    streams: &'a Streams,
    id: u64,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.streams
            .open
            .lock()
            .expect("streams lock")
            .remove(&self.id);
        self.streams.announced.notify_waiters();
    }
}

impl Streams {
    /// Takes a place for a stream that has heard of everything up to `generation`; `None`
    /// when [`MAX_STREAMS`] are open.
    fn open(&self, generation: u64) -> Option<Slot<'_>> {
        let mut open = self.open.lock().expect("streams lock");
        if open.len() >= MAX_STREAMS {
            return None;
        }
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        open.insert(id, generation);
        Some(Slot { streams: self, id })
    }

    fn announced(&self, slot: &Slot<'_>, generation: u64) {
        if let Some(g) = self.open.lock().expect("streams lock").get_mut(&slot.id) {
            *g = generation;
        }
        self.announced.notify_waiters();
    }

    /// Waits (at most [`ANNOUNCE_WAIT`]) until every open stream has announced
    /// `generation`: an answer that names a new app comes after the news of it.
    pub(super) async fn announced_all(&self, generation: u64) {
        let wait = async {
            loop {
                let notified = self.announced.notified();
                if self
                    .open
                    .lock()
                    .expect("streams lock")
                    .values()
                    .all(|&g| g >= generation)
                {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(ANNOUNCE_WAIT, wait).await;
    }

    /// Runs one stream: a notification per change (the tool list's only when `tools`: a
    /// `search` listing never changes) until the client cancels, goes away, or the
    /// gateway stops.
    pub(super) async fn listen(
        &self,
        gateway: &Handle,
        context: SubscriptionContext,
        tools: impl Fn() -> bool,
    ) -> Result<(), McpError> {
        let mut changes = gateway.subscribe();
        let Some(slot) = self.open(gateway.generation()) else {
            return Err(McpError::new(
                ErrorCode(-32000),
                format!(
                    "{MAX_STREAMS} subscriptions are open on this server; cancel one or retry later"
                ),
                None,
            ));
        };
        let sink = context.sink();
        let wanted = sink.accepted().clone();
        let mut told = gateway.generation();
        loop {
            let generation = tokio::select! {
                change = changes.recv() => match change {
                    Ok(generation) => generation,
                    Err(RecvError::Lagged(_)) => gateway.generation(),
                    Err(RecvError::Closed) => return Ok(()),
                },
                () = context.cancelled() => return Ok(()),
                () = gateway.stopping() => return Ok(()),
            };
            if generation <= told {
                continue;
            }
            told = generation;
            let mut sent = Ok(());
            if wanted.tools_list_changed == Some(true) && tools() {
                sent = sink.notify_tool_list_changed().await;
            }
            if sent.is_ok() && wanted.resources_list_changed == Some(true) {
                sent = sink.notify_resource_list_changed().await;
            }
            match sent {
                Ok(()) => self.announced(&slot, generation),
                Err(SubscriptionSendError::SubscriptionClosed) => return Ok(()),
                Err(e) => {
                    tracing::debug!("a list change was not delivered on a subscription: {e}");
                    return Ok(());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn at_most_max_streams_are_open_and_a_closed_one_frees_its_place() {
        let streams = Streams::default();
        let slots: Vec<_> = (0..MAX_STREAMS)
            .map(|_| streams.open(0).expect("a place"))
            .collect();
        assert!(streams.open(0).is_none(), "one past the cap is refused");
        drop(slots);
        assert!(streams.open(0).is_some());
    }

    #[tokio::test]
    async fn an_answer_waits_for_every_open_stream_to_announce_but_not_forever() {
        let streams = Arc::new(Streams::default());
        // No stream: nothing to wait for.
        streams.announced_all(5).await;
        let slot = streams.open(3).unwrap();
        let waiting = tokio::spawn({
            let streams = streams.clone();
            async move { streams.announced_all(5).await }
        });
        tokio::task::yield_now().await;
        streams.announced(&slot, 4);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "4 is not yet 5");
        streams.announced(&slot, 5);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("released once announced")
            .unwrap();
        // A stream that never announces holds an answer back for ANNOUNCE_WAIT at most.
        tokio::time::timeout(ANNOUNCE_WAIT * 5, streams.announced_all(6))
            .await
            .expect("given up after ANNOUNCE_WAIT");
    }
}
