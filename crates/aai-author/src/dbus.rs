//! `--discover`: find automatable apps on this system and write descriptors for them.
//!
//! On Linux: every well-known name on the session bus (the bus's own plumbing — portals,
//! accessibility, dconf, GVfs… — unless `--all`) is introspected (object tree from `/`,
//! standard interfaces left out) and turned into a platforms-form descriptor: the object
//! with the most members is the binding's object, and its public interface the binding's
//! (the one named like the service, else the one sharing most of its name, else the
//! first: dunst's `org.freedesktop.Notifications`, not its private
//! `org.dunstproject.cmd0`), its tools first; every method becomes a tool (snake_case name, JSON Schema from the D-Bus
//! signature, arguments matched by name), every property a read tool (and a `set_` tool
//! when writable), each with its own `interface`. Names that are only activatable are
//! listed but never started.
//!
//! The command line introspects the bus and writes the drafts ([`crate::plan`] decides
//! whether a file may be written).

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

/// A method's in-args: optional name and signature text.
pub type MethodArgs = Vec<(Option<String>, String)>;

/// One introspected object: its path and its interfaces (standard ones left out).
#[derive(Debug, Clone)]
pub struct Object {
    /// Object path.
    pub path: String,
    /// Its interfaces.
    pub interfaces: Vec<Interface>,
}

/// One interface of an introspected object.
#[derive(Debug, Clone)]
pub struct Interface {
    /// Interface name.
    pub name: String,
    /// Methods with their in-args.
    pub methods: Vec<(String, MethodArgs)>,
    /// Properties: name, signature, writable.
    pub properties: Vec<(String, String, bool)>,
}

/// Bus names that are desktop plumbing, not apps.
const PLUMBING: &[&str] = &[
    "org.freedesktop.DBus",
    "org.freedesktop.portal.",
    "org.freedesktop.impl.portal.",
    "org.a11y.",
    "org.gtk.vfs.",
    "org.gtk.Settings",
    "ca.desrt.dconf",
    "org.freedesktop.systemd1",
    "org.freedesktop.secrets",
    "org.freedesktop.Tracker",
    "org.gnome.keyring",
    "org.freedesktop.FileManager1",
    "org.freedesktop.ScreenSaver",
];

/// Whether `name` is plumbing.
pub fn is_plumbing(name: &str) -> bool {
    PLUMBING.iter().any(|p| {
        if p.ends_with('.') {
            name.starts_with(p)
        } else {
            name == *p || name.starts_with(&format!("{p}."))
        }
    })
}

/// JSON Schema for a D-Bus signature.
pub fn schema_for(sig: &str) -> Value {
    let Ok(s) = zvariant::Signature::try_from(sig) else {
        return json!({});
    };
    schema_of(&s)
}

fn schema_of(sig: &zvariant::Signature) -> Value {
    use zvariant::Signature as S;
    let int = |min: i128, max: i128| json!({"type": "integer", "minimum": min as f64, "maximum": max as f64});
    match sig {
        S::U8 => json!({"type": "integer", "minimum": 0, "maximum": 255}),
        S::Bool => json!({"type": "boolean"}),
        S::I16 => json!({"type": "integer", "minimum": i16::MIN, "maximum": i16::MAX}),
        S::U16 => json!({"type": "integer", "minimum": 0, "maximum": u16::MAX}),
        S::I32 => json!({"type": "integer", "minimum": i32::MIN, "maximum": i32::MAX}),
        S::U32 => json!({"type": "integer", "minimum": 0, "maximum": u32::MAX}),
        S::I64 => int(i64::MIN.into(), i64::MAX.into()),
        S::U64 => json!({"type": "integer", "minimum": 0}),
        S::F64 => json!({"type": "number"}),
        S::Str => json!({"type": "string"}),
        S::ObjectPath => json!({"type": "string", "pattern": "^/"}),
        S::Signature => json!({"type": "string"}),
        S::Variant => json!({}),
        S::Array(child) => json!({"type": "array", "items": schema_of(child)}),
        S::Dict { value, .. } => {
            json!({"type": "object", "additionalProperties": schema_of(value)})
        }
        S::Structure(fields) => {
            let items: Vec<Value> = fields.iter().map(schema_of).collect();
            json!({"type": "array", "items": items, "minItems": items.len(), "maxItems": items.len()})
        }
        _ => json!({}),
    }
}

/// `GetServerInformation` → `get_server_information`.
pub fn snake(name: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if i > 0 && (prev_lower || (next_lower && chars[i - 1].is_uppercase())) {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(*c);
        }
    }
    out
}

/// The binding's interface among an object's: the one named like the service (its public
/// API), else the one sharing the most leading name segments with the service, else the
/// first.
fn main_interface<'a>(service: &str, interfaces: &'a [Interface]) -> Option<&'a Interface> {
    let shared = |name: &str| {
        name.split('.')
            .zip(service.split('.'))
            .take_while(|(a, b)| a == b)
            .count()
    };
    interfaces
        .iter()
        .enumerate()
        .max_by_key(|(at, i)| (i.name == service, shared(&i.name), std::cmp::Reverse(*at)))
        .map(|(_, i)| i)
}

/// The descriptor for `service` described by `objects`; `None` when nothing to describe.
pub fn descriptor(service: &str, objects: &[Object]) -> Option<Value> {
    let primary = objects.iter().max_by_key(|o| {
        o.interfaces
            .iter()
            .map(|i| i.methods.len() + i.properties.len())
            .sum::<usize>()
    })?;
    let main = main_interface(service, &primary.interfaces)?;
    let main_iface = main.name.clone();
    let mut tools: Vec<Value> = Vec::new();
    let mut used: Vec<String> = Vec::new();
    let others = primary.interfaces.iter().filter(|i| i.name != main.name);
    for iface in std::iter::once(main).chain(others) {
        let short = iface
            .name
            .rsplit('.')
            .next()
            .unwrap_or(&iface.name)
            .to_lowercase();
        // Tool names must be unique: the interface's short name first, then a number
        // (two interfaces may share a short name: org.gtk.Application and
        // org.freedesktop.Application both have `Activate`).
        let mut unique = |base: String| {
            let mut name = base.clone();
            if used.contains(&name) {
                name = format!("{short}_{base}");
            }
            let mut n = 2;
            while used.contains(&name) {
                name = format!("{short}_{base}_{n}");
                n += 1;
            }
            used.push(name.clone());
            name
        };
        for (method, args) in &iface.methods {
            let mut props = Map::new();
            let mut required = Vec::new();
            for (i, (arg, sig)) in args.iter().enumerate() {
                let mut key = arg.clone().unwrap_or_else(|| format!("arg{i}"));
                if props.contains_key(&key) {
                    key = format!("{key}_{i}");
                }
                let mut s = schema_for(sig);
                if let Some(obj) = s.as_object_mut() {
                    obj.insert("description".into(), json!(format!("D-Bus `{sig}`")));
                }
                props.insert(key.clone(), s);
                required.push(key);
            }
            let mut tool = json!({
                "name": unique(snake(method)),
                "description": format!("Call {}.{method}", iface.name),
                "method": method,
                "parameters": {"type": "object", "properties": props, "required": required},
            });
            if iface.name != main_iface {
                tool["interface"] = json!(iface.name);
            }
            tools.push(tool);
        }
        for (prop, sig, writable) in &iface.properties {
            let mut read = json!({
                "name": unique(snake(prop)),
                "description": format!("Read the {prop} property (D-Bus `{sig}`)"),
                "property": prop,
                "parameters": {"type": "object", "properties": {}},
            });
            if iface.name != main_iface {
                read["interface"] = json!(iface.name);
            }
            tools.push(read);
            if *writable {
                let mut write = json!({
                    "name": unique(format!("set_{}", snake(prop))),
                    "description": format!("Set the {prop} property"),
                    "property": prop,
                    "access": "write",
                    "parameters": {"type": "object", "properties": {"value": schema_for(sig)}, "required": ["value"]},
                });
                if iface.name != main_iface {
                    write["interface"] = json!(iface.name);
                }
                tools.push(write);
            }
        }
    }
    if tools.is_empty() {
        return None;
    }
    let short = service.rsplit('.').next().unwrap_or(service);
    Some(json!({
        "schema_version": "1.0",
        "appId": service,
        "name": short,
        "description": format!("D-Bus service {service} (generated by aai-gateway --discover; edit freely)"),
        "version": "1.0",
        "platforms": {"linux": {
            "automation": "dbus",
            "service": service,
            "object": primary.path,
            "interface": main_iface,
            "tools": tools,
        }},
    }))
}

/// A one-line summary of a D-Bus descriptor: objects, tools.
pub fn summary(doc: &Value) -> String {
    let linux = &doc["platforms"]["linux"];
    let tools = linux["tools"].as_array().map_or(0, Vec::len);
    let mut s = String::new();
    let _ = write!(
        s,
        "{} tools on {} ({})",
        tools,
        linux["object"].as_str().unwrap_or(""),
        linux["interface"].as_str().unwrap_or("")
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_schemas() {
        assert_eq!(snake("GetServerInformation"), "get_server_information");
        assert_eq!(snake("PlayPause"), "play_pause");
        assert_eq!(snake("GetURLForID"), "get_url_for_id");
        assert_eq!(snake("ping"), "ping");
        assert_eq!(
            schema_for("a{sv}"),
            json!({"type": "object", "additionalProperties": {}})
        );
        assert_eq!(schema_for("(is)")["items"][1], json!({"type": "string"}));
        assert_eq!(schema_for("y")["maximum"], 255);
        assert!(is_plumbing("org.freedesktop.DBus"));
        assert!(is_plumbing("org.a11y.Bus"));
        assert!(is_plumbing("org.freedesktop.portal.Desktop"));
        assert!(!is_plumbing("org.freedesktop.Notifications"));
        assert!(!is_plumbing("org.freedesktop.DBusX"));
    }

    #[test]
    fn generated_descriptors_validate_even_when_names_collide() {
        let app = |name: &str| Interface {
            name: name.to_owned(),
            methods: vec![
                (
                    "Activate".to_owned(),
                    vec![(Some("platform_data".into()), "a{sv}".into())],
                ),
                (
                    "Open".to_owned(),
                    vec![(None, "as".into()), (Some("arg0".into()), "s".into())],
                ),
            ],
            properties: vec![("Busy".to_owned(), "b".into(), true)],
        };
        // gnome-calculator: org.gtk.Application and org.freedesktop.Application.
        let objects = [Object {
            path: "/org/gnome/Calculator".into(),
            interfaces: vec![
                app("org.gtk.Application"),
                app("org.freedesktop.Application"),
                app("org.example.Application"),
            ],
        }];
        let doc = descriptor("org.gnome.Calculator", &objects).unwrap();
        let text = serde_json::to_string_pretty(&doc).unwrap();
        let parsed = aai_descriptor::parse(&text, "generated");
        let errors: Vec<String> = parsed
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(ToString::to_string)
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
        let app = parsed.app.unwrap();
        let names: Vec<&str> = app.bindings[0]
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert!(
            names.contains(&"application_activate") && names.contains(&"application_activate_2"),
            "{names:?}"
        );
        assert!(crate::plan::check(&text).is_ok());
    }

    #[test]
    fn the_public_interface_is_the_bindings_not_a_private_one_listed_first() {
        let iface = |name: &str, method: &str| Interface {
            name: name.to_owned(),
            methods: vec![(method.to_owned(), vec![(Some("s".into()), "s".into())])],
            properties: Vec::new(),
        };
        // dunst: its private control interface sorts before the public one.
        let objects = [Object {
            path: "/org/freedesktop/Notifications".into(),
            interfaces: vec![
                iface("org.dunstproject.cmd0", "NotificationAction"),
                iface("org.freedesktop.Notifications", "Notify"),
            ],
        }];
        let doc = descriptor("org.freedesktop.Notifications", &objects).unwrap();
        let linux = &doc["platforms"]["linux"];
        assert_eq!(linux["interface"], "org.freedesktop.Notifications");
        assert_eq!(linux["tools"][0]["name"], "notify", "its tools come first");
        // Without an exact match, the most shared name; a tie keeps the first.
        let mpris = [Object {
            path: "/org/mpris/MediaPlayer2".into(),
            interfaces: vec![
                iface("org.freedesktop.DBus.Peer", "Ping"),
                iface("org.mpris.MediaPlayer2", "Raise"),
                iface("org.mpris.MediaPlayer2.Player", "Play"),
            ],
        }];
        let doc = descriptor("org.mpris.MediaPlayer2.vlc", &mpris).unwrap();
        assert_eq!(
            doc["platforms"]["linux"]["interface"],
            "org.mpris.MediaPlayer2"
        );
    }
}
