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

pub mod convert;

use std::collections::HashMap;
use std::sync::Mutex;

use aai_descriptor::{Bus, Dbus, DbusOutput, Executor, ToolCall};
use serde_json::Value as Json;
use tokio::sync::OnceCell;
use zbus::zvariant::{Signature, Structure};
use zbus::{Connection, Message};

use super::{Execute, Request, envelope};
use crate::error::{Code, GatewayError};

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
pub struct DbusExecutor {
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
            () = tokio::time::sleep(req.ctx.timeout) => Err(GatewayError::new(
                Code::Timeout,
                format!("`{}` did not reply within {:.1} s", target.service, req.ctx.timeout.as_secs_f64()),
            )),
            () = req.ctx.cancel.cancelled() => Err(GatewayError::new(Code::AutomationFailed, "the call was cancelled")),
        };
        Ok(result?)
    }
}

impl DbusExecutor {
    async fn run(&self, req: &Request<'_>, target: &Dbus) -> Result<Json, GatewayError> {
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
                        return Err(GatewayError::new(
                            Code::PermissionDenied,
                            format!("property `{property}` of `{interface}` is read-only"),
                        ));
                    }
                    let value = req.args.get("value").ok_or_else(|| {
                        GatewayError::new(Code::InvalidParams, "missing argument `value`")
                            .with("field", "/value")
                    })?;
                    let converted = convert::to_dbus(value, sig, "value").map_err(invalid)?;
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
                        return Err(GatewayError::new(
                            Code::AutomationFailed,
                            format!(
                                "`Execute` returned `{}` instead of a JSON string",
                                reply_signature(&reply, &other)
                            ),
                        ));
                    }
                };
                envelope_result(&text)
            }
        }
    }

    async fn connection(&self, bus: Bus) -> Result<&Connection, GatewayError> {
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
        .map_err(|e| {
            GatewayError::new(
                Code::ServiceUnavailable,
                format!("cannot connect to the D-Bus {name} bus: {e}"),
            )
        })
    }

    /// The introspection of the target object, refreshed when the owner changed.
    async fn object(
        &self,
        conn: &Connection,
        target: &Dbus,
        owner: &str,
    ) -> Result<std::sync::Arc<ObjectInfo>, GatewayError> {
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
            GatewayError::new(
                Code::AutomationFailed,
                format!("introspection reply is not a string: {e}"),
            )
        })?;
        let node = zbus_xml::Node::from_reader(xml.as_bytes()).map_err(|e| {
            GatewayError::new(
                Code::AutomationFailed,
                format!("cannot read the introspection XML: {e}"),
            )
        })?;
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
async fn ensure_running(conn: &Connection, target: &Dbus) -> Result<String, GatewayError> {
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
            return Err(GatewayError::new(
                Code::AppNotRunning,
                format!(
                    "`{}` could not be started: {}",
                    target.service,
                    dbus_error_text(&e)
                ),
            ));
        }
        if let Some(o) = owner(conn).await {
            return Ok(o);
        }
    }
    Err(GatewayError::new(
        Code::AppNotRunning,
        format!(
            "no program owns `{}` on the {} bus and none can be started; is the app running?",
            target.service,
            match target.bus {
                Bus::Session => "session",
                Bus::System => "system",
            }
        ),
    ))
}

async fn call<B>(
    conn: &Connection,
    target: &Dbus,
    interface: &str,
    method: &str,
    body: &B,
) -> Result<Message, GatewayError>
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
    .map_err(|e| dbus_error(&e, interface, method))
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

fn dbus_error(e: &zbus::Error, interface: &str, method: &str) -> GatewayError {
    let code = match e {
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
    };
    let mut err = GatewayError::new(
        code,
        format!("{interface}.{method} failed: {}", dbus_error_text(e)),
    );
    if let zbus::Error::MethodError(name, _, _) = e {
        err = err.with("dbusError", name.as_str());
    }
    err
}

fn invalid(detail: String) -> GatewayError {
    GatewayError::new(Code::InvalidParams, detail)
}

fn missing_member(
    info: &ObjectInfo,
    target: &Dbus,
    interface: &str,
    kind: &str,
    name: &str,
) -> GatewayError {
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
    GatewayError::new(
        Code::AutomationFailed,
        format!(
            "`{}` at `{}` has no {kind} `{name}` on `{interface}`{}",
            target.service,
            target.object_path,
            if available.is_empty() {
                " (the interface is not there)".to_owned()
            } else {
                format!("; it has: {}", available.join(", "))
            }
        ),
    )
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
) -> Result<Option<Structure<'static>>, GatewayError> {
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
            return Err(GatewayError::new(
                Code::InvalidParams,
                format!(
                    "missing argument `{label}` (D-Bus {})",
                    convert::describe(sig)
                ),
            )
            .with("field", format!("/{label}")));
        };
        let v = convert::to_dbus(value, sig, label)
            .map_err(|e| invalid(e).with("field", format!("/{label}")))?;
        builder = builder.append_field(v);
    }
    builder
        .build()
        .map(Some)
        .map_err(|e| GatewayError::new(Code::AutomationFailed, e.to_string()))
}

/// The reply as JSON: no value → null, one → it, several → an array.
fn reply_json(reply: &Message) -> Result<Json, GatewayError> {
    let body = reply.body();
    if body.signature().to_string().is_empty() {
        return Ok(Json::Null);
    }
    let structure: Structure = body.deserialize().map_err(|e| {
        GatewayError::new(
            Code::AutomationFailed,
            format!("cannot read the reply: {e}"),
        )
    })?;
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
fn envelope_result(text: &str) -> Result<Json, GatewayError> {
    let envelope = envelope::parse(text).map_err(|e| {
        GatewayError::new(
            Code::AutomationFailed,
            format!("`Execute` returned text that is {e}"),
        )
    })?;
    match envelope::reply(&envelope, "the app") {
        envelope::Reply::Done(result) => result,
        envelope::Reply::Progress(_) => Err(GatewayError::new(
            Code::AutomationFailed,
            "`Execute` returned an envelope without `status: success|error`",
        )),
    }
}
