//! OAuth 2 for web apps: authorization code + PKCE (S256) + `state`, with the native-app
//! loopback redirect of RFC 8252 (`http://127.0.0.1:<ephemeral port>/callback`).
//!
//! `aai-gateway auth login <app>` prints the authorization URL on the terminal and opens
//! the callback listener's `/start` address with `$BROWSER` when set (a command; `%s`
//! stands for the address, else it is appended), else `xdg-open` / `open` / `start`: the
//! listener redirects its owner's browser to the authorization URL, so the `state` never
//! sits in a command line other users can read. It waits (5 minutes at most) for the
//! redirect, checks `state` and, per RFC 9207, `iss`, exchanges the code with the
//! verifier, and stores the tokens in the credential store. Calls use the access token and
//! refresh it a minute before it expires (halfway for short-lived tokens) and once after a
//! 401; a rotated refresh token replaces the old one. The client id comes from config
//! `apps.<id>.clientId`, else the descriptor's `oauth2.clientId` (public clients; no client
//! secret).
//!
//! The loopback callback serves only the gateway's own user, as the HTTP listener does:
//! the front door hands in how to ask the OS who owns a connection ([`OwnerOf`], which
//! `crate::peer` answers), and another user's connection is closed unread. Where the OS
//! cannot prove a connection's owner, `/callback` still takes it (the `state` proves the
//! answer), and `/start`, which reveals the `state`, does not. A request without this
//! sign-in's `state` (forged, stale, or a stray visit) gets an error page and the wait
//! goes on.
//!
//! Hand-written on purpose, not rmcp's `auth` (3.9) or the `oauth2` crate: rmcp's flow
//! always sends an RFC 8707 `resource` and assumes an MCP server, which web-app providers do
//! not expect, and logs the authorization code at debug level; `oauth2` has no RFC 9207
//! `iss` check and refuses token answers without `token_type`, which real providers send.
//! Neither has a loopback listener that serves only the gateway's own user, and the
//! app-credential exchange (`auth::exchange`) is not OAuth. What a crate would save (a PKCE
//! challenge, a form post) is smaller than the odd-provider handling and the secret
//! scrubbing kept anyway.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aai_descriptor::OAuth2;
use base64::Engine as _;
use serde_json::Value;
use sha2::Digest as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Secret;
use crate::error::{Code, GatewayError};

/// How long `auth login` waits for the browser to come back.
pub(crate) const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// How long the loopback callback waits for a connection's request.
const CALLBACK_READ: Duration = Duration::from_secs(3);

/// The path of the callback listener that sends its owner's browser on to the
/// authorization URL.
const START_PATH: &str = "/start";

/// Who owns a connection to the loopback callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A process of the gateway's own user.
    Me,
    /// A process of another user (its uid).
    Other(u32),
    /// The OS could not say.
    Unknown,
}

/// How the callback asks who owns the connection from `remote` (second) to its `local`
/// address (first): `crate::peer` answers; `auth` cannot ask it itself, as it sits below
/// the modules that run programs.
pub(crate) type OwnerOf = fn(
    std::net::SocketAddr,
    std::net::SocketAddr,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Owner> + Send>>;

/// The authorization server a callback's `iss` must name (RFC 9207).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issuer {
    /// Its issuer identifier (from its metadata), or, when no metadata is known, the
    /// origin of its authorization endpoint.
    id: String,
    /// Whether `id` is the issuer identifier itself (compared whole) rather than an origin.
    exact: bool,
    /// Whether its metadata says it sends `iss`
    /// (`authorization_response_iss_parameter_supported`): an answer without it is refused.
    required: bool,
}

impl Issuer {
    /// The issuer its metadata names, and whether the metadata says it sends `iss`.
    pub fn described(issuer: &str, sends_iss: bool) -> Issuer {
        Issuer {
            id: issuer.to_owned(),
            exact: true,
            required: sends_iss,
        }
    }

    /// An authorization server without known metadata: an `iss`, when sent, must be on the
    /// origin of its authorization endpoint.
    pub fn undescribed(authorization_endpoint: &str) -> Issuer {
        Issuer {
            id: super::mcp::origin(authorization_endpoint),
            exact: false,
            required: false,
        }
    }

    /// Whether an answer with this `iss` (or none) comes from this server.
    pub fn accepts(&self, iss: Option<&str>) -> bool {
        match iss {
            None => !self.required,
            Some(iss) if self.exact => iss == self.id,
            Some(iss) => {
                reqwest::Url::parse(iss).is_ok_and(|u| u.origin().ascii_serialization() == self.id)
            }
        }
    }
}

/// What the callback must see of one authorization request.
#[derive(Debug)]
pub(crate) struct Expected<'a> {
    /// The `state` sent.
    pub(crate) state: &'a str,
    /// The authorization server asked.
    pub(crate) issuer: &'a Issuer,
    /// The authorization URL (where `/start` sends the owner's browser).
    pub(crate) authorization_url: &'a str,
    /// Who owns a connection.
    pub(crate) owner_of: OwnerOf,
}

/// Tokens as stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tokens {
    /// Bearer token.
    #[serde(serialize_with = "super::secret::expose")]
    pub access_token: Secret,
    /// Refresh token, when the provider gave one.
    #[serde(serialize_with = "super::secret::expose_opt", default)]
    pub refresh_token: Option<Secret>,
    /// Unix time the access token expires (0: unknown).
    #[serde(default)]
    pub expires_at: u64,
    /// Unix time to refresh it: a minute before expiry, or halfway for tokens shorter
    /// than two minutes (0: never ahead of time).
    #[serde(default)]
    pub refresh_at: u64,
}

impl Tokens {
    /// Whether it is time to refresh the access token.
    pub fn expiring(&self) -> bool {
        self.refresh_at != 0 && now() >= self.refresh_at
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(crate) fn random_token(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the OS has randomness");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}

/// The PKCE S256 challenge of `verifier`.
pub(crate) fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()))
}

/// POSTs `body` to a token endpoint (OAuth or app-credential exchange) and returns the
/// status and the JSON answer (`null` when it is not JSON). No redirects are followed.
pub(crate) async fn post_token_endpoint(
    endpoint: &str,
    content_type: &str,
    body: String,
    authorization: Option<&Secret>,
) -> Result<(reqwest::StatusCode, Value), Error> {
    let client = crate::net::client(crate::net::Purpose::TokenEndpoint)?;
    let mut request = client
        .post(endpoint)
        .header("content-type", content_type)
        .header("accept", "application/json")
        .body(body);
    if let Some(authorization) = authorization {
        let mut value =
            reqwest::header::HeaderValue::from_str(authorization.expose()).map_err(|_| {
                Error::Unreachable("the client credentials are not valid in a header".to_owned())
            })?;
        value.set_sensitive(true);
        request = request.header("authorization", value);
    }
    let response = request
        .send()
        .await
        .map_err(|e| Error::Unreachable(crate::net::describe(&e)))?;
    let status = response.status();
    // A token answer is small; a huge one is refused, never buffered.
    let body = crate::net::read_capped(response, crate::net::MAX_TOKEN_RESPONSE)
        .await
        .map_err(Error::Answer)?;
    let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Ok((status, value))
}

/// Runs the browser sign-in and returns the tokens. `open` shows the URL to the user;
/// `owner_of` says who owns each connection to the loopback callback.
pub(crate) async fn login(
    oauth: &OAuth2,
    client_id: &str,
    open: impl FnOnce(&str),
    owner_of: OwnerOf,
) -> Result<Tokens, Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(Error::Listen)?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let state = random_token(32);
    let verifier = random_token(64);
    let mut url = reqwest::Url::parse(&oauth.authorization_endpoint).map_err(Error::Endpoint)?;
    let issuer = super::mcp::issuer_of(&oauth.authorization_endpoint).await;
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", &redirect_uri)
        .append_pair("scope", &oauth.scopes.join(" "))
        .append_pair("state", &state)
        .append_pair("code_challenge", &challenge(&verifier))
        .append_pair("code_challenge_method", "S256");
    open(url.as_str());
    let expected = Expected {
        state: &state,
        issuer: &issuer,
        authorization_url: url.as_str(),
        owner_of,
    };
    let answered = tokio::time::timeout(LOGIN_TIMEOUT, wait_for_code(&listener, &expected))
        .await
        .map_err(|_| Error::NobodySignedIn)??;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", answered.code.as_str()),
        ("redirect_uri", redirect_uri.as_str()),
        ("client_id", client_id),
        ("code_verifier", verifier.as_str()),
    ];
    let tokens = token_request(&oauth.token_endpoint, &form, None).await;
    answered.finish(tokens.is_ok()).await;
    tokens
}

/// Why tokens could not be obtained.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The token endpoint answered, and refused.
    #[error("the token endpoint refused (HTTP {status}){why}")]
    Refused {
        /// Its HTTP status.
        status: reqwest::StatusCode,
        /// `: error: description` as it said, or empty.
        why: String,
    },
    /// A refresh was needed but no refresh token is stored.
    #[error("the access token expired and there is no refresh token")]
    NoRefreshToken,
    /// The shared client could not be built.
    #[error("cannot start the HTTP client: {0}")]
    Client(#[from] crate::net::Error),
    /// The token endpoint could not be reached.
    #[error("the token endpoint is unreachable: {0}")]
    Unreachable(String),
    /// Its answer could not be read whole.
    #[error("the token endpoint's answer: {0}")]
    Answer(crate::net::BodyError),
    /// No loopback port for the redirect.
    #[error("cannot listen for the sign-in redirect: {0}")]
    Listen(std::io::Error),
    /// The descriptor's authorization endpoint is not a URL.
    #[error("authorizationEndpoint is invalid: {0}")]
    Endpoint(url::ParseError),
    /// Nobody finished the sign-in in time.
    #[error("nobody completed the sign-in within 5 minutes")]
    NobodySignedIn,
    /// Accepting the redirect failed.
    #[error("the sign-in redirect failed: {0}")]
    Redirect(std::io::Error),
    /// The redirect did not come from the authorization server asked (RFC 9207 `iss`).
    #[error(
        "the sign-in answer came from another authorization server than the one asked (its `iss` is {found}, expected {expected}); refused"
    )]
    WrongIssuer {
        /// What the answer said (`none` when it said nothing), cut short.
        found: String,
        /// The issuer asked.
        expected: String,
    },
    /// The provider sent an error to the redirect.
    #[error("the provider refused: {0}")]
    ProviderRefused(String),
    /// The redirect carried no code.
    #[error("the sign-in redirect carried no code")]
    NoCode,
}

impl Error {
    /// Whether only a new sign-in can help.
    pub fn needs_sign_in(&self) -> bool {
        matches!(self, Error::Refused { .. } | Error::NoRefreshToken)
    }
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match e {
            Error::Refused { .. }
            | Error::WrongIssuer { .. }
            | Error::ProviderRefused(_)
            | Error::NoCode => Code::AuthDenied,
            Error::NoRefreshToken => Code::AuthExpired,
            Error::Unreachable(_) | Error::Answer(_) => Code::ServiceUnavailable,
            Error::Endpoint(_) => Code::AaiJsonInvalid,
            Error::NobodySignedIn => Code::Timeout,
            Error::Client(_) | Error::Listen(_) | Error::Redirect(_) => Code::AutomationFailed,
        };
        GatewayError::new(code, e.to_string())
    }
}

/// Exchanges the refresh token for new tokens (keeping the old refresh token when the
/// provider does not rotate it).
pub(crate) async fn refresh(
    oauth: &OAuth2,
    client_id: &str,
    tokens: &Tokens,
) -> Result<Tokens, Error> {
    let Some(refresh_token) = &tokens.refresh_token else {
        return Err(Error::NoRefreshToken);
    };
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token.expose()),
        ("client_id", client_id),
    ];
    token_request(&oauth.token_endpoint, &form, Some(refresh_token)).await
}

async fn token_request(
    endpoint: &str,
    form: &[(&str, &str)],
    old_refresh: Option<&Secret>,
) -> Result<Tokens, Error> {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let (status, value) =
        post_token_endpoint(endpoint, "application/x-www-form-urlencoded", body, None).await?;
    // A provider may echo what it was sent: the code, the verifier and the refresh token
    // never reach an error (scrubbed whole, before anything is cut short).
    let sent: Vec<String> = form
        .iter()
        .filter(|(k, _)| !matches!(*k, "grant_type" | "redirect_uri" | "client_id"))
        .flat_map(|(_, v)| super::forms(v))
        .collect();
    let value =
        serde_json::from_str(&crate::text::scrub(&value.to_string(), &sent)).unwrap_or(Value::Null);
    read_tokens(status, &value, old_refresh)
}

/// `: error: description` as a provider said it, or empty.
pub(crate) fn said(value: &Value) -> String {
    let text = |k: &str| value.get(k).and_then(Value::as_str);
    let why = [text("error"), text("error_description")]
        .into_iter()
        .flatten()
        .map(|t| printable(t, 200))
        .collect::<Vec<_>>()
        .join(": ");
    if why.is_empty() {
        String::new()
    } else {
        format!(": {why}")
    }
}

/// A provider's text as it may be shown on a terminal: no control characters (escape
/// sequences, line breaks), at most `max` characters.
pub(crate) fn printable(text: &str, max: usize) -> String {
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    crate::text::excerpt(&clean, max)
}

/// The tokens of a token endpoint's answer, or why there are none.
pub(crate) fn read_tokens(
    status: reqwest::StatusCode,
    value: &Value,
    old_refresh: Option<&Secret>,
) -> Result<Tokens, Error> {
    let text = |k: &str| value.get(k).and_then(Value::as_str);
    match text("access_token") {
        Some(access) if status.is_success() => {
            let lifetime = super::lifetime(value.get("expires_in")).map(|d| d.as_secs());
            let issued = now();
            Ok(Tokens {
                access_token: Secret::new(access),
                refresh_token: text("refresh_token")
                    .map(Secret::new)
                    .or_else(|| old_refresh.cloned()),
                expires_at: lifetime.map_or(0, |l| issued + l),
                refresh_at: lifetime.map_or(0, |l| issued + l - (l / 2).min(60)),
            })
        }
        _ => Err(Error::Refused {
            status,
            why: said(value),
        }),
    }
}

/// The address a browser may open for the authorization URL `url`: the `/start` of its
/// loopback callback, which redirects its owner there, so that the `state` stays out of
/// command lines other users can read. Only where the OS proves who connects: elsewhere
/// the callback never serves `/start`.
pub(crate) fn start_address(url: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).ok()?;
    let (_, redirect) = url.query_pairs().find(|(k, _)| k == "redirect_uri")?;
    let mut start = reqwest::Url::parse(&redirect).ok()?;
    let loopback = start.scheme() == "http"
        && start.host_str() == Some("127.0.0.1")
        && start.path() == "/callback";
    if !loopback {
        return None;
    }
    start.set_path(START_PATH);
    start.set_query(None);
    Some(start.to_string())
}

/// What a request to `/callback` is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Not this sign-in's answer (no or another `state`): shown an error page, the wait
    /// goes on.
    Ignored,
    /// This sign-in's answer: its code, or why it failed.
    Answer(Result<String, AnswerError>),
}

/// Why this sign-in's answer carries no usable code.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AnswerError {
    /// `iss` names another server, or is missing where it must be.
    Issuer(Option<String>),
    /// The provider refused (`error`, `error_description`).
    Refused(String),
    /// No `code`.
    NoCode,
}

/// Judges the query of a request to `/callback` (RFC 6749 4.1.2, RFC 9207).
pub(crate) fn judge(query: &str, expected: &Expected<'_>) -> Verdict {
    let params: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let state = get("state");
    // Compared in constant time (the length still shows; it is fixed).
    let ours = state.as_deref().is_some_and(|s| {
        s.len() == expected.state.len()
            && s.bytes()
                .zip(expected.state.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    });
    if !ours {
        return Verdict::Ignored;
    }
    let iss = get("iss");
    if !expected.issuer.accepts(iss.as_deref()) {
        return Verdict::Answer(Err(AnswerError::Issuer(iss)));
    }
    Verdict::Answer(if let Some(error) = get("error") {
        let detail = get("error_description")
            .map(|d| format!("{error}: {d}"))
            .unwrap_or(error);
        Err(AnswerError::Refused(printable(&detail, 300)))
    } else if let Some(code) = get("code") {
        Ok(code)
    } else {
        Err(AnswerError::NoCode)
    })
}

/// The authorization code a browser brought, with that browser's request still open: it
/// is told how the sign-in ended only once the code was exchanged ([`Answered::finish`]).
#[derive(Debug)]
pub(crate) struct Answered {
    /// The code.
    pub code: String,
    socket: tokio::net::TcpStream,
}

impl Answered {
    /// Tells the browser whether the sign-in ended with tokens.
    pub(crate) async fn finish(mut self, signed_in: bool) {
        let page = if signed_in {
            "Signed in. You can close this tab and go back to your agent."
        } else {
            "The sign-in did not complete: the code could not be exchanged for tokens. Your agent was told why; you can close this tab."
        };
        answer_page(&mut self.socket, "200 OK", page).await;
    }
}

/// Accepts connections until one brings `/callback` with this sign-in's `state`; answers
/// each (a code's browser only once it is exchanged: [`Answered`]). Another user's
/// connections are closed unread; `/start` sends the owner's browser to the
/// authorization URL.
pub(crate) async fn wait_for_code(
    listener: &tokio::net::TcpListener,
    expected: &Expected<'_>,
) -> Result<Answered, Error> {
    loop {
        let (mut socket, remote) = listener.accept().await.map_err(Error::Redirect)?;
        let Ok(local) = socket.local_addr() else {
            continue;
        };
        let proven = match (expected.owner_of)(local, remote).await {
            Owner::Me => true,
            Owner::Other(uid) => {
                tracing::warn!(%remote, uid, "refused a connection of another user to the sign-in callback");
                continue;
            }
            // The `state` proves an answer; nothing that reveals it is served.
            Owner::Unknown => false,
        };
        // A connection that sends nothing (a browser's preconnect) is dropped after a few
        // seconds, so the redirect behind it is read.
        let Some(target) = request_target(&mut socket).await else {
            continue;
        };
        let (status, page) = if target == START_PATH {
            if proven {
                let _ = socket
                    .write_all(
                        format!(
                            "HTTP/1.1 303 See Other\r\nlocation: {}\r\ncache-control: no-store\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                            expected.authorization_url
                        )
                        .as_bytes(),
                    )
                    .await;
                continue;
            }
            (
                "403 Forbidden",
                "This sign-in cannot be started here; open the address the terminal shows.",
            )
        } else if let Some(query) = target.strip_prefix("/callback?") {
            match judge(query, expected) {
                Verdict::Ignored => (
                    "400 Bad Request",
                    "This answer is not for the sign-in in progress; it was ignored.",
                ),
                Verdict::Answer(answer) => {
                    let (page, result) = match answer {
                        Ok(code) => return Ok(Answered { code, socket }),
                        Err(AnswerError::Issuer(found)) => (
                            "The sign-in answer came from another authorization server; it was refused.",
                            Err(Error::WrongIssuer {
                                found: found.map_or_else(
                                    || "none".to_owned(),
                                    |f| format!("`{}`", printable(&f, 100)),
                                ),
                                expected: format!("`{}`", printable(&expected.issuer.id, 100)),
                            }),
                        ),
                        Err(AnswerError::Refused(detail)) => (
                            "The sign-in was not completed. You can close this tab.",
                            Err(Error::ProviderRefused(detail)),
                        ),
                        Err(AnswerError::NoCode) => {
                            ("The sign-in answer carried no code.", Err(Error::NoCode))
                        }
                    };
                    answer_page(&mut socket, "200 OK", page).await;
                    return result;
                }
            }
        } else {
            ("404 Not Found", "Nothing is here.")
        };
        answer_page(&mut socket, status, page).await;
    }
}

/// The target of the request on `socket` (`/callback?…`), read within [`CALLBACK_READ`].
async fn request_target(socket: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut filled = 0;
    let read_line = async {
        // The request line may come in pieces; the rest of the request is not needed.
        while filled < buf.len() {
            let n = socket.read(&mut buf[filled..]).await.ok()?;
            if n == 0 {
                break;
            }
            filled += n;
            if buf[..filled].windows(2).any(|w| w == b"\r\n") {
                break;
            }
        }
        Some(())
    };
    tokio::time::timeout(CALLBACK_READ, read_line)
        .await
        .ok()??;
    let request = String::from_utf8_lossy(&buf[..filled]);
    let mut words = request.split_whitespace();
    (words.next() == Some("GET")).then_some(())?;
    words.next().map(str::to_owned)
}

/// Answers with a small page saying `text`, and closes.
async fn answer_page(socket: &mut tokio::net::TcpStream, status: &str, text: &str) {
    let html =
        format!("<!doctype html><meta charset=utf-8><title>aai-gateway</title><p>{text}</p>");
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncache-control: no-store\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        html.len()
    );
    let _ = socket.write_all(head.as_bytes()).await;
    let _ = socket.write_all(html.as_bytes()).await;
}

#[cfg(test)]
#[path = "oauth_tests.rs"]
mod tests;
