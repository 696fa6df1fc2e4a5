//! What a sign-in asks the MCP server itself, over its own transport: whether it wants a
//! token and which scope ([`probe`], before sign-in), and whether it serves a fresh token
//! ([`check`], after the code exchange).

use serde_json::json;

use super::{Challenge, Error, PROTOCOL, fetchable};
use crate::auth::Secret;

/// The JSON-RPC `initialize` request the sign-in sends.
fn initialize_body() -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "aai-gateway", "version": env!("CARGO_PKG_VERSION")},
        },
    })
    .to_string()
}

/// A POST of JSON-RPC to the server, with a token when there is one.
async fn post_mcp(
    url: &reqwest::Url,
    body: String,
    token: Option<&Secret>,
    session: Option<&str>,
) -> Result<reqwest::Response, Error> {
    let client =
        crate::net::client(crate::net::Purpose::TokenEndpoint).map_err(|e| Error::Fetch {
            what: "the MCP server",
            url: crate::net::redact(url),
            why: e.to_string(),
        })?;
    let mut request = client
        .post(url.clone())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(token) = token {
        request = request.header("authorization", bearer(token)?);
    }
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", PROTOCOL);
    }
    request.send().await.map_err(|e| Error::Fetch {
        what: "the MCP server",
        url: crate::net::redact(url),
        why: crate::net::describe(&e),
    })
}

/// The `Authorization` value of a token, marked sensitive.
fn bearer(token: &Secret) -> Result<reqwest::header::HeaderValue, Error> {
    let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", token.expose()))
        .map_err(|_| Error::TokenRefused(0))?;
    value.set_sensitive(true);
    Ok(value)
}

fn challenge_of(response: &reqwest::Response) -> Challenge {
    response
        .headers()
        .get_all("www-authenticate")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(Challenge::parse)
        .find(|c| *c != Challenge::default())
        .unwrap_or_default()
}

/// Asks the server at `url` without a token: its challenge when it wants one. A server
/// may let `initialize` through without a token (or answer it with another error, as a
/// server of the 2026-07-28 revision does) and challenge the first request that needs
/// one, with the scope it needs: then `tools/list` is asked too, in the session
/// `initialize` opened (closed after).
pub(crate) async fn probe(url: &str) -> Result<Option<Challenge>, Error> {
    let parsed = fetchable("the MCP server URL", url)?;
    let refused = |r: &reqwest::Response| matches!(r.status().as_u16(), 401 | 403);
    let first = post_mcp(&parsed, initialize_body(), None, None).await?;
    if refused(&first) {
        return Ok(Some(challenge_of(&first)));
    }
    let session = session_of(&first);
    drop(first);
    if session.is_some() {
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        drop(post_mcp(&parsed, initialized.to_string(), None, session.as_deref()).await?);
    }
    let listed = post_mcp(&parsed, list_body(), None, session.as_deref()).await?;
    let challenge = refused(&listed).then(|| challenge_of(&listed));
    drop(listed);
    close_session(&parsed, session, None).await;
    Ok(challenge)
}

/// The session id a response opened, if any.
fn session_of(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The JSON-RPC `tools/list` request the sign-in's checks send.
fn list_body() -> String {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}).to_string()
}

/// Ends a session the checks opened (best effort: the server may not support it).
async fn close_session(server: &reqwest::Url, session: Option<String>, token: Option<&Secret>) {
    let Some(session) = session else { return };
    let Ok(client) = crate::net::client(crate::net::Purpose::TokenEndpoint) else {
        return;
    };
    let mut request = client
        .delete(server.clone())
        .header("mcp-session-id", session);
    if let Some(token) = token {
        let Ok(value) = bearer(token) else { return };
        request = request.header("authorization", value);
    }
    let _ = request.send().await;
}

/// What the server says of a token.
#[derive(Debug)]
pub(crate) enum Access {
    /// It serves `initialize` and `tools/list` with it.
    Granted,
    /// It wants more scopes (403 `insufficient_scope`).
    NeedsScope(Challenge),
}

/// Checks a fresh token against the server: `initialize`, `notifications/initialized` and
/// `tools/list` in one session (closed after).
pub(crate) async fn check(url: &str, token: &Secret) -> Result<Access, Error> {
    let server = fetchable("the MCP server URL", url)?;
    let verdict = |response: &reqwest::Response| -> Result<Option<Access>, Error> {
        match response.status().as_u16() {
            403 => {
                let challenge = challenge_of(response);
                if challenge.insufficient_scope() {
                    Ok(Some(Access::NeedsScope(challenge)))
                } else {
                    Err(Error::TokenRefused(403))
                }
            }
            401 => Err(Error::TokenRefused(401)),
            _ => Ok(None),
        }
    };
    let first = post_mcp(&server, initialize_body(), Some(token), None).await?;
    if let Some(access) = verdict(&first)? {
        return Ok(access);
    }
    let session = session_of(&first);
    drop(first);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let sent = post_mcp(
        &server,
        initialized.to_string(),
        Some(token),
        session.as_deref(),
    )
    .await?;
    if let Some(access) = verdict(&sent)? {
        return Ok(access);
    }
    drop(sent);
    let listed = post_mcp(&server, list_body(), Some(token), session.as_deref()).await?;
    let access = verdict(&listed)?;
    drop(listed);
    close_session(&server, session, Some(token)).await;
    Ok(access.unwrap_or(Access::Granted))
}
