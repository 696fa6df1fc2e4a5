//! A D-Bus app's events (descriptor `events`): the signals that match one event, as JSON.
//!
//! A `signal` event matches that signal of the app's object: sender the app's bus name,
//! its object path, the interface (the binding's unless the event names one) and member;
//! its data is the signal's arguments (one → it, several → an array, as replies are read).
//! A `property` event matches `org.freedesktop.DBus.Properties.PropertiesChanged` of the
//! object for the interface, and fires when the property is among the changed ones (its
//! data: the new value) or the invalidated ones (its data: `null`).

use aai_descriptor::{Dbus, EventSource};
use futures_util::StreamExt as _;
use serde_json::Value as Json;
use zbus::MatchRule;

use super::{DbusExecutor, Error, convert, reply_json};
use crate::exec::EventStream as Events;

const PROPERTIES: &str = "org.freedesktop.DBus.Properties";

impl DbusExecutor {
    /// The data of each `source` event of `target`, from now on. The match is on the bus
    /// as long as the stream lives.
    pub(crate) async fn events(
        &self,
        target: &Dbus,
        source: &EventSource,
    ) -> Result<Events, Error> {
        let conn = self.connection(target.bus).await?.clone();
        let (interface, member, property) = match source {
            EventSource::DbusSignal { member, interface } => (
                interface
                    .clone()
                    .unwrap_or_else(|| target.interface.clone()),
                member.clone(),
                None,
            ),
            EventSource::McpResource { .. } => {
                return Err(Error::Body(
                    "a resource update is an MCP server's event, not a D-Bus one".into(),
                ));
            }
            EventSource::DbusProperty {
                property,
                interface,
            } => (
                PROPERTIES.to_owned(),
                "PropertiesChanged".to_owned(),
                Some((
                    interface
                        .clone()
                        .unwrap_or_else(|| target.interface.clone()),
                    property.clone(),
                )),
            ),
        };
        let bad = |e: zbus::Error| Error::Body(format!("the event's match rule: {e}"));
        let mut rule = MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(target.service.as_str())
            .and_then(|b| b.path(target.object_path.as_str()))
            .and_then(|b| b.interface(interface.as_str()))
            .and_then(|b| b.member(member.as_str()))
            .map_err(bad)?;
        if let Some((watched, _)) = &property {
            rule = rule.add_arg(watched.as_str()).map_err(bad)?;
        }
        let rule = rule.build();
        let stream = zbus::MessageStream::for_match_rule(rule, &conn, Some(64))
            .await
            .map_err(|e| Error::NoBus {
                bus: match target.bus {
                    aai_descriptor::Bus::Session => "session",
                    aai_descriptor::Bus::System => "system",
                },
                why: e.to_string(),
            })?;
        let events = stream.filter_map(move |msg| {
            let data = msg.ok().and_then(|msg| match &property {
                None => reply_json(&msg).ok(),
                Some((_, name)) => changed(&msg, name),
            });
            std::future::ready(data)
        });
        Ok(Box::pin(events))
    }
}

/// `name`'s new value in a `PropertiesChanged` message (`null` when it was invalidated),
/// or `None` when it did not change.
fn changed(msg: &zbus::Message, name: &str) -> Option<Json> {
    type Changed<'a> = (
        String,
        std::collections::HashMap<String, zbus::zvariant::OwnedValue>,
        Vec<String>,
    );
    let (_, values, invalidated): Changed<'_> = msg.body().deserialize().ok()?;
    if let Some(value) = values.get(name) {
        return Some(convert::to_json(value));
    }
    invalidated.iter().any(|p| p == name).then_some(Json::Null)
}
