//! Rate limits (config `rateLimits`, [docs/rate-limits.md](../../../docs/rate-limits.md)):
//! token buckets per person and per app, kept in this process, or in the shared store when
//! the gateway has one (every replica then takes from the same buckets: one statement per
//! call; a replica that cannot reach the store falls back to its own buckets meanwhile).
//!
//! A bucket holds at most `burst` calls and refills at `perMinute` a minute; a call takes
//! one, and a call that finds its bucket empty is refused with RATE_LIMITED and how long
//! until the next one is there (`data.retryAfterSecs`). The pipeline asks before anything
//! else happens to a call (before consent, before any executor): the person's bucket first
//! (every call they make counts, even one that then fails), then, once the app is known,
//! the app's. The user's own calls (`call`, the web UI's "try it") have no person bucket;
//! they count towards the app's.
//!
//! Memory is bounded: at most [`MAX_KEYS`] buckets of each kind. A full bucket is the
//! same as none, so full ones are dropped first; when every bucket is in use the ones
//! closest to full go.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::{Limit, RateLimits};
use crate::error::{Code, GatewayError};
use crate::identity::Caller;

/// Most buckets of one kind (people, apps) kept at once.
pub(crate) const MAX_KEYS: usize = 10_000;

/// The person a call counts against: for a person of the team their token's subject
/// (whatever client they use), else the caller's key (client name, transport, token id).
/// This is the one place that decides it.
pub(crate) fn person_of(caller: &Caller) -> String {
    caller.person_key()
}

/// What a limit applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `perPerson`.
    Person,
    /// `perApp`.
    App,
}

impl Scope {
    /// `person` or `app` (in `data.scope` and the metric's label).
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Person => "person",
            Scope::App => "app",
        }
    }
}

/// A call refused because its bucket is empty. `From<Error> for GatewayError` below gives
/// RATE_LIMITED with `data.retryAfterSecs`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The caller's own limit.
    #[error(
        "too many calls from this caller: at most {} a minute (bursts of {}) on this gateway; retry in {retry_after_secs} s",
        .limit.per_minute, .limit.burst
    )]
    Person {
        /// The limit.
        limit: Limit,
        /// Whole seconds until a call is allowed again (at least 1).
        retry_after_secs: u64,
    },
    /// The app's limit (all callers together).
    #[error(
        "too many calls of `{app}`: at most {} a minute (bursts of {}) on this gateway, for all callers together; retry in {retry_after_secs} s",
        .limit.per_minute, .limit.burst
    )]
    App {
        /// The app id.
        app: String,
        /// The limit.
        limit: Limit,
        /// Whole seconds until a call is allowed again (at least 1).
        retry_after_secs: u64,
    },
}

impl Error {
    /// Which limit refused the call.
    pub fn scope(&self) -> Scope {
        match self {
            Error::Person { .. } => Scope::Person,
            Error::App { .. } => Scope::App,
        }
    }

    /// Whole seconds until a call is allowed again.
    pub fn retry_after_secs(&self) -> u64 {
        match self {
            Error::Person {
                retry_after_secs, ..
            }
            | Error::App {
                retry_after_secs, ..
            } => *retry_after_secs,
        }
    }
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let wait = e.retry_after_secs();
        let scope = e.scope();
        let wire = GatewayError::new(Code::RateLimited, e.to_string())
            .with_hint(format!(
                "Wait {wait} s (data.retryAfterSecs) before calling again; calls made sooner are refused too."
            ))
            .with("retryAfterSecs", wait)
            .with("scope", scope.as_str());
        match e {
            Error::App { app, .. } => wire.with("app", app),
            Error::Person { .. } => wire,
        }
    }
}

/// Monotonic time, injectable for tests.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Time since some fixed start; never goes back.
    fn now(&self) -> Duration;
}

/// The real clock.
#[derive(Debug)]
struct Monotonic(std::time::Instant);

impl Clock for Monotonic {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// A token bucket: `tokens` as of `at`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Duration,
}

/// Rounding slack: a bucket this close to a whole call has it.
const EPSILON: f64 = 1e-9;

impl Bucket {
    fn full(limit: Limit, now: Duration) -> Bucket {
        Bucket {
            tokens: f64::from(limit.burst),
            at: now,
        }
    }

    /// Calls per second.
    fn rate(limit: Limit) -> f64 {
        f64::from(limit.per_minute) / 60.0
    }

    /// The tokens at `now` (never more than `burst`).
    fn level(&self, limit: Limit, now: Duration) -> f64 {
        let elapsed = now.saturating_sub(self.at).as_secs_f64();
        (self.tokens + elapsed * Bucket::rate(limit)).min(f64::from(limit.burst))
    }

    /// Takes one call, or says how long until one is there.
    fn take(&mut self, limit: Limit, now: Duration) -> Result<(), Duration> {
        self.tokens = self.level(limit, now);
        self.at = now;
        if self.tokens + EPSILON >= 1.0 {
            self.tokens = (self.tokens - 1.0).max(0.0);
            return Ok(());
        }
        Err(Duration::from_secs_f64(
            (1.0 - self.tokens) / Bucket::rate(limit),
        ))
    }

    fn is_full(&self, limit: Limit, now: Duration) -> bool {
        self.level(limit, now) + EPSILON >= f64::from(limit.burst)
    }
}

/// Buckets by key, at most `cap`.
#[derive(Debug)]
struct Buckets {
    map: HashMap<String, Bucket>,
    cap: usize,
}

impl Buckets {
    fn new(cap: usize) -> Buckets {
        Buckets {
            map: HashMap::new(),
            cap,
        }
    }

    /// Takes one call from `key`'s bucket (made full when it has none).
    fn take(
        &mut self,
        key: &str,
        limit: Limit,
        now: Duration,
        limit_of: impl Fn(&str) -> Option<Limit>,
    ) -> Result<(), Duration> {
        if let Some(bucket) = self.map.get_mut(key) {
            return bucket.take(limit, now);
        }
        if self.map.len() >= self.cap {
            self.evict(now, limit_of);
        }
        let mut bucket = Bucket::full(limit, now);
        let taken = bucket.take(limit, now);
        self.map.insert(key.to_owned(), bucket);
        taken
    }

    /// Makes room: drops full buckets (a full bucket is the same as none); when that
    /// frees less than a tenth, also the ones closest to full, down to nine tenths of the
    /// cap (so that the next new keys do not each scan every bucket).
    fn evict(&mut self, now: Duration, limit_of: impl Fn(&str) -> Option<Limit>) {
        self.map
            .retain(|key, b| limit_of(key).is_some_and(|l| !b.is_full(l, now)));
        let keep = self.cap - self.cap / 10;
        if self.map.len() <= keep {
            return;
        }
        // Emptiest first: the fullest, which lose the least by being forgotten, go.
        let mut levels: Vec<(f64, String)> = self
            .map
            .iter()
            .map(|(k, b)| {
                let level = limit_of(k).map_or(1.0, |l| b.level(l, now) / f64::from(l.burst));
                (level, k.clone())
            })
            .collect();
        let at = keep.min(levels.len().saturating_sub(1));
        levels.select_nth_unstable_by(at, |a, b| a.0.total_cmp(&b.0));
        for (_, key) in levels.drain(at..) {
            self.map.remove(&key);
        }
    }
}

/// The rate limits of one process: buckets per person and per app.
#[derive(Debug)]
pub struct Limiter {
    limits: RateLimits,
    clock: Arc<dyn Clock>,
    people: Mutex<Buckets>,
    apps: Mutex<Buckets>,
    /// The shared store whose buckets every replica takes from, when there is one.
    store: Option<Arc<crate::store::Shared>>,
    /// When the store last failed to answer, and when that was last said (at most once
    /// a minute).
    failed: Mutex<(Option<Duration>, Option<Duration>)>,
}

/// How long after the store failed to answer this replica counts in its own buckets
/// before it asks the store again (a call must not wait out the store's deadline each
/// time while it is down).
const STORE_PAUSE: Duration = Duration::from_secs(5);

impl Limiter {
    /// Limits `limits`, on the real clock; in `store`'s buckets when there is one.
    pub fn new(limits: RateLimits, store: Option<Arc<crate::store::Shared>>) -> Limiter {
        Limiter {
            store,
            ..Limiter::with_clock(
                limits,
                Arc::new(Monotonic(std::time::Instant::now())),
                MAX_KEYS,
            )
        }
    }

    /// Limits `limits` on `clock`, with at most `cap` buckets of each kind (tests).
    pub fn with_clock(limits: RateLimits, clock: Arc<dyn Clock>, cap: usize) -> Limiter {
        Limiter {
            limits,
            clock,
            people: Mutex::new(Buckets::new(cap.max(1))),
            apps: Mutex::new(Buckets::new(cap.max(1))),
            store: None,
            failed: Mutex::new((None, None)),
        }
    }

    /// Takes one call from the bucket `key` of `scope`: the shared store's, else (or
    /// while it does not answer) this process's. `Err`: how long until there is one.
    async fn take(
        &self,
        scope: Scope,
        key: &str,
        limit: Limit,
        limit_of: impl Fn(&str) -> Option<Limit>,
    ) -> Result<(), Duration> {
        let now = self.clock.now();
        let paused = || {
            let failed = self.failed.lock().expect("rate limit lock").0;
            failed.is_some_and(|at| now.saturating_sub(at) < STORE_PAUSE)
        };
        if let Some(store) = self.store.as_ref().filter(|_| !paused()) {
            let burst = f64::from(limit.burst);
            match store
                .take_call(scope.as_str(), key, burst, Bucket::rate(limit))
                .await
            {
                Ok(None) => return Ok(()),
                Ok(Some(wait)) => return Err(Duration::from_secs_f64(wait)),
                Err(e) => {
                    let now = self.clock.now();
                    let mut failed = self.failed.lock().expect("rate limit lock");
                    failed.0 = Some(now);
                    if failed
                        .1
                        .is_none_or(|at| now.saturating_sub(at) >= Duration::from_secs(60))
                    {
                        failed.1 = Some(now);
                        tracing::warn!(
                            "rate limits: the shared store failed ({e}); this replica counts calls in its own buckets until it works again"
                        );
                    }
                }
            }
        }
        let buckets = match scope {
            Scope::Person => &self.people,
            Scope::App => &self.apps,
        };
        buckets
            .lock()
            .expect("rate limit lock")
            .take(key, limit, now, limit_of)
    }

    /// Takes one call from `caller`'s person bucket; the user themselves has none.
    pub async fn admit_person(&self, caller: &Caller) -> Result<(), Error> {
        let Some(limit) = self.limits.per_person else {
            return Ok(());
        };
        if caller.is_user() {
            return Ok(());
        }
        let person = person_of(caller);
        self.take(Scope::Person, &person, limit, |_| Some(limit))
            .await
            .map_err(|wait| Error::Person {
                limit,
                retry_after_secs: whole_seconds(wait),
            })
    }

    /// Takes one call from app `app`'s bucket (its own limit, else `perApp.default`).
    pub async fn admit_app(&self, app: &str) -> Result<(), Error> {
        let Some(limit) = self.limits.app(app) else {
            return Ok(());
        };
        self.take(Scope::App, app, limit, |id| self.limits.app(id))
            .await
            .map_err(|wait| Error::App {
                app: app.to_owned(),
                limit,
                retry_after_secs: whole_seconds(wait),
            })
    }

    /// How many person and app buckets are kept now.
    pub fn kept(&self) -> (usize, usize) {
        (
            self.people.lock().expect("rate limit lock").map.len(),
            self.apps.lock().expect("rate limit lock").map.len(),
        )
    }
}

/// `wait` rounded up to whole seconds, at least 1.
fn whole_seconds(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock the test moves.
    #[derive(Debug, Default)]
    struct Manual(Mutex<Duration>);

    impl Manual {
        fn advance(&self, by: Duration) {
            *self.0.lock().unwrap() += by;
        }
    }

    impl Clock for Manual {
        fn now(&self) -> Duration {
            *self.0.lock().unwrap()
        }
    }

    fn limit(per_minute: u32, burst: u32) -> Limit {
        Limit { per_minute, burst }
    }

    fn caller(name: &str) -> Caller {
        Caller {
            name: name.into(),
            transport: "http",
            token: Some("1a2b3c4d".into()),
            person: None,
        }
    }

    fn limiter(limits: RateLimits, cap: usize) -> (Arc<Manual>, Limiter) {
        let clock = Arc::new(Manual::default());
        (clock.clone(), Limiter::with_clock(limits, clock, cap))
    }

    #[tokio::test]
    async fn a_bucket_allows_its_burst_then_refills_at_its_rate() {
        let (clock, l) = limiter(
            RateLimits {
                per_person: Some(limit(60, 3)),
                ..RateLimits::default()
            },
            100,
        );
        let a = caller("a");
        for _ in 0..3 {
            l.admit_person(&a).await.unwrap();
        }
        let e = l.admit_person(&a).await.unwrap_err();
        assert_eq!(e.scope(), Scope::Person);
        assert_eq!(e.retry_after_secs(), 1, "one a second");
        // Another person has a bucket of their own.
        l.admit_person(&caller("b")).await.unwrap();
        // Half a call's time: still refused, and still "1 s" (rounded up, never 0).
        clock.advance(Duration::from_millis(500));
        assert_eq!(l.admit_person(&a).await.unwrap_err().retry_after_secs(), 1);
        clock.advance(Duration::from_millis(500));
        l.admit_person(&a).await.unwrap();
        assert!(l.admit_person(&a).await.is_err());
        // A long pause refills to the burst, never beyond it.
        clock.advance(Duration::from_secs(3600));
        for _ in 0..3 {
            l.admit_person(&a).await.unwrap();
        }
        assert!(l.admit_person(&a).await.is_err());
    }

    #[tokio::test]
    async fn retry_after_rounds_up_to_whole_seconds() {
        let (clock, l) = limiter(
            RateLimits {
                per_person: Some(limit(6, 1)),
                ..RateLimits::default()
            },
            100,
        );
        let a = caller("a");
        l.admit_person(&a).await.unwrap();
        assert_eq!(l.admit_person(&a).await.unwrap_err().retry_after_secs(), 10);
        clock.advance(Duration::from_millis(8_500));
        assert_eq!(l.admit_person(&a).await.unwrap_err().retry_after_secs(), 2);
        let wire = GatewayError::from(l.admit_person(&a).await.unwrap_err());
        assert_eq!(wire.code, Code::RateLimited);
        assert_eq!(wire.data()["retryAfterSecs"], 2);
        assert_eq!(wire.data()["scope"], "person");
        assert!(
            !wire.to_json().to_string().contains("1a2b3c4d"),
            "the caller's token id is not repeated"
        );
    }

    #[tokio::test]
    async fn apps_have_their_own_limit_or_the_default_and_the_user_has_no_person_bucket() {
        let mut per_app = std::collections::BTreeMap::new();
        per_app.insert("com.example.slow".to_owned(), limit(60, 1));
        let (_clock, l) = limiter(
            RateLimits {
                per_person: Some(limit(60, 1)),
                per_app_default: Some(limit(60, 2)),
                per_app,
            },
            100,
        );
        l.admit_app("com.example.slow").await.unwrap();
        let e = l.admit_app("com.example.slow").await.unwrap_err();
        assert_eq!(e.scope(), Scope::App);
        let wire = GatewayError::from(e);
        assert_eq!(wire.data()["app"], "com.example.slow");
        l.admit_app("com.example.other").await.unwrap();
        l.admit_app("com.example.other").await.unwrap();
        assert!(l.admit_app("com.example.other").await.is_err());
        for _ in 0..10 {
            l.admit_person(&Caller::cli()).await.unwrap();
            l.admit_person(&Caller::ui()).await.unwrap();
        }
        assert_eq!(l.kept().0, 0, "no bucket for the user");
        // Without limits nothing is counted.
        let (_c, none) = limiter(RateLimits::default(), 100);
        for _ in 0..100 {
            none.admit_person(&caller("a")).await.unwrap();
            none.admit_app("x").await.unwrap();
        }
        assert_eq!(none.kept(), (0, 0));
    }

    #[tokio::test]
    async fn many_people_never_grow_the_map_past_its_cap() {
        let (clock, l) = limiter(
            RateLimits {
                per_person: Some(limit(60, 5)),
                ..RateLimits::default()
            },
            50,
        );
        // A hostile client inventing names: the map stays bounded.
        for i in 0..10_000 {
            l.admit_person(&caller(&format!("client-{i}")))
                .await
                .unwrap();
            assert!(l.kept().0 <= 50, "{} at {i}", l.kept().0);
        }
        // A busy person whose bucket is emptier than the newcomers' keeps it.
        let busy = caller("busy");
        for _ in 0..5 {
            l.admit_person(&busy).await.unwrap();
        }
        for i in 0..45 {
            l.admit_person(&caller(&format!("late-{i}"))).await.unwrap();
        }
        assert!(
            l.admit_person(&busy).await.is_err(),
            "an emptied bucket is not forgotten first"
        );
        // Idle buckets refill and are dropped when room is needed: the map fills up to
        // its cap, and the next newcomer makes room.
        clock.advance(Duration::from_secs(60));
        let before = l.kept().0;
        for i in 0..=(50 - before) {
            l.admit_person(&caller(&format!("new-{i}"))).await.unwrap();
        }
        assert_eq!(
            l.kept().0,
            51 - before,
            "every full bucket went, the new ones (not full) stayed"
        );
    }
}
