//! Resources that change, and subscriptions to them (docs/workflows.md, "Events"):
//!
//! * an app's event, `app:<id>/events/<name>`: reading one gives the events kept (the last
//!   16, while anybody listens);
//! * a downstream MCP server's resource, `app:<id>/resources/<its URI>` (namespaced: two
//!   servers' `file:///x` never collide): reading one reads it from the server, as the
//!   app's `mcp.resources.read` tool does (consent, views, history); subscribing to one
//!   listens to the server's `resource_updated` of that URI, which subscribes to it on the
//!   server while anybody listens.
//!
//! `resources/subscribe` asks consent as a call would (for the tool `@event/<name>`), then
//! sends this session `notifications/resources/updated` for the URI as events fire: the
//! first at once, then at most one per [`COALESCE`] (what fired in between is read from the
//! resource). `resources/unsubscribe`, or the session's end, stops it.

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
use crate::events::Feed;
use crate::pipeline::RESOURCE_UPDATED;

/// The shortest time between two notifications of one subscription.
pub(super) const COALESCE: Duration = Duration::from_millis(250);

/// Most downstream resource templates listed in all.
const MAX_TEMPLATES: usize = 1_000;

/// Most event subscriptions one session holds.
const MAX_SUBSCRIPTIONS: usize = 64;

/// `app:<id>/events/<name>` → `(id, name)`.
pub(super) fn parse(uri: &str) -> Option<(&str, &str)> {
    let (app, event) = uri.strip_prefix("app:")?.split_once("/events/")?;
    let ok = !app.is_empty() && !app.contains('/') && !event.is_empty() && !event.contains('/');
    ok.then_some((app, event))
}

/// `app:<id>/resources/<uri>` → `(id, uri)`: a downstream server's resource.
pub(super) fn parse_resource(uri: &str) -> Option<(&str, &str)> {
    let (app, inner) = uri.strip_prefix("app:")?.split_once("/resources/")?;
    (!app.is_empty() && !app.contains('/') && !inner.is_empty()).then_some((app, inner))
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
    /// `resources/subscribe` of an event or downstream resource.
    pub(super) async fn subscribe_event(
        &self,
        uri: &str,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let full = {
            let held = self.events.0.lock().expect("subscriptions lock");
            held.len() >= MAX_SUBSCRIPTIONS && !held.contains_key(uri)
        };
        if full {
            return Err(McpError::invalid_request(
                format!(
                    "this session holds {MAX_SUBSCRIPTIONS} subscriptions, the most; unsubscribe from one first"
                ),
                None,
            ));
        }
        let feed = self.feed_for(uri, &ctx).await?;
        let peer = ctx.peer.clone();
        let target = uri.to_owned();
        let session_gone = {
            let peer = peer.clone();
            async move {
                while !peer.is_transport_closed() {
                    tokio::time::sleep(SESSION_POLL).await;
                }
            }
        };
        let task = tokio::spawn(relay(
            feed,
            move || {
                let (peer, target) = (peer.clone(), target.clone());
                async move {
                    let updated = ResourceUpdatedNotificationParam::new(target);
                    peer.notify_resource_updated(updated).await.is_ok()
                }
            },
            session_gone,
        ));
        let mut subscriptions = self.events.0.lock().expect("subscriptions lock");
        if let Some(old) = subscriptions.insert(uri.to_owned(), task.abort_handle()) {
            old.abort();
        }
        Ok(())
    }

    /// What a subscription to `uri` (an event or downstream resource) listens to, for the
    /// caller of `ctx`: consent asked as for a call.
    pub(super) async fn feed_for(
        &self,
        uri: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Feed, McpError> {
        let (app, event, inner) = match (parse(uri), parse_resource(uri)) {
            (Some((app, event)), _) => (app, event, None),
            (None, Some((app, inner))) => (app, RESOURCE_UPDATED, Some(inner)),
            (None, None) => return Err(not_found(uri)),
        };
        self.exact_app(app, ctx, uri).await?;
        let (elicits, _) = asking(ctx);
        let origin = self.session_origin(self.caller(ctx), elicits, ctx);
        self.pipeline
            .listen(app, event, inner, &origin)
            .await
            .map_err(wire)
    }

    /// `app` must be an app's id as the client sees it (not a name or another spelling:
    /// one resource, one URI).
    async fn exact_app(
        &self,
        app: &str,
        ctx: &RequestContext<RoleServer>,
        uri: &str,
    ) -> Result<(), McpError> {
        let snapshot = self
            .pipeline
            .view(self.gateway.snapshot().await, &self.caller(ctx));
        match snapshot.find(app) {
            Some(entry) if entry.app.id == app => Ok(()),
            Some(entry) => Err(McpError::resource_not_found(
                format!(
                    "no resource `{}`: name the app by its id, `{}`",
                    crate::text::excerpt(uri, 200),
                    entry.app.id
                ),
                Some(json!({"uri": uri})),
            )),
            // Not served to this client: the pipeline says so as for a call.
            None => Ok(()),
        }
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

    /// The resource templates of the downstream servers this client sees (listed in this
    /// run), each named for its app: `app:<id>/resources/<the server's template>`. At
    /// most [`MAX_TEMPLATES`] in all.
    pub(super) async fn downstream_templates(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> Vec<rmcp::model::ResourceTemplate> {
        let snapshot = self
            .pipeline
            .view(self.gateway.snapshot().await, &self.caller(ctx));
        let mcp = self.pipeline.executors().mcp();
        let mut out = Vec::new();
        for entry in &snapshot.entries {
            if !matches!(entry.binding().executor, aai_descriptor::Executor::Mcp(_)) {
                continue;
            }
            let id = &entry.app.id;
            for t in mcp.templates(id) {
                let text = |k: &str| t.get(k).and_then(serde_json::Value::as_str);
                let Some(template) = text("uriTemplate").filter(|u| !u.is_empty()) else {
                    continue;
                };
                let name = text("name").unwrap_or(template);
                let mut ours = rmcp::model::ResourceTemplate::new(
                    format!("app:{id}/resources/{template}"),
                    crate::text::excerpt(name, 200),
                );
                ours.description = text("description").map(|d| crate::text::excerpt(d, 500));
                ours.mime_type = text("mimeType").map(|m| crate::text::excerpt(m, 100));
                out.push(ours);
                if out.len() >= MAX_TEMPLATES {
                    return out;
                }
            }
        }
        out
    }

    /// `resources/read` of a downstream server's resource (`app:<id>/resources/<uri>`, or
    /// an interactive view `ui://<id>/<rest>`): read from the server through the app's
    /// `mcp.resources.read` tool, a call like any other; each content's URI named for the
    /// app as the one asked for.
    pub(super) async fn read_downstream(
        &self,
        uri: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Vec<ResourceContents>, McpError> {
        let (app, inner, naming) = if let Some((app, inner)) = parse_resource(uri) {
            let prefix = uri.strip_suffix(inner).unwrap_or(uri).to_owned();
            (app, inner.to_owned(), Naming::Prefix(prefix))
        } else if let Some((app, inner)) = crate::exec::mcp::ui::parse(uri) {
            (app, inner, Naming::View(app.to_owned()))
        } else {
            return Err(not_found(uri));
        };
        let inner = inner.as_str();
        self.exact_app(app, ctx, uri).await?;
        let (elicits, _) = asking(ctx);
        let origin = self.session_origin(self.caller(ctx), elicits, ctx);
        let outcome = self
            .pipeline
            .call(
                app,
                crate::exec::mcp::RESOURCES_TOOL,
                Some(json!({ "uri": inner })),
                ctx.ct.clone(),
                None,
                &origin,
            )
            .await
            .map_err(|e| {
                // A URI the server neither lists nor has a template for fails the tool's
                // schema: to the client that is a resource that does not exist.
                let field = e.extra.as_ref().and_then(|x| x.get("field"));
                if e.code == crate::error::Code::InvalidParams
                    && field.and_then(serde_json::Value::as_str) == Some("/uri")
                {
                    McpError::resource_not_found(
                        format!(
                            "no resource `{uri}`: the server lists no such resource, nor a template it fits"
                        ),
                        Some(json!({"uri": uri})),
                    )
                } else {
                    wire(e)
                }
            })?;
        let read = crate::rollback::value_of(&outcome).map_err(|failed| {
            McpError::internal_error(
                format!("the server could not read `{inner}`: {failed}"),
                None,
            )
        })?;
        let contents = read
            .get("contents")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let mut c = c.clone();
                // A content without a URI the client could use again is the one asked for.
                let own = c
                    .get("uri")
                    .and_then(serde_json::Value::as_str)
                    .filter(|u| usable_uri(u))
                    .unwrap_or(inner)
                    .to_owned();
                c["uri"] = json!(naming.name(&own));
                serde_json::from_value(c).ok()
            })
            .collect();
        Ok(contents)
    }
}

/// Tells of each event of `feed` with `notify` (false: the client is gone): one
/// notification, then a quiet spell of [`COALESCE`]; what fired meanwhile makes one more.
/// Ends when `gone` does (the client's session ended), or when the feed does (its app or
/// server went away: one last notification, so that the client reads the resource again
/// and can subscribe again).
pub(super) async fn relay<F, Sent>(
    mut feed: Feed,
    notify: F,
    gone: impl std::future::Future<Output = ()>,
) where
    F: Fn() -> Sent,
    Sent: std::future::Future<Output = bool>,
{
    let relayed = async {
        while feed.next().await.is_some() {
            loop {
                if !notify().await {
                    return;
                }
                tokio::time::sleep(COALESCE).await;
                if feed.drain() == 0 {
                    break;
                }
            }
        }
        notify().await;
    };
    tokio::select! {
        () = relayed => {}
        () = gone => {}
    }
}

/// A server's content URI the gateway passes on: not empty, at most 2,048 bytes, no
/// control characters.
fn usable_uri(uri: &str) -> bool {
    !uri.is_empty() && uri.len() <= 2_048 && !uri.chars().any(char::is_control)
}

/// How often a subscription looks whether its session has ended.
const SESSION_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether `uri` names something of `snapshot` a client may subscribe to: an event an
/// app has, or a resource of a downstream server (named by its id). Whether this client
/// sees it, and may, is asked when it is listened to.
pub(super) fn subscribable(snapshot: &crate::registry::Snapshot, uri: &str) -> bool {
    // Before the first scan nothing is known yet: the form decides, and listening says
    // the rest.
    if snapshot.entries.is_empty() {
        return parse(uri).is_some() || parse_resource(uri).is_some_and(|(_, u)| usable_uri(u));
    }
    let app = |id: &str| snapshot.find(id).filter(|e| e.app.id == id);
    if let Some((id, event)) = parse(uri) {
        return app(id).is_some_and(|e| e.binding().events.iter().any(|ev| ev.name == event));
    }
    parse_resource(uri).is_some_and(|(id, inner)| {
        app(id).is_some_and(|e| matches!(e.binding().executor, aai_descriptor::Executor::Mcp(_)))
            && usable_uri(inner)
    })
}

/// How a downstream server's resource URIs are named for the gateway's client.
enum Naming {
    /// `app:<id>/resources/` and the server's URI.
    Prefix(String),
    /// A view of app `<id>`: `ui://<id>/…`.
    View(String),
}

impl Naming {
    fn name(&self, own: &str) -> String {
        match self {
            Naming::Prefix(prefix) => format!("{prefix}{own}"),
            Naming::View(app) => {
                let view = crate::exec::mcp::ui::namespaced(app, &json!({ "resourceUri": own }));
                view["resourceUri"].as_str().unwrap_or(own).to_owned()
            }
        }
    }
}

/// A gateway error as the MCP error it is on the wire.
fn wire(e: crate::error::GatewayError) -> McpError {
    McpError::new(
        rmcp::model::ErrorCode(e.code.number()),
        e.message(),
        Some(e.data()),
    )
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn downstream_resource_uris() {
        use super::parse_resource;
        assert_eq!(
            parse_resource("app:com.example.notes/resources/file:///a/resources/b"),
            Some(("com.example.notes", "file:///a/resources/b"))
        );
        for bad in [
            "app:/resources/x",
            "app:a/resources/",
            "app:a/b/resources/x",
            "app:a/guide",
        ] {
            assert_eq!(parse_resource(bad), None, "{bad}");
        }
    }

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
