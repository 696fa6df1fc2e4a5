//! OAuth 2 for web apps: authorization code + PKCE (S256) + `state`, with the native-app
//! loopback redirect of RFC 8252 (`http://127.0.0.1:<ephemeral port>/callback`).
//!
//! `aai-gateway auth login <app>` opens the authorization URL with `$BROWSER` when set (a
//! command; `%s` stands for the URL, else it is appended), else `xdg-open` / `open` /
//! `start`, waits (5 minutes at most) for the redirect, checks `state`, exchanges the code
//! with the verifier, and stores the tokens in the credential store. Calls use the access
//! token and refresh it a minute before it expires (halfway for short-lived tokens) and
//! once after a 401; a rotated refresh
//! token replaces the old one. The client id comes from config `apps.<id>.clientId`, else
//! the descriptor's `oauth2.clientId` (public clients; no client secret).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aai_descriptor::OAuth2;
use base64::Engine as _;
use serde_json::Value;
use sha2::Digest as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Secret;
use crate::error::{Code, GatewayError};

/// How long `auth login` waits for the browser to come back.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// How long the loopback callback waits for a connection's request.
const CALLBACK_READ: Duration = Duration::from_secs(3);

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
pub fn challenge(verifier: &str) -> String {
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

/// Runs the browser sign-in and returns the tokens. `open` shows the URL to the user.
pub async fn login(
    oauth: &OAuth2,
    client_id: &str,
    open: impl FnOnce(&str),
) -> Result<Tokens, Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(Error::Listen)?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let state = random_token(32);
    let verifier = random_token(64);
    let mut url = reqwest::Url::parse(&oauth.authorization_endpoint).map_err(Error::Endpoint)?;
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", &redirect_uri)
        .append_pair("scope", &oauth.scopes.join(" "))
        .append_pair("state", &state)
        .append_pair("code_challenge", &challenge(&verifier))
        .append_pair("code_challenge_method", "S256");
    open(url.as_str());
    let code = tokio::time::timeout(LOGIN_TIMEOUT, wait_for_code(&listener, &state))
        .await
        .map_err(|_| Error::NobodySignedIn)??;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", redirect_uri.as_str()),
        ("client_id", client_id),
        ("code_verifier", verifier.as_str()),
    ];
    token_request(&oauth.token_endpoint, &form, None).await
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
    /// The redirect's `state` is not ours.
    #[error("the sign-in redirect carried the wrong `state`")]
    WrongState,
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
            | Error::WrongState
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
pub async fn refresh(oauth: &OAuth2, client_id: &str, tokens: &Tokens) -> Result<Tokens, Error> {
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

/// Accepts connections until one brings `/callback` with our `state`; answers each.
pub(crate) async fn wait_for_code(
    listener: &tokio::net::TcpListener,
    state: &str,
) -> Result<String, Error> {
    loop {
        let (mut socket, _) = listener.accept().await.map_err(Error::Redirect)?;
        let mut buf = vec![0u8; 16 * 1024];
        // A connection that sends nothing (a browser's preconnect) is dropped after a few
        // seconds, so the redirect behind it is read.
        let n = match tokio::time::timeout(CALLBACK_READ, socket.read(&mut buf)).await {
            Ok(Ok(n)) => n,
            _ => continue,
        };
        let request = String::from_utf8_lossy(&buf[..n]);
        let target = request.split_whitespace().nth(1).unwrap_or("");
        let Some(query) = target.strip_prefix("/callback?") else {
            let _ = socket
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        };
        let params: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let (page, result) = if get("state").as_deref() != Some(state) {
            (
                "The sign-in answer did not match this request; try again.",
                Err(Error::WrongState),
            )
        } else if let Some(error) = get("error") {
            let detail = get("error_description")
                .map(|d| format!("{error}: {d}"))
                .unwrap_or(error);
            let detail = printable(&detail, 300);
            (
                "The sign-in was not completed. You can close this tab.",
                Err(Error::ProviderRefused(detail)),
            )
        } else if let Some(code) = get("code") {
            (
                "Signed in. You can close this tab and go back to your agent.",
                Ok(code),
            )
        } else {
            ("The sign-in answer carried no code.", Err(Error::NoCode))
        };
        let html =
            format!("<!doctype html><meta charset=utf-8><title>aai-gateway</title><p>{page}</p>");
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            html.len()
        );
        let _ = socket.write_all(head.as_bytes()).await;
        let _ = socket.write_all(html.as_bytes()).await;
        return result;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn s256_matches_rfc_7636() {
        // RFC 7636, appendix B.
        assert_eq!(
            super::challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let a = super::random_token(64);
        assert!(a.len() >= 43 && a.len() <= 128 && a != super::random_token(64));
    }
}
