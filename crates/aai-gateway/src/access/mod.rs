//! Who may reach the HTTP listener, shared by the listener and what it mounts (`/mcp`,
//! `/ui`): the host names and browser origins a request may use, the UI's sign-in cookie
//! (derived from the token, never the token itself), the connection's address, the
//! largest body, and a comparison that does not leak where secrets differ.

pub(crate) mod exchange;
pub mod resource;

use std::net::SocketAddr;

use crate::auth::Secret;

/// The address a request's connection came from (a request extension).
#[derive(Debug, Clone, Copy)]
pub struct Remote(pub std::net::IpAddr);

/// `http://127.0.0.1:3000` (brackets for IPv6; a wildcard address shows as 127.0.0.1).
pub(crate) fn origin_of(addr: SocketAddr) -> String {
    let ip = if addr.ip().is_unspecified() {
        "127.0.0.1".to_owned()
    } else if addr.is_ipv6() {
        format!("[{}]", addr.ip())
    } else {
        addr.ip().to_string()
    };
    format!("http://{ip}:{}", addr.port())
}

/// The host names a request may use to reach `addr`.
pub(crate) fn allowed_hosts(addr: SocketAddr) -> Vec<String> {
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    let own = addr.ip().to_string();
    if !hosts.contains(&own) {
        hosts.push(own);
    }
    hosts
}

/// The origins a browser page may send from to reach `addr`.
pub(crate) fn allowed_origins(addr: SocketAddr) -> Vec<String> {
    let port = addr.port();
    let mut origins = vec![
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        format!("http://[::1]:{port}"),
    ];
    let own = origin_of(addr);
    if !origins.contains(&own) {
        origins.push(own);
    }
    origins
}

/// The name of the UI's sign-in cookie (with a token).
pub(crate) const TOKEN_COOKIE: &str = "aai_token";

/// A signed-in person's form token for the UI (a request extension): derived from their
/// person cookie, so it is theirs alone, and the same on every replica.
#[derive(Debug, Clone)]
pub(crate) struct PersonCsrf(pub String);

impl PersonCsrf {
    /// The form token of the person cookie `token`.
    pub(crate) fn of(token: &str) -> PersonCsrf {
        use sha2::Digest;
        let digest = sha2::Sha256::new()
            .chain_update(b"aai-ui-csrf\0")
            .chain_update(token.as_bytes())
            .finalize();
        PersonCsrf(crate::text::hex(&digest[..24]))
    }
}

/// The cookie of a person signed in to the UI through the team's authorization server
/// (`web.auth`): their access token, checked on every request like a bearer token.
pub(crate) const PERSON_COOKIE: &str = "aai_person";

/// The largest request body.
pub(crate) const MAX_BODY: usize = 16 * 1024 * 1024;
/// The UI's sign-in cookie for `token`: derived from it, so that a leaked cookie opens
/// the UI only and never serves as the bearer token of `/mcp`.
pub(crate) fn ui_session(token: &Secret) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(b"aai-gateway web UI session\0");
    hash.update(token.expose().as_bytes());
    crate::text::hex(&hash.finalize())
}

/// Equality that takes the same time wherever the inputs differ (the length still shows).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The value of cookie `name`, if the request carries it.
pub(crate) fn cookie<'a>(req: &'a http::Request<impl Sized>, name: &str) -> Option<&'a str> {
    req.headers()
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == name).then_some(v)
        })
}
