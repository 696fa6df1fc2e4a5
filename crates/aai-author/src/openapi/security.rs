//! Security schemes → the descriptor's one auth: the most used requirement that maps
//! (`map_scheme`), where to get a key (`key_page`), and notes on the tools it leaves out.

use serde_json::{Map, Value, json};

use super::{Importer, clip, object};

impl<'a> Importer<'a> {
    pub(super) fn count_security(&mut self, security: Option<&'a Value>) {
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
    pub(super) fn auth(
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
