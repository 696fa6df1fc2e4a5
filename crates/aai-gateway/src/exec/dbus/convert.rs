//! JSON ↔ D-Bus values, driven by the D-Bus signature the app declares.
//!
//! To D-Bus: every basic type with range checks (`y n q i u x t d b s o g`), arrays
//! (`ay` also from a string's UTF-8 bytes), dicts from JSON objects (keys parsed to the
//! key type), structs from JSON arrays, and variants — inferred from the JSON (`b`, `i`
//! or `x` or `t`, `d`, `s`, `as`, `av`, `a{sv}`) or given explicitly as
//! `{"$type": "y", "value": 2}` for apps that insist on a type (notification urgency is a
//! byte). Errors name the argument and the expected D-Bus type, never the value.
//!
//! To JSON: numbers, booleans, strings (also object paths and signatures), arrays, dicts
//! as objects (keys as strings), structs as arrays, variants unwrapped.

use serde_json::{Map, Number, Value as Json};
use zbus::zvariant::{Array, Dict, ObjectPath, Signature, Str, StructureBuilder, Value};

/// A human name of a D-Bus type, for messages.
pub(crate) fn describe(sig: &Signature) -> String {
    let name = match sig {
        Signature::U8 => "byte",
        Signature::Bool => "boolean",
        Signature::I16 => "16-bit integer",
        Signature::U16 => "unsigned 16-bit integer",
        Signature::I32 => "32-bit integer",
        Signature::U32 => "unsigned 32-bit integer",
        Signature::I64 => "64-bit integer",
        Signature::U64 => "unsigned 64-bit integer",
        Signature::F64 => "number",
        Signature::Str => "string",
        Signature::Signature => "type signature",
        Signature::ObjectPath => "object path",
        Signature::Variant => "variant (any value)",
        Signature::Array(_) => "array",
        Signature::Dict { .. } => "dict (JSON object)",
        Signature::Structure(_) => "struct (JSON array)",
        _ => "value",
    };
    format!("`{sig}` ({name})")
}

/// Converts `json` to a D-Bus value of type `sig`; `at` names the argument (and path
/// inside it) for errors.
pub(super) fn to_dbus(json: &Json, sig: &Signature, at: &str) -> Result<Value<'static>, String> {
    let wrong = || {
        format!(
            "argument `{at}` must be a D-Bus {}, but a JSON {} was given",
            describe(sig),
            json_kind(json)
        )
    };
    let int = |min: i128, max: i128| -> Result<i128, String> {
        let n = json
            .as_i64()
            .map(i128::from)
            .or_else(|| json.as_u64().map(i128::from))
            .ok_or_else(wrong)?;
        if (min..=max).contains(&n) {
            Ok(n)
        } else {
            Err(format!(
                "argument `{at}` is out of range for D-Bus {} ({min} to {max})",
                describe(sig)
            ))
        }
    };
    Ok(match sig {
        Signature::U8 => Value::U8(int(0, 255)? as u8),
        Signature::Bool => Value::Bool(json.as_bool().ok_or_else(wrong)?),
        Signature::I16 => Value::I16(int(i16::MIN.into(), i16::MAX.into())? as i16),
        Signature::U16 => Value::U16(int(0, u16::MAX.into())? as u16),
        Signature::I32 => Value::I32(int(i32::MIN.into(), i32::MAX.into())? as i32),
        Signature::U32 => Value::U32(int(0, u32::MAX.into())? as u32),
        Signature::I64 => Value::I64(int(i64::MIN.into(), i64::MAX.into())? as i64),
        Signature::U64 => Value::U64(int(0, u64::MAX.into())? as u64),
        Signature::F64 => Value::F64(json.as_f64().ok_or_else(wrong)?),
        Signature::Str => Value::Str(Str::from(json.as_str().ok_or_else(wrong)?.to_owned())),
        Signature::ObjectPath => {
            let text = json.as_str().ok_or_else(wrong)?;
            Value::ObjectPath(ObjectPath::try_from(text.to_owned()).map_err(|_| {
                format!("argument `{at}` must be a D-Bus object path such as `/org/example/Item`")
            })?)
        }
        Signature::Signature => {
            let text = json.as_str().ok_or_else(wrong)?;
            Value::Signature(Signature::try_from(text).map_err(|_| {
                format!("argument `{at}` must be a D-Bus type signature such as `a{{sv}}`")
            })?)
        }
        Signature::Variant => Value::Value(Box::new(variant(json, at)?)),
        Signature::Array(child) => {
            if let (Signature::U8, Some(text)) = (&**child, json.as_str()) {
                let mut array = Array::new(child);
                for b in text.bytes() {
                    array.append(Value::U8(b)).map_err(|e| e.to_string())?;
                }
                return Ok(Value::Array(array));
            }
            let items = json.as_array().ok_or_else(wrong)?;
            let mut array = Array::new(child);
            for (i, item) in items.iter().enumerate() {
                let v = to_dbus(item, child, &format!("{at}[{i}]"))?;
                array.append(v).map_err(|e| e.to_string())?;
            }
            Value::Array(array)
        }
        Signature::Dict { key, value } => {
            let map = json.as_object().ok_or_else(wrong)?;
            let mut dict = Dict::new(key, value);
            for (k, v) in map {
                let key_value = dict_key(k, key, at)?;
                let v = to_dbus(v, value, &format!("{at}.{k}"))?;
                dict.append(key_value, v).map_err(|e| e.to_string())?;
            }
            Value::Dict(dict)
        }
        Signature::Structure(fields) => {
            let items = json.as_array().ok_or_else(wrong)?;
            let sigs: Vec<&Signature> = fields.iter().collect();
            if items.len() != sigs.len() {
                return Err(format!(
                    "argument `{at}` must be a JSON array of {} items for D-Bus struct `{sig}`",
                    sigs.len()
                ));
            }
            let mut builder = StructureBuilder::new();
            for (i, (item, s)) in items.iter().zip(sigs).enumerate() {
                builder = builder.append_field(to_dbus(item, s, &format!("{at}[{i}]"))?);
            }
            Value::Structure(builder.build().map_err(|e| e.to_string())?)
        }
        _ => {
            return Err(format!(
                "argument `{at}`: D-Bus type `{sig}` is not supported"
            ));
        }
    })
}

fn dict_key(key: &str, sig: &Signature, at: &str) -> Result<Value<'static>, String> {
    let as_json = match sig {
        Signature::Str | Signature::ObjectPath | Signature::Signature => {
            Json::String(key.to_owned())
        }
        Signature::Bool => Json::Bool(key == "true"),
        Signature::F64 => key
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Json::Number)
            .unwrap_or(Json::Null),
        _ => key
            .parse::<i64>()
            .map(Json::from)
            .or_else(|_| key.parse::<u64>().map(Json::from))
            .unwrap_or(Json::Null),
    };
    to_dbus(&as_json, sig, &format!("{at} key"))
}

/// A variant's content: `{"$type": sig, "value": v}` when given, else inferred.
fn variant(json: &Json, at: &str) -> Result<Value<'static>, String> {
    if let Some(obj) = json.as_object()
        && let (Some(Json::String(ty)), Some(value), 2) =
            (obj.get("$type"), obj.get("value"), obj.len())
    {
        let sig = Signature::try_from(ty.as_str())
            .map_err(|_| format!("argument `{at}`: `$type` `{ty}` is not a D-Bus signature"))?;
        return to_dbus(value, &sig, at);
    }
    let inferred = match json {
        Json::Null => {
            return Err(format!(
                "argument `{at}`: null has no D-Bus type; give `{{\"$type\": …, \"value\": …}}`"
            ));
        }
        Json::Bool(_) => Signature::Bool,
        Json::Number(n) if n.is_i64() && n.as_i64().is_some_and(|v| i32::try_from(v).is_ok()) => {
            Signature::I32
        }
        Json::Number(n) if n.is_i64() => Signature::I64,
        Json::Number(n) if n.is_u64() => Signature::U64,
        Json::Number(_) => Signature::F64,
        Json::String(_) => Signature::Str,
        Json::Array(items) if !items.is_empty() && items.iter().all(Json::is_string) => {
            Signature::Array(Signature::Str.into())
        }
        Json::Array(_) => Signature::Array(Signature::Variant.into()),
        Json::Object(_) => Signature::Dict {
            key: Signature::Str.into(),
            value: Signature::Variant.into(),
        },
    };
    to_dbus(json, &inferred, at)
}

fn json_kind(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

/// Converts a D-Bus value to JSON.
pub(crate) fn to_json(value: &Value<'_>) -> Json {
    match value {
        Value::U8(n) => Json::from(*n),
        Value::Bool(b) => Json::Bool(*b),
        Value::I16(n) => Json::from(*n),
        Value::U16(n) => Json::from(*n),
        Value::I32(n) => Json::from(*n),
        Value::U32(n) => Json::from(*n),
        Value::I64(n) => Json::from(*n),
        Value::U64(n) => Json::from(*n),
        Value::F64(n) => Number::from_f64(*n).map_or(Json::Null, Json::Number),
        Value::Str(s) => Json::String(s.as_str().to_owned()),
        Value::Signature(s) => Json::String(s.to_string()),
        Value::ObjectPath(p) => Json::String(p.as_str().to_owned()),
        Value::Value(inner) => to_json(inner),
        Value::Array(a) => Json::Array(a.iter().map(to_json).collect()),
        Value::Dict(d) => {
            let mut map = Map::new();
            for (k, v) in d.iter() {
                let key = match to_json(k) {
                    Json::String(s) => s,
                    other => other.to_string(),
                };
                map.insert(key, to_json(v));
            }
            Json::Object(map)
        }
        Value::Structure(s) => Json::Array(s.fields().iter().map(to_json).collect()),
        #[cfg(unix)]
        Value::Fd(fd) => Json::from(std::os::fd::AsRawFd::as_raw_fd(fd)),
        #[allow(unreachable_patterns)]
        _ => Json::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sig(s: &str) -> Signature {
        Signature::try_from(s).unwrap()
    }

    fn round(j: Json, s: &str) -> Json {
        let v = to_dbus(&j, &sig(s), "x").unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(v.value_signature().to_string(), s);
        to_json(&v)
    }

    #[test]
    fn every_basic_type_round_trips() {
        for (j, s) in [
            (json!(255), "y"),
            (json!(true), "b"),
            (json!(-32768), "n"),
            (json!(65535), "q"),
            (json!(-5), "i"),
            (json!(4_000_000_000u64), "u"),
            (json!(-9_000_000_000i64), "x"),
            (json!(u64::MAX), "t"),
            (json!(1.5), "d"),
            (json!("héllo"), "s"),
            (json!("/org/mpris/MediaPlayer2"), "o"),
            (json!("a{sv}"), "g"),
        ] {
            assert_eq!(round(j.clone(), s), j, "{s}");
        }
    }

    #[test]
    fn containers_round_trip() {
        assert_eq!(round(json!(["a", "b"]), "as"), json!(["a", "b"]));
        assert_eq!(round(json!([]), "as"), json!([]));
        assert_eq!(round(json!({"k": "v"}), "a{ss}"), json!({"k": "v"}));
        assert_eq!(round(json!({"1": 2}), "a{ui}"), json!({"1": 2}));
        assert_eq!(
            round(json!([1, "two", [true]]), "(isab)"),
            json!([1, "two", [true]])
        );
        assert_eq!(round(json!([[1, 2], [3]]), "aai"), json!([[1, 2], [3]]));
        assert_eq!(round(json!("hi"), "ay"), json!([104, 105]));
        let hints = to_dbus(&json!({"urgency": {"$type": "y", "value": 2}, "category": "im", "n": 7, "list": ["a"], "nested": {"x": 1.5}}), &sig("a{sv}"), "hints").unwrap();
        let Value::Dict(d) = &hints else { panic!() };
        let kinds: Vec<String> = d
            .iter()
            .map(|(_, v)| match v {
                Value::Value(inner) => inner.value_signature().to_string(),
                other => other.value_signature().to_string(),
            })
            .collect();
        assert_eq!(
            kinds,
            ["s", "as", "i", "a{sv}", "y"],
            "category, list, n, nested, urgency"
        );
        assert_eq!(
            to_json(&hints),
            json!({"urgency": 2, "category": "im", "n": 7, "list": ["a"], "nested": {"x": 1.5}})
        );
    }

    #[test]
    fn errors_name_the_argument_and_the_type_never_the_value() {
        let e = |j: Json, s: &str| to_dbus(&j, &sig(s), "volume").unwrap_err();
        assert_eq!(
            e(json!("loud"), "d"),
            "argument `volume` must be a D-Bus `d` (number), but a JSON string was given"
        );
        assert_eq!(
            e(json!(256), "y"),
            "argument `volume` is out of range for D-Bus `y` (byte) (0 to 255)"
        );
        assert_eq!(
            e(json!(-1), "u"),
            "argument `volume` is out of range for D-Bus `u` (unsigned 32-bit integer) (0 to 4294967295)"
        );
        assert_eq!(
            e(json!(["x", 1]), "as"),
            "argument `volume[1]` must be a D-Bus `s` (string), but a JSON number was given"
        );
        assert_eq!(
            e(json!({"a": "x"}), "a{si}"),
            "argument `volume.a` must be a D-Bus `i` (32-bit integer), but a JSON string was given"
        );
        assert_eq!(
            e(json!([1]), "(ii)"),
            "argument `volume` must be a JSON array of 2 items for D-Bus struct `(ii)`"
        );
        assert_eq!(
            e(json!("not a path"), "o"),
            "argument `volume` must be a D-Bus object path such as `/org/example/Item`"
        );
        assert!(e(json!(null), "v").contains("null has no D-Bus type"));
        assert!(e(json!({"$type": "zz", "value": 1}), "v").contains("is not a D-Bus signature"));
    }
}
