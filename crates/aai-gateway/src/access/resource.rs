//! `--web` as an OAuth 2.1 resource server of the team's authorization server (config
//! `web.auth`, [docs/team.md](../../../../docs/team.md)):
//!
//! * the Protected Resource Metadata (RFC 9728) that names the authorization server, and
//!   the `WWW-Authenticate` challenge that points to it;
//! * JWT access tokens (RFC 9068) checked against the issuer's published keys: signature
//!   (asymmetric algorithms only; the key set is cached and fetched again, at most every
//!   [`REFETCH_EVERY`], when a token names a key it does not hold), issuer, audience,
//!   expiry, and the scopes every token must carry;
//! * opaque tokens through the issuer's introspection endpoint (RFC 7662), when the
//!   gateway has a client id to ask as;
//! * the [`Person`] a valid token names, cached by the token's digest until it expires
//!   (at most [`CACHED_TOKENS`] at once).
//!
//! The authorization server is asked nothing until the first token arrives. A key set or
//! introspection answer that is late ([`FETCH_TIMEOUT`]) or large ([`MAX_ANSWER`]) is
//! refused, and after a failed fetch the next waits [`RETRY_AFTER`]: a hostile or dead
//! authorization server costs each request a bounded wait, never a hang.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation, jwk::JwkSet};
use serde_json::Value;

use crate::auth::Secret;
use crate::auth::mcp::{AuthServer, Client, Plan, TokenAuth};
use crate::config::WebAuth;
use crate::identity::Person;

/// The longest a key set or introspection request may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest key set or introspection answer read.
pub const MAX_ANSWER: usize = 256 * 1024;
/// The most keys a key set may hold.
pub const MAX_KEYS: usize = 64;
/// How soon an unknown key may fetch the key set again.
pub const REFETCH_EVERY: Duration = Duration::from_secs(30);
/// How long a failed fetch (metadata or keys) is remembered before it is tried again.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);
/// Valid tokens remembered (by digest) until they expire.
pub const CACHED_TOKENS: usize = 4096;
/// How long an introspection answer is trusted, at most.
pub const INTROSPECTION_TTL: u64 = 60;
/// Clock skew allowed on `exp` and `nbf`.
pub const LEEWAY_SECS: u64 = 30;
/// The longest token looked at; the longest one sent to introspection.
pub const MAX_TOKEN: usize = 16 * 1024;
pub const MAX_INTROSPECTED: usize = 4 * 1024;
/// Introspection requests at once; more wait (at most [`FETCH_TIMEOUT`]) for a turn.
pub const INTROSPECTIONS_AT_ONCE: usize = 8;
/// How long a refused token is answered from memory, without a second look.
pub const REFUSED_FOR: Duration = Duration::from_secs(60);
/// How long the authorization server's metadata is kept before it is read again.
pub const METADATA_FOR: Duration = Duration::from_secs(3600);

/// Why a request's token was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No token: the client should sign in (401 with the challenge, no error).
    #[error("sign in with the team's authorization server")]
    Missing,
    /// The token is not valid here (401, `error="invalid_token"`).
    #[error("the access token is not valid here: {0}")]
    Invalid(String),
    /// The token lacks a scope every call needs (403, `error="insufficient_scope"`).
    #[error("the access token lacks the scope {0}")]
    Scope(String),
    /// The authorization server could not be asked (503).
    #[error("the authorization server cannot be reached: {0}")]
    Unavailable(String),
}

/// The resource server: configuration, what it learned of the authorization server, and
/// the tokens it already checked.
#[derive(Debug)]
pub struct Resource {
    config: WebAuth,
    /// `AAI_WEB_AUTH_CLIENT_SECRET`: the UI's and introspection's client secret.
    secret: Option<Secret>,
    server: tokio::sync::Mutex<Fetched<Arc<AuthServer>>>,
    keys: tokio::sync::Mutex<Fetched<Arc<JwkSet>>>,
    verified: Mutex<Verified>,
    /// Tokens found invalid lately, by digest: a repeated bad token costs nothing more.
    refused: Mutex<HashMap<[u8; 32], (Refusal, Instant)>>,
    introspections: tokio::sync::Semaphore,
}

/// Valid tokens by SHA-256 digest: the person and when to stop trusting it (Unix time).
type Verified = HashMap<[u8; 32], (Arc<Person>, u64)>;

/// Something fetched from the authorization server, or when fetching it last failed.
#[derive(Debug)]
enum Fetched<T> {
    Never,
    Got(T, Instant),
    Failed(String, Instant),
}

/// The claims of an access token the gateway reads.
#[derive(Debug, serde::Deserialize)]
struct Claims {
    sub: String,
    #[serde(default)]
    exp: u64,
    #[serde(default)]
    scope: Option<String>,
    /// Some issuers (Entra ID, Okta) list scopes as `scp`, a list or a string.
    #[serde(default)]
    scp: Option<Value>,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Resource {
    /// A resource server for `config`; the client secret, if any, comes from
    /// `AAI_WEB_AUTH_CLIENT_SECRET`.
    pub fn new(config: WebAuth) -> Resource {
        let secret = std::env::var("AAI_WEB_AUTH_CLIENT_SECRET")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .map(Secret::new);
        Resource {
            config,
            secret,
            server: tokio::sync::Mutex::new(Fetched::Never),
            keys: tokio::sync::Mutex::new(Fetched::Never),
            verified: Mutex::default(),
            refused: Mutex::default(),
            introspections: tokio::sync::Semaphore::new(INTROSPECTIONS_AT_ONCE),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &WebAuth {
        &self.config
    }

    /// The origin of the resource URL (`https://gateway.example.com`): where clients and
    /// browsers reach this server.
    pub fn public_origin(&self) -> String {
        reqwest::Url::parse(&self.config.audience)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_else(|_| self.config.audience.clone())
    }

    /// Where the Protected Resource Metadata is (RFC 9728 §3.1: the well-known path, then
    /// the resource URL's own path).
    pub fn metadata_url(&self) -> String {
        let path = reqwest::Url::parse(&self.config.audience)
            .map(|u| u.path().trim_end_matches('/').to_owned())
            .unwrap_or_default();
        format!(
            "{}{}{path}",
            self.public_origin(),
            crate::auth::mcp::RESOURCE_METADATA
        )
    }

    /// The Protected Resource Metadata document.
    pub fn metadata(&self) -> Value {
        let mut scopes: Vec<&str> = self.config.scopes.iter().map(String::as_str).collect();
        scopes.extend(self.config.scope_access.scopes());
        scopes.push(&self.config.admin_scope);
        scopes.sort_unstable();
        scopes.dedup();
        serde_json::json!({
            "resource": self.config.audience,
            "authorization_servers": [self.config.issuer],
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "aai-gateway",
        })
    }

    /// The `WWW-Authenticate` value of a refusal.
    pub fn challenge(&self, refusal: &Refusal) -> String {
        let quote = |s: &str| s.replace(['"', '\\'], "'");
        let mut value = format!("Bearer resource_metadata=\"{}\"", self.metadata_url());
        let required = self.config.scopes.join(" ");
        match refusal {
            Refusal::Missing | Refusal::Unavailable(_) => {}
            Refusal::Invalid(why) => {
                value.push_str(&format!(
                    ", error=\"invalid_token\", error_description=\"{}\"",
                    quote(why)
                ));
            }
            Refusal::Scope(_) => value.push_str(", error=\"insufficient_scope\""),
        }
        if !required.is_empty() {
            value.push_str(&format!(", scope=\"{}\"", quote(&required)));
        }
        value
    }

    /// The person `token` names, when it is valid here.
    pub async fn person(&self, token: &str) -> Result<Arc<Person>, Refusal> {
        use sha2::Digest;
        if token.len() > MAX_TOKEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Refusal::Invalid("it is not an access token".into()));
        }
        let digest: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let at = now();
        if let Some((person, exp)) = self.verified.lock().expect("tokens lock").get(&digest)
            && *exp > at
        {
            return Ok(person.clone());
        }
        if let Some((refusal, when)) = self.refused.lock().expect("refused lock").get(&digest)
            && when.elapsed() < REFUSED_FOR
        {
            return Err(refusal.clone());
        }
        let checked = if token.split('.').count() == 3 {
            self.jwt(token).await.map(|claims| {
                let exp = claims.exp;
                (claims, exp)
            })
        } else {
            self.introspect(token).await
        };
        let person = checked.and_then(|(claims, exp)| {
            let mut person = self.person_of(claims)?;
            person.bearer = crate::identity::Bearer {
                token: token.into(),
                expires_at: exp,
            };
            Ok((Arc::new(person), exp))
        });
        let (person, exp) = match person {
            Ok(found) => found,
            Err(refusal) => {
                // Only a verdict on the token itself is kept: an unreachable issuer is
                // asked again.
                if matches!(refusal, Refusal::Invalid(_) | Refusal::Scope(_)) {
                    let mut refused = self.refused.lock().expect("refused lock");
                    if refused.len() >= CACHED_TOKENS {
                        refused.retain(|_, (_, when)| when.elapsed() < REFUSED_FOR);
                        if refused.len() >= CACHED_TOKENS {
                            refused.clear();
                        }
                    }
                    refused.insert(digest, (refusal.clone(), Instant::now()));
                }
                return Err(refusal);
            }
        };
        let mut cache = self.verified.lock().expect("tokens lock");
        if cache.len() >= CACHED_TOKENS {
            cache.retain(|_, (_, exp)| *exp > at);
            if cache.len() >= CACHED_TOKENS {
                cache.clear();
            }
        }
        cache.insert(digest, (person.clone(), exp));
        Ok(person)
    }

    /// The person of checked claims: a usable subject and every required scope.
    fn person_of(&self, claims: Claims) -> Result<Person, Refusal> {
        if !Person::valid_subject(&claims.sub) {
            return Err(Refusal::Invalid("its subject cannot name a person".into()));
        }
        // RFC 6749 §3.3: scopes are separated by spaces (U+0020) alone.
        let words = |s: &str| -> Vec<String> {
            s.split(' ')
                .filter(|w| !w.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let mut scopes = words(claims.scope.as_deref().unwrap_or(""));
        match claims.scp {
            Some(Value::String(s)) => scopes.extend(words(&s)),
            Some(Value::Array(list)) => {
                scopes.extend(list.iter().filter_map(Value::as_str).map(str::to_owned))
            }
            _ => {}
        }
        scopes.sort_unstable();
        scopes.dedup();
        scopes.truncate(256);
        if let Some(missing) = self
            .config
            .scopes
            .iter()
            .find(|s| scopes.binary_search(s).is_err())
        {
            return Err(Refusal::Scope(missing.clone()));
        }
        Ok(Person {
            admin: scopes.binary_search(&self.config.admin_scope).is_ok(),
            subject: claims.sub,
            scopes,
            bearer: crate::identity::Bearer::default(),
        })
    }

    /// A JWT access token's claims, once its signature, issuer, audience and times hold.
    async fn jwt(&self, token: &str) -> Result<Claims, Refusal> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| Refusal::Invalid("its header cannot be read".into()))?;
        if names_critical(token) {
            // RFC 7515 §4.1.11: extensions the recipient does not understand are refused.
            return Err(Refusal::Invalid(
                "it names critical header parameters (`crit`) the gateway does not understand"
                    .into(),
            ));
        }
        if header.alg.family() == AlgorithmFamily::Hmac {
            // A shared-secret signature could only be made with a key the issuer
            // publishes: never taken.
            return Err(Refusal::Invalid(format!(
                "it is signed with {:?}; only the issuer's public keys are accepted",
                header.alg
            )));
        }
        if let Some(typ) = &header.typ {
            let typ = typ.to_ascii_lowercase();
            if !matches!(typ.as_str(), "jwt" | "at+jwt" | "application/at+jwt") {
                return Err(Refusal::Invalid(format!(
                    "its type `{typ}` is not an access token"
                )));
            }
        }
        let key = self.key(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        let issuer = &self.config.issuer;
        validation.set_issuer(&[issuer.clone(), format!("{issuer}/")]);
        let audience = &self.config.audience;
        validation.set_audience(&[audience.clone(), format!("{audience}/")]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map(|data| data.claims)
            .map_err(|e| Refusal::Invalid(jwt_error(&e)))
    }

    /// The key named `kid` (the only key, when the token names none), fetching the key set
    /// again when it is not there and the last fetch is old enough.
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, Refusal> {
        let mut keys = self.keys.lock().await;
        let held = match &*keys {
            Fetched::Got(set, at) => Some((set.clone(), *at)),
            _ => None,
        };
        if let Some((set, _)) = &held
            && let Some(key) = pick(set, kid, alg)?
        {
            return Ok(key);
        }
        match &*keys {
            Fetched::Got(_, at) if at.elapsed() < REFETCH_EVERY => {
                return Err(Refusal::Invalid(
                    "it is signed with a key the issuer does not publish".into(),
                ));
            }
            Fetched::Failed(why, at) if at.elapsed() < RETRY_AFTER => {
                return Err(Refusal::Unavailable(why.clone()));
            }
            _ => {}
        }
        let fetched = self.fetch_keys().await;
        match fetched {
            Ok(set) => {
                let set = Arc::new(set);
                *keys = Fetched::Got(set.clone(), Instant::now());
                pick(&set, kid, alg)?.ok_or_else(|| {
                    Refusal::Invalid("it is signed with a key the issuer does not publish".into())
                })
            }
            Err(why) => {
                tracing::warn!("the team's signing keys: {why}");
                // Keys already held keep serving the tokens they sign.
                *keys = match held {
                    Some((set, at)) => Fetched::Got(set, at),
                    None => Fetched::Failed(why.clone(), Instant::now()),
                };
                Err(Refusal::Unavailable(why))
            }
        }
    }

    async fn fetch_keys(&self) -> Result<JwkSet, String> {
        let server = self.server().await.map_err(|r| r.to_string())?;
        let Some(uri) = &server.jwks_uri else {
            return Err("its metadata names no jwks_uri".into());
        };
        let body = get(uri).await?;
        let mut set: JwkSet =
            serde_json::from_slice(&body).map_err(|_| "its key set is not a JWK Set".to_owned())?;
        if set.keys.len() > MAX_KEYS {
            set.keys.truncate(MAX_KEYS);
        }
        Ok(set)
    }

    /// The authorization server's metadata, fetched on first need.
    pub async fn server(&self) -> Result<Arc<AuthServer>, Refusal> {
        let mut server = self.server.lock().await;
        let held = match &*server {
            Fetched::Got(s, _) => Some(s.clone()),
            _ => None,
        };
        match &*server {
            Fetched::Got(s, at) if at.elapsed() < METADATA_FOR => return Ok(s.clone()),
            Fetched::Failed(why, at) if at.elapsed() < RETRY_AFTER => {
                return Err(Refusal::Unavailable(why.clone()));
            }
            _ => {}
        }
        let plan = Plan {
            server: self.config.audience.clone(),
            resource: self.config.audience.clone(),
            issuer: self.config.issuer.clone(),
            scopes: None,
            described: true,
        };
        let found = tokio::time::timeout(
            FETCH_TIMEOUT * 3,
            crate::auth::mcp::authorization_server(&plan),
        )
        .await
        .map_err(|_| "its metadata did not arrive in time".to_owned())
        .and_then(|r| r.map_err(|e| e.to_string()));
        match found {
            Ok(found) => {
                let found = Arc::new(found);
                *server = Fetched::Got(found.clone(), Instant::now());
                Ok(found)
            }
            Err(why) => {
                tracing::warn!("the team's authorization server: {why}");
                // Metadata already held keeps serving until the server answers again.
                if let Some(held) = held {
                    *server = Fetched::Got(held.clone(), Instant::now());
                    return Ok(held);
                }
                *server = Fetched::Failed(why.clone(), Instant::now());
                Err(Refusal::Unavailable(why))
            }
        }
    }

    /// The client the gateway is at the authorization server (the UI's sign-in,
    /// introspection): `web.auth.clientId` and `AAI_WEB_AUTH_CLIENT_SECRET`.
    pub fn client(&self) -> Option<Client> {
        let id = self.config.client_id.clone()?;
        let method = if self.secret.is_some() {
            TokenAuth::ClientSecretBasic
        } else {
            TokenAuth::None
        };
        Some(Client {
            id,
            secret: self.secret.clone(),
            method,
            preregistered: true,
        })
    }

    /// An opaque token's claims through introspection (RFC 7662), and when to stop
    /// trusting the answer.
    async fn introspect(&self, token: &str) -> Result<(Claims, u64), Refusal> {
        let opaque = || Refusal::Invalid("it is not a JWT and cannot be introspected".into());
        let (Some(client), Some(secret)) = (self.client(), &self.secret) else {
            return Err(opaque());
        };
        if token.len() > MAX_INTROSPECTED {
            return Err(Refusal::Invalid("it is too long to be introspected".into()));
        }
        let _turn = tokio::time::timeout(FETCH_TIMEOUT, self.introspections.acquire())
            .await
            .map_err(|_| Refusal::Unavailable("introspection is busy".into()))?
            .expect("the semaphore is never closed");
        let server = self.server().await?;
        let Some(endpoint) = &server.introspection_endpoint else {
            return Err(opaque());
        };
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let basic = Secret::new(format!(
            "Basic {}",
            base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                format!("{}:{}", enc(&client.id), enc(secret.expose()))
            )
        ));
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let answer = tokio::time::timeout(
            FETCH_TIMEOUT,
            crate::auth::oauth::post_token_endpoint(
                endpoint,
                "application/x-www-form-urlencoded",
                body,
                Some(&basic),
            ),
        )
        .await
        .map_err(|_| Refusal::Unavailable("introspection did not answer in time".into()))?
        .map_err(|_| Refusal::Unavailable("introspection failed".into()))?;
        let (status, value) = answer;
        if !status.is_success() {
            return Err(Refusal::Unavailable(format!(
                "introspection answered HTTP {}",
                status.as_u16()
            )));
        }
        if value.get("active").and_then(Value::as_bool) != Some(true) {
            return Err(Refusal::Invalid("the issuer says it is not active".into()));
        }
        if value
            .get("token_type")
            .and_then(Value::as_str)
            .is_some_and(|t| {
                !t.eq_ignore_ascii_case("access_token") && !t.eq_ignore_ascii_case("bearer")
            })
        {
            return Err(Refusal::Invalid("it is not an access token".into()));
        }
        let issuer = value.get("iss").and_then(Value::as_str);
        if issuer.is_some_and(|i| i.trim_end_matches('/') != self.config.issuer) {
            return Err(Refusal::Invalid("it was issued by another issuer".into()));
        }
        let audience = &self.config.audience;
        let names_us = |v: &Value| {
            v.as_str()
                .is_some_and(|a| a.trim_end_matches('/') == audience)
        };
        match value.get("aud") {
            Some(Value::Array(list)) if !list.iter().any(names_us) => {
                return Err(Refusal::Invalid("it is for another audience".into()));
            }
            Some(v @ Value::String(_)) if !names_us(v) => {
                return Err(Refusal::Invalid("it is for another audience".into()));
            }
            None => return Err(Refusal::Invalid("it names no audience".into())),
            _ => {}
        }
        let at = now();
        let exp = value.get("exp").and_then(Value::as_u64).unwrap_or(0);
        if exp != 0 && exp + LEEWAY_SECS <= at {
            return Err(Refusal::Invalid("it has expired".into()));
        }
        let Some(sub) = value.get("sub").and_then(Value::as_str) else {
            return Err(Refusal::Invalid("it names no subject".into()));
        };
        let trust = if exp == 0 {
            at + INTROSPECTION_TTL
        } else {
            exp.min(at + INTROSPECTION_TTL)
        };
        let claims = Claims {
            sub: sub.to_owned(),
            exp,
            scope: value
                .get("scope")
                .and_then(Value::as_str)
                .map(str::to_owned),
            scp: None,
        };
        Ok((claims, trust))
    }
}

/// Whether a JWT's header has a `crit` member.
fn names_critical(token: &str) -> bool {
    use base64::Engine;
    let head = token.split('.').next().unwrap_or("");
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(head.trim_end_matches('='))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Map<String, Value>>(&bytes).ok())
        .is_some_and(|header| header.contains_key("crit"))
}

/// The key for `kid` in `set` that can check `alg`: the only key when no kid is named.
fn pick(set: &JwkSet, kid: Option<&str>, alg: Algorithm) -> Result<Option<DecodingKey>, Refusal> {
    let jwk = match kid {
        Some(kid) => set.find(kid),
        None if set.keys.len() == 1 => set.keys.first(),
        None => {
            return Err(Refusal::Invalid(
                "it names no key and the issuer publishes several".into(),
            ));
        }
    };
    let Some(jwk) = jwk else {
        return Ok(None);
    };
    if let Some(stated) = jwk.common.key_algorithm
        && format!("{stated:?}") != format!("{alg:?}")
    {
        return Err(Refusal::Invalid(format!(
            "its algorithm {alg:?} is not its key's ({stated:?})"
        )));
    }
    DecodingKey::from_jwk(jwk)
        .map(Some)
        .map_err(|_| Refusal::Invalid("its key cannot check it".into()))
}

/// A bounded GET of the authorization server's keys.
async fn get(uri: &str) -> Result<Vec<u8>, String> {
    let client = crate::net::client(crate::net::Purpose::Descriptor).map_err(|e| e.to_string())?;
    let response = client
        .get(uri)
        .header("accept", "application/json")
        .timeout(FETCH_TIMEOUT)
        .send()
        .await
        .map_err(|e| format!("its keys: {}", crate::net::describe(&e)))?;
    if !response.status().is_success() {
        return Err(format!("its keys: HTTP {}", response.status().as_u16()));
    }
    tokio::time::timeout(FETCH_TIMEOUT, crate::net::read_capped(response, MAX_ANSWER))
        .await
        .map_err(|_| "its keys did not arrive in time".to_owned())?
        .map_err(|e| format!("its keys: {e}"))
}

/// What went wrong with a token, in words that name no value of it.
fn jwt_error(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::ExpiredSignature => "it has expired".into(),
        ErrorKind::ImmatureSignature => "it is not valid yet".into(),
        ErrorKind::InvalidSignature => "its signature does not match".into(),
        ErrorKind::InvalidIssuer => "it was issued by another issuer".into(),
        ErrorKind::InvalidAudience => "it is for another audience".into(),
        ErrorKind::InvalidAlgorithm => "its algorithm does not match its key".into(),
        ErrorKind::MissingRequiredClaim(c) => format!("it has no `{c}` claim"),
        _ => "it cannot be read".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(scopes: &[&str]) -> Resource {
        Resource::new(WebAuth {
            issuer: "https://id.example.com".into(),
            audience: "https://gw.example.com/mcp".into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            scope_access: crate::visibility::ScopeAccess::default(),
            admin_scope: "aai:admin".into(),
            client_id: None,
        })
    }

    #[test]
    fn metadata_is_at_the_resource_paths_well_known_url() {
        let r = resource(&["mcp"]);
        assert_eq!(
            r.metadata_url(),
            "https://gw.example.com/.well-known/oauth-protected-resource/mcp"
        );
        let doc = r.metadata();
        assert_eq!(doc["resource"], "https://gw.example.com/mcp");
        assert_eq!(doc["authorization_servers"][0], "https://id.example.com");
        assert_eq!(
            doc["scopes_supported"],
            serde_json::json!(["aai:admin", "mcp"])
        );
    }

    #[test]
    fn challenges_say_why_and_where() {
        let r = resource(&["mcp"]);
        assert_eq!(
            r.challenge(&Refusal::Missing),
            "Bearer resource_metadata=\"https://gw.example.com/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\""
        );
        let invalid = r.challenge(&Refusal::Invalid("it has \"expired\"".into()));
        assert!(
            invalid.contains("error=\"invalid_token\", error_description=\"it has 'expired'\"")
        );
        assert!(
            r.challenge(&Refusal::Scope("mcp".into()))
                .contains("error=\"insufficient_scope\"")
        );
    }

    #[test]
    fn scopes_come_from_scope_or_scp_and_required_ones_are_checked() {
        let r = resource(&["mcp"]);
        let claims = |scope: Option<&str>, scp: Option<Value>| Claims {
            sub: "alice".into(),
            exp: 0,
            scope: scope.map(str::to_owned),
            scp,
        };
        let p = r.person_of(claims(Some("mcp aai:admin"), None)).unwrap();
        assert_eq!(p.scopes, ["aai:admin", "mcp"]);
        assert!(p.admin);
        let p = r
            .person_of(claims(None, Some(serde_json::json!(["mcp", "x"]))))
            .unwrap();
        assert!(!p.admin);
        assert_eq!(
            r.person_of(claims(Some("openid"), None)).unwrap_err(),
            Refusal::Scope("mcp".into())
        );
        // Only a plain space separates scopes.
        let p = r
            .person_of(claims(Some("mcp aai:admin\u{a0}x"), None))
            .unwrap();
        assert!(!p.admin && p.scopes.contains(&"aai:admin\u{a0}x".to_owned()));
        let mut bad = claims(Some("mcp"), None);
        bad.sub = "a\nb".into();
        assert!(matches!(r.person_of(bad), Err(Refusal::Invalid(_))));
    }

    #[tokio::test]
    async fn symmetric_and_unreadable_tokens_are_refused_before_any_fetch() {
        let r = resource(&[]);
        // {"alg":"HS256","typ":"JWT"} . {} . sig
        let hs = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.e30.c2ln";
        assert!(matches!(r.person(hs).await, Err(Refusal::Invalid(w)) if w.contains("HS256")));
        // {"alg":"none"}
        let none = "eyJhbGciOiJub25lIn0.e30.";
        assert!(matches!(r.person(none).await, Err(Refusal::Invalid(_))));
        assert!(matches!(r.person("a.b.c").await, Err(Refusal::Invalid(_))));
        // No client id: an opaque token cannot be introspected.
        assert!(matches!(
            r.person("opaque-token").await,
            Err(Refusal::Invalid(_))
        ));
        assert!(
            matches!(*r.server.lock().await, Fetched::Never),
            "nothing was fetched"
        );
    }
}
