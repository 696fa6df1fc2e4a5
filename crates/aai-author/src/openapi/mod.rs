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

mod names;
mod operation;
mod schema;
mod security;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use names::{app_id, base_url, http_method};
use schema::nodes;

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

/// Why a document could not be read or imported: what went wrong, and the message that
/// says it to the user.
pub type Error = aai_descriptor::Failure<ErrorKind>;

/// What was wrong with an OpenAPI document (or with what the import was asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Text that starts with `{` but is not JSON.
    Json,
    /// Text that is not YAML (or a YAML document past the reader's budgets).
    Yaml,
    /// A document that is not an object.
    NotAnObject,
    /// An `openapi` version other than 3.0 and 3.1.
    Version,
    /// A Swagger 2.0 document.
    Swagger,
    /// No `openapi` field.
    NotOpenApi,
    /// The API's address cannot be told from the document, or is not one the gateway
    /// calls (not https, with credentials, a query or a fragment).
    BaseUrl,
    /// An `only` entry that is neither a tag nor an operationId.
    NoSuchOperation,
    /// No operation the gateway can call.
    NoOperations,
}

/// Reads an OpenAPI document: JSON when it starts with `{`, YAML otherwise.
pub fn parse(text: &str) -> Result<Value, Error> {
    let text = text.trim_start_matches('\u{feff}');
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text)
            .map_err(|e| Error::new(ErrorKind::Json, format!("invalid JSON: {e}")))
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
            .map_err(|e| Error::new(ErrorKind::Yaml, format!("invalid YAML: {e}")))
    }
}

/// Turns an OpenAPI document into a descriptor.
pub fn import(doc: &Value, opts: Options<'_>) -> Result<Import, Error> {
    let Some(root) = doc.as_object() else {
        return Err(Error::new(
            ErrorKind::NotAnObject,
            "an OpenAPI document is a JSON/YAML object",
        ));
    };
    match root.get("openapi").and_then(Value::as_str) {
        Some(v) if v.starts_with("3.0") || v.starts_with("3.1") => {}
        Some(v) => {
            return Err(Error::new(
                ErrorKind::Version,
                format!("OpenAPI {v} is not supported (3.0 and 3.1 are)"),
            ));
        }
        None if root.contains_key("swagger") => {
            return Err(Error::new(
                ErrorKind::Swagger,
                "this is a Swagger 2.0 document; convert it to OpenAPI 3 first (for example with `npx swagger2openapi`)",
            ));
        }
        None => {
            return Err(Error::new(
                ErrorKind::NotOpenApi,
                "no `openapi` field: this is not an OpenAPI document",
            ));
        }
    }
    let info = root.get("info").and_then(Value::as_object);
    let title = info
        .and_then(|i| i.get("title"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or("Imported API");
    let base_url = base_url(root, opts).map_err(|why| Error::new(ErrorKind::BaseUrl, why))?;
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
        return Err(Error::new(
            ErrorKind::NoSuchOperation,
            format!(
                "`{}` is neither a tag nor an operationId of the document",
                opts.only[i]
            ),
        ));
    }
    if tools.is_empty() {
        return Err(Error::new(
            ErrorKind::NoOperations,
            "the document has no operations the gateway can call",
        ));
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

/// One import under way; its methods are the submodules' (schemas, operations, security,
/// names).
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

/// The entries of an optional object.
fn object(value: Option<&Value>) -> impl Iterator<Item = (&String, &Value)> {
    value.and_then(Value::as_object).into_iter().flatten()
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
