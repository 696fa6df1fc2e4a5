//! Where credentials live: the OS store through the `keyring` crate (Keychain, Credential
//! Manager, Secret Service), or — only when the user opts in with `credentials.store:
//! "file"` — a 0600 JSON file under `$AAI_HOME` (a warning is logged).
//!
//! One entry per app: service `aai-gateway`, account = the app id ([`account`]: a person's
//! own sign-in to it is `<app id>~<subject>`), value = a small JSON object (`{"type": "apiKey", "value": …}`, …). Values are wrapped in [`Secret`], whose
//! `Debug` never shows them; nothing here logs a value. The keyring API is synchronous and
//! may talk to a daemon: it is called on a blocking thread with a deadline, so a locked or
//! absent Secret Service gives a clear error, never a hang.

use std::path::PathBuf;
use std::time::Duration;

use aai_descriptor::AuthKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::Secret;
use crate::config::CredentialStore;
use crate::error::{Code, GatewayError};

const SERVICE: &str = "aai-gateway";
const DEADLINE: Duration = Duration::from_secs(5);

/// The store account of `app`'s credential as `who` uses it: the app id for the app's one
/// credential (so a single user's store is as it always was), `<app id>~<subject>` for a
/// person's own sign-in, the subject percent-encoded but for RFC 3986's unreserved
/// characters. App ids have no `~` and subjects no `#` once encoded, so no person's
/// account is another's, nor an app's `${NAME}` secret (`<app id>#<NAME>`).
pub fn account<'a>(app: &'a str, who: &crate::identity::Who) -> std::borrow::Cow<'a, str> {
    match who.person() {
        None => std::borrow::Cow::Borrowed(app),
        Some(subject) => {
            std::borrow::Cow::Owned(format!("{app}~{}", crate::text::percent_encode(subject)))
        }
    }
}

/// After a person's account: their sign-in in progress in the web UI.
pub const PENDING: &str = "!signin";

/// Whether `app` can be an app id: letters, digits, `.`, `-`, `_` (so that no `~`, `#` or
/// `!` in it can make one account look like another's).
pub fn is_app_id(app: &str) -> bool {
    !app.is_empty()
        && app
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// The subject of a person's account of `app` ([`account`]); `None` for any other.
pub fn person_of(app: &str, account: &str) -> Option<String> {
    let encoded = account.strip_prefix(app)?.strip_prefix('~')?;
    // An encoded subject has no `!`: `<account>!signin` is a sign-in in progress.
    if encoded.contains('!') {
        return None;
    }
    percent_encoding::percent_decode_str(encoded)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// A stored credential, as JSON: `{"type": "apiKey", "value": …}`, `{"type": "cookie",
/// "value": …}`, `{"type": "appCredential", "appId": …, "appSecret": …}`, `{"type":
/// "oauth2", "accessToken": …, "refreshToken": …, "expiresAt": …, "refreshAt": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Credential {
    /// An API key (or bearer token).
    ApiKey {
        /// The key.
        #[serde(serialize_with = "super::secret::expose")]
        value: Secret,
    },
    /// A `Cookie` header value (`a=1; b=2`).
    Cookie {
        /// The header value.
        #[serde(serialize_with = "super::secret::expose")]
        value: Secret,
    },
    /// App id and secret, exchanged for a token.
    AppCredential {
        /// The app id at the provider.
        app_id: String,
        /// The app secret.
        #[serde(serialize_with = "super::secret::expose")]
        app_secret: Secret,
    },
    /// OAuth 2 tokens from `auth login`.
    #[serde(rename = "oauth2")]
    OAuth(crate::auth::oauth::Tokens),
    /// A remote MCP server's sign-in (`auth login`), or the client the user registered
    /// with its authorization server (`auth set`).
    #[serde(rename = "mcpOAuth")]
    McpOAuth(crate::auth::mcp::Grant),
}

impl From<crate::auth::oauth::Tokens> for Credential {
    fn from(t: crate::auth::oauth::Tokens) -> Credential {
        Credential::OAuth(t)
    }
}

/// Why `auth set` input is not a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadCredential {
    /// Nothing was given.
    #[error("the value is empty")]
    Empty,
    /// An app credential must be a JSON object with both fields.
    #[error("expected a JSON object with non-empty \"appId\" and \"appSecret\"")]
    NotAppCredential,
    /// OAuth credentials come from signing in.
    #[error("`oauth2` credentials cannot be set this way; use `aai-gateway auth login`")]
    OAuth,
}

impl Credential {
    /// The auth type this credential serves.
    pub fn kind(&self) -> AuthKind {
        match self {
            Credential::ApiKey { .. } => AuthKind::ApiKey,
            Credential::Cookie { .. } => AuthKind::Cookie,
            Credential::AppCredential { .. } => AuthKind::AppCredential,
            Credential::OAuth(_) | Credential::McpOAuth(_) => AuthKind::OAuth2,
        }
    }

    /// Reads what `auth set` was given for an auth type: a bare string for `apiKey` and
    /// `cookie`, a JSON object `{"appId", "appSecret"}` (or snake_case) for `appCredential`.
    pub fn parse(kind: AuthKind, input: &str) -> Result<Credential, BadCredential> {
        let input = input.trim_end_matches(['\r', '\n']);
        match kind {
            AuthKind::ApiKey | AuthKind::Cookie => {
                if input.trim().is_empty() {
                    return Err(BadCredential::Empty);
                }
                let value = Secret::new(input.trim());
                Ok(if kind == AuthKind::ApiKey {
                    Credential::ApiKey { value }
                } else {
                    Credential::Cookie { value }
                })
            }
            AuthKind::AppCredential => {
                let v: Value =
                    serde_json::from_str(input).map_err(|_| BadCredential::NotAppCredential)?;
                let get = |a: &str, b: &str| {
                    v.get(a)
                        .or_else(|| v.get(b))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                match (get("appId", "app_id"), get("appSecret", "app_secret")) {
                    (Some(app_id), Some(secret)) if !app_id.is_empty() && !secret.is_empty() => {
                        Ok(Credential::AppCredential {
                            app_id,
                            app_secret: Secret::new(secret),
                        })
                    }
                    _ => Err(BadCredential::NotAppCredential),
                }
            }
            AuthKind::OAuth2 => Err(BadCredential::OAuth),
        }
    }
}

/// The field of a stored credential that names the origin it is bound to.
const BOUND_TO: &str = "boundTo";

/// The configured credential store.
#[derive(Debug, Clone)]
pub enum Store {
    /// The OS store.
    Keyring,
    /// A 0600 JSON file.
    File(PathBuf),
    /// In memory only, gone with the process (embedding and tests).
    Memory(std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>),
    /// The shared store (config `store`): table `aai_credentials`, each value sealed with
    /// the store key and bound to its account (`store::crypt`).
    Postgres(std::sync::Arc<crate::store::Shared>),
}

impl Store {
    /// The store `config` asks for.
    pub fn new(kind: CredentialStore, home: &std::path::Path) -> Store {
        match kind {
            CredentialStore::Keyring => Store::Keyring,
            CredentialStore::File => Store::File(home.join("credentials.json")),
        }
    }

    /// Says, as a warning, that credentials are kept in a plain file when they are: where
    /// the choice matters (`auth set`, `auth status`, a server's start), not on every
    /// command.
    pub fn warn_if_plain(&self) {
        if let Store::File(path) = self {
            tracing::warn!(
                "credentials are kept in a plain file ({}, readable by you only), as configured (`credentials.store`: `file`); the OS keyring is safer",
                path.display()
            );
        }
    }

    /// An empty in-memory store.
    pub fn memory() -> Store {
        Store::Memory(Default::default())
    }

    /// The credential of `app`, if one is stored.
    pub async fn get(&self, app: &str) -> Result<Option<Credential>, Error> {
        if let Store::Postgres(shared) = self {
            return Ok(pg_raw(shared, app)
                .await?
                .and_then(|raw| serde_json::from_value(raw).ok()));
        }
        let (store, app) = (self.clone(), app.to_owned());
        blocking(move || store.get_now(&app)).await
    }

    /// The credential of `app` and the origin it is bound to (see [`Store::bind`]).
    pub async fn get_bound(
        &self,
        app: &str,
    ) -> Result<Option<(Credential, Option<String>)>, Error> {
        if let Store::Postgres(shared) = self {
            let Some(raw) = pg_raw(shared, app).await? else {
                return Ok(None);
            };
            let bound = raw.get(BOUND_TO).and_then(Value::as_str).map(str::to_owned);
            return Ok(serde_json::from_value(raw).ok().map(|c| (c, bound)));
        }
        let (store, app) = (self.clone(), app.to_owned());
        blocking(move || {
            let Some(raw) = store.raw_now(&app)? else {
                return Ok(None);
            };
            let bound = raw.get(BOUND_TO).and_then(Value::as_str).map(str::to_owned);
            Ok(serde_json::from_value(raw).ok().map(|c| (c, bound)))
        })
        .await
    }

    /// Binds the credential of `app` to `origin`, the server it is first sent to: from
    /// then on it is sent nowhere else (a descriptor from another source that takes the
    /// app's id cannot receive it). Storing a credential again unbinds it.
    pub async fn bind(&self, app: &str, origin: &str) -> Result<(), Error> {
        if let Store::Postgres(shared) = self {
            let Some(mut raw) = pg_raw(shared, app).await? else {
                return Ok(());
            };
            raw[BOUND_TO] = Value::String(origin.to_owned());
            return pg_write(shared, app, &raw).await;
        }
        let (store, app, origin) = (self.clone(), app.to_owned(), origin.to_owned());
        blocking(move || {
            let Some(mut raw) = store.raw_now(&app)? else {
                return Ok(());
            };
            raw[BOUND_TO] = Value::String(origin);
            store.write_raw(&app, raw)
        })
        .await
    }

    /// Replaces the credential of `app` with a renewed one (refreshed tokens), keeping the
    /// origin it is bound to.
    pub async fn renew(&self, app: &str, credential: Credential) -> Result<(), Error> {
        if let Store::Postgres(shared) = self {
            let bound = pg_raw(shared, app)
                .await?
                .and_then(|raw| raw.get(BOUND_TO).cloned());
            let mut raw = serde_json::to_value(&credential).expect("credentials serialize");
            if let Some(bound) = bound {
                raw[BOUND_TO] = bound;
            }
            return pg_write(shared, app, &raw).await;
        }
        let (store, app) = (self.clone(), app.to_owned());
        blocking(move || {
            let bound = store
                .raw_now(&app)?
                .and_then(|raw| raw.get(BOUND_TO).cloned());
            let mut raw = serde_json::to_value(&credential).expect("credentials serialize");
            if let Some(bound) = bound {
                raw[BOUND_TO] = bound;
            }
            store.write_raw(&app, raw)
        })
        .await
    }

    /// Stores the credential of `app`.
    pub async fn set(&self, app: &str, credential: Credential) -> Result<(), Error> {
        if let Store::Postgres(shared) = self {
            let raw = serde_json::to_value(&credential).expect("credentials serialize");
            return pg_write(shared, app, &raw).await;
        }
        let (store, app) = (self.clone(), app.to_owned());
        blocking(move || store.set_now(&app, &credential)).await
    }

    /// Forgets the credential of `app`; whether there was one.
    pub async fn delete(&self, app: &str) -> Result<bool, Error> {
        if let Store::Postgres(shared) = self {
            let client = shared.client().await?;
            let n = shared
                .timed(client.execute("DELETE FROM aai_credentials WHERE account = $1", &[&app]))
                .await?;
            return Ok(n > 0);
        }
        let (store, app) = (self.clone(), app.to_owned());
        blocking(move || store.delete_now(&app)).await
    }

    /// The people with their own sign-in to `app` ([`account`]), by subject, sorted;
    /// `None` where the store cannot list its entries (the OS keyring).
    pub async fn people(&self, app: &str) -> Result<Option<Vec<String>>, Error> {
        let accounts: Vec<String> = match self {
            Store::Keyring => return Ok(None),
            Store::Postgres(shared) => {
                let client = shared.client().await?;
                let prefix = format!("{app}~");
                let rows = shared
                    .timed(client.query(
                        "SELECT account FROM aai_credentials WHERE starts_with(account, $1)",
                        &[&prefix],
                    ))
                    .await?;
                rows.iter().map(|r| r.get::<_, String>(0)).collect()
            }
            Store::Memory(map) => map.lock().expect("store lock").keys().cloned().collect(),
            Store::File(path) => {
                let path = path.clone();
                blocking(move || read_file(&path))
                    .await?
                    .keys()
                    .cloned()
                    .collect()
            }
        };
        let mut people: Vec<String> = accounts.iter().filter_map(|a| person_of(app, a)).collect();
        people.sort();
        Ok(Some(people))
    }

    fn raw_now(&self, app: &str) -> Result<Option<Value>, Error> {
        let text = match self {
            Store::Keyring => match entry(app)?.get_password() {
                Ok(t) => t,
                Err(keyring::Error::NoEntry) => return Ok(None),
                Err(e) => return Err(store_error(&e)),
            },
            Store::File(path) => match read_file(path)?.get(app) {
                Some(v) => return Ok(Some(v.clone())),
                None => return Ok(None),
            },
            Store::Memory(map) => match map.lock().expect("store lock").get(app) {
                Some(t) => t.clone(),
                None => return Ok(None),
            },
            Store::Postgres(_) => {
                return Err(Error::Failed("the shared store is async only".into()));
            }
        };
        Ok(serde_json::from_str(&text).ok())
    }

    fn write_raw(&self, app: &str, raw: Value) -> Result<(), Error> {
        match self {
            Store::Keyring => entry(app)?
                .set_password(&raw.to_string())
                .map_err(|e| store_error(&e)),
            Store::Memory(map) => {
                map.lock()
                    .expect("store lock")
                    .insert(app.to_owned(), raw.to_string());
                Ok(())
            }
            Store::File(path) => {
                let mut all = read_file(path)?;
                all.insert(app.to_owned(), raw);
                write_file(path, &all)
            }
            Store::Postgres(_) => Err(Error::Failed("the shared store is async only".into())),
        }
    }

    fn get_now(&self, app: &str) -> Result<Option<Credential>, Error> {
        Ok(self
            .raw_now(app)?
            .and_then(|raw| serde_json::from_value(raw).ok()))
    }

    fn set_now(&self, app: &str, credential: &Credential) -> Result<(), Error> {
        self.write_raw(
            app,
            serde_json::to_value(credential).expect("credentials serialize"),
        )
    }

    fn delete_now(&self, app: &str) -> Result<bool, Error> {
        match self {
            Store::Keyring => match entry(app)?.delete_credential() {
                Ok(()) => Ok(true),
                Err(keyring::Error::NoEntry) => Ok(false),
                Err(e) => Err(store_error(&e)),
            },
            Store::Memory(map) => Ok(map.lock().expect("store lock").remove(app).is_some()),
            Store::File(path) => {
                let mut all = read_file(path)?;
                let had = all.remove(app).is_some();
                write_file(path, &all)?;
                Ok(had)
            }
            Store::Postgres(_) => Err(Error::Failed("the shared store is async only".into())),
        }
    }
}

/// Why the credential store could not be used. `From<Error> for GatewayError` below gives
/// the wire codes; the keyring's comes with the way out, whole.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store's blocking task failed.
    #[error("the credential store failed: {0}")]
    Failed(String),
    /// The store did not answer in time.
    #[error(
        "the credential store did not answer within 5 s (is the keyring locked, or its daemon stuck?)"
    )]
    Stuck,
    /// The OS keyring refused (its first line, cut).
    #[error("the OS credential store is not usable ({0})")]
    Keyring(String),
    /// The credential file is not JSON; it is left alone.
    #[error(
        "the credential file {} is not valid JSON ({why}); it was left as it is — repair or remove it",
        .path.display()
    )]
    NotJson {
        /// The file.
        path: std::path::PathBuf,
        /// The parser's words.
        why: String,
    },
    /// The credential file cannot be read.
    #[error("cannot read {}: {why}", .path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The OS's words.
        why: std::io::Error,
    },
    /// The shared store failed (or its key does not open a value).
    #[error(transparent)]
    Shared(#[from] crate::store::Error),
    /// The credential file cannot be written.
    #[error("cannot write {}: {why}", .path.display())]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// The OS's words.
        why: std::io::Error,
    },
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let e = match e {
            Error::Shared(e) => return e.into(),
            other => other,
        };
        let code = match e {
            Error::Stuck | Error::Keyring(_) => Code::ServiceUnavailable,
            Error::Shared(_)
            | Error::Failed(_)
            | Error::NotJson { .. }
            | Error::Read { .. }
            | Error::Write { .. } => Code::AutomationFailed,
        };
        let wire = GatewayError::new(code, e.to_string());
        match e {
            // The way out is said whole (a hint is never cut), whatever the store's text.
            Error::Keyring(_) if cfg!(target_os = "linux") => wire.with_hint(
                "Start a Secret Service (GNOME Keyring or KWallet) and unlock it, or set \"credentials\": {\"store\": \"file\"} in config.json.",
            ),
            Error::Keyring(_) => wire.with_hint(
                "Unlock the OS credential store, or set \"credentials\": {\"store\": \"file\"} in config.json.",
            ),
            _ => wire,
        }
    }
}

/// The stored JSON of `account` in the shared store, opened with the store key.
async fn pg_raw(shared: &crate::store::Shared, account: &str) -> Result<Option<Value>, Error> {
    let client = shared.client().await?;
    let Some(row) = shared
        .timed(client.query_opt(
            "SELECT nonce, sealed, key_id FROM aai_credentials WHERE account = $1",
            &[&account],
        ))
        .await?
    else {
        return Ok(None);
    };
    let sealed = crate::store::crypt::Sealed {
        nonce: row.get(0),
        sealed: row.get(1),
    };
    let clear = shared.key()?.open(account, row.get(2), &sealed)?;
    Ok(serde_json::from_slice(&clear).ok())
}

/// Seals `raw` for `account` and stores it (replacing what was there).
async fn pg_write(shared: &crate::store::Shared, account: &str, raw: &Value) -> Result<(), Error> {
    let key = shared.key()?;
    let sealed = key.seal(account, raw.to_string().as_bytes());
    let client = shared.client().await?;
    shared
        .timed(client.execute(
            "INSERT INTO aai_credentials (account, nonce, sealed, key_id) VALUES ($1, $2, $3, $4)
             ON CONFLICT (account) DO UPDATE SET nonce = EXCLUDED.nonce, sealed = EXCLUDED.sealed,
                 key_id = EXCLUDED.key_id, updated_at = now()",
            &[&account, &sealed.nonce, &sealed.sealed, &key.id()],
        ))
        .await?;
    Ok(())
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    match tokio::time::timeout(DEADLINE, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err(Error::Failed(e.to_string())),
        Err(_) => Err(Error::Stuck),
    }
}

fn entry(app: &str) -> Result<keyring::Entry, Error> {
    keyring::Entry::new(SERVICE, app).map_err(|e| store_error(&e))
}

fn store_error(e: &keyring::Error) -> Error {
    let reason = e.to_string();
    Error::Keyring(crate::text::excerpt(
        reason.lines().next().unwrap_or_default(),
        120,
    ))
}

fn read_file(path: &std::path::Path) -> Result<serde_json::Map<String, Value>, Error> {
    match std::fs::read_to_string(path) {
        // An unreadable store is never taken for an empty one: the next write would
        // erase every credential in it.
        Ok(text) => serde_json::from_str(&text).map_err(|e| Error::NotJson {
            path: path.to_owned(),
            why: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(serde_json::Map::new()),
        Err(e) => Err(Error::Read {
            path: path.to_owned(),
            why: e,
        }),
    }
}

fn write_file(path: &std::path::Path, all: &serde_json::Map<String, Value>) -> Result<(), Error> {
    let fail = |why: std::io::Error| Error::Write {
        path: path.to_owned(),
        why,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let tmp = path.with_extension("json.tmp");
    {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp).map_err(fail)?;
        std::io::Write::write_all(&mut file, Value::Object(all.clone()).to_string().as_bytes())
            .map_err(fail)?;
    }
    std::fs::rename(&tmp, path).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persons_account_is_theirs_alone() {
        use crate::identity::Who;
        let person = |s: &str| Who::Person(s.into());
        assert_eq!(account("dev.x", &Who::Shared), "dev.x");
        assert_eq!(account("dev.x", &person("alice")), "dev.x~alice");
        let odd = "ali~ce#%/ x@y\u{e9}";
        let encoded = account("dev.x", &person(odd));
        assert_eq!(encoded, "dev.x~ali~ce%23%25%2F%20x%40y%C3%A9");
        assert_eq!(person_of("dev.x", &encoded).as_deref(), Some(odd));
        // Not a person's: the app's own, a `${NAME}` secret, another app's.
        assert_eq!(person_of("dev.x", "dev.x"), None);
        assert_eq!(person_of("dev.x", "dev.x#TOKEN"), None);
        assert_eq!(person_of("dev.x", "dev.xy~alice"), None);
        assert_eq!(crate::auth::fill::name_of("dev.x", &encoded), None);
        // Distinct subjects, distinct accounts (the encoding is one-to-one).
        assert_ne!(
            account("dev.x", &person("a%20")),
            account("dev.x", &person("a "))
        );
    }

    #[tokio::test]
    async fn people_are_listed_by_subject_from_a_store_that_can() {
        let store = Store::memory();
        let key = || Credential::ApiKey {
            value: Secret::new("k".to_owned()),
        };
        for account in [
            "dev.x",
            "dev.x~bob",
            "dev.x~al%20ice",
            "dev.xy~eve",
            "dev.x#S",
        ] {
            store.set(account, key()).await.unwrap();
        }
        assert_eq!(
            store.people("dev.x").await.unwrap(),
            Some(vec!["al ice".to_owned(), "bob".to_owned()])
        );
        assert_eq!(Store::Keyring.people("dev.x").await.unwrap(), None);
    }

    #[test]
    fn the_stored_format_is_unchanged() {
        let stored = [
            r#"{"type":"apiKey","value":"k"}"#,
            r#"{"type":"cookie","value":"a=1"}"#,
            r#"{"type":"appCredential","appId":"i","appSecret":"s"}"#,
            r#"{"type":"oauth2","accessToken":"a","refreshToken":"r","expiresAt":5,"refreshAt":4}"#,
            r#"{"type":"oauth2","accessToken":"a","refreshToken":null,"expiresAt":0,"refreshAt":0}"#,
        ];
        for text in stored {
            let c: Credential = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&c).unwrap(), text);
        }
        let kinds: Vec<AuthKind> = stored[..4]
            .iter()
            .map(|t| serde_json::from_str::<Credential>(t).unwrap().kind())
            .collect();
        assert_eq!(
            kinds,
            [
                AuthKind::ApiKey,
                AuthKind::Cookie,
                AuthKind::AppCredential,
                AuthKind::OAuth2
            ]
        );
        let old: Credential =
            serde_json::from_str(r#"{"type":"oauth2","accessToken":"a"}"#).unwrap();
        assert!(
            matches!(old, Credential::OAuth(t) if t.refresh_token.is_none() && t.expires_at == 0)
        );
    }

    #[tokio::test]
    async fn a_corrupt_file_store_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials.json");
        std::fs::write(&path, r#"{"com.a": {"type": "apiKey", "value": "k"}"#).unwrap();
        let store = Store::File(path.clone());
        let e = store.get("com.a").await.unwrap_err();
        assert!(matches!(e, Error::NotJson { .. }), "{e}");
        let e = GatewayError::from(e);
        assert!(
            e.detail.contains("credentials.json") && e.detail.contains("not valid JSON"),
            "{e}"
        );
        let e = store
            .set(
                "com.b",
                Credential::ApiKey {
                    value: Secret::new("x"),
                },
            )
            .await
            .unwrap_err();
        assert!(e.to_string().contains("left as it is"), "{e}");
        assert!(store.delete("com.a").await.is_err());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            r#"{"com.a": {"type": "apiKey", "value": "k"}"#,
            "the file is untouched"
        );
    }

    #[test]
    fn secrets_never_show_in_debug() {
        let c = Credential::AppCredential {
            app_id: "cli_a1".into(),
            app_secret: Secret::new("hunter2"),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
        assert!(
            !format!(
                "{:?}",
                Credential::ApiKey {
                    value: Secret::new("k3y")
                }
            )
            .contains("k3y")
        );
    }

    #[test]
    fn set_input_is_parsed_per_type() {
        assert_eq!(
            Credential::parse(AuthKind::ApiKey, "abc\n").unwrap(),
            Credential::ApiKey {
                value: Secret::new("abc")
            }
        );
        assert!(Credential::parse(AuthKind::ApiKey, " \n").is_err());
        let c = Credential::parse(
            AuthKind::AppCredential,
            r#"{"app_id": "a", "app_secret": "s"}"#,
        )
        .unwrap();
        assert_eq!(c.kind(), AuthKind::AppCredential);
        assert!(Credential::parse(AuthKind::AppCredential, "not json").is_err());
        assert!(Credential::parse(AuthKind::OAuth2, "x").is_err());
    }

    #[tokio::test]
    async fn the_file_store_round_trips_with_0600() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::File(dir.path().join("credentials.json"));
        assert_eq!(store.get("com.a").await.unwrap(), None);
        store
            .set(
                "com.a",
                Credential::Cookie {
                    value: Secret::new("s=1"),
                },
            )
            .await
            .unwrap();
        assert_eq!(
            store.get("com.a").await.unwrap(),
            Some(Credential::Cookie {
                value: Secret::new("s=1")
            })
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("credentials.json"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(store.delete("com.a").await.unwrap());
        assert!(!store.delete("com.a").await.unwrap());
    }
}
