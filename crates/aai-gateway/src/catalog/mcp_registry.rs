//! The official MCP Registry's public API (`GET <url>/v0/servers?search=…`), searched by
//! `aai_search` with `remote: true` when config `enableMcpRegistry` is on (off by default:
//! nothing is sent anywhere otherwise). Each server found says how it would be installed:
//! the arguments of the gateway's own `import` that would add it, and what its first use
//! would run. Installing is `import` (preview, then confirm): this module only reads.
//!
//! A server's entry maps to one MCP client configuration entry:
//!
//! | registry | entry |
//! |---|---|
//! | an `npm` package over stdio | `npx -y <identifier>@<version> <package arguments>` |
//! | a `pypi` package over stdio | `uvx <identifier>==<version> <package arguments>` |
//! | an `oci` image over stdio | `docker run -i --rm <identifier>:<version>` |
//! | a `streamable-http` or `sse` remote (no URL variables) | its `url` (and `type`) |
//!
//! The first package that maps is taken, else the first remote. Environment variables and
//! headers the entry needs become `${NAME}` placeholders (stored later with `auth set
//! <app> --secret NAME`); a fixed `value` or `default` is used as it is unless it is a
//! secret.

use serde_json::{Map, Value, json};

/// The largest answer read.
const MAX_ANSWER: usize = 4 * 1024 * 1024;
/// The most characters of a description kept; of a name or version.
const MAX_DESCRIPTION: usize = 300;
const MAX_NAME: usize = 200;
/// A package with more arguments than this is not installed (nobody reads such a line).
const MAX_ARGUMENTS: usize = 32;
/// One server the registry returned, with how it would be installed.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Its registry name (`io.github.user/weather`).
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its version.
    pub version: String,
    /// The `source` of an `import` that adds it (`{"mcpServers": {…}}`), when it maps.
    pub source: Option<Value>,
    /// What its first use runs or connects to, in words; or why it does not map.
    pub how: String,
}

/// Why the registry could not be searched.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Config `enableMcpRegistry` is off: nothing was sent.
    #[error("no registry was searched: config `enableMcpRegistry` is off")]
    Off,
    /// The URL or the request failed.
    #[error("the MCP Registry at {url} cannot be searched: {why}")]
    Unreachable {
        /// The registry.
        url: String,
        /// Why.
        why: String,
    },
}

/// Searches the registry at `base` for `query` (its servers' names), at most `limit`.
pub(crate) async fn search(base: &str, query: &str, limit: usize) -> Result<Vec<Found>, Error> {
    let fail = |why: String| Error::Unreachable {
        url: base.to_owned(),
        why,
    };
    let mut url = reqwest::Url::parse(&format!("{}/v0/servers", base.trim_end_matches('/')))
        .map_err(|e| fail(e.to_string()))?;
    crate::net::check_fetchable(&url).map_err(|e| fail(e.to_string()))?;
    url.query_pairs_mut()
        .append_pair("search", query)
        .append_pair("version", "latest")
        .append_pair("limit", &limit.to_string());
    let client =
        crate::net::client(crate::net::Purpose::Descriptor).map_err(|e| fail(e.to_string()))?;
    let response = client
        .get(url)
        .header("Accept", "application/json")
        .timeout(std::time::Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| fail(crate::net::describe(&e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(fail(format!("it answered {status}")));
    }
    let body = crate::net::read_capped(response, MAX_ANSWER)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let answer: Value =
        serde_json::from_slice(&body).map_err(|e| fail(format!("not JSON: {e}")))?;
    Ok(parse(&answer, limit))
}

/// The servers of a `/v0/servers` answer (`{"servers": [{"server": {…}, "_meta": …}]}`;
/// the older flat form `{"servers": [{…}]}` too).
pub(crate) fn parse(answer: &Value, limit: usize) -> Vec<Found> {
    answer
        .get("servers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| {
            let server = item.get("server").unwrap_or(item);
            let text = |k: &str, max: usize| {
                let raw = server.get(k).and_then(Value::as_str).unwrap_or_default();
                // Shown to the agent and the user: no control or direction characters.
                let clean: String = raw
                    .chars()
                    .filter(|c| {
                        !c.is_control()
                            && !matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
                    })
                    .collect();
                crate::text::excerpt(&clean, max)
            };
            let name = text("name", MAX_NAME);
            if name.is_empty() {
                return None;
            }
            let (source, how) = match install(server) {
                Ok((entry, how)) => {
                    let short = short_name(&name);
                    (Some(json!({"mcpServers": {short: entry}})), how)
                }
                Err(why) => (None, why),
            };
            Some(Found {
                description: text("description", MAX_DESCRIPTION),
                version: text("version", MAX_NAME),
                name,
                source,
                how,
            })
        })
        .take(limit)
        .collect()
}

/// The name an import gives the server (`io.github.user/weather` → `weather`; the app is
/// `mcp.weather`).
fn short_name(name: &str) -> String {
    let last = name.rsplit('/').next().unwrap_or(name);
    let cleaned: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    cleaned.trim_matches('-').to_owned()
}

/// One configuration entry for `server` and what it runs, or why none maps.
fn install(server: &Value) -> Result<(Value, String), String> {
    let packages = server.get("packages").and_then(Value::as_array);
    for p in packages.into_iter().flatten() {
        let stdio = p.pointer("/transport/type").and_then(Value::as_str) == Some("stdio");
        let (Some(kind), Some(id)) = (
            p.get("registryType").and_then(Value::as_str),
            p.get("identifier").and_then(Value::as_str),
        ) else {
            continue;
        };
        if !stdio || id.starts_with('-') {
            continue;
        }
        let version = p.get("version").and_then(Value::as_str);
        let (command, mut args): (&str, Vec<String>) = match (kind, version) {
            ("npm", Some(v)) => ("npx", vec!["-y".into(), format!("{id}@{v}")]),
            ("npm", None) => ("npx", vec!["-y".into(), id.to_owned()]),
            ("pypi", Some(v)) => ("uvx", vec![format!("{id}=={v}")]),
            ("pypi", None) => ("uvx", vec![id.to_owned()]),
            ("oci", v) => (
                "docker",
                vec![
                    "run".into(),
                    "-i".into(),
                    "--rm".into(),
                    v.map_or_else(|| id.to_owned(), |v| format!("{id}:{v}")),
                ],
            ),
            _ => continue,
        };
        let Some(extra) = arguments(p.get("packageArguments")) else {
            continue;
        };
        args.extend(extra);
        if args.len() > MAX_ARGUMENTS {
            continue;
        }
        let env = inputs(p.get("environmentVariables"));
        if let Some(name) = env.keys().find(|n| crate::exec::start::run_changing(n)) {
            return Err(format!(
                "sets `{}`, which changes what runs: not installed from here",
                crate::text::excerpt(name, 60)
            ));
        }
        let shown = std::iter::once(command.to_owned())
            .chain(args.iter().map(|a| crate::text::sh_quote(a)))
            .collect::<Vec<_>>()
            .join(" ");
        let with = if env.is_empty() {
            String::new()
        } else {
            let names: Vec<&str> = env.keys().map(String::as_str).collect();
            format!(" with {} set", names.join(", "))
        };
        let mut entry = json!({"command": command, "args": args});
        if !env.is_empty() {
            entry["env"] = Value::Object(env);
        }
        return Ok((
            entry,
            format!("runs `{shown}`{with} (downloads the package)"),
        ));
    }
    let remotes = server.get("remotes").and_then(Value::as_array);
    for r in remotes.into_iter().flatten() {
        let kind = r.get("type").and_then(Value::as_str).unwrap_or_default();
        let Some(url) = r.get("url").and_then(Value::as_str) else {
            continue;
        };
        if !matches!(kind, "streamable-http" | "sse") || url.contains('{') {
            continue;
        }
        // Only a plain http(s) URL without credentials.
        let Ok(parsed) = reqwest::Url::parse(url) else {
            continue;
        };
        if !matches!(parsed.scheme(), "https" | "http")
            || !parsed.username().is_empty()
            || parsed.password().is_some()
        {
            continue;
        }
        let mut entry = json!({"url": url, "type": if kind == "sse" { "sse" } else { "http" }});
        let headers = inputs(r.get("headers"));
        if !headers.is_empty() {
            entry["headers"] = Value::Object(headers);
        }
        return Ok((
            entry,
            format!("connects to {}", crate::net::redact(&parsed)),
        ));
    }
    Err(
        "no npm, PyPI or OCI package over stdio, nor a remote URL, that the gateway can install"
            .into(),
    )
}

/// Package arguments as words: fixed values as they are; a positional argument without a
/// value (the user must give it) means the entry cannot be written (`None`).
fn arguments(list: Option<&Value>) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for a in list.and_then(Value::as_array).into_iter().flatten() {
        let value = a
            .get("value")
            .or_else(|| a.get("default"))
            .and_then(Value::as_str);
        match (a.get("type").and_then(Value::as_str), value) {
            (Some("named"), v) => {
                let name = a.get("name").and_then(Value::as_str)?;
                match v {
                    Some(v) => out.push(format!("{name}={v}")),
                    None if a.get("isRequired").and_then(Value::as_bool) == Some(true) => {
                        return None;
                    }
                    None => {}
                }
            }
            (_, Some(v)) => out.push(v.to_owned()),
            _ if a.get("isRequired").and_then(Value::as_bool) == Some(true) => return None,
            _ => {}
        }
    }
    Some(out)
}

/// Environment variables or headers: a fixed non-secret value as it is, anything else a
/// `${NAME}` placeholder.
fn inputs(list: Option<&Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for v in list.and_then(Value::as_array).into_iter().flatten() {
        let Some(name) = v.get("name").and_then(Value::as_str) else {
            continue;
        };
        let secret = v.get("isSecret").and_then(Value::as_bool) == Some(true);
        let fixed = v
            .get("value")
            .or_else(|| v.get("default"))
            .and_then(Value::as_str)
            .filter(|s| !secret && !s.contains('{'));
        let value = fixed.map_or_else(|| format!("${{{}}}", placeholder(name)), str::to_owned);
        out.insert(name.to_owned(), json!(value));
    }
    out
}

/// A header or variable name as a placeholder name (`X-Api-Key` → `X_API_KEY`).
fn placeholder(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_and_remotes_map_to_configuration_entries() {
        let answer = json!({"servers": [
            {"server": {"name": "io.github.acme/weather", "description": "Weather", "version": "1.2.0",
                        "packages": [{"registryType": "npm", "identifier": "@acme/weather-mcp", "version": "1.2.0",
                                      "transport": {"type": "stdio"},
                                      "packageArguments": [{"type": "named", "name": "--units", "value": "metric"}],
                                      "environmentVariables": [{"name": "WEATHER_KEY", "isSecret": true, "isRequired": true},
                                                               {"name": "REGION", "default": "eu"}]}]},
             "_meta": {"io.modelcontextprotocol.registry/official": {"status": "active"}}},
            {"server": {"name": "com.example/remote", "description": "Remote", "version": "2.0.0",
                        "remotes": [{"type": "streamable-http", "url": "https://mcp.example.com/mcp",
                                     "headers": [{"name": "X-Api-Key", "isSecret": true}]}]}},
            {"server": {"name": "com.example/py", "description": "Py", "version": "0.3.0",
                        "packages": [{"registryType": "pypi", "identifier": "py-mcp", "version": "0.3.0",
                                      "transport": {"type": "stdio"}}]}},
            {"server": {"name": "com.example/nuget", "description": "N", "version": "1.0.0",
                        "packages": [{"registryType": "nuget", "identifier": "X", "transport": {"type": "stdio"}}]}},
            {"server": {"name": "com.example/needs-path", "description": "P", "version": "1.0.0",
                        "packages": [{"registryType": "npm", "identifier": "p", "transport": {"type": "stdio"},
                                      "packageArguments": [{"type": "positional", "valueHint": "dir", "isRequired": true}]}]}}
        ]});
        let found = parse(&answer, 10);
        assert_eq!(found.len(), 5);
        assert_eq!(
            found[0].source,
            Some(json!({"mcpServers": {"weather": {"command": "npx",
                "args": ["-y", "@acme/weather-mcp@1.2.0", "--units=metric"],
                "env": {"WEATHER_KEY": "${WEATHER_KEY}", "REGION": "eu"}}}}))
        );
        assert!(
            found[0].how.contains("npx -y @acme/weather-mcp@1.2.0"),
            "{}",
            found[0].how
        );
        assert_eq!(
            found[1].source,
            Some(
                json!({"mcpServers": {"remote": {"url": "https://mcp.example.com/mcp", "type": "http",
                "headers": {"X-Api-Key": "${X_API_KEY}"}}}})
            )
        );
        assert_eq!(found[1].how, "connects to https://mcp.example.com/…");
        assert_eq!(
            found[2].source.as_ref().unwrap()["mcpServers"]["py"]["args"],
            json!(["py-mcp==0.3.0"])
        );
        assert!(found[3].source.is_none() && found[4].source.is_none());
        assert!(
            found[0].how.contains("with WEATHER_KEY, REGION set")
                || found[0].how.contains("with REGION, WEATHER_KEY set"),
            "{}",
            found[0].how
        );
        let hostile = json!({"servers": [
            {"server": {"name": "x/\u{1b}[2Jevil\u{202e}", "description": "d".repeat(5000), "version": "1",
                        "packages": [{"registryType": "npm", "identifier": "p", "transport": {"type": "stdio"},
                                      "environmentVariables": [{"name": "NODE_OPTIONS", "value": "--require /tmp/e.js"}]}],
                        "remotes": [{"type": "sse", "url": "https://u:p@h.example/sse"},
                                    {"type": "sse", "url": "file:///etc/passwd"}]}}]});
        let f = &parse(&hostile, 5)[0];
        assert_eq!(f.name, "x/[2Jevil");
        assert!(f.description.chars().count() <= 301);
        assert!(
            f.source.is_none() && f.how.contains("NODE_OPTIONS"),
            "{}",
            f.how
        );
        assert_eq!(parse(&answer, 2).len(), 2);
        assert!(parse(&json!({"nope": 1}), 5).is_empty());
    }
}
