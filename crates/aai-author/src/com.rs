//! Descriptor drafts of Windows automation servers from their COM type library (read by
//! [`crate::typelib`]): one draft per creatable coclass, from its default dispatch
//! interface (a dispinterface or a dual interface, with the members of its bases).
//!
//! Pure: a [`Library`] in, D0 descriptors (`platforms.windows`, `automation: "com"`) out.
//! What maps to what:
//! * a method → a tool whose action list creates the object and calls the method with
//!   each parameter as a `${param}` value (values never become code: docs/windows.md);
//! * a property getter without parameters (a dispinterface property, a `propget`) → a
//!   `get<Property>` tool whose action list reads it;
//! * `helpstring`s → descriptions;
//! * types → JSON Schema: `BSTR` → string; `I1`/`I2`/`I4`/`I8`, `UI1`/`UI2`/`UI4`/`UI8`,
//!   `INT`/`UINT` and enums → integer (with their range; an enum's members in its
//!   description); `R4`/`R8`/`CY`/`DECIMAL` → number; `BOOL` → boolean; `DATE` →
//!   a `date-time` string; `VARIANT` → any value (no type);
//! * `[optional]` and `[defaultvalue]` parameters are not required; a default becomes the
//!   schema's `default` (the gateway fills it in).
//!
//! Left out, each with a note: parameters of types a JSON value cannot carry (`SAFEARRAY`,
//! `IDispatch`, `IUnknown`, interfaces, records, by-reference and `[out]` parameters) — a
//! method that needs one is left out, an optional one is dropped with every parameter
//! after it (COM parameters are positional) —; methods and properties that return an
//! object (an object is no JSON value; an action list can keep one in a variable: edit the
//! draft); indexed properties; property setters; hidden and restricted members; names
//! that are not identifiers.
//!
//! Every draft passes `validate`; the tests check it.

use serde_json::{Map, Value, json};

use crate::typelib::{self, Func, Invoke, Kind, Library, Type, TypeInfo, vt};

/// One descriptor drafted from a coclass.
#[derive(Debug)]
pub struct Draft {
    /// The app id (`local.<progid>`, lower case).
    pub id: String,
    /// The ProgID the descriptor creates.
    pub prog_id: String,
    /// The coclass's name.
    pub coclass: String,
    /// The descriptor (D0 platforms form).
    pub descriptor: Value,
    /// The number of tools.
    pub tools: usize,
    /// What was left out, each with why.
    pub notes: Vec<String>,
}

/// Why no draft could be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The library has no creatable coclass with a dispatch interface.
    NoCoclass,
    /// `--progid` names no coclass of a library with several.
    UnknownProgId {
        /// The ProgID given.
        prog_id: String,
        /// The coclasses there are.
        coclasses: Vec<String>,
    },
    /// A ProgID that cannot go into a script (dotted identifiers only).
    BadProgId(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NoCoclass => f.write_str(
                "the type library has no creatable coclass with a dispatch interface (nothing an automation client can create)",
            ),
            Error::UnknownProgId { prog_id, coclasses } => write!(
                f,
                "`{prog_id}` names none of the library's creatable coclasses ({}); give a ProgID ending in one of them",
                coclasses.join(", ")
            ),
            Error::BadProgId(p) => write!(
                f,
                "`{p}` is not a ProgID: identifiers joined by `.` (e.g. `Outlook.Application`)"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Which coclasses to draft.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// The ProgID to create. With several creatable coclasses it picks the one named by
    /// its last part (`Acme.Application` → `Application`), or by `clsid`.
    pub prog_id: Option<&'a str>,
    /// Only the coclass with this CLSID (`{…}`, any case), as the registry names it.
    pub clsid: Option<&'a str>,
}

/// The drafts of a library: one per creatable coclass with a dispatch interface (or the
/// one `options` picks).
pub fn drafts(lib: &Library, options: Options<'_>) -> Result<Vec<Draft>, Error> {
    if let Some(p) = options.prog_id
        && !prog_id_ok(p)
    {
        return Err(Error::BadProgId(p.to_owned()));
    }
    let creatable: Vec<(&TypeInfo, usize)> = lib
        .types
        .iter()
        .filter(|t| {
            t.kind == Kind::Coclass
                && t.flags & typelib::TYPEFLAG_FCANCREATE != 0
                && t.flags & (typelib::TYPEFLAG_FRESTRICTED | typelib::TYPEFLAG_FHIDDEN) == 0
        })
        .filter_map(|t| Some((t, default_dispatch(lib, t)?)))
        .filter(|(t, _)| {
            options.clsid.is_none_or(|c| {
                t.guid.as_deref().is_some_and(|g| {
                    g.trim_matches(['{', '}'])
                        .eq_ignore_ascii_case(c.trim_matches(['{', '}']))
                })
            })
        })
        .collect();
    if creatable.is_empty() {
        return Err(Error::NoCoclass);
    }
    let chosen: Vec<(&TypeInfo, usize)> = match options.prog_id {
        Some(p) if creatable.len() > 1 && options.clsid.is_none() => {
            let last = p.rsplit('.').next().unwrap_or(p);
            let hit: Vec<_> = creatable
                .iter()
                .copied()
                .filter(|(t, _)| t.name.eq_ignore_ascii_case(last))
                .collect();
            if hit.is_empty() {
                return Err(Error::UnknownProgId {
                    prog_id: p.to_owned(),
                    coclasses: creatable.iter().map(|(t, _)| t.name.clone()).collect(),
                });
            }
            hit
        }
        _ => creatable,
    };
    let mut out = Vec::new();
    for (coclass, iface) in chosen {
        let prog_id = match options.prog_id {
            Some(p) => p.to_owned(),
            None => format!("{}.{}", lib.name, coclass.name),
        };
        if !prog_id_ok(&prog_id) {
            return Err(Error::BadProgId(prog_id));
        }
        out.push(draft(lib, coclass, iface, &prog_id));
    }
    Ok(out)
}

/// Dotted identifiers (`Outlook.Application.16`), as the descriptor parser checks.
fn prog_id_ok(p: &str) -> bool {
    let mut parts = p.split('.');
    parts.next().is_some_and(ident)
        && parts.all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        && p.len() <= 128
}

fn ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        && s.len() <= 64
}

/// The coclass's default interface when it can be called through `IDispatch`.
fn default_dispatch(lib: &Library, coclass: &TypeInfo) -> Option<usize> {
    let default = coclass
        .impls
        .iter()
        .find(|i| {
            i.flags & typelib::IMPLTYPEFLAG_FDEFAULT != 0
                && i.flags & typelib::IMPLTYPEFLAG_FSOURCE == 0
        })
        .or_else(|| {
            coclass
                .impls
                .iter()
                .find(|i| i.flags & typelib::IMPLTYPEFLAG_FSOURCE == 0)
        })?;
    let index = default.ty?;
    (lib.types.get(index)?.kind == Kind::Dispatch).then_some(index)
}

/// The interface and its bases (outermost last), at most 16 deep, without `IDispatch`
/// and `IUnknown` (their members are plumbing).
fn chain(lib: &Library, index: usize) -> Vec<&TypeInfo> {
    let mut out = Vec::new();
    let mut next = Some(index);
    while let Some(i) = next {
        let Some(t) = lib.types.get(i) else { break };
        if out.len() >= 16
            || matches!(t.name.as_str(), "IDispatch" | "IUnknown")
            || out.iter().any(|o: &&TypeInfo| std::ptr::eq(*o, t))
        {
            break;
        }
        out.push(t);
        next = t.impls.first().and_then(|b| b.ty);
    }
    out
}

/// A JSON Schema for a parameter or result type, or why a JSON value cannot carry it.
fn schema(lib: &Library, ty: &Type, depth: u8) -> Result<Value, String> {
    if depth > 8 {
        return Err("a type nested too deep".into());
    }
    let int = |min: i64, max: i64| json!({"type": "integer", "minimum": min, "maximum": max});
    match ty {
        Type::Base(v) => match *v {
            vt::BSTR | vt::LPSTR | vt::LPWSTR => Ok(json!({"type": "string"})),
            vt::I1 => Ok(int(i64::from(i8::MIN), i64::from(i8::MAX))),
            vt::UI1 => Ok(int(0, i64::from(u8::MAX))),
            vt::I2 => Ok(int(i64::from(i16::MIN), i64::from(i16::MAX))),
            vt::UI2 => Ok(int(0, i64::from(u16::MAX))),
            vt::I4 | vt::INT => Ok(int(i64::from(i32::MIN), i64::from(i32::MAX))),
            vt::UI4 | vt::UINT => Ok(int(0, i64::from(u32::MAX))),
            vt::I8 | vt::UI8 => Ok(json!({"type": "integer"})),
            vt::R4 | vt::R8 | vt::CY | vt::DECIMAL => Ok(json!({"type": "number"})),
            vt::BOOL => Ok(json!({"type": "boolean"})),
            vt::DATE => Ok(json!({"type": "string", "format": "date-time",
                                   "description": "a date and time (ISO 8601)"})),
            vt::VARIANT => Ok(json!({"description": "any value (VARIANT)"})),
            vt::DISPATCH => Err("an object (IDispatch)".into()),
            vt::UNKNOWN => Err("an object (IUnknown)".into()),
            other => Err(format!("a {} value", vt_name(other))),
        },
        Type::Ptr(inner) => Err(match inner.as_ref() {
            Type::Base(vt::DISPATCH) => "an object (IDispatch)".into(),
            Type::Base(vt::UNKNOWN) => "an object (IUnknown)".into(),
            Type::User(i) if is_interface(lib, *i) => format!(
                "an object ({})",
                lib.types.get(*i).map_or("", |t| t.name.as_str())
            ),
            _ => "a by-reference value".into(),
        }),
        Type::SafeArray(_) => Err("an array (SAFEARRAY)".into()),
        Type::CArray => Err("a C array".into()),
        Type::Imported => Err("a type of another library".into()),
        Type::TooDeep => Err("a type nested too deep".into()),
        Type::User(i) => {
            let Some(t) = lib.types.get(*i) else {
                return Err("an unknown type".into());
            };
            match t.kind {
                Kind::Enum => {
                    let members: Vec<String> = t
                        .vars
                        .iter()
                        .filter_map(|v| match &v.value {
                            Some(typelib::Value::Int(n)) => Some(format!("{} = {n}", v.name)),
                            _ => None,
                        })
                        .take(32)
                        .collect();
                    let mut s =
                        json!({"type": "integer", "minimum": i32::MIN, "maximum": i32::MAX});
                    if !members.is_empty() {
                        s["description"] = json!(format!("{}: {}", t.name, members.join(", ")));
                    }
                    Ok(s)
                }
                Kind::Alias => match &t.alias {
                    Some(a) => schema(lib, a, depth + 1),
                    None => Err(format!("an unknown type ({})", t.name)),
                },
                Kind::Interface | Kind::Dispatch | Kind::Coclass => {
                    Err(format!("an object ({})", t.name))
                }
                Kind::Record | Kind::Union | Kind::Module => {
                    Err(format!("a structure ({})", t.name))
                }
            }
        }
    }
}

fn is_interface(lib: &Library, i: usize) -> bool {
    lib.types
        .get(i)
        .is_some_and(|t| matches!(t.kind, Kind::Interface | Kind::Dispatch | Kind::Coclass))
}

fn vt_name(v: u16) -> String {
    match v {
        vt::ERROR => "SCODE".into(),
        vt::VOID => "void".into(),
        vt::HRESULT => "HRESULT".into(),
        vt::EMPTY => "VT_EMPTY".into(),
        vt::NULL => "VT_NULL".into(),
        other => format!("VT {other}"),
    }
}

/// Whether a result type is an object (no JSON value), following aliases.
fn returns_object(lib: &Library, ty: &Type) -> Option<String> {
    match schema(lib, ty, 0) {
        Err(why) if why.starts_with("an object") => Some(why),
        _ => None,
    }
}

/// The value of a default as JSON.
fn default_json(v: &typelib::Value, s: &Value) -> Option<Value> {
    Some(match (v, s["type"].as_str()) {
        (typelib::Value::Int(n), Some("boolean")) => json!(*n != 0),
        (typelib::Value::Int(n), _) => json!(n),
        (typelib::Value::Float(f), _) => json!(f),
        (typelib::Value::Str(t), _) => json!(t),
        (typelib::Value::Null | typelib::Value::Other(_), _) => return None,
    })
}

/// What a function takes and returns, with the `[retval]` and `[lcid]` parameters apart.
struct Shape<'a> {
    params: Vec<&'a typelib::Param>,
    ret: Option<&'a Type>,
}

fn shape(func: &Func) -> Shape<'_> {
    let mut params = Vec::new();
    let mut ret = match &func.ret {
        Type::Base(vt::VOID | vt::HRESULT) => None,
        other => Some(other),
    };
    for p in &func.params {
        if p.flags & typelib::PARAMFLAG_FRETVAL != 0 {
            ret = Some(match &p.ty {
                Type::Ptr(inner) => inner.as_ref(),
                other => other,
            });
        } else if p.flags & typelib::PARAMFLAG_FLCID == 0 {
            params.push(p);
        }
    }
    Shape { params, ret }
}

/// A method as a tool, or why it is left out.
fn method(lib: &Library, func: &Func, notes: &mut Vec<String>) -> Result<Value, String> {
    let name = &func.name;
    let Shape { params, ret } = shape(func);
    if let Some(why) = ret.and_then(|r| returns_object(lib, r)) {
        return Err(format!(
            "`{name}` returns {why}; an action list can keep it in a variable for later steps (edit the draft)"
        ));
    }
    if func
        .params
        .iter()
        .any(|p| p.flags & typelib::PARAMFLAG_FLCID != 0)
    {
        return Err(format!(
            "`{name}` takes a locale ([lcid]) parameter, which an IDispatch call supplies itself"
        ));
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut args = Vec::new();
    // Parameters past `cParams - cParamsOpt` are optional too (`[optional]` VARIANTs).
    let first_optional = params.len().saturating_sub(func.optional.max(0) as usize);
    for (i, p) in params.iter().enumerate() {
        let pname = p
            .name
            .clone()
            .filter(|n| ident(n) && !properties.contains_key(n))
            .unwrap_or_else(|| format!("arg{}", i + 1));
        let optional = p.flags & (typelib::PARAMFLAG_FOPT | typelib::PARAMFLAG_FHASDEFAULT) != 0
            || i >= first_optional;
        let out = p.flags & typelib::PARAMFLAG_FOUT != 0;
        let checked = if out && p.flags & typelib::PARAMFLAG_FIN != 0 {
            Err("a by-reference ([in, out]) value".to_owned())
        } else if out {
            Err("an [out] value".to_owned())
        } else {
            schema(lib, &p.ty, 0)
        };
        let mut s = match checked {
            Ok(s) => s,
            Err(why) if optional => {
                let rest = params.len() - i;
                notes.push(if rest > 1 {
                    format!(
                        "`{name}`: optional parameter `{pname}` ({why}) and the {} after it left out (parameters are positional)",
                        crate::text::count(rest - 1, "parameter", "parameters")
                    )
                } else {
                    format!("`{name}`: optional parameter `{pname}` ({why}) left out")
                });
                break;
            }
            Err(why) => return Err(format!("`{name}` needs `{pname}`, {why}")),
        };
        if let Some(d) = p.default.as_ref().and_then(|d| default_json(d, &s)) {
            s["default"] = d;
        }
        if optional && s.get("default").is_none() {
            let said = s["description"].as_str().map(str::to_owned);
            s["description"] = json!(match said {
                Some(d) => format!("{d}; optional (left out: null)"),
                None => "optional (left out: null)".to_owned(),
            });
        }
        properties.insert(pname.clone(), s);
        if !optional {
            required.push(pname.clone());
        }
        args.push(json!(format!("${{{pname}}}")));
    }
    let description = func
        .doc
        .clone()
        .unwrap_or_else(|| format!("Calls the `{name}` method"));
    Ok(json!({
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required, "additionalProperties": false},
        "script": [
            {"action": "create", "var": "app"},
            {"action": "call", "object": "app", "method": name, "args": args},
        ],
        "output_parser": "last_result",
    }))
}

/// A property getter as a `get<Property>` tool.
fn getter(property: &str, doc: Option<&str>) -> Value {
    let mut first = property.chars();
    let upper: String = first
        .next()
        .map(|c| c.to_ascii_uppercase())
        .into_iter()
        .chain(first)
        .collect();
    json!({
        "name": format!("get{upper}"),
        "description": doc.map_or_else(|| format!("Reads the `{property}` property"), str::to_owned),
        "parameters": {"type": "object", "properties": {}, "additionalProperties": false},
        "script": [
            {"action": "create", "var": "app"},
            {"action": "get", "object": "app", "property": property},
        ],
        "output_parser": "last_result",
    })
}

fn draft(lib: &Library, coclass: &TypeInfo, iface: usize, prog_id: &str) -> Draft {
    let mut tools: Vec<Value> = Vec::new();
    let mut notes = Vec::new();
    let mut add = |tool: Value, notes: &mut Vec<String>| {
        let name = tool["name"].as_str().unwrap_or_default().to_owned();
        if tools.iter().any(|t| t["name"] == name.as_str()) {
            notes.push(format!("`{name}`: a second member of that name left out"));
        } else {
            tools.push(tool);
        }
    };
    for t in chain(lib, iface) {
        for func in &t.funcs {
            let name = &func.name;
            if func.flags & typelib::FUNCFLAG_FRESTRICTED != 0 {
                continue;
            }
            if func.flags & typelib::FUNCFLAG_FHIDDEN != 0 {
                notes.push(format!("`{name}`: hidden"));
                continue;
            }
            if !ident(name) {
                notes.push(format!("`{name}`: not an identifier"));
                continue;
            }
            match func.invoke {
                Invoke::Func => match method(lib, func, &mut notes) {
                    Ok(tool) => add(tool, &mut notes),
                    Err(why) => notes.push(why),
                },
                Invoke::PropertyGet => {
                    let Shape { params, ret } = shape(func);
                    if !params.is_empty() {
                        notes.push(format!(
                            "`{name}`: an indexed property (it takes {})",
                            crate::text::count(params.len(), "parameter", "parameters")
                        ));
                    } else if let Some(why) = ret.and_then(|r| returns_object(lib, r)) {
                        notes.push(format!("property `{name}` is {why}"));
                    } else {
                        add(getter(name, func.doc.as_deref()), &mut notes);
                    }
                }
                Invoke::PropertyPut | Invoke::PropertyPutRef => {}
            }
        }
        for var in &t.vars {
            let name = &var.name;
            if var.kind != 3 || var.flags & typelib::VARFLAG_FRESTRICTED != 0 {
                continue;
            }
            if var.flags & typelib::VARFLAG_FHIDDEN != 0 {
                notes.push(format!("`{name}`: hidden"));
            } else if !ident(name) {
                notes.push(format!("`{name}`: not an identifier"));
            } else if let Some(why) = returns_object(lib, &var.ty) {
                notes.push(format!("property `{name}` is {why}"));
            } else {
                add(getter(name, var.doc.as_deref()), &mut notes);
            }
        }
    }
    let id = format!("local.{}", prog_id.to_ascii_lowercase());
    let title = format!("{} {}", lib.name, coclass.name);
    let about = coclass
        .doc
        .clone()
        .or_else(|| lib.doc.clone())
        .unwrap_or_else(|| title.clone());
    let count = tools.len();
    let descriptor = json!({
        "schema_version": "1.0",
        "appId": id,
        "name": coclass.doc.clone().unwrap_or(title),
        "description": format!("{about} ({prog_id}, generated from its type library; review before use)"),
        "version": format!("{}.{}", lib.version.0, lib.version.1),
        "platforms": {"windows": {"automation": "com", "progid": prog_id, "tools": tools}},
    });
    Draft {
        id,
        prog_id: prog_id.to_owned(),
        coclass: coclass.name.clone(),
        descriptor,
        tools: count,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTLOOK: &[u8] = include_bytes!("../../../fixtures/typelib/outlook.tlb");
    const EXCEL: &[u8] = include_bytes!("../../../fixtures/typelib/excel.tlb");

    fn tool<'a>(d: &'a Draft, name: &str) -> &'a Value {
        d.descriptor["platforms"]["windows"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no tool {name}: {:#}", d.descriptor))
    }

    fn names(d: &Draft) -> Vec<&str> {
        d.descriptor["platforms"]["windows"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect()
    }

    fn validates(d: &Draft) {
        let text = serde_json::to_string_pretty(&d.descriptor).unwrap();
        let parsed = aai_descriptor::parse(&text, "draft.json");
        let problems: Vec<String> = parsed.diagnostics.iter().map(ToString::to_string).collect();
        assert!(parsed.app.is_some(), "{problems:?}\n{text}");
        assert!(
            parsed.diagnostics.iter().all(|d| !d.is_error()),
            "{problems:?}"
        );
    }

    #[test]
    fn an_outlook_like_dispinterface_becomes_tools_and_notes() {
        let lib = typelib::read(OUTLOOK).unwrap();
        assert_eq!(lib.name, "Acme");
        assert_eq!(lib.version, (9, 6));
        let drafts = drafts(&lib, Options::default()).unwrap();
        // MailItem is noncreatable.
        assert_eq!(drafts.len(), 1);
        let d = &drafts[0];
        assert_eq!(d.prog_id, "Acme.Application");
        assert_eq!(d.id, "local.acme.application");
        assert_eq!(
            d.descriptor["platforms"]["windows"]["progid"],
            "Acme.Application"
        );
        assert_eq!(d.descriptor["name"], "Acme Mail");
        assert_eq!(d.descriptor["version"], "9.6");
        assert_eq!(
            names(d),
            [
                "SendMail",
                "UnreadCount",
                "ScheduleMeeting",
                "Quit",
                "MoveTo",
                "getVersion",
                "getName",
                "getOffline"
            ]
        );
        let send = tool(d, "SendMail");
        assert_eq!(send["description"], "Send a mail message");
        assert_eq!(
            send["script"],
            json!([
                {"action": "create", "var": "app"},
                {"action": "call", "object": "app", "method": "SendMail",
                 "args": ["${To}", "${Subject}", "${Body}", "${Cc}", "${Importance}"]},
            ])
        );
        let params = &send["parameters"];
        assert_eq!(params["required"], json!(["To", "Subject", "Body"]));
        assert_eq!(params["properties"]["To"]["type"], "string");
        assert!(
            params["properties"]["Cc"].get("type").is_none(),
            "VARIANT: any"
        );
        assert_eq!(params["properties"]["Importance"]["default"], 0);
        assert_eq!(params["properties"]["Importance"]["type"], "integer");
        let meeting = &tool(d, "ScheduleMeeting")["parameters"]["properties"];
        assert_eq!(meeting["Start"]["format"], "date-time");
        assert_eq!(meeting["Hours"]["type"], "number");
        assert_eq!(meeting["Location"]["default"], "Room 1");
        assert_eq!(
            tool(d, "UnreadCount")["parameters"]["required"],
            json!(["Folder"])
        );
        // MoveTo keeps Folder; the optional IDispatch and the parameter after it go.
        assert_eq!(tool(d, "MoveTo")["script"][1]["args"], json!(["${Folder}"]));
        assert_eq!(
            tool(d, "getVersion")["script"],
            json!([
                {"action": "create", "var": "app"},
                {"action": "get", "object": "app", "property": "Version"},
            ])
        );
        assert_eq!(tool(d, "getOffline")["output_parser"], "last_result");
        let notes = d.notes.join("\n");
        for expected in [
            "`CreateItem` returns an object (IDispatch)",
            "`ResolveName` needs `Address`, an [out] value",
            "`SendBulk` needs `Recipients`, an array (SAFEARRAY)",
            "`DebugDump`: hidden",
            "`MoveTo`: optional parameter `Tag` (an object (IDispatch)) and the 1 parameter after it left out",
            "property `Session` is an object (IDispatch)",
        ] {
            assert!(notes.contains(expected), "{expected}\n{notes}");
        }
        validates(d);
    }

    #[test]
    fn an_excel_like_dual_interface_becomes_tools_and_notes() {
        let lib = typelib::read(EXCEL).unwrap();
        let drafts = drafts(&lib, Options::default()).unwrap();
        let ids: Vec<&str> = drafts.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(
            ids,
            ["local.acmesheets.application", "local.acmesheets.chart"]
        );
        let d = &drafts[0];
        assert_eq!(
            names(d),
            [
                "getVersion",
                "getVisible",
                "getBudget",
                "Evaluate",
                "SaveAs",
                "Run",
                "Round",
                "Quit"
            ]
        );
        assert_eq!(
            tool(d, "getVersion")["description"],
            "The application's version"
        );
        assert_eq!(
            tool(d, "getBudget")["description"],
            "Reads the `Budget` property"
        );
        let save = &tool(d, "SaveAs")["parameters"];
        assert_eq!(save["required"], json!(["Filename"]));
        assert_eq!(save["properties"]["Format"]["default"], 51);
        assert!(
            save["properties"]["Format"]["description"]
                .as_str()
                .unwrap()
                .contains("xlWorkbookNormal = -4143")
        );
        assert_eq!(save["properties"]["AddToMru"]["type"], "boolean");
        assert_eq!(save["properties"]["AddToMru"]["default"], true);
        let run = &tool(d, "Run")["parameters"];
        assert_eq!(run["required"], json!(["Macro"]));
        assert_eq!(
            run["properties"]["Arg1"]["description"],
            "any value (VARIANT); optional (left out: null)"
        );
        let round = &tool(d, "Round")["parameters"]["properties"];
        assert_eq!(round["Digits"]["default"], 2);
        assert_eq!(round["Digits"]["maximum"], 32767);
        assert_eq!(round["Percent"]["default"], 100);
        let notes = d.notes.join("\n");
        for expected in [
            "property `Workbooks` is an object (IDispatch)",
            "`Cells`: an indexed property (it takes 2 parameters)",
            "`OpenWorkbook` returns an object (IDispatch)",
            "`UsedRows` takes a locale ([lcid]) parameter",
            "`SetRange` needs `Values`, an array (SAFEARRAY)",
            "`ReadCell` needs `Value`, a by-reference ([in, out]) value",
        ] {
            assert!(notes.contains(expected), "{expected}\n{notes}");
        }
        for d in &drafts {
            validates(d);
        }
        assert_eq!(names(&drafts[1]), ["getTitle"]);
    }

    #[test]
    fn progid_picks_a_coclass_and_is_checked() {
        let lib = typelib::read(EXCEL).unwrap();
        let one = drafts(
            &lib,
            Options {
                prog_id: Some("Sheets.Chart.2"),
                clsid: None,
            },
        );
        // The last part names the coclass: `2` is none.
        assert!(matches!(one, Err(Error::UnknownProgId { .. })), "{one:?}");
        let one = drafts(
            &lib,
            Options {
                prog_id: Some("Sheets.Chart"),
                clsid: None,
            },
        )
        .unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].id, "local.sheets.chart");
        let by_clsid = drafts(
            &lib,
            Options {
                prog_id: Some("Sheets.Chart.2"),
                clsid: Some("{5a1b0000-0000-4000-8000-00000000b005}"),
            },
        )
        .unwrap();
        assert_eq!(by_clsid.len(), 1);
        assert_eq!(by_clsid[0].coclass, "Chart");
        assert_eq!(by_clsid[0].prog_id, "Sheets.Chart.2");
        for bad in ["a b", "x;y", "", "1abc", "Acme..App", "'quote'"] {
            let r = drafts(
                &lib,
                Options {
                    prog_id: Some(bad),
                    clsid: None,
                },
            );
            assert!(matches!(r, Err(Error::BadProgId(_))), "{bad}: {r:?}");
        }
        let none = drafts(
            &lib,
            Options {
                prog_id: None,
                clsid: Some("{00000000-0000-0000-0000-000000000000}"),
            },
        );
        assert_eq!(none.unwrap_err(), Error::NoCoclass);
    }
}
