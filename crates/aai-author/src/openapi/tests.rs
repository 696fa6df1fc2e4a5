use super::*;

fn import_yaml(text: &str) -> Import {
    let doc = parse(text).unwrap();
    let import = import(&doc, Options::default()).unwrap();
    let text = serde_json::to_string(&import.descriptor).unwrap();
    let parsed = aai_descriptor::parse(&text, "imported");
    assert!(parsed.app.is_some(), "{:#?}", parsed.diagnostics);
    import
}

fn tool<'a>(import: &'a Import, name: &str) -> &'a Value {
    import.descriptor["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

const SHOP: &str = r##"
openapi: 3.0.3
info: { title: "Shop API", version: "2.1.0", description: "Sells things.\n\nMore text." }
servers: [{ url: "https://{region}.shop.example.com/v1", variables: { region: { default: eu } } }]
security: [{ bearer: [] }]
components:
  securitySchemes:
    bearer: { type: http, scheme: bearer }
    key: { type: apiKey, in: query, name: api_key }
  parameters:
    Limit: { name: limit, in: query, schema: { type: integer, minimum: 1, maximum: 100, exclusiveMaximum: true } }
  schemas:
    Node:
      type: object
      properties:
        id: { type: string, readOnly: true }
        name: { type: string, nullable: true }
        children: { type: array, items: { $ref: "#/components/schemas/Node" } }
      required: [id, name]
paths:
  /items/{itemId}:
    parameters:
      - { name: itemId, in: path, required: true, schema: { type: string } }
    get:
      operationId: get item
      parameters:
        - $ref: "#/components/parameters/Limit"
        - { name: X-Trace-Id, in: header, schema: { type: string } }
        - { name: session, in: cookie, schema: { type: string } }
      responses:
        200:
          description: ok
          content: { application/json: { schema: { $ref: "#/components/schemas/Node" } } }
    post:
      parameters:
        - { name: dryRun, in: query, schema: { type: boolean } }
      requestBody:
        required: true
        content: { application/json: { schema: { $ref: "#/components/schemas/Node" } } }
      responses: { 201: { description: created } }
    put:
      parameters:
        - { name: name, in: query, schema: { type: string } }
      requestBody:
        content: { application/json: { schema: { $ref: "#/components/schemas/Node" } } }
      responses: { 204: { description: done } }
  /upload:
    post:
      operationId: upload
      requestBody:
        required: true
        content: { multipart/form-data: { schema: { type: object } } }
      responses: { 200: { description: ok } }
  /tags:
    get:
      tags: [meta]
      responses: { 200: { description: ok } }
    options:
      responses: { 200: { description: ok } }
"##;

#[test]
fn a_yaml_document_becomes_a_valid_web_descriptor() {
    let i = import_yaml(SHOP);
    let d = &i.descriptor;
    assert_eq!(i.id, "com.example.shop.eu");
    assert_eq!(d["execution"]["baseUrl"], "https://eu.shop.example.com/v1");
    assert_eq!(d["version"], "2.1.0");
    assert_eq!(d["app"]["description"], "Sells things.");
    assert_eq!(
        d["auth"]["apiKey"],
        json!({"location": "header", "name": "Authorization", "prefix": "Bearer",
                   "obtainUrl": "https://eu.shop.example.com/"})
    );

    // operationId made a tool name; path-level, $ref and header parameters; the
    // cookie parameter is not sent; 3.0's exclusiveMaximum flag is draft-07's number.
    let get = tool(&i, "get_item");
    assert_eq!(get["execution"]["path"], "/items/{itemId}");
    assert_eq!(get["execution"]["method"], "GET");
    assert_eq!(
        get["execution"]["headers"],
        json!({"X-Trace-Id": "{X-Trace-Id}"})
    );
    assert_eq!(
        get["parameters"]["properties"]["limit"],
        json!({"type": "integer", "minimum": 1, "exclusiveMaximum": 100})
    );
    assert_eq!(get["parameters"]["required"], json!(["itemId"]));
    assert!(get["parameters"]["properties"].get("session").is_none());
    // The recursive schema stops at a stub; nullable became a type union.
    let returns = &get["returns"];
    assert_eq!(
        returns["properties"]["name"]["type"],
        json!(["string", "null"])
    );
    let stub = &returns["properties"]["children"]["items"];
    assert_eq!(stub["type"], "object");
    assert!(stub["description"].as_str().unwrap().contains("Node"));

    // POST: the object body is flattened (readOnly `id` left out), the query
    // parameter listed in `query`; the name is made from method + path.
    let post = tool(&i, "post_items_itemId");
    assert_eq!(post["execution"]["query"], json!(["dryRun"]));
    assert!(post["execution"].get("body").is_none());
    let props = post["parameters"]["properties"].as_object().unwrap();
    assert!(props.contains_key("name") && props.contains_key("children"));
    assert!(!props.contains_key("id"));
    assert_eq!(post["parameters"]["required"], json!(["itemId", "name"]));

    // PUT: the body's `name` collides with the query parameter: one `body` argument.
    let put = tool(&i, "put_items_itemId");
    assert_eq!(put["execution"]["body"], "body");
    assert!(put["parameters"]["properties"]["body"]["properties"].is_object());
    assert_eq!(put["parameters"]["required"], json!(["itemId"]));

    // A required multipart body and OPTIONS are left out, with notes.
    let names: Vec<&str> = d["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "get_item",
            "post_items_itemId",
            "put_items_itemId",
            "get_tags"
        ]
    );
    let notes = i.notes.join("\n");
    assert!(
        notes.contains("POST /upload: its request body is multipart/form-data"),
        "{notes}"
    );
    assert!(notes.contains("cookie parameter `session`"), "{notes}");
    assert!(notes.contains("OPTIONS /tags"), "{notes}");
}

#[test]
fn only_imports_a_tag_or_an_operation_and_names_what_matches_nothing() {
    let doc = parse(SHOP).unwrap();
    let only = ["meta".to_owned(), "get item".to_owned()];
    let i = import(
        &doc,
        Options {
            only: &only,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(i.tools, 2);
    let only = ["nope".to_owned()];
    let e = import(
        &doc,
        Options {
            only: &only,
            ..Options::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("`nope` is neither a tag nor an operationId"),
        "{e}"
    );
}

#[test]
fn paths_with_dot_segments_are_left_out() {
    let doc = parse(
            r#"{"openapi":"3.1.0","info":{"title":"T","version":"x"},"servers":[{"url":"https://api.example.com"}],
               "paths":{"/a/../admin":{"get":{"operationId":"sneak","responses":{}}},
                        "/a/%2E/b":{"get":{"operationId":"sneak2","responses":{}}},
                        "/ok":{"get":{"operationId":"fine","responses":{}}}}}"#,
        )
        .unwrap();
    let i = import(&doc, Options::default()).unwrap();
    let names: Vec<&str> = i.descriptor["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["fine"]);
    assert!(
        i.notes
            .iter()
            .any(|n| n.starts_with("/a/../admin: the path has the dot segment `..`")),
        "{:?}",
        i.notes
    );
}

#[test]
fn servers_must_be_absolute_https_or_loopback() {
    let doc = |server: &str| {
        parse(&format!(
                r#"{{"openapi":"3.1.0","info":{{"title":"T","version":"x"}},"servers":[{{"url":"{server}"}}],
                   "paths":{{"/a":{{"get":{{"responses":{{}}}}}}}}}}"#
            ))
            .unwrap()
    };
    let e = import(&doc("/api/v3"), Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("relative") && e.contains("--base-url"), "{e}");
    let i = import(
        &doc("/api/v3"),
        Options {
            source_url: Some("https://docs.example.org/spec/openapi.json"),
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(
        i.descriptor["execution"]["baseUrl"],
        "https://docs.example.org/api/v3"
    );
    assert_eq!(i.descriptor["version"], "1.0.0");
    let e = import(&doc("http://api.example.com"), Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not https"), "{e}");
    let i = import(&doc("http://127.0.0.1:4010"), Options::default()).unwrap();
    assert_eq!(i.id, "local.t");
    let i = import(
        &doc("http://127.0.0.1:4010"),
        Options {
            base_url: Some("https://api.example.net/"),
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(
        i.descriptor["execution"]["baseUrl"],
        "https://api.example.net"
    );
}

#[test]
fn oauth2_authorization_code_becomes_pkce_and_other_flows_are_named() {
    let text = r#"
openapi: 3.0.0
info: { title: T, version: 1.0.0 }
servers: [{ url: "https://api.example.com" }]
components:
  securitySchemes:
    implicit: { type: oauth2, flows: { implicit: { authorizationUrl: "https://a.example.com/auth", scopes: {} } } }
    code:
      type: oauth2
      flows:
        authorizationCode:
          authorizationUrl: /oauth/authorize
          tokenUrl: https://auth.example.com/token
          scopes: { read: Read, write: Write }
paths:
  /a: { get: { security: [{ code: [read] }], responses: {} } }
  /b: { get: { security: [{ code: [read] }], responses: {} } }
  /c: { get: { operationId: c, security: [{ implicit: [] }], responses: {} } }
"#;
    let i = import_yaml(text);
    assert_eq!(
        i.descriptor["auth"],
        json!({"type": "oauth2", "oauth2": {
                "authorizationEndpoint": "https://api.example.com/oauth/authorize",
                "tokenEndpoint": "https://auth.example.com/token",
                "scopes": ["read"], "pkce": {"method": "S256"}}})
    );
    let notes = i.notes.join("\n");
    assert!(notes.contains("apps.com.example.api.clientId"), "{notes}");
    // A flow the gateway does not run: the user pastes a token, sent as a bearer.
    let only = ["c".to_owned()];
    let i = import(
        &parse(text).unwrap(),
        Options {
            only: &only,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(i.descriptor["auth"]["apiKey"]["name"], "Authorization");
    assert_eq!(i.descriptor["auth"]["apiKey"]["prefix"], "Bearer");
    assert_eq!(
        i.descriptor["auth"]["apiKey"]["obtainUrl"],
        "https://a.example.com/auth"
    );
    assert!(
        i.notes.join("\n").contains("auth set com.example.api"),
        "{:?}",
        i.notes
    );
}

#[test]
fn errors_say_what_went_wrong() {
    for (text, kind) in [
        ("swagger: '2.0'\ninfo: {title: x}", ErrorKind::Swagger),
        ("openapi: 4.0.0", ErrorKind::Version),
        ("info: {title: x}", ErrorKind::NotOpenApi),
        ("[1, 2]", ErrorKind::NotAnObject),
        ("{\"openapi\": ", ErrorKind::Json),
        ("a: [unclosed", ErrorKind::Yaml),
        (
            "openapi: 3.1.0\ninfo: {title: T}\npaths: {}",
            ErrorKind::BaseUrl,
        ),
        (
            "openapi: 3.1.0\ninfo: {title: T}\nservers: [{url: 'https://a.example.com'}]\npaths: {}",
            ErrorKind::NoOperations,
        ),
    ] {
        let e = parse(text).and_then(|d| import(&d, Options::default()).map(|_| ()));
        assert_eq!(e.unwrap_err().kind(), kind, "{text}");
    }
}

#[test]
fn hostile_documents_fail_clearly() {
    for (text, needle) in [
        ("swagger: '2.0'\ninfo: {title: x}", "Swagger 2.0"),
        ("openapi: 4.0.0", "not supported"),
        ("[1, 2]", "is a JSON/YAML object"),
        ("{\"openapi\": ", "invalid JSON"),
        ("a: [unclosed", "invalid YAML"),
    ] {
        let e = parse(text).and_then(|d| import(&d, Options::default()).map(|_| ()));
        let e = e.unwrap_err().to_string();
        assert!(e.contains(needle), "{text}: {e}");
    }
    // Alias expansion is bounded: a "billion laughs" document is refused, not expanded.
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let prev = (b'a' + i - 1) as char;
        let this = (b'a' + i) as char;
        bomb.push_str(&format!(
                "{this}: &{this} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
            ));
    }
    assert!(parse(&bomb).is_err());
    // References that loop, point nowhere or outside are cut, never followed forever.
    let text = r##"
openapi: 3.1.0
info: { title: T, version: 1.0.0 }
servers: [{ url: "https://api.example.com" }]
components:
  schemas:
    A: { $ref: "#/components/schemas/B" }
    B: { $ref: "#/components/schemas/A" }
    "With Space/Slash": { type: integer }
paths:
  /a:
    post:
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                loop: { $ref: "#/components/schemas/A" }
                gone: { $ref: "#/components/schemas/Missing" }
                far: { $ref: "other.yaml#/X" }
                spaced: { $ref: "#/components/schemas/With%20Space~1Slash" }
      responses: {}
"##;
    let i = import_yaml(text);
    let notes = i.notes.join("\n");
    // Percent-encoded and `~1`-escaped pointers resolve.
    assert_eq!(
        tool(&i, "post_a")["parameters"]["properties"]["spaced"],
        json!({"type": "integer"})
    );
    assert!(
        notes.contains("points at nothing") && notes.contains("outside the document"),
        "{notes}"
    );
    // 3.1 boolean schemas and type arrays pass through.
    let text = r##"
openapi: 3.1.0
info: { title: T, version: 1.0.0 }
servers: [{ url: "https://api.example.com" }]
paths:
  /a:
    patch:
      requestBody:
        required: true
        content: { application/merge-patch+json: { schema: { type: [object, "null"], additionalProperties: true } } }
      responses: {}
"##;
    let i = import_yaml(text);
    let t = tool(&i, "patch_a");
    assert_eq!(t["execution"]["body"], "body");
    assert_eq!(t["parameters"]["required"], json!(["body"]));
}

#[test]
fn tool_names_are_unique_and_fit_mcp_clients() {
    let long = "x".repeat(80);
    let text = format!(
        r#"{{"openapi":"3.0.0","info":{{"title":"T","version":"1.0.0"}},"servers":[{{"url":"https://a.example.com"}}],
               "paths":{{"/a":{{"get":{{"operationId":"{long}","responses":{{}}}},"put":{{"operationId":"{long}","responses":{{}}}},
                              "post":{{"operationId":"list/users (v2)","responses":{{}}}}}}}}}}"#
    );
    let i = import_yaml(&text);
    let names: Vec<&str> = i.descriptor["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[0].len(), 64);
    assert_eq!(names[1], format!("{}_2", "x".repeat(62)));
    assert_eq!(names[2], "list_users__v2_");
}

/// `n` schemas, each referring to all `n`.
fn fanning_schemas(n: usize) -> Map<String, Value> {
    (0..n)
        .map(|i| {
            let props: Map<String, Value> = (0..n)
                .map(|j| {
                    (
                        format!("p{j}"),
                        json!({"$ref": format!("#/components/schemas/S{j}")}),
                    )
                })
                .collect();
            (
                format!("S{i}"),
                json!({"type": "object", "properties": props}),
            )
        })
        .collect()
}

#[test]
fn fanning_references_stay_bounded() {
    // Nine schemas, each referring to all nine: without a budget, depth 8 would
    // expand 9!/1! paths.
    let schemas = fanning_schemas(9);
    let doc = json!({"openapi": "3.0.0", "info": {"title": "Fan", "version": "1.0.0"},
            "servers": [{"url": "https://api.example.com"}],
            "components": {"schemas": schemas},
            "paths": {"/a": {"post": {
                "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}},
                "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/S1"}}}}}}}}});
    let started = std::time::Instant::now();
    let i = import(&doc, Options::default()).unwrap();
    let size = i.descriptor.to_string().len();
    assert!(size < 2_000_000, "{size} bytes");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn the_whole_import_expands_a_bounded_number_of_nodes() {
    // Few schemas that all refer to each other, used by many operations: each
    // operation alone stays within its own budget, but together they would make a
    // descriptor many times the document.
    let schemas = fanning_schemas(9);
    let body =
        json!({"content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}});
    let paths: Map<String, Value> = (0..150)
        .map(|p| {
            (
                format!("/a{p}"),
                json!({"post": {"requestBody": body, "responses": {}}}),
            )
        })
        .collect();
    let doc = json!({"openapi": "3.0.0", "info": {"title": "Fan", "version": "1.0.0"},
            "servers": [{"url": "https://api.example.com"}],
            "components": {"schemas": schemas}, "paths": paths});
    assert!(nodes(&doc) * 2 < MIN_TOTAL_NODES);
    let i = import(&doc, Options::default()).unwrap();
    let tools = i.descriptor["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 150, "every operation is still a tool");
    let expanded = nodes(&i.descriptor);
    assert!(
        expanded < MIN_TOTAL_NODES + 2 * MAX_SCHEMA_NODES,
        "{expanded} objects"
    );
    assert!(
        i.notes
            .iter()
            .any(|n| n.contains("stubs that name their schema")),
        "{:?}",
        i.notes
    );
    let last = &tools[149]["parameters"];
    assert!(
        last.to_string()
            .contains("a S0 (see the API's documentation)"),
        "{last}"
    );
}

#[test]
fn query_names_go_on_the_wire_as_written_and_framing_headers_are_refused() {
    let text = r#"
openapi: 3.0.0
info: { title: T, version: 1.0.0 }
servers: [{ url: "https://api.example.com" }]
paths:
  /items/{id}:
    get:
      operationId: list
      parameters:
        - { name: id, in: path, required: true, schema: { type: string } }
        - { name: "filter[status]", in: query, schema: { type: string } }
        - { name: "a b", in: query, schema: { type: string } }
        - { name: id, in: query, schema: { type: string } }
        - { name: Content-Length, in: header, schema: { type: string } }
        - { name: Host, in: header, schema: { type: string } }
        - { name: X-Request-Id, in: header, schema: { type: string } }
      responses: {}
  /must:
    get:
      parameters: [{ name: Transfer-Encoding, in: header, required: true, schema: { type: string } }]
      responses: {}
"#;
    let i = import_yaml(text);
    let t = tool(&i, "list");
    let props: Vec<&String> = t["parameters"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(props, ["id", "filter[status]", "a b", "X-Request-Id"]);
    assert_eq!(
        t["execution"]["headers"],
        json!({"X-Request-Id": "{X-Request-Id}"})
    );
    let notes = i.notes.join("\n");
    assert!(
        notes.contains("query parameter `id` has the name of another parameter; not sent"),
        "{notes}"
    );
    assert!(
        notes.contains("`Content-Length` is set by the HTTP client"),
        "{notes}"
    );
    assert!(
        notes.contains("GET /must: header parameter: `Transfer-Encoding`"),
        "{notes}"
    );
    assert_eq!(i.tools, 1);
}

#[test]
fn servers_with_open_variables_or_credentials_are_refused() {
    let doc = |server: &str| {
        json!({"openapi": "3.1.0", "info": {"title": "T", "version": "1.0.0"},
                   "servers": [{"url": server, "variables": {"v": {"default": "v1"}}}],
                   "paths": {"/a": {"get": {"responses": {}}}}})
    };
    let e = import(&doc("https://{host}/{v}"), Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("variable `host` without a default"), "{e}");
    let e = import(&doc("https://u:p@api.example.com/{v}"), Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("user name or password"), "{e}");
    let i = import(&doc("https://api.example.com./{v}"), Options::default()).unwrap();
    assert_eq!(i.id, "com.example.api");
    assert_eq!(
        i.descriptor["execution"]["baseUrl"],
        "https://api.example.com./v1"
    );
}
