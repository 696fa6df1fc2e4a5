//! The session bus as a discovery source (Linux): which well-known names exist (for the
//! built-in apps and `--discover`), their owners coming and going (hot reload), and the
//! introspection walk that `--discover` turns into descriptors. Nothing here calls an
//! app's methods; that is the D-Bus executor's job.

use aai_author::dbus::{Interface, Object};
use zbus::Connection;

const DBUS: &str = "org.freedesktop.DBus";
const DBUS_PATH: &str = "/org/freedesktop/DBus";

/// The session bus's owned well-known names and activatable names (for built-in apps
/// and `--discover`); empty when there is no session bus.
pub(crate) async fn session_names() -> Vec<String> {
    let Ok(conn) = Connection::session().await else {
        return Vec::new();
    };
    let mut names: Vec<String> = Vec::new();
    for method in ["ListNames", "ListActivatableNames"] {
        if let Ok(reply) = conn
            .call_method(Some(DBUS), DBUS_PATH, Some(DBUS), method, &())
            .await
            && let Ok(list) = reply.body().deserialize::<Vec<String>>()
        {
            names.extend(list.into_iter().filter(|n| !n.starts_with(':')));
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Interfaces every object has; not worth describing.
const STANDARD: &[&str] = &[
    "org.freedesktop.DBus.Properties",
    "org.freedesktop.DBus.Introspectable",
    "org.freedesktop.DBus.Peer",
    "org.freedesktop.DBus.ObjectManager",
];

/// Walks the object tree of `service` on the session bus (at most `max_objects`), without
/// starting anything: the name must already have an owner.
pub(crate) async fn describe_service(
    service: &str,
    max_objects: usize,
) -> Result<Vec<Object>, zbus::Error> {
    let mut out = Vec::new();
    for Introspected { path, node, .. } in introspect_tree(service, max_objects).await? {
        let interfaces: Vec<Interface> = node
            .interfaces()
            .iter()
            .filter(|i| !STANDARD.contains(&i.name().as_str()))
            .map(|i| Interface {
                name: i.name().to_string(),
                methods: i
                    .methods()
                    .iter()
                    .map(|m| {
                        let args = m
                            .args()
                            .iter()
                            .filter(|a| !matches!(a.direction(), Some(zbus_xml::ArgDirection::Out)))
                            .map(|a| (a.name().map(str::to_owned), a.ty().to_string()))
                            .collect();
                        (m.name().to_string(), args)
                    })
                    .collect(),
                properties: i
                    .properties()
                    .iter()
                    .map(|p| (p.name().to_string(), p.ty().to_string(), p.access().write()))
                    .collect(),
            })
            .collect();
        if !interfaces.is_empty() {
            out.push(Object { path, interfaces });
        }
    }
    Ok(out)
}

/// Each object of `service` that has interfaces of its own (at most `max_objects`), depth
/// first from `/`. Nothing is started.
pub(crate) async fn introspect_tree(
    service: &str,
    max_objects: usize,
) -> Result<Vec<Introspected>, zbus::Error> {
    let conn = Connection::session().await?;
    let mut todo = vec!["/".to_owned()];
    let mut out = Vec::new();
    while let Some(path) = todo.pop() {
        if out.len() >= max_objects {
            break;
        }
        let reply = conn
            .call_method(
                Some(service),
                path.as_str(),
                Some("org.freedesktop.DBus.Introspectable"),
                "Introspect",
                &(),
            )
            .await;
        let Ok(reply) = reply else { continue };
        let Ok(xml) = reply.body().deserialize::<String>() else {
            continue;
        };
        let Ok(node) = zbus_xml::Node::from_reader(xml.as_bytes()) else {
            continue;
        };
        for child in node.nodes().iter().rev() {
            if let Some(name) = child.name() {
                let base = path.trim_end_matches('/');
                todo.push(format!("{base}/{name}"));
            }
        }
        if node
            .interfaces()
            .iter()
            .any(|i| !STANDARD.contains(&i.name().as_str()))
        {
            out.push(Introspected { path, xml, node });
        }
    }
    Ok(out)
}

/// One object of a service, as it describes itself.
#[derive(Debug)]
pub(crate) struct Introspected {
    /// Its object path.
    pub path: String,
    /// Its introspection XML, as the service sent it.
    pub xml: String,
    /// The same, parsed.
    pub node: zbus_xml::Node<'static>,
}

/// Calls `changed` whenever a name for which `watched` is true gets or loses its owner on
/// the session bus (a media player starting, a notification daemon stopping). Returns when
/// the bus goes away; returns at once when there is no session bus.
pub(crate) async fn watch_names(watched: fn(&str) -> bool, changed: impl Fn()) {
    use futures_util::StreamExt;
    let Ok(conn) = Connection::session().await else {
        return;
    };
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .sender(DBUS)
        .and_then(|b| b.interface(DBUS))
        .and_then(|b| b.member("NameOwnerChanged"))
        .map(|b| b.build());
    let Ok(rule) = rule else { return };
    let Ok(mut stream) = zbus::MessageStream::for_match_rule(rule, &conn, None).await else {
        return;
    };
    while let Some(Ok(msg)) = stream.next().await {
        if let Ok((name, _, _)) = msg.body().deserialize::<(String, String, String)>()
            && watched(&name)
        {
            changed();
        }
    }
}

/// The session bus's owned well-known names (not activatable ones).
pub(crate) async fn owned_names() -> Result<Vec<String>, zbus::Error> {
    let conn = Connection::session().await?;
    let reply = conn
        .call_method(Some(DBUS), DBUS_PATH, Some(DBUS), "ListNames", &())
        .await?;
    let mut names: Vec<String> = reply.body().deserialize()?;
    names.retain(|n| !n.starts_with(':'));
    names.sort();
    Ok(names)
}
