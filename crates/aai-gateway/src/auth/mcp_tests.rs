//! The sign-in end to end: discovery from the server's 401, the authorization server's
//! metadata, registration, the browser step, the code exchange, the check with the server,
//! step-up, and refreshing the stored tokens. The MCP server and its authorization server
//! are scripted peers on loopback, each on its own origin; the test plays the browser.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::{Error, Grant, SignIn, TokenAuth, prepare, sign_in};
use crate::auth::oauth::{self, Owner, Tokens};
use crate::auth::store::{Credential, Store};
use crate::auth::{Authenticator, Secret};
use crate::error::{Code, GatewayError};

/// The app id of the server signed in to.
const APP: &str = "files";
/// How long any one test may wait for the sign-in.
const BOUND: Duration = Duration::from_secs(5);
/// The answer to `initialize`.
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"files","version":"1"}}}"#;

/// One request a peer received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    /// The query's pairs, in order.
    query: Vec<(String, String)>,
    /// Header names in lower case.
    headers: BTreeMap<String, String>,
    body: String,
}

impl Seen {
    fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn form(&self) -> BTreeMap<String, String> {
        url::form_urlencoded::parse(self.body.as_bytes())
            .into_owned()
            .collect()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// `POST /token`, `GET /authorize`, …
    fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// What a peer answers.
struct Reply {
    status: &'static str,
    headers: Vec<(&'static str, String)>,
    body: String,
}

fn reply_json(status: &'static str, body: Value) -> Reply {
    Reply {
        status,
        headers: vec![("content-type", "application/json".to_owned())],
        body: body.to_string(),
    }
}

fn reply_empty(status: &'static str) -> Reply {
    Reply {
        status,
        headers: Vec::new(),
        body: String::new(),
    }
}

type Log = Arc<Mutex<Vec<Seen>>>;
type Answer = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// Serves HTTP/1.1 on `listener`, one request a connection: each is logged, then answered.
async fn serve(listener: tokio::net::TcpListener, log: Log, answer: Answer) {
    while let Ok((mut socket, _)) = listener.accept().await {
        let (log, answer) = (log.clone(), answer.clone());
        tokio::spawn(async move {
            let Some(seen) = read_request(&mut socket).await else {
                return;
            };
            let reply = answer(&seen);
            log.lock().unwrap().push(seen);
            let mut head = format!("HTTP/1.1 {}\r\n", reply.status);
            for (name, value) in &reply.headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str(&format!(
                "content-length: {}\r\nconnection: close\r\n\r\n",
                reply.body.len()
            ));
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(reply.body.as_bytes()).await;
        });
    }
}

/// Reads one request: its head, then as much body as `content-length` says.
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        request.extend_from_slice(&buf[..n]);
        if let Some(i) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&request[..head_end]).into_owned();
    let mut lines = head.lines();
    let mut words = lines.next()?.split_whitespace();
    let (method, target) = (words.next()?.to_owned(), words.next()?.to_owned());
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length = headers
        .get("content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    while request.len() < head_end + length {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    Some(Seen {
        method,
        path: path.to_owned(),
        query: url::form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect(),
        headers,
        body: String::from_utf8_lossy(&request[head_end..]).into_owned(),
    })
}

/// How the peers behave, where a test wants them to misbehave.
#[derive(Debug, Clone, Default)]
struct Script {
    /// The issuer the authorization server's metadata names, when not its own.
    metadata_issuer: Option<&'static str>,
    /// The token endpoint refuses codes (`invalid_grant`, echoing the code).
    refuse_codes: bool,
    /// The token endpoint refuses refresh tokens (`invalid_grant`, echoing the token).
    refuse_refreshes: bool,
    /// The scopes `tools/list` needs (a 403 `insufficient_scope` naming them otherwise).
    list_needs: &'static [&'static str],
}

/// A code the authorization server handed out, and what it was for.
#[derive(Debug)]
struct Pending {
    challenge: String,
    redirect_uri: String,
    resource: String,
    scope: String,
}

/// What the authorization server keeps; the MCP server reads the access tokens.
#[derive(Debug, Default)]
struct Books {
    codes: HashMap<String, Pending>,
    /// Access token → its scopes.
    access: HashMap<String, String>,
    /// Refresh token → its scopes.
    refresh: HashMap<String, String>,
    /// Codes handed out.
    coded: usize,
    /// Token pairs handed out.
    minted: usize,
}

impl Books {
    fn mint(&mut self, scope: String) -> Value {
        self.minted += 1;
        let (access, refresh) = (
            format!("access-{}", self.minted),
            format!("refresh-{}", self.minted),
        );
        self.access.insert(access.clone(), scope.clone());
        self.refresh.insert(refresh.clone(), scope.clone());
        json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": 3600,
            "refresh_token": refresh,
            "scope": scope,
        })
    }
}

/// The MCP server at `url` and its authorization server at `issuer`, with what each saw.
struct World {
    url: String,
    issuer: String,
    as_log: Log,
    mcp_log: Log,
}

impl World {
    async fn start(script: Script) -> World {
        let as_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mcp_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", as_listener.local_addr().unwrap());
        let origin = format!("http://{}", mcp_listener.local_addr().unwrap());
        let url = format!("{origin}/mcp");
        let books = Arc::new(Mutex::new(Books::default()));
        let world = World {
            url: url.clone(),
            issuer: issuer.clone(),
            as_log: Log::default(),
            mcp_log: Log::default(),
        };
        let (as_books, as_script, as_issuer) = (books.clone(), script.clone(), issuer.clone());
        tokio::spawn(serve(
            as_listener,
            world.as_log.clone(),
            Arc::new(move |seen: &Seen| {
                authorization_server(seen, &as_issuer, &as_script, &as_books)
            }),
        ));
        tokio::spawn(serve(
            mcp_listener,
            world.mcp_log.clone(),
            Arc::new(move |seen: &Seen| mcp_server(seen, &origin, &issuer, &script, &books)),
        ));
        world
    }

    fn as_seen(&self) -> Vec<Seen> {
        self.as_log.lock().unwrap().clone()
    }

    fn as_lines(&self) -> Vec<String> {
        self.as_seen().iter().map(Seen::line).collect()
    }

    /// What the MCP server was asked: the line, the JSON-RPC method and the token.
    fn mcp_asked(&self) -> Vec<(String, String, Option<String>)> {
        self.mcp_log
            .lock()
            .unwrap()
            .iter()
            .map(|s| {
                let rpc = s.json()["method"].as_str().unwrap_or("").to_owned();
                (s.line(), rpc, s.headers.get("authorization").cloned())
            })
            .collect()
    }
}

/// The authorization server: RFC 8414 metadata, RFC 7591 registration, the authorization
/// endpoint (which redirects at once: the user said yes) and the token endpoint, which
/// checks the PKCE verifier, the redirect URI and the resource as a real one does.
fn authorization_server(seen: &Seen, issuer: &str, script: &Script, books: &Mutex<Books>) -> Reply {
    let invalid_grant = |why: String| {
        reply_json(
            "400 Bad Request",
            json!({"error": "invalid_grant", "error_description": why}),
        )
    };
    match (seen.method.as_str(), seen.path.as_str()) {
        ("GET", "/.well-known/oauth-authorization-server") => reply_json(
            "200 OK",
            json!({
                "issuer": script.metadata_issuer.unwrap_or(issuer),
                "authorization_endpoint": format!("{issuer}/authorize"),
                "token_endpoint": format!("{issuer}/token"),
                "registration_endpoint": format!("{issuer}/register"),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "scopes_supported": ["mcp:read", "mcp:write", "offline_access"],
                "authorization_response_iss_parameter_supported": true,
            }),
        ),
        ("POST", "/register") => {
            let asked = seen.json();
            reply_json(
                "201 Created",
                json!({
                    "client_id": "client-1",
                    "client_name": asked["client_name"],
                    "redirect_uris": asked["redirect_uris"],
                    "grant_types": asked["grant_types"],
                    "token_endpoint_auth_method": "none",
                }),
            )
        }
        ("GET", "/authorize") => {
            let param = |k: &str| seen.param(k).unwrap_or_default().to_owned();
            let mut books = books.lock().unwrap();
            books.coded += 1;
            let code = format!("c0de-{}", books.coded);
            books.codes.insert(
                code.clone(),
                Pending {
                    challenge: param("code_challenge"),
                    redirect_uri: param("redirect_uri"),
                    resource: param("resource"),
                    scope: param("scope"),
                },
            );
            let mut back = reqwest::Url::parse(&param("redirect_uri")).unwrap();
            back.query_pairs_mut()
                .append_pair("code", &code)
                .append_pair("state", &param("state"))
                .append_pair("iss", issuer);
            Reply {
                status: "302 Found",
                headers: vec![("location", back.to_string())],
                body: String::new(),
            }
        }
        ("POST", "/token") => {
            let form = seen.form();
            let field = |k: &str| form.get(k).cloned().unwrap_or_default();
            let mut books = books.lock().unwrap();
            match field("grant_type").as_str() {
                "authorization_code" if script.refuse_codes => {
                    invalid_grant(format!("the code {} has expired", field("code")))
                }
                "authorization_code" => {
                    let Some(pending) = books.codes.remove(&field("code")) else {
                        return invalid_grant("unknown code".to_owned());
                    };
                    if oauth::challenge(&field("code_verifier")) != pending.challenge
                        || field("redirect_uri") != pending.redirect_uri
                        || field("resource") != pending.resource
                    {
                        return invalid_grant("the code was issued for another request".into());
                    }
                    reply_json("200 OK", books.mint(pending.scope))
                }
                "refresh_token" if script.refuse_refreshes => invalid_grant(format!(
                    "the refresh token {} was revoked",
                    field("refresh_token")
                )),
                "refresh_token" => match books.refresh.remove(&field("refresh_token")) {
                    Some(scope) => reply_json("200 OK", books.mint(scope)),
                    None => invalid_grant("unknown refresh token".to_owned()),
                },
                _ => reply_json(
                    "400 Bad Request",
                    json!({"error": "unsupported_grant_type"}),
                ),
            }
        }
        _ => reply_empty("404 Not Found"),
    }
}

/// The MCP server: resource metadata (RFC 9728) naming the authorization server, a 401
/// naming it to a request without a token, and `tools/list` refused for lack of scope
/// when the script says so.
fn mcp_server(
    seen: &Seen,
    origin: &str,
    issuer: &str,
    script: &Script,
    books: &Mutex<Books>,
) -> Reply {
    let url = format!("{origin}/mcp");
    match (seen.method.as_str(), seen.path.as_str()) {
        ("GET", "/.well-known/oauth-protected-resource/mcp") => reply_json(
            "200 OK",
            json!({
                "resource": url,
                "authorization_servers": [issuer],
                "scopes_supported": ["mcp:read", "mcp:write"],
                "bearer_methods_supported": ["header"],
            }),
        ),
        ("DELETE", "/mcp") => reply_empty("200 OK"),
        ("POST", "/mcp") => {
            let challenge = |error: &str, scope: &str| {
                let mut reply = reply_json("401 Unauthorized", json!({"error": error}));
                reply.headers.push((
                    "www-authenticate",
                    format!(
                        r#"Bearer error="{error}", scope="{scope}", resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp""#
                    ),
                ));
                reply
            };
            let token = seen
                .headers
                .get("authorization")
                .and_then(|v| v.strip_prefix("Bearer "));
            let Some(token) = token else {
                return challenge("invalid_token", "mcp:read");
            };
            let Some(granted) = books.lock().unwrap().access.get(token).cloned() else {
                return challenge("invalid_token", "mcp:read");
            };
            match seen.json()["method"].as_str().unwrap_or("") {
                "initialize" => {
                    let mut reply =
                        reply_json("200 OK", serde_json::from_str(INITIALIZED).unwrap());
                    reply.headers.push(("mcp-session-id", "s-1".to_owned()));
                    reply
                }
                m if m.starts_with("notifications/") => reply_empty("202 Accepted"),
                "tools/list" => {
                    let has: Vec<&str> = granted.split_whitespace().collect();
                    if script.list_needs.iter().all(|n| has.contains(n)) {
                        reply_json(
                            "200 OK",
                            json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}),
                        )
                    } else {
                        let mut reply =
                            reply_json("403 Forbidden", json!({"error": "insufficient_scope"}));
                        reply.headers.push((
                            "www-authenticate",
                            format!(
                                r#"Bearer error="insufficient_scope", scope="{}""#,
                                script.list_needs.join(" ")
                            ),
                        ));
                        reply
                    }
                }
                _ => reply_json(
                    "200 OK",
                    json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "no such method"}}),
                ),
            }
        }
        _ => reply_empty("404 Not Found"),
    }
}

/// One visit of the browser: the callback's query as the browser sent it, and its answer.
#[derive(Debug)]
struct Visit {
    callback: Vec<(String, String)>,
    status: u16,
    page: String,
}

/// The user's browser: each authorization URL given to the returned `open` is requested
/// from the authorization server, whose redirect goes to the loopback callback after
/// `tamper` had its way with the redirect's query. Each visit is reported.
fn browser(
    tamper: fn(&mut Vec<(String, String)>),
) -> (
    impl Fn(&str) + Sync,
    tokio::sync::mpsc::UnboundedReceiver<Visit>,
) {
    let (url_tx, mut urls) = tokio::sync::mpsc::unbounded_channel::<String>();
    let (visit_tx, visits) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let client = crate::net::client(crate::net::Purpose::TokenEndpoint).unwrap();
        while let Some(url) = urls.recv().await {
            let at_server = client.get(&url).send().await.unwrap();
            assert_eq!(
                at_server.status(),
                302,
                "the authorization server redirects"
            );
            let location = at_server.headers()["location"].to_str().unwrap();
            let mut callback = reqwest::Url::parse(location).unwrap();
            assert_eq!(
                (callback.scheme(), callback.host_str(), callback.path()),
                ("http", Some("127.0.0.1"), "/callback"),
                "the redirect goes to the gateway's loopback callback"
            );
            let mut query: Vec<(String, String)> = callback.query_pairs().into_owned().collect();
            tamper(&mut query);
            callback
                .query_pairs_mut()
                .clear()
                .extend_pairs(query.iter());
            let answer = client.get(callback).send().await.unwrap();
            let status = answer.status().as_u16();
            let page = answer.text().await.unwrap();
            let visit = Visit {
                callback: query,
                status,
                page,
            };
            if visit_tx.send(visit).is_err() {
                break;
            }
        }
    });
    let open = move |url: &str| {
        let _ = url_tx.send(url.to_owned());
    };
    (open, visits)
}

/// Every connection to the callback is the gateway's own user's.
fn me(
    _: std::net::SocketAddr,
    _: std::net::SocketAddr,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Owner> + Send>> {
    Box::pin(async { Owner::Me })
}

fn no_step_up() {}

/// The browser's next visit to the callback (its report may follow the sign-in's end).
async fn next_visit(visits: &mut tokio::sync::mpsc::UnboundedReceiver<Visit>) -> Visit {
    tokio::time::timeout(BOUND, visits.recv())
        .await
        .expect("the browser came back in time")
        .expect("the browser ran")
}

/// A sign-in as both front doors run one (`cli/auth.rs`, `ui/pages/app_sign_in.rs`):
/// discovery, the sign-in, and the grant stored once it is had.
async fn sign_in_and_store(
    world: &World,
    store: &Store,
    open: &(dyn Fn(&str) + Sync),
    step_up: &(dyn Fn() + Sync),
) -> Result<Grant, Error> {
    let plan = prepare(&world.url).await?;
    let sign_in = SignIn {
        app: APP,
        plan: &plan,
        before: None,
        client_document: None,
        owner_of: me,
    };
    let grant = tokio::time::timeout(BOUND, super::sign_in(sign_in, open, step_up))
        .await
        .expect("the sign-in ends in time")?;
    store
        .set(APP, Credential::McpOAuth(grant.clone()))
        .await
        .unwrap();
    Ok(grant)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `expires_at` of tokens minted with `expires_in: 3600` around now.
fn fresh_expiry(tokens: &Tokens) -> u64 {
    let left = tokens.expires_at.saturating_sub(now());
    assert!((3590..=3600).contains(&left), "expires in {left} s");
    tokens.expires_at
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn form(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[tokio::test]
async fn a_sign_in_discovers_registers_authorizes_with_pkce_and_stores_the_tokens() {
    let world = World::start(Script::default()).await;
    // Discovery asks the MCP server only: the authorization server is not contacted
    // before the user agreed to its origin.
    let plan = prepare(&world.url).await.unwrap();
    assert_eq!(
        (
            &plan.server,
            &plan.resource,
            &plan.issuer,
            &plan.scopes,
            plan.described
        ),
        (
            &world.url,
            &world.url,
            &world.issuer,
            &Some(strings(&["mcp:read"])),
            true
        )
    );
    assert_eq!(world.as_lines(), Vec::<String>::new());
    assert_eq!(
        world.mcp_asked(),
        [
            ("POST /mcp".to_owned(), "initialize".to_owned(), None),
            (
                "GET /.well-known/oauth-protected-resource/mcp".to_owned(),
                String::new(),
                None
            ),
        ]
    );

    let store = Store::memory();
    let (open, mut visits) = browser(|_| {});
    let grant = sign_in_and_store(&world, &store, &open, &no_step_up)
        .await
        .unwrap();

    let seen = world.as_seen();
    assert_eq!(
        world.as_lines(),
        [
            "GET /.well-known/oauth-authorization-server",
            "POST /register",
            "GET /authorize",
            "POST /token",
        ]
    );
    // Registration: a native public client with the loopback redirect.
    let registered = seen[1].json();
    let redirect_uri = registered["redirect_uris"][0].as_str().unwrap().to_owned();
    let port: u16 = redirect_uri
        .strip_prefix("http://127.0.0.1:")
        .and_then(|r| r.strip_suffix("/callback"))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("a loopback redirect URI: {redirect_uri}"));
    assert_ne!(port, 0);
    assert_eq!(
        registered,
        json!({
            "client_name": "aai-gateway",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "native",
        })
    );
    // The authorization request: code, PKCE S256, `state`, the resource indicator.
    let authorize = &seen[2];
    let names: Vec<&str> = authorize.query.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "response_type",
            "client_id",
            "redirect_uri",
            "state",
            "code_challenge",
            "code_challenge_method",
            "resource",
            "scope"
        ]
    );
    let param = |k: &str| authorize.param(k).unwrap();
    assert_eq!(param("response_type"), "code");
    assert_eq!(param("client_id"), "client-1");
    assert_eq!(param("redirect_uri"), redirect_uri);
    assert_eq!(param("code_challenge_method"), "S256");
    assert_eq!(param("resource"), world.url);
    assert_eq!(param("scope"), "mcp:read offline_access");
    let state = param("state");
    assert_eq!(state.len(), 43, "32 random bytes, base64url");
    // The code exchange: the verifier whose S256 is the challenge sent.
    let exchange = seen[3].form();
    let verifier = exchange["code_verifier"].clone();
    assert!(
        (43..=128).contains(&verifier.len())
            && verifier
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b)),
        "an RFC 7636 verifier"
    );
    assert_eq!(oauth::challenge(&verifier), param("code_challenge"));
    assert_eq!(
        exchange,
        form(&[
            ("grant_type", "authorization_code"),
            ("code", "c0de-1"),
            ("redirect_uri", redirect_uri.as_str()),
            ("code_verifier", verifier.as_str()),
            ("resource", world.url.as_str()),
            ("client_id", "client-1"),
        ])
    );
    assert_eq!(
        seen[3].headers.get("content-type").map(String::as_str),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(seen[3].headers.get("authorization"), None);
    // The browser came back once, with the server's code, this sign-in's state and `iss`.
    let visit = next_visit(&mut visits).await;
    assert_eq!(
        visit.callback,
        [
            ("code".to_owned(), "c0de-1".to_owned()),
            ("state".to_owned(), state.to_owned()),
            ("iss".to_owned(), world.issuer.clone()),
        ]
    );
    assert_eq!(visit.status, 200);
    assert!(visit.page.contains("Signed in."), "{}", visit.page);
    assert!(visits.try_recv().is_err(), "one visit");
    // Discovery again (the sign-in's), then the fresh token checked with the server, in
    // one session, closed after.
    let bearer = Some("Bearer access-1".to_owned());
    let asked = world.mcp_asked();
    assert_eq!(asked[2..4], asked[..2]);
    assert_eq!(
        asked[4..],
        [
            (
                "POST /mcp".to_owned(),
                "initialize".to_owned(),
                bearer.clone()
            ),
            (
                "POST /mcp".to_owned(),
                "notifications/initialized".to_owned(),
                bearer.clone()
            ),
            (
                "POST /mcp".to_owned(),
                "tools/list".to_owned(),
                bearer.clone()
            ),
            ("DELETE /mcp".to_owned(), String::new(), bearer),
        ]
    );
    // The grant, and the store, hold the client, where to refresh, and the tokens.
    let tokens = grant.tokens.clone().unwrap();
    let expires_at = fresh_expiry(&tokens);
    let expected = Grant {
        client_id: "client-1".to_owned(),
        client_secret: None,
        auth_method: TokenAuth::None,
        preregistered: false,
        issuer: world.issuer.clone(),
        token_endpoint: format!("{}/token", world.issuer),
        resource: world.url.clone(),
        scopes: strings(&["mcp:read", "offline_access"]),
        tokens: Some(Tokens {
            access_token: Secret::new("access-1"),
            refresh_token: Some(Secret::new("refresh-1")),
            expires_at,
            refresh_at: expires_at - 60,
        }),
    };
    assert_eq!(grant, expected);
    assert_eq!(
        store.get(APP).await.unwrap(),
        Some(Credential::McpOAuth(expected))
    );
    // Calls to the server carry the stored access token; to another URL, nothing.
    let auth = Authenticator::new(store, None, BTreeMap::new());
    let material = auth
        .mcp_material(APP, &crate::identity::Who::Shared, &world.url)
        .await
        .unwrap()
        .unwrap();
    let headers: Vec<(&str, &str)> = material
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.expose()))
        .collect();
    assert_eq!(headers, [("Authorization", "Bearer access-1")]);
    let elsewhere = world.url.replace("/mcp", "/other");
    assert!(
        auth.mcp_material(APP, &crate::identity::Who::Shared, &elsewhere)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn an_answer_with_another_state_is_refused_and_the_sign_in_goes_on_waiting() {
    let world = World::start(Script::default()).await;
    let plan = prepare(&world.url).await.unwrap();
    let (open, mut visits) = browser(|query| {
        for (k, v) in query.iter_mut() {
            if k == "state" {
                *v = "forged-state".to_owned();
            }
        }
    });
    let signing = sign_in(
        SignIn {
            app: APP,
            plan: &plan,
            before: None,
            client_document: None,
            owner_of: me,
        },
        &open,
        &no_step_up,
    );
    tokio::pin!(signing);
    let visit = tokio::select! {
        ended = &mut signing => panic!("the sign-in ended on a forged answer: {ended:?}"),
        visit = tokio::time::timeout(BOUND, visits.recv()) => {
            visit.expect("the browser came back in time").expect("the browser ran")
        }
    };
    assert_eq!(visit.status, 400);
    assert!(
        visit
            .page
            .contains("This answer is not for the sign-in in progress; it was ignored."),
        "{}",
        visit.page
    );
    // The code went nowhere, and the sign-in still waits for its own answer.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut signing)
            .await
            .is_err(),
        "the sign-in still waits"
    );
    assert_eq!(
        world.as_lines(),
        [
            "GET /.well-known/oauth-authorization-server",
            "POST /register",
            "GET /authorize",
        ]
    );
    assert!(
        world
            .mcp_asked()
            .iter()
            .all(|(_, _, token)| token.is_none())
    );
}

#[tokio::test]
async fn an_answer_naming_another_issuer_ends_the_sign_in_refused() {
    let world = World::start(Script::default()).await;
    let store = Store::memory();
    let (open, mut visits) = browser(|query| {
        for (k, v) in query.iter_mut() {
            if k == "iss" {
                *v = "https://evil.example".to_owned();
            }
        }
    });
    let e = sign_in_and_store(&world, &store, &open, &no_step_up)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "the sign-in answer came from another authorization server than the one asked (its `iss` is `https://evil.example`, expected `{}`); refused",
            world.issuer
        )
    );
    assert_eq!(GatewayError::from(e).code, Code::AuthDenied);
    let visit = next_visit(&mut visits).await;
    assert!(visit.page.contains("it was refused"), "{}", visit.page);
    assert!(!world.as_lines().contains(&"POST /token".to_owned()));
    assert_eq!(store.get(APP).await.unwrap(), None);
}

#[tokio::test]
async fn a_refused_code_is_a_clear_error_and_nothing_is_stored() {
    let world = World::start(Script {
        refuse_codes: true,
        ..Script::default()
    })
    .await;
    let store = Store::memory();
    let (open, mut visits) = browser(|_| {});
    let e = sign_in_and_store(&world, &store, &open, &no_step_up)
        .await
        .unwrap_err();
    // The browser is not told it signed in: it waited for the exchange.
    let visit = next_visit(&mut visits).await;
    assert!(visit.page.contains("did not complete"), "{}", visit.page);
    // The server echoed the code: it never reaches the error.
    assert_eq!(
        e.to_string(),
        "the token endpoint refused (HTTP 400 Bad Request): invalid_grant: the code *** has expired"
    );
    assert!(matches!(
        e,
        Error::Tokens(oauth::Error::Refused { status, .. }) if status == 400
    ));
    assert_eq!(GatewayError::from(e).code, Code::AuthDenied);
    assert_eq!(world.as_lines().last().unwrap(), "POST /token");
    // No token was shown to the server, and nothing was stored.
    assert!(
        world
            .mcp_asked()
            .iter()
            .all(|(_, _, token)| token.is_none())
    );
    assert_eq!(store.get(APP).await.unwrap(), None);
}

#[tokio::test]
async fn metadata_for_another_issuer_is_refused_before_anything_is_sent_to_it() {
    let world = World::start(Script {
        metadata_issuer: Some("https://evil.example"),
        ..Script::default()
    })
    .await;
    let store = Store::memory();
    let opened = AtomicUsize::new(0);
    let open = |_: &str| {
        opened.fetch_add(1, Ordering::SeqCst);
    };
    let e = sign_in_and_store(&world, &store, &open, &no_step_up)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "the authorization server metadata names the issuer `https://evil.example`, not `{}`",
            world.issuer
        )
    );
    assert!(matches!(e, Error::IssuerMismatch { .. }));
    assert_eq!(GatewayError::from(e).code, Code::AuthRequired);
    // Only the metadata was read: no registration, no browser.
    assert_eq!(
        world.as_lines(),
        ["GET /.well-known/oauth-authorization-server"]
    );
    assert_eq!(opened.load(Ordering::SeqCst), 0);
    assert_eq!(store.get(APP).await.unwrap(), None);
}

#[tokio::test]
async fn insufficient_scope_signs_in_again_with_the_wider_scopes() {
    let world = World::start(Script {
        list_needs: &["mcp:read", "mcp:write"],
        ..Script::default()
    })
    .await;
    let store = Store::memory();
    let (open, mut visits) = browser(|_| {});
    let step_ups = AtomicUsize::new(0);
    let step_up = || {
        step_ups.fetch_add(1, Ordering::SeqCst);
    };
    let grant = sign_in_and_store(&world, &store, &open, &step_up)
        .await
        .unwrap();
    assert_eq!(step_ups.load(Ordering::SeqCst), 1);
    assert_eq!(
        world.as_lines(),
        [
            "GET /.well-known/oauth-authorization-server",
            "POST /register",
            "GET /authorize",
            "POST /token",
            "GET /authorize",
            "POST /token",
        ]
    );
    let seen = world.as_seen();
    // The same client and callback, each time with a new state and verifier.
    let (first, second) = (&seen[2], &seen[4]);
    assert_eq!(first.param("scope"), Some("mcp:read offline_access"));
    assert_eq!(
        second.param("scope"),
        Some("mcp:read mcp:write offline_access")
    );
    for k in [
        "client_id",
        "redirect_uri",
        "resource",
        "code_challenge_method",
    ] {
        assert_eq!(first.param(k), second.param(k), "{k}");
    }
    assert_ne!(first.param("state"), second.param("state"));
    assert_ne!(
        first.param("code_challenge"),
        second.param("code_challenge")
    );
    assert_eq!(
        oauth::challenge(&seen[5].form()["code_verifier"]),
        second.param("code_challenge").unwrap()
    );
    // The first token was refused for lack of scope; the second served.
    let listings: Vec<Option<String>> = world
        .mcp_asked()
        .into_iter()
        .filter(|(_, rpc, _)| rpc == "tools/list")
        .map(|(_, _, token)| token)
        .collect();
    assert_eq!(
        listings,
        [
            Some("Bearer access-1".to_owned()),
            Some("Bearer access-2".to_owned())
        ]
    );
    assert_eq!(
        grant.scopes,
        strings(&["mcp:read", "mcp:write", "offline_access"])
    );
    assert_eq!(
        grant.tokens.as_ref().map(|t| t.access_token.expose()),
        Some("access-2")
    );
    assert_eq!(next_visit(&mut visits).await.status, 200);
    assert_eq!(next_visit(&mut visits).await.status, 200);
    assert_eq!(
        store.get(APP).await.unwrap(),
        Some(Credential::McpOAuth(grant))
    );
}

/// Signs in, then moves the stored tokens past their refresh time (as the clock would).
async fn signed_in_and_expired(world: &World) -> (Store, Grant) {
    let store = Store::memory();
    let (open, _visits) = browser(|_| {});
    let mut grant = sign_in_and_store(world, &store, &open, &no_step_up)
        .await
        .unwrap();
    let tokens = grant.tokens.as_mut().unwrap();
    tokens.expires_at = now() - 10;
    tokens.refresh_at = now() - 70;
    assert!(tokens.expiring());
    store
        .renew(APP, Credential::McpOAuth(grant.clone()))
        .await
        .unwrap();
    (store, grant)
}

#[tokio::test]
async fn an_expired_access_token_is_refreshed_and_the_rotated_tokens_stored() {
    let world = World::start(Script::default()).await;
    let (store, expired) = signed_in_and_expired(&world).await;
    let before = world.as_seen().len();
    let auth = Authenticator::new(store.clone(), None, BTreeMap::new());
    let material = tokio::time::timeout(
        BOUND,
        auth.mcp_material(APP, &crate::identity::Who::Shared, &world.url),
    )
    .await
    .unwrap()
    .unwrap()
    .unwrap();
    let headers: Vec<(&str, &str)> = material
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.expose()))
        .collect();
    assert_eq!(headers, [("Authorization", "Bearer access-2")]);
    // One refresh request, with the stored refresh token, for the stored resource.
    let seen = world.as_seen();
    assert_eq!(seen.len(), before + 1);
    assert_eq!(seen[before].line(), "POST /token");
    assert_eq!(
        seen[before].form(),
        form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", "refresh-1"),
            ("resource", world.url.as_str()),
            ("client_id", "client-1"),
        ])
    );
    // The store holds the new tokens; the rest of the grant is unchanged.
    let Some(Credential::McpOAuth(stored)) = store.get(APP).await.unwrap() else {
        panic!("the grant is still stored");
    };
    let tokens = stored.tokens.clone().unwrap();
    let expires_at = fresh_expiry(&tokens);
    assert_eq!(
        stored,
        Grant {
            tokens: Some(Tokens {
                access_token: Secret::new("access-2"),
                refresh_token: Some(Secret::new("refresh-2")),
                expires_at,
                refresh_at: expires_at - 60,
            }),
            ..expired
        }
    );
    // Fresh now: the next call refreshes nothing.
    auth.mcp_material(APP, &crate::identity::Who::Shared, &world.url)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(world.as_seen().len(), before + 1);
}

#[tokio::test]
async fn a_refused_refresh_asks_the_user_to_sign_in_again() {
    let world = World::start(Script {
        refuse_refreshes: true,
        ..Script::default()
    })
    .await;
    let (store, expired) = signed_in_and_expired(&world).await;
    let auth = Authenticator::new(store.clone(), None, BTreeMap::new());
    let e = tokio::time::timeout(
        BOUND,
        auth.mcp_material(APP, &crate::identity::Who::Shared, &world.url),
    )
    .await
    .unwrap()
    .unwrap_err();
    let wire = GatewayError::from(e);
    assert_eq!(wire.code, Code::AuthRequired);
    // The server echoed the refresh token: it never reaches the error.
    assert_eq!(
        wire.detail,
        "the sign-in could not be renewed (the token endpoint refused (HTTP 400 Bad Request): invalid_grant: the refresh token *** was revoked); the user can fix it with `aai-gateway auth login files`"
    );
    assert_eq!(wire.data()["command"], "aai-gateway auth login files");
    assert_eq!(wire.data()["authType"], "oauth2");
    assert_eq!(world.as_lines().last().unwrap(), "POST /token");
    assert_eq!(
        world.as_seen().last().unwrap().form()["grant_type"],
        "refresh_token"
    );
    // The stored grant is left as it was.
    assert_eq!(
        store.get(APP).await.unwrap(),
        Some(Credential::McpOAuth(expired))
    );
}
