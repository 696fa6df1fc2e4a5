//! Tests of `http.rs`.

use super::*;
use serde_json::json;

fn build_url(
    base: &str,
    path: &str,
    args: &mut Map<String, Value>,
    method: HttpMethod,
) -> Result<Url, Error> {
    let binding = Binding {
        method,
        path,
        headers: &[],
        query: &[],
        body: None,
    };
    let wire = Wire::new(base, &binding, std::mem::take(args))?;
    if let Some(Value::Object(rest)) = wire.body {
        *args = rest;
    }
    Ok(wire.url)
}

fn url(path: &str, args: Value, method: HttpMethod) -> (String, Value) {
    let mut map = args.as_object().unwrap().clone();
    let u = build_url("http://127.0.0.1:8080/api/", path, &mut map, method).unwrap();
    (u.to_string(), Value::Object(map))
}

#[test]
fn query_names_headers_and_a_body_argument_place_each_argument() {
    let headers = [
        ("X-Request-Id".to_owned(), "{requestId}".to_owned()),
        ("X-Trace".to_owned(), "t-{trace}".to_owned()),
        ("X-Json".to_owned(), "{\"a\":1}".to_owned()),
    ];
    let query = ["status".to_owned()];
    let binding = Binding {
        method: HttpMethod::Post,
        path: "/pets/{id}",
        headers: &headers,
        query: &query,
        body: Some("pet"),
    };
    let args = json!({"id": 7, "requestId": "r1", "status": ["a", "b"],
                          "pet": [1, 2], "dryRun": true});
    let wire = Wire::new(
        "http://127.0.0.1:9/v1",
        &binding,
        args.as_object().unwrap().clone(),
    )
    .unwrap();
    assert_eq!(
        wire.url.as_str(),
        "http://127.0.0.1:9/v1/pets/7?status=a&status=b&dryRun=true"
    );
    // The header of an absent argument is left out; braces that are no name stay.
    assert_eq!(
        wire.headers,
        vec![
            ("X-Request-Id".to_owned(), "r1".to_owned()),
            ("X-Json".to_owned(), "{\"a\":1}".to_owned())
        ]
    );
    assert_eq!(wire.body, Some(json!([1, 2])));

    // Without `body`, a POST sends the rest as an object; `query` names still go up.
    let binding = Binding {
        body: None,
        ..binding
    };
    let args = json!({"id": 7, "status": "s", "name": "Rex"});
    let wire = Wire::new(
        "http://127.0.0.1:9/v1",
        &binding,
        args.as_object().unwrap().clone(),
    )
    .unwrap();
    assert_eq!(wire.url.as_str(), "http://127.0.0.1:9/v1/pets/7?status=s");
    assert_eq!(wire.body, Some(json!({"name": "Rex"})));

    // A header argument may not smuggle a second header.
    let args = json!({"id": 7, "requestId": "r\r\nX-Evil: 1"});
    let e = Wire::new(
        "http://127.0.0.1:9/v1",
        &binding,
        args.as_object().unwrap().clone(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::HeaderLineBreak { .. }), "{e}");
    let wire = GatewayError::from(e);
    assert_eq!(wire.code, Code::InvalidParams);
    assert!(wire.detail.contains("line breaks"), "{wire}");
    assert_eq!(wire.data()["field"], "/requestId");
}

#[test]
fn path_segments_are_encoded_and_taken_from_the_arguments() {
    let (u, rest) = url(
        "/repos/{ns}/docs/{slug}",
        json!({"ns": "a b/c?d", "slug": 7, "x": 1}),
        HttpMethod::Post,
    );
    assert_eq!(u, "http://127.0.0.1:8080/api/repos/a%20b%2Fc%3Fd/docs/7");
    assert_eq!(rest, json!({"x": 1}));
}

#[test]
fn get_and_delete_put_the_rest_in_the_query() {
    let (u, rest) = url(
        "/items/{id}",
        json!({"id": "é", "tag": ["a", "b&c"], "n": 2, "skip": null, "f": {"k": 1}}),
        HttpMethod::Delete,
    );
    assert_eq!(
        u,
        "http://127.0.0.1:8080/api/items/%C3%A9?tag=a&tag=b%26c&n=2&f=%7B%22k%22%3A1%7D"
    );
    assert_eq!(rest, json!({}));
}

#[test]
fn dot_segments_never_climb_out_of_the_base_path() {
    let base = "https://api.example.com/api/v2";
    let attempt = |path: &str, args: Value| {
        let Value::Object(mut m) = args else { panic!() };
        build_url(base, path, &mut m, HttpMethod::Delete)
    };
    for args in [json!({"id": ".."}), json!({"id": "."})] {
        let e = attempt("/users/{id}/sessions", args).unwrap_err();
        assert!(matches!(e, Error::DotSegment), "{e}");
    }
    let e = attempt("/{a}/{b}/{c}", json!({"a": "..", "b": "..", "c": ".."})).unwrap_err();
    assert_eq!(GatewayError::from(e).code, Code::InvalidParams);
    // Two arguments that only together make `..`.
    let e = attempt("/files/{a}{b}", json!({"a": ".", "b": "."})).unwrap_err();
    assert!(matches!(e, Error::DotSegment), "{e}");
    // Dots inside a segment, and encoded slashes, stay data under the base path.
    let ok = attempt("/files/{a}", json!({"a": "../etc/passwd"})).unwrap();
    assert_eq!(
        ok.as_str(),
        "https://api.example.com/api/v2/files/..%2Fetc%2Fpasswd"
    );
    let ok = attempt("/files/{a}", json!({"a": "a..b"})).unwrap();
    assert_eq!(ok.path(), "/api/v2/files/a..b");
    assert!(is_dot_segment("%2E%2e") && is_dot_segment(".%2E") && !is_dot_segment("..."));
}

#[test]
fn path_arguments_must_be_present_and_scalar() {
    let mut args = json!({"id": {"no": 1}}).as_object().unwrap().clone();
    let e = build_url("http://x.test", "/i/{id}", &mut args, HttpMethod::Get).unwrap_err();
    assert!(matches!(e, Error::PathNotScalar(ref n) if n == "id"), "{e}");
    let mut args = Map::new();
    let e = build_url("http://x.test", "/i/{id}", &mut args, HttpMethod::Get).unwrap_err();
    assert!(e.to_string().contains("missing argument `id`"));
}

#[test]
fn statuses_become_the_documented_codes() {
    let status = |n: u16, retry: Option<u64>| {
        GatewayError::from(Error::Status {
            status: StatusCode::from_u16(n).unwrap(),
            excerpt: if n == 500 { String::new() } else { "no".into() },
            retry_after: retry.map(Duration::from_secs),
        })
    };
    for (n, code) in [
        (400, Code::InvalidParams),
        (422, Code::InvalidParams),
        (401, Code::AuthRequired),
        (403, Code::AuthDenied),
        (404, Code::NotFound),
        (429, Code::RateLimited),
        (500, Code::ServiceUnavailable),
        (503, Code::ServiceUnavailable),
        (418, Code::AutomationFailed),
    ] {
        assert_eq!(status(n, None).code, code, "{n}");
    }
    let e = status(429, Some(3));
    assert_eq!(e.detail, "HTTP 429 Too Many Requests: no");
    assert_eq!(
        (
            e.data()["httpStatus"].clone(),
            e.data()["retryAfterSecs"].clone()
        ),
        (json!(429), json!(3))
    );
    assert_eq!(status(500, None).detail, "HTTP 500 Internal Server Error");
    let refused = Error::Transport {
        detail: "refused".into(),
        connect: true,
    };
    assert_eq!(GatewayError::from(refused).code, Code::ServiceUnavailable);
    let unauthorized = Error::Status {
        status: StatusCode::UNAUTHORIZED,
        excerpt: String::new(),
        retry_after: None,
    };
    assert!(unauthorized.unauthorized() && !Error::Cancelled.unauthorized());
}
