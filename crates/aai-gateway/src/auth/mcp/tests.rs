//! Tests of MCP authorization: challenges, resources, scopes, and the probe of a
//! scripted loopback server.

use super::*;

#[test]
fn challenges_are_read_like_the_specification_writes_them() {
    let c = Challenge::parse(
        r#"Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp""#,
    );
    assert!(c.insufficient_scope());
    assert_eq!(c.scopes().unwrap(), ["files:read", "files:write"]);
    assert_eq!(
        c.resource_metadata.as_deref(),
        Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
    );
    // Another scheme first, unquoted values, escapes, odd spacing.
    let c = Challenge::parse(r#"Basic realm="x", bearer  scope=read , error="a\"b""#);
    assert_eq!(c.scope.as_deref(), Some("read"));
    assert_eq!(c.error.as_deref(), Some("a\"b"));
    // Hostile or broken values give what could be read, never a panic.
    for bad in [
        "",
        "Bearer",
        "Bearer =",
        "Bearer scope=\"unclosed",
        "Bearerx scope=a",
        "Bearer ,,,",
        "Bearer é=\"ü",
    ] {
        let _ = Challenge::parse(bad);
    }
    assert_eq!(Challenge::parse("Bearerx scope=a"), Challenge::default());
    // "bearer" inside another scheme's quoted text is not the scheme.
    let c = Challenge::parse(
        r#"Basic realm="use a bearer token please", Bearer resource_metadata="https://a/x", scope="mcp""#,
    );
    assert_eq!(c.resource_metadata.as_deref(), Some("https://a/x"));
    // Over-long values are not believed.
    let long = format!("Bearer scope=\"{}\"", "s ".repeat(5000));
    assert_eq!(Challenge::parse(&long).scope, None);
    assert_eq!(
        Challenge::parse("Bearer scope=\"unclosed").scope.as_deref(),
        Some("unclosed")
    );
}

#[test]
fn a_resource_covers_its_own_paths_only() {
    assert!(covers(
        "http://localhost:3000/mcp",
        "http://localhost:3000/mcp"
    ));
    assert!(covers("http://localhost:3000", "http://localhost:3000/mcp"));
    assert!(covers(
        "http://localhost:3000/",
        "http://localhost:3000/mcp/"
    ));
    assert!(!covers(
        "https://evil.example.com/mcp",
        "http://localhost:3000/mcp"
    ));
    assert!(!covers(
        "http://localhost:3000/mc",
        "http://localhost:3000/mcp"
    ));
    assert!(!covers(
        "http://localhost:3001/mcp",
        "http://localhost:3000/mcp"
    ));
    assert!(!covers("not a url", "http://localhost:3000/mcp"));
}

#[test]
fn token_endpoint_authentication_follows_the_server() {
    let l = |m: &[&str]| m.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        TokenAuth::choose(&l(&["none"]), false).unwrap(),
        TokenAuth::None
    );
    assert_eq!(
        TokenAuth::choose(&l(&["client_secret_post"]), true).unwrap(),
        TokenAuth::ClientSecretPost
    );
    assert_eq!(
        TokenAuth::choose(&[], true).unwrap(),
        TokenAuth::ClientSecretBasic
    );
    assert!(TokenAuth::choose(&l(&["private_key_jwt"]), true).is_err());
    assert!(TokenAuth::choose(&l(&["client_secret_basic"]), false).is_err());
}

#[test]
fn step_ups_widen_the_scopes_in_order() {
    let s = |v: &[&str]| Some(v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
    assert_eq!(widen(s(&["a"]), s(&["a", "b"])), s(&["a", "b"]));
    assert_eq!(widen(None, s(&["b"])), s(&["b"]));
    assert_eq!(widen(s(&["a"]), None), s(&["a"]));
}

/// A scripted MCP server on loopback: each request (its head and body) gets
/// `answer(request)`, a status line, extra header lines and a body. Returns its `/mcp`
/// URL and the requests it saw.
async fn scripted(
    answer: fn(&str) -> (&'static str, &'static str, &'static str),
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                let head_end = loop {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    if let Some(i) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&request[..head_end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                while request.len() < head_end + length {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        break;
                    }
                    request.extend_from_slice(&buf[..n]);
                }
                let text = String::from_utf8_lossy(&request).into_owned();
                let (status, headers, body) = answer(&text);
                log.lock().unwrap().push(text);
                let reply = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            });
        }
    });
    (url, seen)
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}"#;

fn authorized(request: &str) -> bool {
    request
        .to_ascii_lowercase()
        .contains("\r\nauthorization: bearer ")
}

#[tokio::test]
async fn a_server_that_lets_initialize_through_is_asked_for_its_challenge() {
    // As the specification's step-up example: the handshake needs no token, every other
    // request does, and its challenge names the scope to ask for first.
    let (url, seen) = scripted(|r| {
        if r.starts_with("DELETE") {
            ("200 OK", "", "")
        } else if r.contains(r#""method":"initialize""#) {
            ("200 OK", "mcp-session-id: s-1\r\n", INITIALIZED)
        } else if r.contains("notifications/") {
            ("202 Accepted", "", "")
        } else if !authorized(r) {
            (
                "401 Unauthorized",
                "www-authenticate: Bearer scope=\"mcp:basic\", resource_metadata=\"http://127.0.0.1/.well-known/oauth-protected-resource/mcp\"\r\n",
                r#"{"error":"invalid_token"}"#,
            )
        } else {
            ("200 OK", "", r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#)
        }
    })
    .await;
    let challenge = probe(&url)
        .await
        .unwrap()
        .expect("the listing is challenged");
    assert_eq!(challenge.scopes().unwrap(), ["mcp:basic"]);
    let seen = seen.lock().unwrap().clone();
    // In the session the handshake opened, which is closed after; never with a token.
    let listing = seen.iter().find(|r| r.contains("tools/list")).unwrap();
    assert!(listing.to_ascii_lowercase().contains("mcp-session-id: s-1"));
    assert!(seen.iter().any(|r| r.starts_with("DELETE")));
    assert!(!seen.iter().any(|r| authorized(r)));
}

#[tokio::test]
async fn a_refused_handshake_is_the_challenge_and_an_open_server_has_none() {
    // A server that refuses `initialize` is not asked anything else.
    let (url, seen) = scripted(|_| {
        (
            "401 Unauthorized",
            "www-authenticate: Bearer scope=\"files:read\"\r\n",
            "{}",
        )
    })
    .await;
    assert_eq!(
        probe(&url).await.unwrap().unwrap().scope.as_deref(),
        Some("files:read")
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    // A 2026-07-28 server answers an `initialize` with 400, without a session; its
    // listing is still asked, and here it needs no token.
    let (url, seen) = scripted(|r| {
        if r.contains(r#""method":"initialize""#) {
            ("400 Bad Request", "", r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"Missing MCP-Protocol-Version header"}}"#)
        } else {
            ("200 OK", "", r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#)
        }
    })
    .await;
    assert_eq!(probe(&url).await.unwrap(), None);
    assert_eq!(seen.lock().unwrap().len(), 2);
}
