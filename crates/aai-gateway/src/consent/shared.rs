//! The consent gate on the shared store (config `store`): grants and pending calls in
//! PostgreSQL, so that every replica honours the same grants and any replica's web UI
//! sees and answers a call waiting on another.
//!
//! * Grants stay cached in memory (calls never wait for the database to find one); the
//!   cache is read whole at start, again when another replica says it changed them
//!   (`NOTIFY grants`), and every second while the listening connection is down (every
//!   30 s otherwise, in case a notification was missed).
//! * A call that must wait for an answer writes its pending row first; when the store is
//!   down it fails at once with SERVICE_UNAVAILABLE rather than wait for an answer no
//!   replica could give. The replica that asked owns the row: an answer given on any
//!   replica is written into the row and announced (`NOTIFY answer:<replica>`); the owner
//!   takes it (deleting the row) and releases its waiting call. While the owner's
//!   listening connection is down, it polls for answers every second.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::consent::fingerprint::Definition;
use crate::consent::state::{Grant, read_definition, write_definition};
use crate::consent::{Choice, Gate, NotPending, Pending};
use crate::store::{Event, Shared};

/// How often answers and grants are read while the listener is down, and while it is up.
const POLL_DOWN: Duration = Duration::from_secs(1);
const POLL_UP: Duration = Duration::from_secs(30);
/// Pending rows older than this are removed whatever their state (the longest wait is an
/// hour, and a refused call is kept an hour).
const PENDING_KEPT_MS: i64 = 2 * 3600 * 1000;

/// Why an answer given in the web UI did not reach its call.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// No such call waits.
    #[error(transparent)]
    NotPending(#[from] NotPending),
    /// The store is down.
    #[error(transparent)]
    Store(#[from] crate::store::Error),
}

/// Why grants could not be revoked.
#[derive(Debug, thiserror::Error)]
pub enum RevokeError {
    /// `state.db` failed.
    #[error(transparent)]
    State(#[from] crate::consent::state::Error),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::store::Error),
}

/// Every grant, oldest first.
pub(crate) async fn grants(shared: &Shared) -> Result<Vec<Grant>, crate::store::Error> {
    let client = shared.client().await?;
    let rows = shared
        .timed(client.query(
            "SELECT caller, app, tool, granted_at, cert, definition FROM aai_grants ORDER BY granted_at, caller, app, tool",
            &[],
        ))
        .await?;
    Ok(rows
        .iter()
        .map(|r| Grant {
            caller: r.get(0),
            app: r.get(1),
            tool: r.get(2),
            granted_at: r.get::<_, i64>(3).max(0) as u64,
            cert: r.get(4),
            definition: read_definition(r.get::<_, Option<&str>>(5)),
        })
        .collect())
}

/// Records `grant` and tells the other replicas; `saved` runs once the row is committed,
/// before they are told.
pub(crate) async fn grant(
    shared: &Shared,
    grant: &Grant,
    saved: impl FnOnce(),
) -> Result<(), crate::store::Error> {
    let client = shared.client().await?;
    shared
        .timed(client.execute(
            "INSERT INTO aai_grants (caller, app, tool, granted_at, cert, definition) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (caller, app, tool) DO UPDATE SET granted_at = EXCLUDED.granted_at, cert = EXCLUDED.cert,
                 definition = EXCLUDED.definition",
            &[
                &grant.caller,
                &grant.app,
                &grant.tool,
                &i64::try_from(grant.granted_at).unwrap_or(i64::MAX),
                &grant.cert,
                &write_definition(grant.definition.as_ref()),
            ],
        ))
        .await?;
    saved();
    shared.notify("grants").await
}

/// Ties a grant that keeps no tool definition yet to `definition`, and tells the other
/// replicas.
async fn adopt(
    shared: &Shared,
    (caller, app, tool): &(String, String, String),
    definition: &Definition,
) -> Result<(), crate::store::Error> {
    let client = shared.client().await?;
    shared
        .timed(client.execute(
            "UPDATE aai_grants SET definition = $4 WHERE caller = $1 AND app = $2 AND tool = $3 AND definition IS NULL",
            &[caller, app, tool, &write_definition(Some(definition))],
        ))
        .await?;
    shared.notify("grants").await
}

/// [`adopt`] in the background (the gate already holds it in memory).
pub(crate) fn adopt_later(
    shared: &Arc<Shared>,
    key: (String, String, String),
    definition: Definition,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let shared = shared.clone();
    runtime.spawn(async move {
        if let Err(e) = adopt(&shared, &key, &definition).await {
            tracing::warn!("the grant's tool definition is kept for this run only: {e}");
        }
    });
}

/// Removes grants (only `tool`'s, only `caller`'s when given); how many.
pub(crate) async fn revoke(
    shared: &Shared,
    app: &str,
    tool: Option<&str>,
    caller: Option<&str>,
) -> Result<usize, crate::store::Error> {
    let client = shared.client().await?;
    let n = shared
        .timed(client.execute(
            "DELETE FROM aai_grants WHERE app = $1 AND ($2::TEXT IS NULL OR tool = $2) AND ($3::TEXT IS NULL OR caller = $3)",
            &[&app, &tool, &caller],
        ))
        .await?;
    shared.notify("grants").await?;
    Ok(n as usize)
}

/// Writes a pending call (replacing a refused one for the same call); its id, which every
/// replica's UI answers it by.
pub(crate) async fn add_pending(
    shared: &Shared,
    info: &Pending,
) -> Result<u64, crate::store::Error> {
    let client = shared.client().await?;
    let now = clamp(info.at_ms);
    shared
        .timed(client.execute(
            "DELETE FROM aai_pending WHERE at_ms < $1
                OR (caller = $2 AND app = $3 AND once_tool = $4 AND NOT waiting)",
            &[
                &(now - PENDING_KEPT_MS),
                &info.caller,
                &info.app,
                &info.once_tool,
            ],
        ))
        .await?;
    let shown = serde_json::to_value(info).expect("pending entries serialize");
    let row = shared
        .timed(client.query_one(
            "INSERT INTO aai_pending (replica, caller, app, once_tool, at_ms, waiting, info)
             VALUES ($1, $2, $3, $4, $5, true, $6::TEXT::JSONB) RETURNING id",
            &[
                &shared.replica(),
                &info.caller,
                &info.app,
                &info.once_tool,
                &now,
                &shown.to_string(),
            ],
        ))
        .await?;
    Ok(row.get::<_, i64>(0).max(0) as u64)
}

/// The pending calls of every replica not answered yet, newest first.
pub(crate) async fn pending(shared: &Shared) -> Result<Vec<Pending>, crate::store::Error> {
    let client = shared.client().await?;
    let rows = shared
        .timed(client.query(
            "SELECT id, waiting, info::TEXT FROM aai_pending
             WHERE answer IS NULL AND at_ms >= $1 AND (waiting OR at_ms >= $2)
             ORDER BY id DESC LIMIT 100",
            &[
                &(clamp(crate::consent::now_ms()) - PENDING_KEPT_MS),
                &(clamp(crate::consent::now_ms()) - crate::consent::REFUSED_KEPT_MS as i64),
            ],
        ))
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let mut p: Pending = serde_json::from_str(r.get::<_, &str>(2)).ok()?;
            p.id = r.get::<_, i64>(0).max(0) as u64;
            p.waiting = r.get(1);
            Some(p)
        })
        .collect())
}

/// Answers pending call `id`, whichever replica asked: written into its row and
/// announced to its owner. This replica's own calls are answered at once.
pub(crate) async fn answer(
    gate: &Gate,
    shared: &Shared,
    id: u64,
    choice: Choice,
) -> Result<&'static str, AnswerError> {
    let client = shared.client().await?;
    let wire = Choice::ALL
        .iter()
        .find(|(c, _, _)| *c == choice)
        .map_or("deny", |(_, v, _)| *v);
    let row = shared
        .timed(client.query_opt(
            "UPDATE aai_pending SET answer = $2 WHERE id = $1 AND answer IS NULL RETURNING replica",
            &[&clamp(id), &wire],
        ))
        .await?
        .ok_or(NotPending(id))?;
    let owner: String = row.get(0);
    if owner == shared.replica() {
        take_answers(gate, shared).await?;
        return Ok("answered");
    }
    shared.notify(&format!("answer:{owner}")).await?;
    Ok("sent to the gateway replica the call came to")
}

/// Takes the answers given (anywhere) to this replica's pending calls and follows them.
async fn take_answers(gate: &Gate, shared: &Shared) -> Result<(), crate::store::Error> {
    let client = shared.client().await?;
    let rows = shared
        .timed(client.query(
            "DELETE FROM aai_pending WHERE replica = $1 AND answer IS NOT NULL RETURNING id, answer",
            &[&shared.replica()],
        ))
        .await?;
    for r in rows {
        let id = r.get::<_, i64>(0).max(0) as u64;
        let Some(choice) = Choice::parse(r.get(1)) else {
            continue;
        };
        match gate.answer(id, choice) {
            Ok(what) => tracing::info!("pending call {id} answered on another replica: {what}"),
            Err(e) => tracing::info!("{e}"),
        }
    }
    Ok(())
}

/// Forgets pending call `id` (allowed some other way), or marks it refused (kept for the
/// approval of its retry). In the background: the call does not wait for it.
pub(crate) fn settle(shared: &Arc<Shared>, id: u64, refused: bool) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let shared = shared.clone();
    runtime.spawn(async move {
        let result = async {
            let client = shared.client().await?;
            let sql = if refused {
                "UPDATE aai_pending SET waiting = false, info = jsonb_set(info, '{waiting}', 'false') WHERE id = $1"
            } else {
                "DELETE FROM aai_pending WHERE id = $1"
            };
            shared.timed(client.execute(sql, &[&clamp(id)])).await
        }
        .await;
        if let Err(e) = result {
            tracing::warn!("pending call {id} could not be updated: {e}");
        }
    });
}

/// Stores a grant in the background (the gate already holds it in memory).
pub(crate) fn store_grant(shared: &Arc<Shared>, g: Grant, saved: impl FnOnce() + Send + 'static) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("the grant is kept for this run only: no runtime to store it");
        return;
    };
    let shared = shared.clone();
    runtime.spawn(async move {
        if let Err(e) = grant(&shared, &g, saved).await {
            tracing::warn!("the grant is kept for this run only: {e}");
        }
    });
}

/// Reads every grant into the gate's cache.
pub(crate) async fn load(gate: &Gate, shared: &Shared) -> Result<(), crate::store::Error> {
    let all = grants(shared).await?;
    gate.replace_grants(all);
    Ok(())
}

/// Keeps `gate` in step with the other replicas until `stop` (see the module).
pub(crate) fn follow(
    gate: &Arc<Gate>,
    shared: Arc<Shared>,
    stop: tokio_util::sync::CancellationToken,
) {
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    shared.listen(tx, stop.clone());
    let gate: Weak<Gate> = Arc::downgrade(gate);
    tokio::spawn(async move {
        let mut listening = false;
        let mut failing = false;
        loop {
            let wait = if listening { POLL_UP } else { POLL_DOWN };
            let event = tokio::select! {
                () = stop.cancelled() => return,
                e = events.recv() => match e {
                    Some(e) => Some(e),
                    None => return,
                },
                () = tokio::time::sleep(wait) => None,
            };
            let Some(gate) = gate.upgrade() else { return };
            let (grants, answers) = match &event {
                Some(Event::Up) => {
                    listening = true;
                    (true, true)
                }
                Some(Event::Down) => {
                    listening = false;
                    (false, false)
                }
                Some(Event::Message(m)) if m == "grants" => (true, false),
                Some(Event::Message(m)) => {
                    (false, m.strip_prefix("answer:") == Some(shared.replica()))
                }
                None => (true, true),
            };
            let mut result = Ok(());
            if grants {
                result = load(&gate, &shared).await;
            }
            if answers && result.is_ok() {
                result = take_answers(&gate, &shared).await;
            }
            match result {
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(
                        "{e}; grants and answers from other replicas wait until it is back"
                    );
                }
                Ok(()) if failing && (grants || answers) => {
                    failing = false;
                    tracing::info!("the shared store is back");
                }
                _ => {}
            }
        }
    });
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
