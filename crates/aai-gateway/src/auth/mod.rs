//! Turns a binding's `auth` and the stored credential into what a request carries.
//!
//! * `apiKey`: the key in the header `name` (as `prefix key` when there is a prefix) or in
//!   the query parameter `name`;
//! * `cookie`: the stored `Cookie` value, once every `requiredCookies` name is in it, and
//!   only when the base URL's host is within the cookie `domain`;
//! * `appCredential`: app id + secret exchanged at `tokenEndpoint` (`{"app_id",
//!   "app_secret"}`), the token (any of the usual camelCase or snake_case token fields) kept
//!   in memory until a minute before it expires (`expire`/`expires_in`, else the
//!   descriptor's `expiresIn`) and sent as `Authorization: Bearer …`; a 401 drops it and the
//!   call is tried once more with a fresh one;
//! * `oauth2`: the tokens from `auth login` (see `oauth`), refreshed a minute before the
//!   access token expires and once after a 401, a rotated refresh token stored at once.
//!
//! Without a stored credential the call fails with AUTH_REQUIRED, whose `data` carries the
//! descriptor's instructions, where to get the credential, the command that stores it and
//! the user's locale — so the agent can tell the user what to do. Secrets never enter
//! errors or logs.

pub(crate) mod fill;
pub(crate) mod mcp;
pub(crate) mod oauth;
pub(crate) mod secret;
pub mod store;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aai_descriptor::{Auth, AuthKind, Instructions, KeyLocation};
use serde_json::{Value, json};

use crate::error::{Code, GatewayError};
use crate::identity::Who;
pub use secret::Secret;
use store::{Credential, Store};

/// Why a request's credential could not be had. `From<Error> for GatewayError` below
/// gives the wire codes and the `data` an agent needs to explain the fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The credential store failed.
    #[error(transparent)]
    Store(#[from] store::Error),
    /// Tokens could not be had from the provider.
    #[error(transparent)]
    OAuth(#[from] oauth::Error),
    /// The refresh token is gone or refused: only a new sign-in helps.
    #[error("{why}; sign in again with `{}`", login_command(app, person.as_deref()))]
    SignInAgain {
        /// The app id.
        app: String,
        /// Whose sign-in it was (a person's own, in team mode).
        person: Option<String>,
        /// Why the refresh failed.
        why: oauth::Error,
    },
    /// The cookie domain does not cover the API's host.
    #[error(
        "the cookie domain `{domain}` does not cover `{host}`; cookies are only sent to their domain"
    )]
    CookieDomain {
        /// The descriptor's domain.
        domain: String,
        /// The base URL's host.
        host: String,
    },
    /// A `${NAME}` placeholder has no stored (or allowed environment) value.
    #[error(
        "`{app}` needs the secret `{name}` (a `${{{name}}}` in its descriptor), which is not stored; run `aai-gateway auth set {app} --secret {name}`{}",
        if *.from_env { " or set it in the gateway's environment" } else { "" }
    )]
    MissingSecret {
        /// The app id.
        app: String,
        /// The placeholder's name.
        name: String,
        /// Whether the environment was asked too.
        from_env: bool,
    },
    /// The token endpoint refused the app credential (its message scrubbed of the secret).
    #[error("the token endpoint refused the stored app credential (HTTP {status}): {message}")]
    ExchangeRefused {
        /// Its status.
        status: reqwest::StatusCode,
        /// Its message.
        message: String,
    },
    /// No usable credential: everything the agent needs to tell the user the fix.
    #[error("{}; the user can fix it with `{}`{}", .0.why, .0.command(), .0.ui.as_ref().map(|u| format!(" or at {u}")).unwrap_or_default())]
    Required(Box<Required>),
}

/// AUTH_REQUIRED's content.
#[derive(Debug)]
pub struct Required {
    app: String,
    why: String,
    /// Where the user can do it in the web UI.
    ui: Option<String>,
    /// The person whose own sign-in is missing (team mode).
    person: Option<String>,
    kind: AuthKind,
    obtain_url: Option<String>,
    instructions: Option<Instructions>,
    locale: Option<String>,
}

impl Required {
    fn command(&self) -> String {
        if self.kind == AuthKind::OAuth2 {
            login_command(&self.app, self.person.as_deref())
        } else {
            format!("aai-gateway auth set {}", self.app)
        }
    }
}

/// The command that signs in to `app`: for `person` (their own sign-in, in team mode)
/// with `--person`.
fn login_command(app: &str, person: Option<&str>) -> String {
    match person {
        Some(person) => format!(
            "aai-gateway auth login {app} --person {}",
            crate::text::sh_quote(person)
        ),
        None => format!("aai-gateway auth login {app}"),
    }
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match e {
            Error::Store(store) => return store.into(),
            Error::OAuth(oauth) => return oauth.into(),
            Error::SignInAgain { .. } => Code::AuthExpired,
            Error::CookieDomain { .. } => Code::AaiJsonInvalid,
            Error::MissingSecret { .. } | Error::Required(_) => Code::AuthRequired,
            Error::ExchangeRefused { .. } => Code::AuthDenied,
        };
        let wire = GatewayError::new(code, e.to_string());
        match e {
            Error::SignInAgain { app, person, .. } => {
                let wire = wire.with("command", login_command(&app, person.as_deref()));
                match person {
                    Some(person) => wire.with("person", person),
                    None => wire,
                }
            }
            Error::MissingSecret { app, name, .. } => {
                let command = format!("aai-gateway auth set {app} --secret {name}");
                wire.with("app", app)
                    .with("secret", name)
                    .with("command", command)
            }
            Error::Required(r) => {
                let mut wire = wire
                    .with("authType", r.kind.as_str())
                    .with("command", r.command());
                if let Some(url) = r.obtain_url {
                    wire = wire.with("obtainUrl", url);
                }
                if let Some(ui) = r.ui {
                    wire = wire.with("ui", ui);
                }
                if let Some(person) = r.person {
                    wire = wire.with("person", person);
                }
                if let Some(i) = r.instructions {
                    let mut obj = serde_json::Map::new();
                    obj.insert("short".into(), i.short.into());
                    if let Some(d) = i.detailed {
                        obj.insert("detailed".into(), d.into());
                    }
                    if let Some(h) = i.help_url {
                        obj.insert("helpUrl".into(), h.into());
                    }
                    wire = wire.with("instructions", Value::Object(obj));
                }
                if let Some(locale) = r.locale {
                    wire = wire.with("locale", locale);
                }
                wire
            }
            _ => wire,
        }
    }
}

/// What one request must carry.
#[derive(Debug, Clone, Default)]
pub struct Material {
    /// Headers to set (after the default headers, before the tool's).
    pub headers: Vec<(String, Secret)>,
    /// Query parameters to add.
    pub query: Vec<(String, Secret)>,
    /// Secrets the request does not carry but a service may echo (an OAuth sign-in's
    /// refresh token): scrubbed like the others.
    pub unsent: Vec<Secret>,
}

impl Material {
    /// Every form in which the secrets this material carries could come back in a
    /// service's answer (see [`forms`]).
    pub fn secret_forms(&self) -> Vec<String> {
        echoes(
            self.headers
                .iter()
                .chain(&self.query)
                .map(|(_, s)| s.expose())
                .chain(self.unsent.iter().map(Secret::expose)),
        )
    }
}

/// Every form in which `values` (header values, keys) could come back in an answer: each
/// whole value and, for `Bearer <token>` or `a=1; sid=<value>`, its parts, each in its
/// [`forms`]; longest first, as [`crate::text::scrub`] wants them.
pub(crate) fn echoes<'a>(values: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out = Vec::new();
    for value in values {
        out.extend(forms(value));
        for part in value.split([' ', ';', '=', ',']) {
            if part.len() >= MIN_SCRUBBED {
                out.extend(forms(part));
            }
        }
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.len()));
    out.dedup();
    out
}

/// Fragments shorter than this are not scrubbed on their own (they would blot out
/// ordinary words); whole secrets always are.
const MIN_SCRUBBED: usize = 6;

/// A secret as sent and as services tend to echo it: plain, percent-encoded (path and
/// form style), and base64 (standard and URL-safe, with and without padding).
pub(crate) fn forms(secret: &str) -> Vec<String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    if secret.is_empty() {
        return Vec::new();
    }
    let mut out = vec![
        secret.to_owned(),
        crate::text::percent_encode(secret),
        url::form_urlencoded::byte_serialize(secret.as_bytes()).collect(),
    ];
    for engine in [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD] {
        out.push(engine.encode(secret));
    }
    out.sort();
    out.dedup();
    out
}

/// Credentials for calls, with a cache of exchanged tokens.
#[derive(Debug)]
pub struct Authenticator {
    store: Store,
    locale: Option<String>,
    client_ids: std::collections::BTreeMap<String, String>,
    refreshing: tokio::sync::Mutex<()>,
    tokens: Mutex<HashMap<String, (Secret, Instant)>>,
    /// The web UI's address, when one listens (AUTH_REQUIRED of a remote MCP server links
    /// its credentials page, where the user can sign in).
    ui: std::sync::OnceLock<String>,
    /// Apps whose sign-in made without `--person` was said to go unused by people.
    warned: Mutex<std::collections::HashSet<String>>,
}

impl Authenticator {
    /// Credentials from `store`; messages mention `locale`; `client_ids` are the config's
    /// OAuth client ids by app.
    pub fn new(
        store: Store,
        locale: Option<String>,
        client_ids: std::collections::BTreeMap<String, String>,
    ) -> Authenticator {
        Authenticator {
            store,
            locale,
            client_ids,
            refreshing: tokio::sync::Mutex::new(()),
            tokens: Mutex::new(HashMap::new()),
            ui: std::sync::OnceLock::new(),
            warned: Mutex::default(),
        }
    }

    /// Says, as a warning, when the first person without a sign-in of their own finds
    /// the app's one sign-in (an admin's, or one from before team mode) stored:
    /// people's calls never use it, unless the app's sign-in is set to be shared.
    pub async fn warn_of_unused_sign_in(&self, app: &str) {
        // Looked at once per app and run.
        if !self
            .warned
            .lock()
            .expect("warned lock")
            .insert(app.to_owned())
        {
            return;
        }
        if let Ok(Some(Credential::McpOAuth(grant))) = self.store.get(app).await
            && grant.tokens.is_some()
        {
            tracing::warn!(
                app,
                "`{app}` has a sign-in made without --person (an admin's, or one from before team mode); people's calls do not use it: each person signs in for themselves, or set `apps.{app}.signIn: \"shared\"` in config.json to let everyone use it"
            );
        }
    }

    /// Names the web UI (`http://127.0.0.1:3000/ui`) in the AUTH_REQUIRED of remote MCP
    /// servers.
    pub fn set_ui(&self, base: String) {
        let _ = self.ui.set(base);
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// After a 401: makes the next attempt use fresh tokens. Returns whether trying again
    /// can help (exchanged and OAuth tokens can be renewed; static keys cannot).
    pub async fn after_unauthorized(
        &self,
        app: &str,
        who: &Who,
        auth: &Auth,
    ) -> Result<bool, Error> {
        match auth {
            Auth::AppCredential(_) => {
                self.tokens.lock().expect("token lock").remove(app);
                Ok(true)
            }
            Auth::OAuth2(o) => {
                let account = store::account(app, who);
                let Some(Credential::OAuth(tokens)) = self.store.get(&account).await? else {
                    return Ok(false);
                };
                self.refresh_oauth(app, who, o, &tokens).await.map(|_| true)
            }
            Auth::ApiKey(_) | Auth::Cookie(_) => Ok(false),
        }
    }

    /// The OAuth client id of `app`: config `apps.<id>.clientId`, else the descriptor's.
    pub fn client_id(&self, app: &str, oauth: &aai_descriptor::OAuth2) -> Option<String> {
        self.client_ids
            .get(app)
            .cloned()
            .or_else(|| oauth.client_id.clone())
    }

    /// Replaces `seen` with fresh tokens, one refresh at a time: a refresh token is
    /// single-use when the provider rotates them, so two concurrent refreshes would fail.
    async fn refresh_oauth(
        &self,
        app: &str,
        who: &Who,
        oauth: &aai_descriptor::OAuth2,
        seen: &crate::auth::oauth::Tokens,
    ) -> Result<crate::auth::oauth::Tokens, Error> {
        let account = store::account(app, who);
        let _one_at_a_time = self.refreshing.lock().await;
        // Another call refreshed while this one waited: its tokens are the newer ones.
        if let Some(Credential::OAuth(current)) = self.store.get(&account).await?
            && current != *seen
        {
            return Ok(current);
        }
        let client_id = self.client_id(app, oauth).unwrap_or_default();
        let fresh = oauth::refresh(oauth, &client_id, seen)
            .await
            .map_err(|why| {
                if why.needs_sign_in() {
                    Error::SignInAgain {
                        app: app.to_owned(),
                        person: who.person().map(str::to_owned),
                        why,
                    }
                } else {
                    Error::OAuth(why)
                }
            })?;
        // Renewed, not stored anew: the tokens stay bound to the server they were sent to.
        self.store
            .renew(&account, Credential::OAuth(fresh.clone()))
            .await?;
        tracing::info!(app, "refreshed the OAuth access token");
        Ok(fresh)
    }

    /// What a request to the remote MCP server of `app` at `url` carries: the bearer token
    /// of its sign-in (`auth login`; refreshed when it is about to expire), or nothing
    /// before the user signed in — the server may not want a token, and when it does its
    /// 401 becomes AUTH_REQUIRED. Tokens go only to the resource they were issued for.
    ///
    /// `who`'s sign-in: a person's own is never stood in for by another's or the app's.
    pub async fn mcp_material(
        &self,
        app: &str,
        who: &Who,
        url: &str,
    ) -> Result<Option<Material>, Error> {
        // A store that cannot be read (no Secret Service) holds no sign-in this call can
        // use: the call goes without a token, and a server that wants one says so.
        let grant = match self.store.get(&store::account(app, who)).await {
            Ok(Some(Credential::McpOAuth(grant))) => grant,
            Ok(_) => return Ok(None),
            Err(e) => {
                tracing::debug!(app, "no stored sign-in for the MCP server: {e}");
                return Ok(None);
            }
        };
        let Some(tokens) = grant.tokens.as_ref().filter(|_| grant.serves(url)) else {
            return Ok(None);
        };
        let tokens = if tokens.expiring() && tokens.refresh_token.is_some() {
            self.refresh_mcp(app, who, &grant).await?
        } else {
            tokens.clone()
        };
        Ok(Some(oauth_bearer(&tokens)))
    }

    /// After a remote MCP server refused the token (401): refreshes it. Returns whether
    /// trying again can help.
    pub async fn after_mcp_unauthorized(&self, app: &str, who: &Who) -> Result<bool, Error> {
        let Some(Credential::McpOAuth(grant)) = self.store.get(&store::account(app, who)).await?
        else {
            return Ok(false);
        };
        if grant
            .tokens
            .as_ref()
            .is_none_or(|t| t.refresh_token.is_none())
        {
            return Ok(false);
        }
        self.refresh_mcp(app, who, &grant).await.map(|_| true)
    }

    /// [`Self::refresh_oauth`] for a remote MCP server's grant.
    async fn refresh_mcp(
        &self,
        app: &str,
        who: &Who,
        seen: &mcp::Grant,
    ) -> Result<oauth::Tokens, Error> {
        let account = store::account(app, who);
        let _one_at_a_time = self.refreshing.lock().await;
        if let Some(Credential::McpOAuth(current)) = self.store.get(&account).await?
            && current.tokens != seen.tokens
            && let Some(tokens) = current.tokens
        {
            return Ok(tokens);
        }
        // A refused refresh token: another gateway process may have just used it (with
        // rotation, the new tokens are in the store); else only a new sign-in helps
        // (AUTH_REQUIRED names it).
        let fresh = match mcp::refresh(seen).await {
            Ok(fresh) => fresh,
            Err(why) if why.needs_sign_in() => {
                if let Some(Credential::McpOAuth(current)) = self.store.get(&account).await?
                    && current.tokens != seen.tokens
                    && let Some(tokens) = current.tokens
                {
                    return Ok(tokens);
                }
                return Err(self.mcp_required(
                    app,
                    who,
                    &format!("the sign-in could not be renewed ({why})"),
                ));
            }
            Err(why) => return Err(Error::OAuth(why)),
        };
        let mut grant = seen.clone();
        grant.tokens = Some(fresh.clone());
        self.store
            .renew(&account, Credential::McpOAuth(grant))
            .await?;
        tracing::info!(app, "refreshed the access token of the MCP server");
        Ok(fresh)
    }

    /// Notes the scopes a remote MCP server wants, for the next sign-in to ask for them.
    pub async fn mcp_wants(&self, app: &str, who: &Who, scopes: &[String]) -> Result<(), Error> {
        let account = store::account(app, who);
        let Some(Credential::McpOAuth(mut grant)) = self.store.get(&account).await? else {
            return Ok(());
        };
        let wider =
            mcp::widen(Some(grant.scopes.clone()), Some(scopes.to_vec())).unwrap_or_default();
        if wider != grant.scopes {
            grant.scopes = wider;
            self.store
                .renew(&account, Credential::McpOAuth(grant))
                .await?;
        }
        Ok(())
    }

    /// AUTH_REQUIRED for a remote MCP server that wants `who`'s sign-in. A person is told
    /// it is their own sign-in that is missing (never whether anyone else has one).
    pub fn mcp_required(&self, app: &str, who: &Who, why: &str) -> Error {
        let person = who.person().map(str::to_owned);
        let why = match &person {
            Some(_) => format!("`{app}` needs your own sign-in ({why})"),
            None => why.to_owned(),
        };
        Error::Required(Box::new(Required {
            app: app.to_owned(),
            why,
            ui: self.ui.get().map(|base| match &person {
                Some(_) => format!("{base}/sign-ins?app={}", crate::text::percent_encode(app)),
                None => format!("{base}/credentials"),
            }),
            person,
            kind: AuthKind::OAuth2,
            obtain_url: None,
            instructions: None,
            locale: self.locale.clone(),
        }))
    }

    /// What a request of `app` with `auth` must carry; `base_url` is checked for cookies.
    pub async fn material(
        &self,
        app: &str,
        who: &Who,
        auth: &Auth,
        base_url: &str,
    ) -> Result<Material, Error> {
        // An exchanged token still good needs no trip to the credential store.
        if matches!(auth, Auth::AppCredential(_))
            && let Some((token, until)) = self.tokens.lock().expect("token lock").get(app)
            && Instant::now() < *until
        {
            return Ok(bearer(token));
        }
        let account = store::account(app, who);
        let (stored, unbound) = match self.store.get_bound(&account).await? {
            Some((credential, bound)) => {
                let unbound = self.check_bound(app, who, auth, base_url, bound.as_deref())?;
                (Some(credential), unbound)
            }
            None => (None, None),
        };
        let material = self.material_from(app, who, auth, base_url, stored).await?;
        // Bound once it is sent for the first time.
        if let Some(origin) = unbound {
            self.store.bind(&account, &origin).await?;
        }
        Ok(material)
    }

    /// The request material `stored` makes for `auth`.
    async fn material_from(
        &self,
        app: &str,
        who: &Who,
        auth: &Auth,
        base_url: &str,
        stored: Option<Credential>,
    ) -> Result<Material, Error> {
        let required = |why: &str| self.required(app, who, auth, why);
        match auth {
            Auth::ApiKey(k) => {
                let Some(Credential::ApiKey { value: key }) = stored else {
                    return Err(required("no API key is stored for this app"));
                };
                let value = match k.prefix.as_deref().map(str::trim).filter(|p| !p.is_empty()) {
                    Some(prefix) => Secret::new(format!("{prefix} {}", key.expose())),
                    None => key,
                };
                Ok(match k.location {
                    KeyLocation::Header => Material {
                        headers: vec![(k.name.clone(), value)],
                        ..Material::default()
                    },
                    KeyLocation::Query => Material {
                        query: vec![(k.name.clone(), value)],
                        ..Material::default()
                    },
                })
            }
            Auth::Cookie(c) => {
                let Some(Credential::Cookie { value: cookies }) = stored else {
                    return Err(required("no cookies are stored for this app"));
                };
                let host = url_host(base_url);
                let domain = c.domain.trim_start_matches('.');
                if !(host == domain || host.ends_with(&format!(".{domain}"))) {
                    return Err(Error::CookieDomain {
                        domain: c.domain.clone(),
                        host,
                    });
                }
                let names: Vec<&str> = cookies
                    .expose()
                    .split(';')
                    .filter_map(|p| p.split_once('=').map(|(n, _)| n.trim()))
                    .collect();
                let missing: Vec<&str> = c
                    .required_cookies
                    .iter()
                    .map(String::as_str)
                    .filter(|r| !names.contains(r))
                    .collect();
                if !missing.is_empty() {
                    return Err(required(&format!(
                        "the stored cookies lack {}",
                        missing.join(", ")
                    )));
                }
                Ok(Material {
                    headers: vec![("Cookie".to_owned(), cookies)],
                    ..Material::default()
                })
            }
            Auth::AppCredential(a) => {
                let Some(Credential::AppCredential { app_id, app_secret }) = stored else {
                    return Err(required("no app id and secret are stored for this app"));
                };
                let (token, lifetime) = self
                    .exchange(app, &a.token_endpoint, &app_id, &app_secret)
                    .await?;
                let lifetime = lifetime.unwrap_or(a.expires_in).min(MAX_LIFETIME);
                let until = Instant::now()
                    + lifetime
                        .saturating_sub(Duration::from_secs(60))
                        .max(Duration::from_secs(1));
                self.tokens
                    .lock()
                    .expect("token lock")
                    .insert(app.to_owned(), (token.clone(), until));
                Ok(bearer(&token))
            }
            Auth::OAuth2(o) => {
                let Some(Credential::OAuth(tokens)) = stored else {
                    return Err(required(if who.person().is_some() {
                        "you have not signed in to this app yet"
                    } else {
                        "nobody has signed in to this app yet"
                    }));
                };
                let tokens = if tokens.expiring() {
                    self.refresh_oauth(app, who, o, &tokens).await?
                } else {
                    tokens
                };
                Ok(oauth_bearer(&tokens))
            }
        }
    }

    /// A stored credential goes only to the origin it was first sent to (bound then):
    /// when the app's descriptor now points elsewhere — it changed, or a descriptor from
    /// another source took the app's id — nothing is sent and the user is asked to store
    /// the credential again for the new server. `Ok(Some(origin))`: not bound yet, to be
    /// bound to `origin` once sent.
    fn check_bound(
        &self,
        app: &str,
        who: &Who,
        auth: &Auth,
        base_url: &str,
        bound: Option<&str>,
    ) -> Result<Option<String>, Error> {
        let origin = reqwest::Url::parse(base_url)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_else(|_| base_url.to_owned());
        match bound {
            Some(bound) if bound == origin => Ok(None),
            Some(bound) => Err(self.required(
                app,
                who,
                auth,
                &format!(
                    "the stored credential was stored for {bound}, but this app's descriptor now sends it to {origin}, so it was not sent; if that server is right, store the credential again"
                ),
            )),
            None => Ok(Some(origin)),
        }
    }

    /// The values of the `${NAME}` placeholders `executor` uses for `app` (see [`fill`]):
    /// each from the store's entry for the app and name, else — only with `from_env` —
    /// from the gateway's environment. A missing one is AUTH_REQUIRED naming it and the
    /// command that stores it.
    pub async fn placeholders(
        &self,
        app: &str,
        executor: &aai_descriptor::Executor,
        from_env: bool,
    ) -> Result<Vec<(String, Secret)>, Error> {
        let mut values = Vec::new();
        for name in fill::names(executor) {
            let stored = match self.store.get(&fill::entry(app, &name)).await? {
                Some(Credential::ApiKey { value }) => Some(value),
                _ => None,
            };
            // Never the gateway's own secrets, whatever a descriptor names.
            let own = matches!(name.as_str(), "AAI_STORE_KEY" | "AAI_HTTP_TOKEN");
            let value = stored.or_else(|| {
                (from_env && !own)
                    .then(|| std::env::var(&name).ok())
                    .flatten()
                    .map(Secret::new)
            });
            match value {
                Some(v) => values.push((name, v)),
                None => {
                    return Err(Error::MissingSecret {
                        app: app.to_owned(),
                        name,
                        from_env,
                    });
                }
            }
        }
        Ok(values)
    }

    async fn exchange(
        &self,
        app: &str,
        endpoint: &str,
        app_id: &str,
        secret: &Secret,
    ) -> Result<(Secret, Option<Duration>), Error> {
        let body = json!({"app_id": app_id, "app_secret": secret.expose()}).to_string();
        let (status, value) =
            crate::auth::oauth::post_token_endpoint(endpoint, "application/json", body, None)
                .await?;
        let field = |names: &[&str]| names.iter().find_map(|n| value.get(*n));
        let token = field(&[
            "tenant_access_token",
            "tenantAccessToken",
            "app_access_token",
            "appAccessToken",
            "user_access_token",
            "userAccessToken",
            "access_token",
            "accessToken",
            "token",
        ])
        .and_then(Value::as_str);
        let provider_code = value
            .get("code")
            .and_then(Value::as_i64)
            .filter(|c| *c != 0);
        match (status.is_success(), token, provider_code) {
            (true, Some(token), None) => {
                let lifetime = lifetime(field(&["expire", "expires_in", "expiresIn"]));
                tracing::info!(app, "obtained an app access token");
                Ok((Secret::new(token), lifetime))
            }
            _ => {
                let message = field(&["msg", "message", "error_description", "error"])
                    .and_then(Value::as_str)
                    .unwrap_or("no token in the response");
                Err(Error::ExchangeRefused {
                    status,
                    message: crate::text::scrub(message, &forms(secret.expose())),
                })
            }
        }
    }

    /// AUTH_REQUIRED with everything the agent needs to explain the fix (for a person's own
    /// OAuth sign-in, the command names them).
    pub fn required(&self, app: &str, who: &Who, auth: &Auth, why: &str) -> Error {
        let (instructions, obtain_url) = match auth {
            Auth::ApiKey(k) => (k.instructions.clone(), Some(k.obtain_url.clone())),
            Auth::Cookie(c) => (c.instructions.clone(), Some(c.login_url.clone())),
            Auth::AppCredential(a) => (a.instructions.clone(), None),
            Auth::OAuth2(_) => (None, None),
        };
        Error::Required(Box::new(Required {
            app: app.to_owned(),
            why: why.to_owned(),
            ui: None,
            person: who.person().map(str::to_owned),
            kind: auth.kind(),
            obtain_url,
            instructions,
            locale: self.locale.clone(),
        }))
    }
}

/// The longest token lifetime believed: a year. Larger (or absurd) values are cut to it,
/// so no arithmetic on them can overflow.
pub(crate) const MAX_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// A token lifetime in seconds as a provider sent it: a non-negative number (or numeric
/// text), at most [`MAX_LIFETIME`]. Anything else means "unknown".
pub(crate) fn lifetime(value: Option<&Value>) -> Option<Duration> {
    let secs = match value? {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    (secs.is_finite() && secs >= 0.0)
        .then(|| Duration::from_secs_f64(secs.min(MAX_LIFETIME.as_secs_f64())))
}

/// What a request with the bearer `token` carries.
pub(crate) fn bearer(token: &Secret) -> Material {
    Material {
        headers: vec![(
            "Authorization".to_owned(),
            Secret::new(format!("Bearer {}", token.expose())),
        )],
        ..Material::default()
    }
}

/// The bearer material of OAuth tokens: the access token sent, the refresh token only
/// scrubbed from what comes back.
fn oauth_bearer(tokens: &oauth::Tokens) -> Material {
    Material {
        unsent: tokens.refresh_token.iter().cloned().collect(),
        ..bearer(&tokens.access_token)
    }
}

fn url_host(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lifetimes_never_overflow() {
        let year = Some(MAX_LIFETIME);
        assert_eq!(
            lifetime(Some(&json!(3600))),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(
            lifetime(Some(&json!("7200"))),
            Some(Duration::from_secs(7200))
        );
        assert_eq!(lifetime(Some(&json!(u64::MAX))), year);
        assert_eq!(lifetime(Some(&json!(1e300))), year);
        assert_eq!(lifetime(Some(&json!(-5))), None);
        assert_eq!(lifetime(Some(&json!("soon"))), None);
        assert_eq!(lifetime(Some(&json!(null))), None);
        assert_eq!(lifetime(None), None);
        // The arithmetic done with them is safe at the cap.
        let _ = Instant::now() + MAX_LIFETIME;
    }
}
