//! A downstream server's resource updates (the gateway's `resource_updated` event):
//! watching one resource subscribes to it on the server, and the watch's end unsubscribes.
//!
//! A server of 2026-07-28 announces updates on a `subscriptions/listen` stream whose
//! filter names the resource: each watch holds one such stream, and dropping it cancels
//! the request. A server of an earlier revision takes `resources/subscribe` and sends
//! `notifications/resources/updated` on the session; the [`Handler`](super::Handler)
//! passes each to the watches of its URI, and the last watch of a URI to go sends
//! `resources/unsubscribe`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use rmcp::model::{ServerNotification, SubscribeRequestParams, SubscriptionFilter};
use serde_json::json;
use tokio::sync::broadcast;

use super::Connection;
use crate::exec::EventStream;

/// How long subscribing may take.
const SUBSCRIBE_DEADLINE: Duration = Duration::from_secs(10);

/// Updates a watch may be behind before it skips some (each one only says "changed").
const BACKLOG: usize = 16;

/// The resources watched on a session of an earlier revision: each URI's watches.
#[derive(Debug, Clone, Default)]
pub(super) struct Watched(Arc<Mutex<HashMap<String, Subscribed>>>);

/// One resource subscribed to on the server: where its updates go, and whether the
/// server took the subscription (`None` while it is asked; the watches that come meanwhile
/// wait for the answer).
#[derive(Debug)]
struct Subscribed {
    tx: broadcast::Sender<()>,
    taken: tokio::sync::watch::Receiver<Option<bool>>,
}

impl Watched {
    /// The server says `uri` changed.
    pub(super) fn updated(&self, uri: &str) {
        if let Some(s) = self.0.lock().expect("watched lock").get(uri) {
            let _ = s.tx.send(());
        }
    }
}

/// The event's data: the resource that changed.
fn data(uri: &str) -> serde_json::Value {
    json!({ "uri": uri })
}

impl Connection {
    /// Each update of the server's resource `uri`, from now on, until the stream is
    /// dropped (or the connection ends). `Err` when the server does not offer
    /// subscriptions or refuses this one: the reason, without secrets.
    // resources/subscribe is how servers before 2026-07-28 take subscriptions.
    #[allow(deprecated)]
    pub(in crate::exec::mcp) async fn watch(&self, uri: &str) -> Result<EventStream, String> {
        let info = self
            .service
            .peer_info()
            .ok_or("the server has not finished its handshake")?;
        let subscribes = info
            .capabilities
            .resources
            .as_ref()
            .and_then(|r| r.subscribe)
            .unwrap_or(false);
        if !subscribes {
            return Err(
                "the server does not offer resource subscriptions (its capabilities have no `resources.subscribe`)"
                    .to_owned(),
            );
        }
        let peer = self.service.peer().clone();
        let scrub = |why: String| crate::text::scrub(&why, &self.secrets);
        if !info.protocol_version.has_initialize() {
            let mut filter = SubscriptionFilter::new();
            filter.resource_subscriptions = Some(vec![uri.to_owned()]);
            let subscription = tokio::time::timeout(SUBSCRIBE_DEADLINE, peer.listen(filter))
                .await
                .map_err(|_| "the server did not take the subscription within 10 s".to_owned())?
                .map_err(|e| scrub(format!("the server refused the subscription: {e}")))?;
            let uri = uri.to_owned();
            let updates = futures_util::stream::unfold(subscription, |mut s| async move {
                loop {
                    match s.next().await {
                        Ok(Some(ServerNotification::ResourceUpdatedNotification(n))) => {
                            return Some((n.params.uri, s));
                        }
                        Ok(Some(_)) => {}
                        Ok(None) | Err(_) => return None,
                    }
                }
            })
            .filter(move |updated| std::future::ready(*updated == uri))
            .map(|uri| data(&uri))
            .take_until(closed(peer));
            return Ok(Box::pin(updates));
        }
        let (rx, asking, mut taken) = {
            let mut watched = self.watched.0.lock().expect("watched lock");
            match watched.get(uri) {
                Some(s) => (s.tx.subscribe(), None, s.taken.clone()),
                None => {
                    let (tx, rx) = broadcast::channel(BACKLOG);
                    let (ask, taken) = tokio::sync::watch::channel(None);
                    let subscribed = Subscribed {
                        tx,
                        taken: taken.clone(),
                    };
                    watched.insert(uri.to_owned(), subscribed);
                    (rx, Some(ask), taken)
                }
            }
        };
        let mut watch = Watch {
            rx: Some(rx),
            uri: uri.to_owned(),
            watched: self.watched.clone(),
            peer: peer.clone(),
            unsubscribe: true,
        };
        if let Some(ask) = asking {
            let subscribed = tokio::time::timeout(
                SUBSCRIBE_DEADLINE,
                peer.subscribe(SubscribeRequestParams::new(uri)),
            )
            .await;
            let refused = match subscribed {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(scrub(format!("the server refused the subscription: {e}"))),
                Err(_) => Some("the server did not take the subscription within 10 s".into()),
            };
            let _ = ask.send(Some(refused.is_none()));
            if let Some(why) = refused {
                // Forgotten, so that a later watch asks the server again.
                self.watched.0.lock().expect("watched lock").remove(uri);
                watch.unsubscribe = false;
                return Err(why);
            }
        } else {
            // Another watch asked the server: its answer is this one's too.
            let answered = tokio::time::timeout(
                SUBSCRIBE_DEADLINE + Duration::from_secs(1),
                taken.wait_for(Option::is_some),
            )
            .await;
            if !matches!(answered, Ok(Ok(ref t)) if **t == Some(true)) {
                watch.unsubscribe = false;
                return Err("the server did not take the subscription".into());
            }
        }
        let uri = uri.to_owned();
        let updates = futures_util::stream::unfold(watch, |mut watch| async move {
            let rx = watch.rx.as_mut()?;
            match rx.recv().await {
                // Behind: one "changed" stands for those skipped.
                Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => Some(((), watch)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
        .map(move |()| data(&uri))
        .take_until(closed(peer));
        Ok(Box::pin(updates))
    }
}

/// Resolves when the connection behind `peer` has closed (the server exited or hung up):
/// a watch ends with its connection, so that its listeners hear the end rather than
/// nothing (a restarted server holds no subscription).
async fn closed(peer: rmcp::service::Peer<rmcp::RoleClient>) {
    while !peer.is_transport_closed() {
        tokio::time::sleep(CLOSED_POLL).await;
    }
}

/// How often a watch looks whether its connection has closed.
const CLOSED_POLL: Duration = Duration::from_millis(250);

/// One watch of a resource on a session of an earlier revision; the last one of its URI
/// to be dropped unsubscribes.
struct Watch {
    rx: Option<broadcast::Receiver<()>>,
    uri: String,
    watched: Watched,
    peer: rmcp::service::Peer<rmcp::RoleClient>,
    /// The server took the subscription (or another watch's).
    unsubscribe: bool,
}

impl Drop for Watch {
    // resources/unsubscribe is how servers before 2026-07-28 end subscriptions.
    #[allow(deprecated)]
    fn drop(&mut self) {
        drop(self.rx.take());
        let mut watched = self.watched.0.lock().expect("watched lock");
        let last = watched
            .get(&self.uri)
            .is_some_and(|s| s.tx.receiver_count() == 0);
        if !last {
            return;
        }
        watched.remove(&self.uri);
        if !self.unsubscribe {
            return;
        }
        let (peer, uri) = (self.peer.clone(), std::mem::take(&mut self.uri));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let params = rmcp::model::UnsubscribeRequestParams::new(uri);
                let _ = tokio::time::timeout(SUBSCRIBE_DEADLINE, peer.unsubscribe(params)).await;
            });
        }
    }
}
