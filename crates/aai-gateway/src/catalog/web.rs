//! Web app descriptors: `web_discover` (a site's `/.well-known/aai.json`) and the AAI
//! Registry catalog (`GET <registryUrl>/api/v1/apps` → `{apps: [{appId, name,
//! descriptor_url}]}`), both validated and cached under `$AAI_HOME/web/<appId>/`:
//! `aai.json` as fetched, and `meta.json` with `sourceUrl`, `fetchedAt` (Unix seconds),
//! `ttlSecs` (24 h) and the `etag`. A fresh cache entry is used without fetching; a stale
//! one is revalidated (`If-None-Match`), and used as it is when the site is unreachable.
//! Fetches time out after 10 s and stop at 1 MiB; only https (or loopback http) URLs are
//! fetched. The cache is a discovery source below the system paths.
//!
//! A fetched descriptor is bound to where it came from ([`check_bound`]): it may only
//! describe web APIs (`http`, or an MCP server over HTTP), and every URL the gateway will
//! contact for it — `baseUrl`, the MCP server's URL, OAuth and token endpoints, the login
//! page and cookie domain — is on the origin it was fetched from or, when it was fetched
//! over https, on the same registrable domain (Public Suffix List). Its id may never be
//! one a local or built-in descriptor has used ([`guard`]). Both rules hold at fetch time
//! and again at every scan of the cache.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::error::{Code, GatewayError};
use crate::net::{self, BodyError, Purpose};

/// How long a fetched descriptor is fresh.
pub(crate) const TTL: Duration = Duration::from_secs(24 * 3600);

/// Why a web descriptor or the registry catalog could not be had. `From<Error> for
/// GatewayError` below gives the wire codes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What the user typed is no URL or domain.
    #[error("`url` is not a URL or domain")]
    NotUrl,
    /// A URL the gateway does not fetch (scheme, host).
    #[error("{0}")]
    NotFetchable(String),
    /// The shared client could not be built.
    #[error("cannot start the HTTP client: {0}")]
    Client(#[from] net::Error),
    /// The site could not be reached, and nothing is cached.
    #[error("cannot fetch {url}: {why}")]
    Unreachable {
        /// The URL.
        url: String,
        /// What failed.
        why: String,
    },
    /// The site answered with an error status.
    #[error("{url} answered HTTP {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: reqwest::StatusCode,
    },
    /// The body is not UTF-8.
    #[error("{0} is not UTF-8 text")]
    NotText(String),
    /// The descriptor does not load.
    #[error("the descriptor at {url} is invalid: {}", .errors.join("; "))]
    Invalid {
        /// The URL.
        url: String,
        /// Its errors, one line each.
        errors: Vec<String>,
        /// Every diagnostic, as JSON (`data.diagnostics`).
        diagnostics: Value,
    },
    /// The descriptor points somewhere its origin may not send the gateway.
    #[error("the descriptor at {url} is refused: {why}")]
    Unbound {
        /// The URL, redacted.
        url: String,
        /// The origin it came from.
        origin: String,
        /// Which URL breaks the rule.
        why: String,
    },
    /// A catalog entry's descriptor describes another app.
    #[error("the catalog lists `{listed}` but {url} describes `{described}`")]
    WrongId {
        /// The id the catalog promised.
        listed: String,
        /// The URL.
        url: String,
        /// The id the descriptor has.
        described: String,
    },
    /// The id belongs to another origin.
    #[error(
        "{url} describes `{id}`, but that app belongs to {bound} (it was first fetched from there); another site cannot take it over. To move the app on purpose, delete {} and its stored credential (`aai-gateway auth logout {id}`), then discover it again",
        .folder.display()
    )]
    TakenOver {
        /// The URL, redacted.
        url: String,
        /// The app id.
        id: String,
        /// The origin it belongs to.
        bound: String,
        /// Its cache folder.
        folder: PathBuf,
    },
    /// The id is a local or built-in app's.
    #[error("{url} describes `{id}`, an id a local or built-in app has; a web app cannot take it")]
    Reserved {
        /// The URL, redacted.
        url: String,
        /// The app id.
        id: String,
    },
    /// The cache could not be written.
    #[error("cannot cache the descriptor: {0}")]
    Cache(std::io::Error),
    /// The configured registry URL is not a URL.
    #[error("registryUrl is invalid: {0}")]
    RegistryUrl(url::ParseError),
    /// The registry could not be reached.
    #[error("cannot reach the registry: {0}")]
    RegistryUnreachable(String),
    /// The registry answered with an error status.
    #[error("{url} answered HTTP {status}")]
    RegistryStatus {
        /// The URL.
        url: String,
        /// The status.
        status: reqwest::StatusCode,
    },
    /// The catalog is not JSON.
    #[error("the registry catalog is not JSON: {0}")]
    CatalogNotJson(serde_json::Error),
    /// A catalog entry's URL is not a URL.
    #[error("{url}: {why}")]
    EntryUrl {
        /// The entry's URL.
        url: String,
        /// The parser's words.
        why: url::ParseError,
    },
    /// The descriptor is over the cap.
    #[error("the descriptor is larger than 1 MiB")]
    TooLarge,
    /// Reading the body failed.
    #[error("{0}")]
    Body(BodyError),
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match &e {
            Error::NotUrl | Error::NotFetchable(_) => Code::InvalidParams,
            Error::Status { status, .. } if *status == reqwest::StatusCode::NOT_FOUND => {
                Code::NotFound
            }
            Error::Unreachable { .. }
            | Error::Status { .. }
            | Error::RegistryUnreachable(_)
            | Error::RegistryStatus { .. }
            | Error::Body(_) => Code::ServiceUnavailable,
            Error::NotText(_)
            | Error::Invalid { .. }
            | Error::Unbound { .. }
            | Error::WrongId { .. }
            | Error::RegistryUrl(_)
            | Error::CatalogNotJson(_)
            | Error::EntryUrl { .. }
            | Error::TooLarge => Code::AaiJsonInvalid,
            Error::TakenOver { .. } | Error::Reserved { .. } => Code::PermissionDenied,
            Error::Client(_) | Error::Cache(_) => Code::AutomationFailed,
        };
        let wire = GatewayError::new(code, e.to_string());
        match e {
            Error::NotUrl | Error::NotFetchable(_) => wire.with("field", "/url"),
            Error::Invalid { diagnostics, .. } => wire.with("diagnostics", diagnostics),
            Error::Unbound { origin, .. } => wire.with("origin", origin),
            Error::TakenOver { bound, .. } => wire.with("boundOrigin", bound),
            _ => wire,
        }
    }
}

/// The `.well-known` URL for what the user typed: a URL, or a bare domain.
pub(crate) fn well_known(input: &str) -> Result<reqwest::Url, Error> {
    let input = input.trim();
    let with_scheme = if input.contains("://") {
        input.to_owned()
    } else {
        format!("https://{input}")
    };
    let url = reqwest::Url::parse(&with_scheme).map_err(|_| Error::NotUrl)?;
    check_fetchable(&url)?;
    let mut base = url.clone();
    base.set_path("/.well-known/aai.json");
    base.set_query(None);
    base.set_fragment(None);
    Ok(base)
}

fn check_fetchable(url: &reqwest::Url) -> Result<(), Error> {
    net::check_fetchable(url).map_err(|why| Error::NotFetchable(why.to_string()))
}

/// The cache directory of the web apps.
pub(crate) fn cache_dir(home: &Path) -> PathBuf {
    home.join("web")
}

/// What a fetch produced.
#[derive(Debug)]
pub(crate) struct Fetched {
    /// The app id the descriptor declares.
    pub app_id: String,
    /// Served from the cache because the site could not be reached.
    pub stale: bool,
    /// A descriptor was written (new or changed): the catalog must be rescanned.
    pub changed: bool,
}

/// Fetches descriptors (through the shared client of `net`) into the cache.
#[derive(Debug)]
pub(crate) struct Fetcher {
    home: PathBuf,
    /// `sourceUrl → app id` of the cache, built on first use and kept current, so a
    /// lookup reads one entry instead of every entry.
    index: std::sync::Arc<std::sync::Mutex<Option<std::collections::HashMap<String, String>>>>,
}

impl Fetcher {
    /// A fetcher caching under `home/web`.
    pub(crate) fn new(home: &Path) -> Fetcher {
        Fetcher {
            home: home.to_owned(),
            index: Default::default(),
        }
    }

    /// The cache entry for `known_id`, else the one fetched from `url`: read on a blocking
    /// thread, through the index.
    async fn lookup(&self, known_id: Option<&str>, url: &reqwest::Url) -> Option<(String, Value)> {
        let home = self.home.clone();
        let index = self.index.clone();
        let known = known_id.map(str::to_owned);
        let source = url.as_str().to_owned();
        tokio::task::spawn_blocking(move || {
            if let Some(id) = known
                && let Some(found) = read_entry(&home, &id)
            {
                return Some(found);
            }
            let mut index = index.lock().expect("index lock");
            for attempt in 0..2 {
                let map = index.get_or_insert_with(|| build_index(&home));
                if let Some(id) = map.get(&source).cloned()
                    && let Some((id, meta)) = read_entry(&home, &id)
                    && meta.get("sourceUrl").and_then(Value::as_str) == Some(source.as_str())
                {
                    return Some((id, meta));
                }
                // Changed on disk behind our back: read the folder again, once.
                if attempt == 0 {
                    *index = None;
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
    }

    fn remember(&self, source: &str, id: &str) {
        if let Some(map) = self.index.lock().expect("index lock").as_mut() {
            map.insert(source.to_owned(), id.to_owned());
        }
    }

    fn client(&self) -> Result<&'static reqwest::Client, Error> {
        Ok(net::client(Purpose::Descriptor)?)
    }

    /// Fetches, validates and caches the descriptor at `url`. `known_id` is the app id a
    /// catalog promised (checked), or `None` for `web_discover`.
    pub(crate) async fn fetch(
        &self,
        url: &reqwest::Url,
        known_id: Option<&str>,
    ) -> Result<Fetched, Error> {
        check_fetchable(url)?;
        let cached = self.lookup(known_id, url).await;
        if let Some((id, meta)) = &cached
            && age(meta) < TTL
        {
            return Ok(Fetched {
                app_id: id.clone(),
                stale: false,
                changed: false,
            });
        }
        let mut request = self.client()?.get(url.clone());
        if let Some(etag) = cached
            .as_ref()
            .and_then(|(_, m)| m.get("etag"))
            .and_then(Value::as_str)
        {
            request = request.header("if-none-match", etag);
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                return match cached {
                    Some((id, _)) => {
                        tracing::warn!(%url, "cannot fetch the descriptor ({}); using the cached copy", net::describe(&e));
                        Ok(Fetched {
                            app_id: id,
                            stale: true,
                            changed: false,
                        })
                    }
                    None => Err(Error::Unreachable {
                        url: url.to_string(),
                        why: net::describe(&e),
                    }),
                };
            }
        };
        if response.status() == reqwest::StatusCode::NOT_MODIFIED
            && let Some((id, mut meta)) = cached
        {
            meta["fetchedAt"] = json!(now());
            self.write_meta(&id, &meta)?;
            return Ok(Fetched {
                app_id: id,
                stale: false,
                changed: false,
            });
        }
        if !response.status().is_success() {
            return Err(Error::Status {
                url: url.to_string(),
                status: response.status(),
            });
        }
        let etag = response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = read_capped(response).await?;
        let text = String::from_utf8(body).map_err(|_| Error::NotText(url.to_string()))?;
        let parsed = aai_descriptor::parse(&text, url.as_str());
        let Some(app) = parsed.app else {
            return Err(Error::Invalid {
                url: url.to_string(),
                errors: parsed
                    .diagnostics
                    .iter()
                    .filter(|d| d.is_error())
                    .map(ToString::to_string)
                    .collect(),
                diagnostics: serde_json::to_value(&parsed.diagnostics).unwrap_or_default(),
            });
        };
        check_bound(&app, url).map_err(|why| Error::Unbound {
            url: net::redact(url),
            origin: url.origin().ascii_serialization(),
            why,
        })?;
        if let Some(id) = known_id.filter(|id| *id != app.id) {
            return Err(Error::WrongId {
                listed: id.to_owned(),
                url: url.to_string(),
                described: app.id,
            });
        }
        // A web app's id belongs to the origin it was first fetched from: another origin
        // serving the same id must not take over the app (and the credential stored for
        // it).
        if let Some((_, meta)) = self.cached(&app.id)
            && let Some(bound) = meta
                .get("sourceUrl")
                .and_then(Value::as_str)
                .and_then(|u| reqwest::Url::parse(u).ok())
            && bound.origin() != url.origin()
        {
            return Err(Error::TakenOver {
                url: net::redact(url),
                folder: cache_dir(&self.home).join(&app.id),
                id: app.id,
                bound: bound.origin().ascii_serialization(),
            });
        }
        let dir = cache_dir(&self.home).join(&app.id);
        crate::files::private_dir(&cache_dir(&self.home)).map_err(Error::Cache)?;
        crate::files::private_dir(&dir).map_err(Error::Cache)?;
        crate::files::write_private(&dir.join("aai.json"), text.as_bytes())
            .map_err(Error::Cache)?;
        let meta = json!({"sourceUrl": url.as_str(), "fetchedAt": now(), "ttlSecs": TTL.as_secs(), "etag": etag});
        self.write_meta(&app.id, &meta)?;
        self.remember(url.as_str(), &app.id);
        tracing::info!(app = %app.id, %url, "cached a web app descriptor");
        Ok(Fetched {
            app_id: app.id,
            stale: false,
            changed: true,
        })
    }

    /// Fetches the registry catalog and every descriptor in it (8 at a time). One bad
    /// entry does not stop the others; returns the ids cached and the problems.
    pub(crate) async fn registry(
        &self,
        registry_url: &str,
    ) -> Result<(Vec<String>, Vec<String>), Error> {
        let url = reqwest::Url::parse(&format!(
            "{}/api/v1/apps",
            registry_url.trim_end_matches('/')
        ))
        .map_err(Error::RegistryUrl)?;
        check_fetchable(&url)?;
        let catalog: Value = match self.client()?.get(url.clone()).send().await {
            Ok(r) if r.status().is_success() => {
                serde_json::from_slice(&read_capped(r).await?).map_err(Error::CatalogNotJson)?
            }
            Ok(r) => {
                return Err(Error::RegistryStatus {
                    url: url.to_string(),
                    status: r.status(),
                });
            }
            Err(e) => return Err(Error::RegistryUnreachable(net::describe(&e))),
        };
        let entries: Vec<(String, String)> = catalog
            .get("apps")
            .and_then(Value::as_array)
            .map(|apps| {
                apps.iter()
                    .filter_map(|a| {
                        let id = a.get("appId")?.as_str()?;
                        let url = a
                            .get("descriptor_url")
                            .or_else(|| a.get("descriptorUrl"))?
                            .as_str()?;
                        Some((id.to_owned(), url.to_owned()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut ok = Vec::new();
        let mut problems = Vec::new();
        for chunk in entries.chunks(8) {
            let results = futures_util::future::join_all(chunk.iter().map(|(id, u)| async move {
                let url = reqwest::Url::parse(u).map_err(|why| Error::EntryUrl {
                    url: u.clone(),
                    why,
                })?;
                self.fetch(&url, Some(id)).await
            }))
            .await;
            for ((id, _), r) in chunk.iter().zip(results) {
                match r {
                    Ok(f) => ok.push(f.app_id),
                    Err(e) => problems.push(format!("{id}: {e}")),
                }
            }
        }
        Ok((ok, problems))
    }

    /// Removes the cached copy of `id` (one that may not be served).
    pub(crate) fn forget(&self, id: &str) {
        let dir = cache_dir(&self.home).join(id);
        if dir.parent() == Some(cache_dir(&self.home).as_path()) {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some(map) = self.index.lock().expect("index lock").as_mut() {
            map.retain(|_, v| v != id);
        }
    }

    fn cached(&self, id: &str) -> Option<(String, Value)> {
        read_entry(&self.home, id)
    }

    fn write_meta(&self, id: &str, meta: &Value) -> Result<(), Error> {
        crate::files::write_private(
            &cache_dir(&self.home).join(id).join("meta.json"),
            format!("{meta:#}\n").as_bytes(),
        )
        .map_err(Error::Cache)
    }
}

/// Where a URL of a fetched descriptor may point: the origin it was fetched from, or, when
/// both are https, a host of the same registrable domain (`api.example.com` for a
/// descriptor from `example.com`). Says which URL breaks the rule, naming both origins.
fn check_bound(app: &aai_descriptor::App, source: &reqwest::Url) -> Result<(), String> {
    use aai_descriptor::{Auth, Executor, McpServer};
    for (i, binding) in app.bindings.iter().enumerate() {
        let mut urls: Vec<(&str, &str)> = Vec::new();
        match &binding.executor {
            Executor::Http(http) => urls.push(("baseUrl", &http.base_url)),
            Executor::Mcp(McpServer::Http { url, .. }) => urls.push(("the MCP server URL", url)),
            other => {
                return Err(format!(
                    "binding {i} is `{}`: a descriptor fetched from the web may only describe web APIs (`http`, or an MCP server over HTTP), never a program to run on this machine",
                    other.kind().as_str()
                ));
            }
        }
        match &binding.auth {
            Some(Auth::OAuth2(o)) => {
                urls.push((
                    "the OAuth authorization endpoint",
                    &o.authorization_endpoint,
                ));
                urls.push(("the OAuth token endpoint", &o.token_endpoint));
            }
            Some(Auth::AppCredential(a)) => urls.push(("tokenEndpoint", &a.token_endpoint)),
            Some(Auth::Cookie(c)) => {
                urls.push(("loginUrl", &c.login_url));
                let domain = c.domain.trim_start_matches('.');
                if !within(domain, source) {
                    return Err(format!(
                        "the cookie domain `{domain}` is not {}'s own",
                        source.origin().ascii_serialization()
                    ));
                }
            }
            Some(Auth::ApiKey(_)) | None => {}
        }
        for (what, raw) in urls {
            let url =
                reqwest::Url::parse(raw).map_err(|_| format!("{what} `{raw}` is not a URL"))?;
            if url.origin() == source.origin() {
                continue;
            }
            let both_https = url.scheme() == "https" && source.scheme() == "https";
            if both_https && url.host_str().is_some_and(|h| within(h, source)) {
                continue;
            }
            return Err(format!(
                "{what} is on {} but the descriptor came from {}; a fetched descriptor may only reach its own origin (or, over https, its own registrable domain)",
                url.origin().ascii_serialization(),
                source.origin().ascii_serialization()
            ));
        }
    }
    Ok(())
}

/// Whether `host` is `source`'s host or shares its registrable domain (never for IP
/// addresses or bare public suffixes).
fn within(host: &str, source: &reqwest::Url) -> bool {
    let Some(from) = source.host_str() else {
        return false;
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let from = from.trim_end_matches('.').to_ascii_lowercase();
    if host == from {
        return true;
    }
    let registrable = |h: &str| psl::domain_str(h).map(str::to_owned);
    matches!(
        (registrable(&host), registrable(&from)),
        (Some(a), Some(b)) if a == b
    )
}

/// Drops from `catalog` the web apps it may not serve, each with an error diagnostic: an
/// id a built-in app has, one that a local descriptor uses or has used (`reserved`, the
/// ids of this scan's other sources and broken files included), and a descriptor whose
/// URLs left the origin it came from (`meta.json`'s `sourceUrl`).
pub(crate) fn guard(catalog: &mut super::Catalog, reserved: &std::collections::HashSet<String>) {
    use super::SourceKind;
    // Most catalogs have no web app: nothing to look at, and no set of every id to make.
    if !catalog.apps.iter().any(|l| l.kind == SourceKind::WebCache) {
        return;
    }
    let local: std::collections::HashSet<String> = catalog
        .apps
        .iter()
        .filter(|l| l.kind != SourceKind::WebCache)
        .map(|l| l.app.id.clone())
        .chain(catalog.broken.iter().flat_map(|b| b.ids.iter().cloned()))
        .collect();
    let mut refused = Vec::new();
    catalog.apps.retain(|l| {
        if l.kind != SourceKind::WebCache {
            return true;
        }
        let id = &l.app.id;
        let why = if super::builtin::is_builtin_id(id) {
            Some("a built-in app has this id".to_owned())
        } else if local.contains(id) || reserved.contains(id) {
            Some("a local descriptor uses or has used this id".to_owned())
        } else {
            source_of(l.source())
                .ok_or_else(|| "its meta.json does not say where it came from".to_owned())
                .and_then(|source| check_bound(&l.app, &source))
                .err()
        };
        if let Some(why) = &why {
            refused.push((l.source().to_owned(), id.clone(), why.clone()));
        }
        why.is_none()
    });
    for (file, id, why) in refused {
        let sink = aai_descriptor::Sink::new(file.display().to_string());
        sink.error("", format!("the web app `{id}` is not served: {why}"));
        catalog.diagnostics.extend(sink.into_vec());
    }
}

/// The URL a cached descriptor was fetched from (its `meta.json` beside it).
pub(super) fn source_of(file: &Path) -> Option<reqwest::Url> {
    let meta = std::fs::read_to_string(file.parent()?.join("meta.json")).ok()?;
    let meta: Value = serde_json::from_str(&meta).ok()?;
    reqwest::Url::parse(meta.get("sourceUrl")?.as_str()?).ok()
}

/// One cache entry: its id and `meta.json`, when its descriptor exists.
fn read_entry(home: &Path, id: &str) -> Option<(String, Value)> {
    let dir = cache_dir(home).join(id);
    let meta = std::fs::read_to_string(dir.join("meta.json")).ok()?;
    dir.join("aai.json").exists().then(|| {
        (
            id.to_owned(),
            serde_json::from_str(&meta).unwrap_or(Value::Null),
        )
    })
}

/// `sourceUrl → id` of every cache entry.
fn build_index(home: &Path) -> std::collections::HashMap<String, String> {
    let mut map = std::collections::HashMap::new();
    for entry in std::fs::read_dir(cache_dir(home))
        .into_iter()
        .flatten()
        .flatten()
    {
        let id = entry.file_name().to_string_lossy().into_owned();
        if let Some((id, meta)) = read_entry(home, &id)
            && let Some(source) = meta.get("sourceUrl").and_then(Value::as_str)
        {
            map.insert(source.to_owned(), id);
        }
    }
    map
}

fn age(meta: &Value) -> Duration {
    let fetched = meta.get("fetchedAt").and_then(Value::as_u64).unwrap_or(0);
    Duration::from_secs(now().saturating_sub(fetched))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn read_capped(response: reqwest::Response) -> Result<Vec<u8>, Error> {
    net::read_capped(response, net::MAX_DESCRIPTOR)
        .await
        .map_err(|e| match e {
            BodyError::TooLarge(_) => Error::TooLarge,
            other => Error::Body(other),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_become_well_known_urls() {
        assert_eq!(
            well_known("example.com").unwrap().as_str(),
            "https://example.com/.well-known/aai.json"
        );
        assert_eq!(
            well_known("https://api.example.com/v1/x?y=1#z")
                .unwrap()
                .as_str(),
            "https://api.example.com/.well-known/aai.json"
        );
        assert_eq!(
            well_known("http://127.0.0.1:8080").unwrap().as_str(),
            "http://127.0.0.1:8080/.well-known/aai.json"
        );
        assert!(well_known("http://example.com").is_err());
        assert!(well_known("ftp://example.com").is_err());
    }

    fn web_app(base: &str, auth: serde_json::Value) -> aai_descriptor::App {
        let mut doc = json!({"schemaVersion":"1.0","version":"1.0.0","platform":"web",
            "app":{"id":"com.example.api","name":"Api","description":"d"},
            "execution":{"type":"http","baseUrl": base},
            "tools":[{"name":"t","description":"d","parameters":{"type":"object"},
                      "execution":{"method":"GET","path":"/t"}}]});
        if !auth.is_null() {
            doc["auth"] = auth;
        }
        let parsed = aai_descriptor::parse(&doc.to_string(), "t");
        parsed
            .app
            .unwrap_or_else(|| panic!("{:?}", parsed.diagnostics))
    }

    #[test]
    fn fetched_descriptors_stay_on_their_origin_or_registrable_domain() {
        let from = |u: &str| reqwest::Url::parse(u).unwrap();
        let ok = |base: &str, source: &str| check_bound(&web_app(base, Value::Null), &from(source));
        ok(
            "https://example.com/v1",
            "https://example.com/.well-known/aai.json",
        )
        .unwrap();
        ok(
            "https://api.example.com",
            "https://example.com/.well-known/aai.json",
        )
        .unwrap();
        ok(
            "https://api.example.co.uk",
            "https://www.example.co.uk/.well-known/aai.json",
        )
        .unwrap();
        ok(
            "http://127.0.0.1:8080/api",
            "http://127.0.0.1:8080/.well-known/aai.json",
        )
        .unwrap();
        let e = ok(
            "http://127.0.0.1:9090/api",
            "http://127.0.0.1:8080/.well-known/aai.json",
        )
        .unwrap_err();
        assert!(
            e.contains("http://127.0.0.1:9090") && e.contains("http://127.0.0.1:8080"),
            "{e}"
        );
        // Registrable domains: not across public suffixes, not over plain http.
        ok(
            "https://evil.co.uk",
            "https://example.co.uk/.well-known/aai.json",
        )
        .unwrap_err();
        ok(
            "https://other.github.io",
            "https://mine.github.io/.well-known/aai.json",
        )
        .unwrap_err();
        ok(
            "https://example.org",
            "https://example.com/.well-known/aai.json",
        )
        .unwrap_err();
        ok(
            "http://localhost:9090",
            "http://localhost:8080/.well-known/aai.json",
        )
        .unwrap_err();
        // Endpoints of auth follow the same rule.
        let oauth = |token: &str| {
            web_app(
                "https://api.example.com",
                json!({"type":"oauth2","oauth2":{
                "authorizationEndpoint":"https://login.example.com/authorize",
                "tokenEndpoint": token, "scopes":[]}}),
            )
        };
        let source = from("https://example.com/.well-known/aai.json");
        check_bound(&oauth("https://login.example.com/token"), &source).unwrap();
        let e = check_bound(&oauth("https://collector.example.net/token"), &source).unwrap_err();
        assert!(e.contains("OAuth token endpoint"), "{e}");
    }
}
