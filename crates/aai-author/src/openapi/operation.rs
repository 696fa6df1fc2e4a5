//! One operation → one tool: parameters and request body → the parameters schema and
//! `execution`, the first JSON response → `returns`.

use serde_json::{Map, Value, json};

use super::schema::Dir;
use super::{Importer, MAX_DESCRIPTION, MAX_RETURNS, PARAMS_DEPTH, RETURNS_DEPTH, clip, object};

/// An argument of a tool and where it goes.
struct Arg {
    name: String,
    schema: Value,
    required: bool,
}

impl<'a> Importer<'a> {
    pub(super) fn tool(
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
