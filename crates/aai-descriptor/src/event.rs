//! An app's events (descriptor `events`, our extension): what it announces that a client
//! may subscribe to and a script may wait for. A D-Bus app's event is one of its signals,
//! or a change of one of its properties:
//!
//! ```json
//! "events": [
//!   {"name": "action", "description": "The user clicked an action", "signal": "ActionInvoked"},
//!   {"name": "track_changed", "description": "Another track plays", "property": "Metadata"}
//! ]
//! ```
//!
//! `signal` is a member of the binding's interface (or of `interface`); its arguments are
//! the event's data, as a JSON array. `property` is a property of the binding's interface
//! (or of `interface`), watched through `org.freedesktop.DBus.Properties.PropertiesChanged`;
//! its new value is the event's data.

use serde::Serialize;

use crate::dialect::common::{DbusName, check_dbus_name};
use crate::read::Obj;

/// One event of an app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Its name, unique within the binding.
    pub name: String,
    /// What it means.
    pub description: String,
    /// Where it comes from.
    pub source: EventSource,
}

/// Where an event comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum EventSource {
    /// A D-Bus signal of the app's object.
    DbusSignal {
        /// The signal's name.
        member: String,
        /// Its interface, when not the binding's.
        #[serde(skip_serializing_if = "Option::is_none")]
        interface: Option<String>,
    },
    /// A change of one D-Bus property of the app's object.
    DbusProperty {
        /// The property's name.
        property: String,
        /// Its interface, when not the binding's.
        #[serde(skip_serializing_if = "Option::is_none")]
        interface: Option<String>,
    },
    /// An update of one resource of a downstream MCP server. Never read from a
    /// descriptor: the gateway offers it for every MCP server (`resource_updated`, the
    /// resource named when listening).
    McpResource {
        /// The resource's URI, as the server names it.
        uri: String,
    },
}

impl Event {
    /// What tells this event apart from the app's others while it is listened to: its
    /// name, and for a resource update the resource.
    pub fn topic(&self) -> String {
        match &self.source {
            EventSource::McpResource { uri } => format!("{} {uri}", self.name),
            _ => self.name.clone(),
        }
    }
}

/// Most events one binding may declare.
const MAX_EVENTS: usize = 64;

/// Reads the root's `events`, for a binding whose executor is D-Bus (`dbus`); any other
/// executor has none to offer yet, and says so.
pub(crate) fn read(root: &mut Obj<'_>, dbus: bool) -> Vec<Event> {
    let sink = root.sink();
    let Some(array) = root.opt_array("events") else {
        return Vec::new();
    };
    if !dbus {
        sink.error(
            array.pointer().to_owned(),
            "`events` are D-Bus signals and property changes: only a `dbus` app has them",
        );
        return Vec::new();
    }
    if array.len() > MAX_EVENTS {
        sink.error(
            array.pointer().to_owned(),
            format!(
                "{} events; an app may declare at most {MAX_EVENTS}",
                array.len()
            ),
        );
        return Vec::new();
    }
    let mut events: Vec<Event> = Vec::with_capacity(array.len());
    for (_, mut obj) in array.objects() {
        if let Some(event) = one(&mut obj) {
            if events.iter().any(|e| e.name == event.name) {
                sink.error(
                    obj.at("name"),
                    format!("duplicate event name `{}`", event.name),
                );
                continue;
            }
            events.push(event);
        }
    }
    events
}

fn one(obj: &mut Obj<'_>) -> Option<Event> {
    let sink = obj.sink();
    let name = obj.req_text("name")?;
    if name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        sink.error(
            obj.at("name"),
            format!("event name `{name}` must be 1-64 characters of letters, digits, `_`, `-` and `.` (it is part of a resource URI)"),
        );
        return None;
    }
    let description = obj.opt_str("description").unwrap_or_default().to_owned();
    let interface = obj.opt_text("interface").map(str::to_owned);
    if let Some(i) = &interface
        && !check_dbus_name(sink, &obj.at("interface"), DbusName::Interface, i)
    {
        return None;
    }
    let source = match (obj.opt_text("signal"), obj.opt_text("property")) {
        (Some(member), None) => {
            check_dbus_name(sink, &obj.at("signal"), DbusName::Member, member).then_some(())?;
            EventSource::DbusSignal {
                member: member.to_owned(),
                interface,
            }
        }
        (None, Some(property)) => {
            check_dbus_name(sink, &obj.at("property"), DbusName::Member, property).then_some(())?;
            EventSource::DbusProperty {
                property: property.to_owned(),
                interface,
            }
        }
        (both, _) => {
            sink.error(
                obj.pointer().to_owned(),
                if both.is_some() {
                    "an event is either a `signal` or a `property` change, not both"
                } else {
                    "missing required field `signal` (a D-Bus signal) or `property` (a D-Bus property whose changes are the event)"
                },
            );
            return None;
        }
    };
    Some(Event {
        name: name.to_owned(),
        description,
        source,
    })
}
