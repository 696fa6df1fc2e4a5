//! What checking a team access token costs a request (`access::resource`, docs/team.md):
//! a JWT seen for the first time (RS256 signature, claims, scopes) and one seen before
//! (the digest cache), against an issuer on loopback that serves its metadata and key set.
//!
//! Run: `cargo bench -p aai-gateway --bench team`.

use std::io::{Read, Write};
use std::time::Instant;

use aai_gateway::testing::access::resource::Resource;
use aai_gateway::testing::config::WebAuth;

/// The bench's own key (fixtures/team: it signs these tokens and protects nothing).
const KEY_DER: &[u8] = include_bytes!("../../../fixtures/team/bench-rsa-2048.der");
const JWKS: &str = include_str!("../../../fixtures/team/bench-jwks.json");

fn median(mut us: Vec<f64>) -> f64 {
    us.sort_by(f64::total_cmp);
    us[us.len() / 2]
}

/// An issuer on loopback: its metadata and its key set, one connection at a time.
fn issuer() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let meta = serde_json::json!({
        "issuer": base, "authorization_endpoint": format!("{base}/auth"),
        "token_endpoint": format!("{base}/token"), "jwks_uri": format!("{base}/jwks"),
        "code_challenge_methods_supported": ["S256"],
    })
    .to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut buf = [0u8; 4096];
            let n = stream.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]);
            let body = if head.starts_with("GET /jwks") {
                JWKS
            } else if head.starts_with("GET /.well-known/oauth-authorization-server") {
                meta.as_str()
            } else {
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
                continue;
            };
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    base
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let runs = if full { 2_000 } else { 20 };
    aai_gateway::testing::net::install_crypto();
    let base = issuer();
    let audience = "https://gateway.example.com/mcp".to_owned();
    let resource = Resource::new(WebAuth {
        issuer: base.clone(),
        audience: audience.clone(),
        scopes: vec!["mcp".into()],
        scope_access: Default::default(),
        admin_scope: "aai:admin".into(),
        client_id: None,
    });
    let key = jsonwebtoken::EncodingKey::from_rsa_der(KEY_DER);
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("bench-1".into());
    header.typ = Some("at+jwt".into());
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let tokens: Vec<String> = (0..runs)
        .map(|i| {
            let claims = serde_json::json!({
                "iss": base, "aud": audience, "sub": format!("person-{}", i % 50),
                "exp": exp, "iat": exp - 3600, "jti": format!("t{i}"),
                "scope": "openid mcp apps:all", "client_id": "bench",
            });
            jsonwebtoken::encode(&header, &claims, &key).unwrap()
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // The first token fetches the metadata and the key set.
        let started = Instant::now();
        resource.person(&tokens[0]).await.unwrap();
        let first = started.elapsed().as_secs_f64() * 1e6;
        let mut fresh = Vec::new();
        for token in &tokens[1..] {
            let started = Instant::now();
            resource.person(token).await.unwrap();
            fresh.push(started.elapsed().as_secs_f64() * 1e6);
        }
        let mut again = Vec::new();
        for token in tokens.iter().cycle().take(runs * 5) {
            let started = Instant::now();
            resource.person(token).await.unwrap();
            again.push(started.elapsed().as_secs_f64() * 1e6);
        }
        println!("team token, first ever (metadata + key set on loopback + check): {first:.0} µs");
        println!(
            "team token, new JWT (RS256 signature, claims, scopes): median {:.1} µs over {}",
            median(fresh),
            runs - 1
        );
        println!(
            "team token, seen before (digest cache): median {:.2} µs over {}",
            median(again),
            runs * 5
        );
    });
}
