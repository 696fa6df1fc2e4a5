//! MCP authorization for downstream servers over HTTP: the MCP specification's
//! authorization (2025-06-18 and 2025-11-25 revisions, with the 2025-03-26 fallbacks), as
//! a client. `docs/mcp.md` ("Signing in to remote MCP servers") is the user's view.
//!
//! * **Discovery.** A server answers an unauthenticated request with 401 and
//!   `WWW-Authenticate: Bearer resource_metadata=…, scope=…` ([`Challenge`]). Its Protected
//!   Resource Metadata (RFC 9728) comes from that URL, else from
//!   `/.well-known/oauth-protected-resource/<path>`, else from the root well-known; its
//!   `resource` must cover the server's URL. The authorization server's metadata (RFC 8414,
//!   then OpenID Connect discovery) is tried at the path-aware well-known URLs in the
//!   specification's order. A server with no resource metadata is a 2025-03-26 server: its
//!   origin is the authorization server, and `/authorize`, `/token`, `/register` are the
//!   fallbacks when that origin has no metadata either.
//! * **Client identity.** Credentials the user stored (`auth set`), else a Client ID
//!   Metadata Document when config `oauthClientMetadataUrl` names one and the server
//!   supports them, else Dynamic Client Registration (RFC 7591) as a native app with the
//!   loopback redirect (once per sign-in: the port changes).
//! * **Authorization.** Code + PKCE S256 + `state` through the browser, with the resource
//!   indicator (RFC 8707) on the authorization and token requests; scopes from the
//!   challenge, else the resource's `scopes_supported`, else none, plus `offline_access`
//!   when the authorization server lists it. The token endpoint is authenticated with
//!   `client_secret_basic`, `client_secret_post` or `none`, as the server supports.
//! * **Step-up.** After signing in the gateway checks the token against the server
//!   (`initialize`, `tools/list`); a 403 `insufficient_scope` widens the scopes and signs in
//!   again, [`MAX_SIGN_INS`] times at most.
//!
//! Nothing here is sent before the user asked to sign in. Metadata documents are small
//! ([`MAX_METADATA`]), fetched without redirects, and every endpoint an authorization
//! server names must be on its own origin: consent showed that origin, so the code and
//! the verifier go nowhere else. Tokens live only in the credential store ([`Grant`]).
//!
//! Hand-written rather than built on rmcp's `AuthorizationManager` (3.9, feature `auth`):
//! rmcp fetches authorization-server metadata during discovery, before the user agreed to
//! the origins; accepts resource metadata on another origin, does not hold endpoints to the
//! issuer's origin, follows redirects and takes metadata that does not mention PKCE; its
//! registration always asks for `none` and does not check the redirect URIs that come back;
//! its credential store has no room for a client secret, auth method, token endpoint or
//! resource, and it cannot keep a pre-registered client from being sent to a new
//! authorization server. It also builds its own HTTP client, outside `crate::net`.

use base64::Engine as _;
use serde_json::{Value, json};

use super::Secret;
use super::oauth::{self, Tokens};

pub(crate) mod exchange;
mod probe;
use crate::error::{Code, GatewayError};
pub(crate) use probe::{Access, check, probe};

/// The well-known path of Protected Resource Metadata (RFC 9728 §3.1), where the gateway
/// looks for a remote server's and serves its own (`--web` with `web.auth`).
pub(crate) const RESOURCE_METADATA: &str = "/.well-known/oauth-protected-resource";

/// The largest metadata document read (token and registration answers: 1 MiB).
pub(crate) const MAX_METADATA: usize = 256 * 1024;
/// How many times one sign-in asks the user to authorize (the first time and step-ups).
pub(crate) const MAX_SIGN_INS: usize = 3;
/// The longest challenge value read (scopes, URLs); longer ones are left out.
const MAX_CHALLENGE_VALUE: usize = 4096;
/// The longest client id a registration may hand out.
const MAX_CLIENT_ID: usize = 2048;
/// The protocol revision the sign-in check speaks.
const PROTOCOL: &str = "2025-11-25";

/// What a `WWW-Authenticate: Bearer …` challenge says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the Protected Resource Metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the request needs.
    pub scope: Option<String>,
    /// `error`: `invalid_token`, `insufficient_scope`, …
    pub error: Option<String>,
}

impl Challenge {
    /// Reads the `Bearer` challenge of a `WWW-Authenticate` value (other schemes and
    /// unknown parameters are left out; a malformed value gives what could be read).
    pub fn parse(header: &str) -> Challenge {
        let mut out = Challenge::default();
        let Some(start) = bearer_at(header) else {
            return out;
        };
        let mut rest = &header[start + "bearer".len()..];
        loop {
            rest = rest.trim_start_matches([' ', '\t', ',']);
            let Some(eq) = rest.find('=') else { break };
            let name = rest[..eq].trim();
            if name.is_empty() || name.contains([' ', '\t', '"']) {
                break; // the next scheme begins
            }
            rest = rest[eq + 1..].trim_start();
            let value = if let Some(quoted) = rest.strip_prefix('"') {
                let mut value = String::new();
                let mut escaped = false;
                let mut end = quoted.len();
                for (i, c) in quoted.char_indices() {
                    match c {
                        _ if escaped => {
                            value.push(c);
                            escaped = false;
                        }
                        '\\' => escaped = true,
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        _ => value.push(c),
                    }
                }
                rest = &quoted[end.min(quoted.len())..];
                value
            } else {
                let end = rest.find(',').unwrap_or(rest.len());
                let value = rest[..end].trim().to_owned();
                rest = &rest[end..];
                value
            };
            // An over-long value (a hostile server's) is not believed.
            if value.len() > MAX_CHALLENGE_VALUE {
                continue;
            }
            let slot = match name.to_ascii_lowercase().as_str() {
                "resource_metadata" => &mut out.resource_metadata,
                "scope" => &mut out.scope,
                "error" => &mut out.error,
                _ => continue,
            };
            slot.get_or_insert(value);
        }
        out
    }

    /// Whether the token lacks a scope (a 403 the user can fix by signing in again).
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }

    /// The scopes it names.
    pub fn scopes(&self) -> Option<Vec<String>> {
        let scopes: Vec<String> = self
            .scope
            .as_deref()?
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        (!scopes.is_empty()).then_some(scopes)
    }
}

/// Where the `Bearer` scheme starts in a challenge (case-insensitive, a whole word).
fn bearer_at(header: &str) -> Option<usize> {
    let lower = header.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let (mut quoted, mut escaped) = (false, false);
    for i in 0..bytes.len() {
        match bytes[i] {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b'b' if !quoted && lower[i..].starts_with("bearer") => {
                let before = lower[..i].chars().next_back();
                let after = lower[i + "bearer".len()..].chars().next();
                if before.is_none_or(|c| c == ' ' || c == ',')
                    && after.is_none_or(|c| c == ' ' || c == '\t')
                {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenAuth {
    /// A public client: the client id in the form.
    #[default]
    None,
    /// HTTP Basic with the client id and secret.
    ClientSecretBasic,
    /// The client id and secret in the form.
    ClientSecretPost,
}

impl TokenAuth {
    fn as_str(self) -> &'static str {
        match self {
            TokenAuth::None => "none",
            TokenAuth::ClientSecretBasic => "client_secret_basic",
            TokenAuth::ClientSecretPost => "client_secret_post",
        }
    }

    /// The method for a client with (or without) a secret, among those the server lists
    /// (none listed: RFC 8414's default, `client_secret_basic`).
    fn choose(listed: &[String], has_secret: bool) -> Result<TokenAuth, Error> {
        let offered = |m: TokenAuth| {
            listed.iter().any(|l| l == m.as_str())
                || (listed.is_empty() && m == TokenAuth::ClientSecretBasic)
        };
        let order: &[TokenAuth] = if has_secret {
            &[TokenAuth::ClientSecretBasic, TokenAuth::ClientSecretPost]
        } else {
            &[TokenAuth::None]
        };
        order
            .iter()
            .copied()
            .find(|m| offered(*m))
            .ok_or_else(|| Error::NoAuthMethod(listed.join(", ")))
    }
}

/// An app's sign-in as stored (credential type `mcpOAuth`): the client, where its tokens
/// come from and go to, and the tokens. Only the credential store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// The client id.
    pub client_id: String,
    /// The client secret, when the client has one.
    #[serde(serialize_with = "super::secret::expose_opt", default)]
    pub client_secret: Option<Secret>,
    /// How the token endpoint is authenticated (chosen at sign-in).
    #[serde(default)]
    pub auth_method: TokenAuth,
    /// Whether the user gave the client (`auth set`): kept across sign-ins.
    #[serde(default)]
    pub preregistered: bool,
    /// The authorization server the tokens are from (empty before the first sign-in).
    #[serde(default)]
    pub issuer: String,
    /// Its token endpoint, for refreshing.
    #[serde(default)]
    pub token_endpoint: String,
    /// The resource indicator the tokens are for.
    #[serde(default)]
    pub resource: String,
    /// The scopes asked for (widened by step-ups).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The tokens, once signed in.
    #[serde(default)]
    pub tokens: Option<Tokens>,
}

impl Grant {
    /// What a sign-in as `client` at `server` for `resource` keeps (`tokens`: none yet
    /// while the browser is away).
    pub(crate) fn of(
        client: Client,
        server: AuthServer,
        resource: String,
        scopes: Option<Vec<String>>,
        tokens: Option<Tokens>,
    ) -> Grant {
        Grant {
            client_id: client.id,
            client_secret: client.secret,
            auth_method: client.method,
            preregistered: client.preregistered,
            issuer: server.issuer,
            token_endpoint: server.token_endpoint,
            resource,
            scopes: scopes.unwrap_or_default(),
            tokens,
        }
    }

    /// A client the user registered with the server (no tokens yet).
    pub fn preregistered(client_id: String, client_secret: Option<Secret>) -> Grant {
        Grant {
            client_id,
            client_secret,
            auth_method: TokenAuth::None,
            preregistered: true,
            issuer: String::new(),
            token_endpoint: String::new(),
            resource: String::new(),
            scopes: Vec::new(),
            tokens: None,
        }
    }

    /// Whether its tokens may be sent to the server at `url` (the resource covers it).
    pub fn serves(&self, url: &str) -> bool {
        self.tokens.is_some() && covers(&self.resource, url)
    }
}

/// Why signing in to an MCP server failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A URL is not https (or plain http to this machine), or not a URL.
    #[error("{what} `{url}` cannot be used: {why}")]
    BadUrl {
        /// Which URL.
        what: &'static str,
        /// It, cut to its origin.
        url: String,
        /// Why.
        why: String,
    },
    /// A document could not be fetched or read.
    #[error("{what} at {url}: {why}")]
    Fetch {
        /// Which document.
        what: &'static str,
        /// Where, cut to its origin.
        url: String,
        /// Why.
        why: String,
    },
    /// The server's metadata is on another origin.
    #[error("the server's resource metadata ({0}) is on another origin than the server")]
    MetadataOrigin(String),
    /// The resource metadata names another resource than the server.
    #[error("the server's resource metadata is for `{resource}`, not for `{server}`: refused")]
    ResourceMismatch {
        /// What the metadata names.
        resource: String,
        /// The server's URL.
        server: String,
    },
    /// The server names resource metadata that is not there.
    #[error("the server names resource metadata at {0}, and there is none")]
    NoResourceMetadata(String),
    /// No authorization server metadata at any well-known URL.
    #[error("the authorization server {0} publishes no metadata (RFC 8414 or OpenID Connect)")]
    NoServerMetadata(String),
    /// The metadata is for another issuer.
    #[error("the authorization server metadata names the issuer `{found}`, not `{expected}`")]
    IssuerMismatch {
        /// The issuer the resource named.
        expected: String,
        /// The one in the metadata.
        found: String,
    },
    /// An endpoint is missing or on another origin than the authorization server.
    #[error("the authorization server's {which} {why}")]
    Endpoint {
        /// `token_endpoint`, …
        which: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// The server does not do PKCE with S256.
    #[error(
        "the authorization server does not support PKCE with S256; the gateway will not sign in without it"
    )]
    NoPkce,
    /// No client: no registration endpoint and nothing stored.
    #[error(
        "the authorization server does not register clients; register one with it and store it with `aai-gateway auth set {0}` (a JSON object {{\"clientId\", \"clientSecret\"}})"
    )]
    NoClient(String),
    /// No token endpoint authentication both sides know.
    #[error(
        "the authorization server offers no token endpoint authentication the gateway knows (it lists: {0})"
    )]
    NoAuthMethod(String),
    /// Dynamic client registration failed.
    #[error("the authorization server refused to register the gateway (HTTP {status}){why}")]
    Registration {
        /// Its status.
        status: reqwest::StatusCode,
        /// `: error: description`, or empty.
        why: String,
    },
    /// Getting tokens failed (the browser step, the code exchange, a refresh).
    #[error(transparent)]
    Tokens(#[from] oauth::Error),
    /// The server still wants more scopes after the last allowed sign-in.
    #[error("the server still refuses the token for lack of scope ({scope})")]
    StillInsufficient {
        /// What it asked for last.
        scope: String,
    },
    /// The server refused a fresh token.
    #[error("the server refused the token it just issued (HTTP {0})")]
    TokenRefused(u16),
    /// The stored client belongs to another authorization server than the one named now.
    #[error(
        "the stored OAuth client was used with {stored}, but the server now names {named}; store the client for {named} with `aai-gateway auth set`, or remove the old one with `auth logout`"
    )]
    OtherIssuer {
        /// The origin the client was used with.
        stored: String,
        /// The origin named now.
        named: String,
    },
    /// The server does not ask for sign-in.
    #[error(
        "the server at {0} does not ask for sign-in (it answered without a token and names no authorization server)"
    )]
    NotProtected(String),
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match &e {
            Error::Tokens(_) => {
                let Error::Tokens(inner) = e else {
                    unreachable!("matched above")
                };
                return inner.into();
            }
            Error::Fetch { .. } => Code::ServiceUnavailable,
            Error::Registration { .. }
            | Error::StillInsufficient { .. }
            | Error::TokenRefused(_) => Code::AuthDenied,
            Error::BadUrl { .. }
            | Error::MetadataOrigin(_)
            | Error::ResourceMismatch { .. }
            | Error::NoResourceMetadata(_)
            | Error::NoServerMetadata(_)
            | Error::IssuerMismatch { .. }
            | Error::Endpoint { .. }
            | Error::NoPkce
            | Error::NoClient(_)
            | Error::NoAuthMethod(_)
            | Error::OtherIssuer { .. }
            | Error::NotProtected(_) => Code::AuthRequired,
        };
        GatewayError::new(code, e.to_string())
    }
}

/// An http(s) URL the gateway may send to: https, or plain http to this machine.
fn fetchable(what: &'static str, url: &str) -> Result<reqwest::Url, Error> {
    let parsed = reqwest::Url::parse(url).map_err(|e| Error::BadUrl {
        what,
        url: crate::text::excerpt(url, 80),
        why: e.to_string(),
    })?;
    crate::net::check_fetchable(&parsed).map_err(|e| Error::BadUrl {
        what,
        url: crate::net::redact(&parsed),
        why: e.to_string(),
    })?;
    Ok(parsed)
}

/// The origin of a URL (`https://host:port`), or the text itself when it is none.
pub(crate) fn origin(url: &str) -> String {
    reqwest::Url::parse(url).map_or_else(|_| url.to_owned(), |u| u.origin().ascii_serialization())
}

/// Whether the resource `resource` covers the server at `url`: same origin, and the
/// server's path within the resource's.
pub(crate) fn covers(resource: &str, url: &str) -> bool {
    let (Ok(r), Ok(u)) = (reqwest::Url::parse(resource), reqwest::Url::parse(url)) else {
        return false;
    };
    let dir = r.path().trim_end_matches('/');
    let path = u.path().trim_end_matches('/');
    r.origin() == u.origin()
        && (path == dir || path.starts_with(&format!("{dir}/")))
        && r.query().is_none()
}

/// GETs a JSON metadata document: `None` when it is not there (any non-success status).
async fn fetch_json(what: &'static str, url: &reqwest::Url) -> Result<Option<Value>, Error> {
    let fail = |why: String| Error::Fetch {
        what,
        url: crate::net::redact(url),
        why,
    };
    let client =
        crate::net::client(crate::net::Purpose::TokenEndpoint).map_err(|e| fail(e.to_string()))?;
    let response = client
        .get(url.clone())
        .header("accept", "application/json")
        .header("mcp-protocol-version", PROTOCOL)
        .send()
        .await
        .map_err(|e| fail(crate::net::describe(&e)))?;
    if !response.status().is_success() {
        return Ok(None);
    }
    let body = crate::net::read_capped(response, MAX_METADATA)
        .await
        .map_err(|e| fail(e.to_string()))?;
    match serde_json::from_slice::<Value>(&body) {
        Ok(v @ Value::Object(_)) => Ok(Some(v)),
        _ => Err(fail("the answer is not a JSON object".to_owned())),
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// What discovery found: enough to ask the user (the two origins) and to sign in.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The server's URL.
    pub server: String,
    /// The resource indicator: the metadata's `resource`, else the server's URL.
    pub resource: String,
    /// The authorization server (its issuer URL).
    pub issuer: String,
    /// The scopes to ask for, when anything names them.
    pub scopes: Option<Vec<String>>,
    /// Whether the server published resource metadata (else it is a 2025-03-26 server).
    pub described: bool,
}

/// Finds the server's resource metadata and authorization server. Only the server's own
/// origin is asked: the authorization server is not contacted before the user agrees.
pub(crate) async fn discover(url: &str, challenge: Option<&Challenge>) -> Result<Plan, Error> {
    let server = fetchable("the MCP server URL", url)?;
    let mut candidates = Vec::new();
    let named = challenge.and_then(|c| c.resource_metadata.as_deref());
    if let Some(named) = named {
        let at = server.join(named).map_err(|e| Error::BadUrl {
            what: "the resource metadata URL",
            url: crate::text::excerpt(named, 80),
            why: e.to_string(),
        })?;
        if at.origin() != server.origin() {
            return Err(Error::MetadataOrigin(crate::net::redact(&at)));
        }
        candidates.push(at);
    }
    let path = server.path().trim_end_matches('/');
    let mut well_known = |p: String| {
        let mut u = server.clone();
        u.set_path(&p);
        u.set_query(None);
        u.set_fragment(None);
        candidates.push(u);
    };
    if !path.is_empty() {
        well_known(format!("{RESOURCE_METADATA}{path}"));
    }
    well_known(RESOURCE_METADATA.to_owned());
    for at in &candidates {
        let Some(doc) = fetch_json("the resource metadata", at).await? else {
            continue;
        };
        let resource = doc.get("resource").and_then(Value::as_str).unwrap_or("");
        if !covers(resource, url) {
            return Err(Error::ResourceMismatch {
                resource: crate::text::excerpt(resource, 100),
                server: crate::net::redact(&server),
            });
        }
        let issuer = strings(doc.get("authorization_servers"))
            .into_iter()
            .next()
            .ok_or_else(|| Error::Endpoint {
                which: "list (`authorization_servers`)",
                why: "is missing from the resource metadata".to_owned(),
            })?;
        fetchable("the authorization server", &issuer)?;
        let from_resource = strings(doc.get("scopes_supported"));
        return Ok(Plan {
            server: url.to_owned(),
            resource: resource.to_owned(),
            issuer,
            scopes: challenge
                .and_then(Challenge::scopes)
                .or((!from_resource.is_empty()).then_some(from_resource)),
            described: true,
        });
    }
    if let Some(named) = named {
        return Err(Error::NoResourceMetadata(crate::text::excerpt(named, 100)));
    }
    if challenge.is_none() {
        return Err(Error::NotProtected(crate::net::redact(&server)));
    }
    // A 2025-03-26 server: its origin is the authorization server.
    Ok(Plan {
        server: url.to_owned(),
        resource: url.to_owned(),
        issuer: server.origin().ascii_serialization(),
        scopes: challenge.and_then(Challenge::scopes),
        described: false,
    })
}

/// An authorization server as its metadata describes it.
#[derive(Debug, Clone)]
pub struct AuthServer {
    /// Its issuer.
    pub issuer: String,
    /// Where the browser goes.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens are exchanged.
    pub token_endpoint: String,
    /// Dynamic client registration, when offered.
    pub registration_endpoint: Option<String>,
    /// Its `scopes_supported`.
    pub scopes_supported: Vec<String>,
    /// Its `token_endpoint_auth_methods_supported`.
    pub auth_methods: Vec<String>,
    /// Its `grant_types_supported` (none said: RFC 8414's default, the code and implicit
    /// grants).
    pub grant_types: Vec<String>,
    /// Whether it takes Client ID Metadata Documents.
    pub client_metadata_documents: bool,
    /// Where its signing keys are published (`jwks_uri`; any https origin).
    pub jwks_uri: Option<String>,
    /// Its token introspection endpoint (RFC 7662).
    pub introspection_endpoint: Option<String>,
    /// Whether it says it takes PKCE with S256 (a sign-in refuses a server that does
    /// not; checking its tokens does not need it).
    pub pkce: bool,
    /// What the `iss` of its authorization responses must say (RFC 9207).
    pub answers_as: oauth::Issuer,
}

/// Reads the authorization server's metadata (RFC 8414, then OpenID Connect discovery, at
/// the path-aware URLs first), or the 2025-03-26 defaults for an undescribed server.
pub(crate) async fn authorization_server(plan: &Plan) -> Result<AuthServer, Error> {
    let issuer = fetchable("the authorization server", &plan.issuer)?;
    let path = issuer.path().trim_end_matches('/').to_owned();
    let paths = if path.is_empty() {
        vec![
            "/.well-known/oauth-authorization-server".to_owned(),
            "/.well-known/openid-configuration".to_owned(),
        ]
    } else {
        vec![
            format!("/.well-known/oauth-authorization-server{path}"),
            format!("/.well-known/openid-configuration{path}"),
            format!("{path}/.well-known/openid-configuration"),
        ]
    };
    for p in paths {
        let mut at = issuer.clone();
        at.set_path(&p);
        at.set_query(None);
        at.set_fragment(None);
        let Some(doc) = fetch_json("the authorization server metadata", &at).await? else {
            continue;
        };
        let found = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
        // RFC 8414 3.3 when the issuer is known; a 2025-03-26 server only names the
        // origin its metadata is on (its endpoints are still held to that origin).
        if plan.described && found.trim_end_matches('/') != plan.issuer.trim_end_matches('/') {
            return Err(Error::IssuerMismatch {
                expected: crate::text::excerpt(&plan.issuer, 100),
                found: crate::text::excerpt(found, 100),
            });
        }
        let pkce = strings(doc.get("code_challenge_methods_supported"))
            .iter()
            .any(|m| m == "S256");
        let endpoint = |which: &'static str| -> Result<Option<String>, Error> {
            let Some(url) = doc.get(which).and_then(Value::as_str) else {
                return Ok(None);
            };
            let parsed = fetchable("an authorization server endpoint", url)?;
            if parsed.origin() != issuer.origin() {
                return Err(Error::Endpoint {
                    which,
                    why: format!(
                        "is on another origin ({}) than the authorization server ({})",
                        parsed.origin().ascii_serialization(),
                        issuer.origin().ascii_serialization()
                    ),
                });
            }
            Ok(Some(url.to_owned()))
        };
        let required = |which: &'static str| {
            endpoint(which)?.ok_or(Error::Endpoint {
                which,
                why: "is missing from its metadata".to_owned(),
            })
        };
        return Ok(AuthServer {
            // For a 2025-03-26 server, its origin (what the user was shown), not what
            // the metadata claims.
            issuer: plan.issuer.clone(),
            authorization_endpoint: required("authorization_endpoint")?,
            token_endpoint: required("token_endpoint")?,
            registration_endpoint: endpoint("registration_endpoint")?,
            scopes_supported: strings(doc.get("scopes_supported")),
            auth_methods: strings(doc.get("token_endpoint_auth_methods_supported")),
            grant_types: strings(doc.get("grant_types_supported")),
            client_metadata_documents: doc
                .get("client_id_metadata_document_supported")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            // Keys are often served from another origin (a CDN, a key service).
            jwks_uri: match doc.get("jwks_uri").and_then(Value::as_str) {
                Some(url) => Some(fetchable("the authorization server's keys", url)?.to_string()),
                None => None,
            },
            introspection_endpoint: endpoint("introspection_endpoint")?,
            pkce,
            answers_as: if found.is_empty() {
                oauth::Issuer::undescribed(&plan.issuer)
            } else {
                oauth::Issuer::described(found, sends_iss(&doc))
            },
        });
    }
    if plan.described {
        return Err(Error::NoServerMetadata(crate::net::redact(&issuer)));
    }
    // The 2025-03-26 defaults, on the server's origin.
    let at = |p: &str| {
        let mut u = issuer.clone();
        u.set_path(p);
        u.set_query(None);
        u.to_string()
    };
    Ok(AuthServer {
        issuer: plan.issuer.clone(),
        authorization_endpoint: at("/authorize"),
        token_endpoint: at("/token"),
        registration_endpoint: Some(at("/register")),
        scopes_supported: Vec::new(),
        auth_methods: Vec::new(),
        grant_types: Vec::new(),
        client_metadata_documents: false,
        jwks_uri: None,
        introspection_endpoint: None,
        // The 2025-03-26 revision required PKCE of every server.
        pkce: true,
        answers_as: oauth::Issuer::undescribed(&at("/authorize")),
    })
}

/// Whether authorization server metadata says its authorization responses carry `iss`
/// (RFC 9207).
fn sends_iss(doc: &Value) -> bool {
    doc.get("authorization_response_iss_parameter_supported")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// What the `iss` of answers from the authorization endpoint `endpoint` (a web app's
/// descriptor names no issuer) must say: the metadata on the endpoint's origin (RFC 8414,
/// then OpenID Connect discovery), when it describes that endpoint; else only that an
/// `iss` be on the endpoint's origin. A server that cannot be asked has no metadata.
pub(crate) async fn issuer_of(endpoint: &str) -> oauth::Issuer {
    let Ok(parsed) = fetchable("the authorization endpoint", endpoint) else {
        return oauth::Issuer::undescribed(endpoint);
    };
    for path in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ] {
        let mut at = parsed.clone();
        at.set_path(path);
        at.set_query(None);
        at.set_fragment(None);
        let doc = match fetch_json("the authorization server metadata", &at).await {
            Ok(Some(doc)) => doc,
            Ok(None) => continue,
            Err(e) => {
                tracing::debug!("no authorization server metadata: {e}");
                continue;
            }
        };
        let text = |k: &str| doc.get(k).and_then(Value::as_str);
        if let (Some(issuer), Some(described)) = (text("issuer"), text("authorization_endpoint"))
            && described == endpoint
        {
            return oauth::Issuer::described(issuer, sends_iss(&doc));
        }
    }
    oauth::Issuer::undescribed(endpoint)
}

/// The client the gateway signs in as.
#[derive(Debug, Clone)]
pub struct Client {
    /// Its id.
    pub id: String,
    /// Its secret, when it has one.
    pub secret: Option<Secret>,
    /// How it authenticates at the token endpoint.
    pub method: TokenAuth,
    /// Whether the user gave it.
    pub preregistered: bool,
}

impl Client {
    /// A client the user stored, authenticating as the server allows.
    pub fn stored(grant: &Grant, server: &AuthServer) -> Result<Client, Error> {
        Ok(Client {
            id: grant.client_id.clone(),
            method: TokenAuth::choose(&server.auth_methods, grant.client_secret.is_some())?,
            secret: grant.client_secret.clone(),
            preregistered: true,
        })
    }

    /// The client a grant was made for, as it authenticated then.
    pub fn of(grant: &Grant) -> Client {
        Client {
            id: grant.client_id.clone(),
            secret: grant.client_secret.clone(),
            method: grant.auth_method,
            preregistered: grant.preregistered,
        }
    }

    /// A client named by its metadata document's URL (a public client).
    pub fn document(url: &str) -> Client {
        Client {
            id: url.to_owned(),
            secret: None,
            method: TokenAuth::None,
            preregistered: false,
        }
    }
}

/// Registers the gateway with `redirect_uri` (RFC 7591): a native app at a loopback
/// one (the command line's sign-in), a web app at the web UI's.
pub(crate) async fn register(
    server: &AuthServer,
    app: &str,
    redirect_uri: &str,
) -> Result<Client, Error> {
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(Error::NoClient(app.to_owned()));
    };
    // A public client when the server takes one; else one with a secret.
    let method = TokenAuth::choose(&server.auth_methods, false)
        .or_else(|_| TokenAuth::choose(&server.auth_methods, true))?;
    let body = json!({
        "client_name": "aai-gateway",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method.as_str(),
        "application_type": if redirect_uri.starts_with("http://127.0.0.1:") { "native" } else { "web" },
    });
    let (status, answer) =
        oauth::post_token_endpoint(endpoint, "application/json", body.to_string(), None).await?;
    let text = |k: &str| answer.get(k).and_then(Value::as_str).map(str::to_owned);
    let Some(id) = text("client_id").filter(|_| status.is_success()) else {
        let why = oauth::said(&answer);
        return Err(Error::Registration {
            status,
            why: if why.is_empty() && status.is_success() {
                ": the answer carries no client_id".to_owned()
            } else {
                why
            },
        });
    };
    if id.len() > MAX_CLIENT_ID || id.chars().any(char::is_control) {
        return Err(Error::Registration {
            status,
            why:
                ": the client_id it handed out is not usable (too long or with control characters)"
                    .to_owned(),
        });
    }
    // A registration for another redirect URI would send the code elsewhere: refused.
    if let Some(uris) = answer.get("redirect_uris").and_then(Value::as_array)
        && !uris.iter().any(|u| u.as_str() == Some(redirect_uri))
    {
        return Err(Error::Registration {
            status,
            why: ": it registered another redirect URI than the gateway's".to_owned(),
        });
    }
    let secret = text("client_secret")
        .filter(|s| !s.is_empty())
        .map(Secret::new);
    let method = match text("token_endpoint_auth_method").as_deref() {
        Some("client_secret_basic") => TokenAuth::ClientSecretBasic,
        Some("client_secret_post") => TokenAuth::ClientSecretPost,
        Some("none") => TokenAuth::None,
        _ => method,
    };
    Ok(Client {
        id,
        // A public client sends no secret even when it was given one.
        secret: secret.filter(|_| method != TokenAuth::None),
        method,
        preregistered: false,
    })
}

/// The scopes to ask for: what the server named (widened by step-ups), plus
/// `offline_access` when the authorization server lists it (for a refresh token).
pub(crate) fn scopes_for(named: Option<&[String]>, server: &AuthServer) -> Option<Vec<String>> {
    let mut scopes = named?.to_vec();
    if server
        .scopes_supported
        .iter()
        .any(|s| s == "offline_access")
        && !scopes.iter().any(|s| s == "offline_access")
    {
        scopes.push("offline_access".to_owned());
    }
    Some(scopes)
}

/// What an authorization request asks for.
pub(crate) struct Authorization<'a> {
    pub client: &'a Client,
    pub redirect_uri: &'a str,
    pub state: &'a str,
    /// The PKCE verifier (the request carries its S256 challenge).
    pub verifier: &'a str,
    pub resource: &'a str,
    pub scopes: Option<&'a [String]>,
}

impl Authorization<'_> {
    /// The URL of `server`'s authorization endpoint that asks for it.
    pub(crate) fn url(&self, server: &AuthServer) -> Result<reqwest::Url, Error> {
        let mut url =
            reqwest::Url::parse(&server.authorization_endpoint).map_err(|e| Error::BadUrl {
                what: "the authorization endpoint",
                url: crate::text::excerpt(&server.authorization_endpoint, 80),
                why: e.to_string(),
            })?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &self.client.id)
                .append_pair("redirect_uri", self.redirect_uri)
                .append_pair("state", self.state)
                .append_pair("code_challenge", &oauth::challenge(self.verifier))
                .append_pair("code_challenge_method", "S256")
                .append_pair("resource", self.resource);
            if let Some(scopes) = self.scopes.filter(|s| !s.is_empty()) {
                q.append_pair("scope", &scopes.join(" "));
            }
        }
        Ok(url)
    }
}

/// One authorization through the browser and the code exchange.
pub(crate) async fn authorize(
    server: &AuthServer,
    client: &Client,
    resource: &str,
    scopes: Option<&[String]>,
    listener: &tokio::net::TcpListener,
    open: &(dyn Fn(&str) + Sync),
    owner_of: oauth::OwnerOf,
) -> Result<Tokens, Error> {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let redirect_uri = redirect_uri(port);
    let state = oauth::random_token(32);
    let verifier = oauth::random_token(64);
    let url = Authorization {
        client,
        redirect_uri: &redirect_uri,
        state: &state,
        verifier: &verifier,
        resource,
        scopes,
    }
    .url(server)?;
    open(url.as_str());
    let expected = oauth::Expected {
        state: &state,
        issuer: &server.answers_as,
        authorization_url: url.as_str(),
        owner_of,
    };
    let answered = tokio::time::timeout(
        oauth::LOGIN_TIMEOUT,
        oauth::wait_for_code(listener, &expected),
    )
    .await
    .map_err(|_| oauth::Error::NobodySignedIn)??;
    let form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", answered.code.clone()),
        ("redirect_uri", redirect_uri),
        ("code_verifier", verifier),
        ("resource", resource.to_owned()),
    ];
    let tokens = exchange(&server.token_endpoint, client, form, None).await;
    answered.finish(tokens.is_ok()).await;
    Ok(tokens?)
}

/// Redeems an authorization `code` the user's browser brought to `redirect_uri` (a
/// sign-in this process did not wait for on a loopback port: the web UI's).
pub(crate) async fn redeem(
    server: &AuthServer,
    client: &Client,
    code: String,
    redirect_uri: &str,
    verifier: String,
    resource: &str,
) -> Result<Tokens, Error> {
    let form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", code),
        ("redirect_uri", redirect_uri.to_owned()),
        ("code_verifier", verifier),
        ("resource", resource.to_owned()),
    ];
    Ok(exchange(&server.token_endpoint, client, form, None).await?)
}

/// The loopback redirect URI for `port`.
pub(crate) fn redirect_uri(port: u16) -> String {
    format!("http://127.0.0.1:{port}/callback")
}

/// A token request authenticated as `client` is.
async fn exchange(
    endpoint: &str,
    client: &Client,
    mut form: Vec<(&str, String)>,
    old_refresh: Option<&Secret>,
) -> Result<Tokens, oauth::Error> {
    let mut basic = None;
    match (client.method, &client.secret) {
        (TokenAuth::ClientSecretBasic, Some(secret)) => {
            // RFC 6749 2.3.1: each part form-encoded before joining.
            let enc =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let pair = format!("{}:{}", enc(&client.id), enc(secret.expose()));
            basic = Some(Secret::new(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )));
        }
        (TokenAuth::ClientSecretPost, Some(secret)) => {
            form.push(("client_id", client.id.clone()));
            form.push(("client_secret", secret.expose().to_owned()));
        }
        _ => form.push(("client_id", client.id.clone())),
    }
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
        .finish();
    let (status, value) = oauth::post_token_endpoint(
        endpoint,
        "application/x-www-form-urlencoded",
        body,
        basic.as_ref(),
    )
    .await?;
    // A provider may echo what it was sent: the code, the verifier, the refresh token or
    // the secret never reach an error.
    let sent: Vec<String> = form
        .iter()
        .filter(|(k, _)| !matches!(*k, "grant_type" | "redirect_uri" | "resource" | "client_id"))
        .flat_map(|(_, v)| super::forms(v))
        .chain(basic.iter().flat_map(|b| super::forms(b.expose())))
        .collect();
    // Scrubbed whole, before anything is cut short (a cut secret would no longer match).
    let value = match value {
        Value::Object(_) => serde_json::from_str(&crate::text::scrub(&value.to_string(), &sent))
            .unwrap_or(Value::Null),
        other => other,
    };
    oauth::read_tokens(status, &value, old_refresh)
}

/// New tokens for a stored grant (its refresh token; a rotated one replaces it).
pub(crate) async fn refresh(grant: &Grant) -> Result<Tokens, oauth::Error> {
    let Some(refresh_token) = grant.tokens.as_ref().and_then(|t| t.refresh_token.clone()) else {
        return Err(oauth::Error::NoRefreshToken);
    };
    let client = Client::of(grant);
    let form = vec![
        ("grant_type", "refresh_token".to_owned()),
        ("refresh_token", refresh_token.expose().to_owned()),
        ("resource", grant.resource.clone()),
    ];
    exchange(&grant.token_endpoint, &client, form, Some(&refresh_token)).await
}

/// Discovery for a sign-in (what consent shows): the server's challenge and its resource
/// metadata. Only the server's own origin is contacted.
pub(crate) async fn prepare(url: &str) -> Result<Plan, Error> {
    let challenge = probe(url).await?;
    discover(url, challenge.as_ref()).await
}

/// One sign-in, once the user agreed to the plan's origins.
#[derive(Debug)]
pub(crate) struct SignIn<'a> {
    /// The app id (named in errors).
    pub app: &'a str,
    /// What discovery found.
    pub plan: &'a Plan,
    /// What was stored before: a client the user gave, scopes a call was refused for.
    pub before: Option<&'a Grant>,
    /// Config `oauthClientMetadataUrl`.
    pub client_document: Option<&'a str>,
    /// Who owns a connection to the loopback callback (`crate::peer` answers).
    pub owner_of: oauth::OwnerOf,
}

/// Signs in: the authorization server's metadata, the client, the browser (`open` shows
/// each authorization URL), the code exchange and the check with the server, widening the
/// scopes on a 403 `insufficient_scope` ([`MAX_SIGN_INS`] sign-ins at most; `step_up` is
/// told before each further one). Returns the grant to store.
pub(crate) async fn sign_in(
    s: SignIn<'_>,
    open: &(dyn Fn(&str) + Sync),
    step_up: &(dyn Fn() + Sync),
) -> Result<Grant, Error> {
    let server = authorization_server(s.plan).await?;
    if !server.pkce {
        return Err(Error::NoPkce);
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(oauth::Error::Listen)?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let client = client_for(
        &server,
        s.app,
        s.before,
        s.client_document,
        &redirect_uri(port),
    )
    .await?;
    let mut named = named_scopes(s.plan, s.before);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let scopes = scopes_for(named.as_deref(), &server);
        let tokens = authorize(
            &server,
            &client,
            &s.plan.resource,
            scopes.as_deref(),
            &listener,
            open,
            s.owner_of,
        )
        .await?;
        match check(&s.plan.server, &tokens.access_token).await? {
            Access::Granted => {
                return Ok(Grant::of(
                    client,
                    server,
                    s.plan.resource.clone(),
                    scopes,
                    Some(tokens),
                ));
            }
            Access::NeedsScope(challenge) => {
                let wider = widen(named.clone(), challenge.scopes());
                if wider == named || attempt == MAX_SIGN_INS {
                    return Err(Error::StillInsufficient {
                        scope: challenge.scope.unwrap_or_default(),
                    });
                }
                step_up();
                named = wider;
            }
        }
    }
}

/// The client a sign-in at `server` uses: the one the user stored (`before`, when
/// preregistered; refused when it is another authorization server's), else the gateway's
/// Client ID Metadata Document when the server takes them, else one registered now for
/// `redirect_uri`.
pub(crate) async fn client_for(
    server: &AuthServer,
    app: &str,
    before: Option<&Grant>,
    document: Option<&str>,
    redirect_uri: &str,
) -> Result<Client, Error> {
    match (before.filter(|g| g.preregistered), document) {
        // A client registered with one authorization server is not shown to another.
        (Some(g), _) if !g.issuer.is_empty() && g.issuer != server.issuer => {
            Err(Error::OtherIssuer {
                stored: origin(&g.issuer),
                named: origin(&server.issuer),
            })
        }
        (Some(g), _) => Client::stored(g, server),
        (None, Some(doc)) if server.client_metadata_documents => Ok(Client::document(doc)),
        (None, _) => register(server, app, redirect_uri).await,
    }
}

/// The scopes a sign-in asks for before any step-up: those the server named, and those a
/// call was refused for since the last sign-in (`before`'s, for the same resource).
pub(crate) fn named_scopes(plan: &Plan, before: Option<&Grant>) -> Option<Vec<String>> {
    let remembered = before
        .filter(|g| g.resource == plan.resource && !g.scopes.is_empty())
        .map(|g| g.scopes.clone());
    widen(plan.scopes.clone(), remembered)
}

/// The union of two scope lists, in order.
pub(crate) fn widen(scopes: Option<Vec<String>>, more: Option<Vec<String>>) -> Option<Vec<String>> {
    match (scopes, more) {
        (Some(mut a), Some(b)) => {
            for s in b {
                if !a.contains(&s) {
                    a.push(s);
                }
            }
            Some(a)
        }
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
#[path = "mcp_tests.rs"]
mod sign_in_tests;
#[cfg(test)]
mod tests;
