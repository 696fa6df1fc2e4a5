//! The `dbus` executor (docs/dbus.md), on zbus over the gateway's tokio runtime.
//!
//! * JSON convention: `Execute(s) → s` on the binding's interface (default
//!   `com.aai.Executor`) with the envelope `{"version","tool","params","request_id"}`;
//!   the reply envelope's `status: error` becomes the matching error code.
//! * Native convention (a tool with `method`): the object is introspected (cached per
//!   bus, name and path, and refreshed when the name's owner changes), the method's in-args
//!   are filled from the JSON arguments — by argument name (letter case and `_` ignored),
//!   else in the order of the tool's `parameters.properties` — and converted to the D-Bus
//!   types ([`convert`]). The reply converts back to JSON; `output_parser: string` returns
//!   it as text, `json` (default) also parses a single string reply that holds JSON.
//! * Properties (our extension, a tool with `property`): `Properties.Get`, or `Set` with
//!   the argument `value` converted to the property's type.
//!
//! Before any call the bus name must have an owner or be activatable (then it is started
//! through the bus); otherwise APP_NOT_RUNNING. D-Bus errors become AUTOMATION_FAILED with
//! the error name and message (InvalidArgs → INVALID_PARAMS, AccessDenied →
//! PERMISSION_DENIED, NoReply/Timeout → TIMEOUT, ServiceUnknown → APP_NOT_RUNNING).

pub(crate) mod convert;
mod signals;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Mutex;

use aai_descriptor::{Bus, Dbus, DbusOutput, Executor, ToolCall};
use serde_json::Value as Json;
use tokio::sync::OnceCell;
use zbus::zvariant::{Signature, Structure};
use zbus::{Connection, Message};

use super::{Execute, Request, envelope};
use crate::error::{Code, GatewayError};

/// How a D-Bus call failed. `From<Error> for GatewayError` below gives the wire codes
/// (this module's docs list them).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No reply within the call's time.
    #[error("`{service}` did not reply within {:.1} s", .after.as_secs_f64())]
    TimedOut {
        /// The bus name.
        service: String,
        /// The call's time.
        after: std::time::Duration,
    },
    /// The client cancelled the call.
    #[error("the call was cancelled")]
    Cancelled,
    /// The bus itself cannot be reached.
    #[error("cannot connect to the D-Bus {bus} bus: {why}")]
    NoBus {
        /// `session` or `system`.
        bus: &'static str,
        /// zbus's words.
        why: String,
    },
    /// Nobody owns the name and it cannot be activated.
    #[error(
        "no program owns `{service}` on the {bus} bus and none can be started; is the app running?"
    )]
    NotRunning {
        /// The bus name.
        service: String,
        /// `session` or `system`.
        bus: &'static str,
    },
    /// Activation failed.
    #[error("`{service}` could not be started: {why}")]
    NotStarted {
        /// The bus name.
        service: String,
        /// The bus's words.
        why: String,
    },
    /// The object has no such method or property.
    #[error("{missing}{}", list_or_absent(.available))]
    NoMember {
        /// "`<service>` at `<path>` has no method `<name>` on `<interface>`".
        missing: String,
        /// The members of that kind the interface has.
        available: Vec<String>,
    },
    /// A property that cannot be written.
    #[error("property `{property}` of `{interface}` is read-only")]
    ReadOnly {
        /// The property.
        property: String,
        /// The interface.
        interface: String,
    },
    /// An argument is missing (`label`: its name, or `#N`).
    #[error("missing argument `{label}`{}", type_note(.wanted))]
    Missing {
        /// The argument.
        label: String,
        /// The D-Bus type it would have, described.
        wanted: Option<String>,
    },
    /// An argument does not convert to its D-Bus type.
    #[error("{why}")]
    Convert {
        /// convert's words (they name the place in the value).
        why: String,
        /// The argument, when it is a method's.
        label: Option<String>,
    },
    /// The arguments could not be put together.
    #[error("{0}")]
    Body(String),
    /// The method failed on the bus.
    #[error("{interface}.{method} failed: {}", dbus_error_text(.error))]
    Call {
        /// The interface called.
        interface: String,
        /// The method called.
        method: String,
        /// What the bus said (boxed: zbus's error is large, and errors travel by value).
        error: Box<zbus::Error>,
    },
    /// Introspection gave something unreadable.
    #[error("{0}")]
    Introspection(String),
    /// The reply could not be read.
    #[error("cannot read the reply: {0}")]
    Reply(String),
    /// The JSON convention's `Execute` broke the convention.
    #[error("{0}")]
    Convention(String),
    /// The app answered with an error envelope.
    #[error(transparent)]
    Reported(#[from] envelope::Failure),
}

fn list_or_absent(available: &[String]) -> String {
    if available.is_empty() {
        " (the interface is not there)".to_owned()
    } else {
        format!("; it has: {}", available.join(", "))
    }
}

fn type_note(wanted: &Option<String>) -> String {
    wanted
        .as_deref()
        .map(|w| format!(" (D-Bus {w})"))
        .unwrap_or_default()
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match e {
            Error::Reported(failure) => return failure.into(),
            Error::TimedOut { .. } => Code::Timeout,
            Error::NoBus { .. } => Code::ServiceUnavailable,
            Error::NotRunning { .. } | Error::NotStarted { .. } => Code::AppNotRunning,
            Error::ReadOnly { .. } => Code::PermissionDenied,
            Error::Missing { .. } | Error::Convert { .. } => Code::InvalidParams,
            Error::Call { ref error, .. } => call_code(error),
            Error::Cancelled
            | Error::NoMember { .. }
            | Error::Body(_)
            | Error::Introspection(_)
            | Error::Reply(_)
            | Error::Convention(_) => Code::AutomationFailed,
        };
        let mut wire = GatewayError::new(code, e.to_string());
        match &e {
            Error::Call { error, .. } => {
                if let zbus::Error::MethodError(name, _, _) = error.as_ref() {
                    wire = wire.with("dbusError", name.as_str());
                }
            }
            Error::Missing { label, .. }
            | Error::Convert {
                label: Some(label), ..
            } => wire = wire.with("field", format!("/{label}")),
            _ => {}
        }
        wire
    }
}

/// A bus error's code: InvalidArgs → INVALID_PARAMS, AccessDenied → PERMISSION_DENIED,
/// NoReply/Timeout → TIMEOUT, ServiceUnknown → APP_NOT_RUNNING, else AUTOMATION_FAILED.
fn call_code(e: &zbus::Error) -> Code {
    match e {
        // The bus says NoReply both for a timeout and for an app that quit mid-call.
        zbus::Error::MethodError(name, Some(detail), _)
            if name.as_str() == "org.freedesktop.DBus.Error.NoReply"
                && detail.contains("disconnected") =>
        {
            Code::AutomationFailed
        }
        zbus::Error::MethodError(name, _, _) => match name.as_str() {
            "org.freedesktop.DBus.Error.InvalidArgs" => Code::InvalidParams,
            "org.freedesktop.DBus.Error.AccessDenied" | "org.freedesktop.DBus.Error.AuthFailed" => {
                Code::PermissionDenied
            }
            "org.freedesktop.DBus.Error.NoReply"
            | "org.freedesktop.DBus.Error.Timeout"
            | "org.freedesktop.DBus.Error.TimedOut" => Code::Timeout,
            "org.freedesktop.DBus.Error.ServiceUnknown"
            | "org.freedesktop.DBus.Error.NameHasNoOwner" => Code::AppNotRunning,
            _ => Code::AutomationFailed,
        },
        _ => Code::AutomationFailed,
    }
}

const DBUS: &str = "org.freedesktop.DBus";
const DBUS_PATH: &str = "/org/freedesktop/DBus";

/// One method's arguments, from introspection.
#[derive(Debug, Clone)]
struct MethodInfo {
    inputs: Vec<(Option<String>, Signature)>,
}

/// What introspection told about one object.
#[derive(Debug, Default)]
struct ObjectInfo {
    /// The unique name that owned the service when introspected.
    owner: String,
    /// (interface, method) → arguments.
    methods: HashMap<(String, String), MethodInfo>,
    /// (interface, property) → (type, writable).
    properties: HashMap<(String, String), (Signature, bool)>,
}

/// Calls D-Bus apps.
#[derive(Debug, Default)]
pub(crate) struct DbusExecutor {
    session: OnceCell<Connection>,
    system: OnceCell<Connection>,
    objects: Mutex<HashMap<(Bus, String, String), std::sync::Arc<ObjectInfo>>>,
}

impl Execute for DbusExecutor {
    async fn execute(&self, req: Request<'_>) -> Result<Json, super::Error> {
        let Executor::Dbus(target) = req.executor else {
            unreachable!("dispatched by executor type");
        };
        let work = self.run(&req, target);
        let result = tokio::select! {
            result = work => result,
            () = tokio::time::sleep(req.ctx.timeout) => Err(Error::TimedOut {
                service: target.service.clone(),
                after: req.ctx.timeout,
            }),
            () = req.ctx.cancel.cancelled() => Err(Error::Cancelled),
        };
        Ok(result?)
    }
}

impl DbusExecutor {
    /// An executor whose session and system buses are both `conn` (tests: one end of a
    /// peer-to-peer connection whose other end serves the app's object).
    #[cfg(test)]
    fn over(conn: Connection) -> DbusExecutor {
        DbusExecutor {
            session: OnceCell::new_with(Some(conn.clone())),
            system: OnceCell::new_with(Some(conn)),
            objects: Mutex::default(),
        }
    }

    async fn run(&self, req: &Request<'_>, target: &Dbus) -> Result<Json, Error> {
        let conn = self.connection(target.bus).await?;
        let owner = ensure_running(conn, target).await?;
        match &req.tool.call {
            ToolCall::DbusMethod {
                method,
                interface,
                output,
            } => {
                let interface = interface.as_deref().unwrap_or(&target.interface);
                let info = self.object(conn, target, &owner).await?;
                let Some(m) = info.methods.get(&(interface.to_owned(), method.clone())) else {
                    return Err(missing_member(&info, target, interface, "method", method));
                };
                let reply = match arguments(m, &req.args, req.tool)? {
                    Some(body) => call(conn, target, interface, method, &body).await?,
                    None => call(conn, target, interface, method, &()).await?,
                };
                let value = reply_json(&reply)?;
                Ok(match output {
                    DbusOutput::String => Json::String(match value {
                        Json::String(s) => s,
                        other => other.to_string(),
                    }),
                    DbusOutput::Json => match value {
                        Json::String(s) => serde_json::from_str(&s).unwrap_or(Json::String(s)),
                        other => other,
                    },
                })
            }
            ToolCall::DbusProperty {
                property,
                interface,
                write,
            } => {
                let interface = interface.as_deref().unwrap_or(&target.interface);
                let info = self.object(conn, target, &owner).await?;
                let Some((sig, writable)) = info
                    .properties
                    .get(&(interface.to_owned(), property.clone()))
                else {
                    return Err(missing_member(
                        &info, target, interface, "property", property,
                    ));
                };
                let props = "org.freedesktop.DBus.Properties";
                if *write {
                    if !writable {
                        return Err(Error::ReadOnly {
                            property: property.clone(),
                            interface: interface.to_owned(),
                        });
                    }
                    let value = req.args.get("value").ok_or_else(|| Error::Missing {
                        label: "value".to_owned(),
                        wanted: None,
                    })?;
                    let converted = convert::to_dbus(value, sig, "value")
                        .map_err(|why| Error::Convert { why, label: None })?;
                    // A `Value` in a tuple body is already sent as a variant (`v`).
                    let body = (interface, property.as_str(), converted);
                    call(conn, target, props, "Set", &body).await?;
                    Ok(Json::Null)
                } else {
                    let reply =
                        call(conn, target, props, "Get", &(interface, property.as_str())).await?;
                    reply_json(&reply)
                }
            }
            _ => {
                let request =
                    envelope::request(&req.tool.name, &req.args, &format!("{:x}", rand_id()));
                let reply = call(
                    conn,
                    target,
                    &target.interface,
                    "Execute",
                    &(request.to_string(),),
                )
                .await?;
                let text = match reply_json(&reply)? {
                    Json::String(s) => s,
                    other => {
                        return Err(Error::Convention(format!(
                            "`Execute` returned `{}` instead of a JSON string",
                            reply_signature(&reply, &other)
                        )));
                    }
                };
                envelope_result(&text)
            }
        }
    }

    async fn connection(&self, bus: Bus) -> Result<&Connection, Error> {
        let (cell, name) = match bus {
            Bus::Session => (&self.session, "session"),
            Bus::System => (&self.system, "system"),
        };
        cell.get_or_try_init(|| async {
            match bus {
                Bus::Session => Connection::session().await,
                Bus::System => Connection::system().await,
            }
        })
        .await
        .map_err(|e| Error::NoBus {
            bus: name,
            why: e.to_string(),
        })
    }

    /// The introspection of the target object, refreshed when the owner changed.
    async fn object(
        &self,
        conn: &Connection,
        target: &Dbus,
        owner: &str,
    ) -> Result<std::sync::Arc<ObjectInfo>, Error> {
        let key = (
            target.bus,
            target.service.clone(),
            target.object_path.clone(),
        );
        if let Some(info) = self.objects.lock().expect("cache lock").get(&key)
            && info.owner == owner
        {
            return Ok(info.clone());
        }
        let reply = call(
            conn,
            target,
            "org.freedesktop.DBus.Introspectable",
            "Introspect",
            &(),
        )
        .await?;
        let xml: String = reply.body().deserialize().map_err(|e| {
            Error::Introspection(format!("introspection reply is not a string: {e}"))
        })?;
        let node = zbus_xml::Node::from_reader(xml.as_bytes())
            .map_err(|e| Error::Introspection(format!("cannot read the introspection XML: {e}")))?;
        let mut info = ObjectInfo {
            owner: owner.to_owned(),
            ..ObjectInfo::default()
        };
        for iface in node.interfaces() {
            let iname = iface.name().to_string();
            for m in iface.methods() {
                let inputs = m
                    .args()
                    .iter()
                    .filter(|a| !matches!(a.direction(), Some(zbus_xml::ArgDirection::Out)))
                    .map(|a| (a.name().map(str::to_owned), a.ty().inner().clone()))
                    .collect();
                info.methods
                    .insert((iname.clone(), m.name().to_string()), MethodInfo { inputs });
            }
            for p in iface.properties() {
                info.properties.insert(
                    (iname.clone(), p.name().to_string()),
                    (p.ty().inner().clone(), p.access().write()),
                );
            }
        }
        let info = std::sync::Arc::new(info);
        self.objects
            .lock()
            .expect("cache lock")
            .insert(key, info.clone());
        Ok(info)
    }
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The service's unique owner; starts an activatable service; APP_NOT_RUNNING otherwise.
async fn ensure_running(conn: &Connection, target: &Dbus) -> Result<String, Error> {
    // A peer-to-peer connection has no bus to ask about names: the peer is the app, and
    // its connection's GUID stands for the owner. A bus connection is never peer-to-peer.
    if !conn.is_bus() {
        return Ok(conn.server_guid().to_string());
    }
    let owner = |conn: &Connection| {
        let service = target.service.clone();
        let conn = conn.clone();
        async move {
            conn.call_method(
                Some(DBUS),
                DBUS_PATH,
                Some(DBUS),
                "GetNameOwner",
                &(service.as_str(),),
            )
            .await
            .ok()
            .and_then(|m| m.body().deserialize::<String>().ok())
        }
    };
    if let Some(o) = owner(conn).await {
        return Ok(o);
    }
    let activatable: Vec<String> = conn
        .call_method(
            Some(DBUS),
            DBUS_PATH,
            Some(DBUS),
            "ListActivatableNames",
            &(),
        )
        .await
        .ok()
        .and_then(|m| m.body().deserialize().ok())
        .unwrap_or_default();
    if activatable.iter().any(|n| n == &target.service) {
        tracing::info!(service = %target.service, "starting the app through D-Bus activation");
        let started = conn
            .call_method(
                Some(DBUS),
                DBUS_PATH,
                Some(DBUS),
                "StartServiceByName",
                &(target.service.as_str(), 0u32),
            )
            .await;
        if let Err(e) = started {
            return Err(Error::NotStarted {
                service: target.service.clone(),
                why: dbus_error_text(&e),
            });
        }
        if let Some(o) = owner(conn).await {
            return Ok(o);
        }
    }
    Err(Error::NotRunning {
        service: target.service.clone(),
        bus: match target.bus {
            Bus::Session => "session",
            Bus::System => "system",
        },
    })
}

async fn call<B>(
    conn: &Connection,
    target: &Dbus,
    interface: &str,
    method: &str,
    body: &B,
) -> Result<Message, Error>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    conn.call_method(
        Some(target.service.as_str()),
        target.object_path.as_str(),
        Some(interface),
        method,
        body,
    )
    .await
    .map_err(|error| Error::Call {
        interface: interface.to_owned(),
        method: method.to_owned(),
        error: Box::new(error),
    })
}

fn dbus_error_text(e: &zbus::Error) -> String {
    match e {
        zbus::Error::MethodError(name, detail, _) => match detail {
            Some(d) => format!("{}: {d}", name.as_str()),
            None => name.as_str().to_owned(),
        },
        other => other.to_string(),
    }
}

fn missing_member(
    info: &ObjectInfo,
    target: &Dbus,
    interface: &str,
    kind: &str,
    name: &str,
) -> Error {
    let mut available: Vec<String> = if kind == "method" {
        info.methods
            .keys()
            .filter(|(i, _)| i == interface)
            .map(|(_, m)| m.clone())
            .collect()
    } else {
        info.properties
            .keys()
            .filter(|(i, _)| i == interface)
            .map(|(_, p)| p.clone())
            .collect()
    };
    available.sort();
    Error::NoMember {
        missing: format!(
            "`{}` at `{}` has no {kind} `{name}` on `{interface}`",
            target.service, target.object_path
        ),
        available,
    }
}

fn fold(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Fills the method's in-args from the JSON arguments: by name when every in-arg is named
/// and found, else in the order of the tool's `parameters.properties`. `None` for a
/// method without arguments.
fn arguments(
    m: &MethodInfo,
    args: &Json,
    tool: &aai_descriptor::Tool,
) -> Result<Option<Structure<'static>>, Error> {
    if m.inputs.is_empty() {
        return Ok(None);
    }
    let empty = serde_json::Map::new();
    let args = args.as_object().unwrap_or(&empty);
    let by_name: Option<Vec<&Json>> = m
        .inputs
        .iter()
        .map(|(name, _)| {
            let name = fold(name.as_deref()?);
            args.iter().find(|(k, _)| fold(k) == name).map(|(_, v)| v)
        })
        .collect();
    let values: Vec<(String, Option<&Json>)> = match by_name {
        Some(values) => m
            .inputs
            .iter()
            .zip(values)
            .map(|((name, _), v)| (name.clone().unwrap_or_default(), Some(v)))
            .collect(),
        None => {
            let order: Vec<&str> = tool.parameters.property_names().collect();
            m.inputs
                .iter()
                .enumerate()
                .map(|(i, (name, _))| {
                    let key = order.get(i).copied();
                    let label = key
                        .map(str::to_owned)
                        .or(name.clone())
                        .unwrap_or_else(|| format!("#{i}"));
                    (label, key.and_then(|k| args.get(k)))
                })
                .collect()
        }
    };
    let mut builder = zbus::zvariant::StructureBuilder::new();
    for ((label, value), (_, sig)) in values.iter().zip(&m.inputs) {
        let Some(value) = value else {
            return Err(Error::Missing {
                label: label.clone(),
                wanted: Some(convert::describe(sig)),
            });
        };
        let v = convert::to_dbus(value, sig, label).map_err(|why| Error::Convert {
            why,
            label: Some(label.clone()),
        })?;
        builder = builder.append_field(v);
    }
    builder
        .build()
        .map(Some)
        .map_err(|e| Error::Body(e.to_string()))
}

/// The reply as JSON: no value → null, one → it, several → an array.
fn reply_json(reply: &Message) -> Result<Json, Error> {
    let body = reply.body();
    if body.signature().to_string().is_empty() {
        return Ok(Json::Null);
    }
    let structure: Structure = body
        .deserialize()
        .map_err(|e| Error::Reply(e.to_string()))?;
    let mut fields: Vec<Json> = structure.fields().iter().map(convert::to_json).collect();
    Ok(match fields.len() {
        0 => Json::Null,
        1 => fields.remove(0),
        _ => Json::Array(fields),
    })
}

fn reply_signature(reply: &Message, _value: &Json) -> String {
    reply.body().signature().to_string()
}

/// The JSON convention's reply envelope.
fn envelope_result(text: &str) -> Result<Json, Error> {
    let envelope = envelope::parse(text)
        .map_err(|e| Error::Convention(format!("`Execute` returned text that is {e}")))?;
    match envelope::reply(&envelope, "the app") {
        envelope::Reply::Done(result) => result.map_err(Error::Reported),
        envelope::Reply::Progress(_) => Err(Error::Convention(
            "`Execute` returned an envelope without `status: success|error`".to_owned(),
        )),
    }
}
