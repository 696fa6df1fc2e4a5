//! A person acting upstream as themselves without signing in there: when a remote MCP
//! server names the team's authorization server in its resource metadata, and that
//! server offers token exchange (RFC 8693) and knows the gateway as a confidential client,
//! the person's own access token is exchanged for one for the MCP server
//! (`auth::mcp::exchange`). Whether a server qualifies is found once per ten minutes;
//! exchanged tokens are kept in memory only, each until a minute before it expires and
//! never past the person's own token; a refused exchange is not asked again for a minute;
//! exchanges run one at a time (concurrent first calls of one person share one), within
//! ten seconds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::auth::Secret;
use crate::auth::mcp::{self, Plan};
use crate::identity::Person;

use super::resource::Resource;

/// How long a server's answer to "does it take the team's tokens" is kept.
const PLAN_FOR: Duration = Duration::from_secs(600);
/// How long a failure to find out is kept (the server may come back).
const UNKNOWN_FOR: Duration = Duration::from_secs(30);
/// Most exchanged tokens kept.
const KEPT: usize = 1024;
/// How long a refused exchange is not asked again, per person's token and server.
const REFUSED_FOR: Duration = Duration::from_secs(60);
/// The longest wait for the authorization server's answer.
const EXCHANGE_WITHIN: Duration = Duration::from_secs(10);

/// A server's plan when it takes the team's tokens (`None`: it does not, or could not be
/// asked), and until when that is believed.
type Judged = (Option<Arc<Plan>>, Instant);
/// An exchanged token, and the Unix second it is used until.
type Kept = (Secret, u64);

/// Exchanges people's tokens for remote MCP servers' (see the module doc).
pub(crate) struct Exchanger {
    team: Arc<Resource>,
    /// Per MCP server URL.
    plans: Mutex<HashMap<String, Judged>>,
    /// Per (MCP server URL, SHA-256 of the person's token).
    tokens: Mutex<HashMap<(String, [u8; 32]), Kept>>,
    /// Refused exchanges, by the same key, and when.
    refused: Mutex<HashMap<(String, [u8; 32]), Instant>>,
    /// Held while exchanging.
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Exchanger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchanger").finish_non_exhaustive()
    }
}

impl Exchanger {
    /// Exchanges at the team's authorization server `team`.
    pub(crate) fn new(team: Arc<Resource>) -> Exchanger {
        Exchanger {
            team,
            plans: Mutex::default(),
            tokens: Mutex::default(),
            refused: Mutex::default(),
            one_at_a_time: tokio::sync::Mutex::new(()),
        }
    }

    /// A token of `person`'s for the MCP server at `url`, by exchange; `None` when the
    /// server does not take the team's tokens, exchange is not offered, or the exchange
    /// was refused (the person's own sign-in is used then, if any).
    pub(crate) async fn token(&self, url: &str, person: &Person) -> Option<Secret> {
        let subject = person.bearer.token.as_ref();
        if subject.is_empty() {
            return None;
        }
        let key = (url.to_owned(), digest(subject));
        if let Some(token) = self.kept(&key) {
            return Some(token);
        }
        // What costs nothing first: a confidential client, and the grant offered.
        let client = self.team.client().filter(|c| c.secret.is_some())?;
        let server = self.team.server().await.ok()?;
        if !mcp::exchange::offered(&server) {
            return None;
        }
        let plan = self.plan(url).await?;
        let _turn = self.one_at_a_time.lock().await;
        // Exchanged, or refused, while this call waited its turn.
        if let Some(token) = self.kept(&key) {
            return Some(token);
        }
        if self
            .refused
            .lock()
            .expect("refused lock")
            .get(&key)
            .is_some_and(|at| at.elapsed() < REFUSED_FOR)
        {
            return None;
        }
        let exchanged = tokio::time::timeout(
            EXCHANGE_WITHIN,
            mcp::exchange::token(
                &server,
                &client,
                subject,
                &plan.resource,
                plan.scopes.as_deref(),
            ),
        )
        .await;
        let tokens = match exchanged {
            Ok(Ok(tokens)) => tokens,
            refused => {
                let why = match refused {
                    Ok(Err(e)) => e.to_string(),
                    _ => format!("no answer within {} s", EXCHANGE_WITHIN.as_secs()),
                };
                tracing::warn!(
                    person = %person.subject,
                    "the team's authorization server did not exchange the person's token for the MCP server at {}: {why}",
                    mcp::origin(url)
                );
                let mut refused = self.refused.lock().expect("refused lock");
                keep(&mut refused, key, Instant::now(), |at| {
                    at.elapsed() >= REFUSED_FOR
                });
                return None;
            }
        };
        let now = unix_now();
        tracing::info!(person = %person.subject, "exchanged the person's token for the MCP server at {}", mcp::origin(url));
        // A minute before it expires, and never past the person's own token.
        let mut until = now + 3600;
        if tokens.expires_at > 0 {
            until = until.min(tokens.expires_at.saturating_sub(60));
        }
        if person.bearer.expires_at > 0 {
            until = until.min(person.bearer.expires_at);
        }
        let token = tokens.access_token;
        if until > now {
            let mut kept = self.tokens.lock().expect("tokens lock");
            keep(&mut kept, key, (token.clone(), until), |(_, until)| {
                *until <= now
            });
        }
        Some(token)
    }

    /// An exchanged token kept for `key`, still good.
    fn kept(&self, key: &(String, [u8; 32])) -> Option<Secret> {
        let now = unix_now();
        self.tokens
            .lock()
            .expect("tokens lock")
            .get(key)
            .filter(|(_, until)| *until > now)
            .map(|(token, _)| token.clone())
    }

    /// Forgets `person`'s exchanged token for the server at `url` (it refused it).
    pub(crate) fn forget(&self, url: &str, person: &Person) {
        let key = (url.to_owned(), digest(&person.bearer.token));
        self.tokens.lock().expect("tokens lock").remove(&key);
    }

    /// The plan of the MCP server at `url` when its resource metadata names the team's
    /// authorization server.
    async fn plan(&self, url: &str) -> Option<Arc<Plan>> {
        if let Some((plan, until)) = self.plans.lock().expect("plans lock").get(url)
            && Instant::now() < *until
        {
            return plan.clone();
        }
        let team = self.team.config().issuer.trim_end_matches('/');
        let (plan, kept_for) = match mcp::prepare(url).await {
            Ok(plan) if plan.issuer.trim_end_matches('/') == team => {
                (Some(Arc::new(plan)), PLAN_FOR)
            }
            Ok(_) => (None, PLAN_FOR),
            Err(e) => {
                tracing::debug!(
                    "the MCP server at {} could not be asked: {e}",
                    mcp::origin(url)
                );
                (None, UNKNOWN_FOR)
            }
        };
        let mut plans = self.plans.lock().expect("plans lock");
        let judged = (plan.clone(), Instant::now() + kept_for);
        keep(&mut plans, url.to_owned(), judged, |(_, until)| {
            Instant::now() >= *until
        });
        plan
    }
}

/// Inserts into a cache of at most [`KEPT`] entries: when it is full, the entries `stale`
/// says are past go first, then all.
fn keep<K: Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    key: K,
    value: V,
    stale: impl Fn(&V) -> bool,
) {
    if map.len() >= KEPT {
        map.retain(|_, v| !stale(v));
        if map.len() >= KEPT {
            map.clear();
        }
    }
    map.insert(key, value);
}

fn digest(token: &str) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(token.as_bytes()).into()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
