//! `import mcp`: descriptors for the MCP servers of a client's configuration, one app per
//! server (`execution.type: "mcp"`). Pure conversion, no I/O.
//!
//! Read formats: the `mcpServers` JSON of Claude Desktop, Claude Code and Cursor (and
//! VS Code's `servers`), and the `[mcp_servers.<name>]` tables of Codex's TOML.
//!
//! * A server with `command` runs over stdio with its `args` and `env`; one with `url`
//!   over HTTP with its `headers`: `"type": "sse"` (or `"transport": "sse"`) becomes
//!   `execution.transport: "sse"` (the 2024-11-05 HTTP+SSE transport), anything else
//!   streamable HTTP (which falls back to SSE when the server answers that way).
//!   Disabled servers are skipped.
//! * A credential header (`Authorization`, or a name with `key`, `token` or `secret`)
//!   becomes the app's `apiKey` auth; its value goes to the credential store when the
//!   descriptor is written, never into the file. Codex's `bearer_token_env_var` does the
//!   same with the variable's value at import time.
//! * No secret is written into a descriptor: an `env` value (or another header's) whose
//!   name looks secret becomes a `${NAME}` placeholder and its value goes to the
//!   credential store when the descriptor is written (`auth::fill`); a value the file
//!   already writes as `${VAR}` (or VS Code's `${env:VAR}`) stays a placeholder, to be
//!   stored with `auth set <app> --secret VAR` (or read from the environment when config
//!   `secrets.fromEnvironment` allows). Each is named in a note, never its value.
//! * Server names are cut so that app ids stay within 128 characters.

use serde_json::{Map, Value, json};

/// One server of the file, converted (or why not).
#[derive(Debug)]
pub struct Imported {
    /// Its name in the file.
    pub name: String,
    /// The app id given to it (`mcp.<name>`).
    pub id: String,
    /// The descriptor, or why there is none.
    pub descriptor: Result<Value, String>,
    /// How it is reached, for the summary (no secret in it).
    pub summary: String,
    /// Things the user should know (placeholders, left-out settings).
    pub notes: Vec<String>,
    /// The credential for the app's `apiKey` auth, to store when the file is written.
    pub secret: Option<String>,
    /// Values of the descriptor's `${NAME}` placeholders, to store when it is written.
    pub secrets: Vec<(String, String)>,
    /// The header that carries the credential, and its prefix.
    credential_header: Option<(String, Option<String>)>,
}

/// The servers of a configuration file (`file_name` picks JSON or TOML by content).
/// `env` reads the importing environment (Codex's `bearer_token_env_var`).
pub fn servers(
    text: &str,
    file_name: &str,
    platform: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Imported>, String> {
    let (servers, format) = if text.trim_start().starts_with('{') {
        let doc: Value = serde_json::from_str(text)
            .map_err(|e| format!("{file_name} is not valid JSON: {e}"))?;
        let servers = doc
            .get("mcpServers")
            .or_else(|| doc.get("servers"))
            .or_else(|| doc.pointer("/mcp/servers"))
            .cloned()
            .ok_or_else(|| {
                format!("{file_name} has no `mcpServers` (nor `servers`) object of MCP servers")
            })?;
        (servers, Format::Json)
    } else {
        let doc: toml::Table = toml::from_str(text)
            .map_err(|e| format!("{file_name} is neither JSON nor valid TOML: {e}"))?;
        let servers = doc.get("mcp_servers").cloned().ok_or_else(|| {
            format!("{file_name} has no `[mcp_servers.<name>]` tables of MCP servers")
        })?;
        let servers = serde_json::to_value(servers).map_err(|e| format!("{file_name}: {e}"))?;
        (servers, Format::Codex)
    };
    let Value::Object(servers) = servers else {
        return Err(format!(
            "{file_name}: the MCP servers are not an object of named servers"
        ));
    };
    let mut taken: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (name, server) in servers {
        let mut id = format!("mcp.{}", slug(&name));
        let base = id.clone();
        let mut n = 2;
        while taken.contains(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        taken.push(id.clone());
        out.push(convert(
            &name, id, &server, format, file_name, platform, env,
        ));
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Codex,
}

fn convert(
    name: &str,
    id: String,
    server: &Value,
    format: Format,
    file_name: &str,
    platform: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Imported {
    let mut imported = Imported {
        name: name.to_owned(),
        id,
        descriptor: Err(String::new()),
        summary: String::new(),
        notes: Vec::new(),
        secret: None,
        secrets: Vec::new(),
        credential_header: None,
    };
    let Some(server) = server.as_object() else {
        imported.descriptor = Err("not an object".to_owned());
        return imported;
    };
    if server.get("disabled") == Some(&Value::Bool(true))
        || server.get("enabled") == Some(&Value::Bool(false))
    {
        imported.descriptor = Err("disabled in the file".to_owned());
        return imported;
    }
    let kind = server
        .get("type")
        .or_else(|| server.get("transport"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    let url = server
        .get("url")
        .or_else(|| server.get("serverUrl"))
        .and_then(Value::as_str);
    let execution = match (server.get("command").and_then(Value::as_str), url) {
        (_, Some(url)) if kind == "sse" => {
            http(url, server, format, &mut imported, env).map(|mut execution| {
                execution.insert("transport".to_owned(), json!("sse"));
                imported.summary = imported.summary.replacen("streamable HTTP", "SSE", 1);
                execution
            })
        }
        _ if kind == "sse" => Err("an SSE server without `url`".to_owned()),
        (Some(command), _) if !command.trim().is_empty() => stdio(command, server, &mut imported),
        (_, Some(url)) => http(url, server, format, &mut imported, env),
        _ => Err("neither `command` nor `url`".to_owned()),
    };
    let mut execution = match execution {
        Ok(e) => e,
        Err(why) => {
            imported.descriptor = Err(why);
            return imported;
        }
    };
    if let Some(seconds) = server
        .get("tool_timeout_sec")
        .or_else(|| server.get("timeout"))
        .and_then(Value::as_f64)
        .filter(|s| *s > 0.0)
    {
        // Codex says seconds; Claude Code's `timeout` is milliseconds.
        let ms = if format == Format::Codex {
            seconds * 1000.0
        } else {
            seconds
        };
        execution.insert("timeout".to_owned(), json!(ms.round() as u64));
    }
    for ignored in ["cwd", "startup_timeout_sec", "env_vars", "env_http_headers"] {
        if server.contains_key(ignored) {
            imported.notes.push(format!(
                "`{ignored}` is not imported (the gateway has no such setting)"
            ));
        }
    }
    let mut doc = json!({
        "schemaVersion": "1.0",
        "version": "1.0.0",
        "platform": platform,
        "app": {
            "id": imported.id,
            "name": {"en": name},
            "defaultLang": "en",
            "description": format!("The MCP server `{name}` (imported from {file_name}); its tools are listed on first use"),
            "aliases": [name],
        },
        "execution": Value::Object(execution),
    });
    if let (Some((header, prefix)), Some(url)) = (&imported.credential_header, url) {
        let origin = url.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
        let mut key = json!({
            "location": "header",
            "name": header,
            "obtainUrl": origin,
            "instructions": {"short": format!(
                "The credential {name} was configured with in {file_name}; replace it with `aai-gateway auth set {}`",
                imported.id
            )},
        });
        if let Some(prefix) = prefix {
            key["prefix"] = json!(prefix);
        }
        doc["auth"] = json!({"type": "apiKey", "apiKey": key});
    }
    imported.descriptor = Ok(doc);
    imported
}

fn stdio(
    command: &str,
    server: &Map<String, Value>,
    imported: &mut Imported,
) -> Result<Map<String, Value>, String> {
    let args: Vec<String> = match server.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.iter().map(text_of).collect(),
        Some(_) => return Err("`args` is not a list".to_owned()),
    };
    let env = string_map(server.get("env"), "env")?;
    let env = out_of_the_file(env, "env", imported);
    imported.summary = format!(
        "stdio: {command}{}{}",
        if args.is_empty() { "" } else { " …" },
        if env.is_empty() {
            String::new()
        } else {
            format!(
                " (env {})",
                env.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        }
    );
    let mut execution = Map::new();
    execution.insert("type".to_owned(), json!("mcp"));
    execution.insert("command".to_owned(), json!(command));
    if !args.is_empty() {
        execution.insert("args".to_owned(), json!(args));
    }
    if !env.is_empty() {
        execution.insert(
            "env".to_owned(),
            Value::Object(env.into_iter().map(|(k, v)| (k, json!(v))).collect()),
        );
    }
    Ok(execution)
}

fn http(
    url: &str,
    server: &Map<String, Value>,
    format: Format,
    imported: &mut Imported,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Map<String, Value>, String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("`{url}` is not an http(s) URL"));
    }
    let mut headers = string_map(
        server.get("headers").or_else(|| server.get("http_headers")),
        "headers",
    )?;
    // The credential: Codex names a variable; the others put it in a header.
    let mut bearer_from_env = false;
    if format == Format::Codex
        && let Some(var) = server.get("bearer_token_env_var").and_then(Value::as_str)
    {
        bearer_from_env = true;
        headers.insert("Authorization".to_owned(), String::new());
        match env(var) {
            Some(token) if !token.trim().is_empty() => {
                imported.secret = Some(token.trim().to_owned());
            }
            _ => imported.notes.push(format!(
                "`bearer_token_env_var` names `{var}`, which is not set here: store the token with `aai-gateway auth set {}`",
                imported.id
            )),
        }
    }
    let credential = headers
        .keys()
        .find(|k| k.eq_ignore_ascii_case("authorization"))
        .or_else(|| headers.keys().find(|k| secret_name(k)))
        .cloned();
    let mut auth_header = None;
    if let Some(header) = credential {
        let value = headers.remove(&header).unwrap_or_default();
        if !value.is_empty() {
            if has_placeholder(&value) {
                imported.notes.push(format!(
                    "header `{header}` holds a `${{…}}` placeholder: store the real value with `aai-gateway auth set {}`",
                    imported.id
                ));
            } else {
                imported.secret = Some(value);
            }
        }
        auth_header = Some(header);
    }
    // An `Authorization` value is `<scheme> <token>`: the scheme becomes the prefix and
    // only the token is stored (Codex's variable holds a bare bearer token).
    let mut prefix = None;
    if auth_header
        .as_deref()
        .is_some_and(|h| h.eq_ignore_ascii_case("authorization"))
    {
        prefix = Some("Bearer".to_owned());
        if !bearer_from_env && let Some(secret) = imported.secret.take() {
            match secret.split_once(' ') {
                Some((scheme, token)) if !token.trim().is_empty() => {
                    prefix = Some(scheme.to_owned());
                    imported.secret = Some(token.trim().to_owned());
                }
                _ => {
                    prefix = None;
                    imported.secret = Some(secret);
                }
            }
        }
    }
    imported.summary = format!(
        "streamable HTTP: {}{}",
        url.split('?').next().unwrap_or(url),
        auth_header
            .as_deref()
            .map(|h| format!(" (credential header {h}, kept in the credential store)"))
            .unwrap_or_default()
    );
    if url.contains('?') {
        imported
            .notes
            .push("the URL's query string is kept in the descriptor as written".to_owned());
    }
    imported.credential_header = auth_header.map(|h| (h, prefix));
    let headers = out_of_the_file(headers, "header", imported);
    let mut execution = Map::new();
    execution.insert("type".to_owned(), json!("mcp"));
    execution.insert("url".to_owned(), json!(url));
    if !headers.is_empty() {
        execution.insert(
            "headers".to_owned(),
            Value::Object(headers.into_iter().map(|(k, v)| (k, json!(v))).collect()),
        );
    }
    Ok(execution)
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn string_map(
    v: Option<&Value>,
    what: &str,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    match v {
        None | Some(Value::Null) => Ok(Default::default()),
        Some(Value::Object(m)) => Ok(m.iter().map(|(k, v)| (k.clone(), text_of(v))).collect()),
        Some(_) => Err(format!("`{what}` is not an object of names and values")),
    }
}

fn has_placeholder(v: &str) -> bool {
    v.contains("${")
}

/// `values` (of `env` or headers) with no secret left in them: a value written as
/// `${VAR}` or `${env:VAR}` becomes the gateway's `${VAR}`; a literal under a
/// secret-looking name becomes `${NAME}` and goes to `imported.secrets`. Notes name each.
fn out_of_the_file(
    values: std::collections::BTreeMap<String, String>,
    what: &str,
    imported: &mut Imported,
) -> std::collections::BTreeMap<String, String> {
    let id = imported.id.clone();
    values
        .into_iter()
        .map(|(k, v)| {
            if has_placeholder(&v) {
                let v = v.replace("${env:", "${");
                for name in aai_descriptor::placeholder_names(&v) {
                    imported.notes.push(format!(
                        "{what} `{k}` takes `${{{name}}}`: store it with `aai-gateway auth set {id} --secret {name}` (or let the gateway read its environment: config `secrets.fromEnvironment`)"
                    ));
                }
                (k, v)
            } else if (aai_descriptor::looks_secret(&k) || aai_descriptor::looks_secret_value(&v))
                && !v.is_empty()
            {
                let name = aai_descriptor::placeholder_name(&k);
                imported.notes.push(format!(
                    "{what} `{k}`: its value goes to the credential store, the descriptor says `${{{name}}}`"
                ));
                imported.secrets.push((name.clone(), v));
                (k, format!("${{{name}}}"))
            } else {
                (k, v)
            }
        })
        .collect()
}

/// Whether a header name says it carries a credential.
fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["key", "token", "secret", "auth"]
        .iter()
        .any(|w| n.contains(w))
}

/// Longest server part of an app id (`mcp.` + it + a `-N` suffix stay within 128).
const MAX_SLUG: usize = 100;

/// A server name as the last part of an app id: lowercase ASCII letters, digits and `-`,
/// at most [`MAX_SLUG`] of them.
fn slug(name: &str) -> String {
    let mut out = crate::text::slug(name);
    if out.is_empty() {
        return "server".to_owned();
    }
    if out.len() > MAX_SLUG {
        out.truncate(MAX_SLUG);
        out.truncate(out.trim_end_matches('-').len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn valid(doc: &Value) -> aai_descriptor::App {
        let parsed = aai_descriptor::parse(&doc.to_string(), "imported");
        assert!(
            parsed.diagnostics.iter().all(|d| !d.is_error()),
            "{:?}",
            parsed.diagnostics
        );
        parsed.app.expect("an app")
    }

    #[test]
    fn claude_desktop_servers_become_apps() {
        let text = r#"{"mcpServers": {
            "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
            "GitHub API": {"command": "docker", "args": ["run", "-i", "ghcr.io/github/github-mcp-server"],
                           "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}},
            "remote": {"type": "http", "url": "https://mcp.example.com/mcp?team=1",
                       "headers": {"Authorization": "Bearer sk-live-123", "X-Team": "core"}},
            "old": {"type": "sse", "url": "https://mcp.example.com/sse"},
            "off": {"command": "x", "disabled": true}
        }}"#;
        let found = servers(text, "claude_desktop_config.json", "linux", &no_env).unwrap();
        let ids: Vec<&str> = found.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "mcp.filesystem",
                "mcp.github-api",
                "mcp.remote",
                "mcp.old",
                "mcp.off"
            ]
        );

        let fs = valid(found[0].descriptor.as_ref().unwrap());
        let aai_descriptor::Executor::Mcp(aai_descriptor::McpServer::Stdio(p)) =
            &fs.bindings[0].executor
        else {
            panic!("stdio")
        };
        assert_eq!(p.command, "npx");
        assert_eq!(p.args.len(), 3);

        assert!(found[1].notes[0].contains("GITHUB_PERSONAL_ACCESS_TOKEN"));

        let remote = &found[2];
        assert_eq!(remote.secret.as_deref(), Some("sk-live-123"));
        let doc = remote.descriptor.as_ref().unwrap();
        assert!(
            !doc.to_string().contains("sk-live-123"),
            "the key is not in the file"
        );
        assert_eq!(doc["auth"]["apiKey"]["name"], "Authorization");
        assert_eq!(doc["auth"]["apiKey"]["prefix"], "Bearer");
        assert_eq!(
            doc["auth"]["apiKey"]["obtainUrl"],
            "https://mcp.example.com"
        );
        assert_eq!(doc["execution"]["headers"], json!({"X-Team": "core"}));
        assert!(!remote.summary.contains("sk-live"));
        valid(doc);

        let old = found[3].descriptor.as_ref().unwrap();
        assert_eq!(old["execution"]["transport"], "sse");
        assert!(
            found[3]
                .summary
                .starts_with("SSE: https://mcp.example.com/sse")
        );
        let aai_descriptor::Executor::Mcp(aai_descriptor::McpServer::Http { mode, .. }) =
            valid(old).bindings[0].executor
        else {
            panic!("http")
        };
        assert_eq!(mode, aai_descriptor::HttpMode::Sse);
        assert!(
            found[4]
                .descriptor
                .as_ref()
                .unwrap_err()
                .contains("disabled")
        );
    }

    #[test]
    fn codex_toml_servers_become_apps() {
        let text = r#"
model = "o3"

[mcp_servers.time]
command = "uvx"
args = ["mcp-server-time"]
tool_timeout_sec = 30

[mcp_servers.linear]
url = "https://mcp.linear.app/mcp"
bearer_token_env_var = "LINEAR_TOKEN"

[mcp_servers.nokey]
url = "http://127.0.0.1:9/mcp"
bearer_token_env_var = "UNSET_VAR"
"#;
        let env = |k: &str| (k == "LINEAR_TOKEN").then(|| "lin_abc".to_owned());
        let found = servers(text, "config.toml", "linux", &env).unwrap();
        let time = found[0].descriptor.as_ref().unwrap();
        assert_eq!(time["execution"]["timeout"], 30000);
        valid(time);
        assert_eq!(found[1].secret.as_deref(), Some("lin_abc"));
        let linear = found[1].descriptor.as_ref().unwrap();
        assert_eq!(linear["auth"]["apiKey"]["prefix"], "Bearer");
        assert!(linear["execution"].get("headers").is_none());
        valid(linear);
        assert!(found[2].secret.is_none());
        assert!(found[2].notes[0].contains("UNSET_VAR"));
        valid(found[2].descriptor.as_ref().unwrap());
    }

    #[test]
    fn hostile_and_broken_files_are_refused_clearly() {
        assert!(
            servers("{", "a.json", "linux", &no_env)
                .unwrap_err()
                .contains("not valid JSON")
        );
        assert!(
            servers("{}", "a.json", "linux", &no_env)
                .unwrap_err()
                .contains("mcpServers")
        );
        assert!(
            servers("x = [", "a.toml", "linux", &no_env)
                .unwrap_err()
                .contains("TOML")
        );
        let odd = r#"{"mcpServers": {"../../etc": {"command": "a"}, "": {"url": "file:///etc/passwd"},
                      "n": {"command": "a", "args": "not a list"}, "m": 7}}"#;
        let found = servers(odd, "a.json", "linux", &no_env).unwrap();
        assert_eq!(
            found[0].id, "mcp.etc",
            "names cannot climb out of the home folder"
        );
        assert!(
            found[1]
                .descriptor
                .as_ref()
                .unwrap_err()
                .contains("not an http(s) URL")
        );
        assert!(
            found[2]
                .descriptor
                .as_ref()
                .unwrap_err()
                .contains("not a list")
        );
        assert!(found[3].descriptor.is_err());
    }
}
