//! Rate limit buckets in the shared store, so that every replica takes from the same ones
//! (docs/rate-limits.md, "Replicas"): one statement per call refills the bucket by the
//! database's clock, takes a call when there is one, and says whether it did.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Error, Shared};

/// Takes one call from a bucket (made full when it is new); `granted` says whether there
/// was one, `tokens` is what is left.
const TAKE: &str = "
INSERT INTO aai_rate_buckets AS b (scope, key, tokens, at, burst, rate, granted)
VALUES ($1::text, $2::text, $3::float8 - 1, now(), $3::float8, $4::float8, true)
ON CONFLICT (scope, key) DO UPDATE SET
    tokens = LEAST($3::float8, b.tokens + EXTRACT(EPOCH FROM now() - b.at)::float8 * $4::float8)
        - CASE WHEN LEAST($3::float8, b.tokens + EXTRACT(EPOCH FROM now() - b.at)::float8 * $4::float8) + 1e-9 >= 1
               THEN 1 ELSE 0 END,
    granted = LEAST($3::float8, b.tokens + EXTRACT(EPOCH FROM now() - b.at)::float8 * $4::float8) + 1e-9 >= 1,
    at = now(), burst = $3::float8, rate = $4::float8
RETURNING granted, tokens";

/// Drops the buckets that have refilled (a full bucket is the same as none).
const SWEEP: &str = "
DELETE FROM aai_rate_buckets
WHERE tokens + EXTRACT(EPOCH FROM now() - at)::float8 * rate >= burst";

/// Takes between two sweeps by this replica.
const SWEEP_EVERY: u64 = 1024;

static TAKES: AtomicU64 = AtomicU64::new(0);

impl Shared {
    /// Takes one call from the bucket `key` of `scope` (`person`, `app`), of at most
    /// `burst` calls refilled at `rate` a second: `Ok(None)` when taken, `Ok(Some(secs))`
    /// when empty (and how long until a call is there).
    pub async fn take_call(
        &self,
        scope: &str,
        key: &str,
        burst: f64,
        rate: f64,
    ) -> Result<Option<f64>, Error> {
        let client = self.client().await?;
        let row = self
            .timed(client.query_one(TAKE, &[&scope, &key, &burst, &rate]))
            .await?;
        let (granted, tokens): (bool, f64) = (row.get(0), row.get(1));
        if TAKES.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1
            && let Err(e) = self.timed(client.execute(SWEEP, &[])).await
        {
            tracing::debug!("the shared rate limit buckets were not swept: {e}");
        }
        Ok((!granted).then(|| ((1.0 - tokens) / rate).max(0.0)))
    }
}
