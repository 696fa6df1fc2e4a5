//! Apps' events as MCP resources (docs/workflows.md, "Events"): `app:<id>/events/<name>`.
//!
//! Reading one gives the events kept (the last 16, while anybody listens). `resources/
//! subscribe` to one asks consent as a call would (for the tool `@event/<name>`), then sends
//! this session `notifications/resources/updated` for it as events fire: the first at once,
//! then at most one per [`COALESCE`] (the events in between are read from the resource).
//! `resources/unsubscribe`, or the session's end, stops it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{ResourceContents, ResourceUpdatedNotificationParam};
use rmcp::service::RequestContext;
use serde_json::json;

use super::Server;
use super::call::asking;

/// The shortest time between two notifications of one subscription.
pub(super) const COALESCE: Duration = Duration::from_millis(250);

/// Most event subscriptions one session holds.
const MAX_SUBSCRIPTIONS: usize = 64;

/// `app:<id>/events/<name>` → `(id, name)`.
pub(super) fn parse(uri: &str) -> Option<(&str, &str)> {
    let (app, event) = uri.strip_prefix("app:")?.split_once("/events/")?;
    (!app.is_empty() && !event.is_empty() && !event.contains('/')).then_some((app, event))
}

/// A session's event subscriptions by URI; they end with it.
#[derive(Debug, Default)]
pub(super) struct Subscriptions(Mutex<HashMap<String, tokio::task::AbortHandle>>);

impl Drop for Subscriptions {
    fn drop(&mut self) {
        for task in self.0.get_mut().expect("subscriptions lock").values() {
            task.abort();
        }
    }
}

fn not_found(uri: &str) -> McpError {
    McpError::resource_not_found(format!("no resource `{uri}`"), Some(json!({"uri": uri})))
}

impl Server {
    /// `resources/subscribe` of an event resource.
    pub(super) async fn subscribe_event(
        &self,
        uri: &str,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let (app, event) = parse(uri).ok_or_else(|| not_found(uri))?;
        if self.events.0.lock().expect("subscriptions lock").len() >= MAX_SUBSCRIPTIONS {
            return Err(McpError::invalid_request(
                format!(
                    "this session holds {MAX_SUBSCRIPTIONS} subscriptions, the most; unsubscribe from one first"
                ),
                None,
            ));
        }
        let (elicits, _) = asking(&ctx);
        let origin = self.session_origin(self.caller(&ctx), elicits, &ctx);
        let mut feed = match self.pipeline.listen(app, event, &origin).await {
            Ok(feed) => feed,
            Err(e) => {
                return Err(McpError::new(
                    rmcp::model::ErrorCode(e.code.number()),
                    e.message(),
                    Some(e.data()),
                ));
            }
        };
        let peer = ctx.peer.clone();
        let target = uri.to_owned();
        let task = tokio::spawn(async move {
            while feed.next().await.is_some() {
                // One notification, then a quiet spell; what fired meanwhile makes one more.
                loop {
                    let updated = ResourceUpdatedNotificationParam::new(target.clone());
                    if peer.notify_resource_updated(updated).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(COALESCE).await;
                    if feed.drain() == 0 {
                        break;
                    }
                }
            }
        });
        let mut subscriptions = self.events.0.lock().expect("subscriptions lock");
        if let Some(old) = subscriptions.insert(uri.to_owned(), task.abort_handle()) {
            old.abort();
        }
        Ok(())
    }

    /// `resources/unsubscribe` of an event resource (one not subscribed to is no error).
    pub(super) fn unsubscribe_event(&self, uri: &str) {
        if let Some(task) = self
            .events
            .0
            .lock()
            .expect("subscriptions lock")
            .remove(uri)
        {
            task.abort();
        }
    }

    /// `resources/read` of an event resource: the app's event, its description, and the
    /// events kept.
    pub(super) async fn read_event(
        &self,
        uri: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ResourceContents, McpError> {
        let (app, event) = parse(uri).ok_or_else(|| not_found(uri))?;
        let recent = self
            .pipeline
            .recent_events(app, event, &self.caller(ctx))
            .await
            .ok_or_else(|| not_found(uri))?;
        let body = json!({"app": app, "event": event, "recent": recent});
        Ok(ResourceContents::text(body.to_string(), uri).with_mime_type("application/json"))
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn event_uris() {
        assert_eq!(
            parse("app:org.mpris.MediaPlayer2.mpv/events/track_changed"),
            Some(("org.mpris.MediaPlayer2.mpv", "track_changed"))
        );
        for bad in [
            "app:/events/x",
            "app:a/events/",
            "app:a/events/x/y",
            "app:a/guide",
            "x:a/events/b",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
