//! Web app descriptors: `web_discover` (a site's `/.well-known/aai.json`) and the AAI
//! Registry catalog (`GET <registryUrl>/api/v1/apps` → `{apps: [{appId, name,
//! descriptor_url}]}`), both validated and cached under `$AAI_HOME/web/<appId>/`:
//! `aai.json` as fetched, and `meta.json` with `sourceUrl`, `fetchedAt` (Unix seconds),
//! `ttlSecs` (24 h) and the `etag`. A fresh cache entry is used without fetching; a stale
//! one is revalidated (`If-None-Match`), and used as it is when the site is unreachable.
//! Fetches time out after 10 s and stop at 1 MiB; only https (or loopback http) URLs are
//! fetched. The cache is a discovery source below the system paths.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::error::{Code, GatewayError};
use crate::net::{self, BodyError, Purpose};

/// How long a fetched descriptor is fresh.
pub const TTL: Duration = Duration::from_secs(24 * 3600);

/// The `.well-known` URL for what the user typed: a URL, or a bare domain.
pub fn well_known(input: &str) -> Result<reqwest::Url, GatewayError> {
    let input = input.trim();
    let with_scheme = if input.contains("://") {
        input.to_owned()
    } else {
        format!("https://{input}")
    };
    let url = reqwest::Url::parse(&with_scheme).map_err(|_| {
        GatewayError::new(Code::InvalidParams, "`url` is not a URL or domain").with("field", "/url")
    })?;
    check_fetchable(&url)?;
    let mut base = url.clone();
    base.set_path("/.well-known/aai.json");
    base.set_query(None);
    base.set_fragment(None);
    Ok(base)
}

fn check_fetchable(url: &reqwest::Url) -> Result<(), GatewayError> {
    net::check_fetchable(url)
        .map_err(|why| GatewayError::new(Code::InvalidParams, why).with("field", "/url"))
}

/// The cache directory of the web apps.
pub fn cache_dir(home: &Path) -> PathBuf {
    home.join("web")
}

/// What a fetch produced.
#[derive(Debug)]
pub struct Fetched {
    /// The app id the descriptor declares.
    pub app_id: String,
    /// Where it was cached.
    pub file: PathBuf,
    /// Served from the cache because the site could not be reached.
    pub stale: bool,
    /// A descriptor was written (new or changed): the catalog must be rescanned.
    pub changed: bool,
}

/// Fetches descriptors (through the shared client of `net`) into the cache.
#[derive(Debug)]
pub struct Fetcher {
    home: PathBuf,
    /// `sourceUrl → app id` of the cache, built on first use and kept current, so a
    /// lookup reads one entry instead of every entry.
    index: std::sync::Arc<std::sync::Mutex<Option<std::collections::HashMap<String, String>>>>,
}

impl Fetcher {
    /// A fetcher caching under `home/web`.
    pub fn new(home: &Path) -> Fetcher {
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

    fn client(&self) -> Result<&'static reqwest::Client, GatewayError> {
        net::client(Purpose::Descriptor).map_err(|e| {
            GatewayError::new(
                Code::AutomationFailed,
                format!("cannot start the HTTP client: {e}"),
            )
        })
    }

    /// Fetches, validates and caches the descriptor at `url`. `known_id` is the app id a
    /// catalog promised (checked), or `None` for `web_discover`.
    pub async fn fetch(
        &self,
        url: &reqwest::Url,
        known_id: Option<&str>,
    ) -> Result<Fetched, GatewayError> {
        check_fetchable(url)?;
        let cached = self.lookup(known_id, url).await;
        if let Some((id, meta)) = &cached
            && age(meta) < TTL
        {
            return Ok(Fetched {
                file: self.file(id),
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
                            file: self.file(&id),
                            app_id: id,
                            stale: true,
                            changed: false,
                        })
                    }
                    None => Err(GatewayError::new(
                        Code::ServiceUnavailable,
                        format!("cannot fetch {url}: {}", net::describe(&e)),
                    )),
                };
            }
        };
        if response.status() == reqwest::StatusCode::NOT_MODIFIED
            && let Some((id, mut meta)) = cached
        {
            meta["fetchedAt"] = json!(now());
            self.write_meta(&id, &meta)?;
            return Ok(Fetched {
                file: self.file(&id),
                app_id: id,
                stale: false,
                changed: false,
            });
        }
        if !response.status().is_success() {
            let code = if response.status() == reqwest::StatusCode::NOT_FOUND {
                Code::NotFound
            } else {
                Code::ServiceUnavailable
            };
            return Err(GatewayError::new(
                code,
                format!("{url} answered HTTP {}", response.status()),
            ));
        }
        let etag = response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = read_capped(response).await?;
        let text = String::from_utf8(body).map_err(|_| {
            GatewayError::new(Code::AaiJsonInvalid, format!("{url} is not UTF-8 text"))
        })?;
        let parsed = aai_descriptor::parse(&text, url.as_str());
        let Some(app) = parsed.app else {
            let lines: Vec<String> = parsed
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .map(ToString::to_string)
                .collect();
            return Err(GatewayError::new(
                Code::AaiJsonInvalid,
                format!("the descriptor at {url} is invalid: {}", lines.join("; ")),
            )
            .with(
                "diagnostics",
                serde_json::to_value(&parsed.diagnostics).unwrap_or_default(),
            ));
        };
        if let Some(id) = known_id.filter(|id| *id != app.id) {
            return Err(GatewayError::new(
                Code::AaiJsonInvalid,
                format!("the catalog lists `{id}` but {url} describes `{}`", app.id),
            ));
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
            let folder = cache_dir(&self.home).join(&app.id);
            return Err(GatewayError::new(
                Code::PermissionDenied,
                format!(
                    "{} describes `{}`, but that app belongs to {} (it was first fetched from there); another site cannot take it over. To move the app on purpose, delete {} and its stored credential (`aai-gateway auth logout {}`), then discover it again",
                    net::redact(url),
                    app.id,
                    bound.origin().ascii_serialization(),
                    folder.display(),
                    app.id,
                ),
            )
            .with("boundOrigin", bound.origin().ascii_serialization()));
        }
        let dir = cache_dir(&self.home).join(&app.id);
        let fail = |e: std::io::Error| {
            GatewayError::new(
                Code::AutomationFailed,
                format!("cannot cache the descriptor: {e}"),
            )
        };
        std::fs::create_dir_all(&dir).map_err(fail)?;
        let tmp = dir.join(".aai.json.tmp");
        std::fs::write(&tmp, &text).map_err(fail)?;
        std::fs::rename(&tmp, dir.join("aai.json")).map_err(fail)?;
        let meta = json!({"sourceUrl": url.as_str(), "fetchedAt": now(), "ttlSecs": TTL.as_secs(), "etag": etag});
        self.write_meta(&app.id, &meta)?;
        self.remember(url.as_str(), &app.id);
        tracing::info!(app = %app.id, %url, "cached a web app descriptor");
        Ok(Fetched {
            file: dir.join("aai.json"),
            app_id: app.id,
            stale: false,
            changed: true,
        })
    }

    /// Fetches the registry catalog and every descriptor in it (8 at a time). One bad
    /// entry does not stop the others; returns the ids cached and the problems.
    pub async fn registry(
        &self,
        registry_url: &str,
    ) -> Result<(Vec<String>, Vec<String>), GatewayError> {
        let url = reqwest::Url::parse(&format!(
            "{}/api/v1/apps",
            registry_url.trim_end_matches('/')
        ))
        .map_err(|e| {
            GatewayError::new(Code::AaiJsonInvalid, format!("registryUrl is invalid: {e}"))
        })?;
        check_fetchable(&url)?;
        let catalog: Value = match self.client()?.get(url.clone()).send().await {
            Ok(r) if r.status().is_success() => serde_json::from_slice(&read_capped(r).await?)
                .map_err(|e| {
                    GatewayError::new(
                        Code::AaiJsonInvalid,
                        format!("the registry catalog is not JSON: {e}"),
                    )
                })?,
            Ok(r) => {
                return Err(GatewayError::new(
                    Code::ServiceUnavailable,
                    format!("{url} answered HTTP {}", r.status()),
                ));
            }
            Err(e) => {
                return Err(GatewayError::new(
                    Code::ServiceUnavailable,
                    format!("cannot reach the registry: {}", net::describe(&e)),
                ));
            }
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
                let url = reqwest::Url::parse(u)
                    .map_err(|e| GatewayError::new(Code::AaiJsonInvalid, format!("{u}: {e}")))?;
                self.fetch(&url, Some(id)).await
            }))
            .await;
            for ((id, _), r) in chunk.iter().zip(results) {
                match r {
                    Ok(f) => ok.push(f.app_id),
                    Err(e) => problems.push(format!("{id}: {}", e.detail)),
                }
            }
        }
        Ok((ok, problems))
    }

    fn file(&self, id: &str) -> PathBuf {
        cache_dir(&self.home).join(id).join("aai.json")
    }

    fn cached(&self, id: &str) -> Option<(String, Value)> {
        read_entry(&self.home, id)
    }

    fn write_meta(&self, id: &str, meta: &Value) -> Result<(), GatewayError> {
        std::fs::write(
            cache_dir(&self.home).join(id).join("meta.json"),
            format!("{meta:#}\n"),
        )
        .map_err(|e| {
            GatewayError::new(
                Code::AutomationFailed,
                format!("cannot cache the descriptor: {e}"),
            )
        })
    }
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

async fn read_capped(response: reqwest::Response) -> Result<Vec<u8>, GatewayError> {
    net::read_capped(response, net::MAX_DESCRIPTOR)
        .await
        .map_err(|e| match e {
            BodyError::TooLarge(_) => {
                GatewayError::new(Code::AaiJsonInvalid, "the descriptor is larger than 1 MiB")
            }
            BodyError::Transport(_) | BodyError::TimedOut => {
                GatewayError::new(Code::ServiceUnavailable, e.to_string())
            }
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
}
