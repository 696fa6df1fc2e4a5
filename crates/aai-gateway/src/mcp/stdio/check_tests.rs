//! Tests of `check.rs`.

use super::*;

fn verdict(line: &str) -> Result<(), Option<Value>> {
    let flight = Mutex::new(HashMap::new());
    check(line.as_bytes(), &flight)
        .map(drop)
        .map_err(|a| a.map(|a| serde_json::from_str(&a).unwrap()))
}

#[test]
fn broken_lines_are_answered_with_their_id() {
    let e = verdict(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list""#)
        .unwrap_err()
        .unwrap();
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!(7), json!(-32700))
    );
    let e = verdict(r#"{"id":"a\"b","jsonrpc":2"#).unwrap_err().unwrap();
    assert_eq!(e["id"], json!("a\"b"));
    let e = verdict("not json").unwrap_err().unwrap();
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32700))
    );
    let e = verdict(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
        .unwrap_err()
        .unwrap();
    assert_eq!(e["error"]["code"], -32600);
    let e = verdict(r#"{"id":3,"method":"ping"}"#).unwrap_err().unwrap();
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!(3), json!(-32600))
    );
    let e = verdict(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"x"}"#)
        .unwrap_err()
        .unwrap();
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!(4), json!(-32602))
    );
    let e = verdict(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":1}}"#)
        .unwrap_err()
        .unwrap();
    assert_eq!(e["error"]["code"], -32602);
    let e = verdict(r#"{"jsonrpc":"2.0","id":6,"method":"initialize","params":{}}"#)
        .unwrap_err()
        .unwrap();
    assert_eq!(e["error"]["code"], -32602);
    assert_eq!(
        verdict(r#"{"jsonrpc":"2.0","method":"notifications/x"}"#),
        Ok(())
    );
    assert_eq!(
        verdict(r#"{"jsonrpc":2,"method":"notifications/x""#)
            .unwrap_err()
            .unwrap()["id"],
        Value::Null
    );
    assert_eq!(verdict("   "), Err(None));
    assert_eq!(
        verdict(r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"aai_exec"}}"#),
        Ok(())
    );
}

#[test]
fn only_the_top_level_id_is_recovered() {
    assert_eq!(
        recover_id(r#"{"method":"tools/call","params":{"arguments":{"id":666}},"id":7,"#),
        Some(json!(7))
    );
    assert_eq!(recover_id(r#"{"params":{"id":1}"#), None);
    assert_eq!(
        recover_id(r#"{"x":"\"id\": 5","id":"a\"b"}"#),
        Some(json!("a\"b"))
    );
    assert_eq!(
        recover_id(r#"{"id": 12, "jsonrpc":"2.0","params":{"x":"#),
        Some(json!(12))
    );
    // A float or a number past 64 bits is answered with the id as sent.
    for id in ["1.5", "18446744073709551616"] {
        let line =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"_meta":5}}}}"#);
        let answer = check(line.as_bytes(), &Mutex::default())
            .unwrap_err()
            .unwrap();
        assert!(
            answer.starts_with(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32600,"#
            )),
            "{answer}"
        );
        serde_json::from_str::<Value>(&answer).unwrap();
    }
}

#[test]
fn a_meta_that_is_not_an_object_is_answered_with_the_requests_id() {
    for (line, id) in [
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":5}}"#,
            json!(2),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"m","method":"tools/list","params":{"_meta":[]}}"#,
            json!("m"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"foo/bar","params":{"_meta":"x"}}"#,
            json!(3),
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"aai_search","_meta":true}}"#,
            json!(4),
        ),
    ] {
        let e = verdict(line).unwrap_err().unwrap();
        assert_eq!(
            (
                &e["id"],
                &e["error"]["code"],
                e["error"]["message"].as_str()
            ),
            (
                &id,
                &json!(-32602),
                Some("Invalid params: `_meta` must be an object")
            ),
            "{line}"
        );
    }
    // A notification is never answered: one rmcp would answer is dropped.
    assert_eq!(
        verdict(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"_meta":5,"requestId":3}}"#
        ),
        Err(None)
    );
    // An object, null, or a top-level `_meta` (JSON-RPC's, not MCP's) passes.
    for line in [
        r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":{"_meta":{"progressToken":1}}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"ping","params":{"_meta":null}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"ping","_meta":5}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"_meta":{},"requestId":3}}"#,
    ] {
        assert_eq!(verdict(line), Ok(()), "{line}");
    }
}

#[test]
fn an_id_that_is_no_json_number_is_not_recovered() {
    let e = verdict(r#"{"jsonrpc":"2.0","id":01,"method":"ping"}"#)
        .unwrap_err()
        .unwrap();
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32700))
    );
    for (raw, id) in [
        ("01", None),
        ("+1", None),
        ("-01", None),
        ("1e2", None),
        ("0x1", None),
        // serde_json (and so rmcp) reads `-0` as a float, not an integer id.
        ("-0", None),
        ("-12", Some(json!(-12))),
        ("9223372036854775807", Some(json!(i64::MAX))),
        ("9223372036854775808", None),
        (r#""01""#, Some(json!("01"))),
    ] {
        assert_eq!(id_value(raw), id, "{raw}");
    }
}

#[test]
fn a_duplicate_id_in_flight_is_refused_until_answered() {
    let flight = Mutex::new(HashMap::new());
    let req = br#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#;
    assert!(check(req, &flight).is_ok());
    assert!(check(req, &flight).is_err());
    let id = response_id(br#"{"jsonrpc":"2.0","id":9,"result":{}}"#).unwrap();
    flight.lock().unwrap().remove(&id);
    assert!(check(req, &flight).is_ok());
    assert_eq!(
        response_id(br#"{"jsonrpc":"2.0","id":1,"method":"roots/list"}"#),
        None
    );
}
