//! A person acting upstream as themselves without signing in there: when a remote MCP
//! server names the team's authorization server in its resource metadata, and that
//! server offers token exchange (RFC 8693) and knows the gateway as a confidential client,
//! the person's own access token is exchanged for one for the MCP server
//! (`auth::mcp::exchange`). Whether a server qualifies is found once per ten minutes;
//! exchanged tokens are kept in memory only, each until a minute before it expires and
//! never past the person's own token.

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
        let now = unix_now();
        if let Some((token, until)) = self.tokens.lock().expect("tokens lock").get(&key)
            && *until > now
        {
            return Some(token.clone());
        }
        let plan = self.plan(url).await?;
        let client = self.team.client().filter(|c| c.secret.is_some())?;
        let server = self.team.server().await.ok()?;
        if !mcp::exchange::offered(&server) {
            return None;
        }
        let exchanged = mcp::exchange::token(
            &server,
            &client,
            subject,
            &plan.resource,
            plan.scopes.as_deref(),
        )
        .await;
        let tokens = match exchanged {
            Ok(tokens) => tokens,
            Err(e) => {
                tracing::warn!(
                    person = %person.subject,
                    "the team's authorization server did not exchange the person's token for the MCP server at {}: {e}",
                    mcp::origin(url)
                );
                return None;
            }
        };
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
            if kept.len() >= KEPT {
                kept.retain(|_, (_, until)| *until > now);
                if kept.len() >= KEPT {
                    kept.clear();
                }
            }
            kept.insert(key, (token.clone(), until));
        }
        Some(token)
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
        if plans.len() >= KEPT {
            plans.clear();
        }
        plans.insert(url.to_owned(), (plan.clone(), Instant::now() + kept_for));
        plan
    }
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
