//! Listening to an app's event ([`crate::events`]) as a caller: the app in its view, the
//! event one the app declares, and consent asked as for a call, for the tool
//! `@event/<name>` (an "always" answer allows that event for that caller).

use super::{Origin, Pipeline, not_served};
use crate::consent::Question;
use crate::error::GatewayError;
use crate::events::Feed;
use crate::telemetry;

/// The consent tool name of listening to `event`.
pub(crate) fn consent_tool(event: &str) -> String {
    format!("{}{event}", crate::consent::EVENT)
}

impl Pipeline {
    /// A listener of `event` of `app` for `origin`'s caller, from now on.
    pub(crate) async fn listen(
        &self,
        app: &str,
        event: &str,
        origin: &Origin,
    ) -> Result<Feed, GatewayError> {
        let snapshot = self.view(self.snapshot().await, &origin.caller);
        let entry = snapshot
            .find(app)
            .ok_or_else(|| not_served(&snapshot, app, self.settings.os))?;
        let events = &entry.binding().events;
        let declared = events.iter().find(|e| e.name == event).ok_or_else(|| {
            let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
            super::Error::NoEvent {
                app: entry.app.id.clone(),
                event: crate::text::excerpt(event, 200),
                hint: if names.is_empty() {
                    "it announces none".to_owned()
                } else {
                    format!("its events: {}", names.join(", "))
                },
            }
        })?;
        let question = Question {
            read_only: true,
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
        self.events
            .feed(&entry.app.id, &entry.binding().executor, declared)
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
        Some(self.events.recent(app, event))
    }
}
