//! The one place HTTP clients are built: the TLS provider (rustls with ring), the user
//! agent, each purpose's redirect policy and timeouts, the response size caps, and the
//! text of transport errors.
//!
//! Four purposes, four clients (each built once, on first use):
//!
//! * [`Purpose::Api`] — calls to web apps: same-origin redirects only (at most 5), a
//!   10 s connect timeout, pooled connections; the call's own deadline bounds the rest.
//! * [`Purpose::Descriptor`] — `.well-known/aai.json` and registry fetches: 10 s in all,
//!   at most 3 redirects.
//! * [`Purpose::TokenEndpoint`] — OAuth and app-credential token requests: 30 s, no
//!   redirects, no connection kept idle over 4 s.
//! * [`Purpose::Telemetry`] — OTLP trace exports (`telemetry.rs`): no redirects, a 5 s
//!   connect timeout; each export sets its own deadline.

use std::sync::OnceLock;
use std::time::Duration;

use reqwest::Client;

/// `User-Agent` of every request.
pub(crate) const USER_AGENT: &str = concat!("aai-gateway/", env!("CARGO_PKG_VERSION"));

/// Largest web app response body accepted.
pub(crate) const MAX_API_BODY: usize = 10 * 1024 * 1024;
/// Largest descriptor (or registry catalog) accepted.
pub(crate) const MAX_DESCRIPTOR: usize = 1024 * 1024;
/// Largest token endpoint answer accepted.
pub(crate) const MAX_TOKEN_RESPONSE: usize = 1024 * 1024;

/// What a client is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// Tool calls to web apps.
    Api,
    /// Fetching descriptors and the registry catalog.
    Descriptor,
    /// Token endpoints (OAuth, app credentials).
    TokenEndpoint,
    /// OTLP trace exports to the configured collector.
    Telemetry,
}

/// Why an HTTP request could not even be made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The HTTP client could not be built (the TLS setup failed).
    #[error("the HTTP client could not be built: {0}")]
    Client(String),
    /// The URL carries a user name or password.
    #[error("`{0}` carries a user name or password; give the URL without them")]
    Credentials(String),
    /// Neither https nor plain http to this machine.
    #[error("`{0}` must use https (plain http only for this machine)")]
    Insecure(String),
}

/// The shared client for `purpose`; an error says why it could not be built.
pub(crate) fn client(purpose: Purpose) -> Result<&'static Client, Error> {
    static API: OnceLock<Result<Client, Error>> = OnceLock::new();
    static DESCRIPTOR: OnceLock<Result<Client, Error>> = OnceLock::new();
    static TOKEN: OnceLock<Result<Client, Error>> = OnceLock::new();
    static TELEMETRY: OnceLock<Result<Client, Error>> = OnceLock::new();
    let cell = match purpose {
        Purpose::Api => &API,
        Purpose::Descriptor => &DESCRIPTOR,
        Purpose::TokenEndpoint => &TOKEN,
        Purpose::Telemetry => &TELEMETRY,
    };
    cell.get_or_init(|| build(purpose).map_err(|e| Error::Client(e.to_string())))
        .as_ref()
        .map_err(Clone::clone)
}

/// Installs rustls' ring provider as the process default (once; later calls do nothing).
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[allow(clippy::disallowed_methods)] // the one place clients are built
fn build(purpose: Purpose) -> reqwest::Result<Client> {
    // reqwest is built without a default TLS provider; use rustls' ring.
    install_crypto();
    let builder = Client::builder().user_agent(USER_AGENT);
    match purpose {
        Purpose::Api => builder
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                let target = attempt.url().origin();
                let cross = attempt
                    .previous()
                    .first()
                    .is_some_and(|f| f.origin() != target);
                if cross {
                    let to = target.ascii_serialization();
                    attempt.error(format!("redirect to another origin ({to}) refused"))
                } else if attempt.previous().len() > 5 {
                    attempt.error("too many redirects")
                } else {
                    attempt.follow()
                }
            }))
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(90))
            .build(),
        Purpose::Descriptor => builder
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                // Every hop passes the check the first URL passed, and https never
                // becomes http.
                let downgrade = attempt.url().scheme() == "http"
                    && attempt.previous().iter().any(|u| u.scheme() == "https");
                if let Err(why) = check_fetchable(attempt.url()) {
                    attempt.error(format!("redirect refused: {why}"))
                } else if downgrade {
                    attempt.error("redirect from https to plain http refused")
                } else if attempt.previous().len() > 3 {
                    attempt.error("too many redirects")
                } else {
                    attempt.follow()
                }
            }))
            .build(),
        Purpose::TokenEndpoint => builder
            .timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            // Token requests are seconds apart: a connection idle longer than common
            // servers keep one (Node's 5 s) would be reused just as the server closes it,
            // failing a request that was never read. A new connection is cheap here.
            .pool_idle_timeout(Duration::from_secs(4))
            .build(),
        Purpose::Telemetry => builder
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build(),
    }
}

/// Whether a descriptor (or the registry catalog) may be fetched from `url`: https, or
/// plain http to this machine only; never with a user name or password in it. The error
/// says why, without echoing the URL's secrets.
pub(crate) fn check_fetchable(url: &reqwest::Url) -> Result<(), Error> {
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::Credentials(redact(url)));
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(Error::Insecure(redact(url))),
    }
}

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Larger than the cap.
    #[error("the response is larger than {}", size(*.0))]
    TooLarge(usize),
    /// The connection failed while reading.
    #[error("reading the response failed: {0}")]
    Transport(String),
    /// The request's time ran out while the body was arriving.
    #[error("the response did not arrive in time")]
    TimedOut,
}

/// A size in words: whole MiB, else KiB.
fn size(bytes: usize) -> String {
    if bytes >= 1024 * 1024 && bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / 1024 / 1024)
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

/// Reads a whole body, refusing it once it grows past `max` bytes.
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, BodyError> {
    if response
        .content_length()
        .is_some_and(|n| usize::try_from(n).map_or(true, |n| n > max))
    {
        return Err(BodyError::TooLarge(max));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        if e.is_timeout() {
            BodyError::TimedOut
        } else {
            BodyError::Transport(describe(&e))
        }
    })? {
        if body.len() + chunk.len() > max {
            return Err(BodyError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A URL as errors and logs may show it: its origin only. Paths carry arguments and
/// query strings carry API keys.
pub(crate) fn redact(url: &reqwest::Url) -> String {
    let origin = url.origin().ascii_serialization();
    if url.path() == "/" && url.query().is_none() {
        origin
    } else {
        format!("{origin}/…")
    }
}

/// `url` as a question shows it: [`redact`] of it, or "an invalid URL".
pub(crate) fn shown(url: &str) -> String {
    reqwest::Url::parse(url).map_or_else(|_| "an invalid URL".to_owned(), |u| redact(&u))
}

/// A transport error's text with its whole chain of causes, its URL cut to the origin.
pub(crate) fn describe(e: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut detail = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        source = s.source();
    }
    match e.url() {
        Some(url) => detail.replace(url.as_str(), &redact(url)),
        None => detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn transport_errors_show_the_origin_only() {
        let url: reqwest::Url = "http://127.0.0.1:9/users/s3cr3t-id?api_key=k3y"
            .parse()
            .unwrap();
        assert_eq!(redact(&url), "http://127.0.0.1:9/…");
        let e = client(Purpose::Api)
            .unwrap()
            .get(url)
            .send()
            .await
            .unwrap_err();
        let text = describe(&e);
        assert!(!text.contains("k3y") && !text.contains("s3cr3t"), "{text}");
        assert!(text.contains("http://127.0.0.1:9/…"), "{text}");
    }
}
