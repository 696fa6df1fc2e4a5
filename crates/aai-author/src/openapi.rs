//! `import openapi`: an OpenAPI 3.0 or 3.1 document (JSON or YAML) becomes one web
//! descriptor (camelCase form, `execution.type` `http`).
//!
//! * Operations → tools, named by `operationId` (else method + path), made unique and
//!   fit for MCP clients (1–64 of `A-Z a-z 0-9 _ - .`).
//! * Path, query and header parameters and a JSON request body → one parameters schema.
//!   A body that is an object whose properties do not collide with the parameters is
//!   flattened into the arguments; any other body is one argument named by the tool's
//!   `execution.body`. Query parameters of POST/PUT/PATCH are listed in
//!   `execution.query`, header parameters become `{name}` placeholders of
//!   `execution.headers`. Cookie parameters are not sent (a note says so).
//! * Local `$ref`s are resolved; a recursive or very deep reference stops at a stub that
//!   names it. OpenAPI 3.0's `nullable`, boolean `exclusiveMinimum`/`Maximum` and
//!   `example` become their draft-07 forms; keywords JSON Schema does not know are dropped.
//! * The first 2xx (else `default`) JSON response → `returns` (inlined less deeply when
//!   it would pass 16 KiB).
//! * Security: the most used scheme that maps — `apiKey` in a header or the query, `http`
//!   bearer (→ apiKey `Authorization` with prefix `Bearer`), `oauth2` authorizationCode
//!   (→ oauth2 with PKCE). Others are named in a note.
//!   Other OAuth2 flows become a bearer token the user pastes (`auth set`).
//! * `servers[0]` (variables at their defaults) → `baseUrl`; a relative server is taken
//!   relative to the document's URL. Requests ask for JSON (`Accept: application/json`):
//!   APIs that also speak XML answer in their first media type otherwise.
//!
//! Pure: text in, descriptor out. Reading files and URLs is `cli::import`'s.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

/// Largest document read (GitHub's whole REST API is about 12 MiB of JSON).
pub const MAX_DOCUMENT: usize = 64 * 1024 * 1024;

/// How deep `$ref`s are followed inside one parameters schema.
const PARAMS_DEPTH: usize = 8;
/// How deep `$ref`s are followed inside one `returns` schema (results are only read).
const RETURNS_DEPTH: usize = 3;
/// Most schema nodes one parameters or returns schema expands to.
const MAX_SCHEMA_NODES: usize = 5_000;
/// Schema nodes the whole import may expand: twice the document's objects, and at
/// least this many. References that fan out would otherwise make the descriptor many
/// times the document (5,000 nodes for each of thousands of operations); past it, every
/// `$ref` is a stub that names its schema.
const MIN_TOTAL_NODES: usize = 200_000;
/// A `returns` schema larger than this (bytes of JSON) is inlined less deeply.
const MAX_RETURNS: usize = 16 * 1024;
/// Longest description kept (tool or schema); longer ones are cut at a word.
const MAX_DESCRIPTION: usize = 1500;
/// Longest tool name MCP clients accept everywhere.
const MAX_TOOL_NAME: usize = 64;
/// Notes listed one by one; the rest are counted.
const MAX_NOTES: usize = 12;

/// What to import and from where.
#[derive(Debug, Default, Clone, Copy)]
pub struct Options<'a> {
    /// Only operations with one of these tags or operationIds (all when empty).
    pub only: &'a [String],
    /// The API's base URL, instead of the document's `servers`.
    pub base_url: Option<&'a str>,
    /// Where the document was read from, for relative `servers`.
    pub source_url: Option<&'a str>,
    /// The app id, instead of one made from the base URL.
    pub id: Option<&'a str>,
}

/// One imported app.
#[derive(Debug)]
pub struct Import {
    /// App id.
    pub id: String,
    /// The descriptor.
    pub descriptor: Value,
    /// Number of tools.
    pub tools: usize,
    /// The auth type, if any.
    pub auth: Option<&'static str>,
    /// What the user should know (operations left out, schemes not mapped).
    pub notes: Vec<String>,
}

/// Reads an OpenAPI document: JSON when it starts with `{`, YAML otherwise.
pub fn parse(text: &str) -> Result<Value, String> {
    let text = text.trim_start_matches('\u{feff}');
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))
    } else {
        // Budgets sized for documents up to MAX_DOCUMENT; aliases stay bounded by the
        // crate's defaults, so an alias bomb is refused rather than expanded.
        let mut budget = serde_saphyr::Budget::default();
        budget.max_events = 40_000_000;
        budget.max_nodes = 20_000_000;
        budget.max_depth = 512;
        let mut options = serde_saphyr::Options::default();
        options.budget = Some(budget);
        serde_saphyr::from_str_with_options::<Value>(text, options)
            .map_err(|e| format!("invalid YAML: {e}"))
    }
}

/// Turns an OpenAPI document into a descriptor.
pub fn import(doc: &Value, opts: Options<'_>) -> Result<Import, String> {
    let Some(root) = doc.as_object() else {
        return Err("an OpenAPI document is a JSON/YAML object".to_owned());
    };
    match root.get("openapi").and_then(Value::as_str) {
        Some(v) if v.starts_with("3.0") || v.starts_with("3.1") => {}
        Some(v) => return Err(format!("OpenAPI {v} is not supported (3.0 and 3.1 are)")),
        None if root.contains_key("swagger") => {
            return Err(
                "this is a Swagger 2.0 document; convert it to OpenAPI 3 first (for example with `npx swagger2openapi`)"
                    .to_owned(),
            );
        }
        None => return Err("no `openapi` field: this is not an OpenAPI document".to_owned()),
    }
    let info = root.get("info").and_then(Value::as_object);
    let title = info
        .and_then(|i| i.get("title"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or("Imported API");
    let base_url = base_url(root, opts)?;
    let id = match opts.id {
        Some(id) => id.to_owned(),
        None => app_id(&base_url, title),
    };

    let mut importer = Importer {
        doc,
        notes: Notes::default(),
        budget: 0,
        total: MIN_TOTAL_NODES.max(nodes(doc).saturating_mul(2)),
        converted: 0,
        names: HashSet::new(),
        suffixes: HashMap::new(),
        usage: Vec::new(),
        secured: Vec::new(),
    };
    let mut matched = vec![false; opts.only.len()];
    let mut tools = Vec::new();
    let global_security = root.get("security");
    for (path, item) in object(root.get("paths")) {
        // URL parsing would resolve a dot segment away: the tool would call another path.
        if let Some(segment) = aai_descriptor::dot_segment(path) {
            importer.notes.push(format!(
                "{path}: the path has the dot segment `{segment}`, which URLs resolve away; its operations are left out"
            ));
            continue;
        }
        let item = importer.deref(item);
        let shared = item.get("parameters").and_then(Value::as_array);
        for (method, op) in object(Some(item)) {
            let Some(http) = http_method(method) else {
                continue;
            };
            let Some(op) = op.as_object() else {
                continue;
            };
            if !opts.only.is_empty() {
                let tags: Vec<&str> = op
                    .get("tags")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let op_id = op.get("operationId").and_then(Value::as_str);
                let mut wanted = false;
                for (i, only) in opts.only.iter().enumerate() {
                    if tags.contains(&only.as_str()) || op_id == Some(only.as_str()) {
                        matched[i] = true;
                        wanted = true;
                    }
                }
                if !wanted {
                    continue;
                }
            }
            if method == "options" || method == "trace" {
                importer.notes.push(format!(
                    "{} {path}: {} requests are not sent by the gateway; left out",
                    method.to_uppercase(),
                    method.to_uppercase()
                ));
                continue;
            }
            let security = op.get("security").or(global_security);
            match importer.tool(path, http, op, shared) {
                Ok(tool) => {
                    importer.count_security(security);
                    let name = tool["name"].as_str().unwrap_or("").to_owned();
                    importer.secured.push((name, security));
                    tools.push(tool);
                }
                Err(why) => importer
                    .notes
                    .push(format!("{} {path}: {why}; left out", method.to_uppercase())),
            }
        }
    }
    if let Some(i) = matched.iter().position(|m| !m) {
        return Err(format!(
            "`{}` is neither a tag nor an operationId of the document",
            opts.only[i]
        ));
    }
    if tools.is_empty() {
        return Err("the document has no operations the gateway can call".to_owned());
    }

    let (auth, auth_type) = importer.auth(root, &base_url, &id);
    let description = info
        .and_then(|i| i.get("description"))
        .and_then(Value::as_str)
        .and_then(|d| d.split("\n\n").map(str::trim).find(|p| !p.is_empty()))
        .map_or_else(|| title.to_owned(), |d| clip(d, 300));
    let version = info
        .and_then(|i| i.get("version"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|v| semver::Version::parse(v).is_ok());
    if version.is_none() {
        importer
            .notes
            .push("the API's version is not semver; the descriptor starts at 1.0.0".to_owned());
    }
    let mut descriptor = json!({
        "schemaVersion": "1.0",
        "version": version.unwrap_or("1.0.0"),
        "platform": "web",
        "app": { "id": id, "name": title, "description": description },
        "execution": { "type": "http", "baseUrl": base_url,
                       "defaultHeaders": { "Accept": "application/json" } },
    });
    if let Some(auth) = auth {
        descriptor["auth"] = auth;
    }
    let count = tools.len();
    descriptor["tools"] = Value::Array(tools);
    Ok(Import {
        id,
        descriptor,
        tools: count,
        auth: auth_type,
        notes: importer.notes.finish(),
    })
}

/// Notes, each said once, the tail counted.
#[derive(Debug, Default)]
struct Notes {
    list: Vec<String>,
}

impl Notes {
    fn push(&mut self, note: String) {
        if !self.list.contains(&note) {
            self.list.push(note);
        }
    }

    fn finish(mut self) -> Vec<String> {
        if self.list.len() > MAX_NOTES {
            let more = self.list.len() - MAX_NOTES;
            self.list.truncate(MAX_NOTES);
            self.list.push(format!("… and {more} more"));
        }
        self.list
    }
}

/// Which way a schema is read: in a request, `readOnly` properties are left out; in a
/// response, `writeOnly` ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Request,
    Response,
}

struct Importer<'a> {
    doc: &'a Value,
    notes: Notes,
    /// Schema nodes the current schema may still expand (`$ref`s become stubs after).
    budget: usize,
    /// Schema nodes the rest of the import may still expand ([`MIN_TOTAL_NODES`]).
    total: usize,
    /// Schema nodes converted so far.
    converted: usize,
    /// Tool names taken so far.
    names: HashSet<String>,
    /// The next suffix to try for each base name (so many clashes stay linear).
    suffixes: HashMap<String, usize>,
    /// How often each security requirement is used, in order of first use.
    usage: Vec<(&'a Map<String, Value>, usize)>,
    /// Each tool's security requirements, to name the tools the chosen scheme cannot open.
    secured: Vec<(String, Option<&'a Value>)>,
}

/// An argument of a tool and where it goes.
struct Arg {
    name: String,
    schema: Value,
    required: bool,
}

impl<'a> Importer<'a> {
    /// `value`, or what its `$ref` points to (followed up to a few times).
    fn deref(&mut self, mut value: &'a Value) -> &'a Value {
        for _ in 0..8 {
            let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
                return value;
            };
            match self.lookup(reference) {
                Some(target) => value = target,
                None => return &Value::Null,
            }
        }
        value
    }

    /// The target of a local `$ref` (`#/a/b~1c`).
    fn lookup(&mut self, reference: &str) -> Option<&'a Value> {
        let Some(pointer) = reference.strip_prefix('#') else {
            self.notes.push(format!(
                "`$ref: {reference}` points outside the document and is not followed"
            ));
            return None;
        };
        // A `$ref` fragment is a percent-encoded JSON pointer.
        let pointer = percent_encoding::percent_decode_str(pointer).decode_utf8_lossy();
        let found = self.doc.pointer(&pointer);
        if found.is_none() {
            self.notes
                .push(format!("`$ref: {reference}` points at nothing"));
        }
        found
    }

    fn tool(
        &mut self,
        path: &str,
        method: &'static str,
        op: &'a Map<String, Value>,
        shared: Option<&'a Vec<Value>>,
    ) -> Result<Value, String> {
        let mut args: Vec<Arg> = Vec::new();
        let mut template = path.to_owned();
        let mut headers = Map::new();
        let mut query = Vec::new();

        // Operation parameters override path-level ones of the same name and place.
        let mut params: Vec<&'a Map<String, Value>> = Vec::new();
        let own = op.get("parameters").and_then(Value::as_array);
        for p in shared
            .into_iter()
            .flatten()
            .chain(own.into_iter().flatten())
        {
            let Some(p) = self.deref(p).as_object() else {
                continue;
            };
            let key = |p: &Map<String, Value>| {
                (
                    p.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    p.get("in").and_then(Value::as_str).unwrap_or("").to_owned(),
                )
            };
            params.retain(|q| key(q) != key(p));
            params.push(p);
        }
        for p in params {
            let (Some(name), Some(place)) = (
                p.get("name").and_then(Value::as_str),
                p.get("in").and_then(Value::as_str),
            ) else {
                continue;
            };
            if place == "header"
                && ["accept", "content-type", "authorization"]
                    .contains(&name.to_ascii_lowercase().as_str())
            {
                continue;
            }
            if place == "cookie" {
                self.notes.push(format!(
                    "{} {path}: cookie parameter `{name}` is not sent",
                    method
                ));
                continue;
            }
            let mut schema = match p
                .get("schema")
                .or_else(|| first_content(p.get("content")).and_then(|m| m.get("schema")))
            {
                Some(s) => self.schema(s, Dir::Request, PARAMS_DEPTH),
                None => json!({ "type": "string" }),
            };
            describe(&mut schema, p.get("description"), p.get("deprecated"));
            let required = place == "path" || p.get("required") == Some(&Value::Bool(true));
            // Query names go on the wire as the argument's name, so they are kept as they
            // are; a clash leaves the parameter out. Header names must be headers a
            // descriptor may set.
            let refused = match place {
                "query" if name.is_empty() || args.iter().any(|a| a.name == name) => Some(format!(
                    "query parameter `{name}` has the name of another parameter"
                )),
                "header" => aai_descriptor::header_name_problem(name)
                    .map(|why| format!("header parameter: {why}")),
                _ => None,
            };
            if let Some(why) = refused {
                if required {
                    return Err(why);
                }
                self.notes.push(format!("{method} {path}: {why}; not sent"));
                continue;
            }
            let arg_name = if place == "query" {
                name.to_owned()
            } else {
                unique_arg(&args, name, place)
            };
            match place {
                "path" => {
                    template = template.replace(&format!("{{{name}}}"), &format!("{{{arg_name}}}"));
                }
                "query" => query.push(arg_name.clone()),
                "header" => {
                    headers.insert(name.to_owned(), Value::String(format!("{{{arg_name}}}")));
                }
                other => {
                    self.notes.push(format!(
                        "{} {path}: parameter `{name}` is in `{other}`, which OpenAPI does not define; left out",
                        method
                    ));
                    continue;
                }
            }
            args.push(Arg {
                name: arg_name,
                required,
                schema,
            });
        }
        // Placeholders the parameters forgot to declare are still required strings.
        let placeholders: Vec<String> = aai_descriptor::path_params(&template)
            .map(str::to_owned)
            .collect();
        for name in placeholders {
            if !args.iter().any(|a| a.name == name) {
                args.push(Arg {
                    name,
                    schema: json!({ "type": "string" }),
                    required: true,
                });
            }
        }

        let mut body_arg = None;
        let mut flattened = false;
        if let Some(body) = op.get("requestBody") {
            let body = self.deref(body);
            let required = body.get("required") == Some(&Value::Bool(true));
            match json_content(body.get("content")) {
                Some(media) => {
                    let mut schema = match media.get("schema") {
                        Some(s) => self.schema(s, Dir::Request, PARAMS_DEPTH),
                        None => json!({}),
                    };
                    let flat =
                        matches!(method, "POST" | "PUT" | "PATCH") && flattenable(&schema, &args);
                    if flat {
                        flattened = true;
                        let needed: Vec<String> = schema
                            .get("required")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect();
                        let props = schema
                            .get_mut("properties")
                            .and_then(Value::as_object_mut)
                            .map(std::mem::take)
                            .unwrap_or_default();
                        for (name, prop) in props {
                            args.push(Arg {
                                required: required && needed.contains(&name),
                                name,
                                schema: prop,
                            });
                        }
                    } else {
                        describe(&mut schema, body.get("description"), None);
                        let name = ["body", "requestBody", "body_"]
                            .into_iter()
                            .find(|n| !args.iter().any(|a| a.name == *n))
                            .unwrap_or("body__");
                        args.push(Arg {
                            name: name.to_owned(),
                            schema,
                            required,
                        });
                        body_arg = Some(name.to_owned());
                    }
                }
                None => {
                    let types: Vec<&str> = object(body.get("content"))
                        .map(|(k, _)| k.as_str())
                        .collect();
                    if required {
                        return Err(format!(
                            "its request body is {} (the gateway sends JSON)",
                            types.join(" or ")
                        ));
                    }
                    let what = if types.is_empty() {
                        "request".to_owned()
                    } else {
                        types.join("/")
                    };
                    self.notes.push(format!(
                        "{method} {path}: its optional {what} body is not sent"
                    ));
                }
            }
        }

        let mut properties = Map::new();
        let mut required = Vec::new();
        for a in args {
            if a.required {
                required.push(Value::String(a.name.clone()));
            }
            properties.insert(a.name, a.schema);
        }
        let mut parameters = json!({ "type": "object", "properties": properties });
        if !required.is_empty() {
            parameters["required"] = Value::Array(required);
        }
        if aai_descriptor::Schema::load(&parameters).is_err() {
            // Patterns in ECMA-262 dialects the validator cannot compile: drop them.
            strip(&mut parameters, "pattern");
            if let Err(e) = aai_descriptor::Schema::load(&parameters) {
                return Err(format!("its parameters are not a valid JSON Schema ({e})"));
            }
        }

        let mut execution = json!({ "path": template, "method": method });
        if !headers.is_empty() {
            execution["headers"] = Value::Object(headers);
        }
        if matches!(method, "POST" | "PUT" | "PATCH")
            && !query.is_empty()
            && (flattened || body_arg.is_none())
        {
            execution["query"] = json!(query);
        }
        if let Some(name) = body_arg {
            execution["body"] = Value::String(name);
        }
        let name = self.tool_name(op.get("operationId").and_then(Value::as_str), method, path);
        let mut tool = json!({
            "name": name,
            "description": tool_description(op, method, path),
            "parameters": parameters,
            "execution": execution,
        });
        if let Some(returns) = self.returns(op.get("responses")) {
            tool["returns"] = returns;
        }
        Ok(tool)
    }

    /// The schema of the first 2xx (else `default`) JSON response.
    fn returns(&mut self, responses: Option<&'a Value>) -> Option<Value> {
        let responses = responses?.as_object()?;
        let mut codes: Vec<&String> = responses.keys().filter(|k| k.starts_with('2')).collect();
        codes.sort();
        codes.extend(responses.keys().filter(|k| *k == "default"));
        for code in codes {
            let response = self.deref(&responses[code.as_str()]);
            if let Some(schema) =
                json_content(response.get("content")).and_then(|m| m.get("schema"))
            {
                // Results are only read: a large schema is inlined less deeply.
                let mut depth = RETURNS_DEPTH;
                let mut converted = self.schema(schema, Dir::Response, depth);
                while depth > 0 && converted.to_string().len() > MAX_RETURNS {
                    depth -= 1;
                    converted = self.schema(schema, Dir::Response, depth);
                }
                let mut schema = converted;
                if aai_descriptor::Schema::load(&schema).is_err() {
                    strip(&mut schema, "pattern");
                }
                return aai_descriptor::Schema::load(&schema)
                    .is_ok()
                    .then_some(schema);
            }
        }
        None
    }

    /// An OpenAPI schema as a draft-07 JSON Schema, `$ref`s inlined up to `depth`.
    fn schema(&mut self, s: &'a Value, dir: Dir, depth: usize) -> Value {
        let mut stack = Vec::new();
        self.budget = MAX_SCHEMA_NODES.min(self.total);
        let before = self.converted;
        let out = self.convert(s, dir, depth, &mut stack);
        let had = self.total;
        self.total = self.total.saturating_sub(self.converted - before);
        if had > 0 && self.total == 0 {
            self.notes.push(
                "the operations' schemas expand to more nodes than the import takes (twice the document's, at least 200,000); references past that are stubs that name their schema".to_owned(),
            );
        }
        out
    }

    fn convert(&mut self, s: &'a Value, dir: Dir, depth: usize, stack: &mut Vec<&'a str>) -> Value {
        let Some(map) = s.as_object() else {
            // 3.1 allows `true` and `false` as schemas.
            return if s.is_boolean() { s.clone() } else { json!({}) };
        };
        self.converted += 1;
        self.budget = self.budget.saturating_sub(1);
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            let short = reference.rsplit('/').next().unwrap_or(reference);
            let Some(target) = self.lookup(reference) else {
                return json!({});
            };
            // A cycle, too deep, or the schema has grown enough (references that fan out
            // grow it exponentially with depth).
            if stack.contains(&reference) || stack.len() >= depth || self.budget == 0 {
                // A stub that keeps the type and names what was not expanded.
                let mut stub = Map::new();
                if let Some(t) = target.get("type") {
                    stub.insert("type".into(), t.clone());
                }
                stub.insert(
                    "description".into(),
                    Value::String(format!("a {short} (see the API's documentation)")),
                );
                return Value::Object(stub);
            }
            stack.push(reference);
            let mut out = self.convert(target, dir, depth, stack);
            stack.pop();
            // 3.1: keywords beside a `$ref` apply too; the description is the useful one.
            if let (Some(d), Some(o)) = (map.get("description"), out.as_object_mut()) {
                o.insert("description".into(), d.clone());
            }
            return out;
        }
        let mut out = Map::new();
        for (k, v) in map {
            let converted = match k.as_str() {
                "type" | "enum" | "const" | "default" | "format" | "minimum" | "maximum"
                | "minLength" | "maxLength" | "pattern" | "minItems" | "maxItems"
                | "uniqueItems" | "minProperties" | "maxProperties" | "multipleOf" | "readOnly"
                | "writeOnly" | "required" => v.clone(),
                "description" => match v.as_str() {
                    Some(d) => Value::String(clip(d, MAX_DESCRIPTION)),
                    None => continue,
                },
                "exclusiveMinimum" | "exclusiveMaximum" => match v {
                    // 3.0 (draft 4): a flag on `minimum`/`maximum`.
                    Value::Bool(false) => continue,
                    Value::Bool(true) => {
                        let bound = if k == "exclusiveMinimum" {
                            "minimum"
                        } else {
                            "maximum"
                        };
                        match map.get(bound) {
                            Some(b) => {
                                out.insert(k.clone(), b.clone());
                                continue;
                            }
                            None => continue,
                        }
                    }
                    n => n.clone(),
                },
                "example" => {
                    if !map.contains_key("examples") && small(v) {
                        out.insert("examples".into(), json!([v]));
                    }
                    continue;
                }
                "examples" => match v {
                    Value::Array(items) if small(v) && !items.is_empty() => v.clone(),
                    _ => continue,
                },
                "items" | "not" | "additionalProperties" | "contains" | "propertyNames" => {
                    if v.is_boolean() {
                        v.clone()
                    } else {
                        self.convert(v, dir, depth, stack)
                    }
                }
                "allOf" | "anyOf" | "oneOf" => match v.as_array() {
                    Some(items) => Value::Array(
                        items
                            .iter()
                            .map(|i| self.convert(i, dir, depth, stack))
                            .collect(),
                    ),
                    None => continue,
                },
                "properties" | "patternProperties" => {
                    let mut props = Map::new();
                    for (name, p) in object(Some(v)) {
                        props.insert(name.clone(), self.convert(p, dir, depth, stack));
                    }
                    Value::Object(props)
                }
                _ => continue,
            };
            out.insert(k.clone(), converted);
        }
        // `exclusiveMinimum: true` replaced `minimum`.
        for (flag, bound) in [
            ("exclusiveMinimum", "minimum"),
            ("exclusiveMaximum", "maximum"),
        ] {
            if map.get(flag) == Some(&Value::Bool(true)) {
                out.remove(bound);
            }
        }
        if map.get("nullable") == Some(&Value::Bool(true)) {
            if let Some(Value::String(t)) = out.get("type").cloned() {
                out.insert("type".into(), json!([t, "null"]));
            }
            if let Some(Value::Array(values)) = out.get_mut("enum")
                && !values.contains(&Value::Null)
            {
                values.push(Value::Null);
            }
        }
        // Properties the other side owns are not arguments (or results).
        let hidden = if dir == Dir::Request {
            "readOnly"
        } else {
            "writeOnly"
        };
        if let Some(Value::Object(props)) = out.get_mut("properties") {
            let gone: Vec<String> = props
                .iter()
                .filter(|(_, p)| p.get(hidden) == Some(&Value::Bool(true)))
                .map(|(k, _)| k.clone())
                .collect();
            for name in &gone {
                props.shift_remove(name);
            }
            if let Some(Value::Array(req)) = out.get_mut("required") {
                req.retain(|r| !r.as_str().is_some_and(|r| gone.iter().any(|g| g == r)));
            }
        }
        if let Some(Value::Array(req)) = out.get("required")
            && (req.is_empty() || !req.iter().all(Value::is_string))
        {
            out.remove("required");
        }
        Value::Object(out)
    }

    /// A tool name from the operationId or method + path, unique in this app.
    fn tool_name(&mut self, operation_id: Option<&str>, method: &str, path: &str) -> String {
        let raw = match operation_id.map(str::trim).filter(|s| !s.is_empty()) {
            Some(id) => id.to_owned(),
            None => {
                let mut name = method.to_ascii_lowercase();
                for segment in path.split('/').filter(|s| !s.is_empty()) {
                    name.push('_');
                    name.push_str(segment.trim_matches(['{', '}']));
                }
                name
            }
        };
        let mut base = crate::text::replace_outside(
            &raw,
            |c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'),
            '_',
        );
        base.truncate(MAX_TOOL_NAME);
        let mut name = base.clone();
        let next = self.suffixes.entry(base.clone()).or_insert(2);
        while self.names.contains(&name) {
            let suffix = format!("_{next}");
            let keep = MAX_TOOL_NAME.saturating_sub(suffix.len()).min(base.len());
            name = format!("{}{suffix}", &base[..keep]);
            *next += 1;
        }
        self.names.insert(name.clone());
        name
    }

    fn count_security(&mut self, security: Option<&'a Value>) {
        for requirement in security.and_then(Value::as_array).into_iter().flatten() {
            let Some(req) = requirement.as_object() else {
                continue;
            };
            if req.is_empty() {
                continue;
            }
            match self.usage.iter_mut().find(|(r, _)| *r == req) {
                Some((_, n)) => *n += 1,
                None => self.usage.push((req, 1)),
            }
        }
    }

    /// The auth of the most used security requirement that maps to one.
    fn auth(
        &mut self,
        root: &'a Map<String, Value>,
        base_url: &str,
        id: &str,
    ) -> (Option<Value>, Option<&'static str>) {
        let schemes = root
            .get("components")
            .and_then(|c| c.get("securitySchemes"))
            .and_then(Value::as_object);
        let mut usage = std::mem::take(&mut self.usage);
        usage.sort_by_key(|u| std::cmp::Reverse(u.1));
        for (requirement, _) in &usage {
            if requirement.len() > 1 {
                let names: Vec<&str> = requirement.keys().map(String::as_str).collect();
                self.notes.push(format!(
                    "security requirement {} needs several schemes at once; the gateway sends one",
                    names.join(" + ")
                ));
                continue;
            }
            let Some((name, scopes)) = requirement.iter().next() else {
                continue;
            };
            let Some(scheme) = schemes.and_then(|s| s.get(name)).map(|s| self.deref(s)) else {
                self.notes
                    .push(format!("security scheme `{name}` is not defined"));
                continue;
            };
            match map_scheme(scheme, scopes, base_url, &key_page(root, base_url)) {
                Ok((auth, kind)) => {
                    if kind.contains("OAuth2 access token") {
                        self.notes.push(format!(
                            "security scheme `{name}`: its OAuth2 flow is not one the gateway runs (authorizationCode with PKCE); store an access token you got elsewhere with `aai-gateway auth set {id}`"
                        ));
                    }
                    if kind == "oauth2" {
                        self.notes.push(format!(
                            "OAuth2 needs the client id the provider gave you: set `apps.{id}.clientId` in config.json"
                        ));
                    }
                    self.note_uncovered(requirement);
                    return (Some(auth), Some(kind));
                }
                Err(why) => self.notes.push(format!("security scheme `{name}`: {why}")),
            }
        }
        (None, None)
    }
}

/// Where a user might get an API key: the document's external docs, its contact page, or
/// the API's own origin.
fn key_page(root: &Map<String, Value>, base_url: &str) -> String {
    let https = |u: &&str| u.starts_with("https://");
    root.get("externalDocs")
        .and_then(|d| d.get("url"))
        .and_then(Value::as_str)
        .filter(https)
        .or_else(|| {
            root.get("info")
                .and_then(|i| i.get("contact"))
                .and_then(|c| c.get("url"))
                .and_then(Value::as_str)
                .filter(https)
        })
        .map(str::to_owned)
        .or_else(|| {
            url::Url::parse(base_url)
                .ok()
                .map(|u| format!("{}/", u.origin().ascii_serialization()))
        })
        .unwrap_or_else(|| base_url.to_owned())
}

impl Importer<'_> {
    /// Names the tools whose security the chosen requirement does not meet: a descriptor
    /// has one auth, so they will be refused by the API.
    fn note_uncovered(&mut self, chosen: &Map<String, Value>) {
        let uncovered: Vec<&str> = self
            .secured
            .iter()
            .filter(|(_, security)| {
                let options = security.and_then(Value::as_array);
                options.is_some_and(|o| {
                    !o.is_empty()
                        && !o.iter().any(|r| {
                            r.as_object()
                                .is_some_and(|r| r.is_empty() || r.keys().eq(chosen.keys()))
                        })
                })
            })
            .map(|(name, _)| name.as_str())
            .collect();
        if !uncovered.is_empty() {
            let scheme = chosen.keys().next().map_or("", String::as_str);
            let shown: Vec<&str> = uncovered.iter().copied().take(8).collect();
            let more = uncovered.len().saturating_sub(shown.len());
            self.notes.push(format!(
                "{} need{} another security scheme than `{scheme}` (a descriptor has one) and will be refused: {}{}",
                crate::text::count(uncovered.len(), "tool", "tools"),
                if uncovered.len() == 1 { "s" } else { "" },
                shown.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            ));
        }
    }
}

/// An auth object for one security scheme, or why there is none.
fn map_scheme(
    scheme: &Value,
    scopes: &Value,
    base_url: &str,
    key_page: &str,
) -> Result<(Value, &'static str), String> {
    let text = |k: &str| scheme.get(k).and_then(Value::as_str).unwrap_or("");
    match text("type") {
        "apiKey" => {
            let location = match text("in") {
                "header" => "header",
                "query" => "query",
                other => {
                    return Err(format!(
                        "an API key in `{other}` is not supported (header and query are)"
                    ));
                }
            };
            let mut key =
                json!({ "location": location, "name": text("name"), "obtainUrl": key_page });
            if !text("description").is_empty() {
                key["instructions"] = json!({ "short": clip(text("description"), 300) });
            }
            Ok((json!({ "type": "apiKey", "apiKey": key }), "apiKey"))
        }
        "http" if text("scheme").eq_ignore_ascii_case("bearer") => {
            let mut key = json!({ "location": "header", "name": "Authorization", "prefix": "Bearer",
                                  "obtainUrl": key_page });
            if !text("description").is_empty() {
                key["instructions"] = json!({ "short": clip(text("description"), 300) });
            }
            Ok((json!({ "type": "apiKey", "apiKey": key }), "apiKey"))
        }
        "http" => Err(format!(
            "HTTP `{}` authentication is not supported (bearer is)",
            text("scheme")
        )),
        "oauth2" => {
            let Some(flow) = scheme.get("flows").and_then(|f| f.get("authorizationCode")) else {
                // Implicit, password and client-credentials flows are not run by the
                // gateway: the user pastes an access token got elsewhere, sent as a bearer.
                let flows: Vec<&str> = object(scheme.get("flows"))
                    .map(|(k, _)| k.as_str())
                    .collect();
                if flows.is_empty() {
                    return Err("an OAuth2 scheme without flows".to_owned());
                }
                let page = object(scheme.get("flows"))
                    .find_map(|(_, f)| {
                        f.get("authorizationUrl")
                            .or_else(|| f.get("tokenUrl"))
                            .and_then(Value::as_str)
                            .filter(|u| u.starts_with("https://"))
                    })
                    .unwrap_or(key_page);
                let short = format!(
                    "Paste an OAuth2 access token (the gateway does not run the {} flow)",
                    flows.join("/")
                );
                return Ok((
                    json!({ "type": "apiKey", "apiKey": {
                        "location": "header", "name": "Authorization", "prefix": "Bearer",
                        "obtainUrl": page, "instructions": { "short": short } } }),
                    "apiKey (OAuth2 access token)",
                ));
            };
            let endpoint = |k: &str| -> Result<String, String> {
                let raw = flow.get(k).and_then(Value::as_str).unwrap_or("");
                let joined = url::Url::parse(base_url)
                    .and_then(|b| b.join(raw))
                    .map_err(|e| format!("its `{k}` `{raw}` is not a URL ({e})"))?;
                let loopback =
                    matches!(joined.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
                if joined.scheme() != "https" && !loopback {
                    return Err(format!("its `{k}` is not https"));
                }
                Ok(joined.to_string())
            };
            let mut wanted: Vec<Value> = scopes.as_array().cloned().unwrap_or_default();
            if wanted.is_empty() {
                wanted = object(flow.get("scopes"))
                    .map(|(k, _)| Value::String(k.clone()))
                    .collect();
            }
            Ok((
                json!({ "type": "oauth2", "oauth2": {
                    "authorizationEndpoint": endpoint("authorizationUrl")?,
                    "tokenEndpoint": endpoint("tokenUrl")?,
                    "scopes": wanted,
                    "pkce": { "method": "S256" } } }),
                "oauth2",
            ))
        }
        other => Err(format!("`{other}` schemes are not supported")),
    }
}

/// `servers[0]` (or `--base-url`), variables filled, made absolute, checked.
fn base_url(root: &Map<String, Value>, opts: Options<'_>) -> Result<String, String> {
    let raw = match opts.base_url {
        Some(u) => u.to_owned(),
        None => {
            let server = root
                .get("servers")
                .and_then(Value::as_array)
                .and_then(|s| s.first())
                .ok_or("the document lists no `servers`; give the API's address with --base-url")?;
            let mut url = server
                .get("url")
                .and_then(Value::as_str)
                .ok_or("the first server has no `url`")?
                .to_owned();
            for (name, var) in object(server.get("variables")) {
                if let Some(default) = var.get("default").and_then(Value::as_str) {
                    url = url.replace(&format!("{{{name}}}"), default);
                }
            }
            if let Some(name) = aai_descriptor::path_params(&url).next() {
                return Err(format!(
                    "the server `{url}` has a variable `{name}` without a default; give the API's address with --base-url"
                ));
            }
            url
        }
    };
    let absolute = match url::Url::parse(&raw) {
        Ok(u) => u,
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            let Some(source) = opts.source_url.and_then(|s| url::Url::parse(s).ok()) else {
                return Err(format!(
                    "the document's server `{raw}` is relative; give the API's address with --base-url"
                ));
            };
            source
                .join(&raw)
                .map_err(|e| format!("server `{raw}`: {e}"))?
        }
        Err(e) => return Err(format!("server `{raw}` is not a URL: {e}")),
    };
    let loopback = match absolute.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if absolute.scheme() != "https" && !(absolute.scheme() == "http" && loopback) {
        return Err(format!(
            "the API's address `{absolute}` is not https (plain http is allowed only for loopback); give another with --base-url"
        ));
    }
    if !absolute.username().is_empty() || absolute.password().is_some() {
        return Err(
            "the API's address carries a user name or password; give it without them with --base-url"
                .to_owned(),
        );
    }
    if absolute.query().is_some() || absolute.fragment().is_some() {
        return Err(format!(
            "the API's address `{absolute}` has a query or fragment"
        ));
    }
    Ok(absolute.as_str().trim_end_matches('/').to_owned())
}

/// A reverse-DNS id from the API's host (`api.github.com` → `com.github.api`); loopback
/// and IP hosts use the title (`local.swagger-petstore`).
fn app_id(base_url: &str, title: &str) -> String {
    let host = url::Url::parse(base_url).ok().and_then(|u| match u.host() {
        Some(url::Host::Domain(d)) if d != "localhost" && d.contains('.') => Some(d.to_owned()),
        _ => None,
    });
    match host {
        Some(h) => h
            .split('.')
            .filter(|label| !label.is_empty())
            .rev()
            .collect::<Vec<_>>()
            .join("."),
        None => {
            let slug = crate::text::slug(title);
            format!("local.{}", if slug.is_empty() { "api" } else { &slug })
        }
    }
}

fn http_method(key: &str) -> Option<&'static str> {
    Some(match key {
        "get" => "GET",
        "put" => "PUT",
        "post" => "POST",
        "delete" => "DELETE",
        "patch" => "PATCH",
        "head" => "HEAD",
        "options" => "OPTIONS",
        "trace" => "TRACE",
        _ => return None,
    })
}

/// The entries of an optional object.
/// How many objects `doc` holds (a schema node is one).
fn nodes(doc: &Value) -> usize {
    let mut count = 0;
    let mut stack = vec![doc];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                count += 1;
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    count
}

fn object(value: Option<&Value>) -> impl Iterator<Item = (&String, &Value)> {
    value.and_then(Value::as_object).into_iter().flatten()
}

/// The first media type of a `content` map.
fn first_content(content: Option<&Value>) -> Option<&Value> {
    object(content).next().map(|(_, m)| m)
}

/// The JSON media type of a `content` map (`application/json`, `…+json`, `*/*`).
fn json_content(content: Option<&Value>) -> Option<&Value> {
    let entries: Vec<(&String, &Value)> = object(content).collect();
    entries
        .iter()
        .find(|(k, _)| {
            k.split(';')
                .next()
                .is_some_and(|t| t.trim() == "application/json")
        })
        .or_else(|| entries.iter().find(|(k, _)| k.contains("json")))
        .or_else(|| entries.iter().find(|(k, _)| k.as_str() == "*/*"))
        .map(|(_, m)| *m)
}

/// Whether a body schema can become the tool's own arguments.
fn flattenable(schema: &Value, args: &[Arg]) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    let Some(props) = map.get("properties").and_then(Value::as_object) else {
        return false;
    };
    let object_typed = match map.get("type") {
        None => true,
        Some(Value::String(t)) => t == "object",
        Some(_) => false,
    };
    object_typed
        && !["allOf", "anyOf", "oneOf", "not", "patternProperties"]
            .iter()
            .any(|k| map.contains_key(*k))
        && !map
            .get("additionalProperties")
            .is_some_and(|a| a != &Value::Bool(false))
        && !props.keys().any(|k| args.iter().any(|a| &a.name == k))
}

/// An argument name for parameter `name`, unique among `args` and fit for a header
/// placeholder.
fn unique_arg(args: &[Arg], name: &str, place: &str) -> String {
    let clean = crate::text::replace_outside(
        name,
        |c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '$'),
        '_',
    );
    let clean = if clean.is_empty() {
        "arg".to_owned()
    } else {
        clean
    };
    if !args.iter().any(|a| a.name == clean) {
        return clean;
    }
    let mut candidate = format!("{place}_{clean}");
    let mut n = 2;
    while args.iter().any(|a| a.name == candidate) {
        candidate = format!("{place}_{clean}_{n}");
        n += 1;
    }
    candidate
}

/// Adds a parameter's description (and deprecation) to its schema.
fn describe(schema: &mut Value, description: Option<&Value>, deprecated: Option<&Value>) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    let mut text = description
        .and_then(Value::as_str)
        .map(|d| clip(d, MAX_DESCRIPTION))
        .or_else(|| {
            map.get("description")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    if deprecated == Some(&Value::Bool(true)) {
        text = format!("Deprecated. {text}").trim_end().to_owned();
    }
    if !text.is_empty() {
        map.insert("description".into(), Value::String(text));
    }
}

fn tool_description(op: &Map<String, Value>, method: &str, path: &str) -> String {
    let summary = op
        .get("summary")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or("");
    let details = op
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or("");
    let mut text = match (summary.is_empty(), details.is_empty() || details == summary) {
        (false, true) => summary.to_owned(),
        (false, false) => format!("{summary}\n\n{}", clip(details, MAX_DESCRIPTION)),
        (true, false) => clip(details, MAX_DESCRIPTION),
        (true, true) => format!("{method} {path}"),
    };
    if op.get("deprecated") == Some(&Value::Bool(true)) {
        text = format!("Deprecated. {text}");
    }
    text
}

/// `text` cut at a word near `max` characters.
fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max).collect();
    let at = cut
        .rfind(char::is_whitespace)
        .filter(|i| *i > max / 2)
        .unwrap_or(cut.len());
    format!("{}…", cut[..at].trim_end())
}

/// Whether an example is small enough to keep.
fn small(value: &Value) -> bool {
    value.to_string().len() <= 200
}

/// Removes `keyword` everywhere in a schema.
fn strip(schema: &mut Value, keyword: &str) {
    match schema {
        Value::Object(map) => {
            if map.get(keyword).is_some_and(Value::is_string) {
                map.shift_remove(keyword);
            }
            for v in map.values_mut() {
                strip(v, keyword);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| strip(i, keyword)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
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
        .unwrap_err();
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
        let e = import(&doc("/api/v3"), Options::default()).unwrap_err();
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
        let e = import(&doc("http://api.example.com"), Options::default()).unwrap_err();
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
    fn hostile_documents_fail_clearly() {
        for (text, needle) in [
            ("swagger: '2.0'\ninfo: {title: x}", "Swagger 2.0"),
            ("openapi: 4.0.0", "not supported"),
            ("[1, 2]", "is a JSON/YAML object"),
            ("{\"openapi\": ", "invalid JSON"),
            ("a: [unclosed", "invalid YAML"),
        ] {
            let e = parse(text).and_then(|d| import(&d, Options::default()).map(|_| ()));
            let e = e.unwrap_err();
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
        let body = json!({"content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}});
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
        let e = import(&doc("https://{host}/{v}"), Options::default()).unwrap_err();
        assert!(e.contains("variable `host` without a default"), "{e}");
        let e = import(&doc("https://u:p@api.example.com/{v}"), Options::default()).unwrap_err();
        assert!(e.contains("user name or password"), "{e}");
        let i = import(&doc("https://api.example.com./{v}"), Options::default()).unwrap();
        assert_eq!(i.id, "com.example.api");
        assert_eq!(
            i.descriptor["execution"]["baseUrl"],
            "https://api.example.com./v1"
        );
    }
}
