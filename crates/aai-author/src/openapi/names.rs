//! Where the API is and what things are called: the base URL from `servers`, the app
//! id, HTTP methods and unique tool names.

use serde_json::{Map, Value};

use super::{Importer, MAX_TOOL_NAME, Options, object};

/// `servers[0]` (or `--base-url`), variables filled, made absolute, checked.
pub(super) fn base_url(root: &Map<String, Value>, opts: Options<'_>) -> Result<String, String> {
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
pub(super) fn app_id(base_url: &str, title: &str) -> String {
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

pub(super) fn http_method(key: &str) -> Option<&'static str> {
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

impl Importer<'_> {
    /// A tool name from the operationId or method + path, unique in this app.
    pub(super) fn tool_name(
        &mut self,
        operation_id: Option<&str>,
        method: &str,
        path: &str,
    ) -> String {
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
}
