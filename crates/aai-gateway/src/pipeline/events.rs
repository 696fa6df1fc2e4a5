//! Listening to an app's event ([`crate::events`]) as a caller: the app in its view, the
//! event one the app declares, and consent asked as for a call, for the tool
//! `@event/<name>` (an "always" answer allows that event for that caller).

use aai_descriptor::{Event, EventSource, Executor};

use super::{Origin, Pipeline, not_served};
use crate::consent::Question;
use crate::error::GatewayError;
use crate::events::Feed;
use crate::telemetry;

/// The consent tool name of listening to `event`.
pub(crate) fn consent_tool(event: &str) -> String {
    format!("{}{event}", crate::consent::EVENT)
}

/// The event every downstream MCP server offers: one of its resources changed (the
/// resource named when listening).
pub(crate) const RESOURCE_UPDATED: &str = "resource_updated";

/// Most characters of a resource URI listened to.
const MAX_URI: usize = 2_048;

impl Pipeline {
    /// A listener of `event` of `app` for `origin`'s caller, from now on. `uri` names the
    /// resource of a downstream MCP server's `resource_updated`, and nothing else.
    pub(crate) async fn listen(
        &self,
        app: &str,
        event: &str,
        uri: Option<&str>,
        origin: &Origin,
    ) -> Result<Feed, GatewayError> {
        let snapshot = self.view(self.snapshot().await, &origin.caller);
        let entry = snapshot
            .find(app)
            .ok_or_else(|| not_served(&snapshot, app, self.settings.os))?;
        let binding = entry.binding();
        let declared = match (&binding.executor, event, uri) {
            (Executor::Mcp(_), RESOURCE_UPDATED, Some(uri)) => resource_event(uri)?,
            (Executor::Mcp(_), RESOURCE_UPDATED, None) => {
                return Err(invalid(
                    "`resource_updated` names a resource: give its `uri`",
                ));
            }
            (_, _, Some(_)) => {
                return Err(invalid(
                    "only a downstream MCP server's `resource_updated` takes a `uri`",
                ));
            }
            (executor, _, None) => {
                let events = &binding.events;
                let found = events.iter().find(|e| e.name == event);
                found.cloned().ok_or_else(|| {
                    let mut names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
                    if matches!(executor, Executor::Mcp(_)) {
                        names.push(RESOURCE_UPDATED);
                    }
                    super::Error::NoEvent {
                        app: entry.app.id.clone(),
                        event: crate::text::excerpt(event, 200),
                        hint: if names.is_empty() {
                            "it announces none".to_owned()
                        } else {
                            format!("its events: {}", names.join(", "))
                        },
                    }
                })?
            }
        };
        // Listening to a server starts it, as a call would: the question names what runs.
        let question = Question {
            read_only: true,
            start: self.start_to_name(entry),
            ..Question::for_call(
                &origin.caller,
                &entry.app.id,
                snapshot.name(entry),
                &consent_tool(event),
                &declared.description,
            )
        };
        let spans = telemetry::Call::start(None, None);
        self.asked(&question, origin, &spans).await?;
        let who = self.who(entry, &origin.caller);
        let (auth, secrets) = match &binding.executor {
            Executor::Mcp(_) => self.credentials(entry, &who, &origin.caller).await?,
            _ => (None, Vec::new()),
        };
        let opening = crate::exec::Opening {
            base_dir: super::base_dir(entry),
            auth,
            who,
            secrets,
        };
        self.events
            .feed(&entry.app.id, &binding.executor, &declared, &opening)
            .await
            .map_err(GatewayError::from)
    }

    /// The events kept of `event` of `app`, oldest first, when the caller may see the app
    /// (none while nobody listens).
    pub(crate) async fn recent_events(
        &self,
        app: &str,
        event: &str,
        caller: &crate::identity::Caller,
    ) -> Option<Vec<std::sync::Arc<crate::events::Fired>>> {
        let snapshot = self.view(self.snapshot().await, caller);
        let entry = snapshot.find(app).filter(|e| e.app.id == app)?;
        entry.binding().events.iter().find(|e| e.name == event)?;
        Some(self.events.recent(app, &self.who(entry, caller), event))
    }
}

/// `resource_updated` of the resource `uri`.
fn resource_event(uri: &str) -> Result<Event, GatewayError> {
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}' | '`')
    };
    if uri.is_empty() || uri.len() > MAX_URI || uri.chars().any(hidden) {
        return Err(invalid(
            "`uri` must be a resource's URI: not empty, at most 2,048 bytes, no control, direction or zero-width characters and no backquote",
        ));
    }
    Ok(Event {
        name: RESOURCE_UPDATED.to_owned(),
        description: format!(
            "Be told when the server's resource `{uri}` changes (the gateway subscribes to it on the server)"
        ),
        source: EventSource::McpResource {
            uri: uri.to_owned(),
        },
    })
}

fn invalid(detail: &str) -> GatewayError {
    super::Error::Invalid {
        detail: detail.to_owned(),
        field: "/uri".to_owned(),
    }
    .into()
}
