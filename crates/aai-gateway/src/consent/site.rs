//! What a person checks before a web app is used the first time: the site's origin and,
//! for https, its certificate (subject, issuer, SHA-256 fingerprint; docs/consent.md, Web
//! apps: the site and its certificate).
//!
//! The certificate is read by a TLS handshake of its own, verified exactly as every
//! request of the gateway is (rustls with the platform verifier), before any request of
//! the app is sent; no HTTP request is made. Fingerprints are cached per origin for
//! [`FRESH`]: a certificate that changes is noticed on the first call after that.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// How long a certificate read stays valid.
pub(crate) const FRESH: Duration = Duration::from_secs(300);
/// Connect and handshake deadline.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A server certificate as a person checks it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Certificate {
    /// The subject's distinguished name (`CN=example.com, O=…`).
    pub subject: String,
    /// The issuer's distinguished name.
    pub issuer: String,
    /// SHA-256 of the DER certificate, as colon-separated upper-case hex.
    pub sha256: String,
}

impl Certificate {
    /// Reads a DER certificate.
    pub fn from_der(der: &[u8]) -> Certificate {
        let sha256 = Sha256::digest(der)
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(":");
        match x509_parser::parse_x509_certificate(der) {
            Ok((_, cert)) => Certificate {
                subject: cert.subject().to_string(),
                issuer: cert.issuer().to_string(),
                sha256,
            },
            Err(_) => Certificate {
                subject: "(unreadable)".into(),
                issuer: "(unreadable)".into(),
                sha256,
            },
        }
    }
}

/// A web app's server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Site {
    /// `https://api.example.com` (no path).
    pub origin: String,
    /// Its certificate (https only).
    pub certificate: Option<Certificate>,
}

impl Site {
    /// One line for a consent question.
    pub fn describe(&self) -> String {
        match &self.certificate {
            Some(c) => format!(
                "{}, certificate of {} issued by {}, SHA-256 {}",
                self.origin, c.subject, c.issuer, c.sha256
            ),
            None => format!("{} (plain http: no certificate)", self.origin),
        }
    }

    /// The fingerprint a grant is tied to.
    pub fn fingerprint(&self) -> Option<&str> {
        self.certificate.as_ref().map(|c| c.sha256.as_str())
    }
}

/// Certificates read, per origin, with when.
/// Why a site's server and certificate could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SiteError {
    /// The app's base URL is not one.
    #[error("{0}")]
    Url(String),
    /// No verified TLS handshake with the server.
    #[error("{0}")]
    Handshake(String),
}

#[derive(Debug, Default)]
pub struct Sites {
    seen: Mutex<HashMap<String, (Site, Instant)>>,
}

impl Sites {
    /// The site behind `base_url`: from the cache when fresh, else by a handshake.
    pub async fn site(&self, base_url: &str) -> Result<Site, SiteError> {
        let url =
            url::Url::parse(base_url).map_err(|e| SiteError::Url(format!("{base_url}: {e}")))?;
        let origin = url.origin().ascii_serialization();
        if let Some((site, at)) = self.seen.lock().expect("sites lock").get(&origin)
            && at.elapsed() < FRESH
        {
            return Ok(site.clone());
        }
        let certificate = if url.scheme() == "https" {
            let host = url
                .host_str()
                .ok_or_else(|| SiteError::Url(format!("{origin} has no host")))?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            let port = url.port_or_known_default().unwrap_or(443);
            let der = tokio::task::spawn_blocking(move || handshake(&host, port))
                .await
                .map_err(|e| SiteError::Handshake(e.to_string()))?
                .map_err(SiteError::Handshake)?;
            Some(Certificate::from_der(&der))
        } else {
            None
        };
        let site = Site {
            origin: origin.clone(),
            certificate,
        };
        self.seen
            .lock()
            .expect("sites lock")
            .insert(origin, (site.clone(), Instant::now()));
        Ok(site)
    }
}

/// Connects to `host:port`, completes a verified TLS handshake, returns the leaf
/// certificate (DER).
fn handshake(host: &str, port: u16) -> Result<Vec<u8>, String> {
    use rustls_platform_verifier::ConfigVerifierExt;
    crate::net::install_crypto();
    let config = rustls::ClientConfig::with_platform_verifier()
        .map_err(|e| format!("no certificate verifier: {e}"))?;
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|e| format!("`{host}` is not a server name: {e}"))?;
    let mut tls =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| format!("TLS: {e}"))?;
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    let mut tcp = TcpStream::connect_timeout(&addr, TIMEOUT)
        .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
    tcp.set_read_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    tcp.set_write_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    while tls.is_handshaking() {
        tls.complete_io(&mut tcp).map_err(|e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                format!("{host}:{port} did not finish the TLS handshake in time")
            }
            _ => format!("the TLS handshake with {host}:{port} failed: {e}"),
        })?;
    }
    let der = tls
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|c| c.as_ref().to_vec())
        .ok_or_else(|| format!("{host}:{port} sent no certificate"))?;
    tls.send_close_notify();
    let _ = tls.complete_io(&mut tcp);
    Ok(der)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_sha256_of_the_der() {
        let c = Certificate::from_der(b"not a certificate");
        assert_eq!(c.subject, "(unreadable)");
        assert_eq!(c.sha256.len(), 32 * 3 - 1);
        assert!(c.sha256.starts_with("47:20:9C:9B:"), "{}", c.sha256);
    }

    #[tokio::test]
    async fn plain_http_has_no_certificate_and_is_cached() {
        let sites = Sites::default();
        let site = sites.site("http://127.0.0.1:9/api/v1").await.unwrap();
        assert_eq!(site.origin, "http://127.0.0.1:9");
        assert_eq!(site.certificate, None);
        assert!(site.describe().contains("plain http"));
    }

    #[tokio::test]
    async fn an_unreachable_https_site_is_an_error_not_a_hang() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let e = Sites::default()
            .site(&format!("https://127.0.0.1:{port}/"))
            .await
            .unwrap_err();
        assert!(matches!(e, SiteError::Handshake(_)), "{e}");
        assert!(e.to_string().contains("cannot connect"), "{e}");
    }
}
