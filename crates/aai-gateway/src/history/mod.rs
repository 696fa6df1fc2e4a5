//! Call history in `$AAI_HOME/state.db`, written on a thread of its own so a call never
//! waits for the disk. A record after a quiet spell is committed at once; in a burst of
//! calls the writer commits at most every [`GROUP_COMMIT`] (10 ms), all that came meanwhile
//! in one transaction.
//!
//! Each record: time, caller, app, tool, arguments (values of secret-looking fields masked,
//! long values cut), status, error type, duration, and a result excerpt. Credentials never
//! reach it: the pipeline scrubs the secrets a request carried from the excerpt, and
//! argument fields named like secrets are masked. Retention (config `history.days`,
//! `history.rows`) is applied when the writer starts and every 1,000 records.
//!
//! The store sits behind [`Sink`] so a shared deployment can put it elsewhere.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};

use rusqlite::{Connection, params};
use serde_json::Value;

mod masking;
pub(crate) mod usage;

use masking::mask_text;
pub(crate) use masking::mask_tokens;
pub use masking::{excerpt, mask};

/// How many records may wait for the writer; beyond, records are dropped (and counted)
/// rather than slowing calls.
const QUEUE: usize = 10_000;
/// Longest kept argument string, and result excerpt.
const MAX_VALUE: usize = 200;
const MAX_RESULT: usize = 500;
/// Longest kept caller, app or tool name.
const MAX_NAME: usize = 200;
/// The shortest time between two commits of the local history in a burst of calls: a
/// commit costs 100–150 µs of CPU (and an fsync, before `synchronous = NORMAL`), which one
/// record per call would pay at every call (docs/performance.md, "The proxy path").
const GROUP_COMMIT: std::time::Duration = std::time::Duration::from_millis(10);

/// What went wrong with the history.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened (or created).
    #[error("{}: {source}", file.display())]
    Open {
        /// The history's file.
        file: PathBuf,
        /// Why.
        #[source]
        source: rusqlite::Error,
    },
    /// Reading or counting failed.
    #[error("reading the call history failed: {0}")]
    Read(#[from] rusqlite::Error),
    /// The writer thread could not start.
    #[error("the history writer could not start: {0}")]
    Writer(#[source] std::io::Error),
    /// The shared store failed.
    #[error(transparent)]
    Shared(#[from] crate::store::Error),
    /// A duration that is not one (`--since`).
    #[error("`{0}` is not a duration such as 30m, 2h or 7d")]
    Duration(String),
}

/// One finished call.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Record {
    /// Unix time in milliseconds.
    pub at_ms: u64,
    /// `name@transport` (see [`crate::identity::Caller::key`]).
    pub caller: String,
    /// The person behind the call (the subject of the team's access token), when the
    /// caller signed in as one (`web.auth`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub person: Option<String>,
    /// App id (as asked for, when it did not resolve).
    pub app: String,
    /// The name the caller used, when it was not the id (`notes`, `笔记`, a URL).
    pub asked: Option<String>,
    /// Tool.
    pub tool: String,
    /// Arguments, masked and cut.
    pub args: Value,
    /// `ok` or `error`.
    pub status: String,
    /// The error type (`INVALID_PARAMS`…), for failures.
    pub code: Option<String>,
    /// How long the call took.
    pub duration_ms: u64,
    /// The start of the result or of the error detail, scrubbed.
    pub excerpt: String,
    /// The fingerprint of the tool's definition the call ran (what consent ties an
    /// "always" answer to: docs/consent.md, "A changed tool asks again"); none when the
    /// tool was not found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// The script run or batch the call was part of (`run-…`, `batch-…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

/// Where records go.
pub trait Sink: Send + Sync + std::fmt::Debug {
    /// Takes a record without blocking.
    fn record(&self, record: Record);

    /// Waits (at most `wait`) until every record taken so far is stored: what the
    /// gateway does before it exits, so that the last calls are not lost.
    fn flush(&self, wait: std::time::Duration) {
        let _ = wait;
    }

    /// What `caller` (and `person`) used: the calls that succeeded, per app and tool, that
    /// the store still keeps (none for a store that cannot say).
    fn usage(&self, caller: String, person: Option<String>) -> usage::Future {
        let _ = (caller, person);
        Box::pin(std::future::ready(Ok(Vec::new())))
    }
}

/// What the writer thread receives.
#[derive(Debug)]
enum Message {
    Record(Box<Record>),
    /// Answer when everything before it is stored.
    Flush(std::sync::mpsc::SyncSender<()>),
}

/// Retention limits.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Records older than this many days are deleted.
    pub days: u32,
    /// At most this many records are kept.
    pub rows: u64,
}

/// The SQLite history: a queue to a writer thread.
#[derive(Debug)]
pub struct Sqlite {
    queue: Sender<Message>,
    bound: Bound,
    /// Its file, for reading (the writer has its own connection).
    file: PathBuf,
}

/// What every writer's queue shares: records sent and not yet taken by the writer (at
/// most [`QUEUE`]), and how many were dropped.
#[derive(Debug, Default)]
struct Bound {
    queued: Arc<AtomicUsize>,
    dropped: AtomicU64,
}

impl Bound {
    /// Prepares `record` and hands it to `send` when the queue has room (`send` says
    /// whether the writer took it).
    fn record(&self, record: Record, send: impl FnOnce(Message) -> bool) {
        let record = prepare(record);
        if !admit(&self.queued, &self.dropped) {
            return;
        }
        // A writer that has gone (it could not open its store): the record is dropped.
        if !send(Message::Record(Box::new(record))) {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Asks the writer, through `send`, to store what waits, for at most `wait`; says so
    /// when records are still waiting in `store`.
    fn flush(&self, wait: std::time::Duration, store: &str, send: impl FnOnce(Message) -> bool) {
        let (done, stored) = std::sync::mpsc::sync_channel(1);
        if send(Message::Flush(done))
            && stored.recv_timeout(wait).is_err()
            && self.queued.load(Ordering::Relaxed) > 0
        {
            tracing::warn!(
                "the call history could not store its last {} records in {store} within {wait:?}",
                self.queued.load(Ordering::Relaxed)
            );
        }
    }
}

impl Sqlite {
    /// Opens `file` and starts the writer.
    pub fn open(file: &Path, retention: Retention) -> Result<Sqlite, Error> {
        let conn = connect(file).map_err(|source| Error::Open {
            file: file.to_owned(),
            source,
        })?;
        Sqlite::spawn(move || Some(conn), retention, file.to_owned())
    }

    /// Starts the writer, which opens `file` itself: nothing waits for the disk (the
    /// server's handshake does not). When the file cannot be opened, the writer says so
    /// and records are dropped.
    pub fn start(file: PathBuf, retention: Retention) -> Result<Sqlite, Error> {
        let at = file.clone();
        Sqlite::spawn(
            move || {
                connect(&file)
                    .inspect_err(|e| {
                        tracing::warn!("call history is off: {}: {e}", file.display());
                    })
                    .ok()
            },
            retention,
            at,
        )
    }

    fn spawn(
        open: impl FnOnce() -> Option<Connection> + Send + 'static,
        retention: Retention,
        file: PathBuf,
    ) -> Result<Sqlite, Error> {
        // A list channel: memory grows with what waits, not with the bound.
        let (queue, rx) = std::sync::mpsc::channel();
        let bound = Bound::default();
        let taken = bound.queued.clone();
        std::thread::Builder::new()
            .name("aai-history".into())
            .spawn(move || {
                if let Some(conn) = open() {
                    write_loop(&conn, &rx, &taken, retention);
                }
            })
            .map_err(Error::Writer)?;
        Ok(Sqlite { queue, bound, file })
    }
}

/// Masks and cuts what a record holds before it is queued (every store alike).
fn prepare(mut record: Record) -> Record {
    // What the caller typed may be a URL with a password in it, or carry a token (a tool
    // name is whatever the caller sent when it names no tool).
    record.app = mask_text(&record.app);
    record.asked = record.asked.as_deref().map(mask_text);
    record.tool = mask_text(&record.tool);
    // Free text: a result or an error may quote a token or a key.
    record.excerpt = mask_tokens(&record.excerpt);
    // Names come from clients and descriptors: they are cut like values.
    for name in [&mut record.caller, &mut record.app, &mut record.tool]
        .into_iter()
        .chain(record.asked.as_mut())
    {
        if name.chars().count() > MAX_NAME {
            *name = crate::text::excerpt(name, MAX_NAME);
        }
    }
    record
}

/// Takes a place in a queue bounded by [`QUEUE`]; `false` (the record is dropped and
/// counted) when it is full.
fn admit(queued: &AtomicUsize, dropped: &AtomicU64) -> bool {
    if queued.fetch_add(1, Ordering::Relaxed) >= QUEUE {
        queued.fetch_sub(1, Ordering::Relaxed);
        if dropped.fetch_add(1, Ordering::Relaxed).is_multiple_of(1000) {
            tracing::warn!("the history writer is behind; records are being dropped");
        }
        return false;
    }
    true
}

impl Sink for Sqlite {
    fn record(&self, record: Record) {
        self.bound.record(record, |m| self.queue.send(m).is_ok());
    }

    fn flush(&self, wait: std::time::Duration) {
        self.bound
            .flush(wait, "its file", |m| self.queue.send(m).is_ok());
    }

    fn usage(&self, caller: String, person: Option<String>) -> usage::Future {
        let file = self.file.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || usage::sqlite(&file, &caller, person.as_deref()))
                .await
                .unwrap_or_else(|e| Err(Error::Writer(std::io::Error::other(e))))
        })
    }
}

/// The history in the shared store (config `store`): the same bounded queue, and a writer
/// thread of its own (with its own small runtime) that writes to PostgreSQL in batches.
/// While the database is down, records wait in the queue — at most [`QUEUE`] of them,
/// beyond which new ones are dropped and counted, as when the writer is behind — and are
/// written when it is back, in order, each once (a batch written again after a lost
/// acknowledgement is ignored by its `(replica, seq)` key).
#[derive(Debug)]
pub struct Postgres {
    queue: tokio::sync::mpsc::UnboundedSender<Message>,
    bound: Bound,
    shared: Arc<crate::store::Shared>,
}

/// Most records in one write.
const PG_BATCH: usize = 500;

impl Postgres {
    /// Starts the writer (it connects when it has something to write).
    pub fn start(
        shared: Arc<crate::store::Shared>,
        retention: Retention,
    ) -> Result<Postgres, Error> {
        let (queue, rx) = tokio::sync::mpsc::unbounded_channel();
        let bound = Bound::default();
        let stored = bound.queued.clone();
        let reader = shared.clone();
        std::thread::Builder::new()
            .name("aai-history".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match runtime {
                    Ok(runtime) => runtime.block_on(pg_write_loop(&shared, rx, &stored, retention)),
                    Err(e) => tracing::warn!("call history is off: {e}"),
                }
            })
            .map_err(Error::Writer)?;
        Ok(Postgres {
            queue,
            bound,
            shared: reader,
        })
    }
}

impl Sink for Postgres {
    fn record(&self, record: Record) {
        self.bound.record(record, |m| self.queue.send(m).is_ok());
    }

    fn flush(&self, wait: std::time::Duration) {
        self.bound
            .flush(wait, "PostgreSQL", |m| self.queue.send(m).is_ok());
    }

    fn usage(&self, caller: String, person: Option<String>) -> usage::Future {
        let shared = self.shared.clone();
        Box::pin(async move { usage::postgres(&shared, &caller, person.as_deref()).await })
    }
}

async fn pg_write_loop(
    shared: &crate::store::Shared,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Message>,
    queued: &AtomicUsize,
    retention: Retention,
) {
    let mut waiting: std::collections::VecDeque<(i64, Record)> = Default::default();
    let mut flushes = Vec::new();
    let mut seq: i64 = 0;
    let mut since_prune = 0;
    let mut pruned = false;
    let mut failing = false;
    let mut pause = std::time::Duration::from_millis(250);
    loop {
        // Wait for work when there is none; else take what came meanwhile.
        if waiting.is_empty() {
            for done in flushes.drain(..) {
                let _ = std::sync::mpsc::SyncSender::send(&done, ());
            }
            match rx.recv().await {
                Some(m) => take(m, &mut waiting, &mut flushes, &mut seq),
                None => return,
            }
        }
        while let Ok(m) = rx.try_recv() {
            take(m, &mut waiting, &mut flushes, &mut seq);
        }
        if waiting.is_empty() {
            continue; // only flushes came: answered at the top
        }
        if !pruned || since_prune >= 1000 {
            pruned = pg_prune(shared, retention).await.is_ok();
            since_prune = 0;
        }
        let n = waiting.len().min(PG_BATCH);
        let batch: Vec<&(i64, Record)> = waiting.iter().take(n).collect();
        match pg_insert(shared, &batch).await {
            Ok(()) => {
                waiting.drain(..n);
                queued.fetch_sub(n, Ordering::Relaxed);
                since_prune += n;
                pause = std::time::Duration::from_millis(250);
                if failing {
                    failing = false;
                    tracing::info!("the call history is written to PostgreSQL again");
                }
            }
            Err(e) => {
                if !failing {
                    failing = true;
                    tracing::warn!(
                        "cannot write the call history: {e}; records wait (at most {QUEUE}) and are written when it is back"
                    );
                }
                // Keep taking records (and flushes) while waiting to try again.
                let sleep = tokio::time::sleep(pause);
                tokio::pin!(sleep);
                loop {
                    tokio::select! {
                        () = &mut sleep => break,
                        m = rx.recv() => match m {
                            Some(m) => take(m, &mut waiting, &mut flushes, &mut seq),
                            None => return,
                        },
                    }
                }
                pause = (pause * 2).min(std::time::Duration::from_secs(5));
            }
        }
    }
}

fn take(
    message: Message,
    waiting: &mut std::collections::VecDeque<(i64, Record)>,
    flushes: &mut Vec<std::sync::mpsc::SyncSender<()>>,
    seq: &mut i64,
) {
    match message {
        Message::Record(r) => {
            *seq += 1;
            waiting.push_back((*seq, *r));
        }
        Message::Flush(done) => flushes.push(done),
    }
}

async fn pg_insert(
    shared: &crate::store::Shared,
    batch: &[&(i64, Record)],
) -> Result<(), crate::store::Error> {
    let mut client = shared.client().await?;
    shared
        .timed(async {
            let tx = client.transaction().await?;
            let stmt = tx
                .prepare(
                    "INSERT INTO aai_history (at_ms, caller, app, tool, args, status, code, duration_ms, excerpt, asked, replica, seq, person, fingerprint, run)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
                     ON CONFLICT (replica, seq) DO NOTHING",
                )
                .await?;
            let replica = shared.replica();
            let rows: Vec<_> = batch
                .iter()
                .map(|(seq, r)| (clamp(r.at_ms), r.args.to_string(), clamp(r.duration_ms), *seq, r))
                .collect();
            let params: Vec<[&(dyn tokio_postgres::types::ToSql + Sync); 15]> = rows
                .iter()
                .map(|(at, args, duration, seq, r)| {
                    [
                        at as &(dyn tokio_postgres::types::ToSql + Sync),
                        &r.caller,
                        &r.app,
                        &r.tool,
                        args,
                        &r.status,
                        &r.code,
                        duration,
                        &r.excerpt,
                        &r.asked,
                        &replica,
                        seq,
                        &r.person,
                        &r.fingerprint,
                        &r.run,
                    ]
                })
                .collect();
            let inserts = params.iter().map(|p| tx.execute(&stmt, p));
            futures_util::future::try_join_all(inserts).await?;
            tx.commit().await
        })
        .await
}

async fn pg_prune(
    shared: &crate::store::Shared,
    retention: Retention,
) -> Result<(), crate::store::Error> {
    let client = shared.client().await?;
    let cutoff = clamp(now_ms().saturating_sub(u64::from(retention.days) * 86_400_000));
    shared
        .timed(client.execute("DELETE FROM aai_history WHERE at_ms < $1", &[&cutoff]))
        .await?;
    shared
        .timed(client.execute(
            "DELETE FROM aai_history WHERE id <= (SELECT id FROM aai_history ORDER BY id DESC LIMIT 1 OFFSET $1)",
            &[&clamp(retention.rows)],
        ))
        .await
        .map(drop)
}

/// Reads records from the shared store with their row ids, newest first.
pub async fn rows_shared(
    shared: &crate::store::Shared,
    filter: &Filter,
) -> Result<Vec<(u64, Record)>, Error> {
    let client = shared.client().await?;
    let rows = shared
        .timed(client.query(
            "SELECT id, at_ms, caller, app, tool, args, status, code, duration_ms, excerpt, asked, person, fingerprint, run FROM aai_history
             WHERE ($1::TEXT IS NULL OR app = $1) AND ($2::TEXT IS NULL OR tool = $2) AND ($3::TEXT IS NULL OR caller = $3)
               AND ($4::TEXT IS NULL OR status = $4) AND ($5::BIGINT IS NULL OR at_ms >= $5)
               AND ($7::TEXT IS NULL OR person = $7) AND ($8::TEXT IS NULL OR run = $8)
             ORDER BY at_ms DESC, id DESC LIMIT $6",
            &[
                &filter.app,
                &filter.tool,
                &filter.caller,
                &filter.status,
                &filter.since_ms.map(clamp),
                &clamp(filter.limit as u64),
                &filter.person,
                &filter.run,
            ],
        ))
        .await?;
    Ok(rows.iter().map(pg_record).collect())
}

/// The record with row id `id` in the shared store, if it is still kept.
pub(crate) async fn get_shared(
    shared: &crate::store::Shared,
    id: u64,
) -> Result<Option<Record>, Error> {
    let client = shared.client().await?;
    let row = shared
        .timed(client.query_opt(
            "SELECT id, at_ms, caller, app, tool, args, status, code, duration_ms, excerpt, asked, person, fingerprint, run FROM aai_history WHERE id = $1",
            &[&clamp(id)],
        ))
        .await?;
    Ok(row.as_ref().map(|r| pg_record(r).1))
}

fn pg_record(r: &tokio_postgres::Row) -> (u64, Record) {
    (
        r.get::<_, i64>(0).max(0) as u64,
        Record {
            at_ms: r.get::<_, i64>(1).max(0) as u64,
            caller: r.get(2),
            app: r.get(3),
            tool: r.get(4),
            args: serde_json::from_str(r.get::<_, &str>(5)).unwrap_or(Value::Null),
            status: r.get(6),
            code: r.get(7),
            duration_ms: r.get::<_, i64>(8).max(0) as u64,
            excerpt: r.get(9),
            asked: r.get(10),
            person: r.get(11),
            fingerprint: r.get(12),
            run: r.get(13),
        },
    )
}

fn connect(file: &Path) -> rusqlite::Result<Connection> {
    crate::files::open_sqlite(file, std::time::Duration::from_secs(5), |conn| {
        // NORMAL: a commit is not synced to the disk (the log is, at each checkpoint). A
        // gateway that crashes loses nothing; a power cut may lose the last commits. The
        // fsync per commit cost the writer thread 2–4 µs per forwarded call in a burst
        // (docs/performance.md, "A forwarded call's own work").
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")?;
        // A table made by this release (its last column and index there) needs nothing:
        // readers open without taking the write lock.
        let complete: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info('history') WHERE name = 'run')
                AND EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'history_run')",
            [],
            |r| r.get(0),
        )?;
        if complete {
            return Ok(());
        }
        // One transaction: a reader (a client's use, read when it connects) sees no table
        // or the whole one, never the first release's columns alone.
        // Immediate: two processes opening a new file at once wait for each other (busy
        // timeout) instead of both reading, then failing to write.
        let tx =
            rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS history (
                 id INTEGER PRIMARY KEY,
                 at_ms INTEGER NOT NULL,
                 caller TEXT NOT NULL,
                 app TEXT NOT NULL,
                 tool TEXT NOT NULL,
                 args TEXT NOT NULL,
                 status TEXT NOT NULL,
                 code TEXT,
                 duration_ms INTEGER NOT NULL,
                 excerpt TEXT NOT NULL
             );
             CREATE INDEX IF NOT EXISTS history_at ON history (at_ms);",
        )?;
        // Columns added after the first release of the table: the name the caller used;
        // with the team gateway, the person behind a call; with tool fingerprints, the
        // definition each call ran; with script runs, the run or batch of each call.
        for (column, kind) in [
            ("asked", "TEXT"),
            ("person", "TEXT"),
            ("fingerprint", "TEXT"),
            ("run", "TEXT"),
        ] {
            add_column(conn, column, kind)?;
        }
        conn.execute_batch(
            "CREATE INDEX IF NOT EXISTS history_person ON history (person, at_ms);
             CREATE INDEX IF NOT EXISTS history_run ON history (run) WHERE run IS NOT NULL;",
        )?;
        tx.commit()
    })
}

/// Adds `column` to the history table unless it is there. Another process opening the
/// same file at the same moment (the gateway's writer, a reader, `history`) may add it
/// first: that is no error.
fn add_column(conn: &Connection, column: &str, kind: &str) -> rusqlite::Result<()> {
    let has = conn
        .prepare("SELECT 1 FROM pragma_table_info('history') WHERE name = ?1")?
        .exists([column])?;
    if has {
        return Ok(());
    }
    match conn.execute_batch(&format!("ALTER TABLE history ADD COLUMN {column} {kind}")) {
        Err(e) if e.to_string().contains("duplicate column name") => Ok(()),
        done => done,
    }
}

fn write_loop(
    conn: &Connection,
    rx: &Receiver<Message>,
    queued: &AtomicUsize,
    retention: Retention,
) {
    prune(conn, retention);
    let mut since_prune = 0;
    let mut committed: Option<std::time::Instant> = None;
    while let Ok(first) = rx.recv() {
        // A record after a quiet spell is written at once; in a burst, the writer sleeps
        // until GROUP_COMMIT has passed since its last commit, so that the records of
        // many calls share one transaction (one fsync, one wake of this thread).
        if let Some(wait) = committed.and_then(|at| GROUP_COMMIT.checked_sub(at.elapsed()))
            && !matches!(first, Message::Flush(_))
        {
            std::thread::sleep(wait);
        }
        // Whatever else is waiting goes in the same transaction; flushes are answered
        // once it is committed.
        let mut batch = Vec::new();
        let mut flushes = Vec::new();
        for message in std::iter::once(first).chain(rx.try_iter()) {
            match message {
                Message::Record(r) => batch.push(*r),
                Message::Flush(done) => flushes.push(done),
            }
        }
        queued.fetch_sub(batch.len(), Ordering::Relaxed);
        if !batch.is_empty() {
            if let Err(e) = insert(conn, &batch) {
                tracing::warn!("cannot write the call history: {e}");
            }
            committed = Some(std::time::Instant::now());
        }
        for done in flushes {
            let _ = done.send(());
        }
        since_prune += batch.len();
        if since_prune >= 1000 {
            prune(conn, retention);
            since_prune = 0;
        }
    }
}

fn insert(conn: &Connection, batch: &[Record]) -> rusqlite::Result<()> {
    let tx = conn.unchecked_transaction()?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO history (at_ms, caller, app, tool, args, status, code, duration_ms, excerpt, asked, person, fingerprint, run)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        )?;
        for r in batch {
            stmt.execute(params![
                clamp(r.at_ms),
                r.caller,
                r.app,
                r.tool,
                r.args.to_string(),
                r.status,
                r.code,
                clamp(r.duration_ms),
                r.excerpt,
                r.asked,
                r.person,
                r.fingerprint,
                r.run
            ])?;
        }
    }
    tx.commit()
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn prune(conn: &Connection, retention: Retention) {
    let cutoff = now_ms().saturating_sub(u64::from(retention.days) * 86_400_000);
    let result = conn
        .execute("DELETE FROM history WHERE at_ms < ?1", params![clamp(cutoff)])
        .and_then(|_| {
            conn.execute(
                "DELETE FROM history WHERE id <= (SELECT id FROM history ORDER BY id DESC LIMIT 1 OFFSET ?1)",
                params![clamp(retention.rows)],
            )
        });
    if let Err(e) = result {
        tracing::warn!("cannot prune the call history: {e}");
    }
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What `history` asks for.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    /// Only this app.
    pub app: Option<String>,
    /// Only this tool.
    pub tool: Option<String>,
    /// Only this caller.
    pub caller: Option<String>,
    /// Only this person's calls.
    pub person: Option<String>,
    /// Only `ok` or `error`.
    pub status: Option<String>,
    /// Only the calls of this script run or batch.
    pub run: Option<String>,
    /// Only records at or after this Unix time (ms).
    pub since_ms: Option<u64>,
    /// At most this many, newest first.
    pub limit: usize,
}

/// Reads records from `file`, newest first.
pub(crate) fn query(file: &Path, filter: &Filter) -> Result<Vec<Record>, Error> {
    Ok(rows(file, filter)?.into_iter().map(|(_, r)| r).collect())
}

/// Reads records from `file` with their row ids, newest first.
pub(crate) fn rows(file: &Path, filter: &Filter) -> Result<Vec<(u64, Record)>, Error> {
    select(
        file,
        "WHERE (?1 IS NULL OR app = ?1) AND (?2 IS NULL OR tool = ?2) AND (?3 IS NULL OR caller = ?3)
           AND (?4 IS NULL OR status = ?4) AND (?5 IS NULL OR at_ms >= ?5)
           AND (?7 IS NULL OR person = ?7) AND (?8 IS NULL OR run = ?8)
         ORDER BY at_ms DESC, id DESC LIMIT ?6",
        params![
            filter.app,
            filter.tool,
            filter.caller,
            filter.status,
            filter.since_ms.map(clamp),
            clamp(filter.limit as u64),
            filter.person,
            filter.run
        ],
    )
}

/// The record with row id `id`, if it is still kept.
pub(crate) fn get(file: &Path, id: u64) -> Result<Option<Record>, Error> {
    Ok(select(file, "WHERE id = ?1", params![clamp(id)])?
        .into_iter()
        .next()
        .map(|(_, r)| r))
}

fn select(
    file: &Path,
    rest: &str,
    params: &[&dyn rusqlite::ToSql],
) -> Result<Vec<(u64, Record)>, Error> {
    let conn = connect(file).map_err(|source| Error::Open {
        file: file.to_owned(),
        source,
    })?;
    let mut stmt = conn.prepare(&format!(
        "SELECT id, at_ms, caller, app, tool, args, status, code, duration_ms, excerpt, asked, person, fingerprint, run FROM history {rest}"
    ))?;
    let rows = stmt.query_map(params, |r| {
        Ok((
            r.get::<_, i64>(0)?.max(0) as u64,
            Record {
                at_ms: r.get::<_, i64>(1)?.max(0) as u64,
                caller: r.get(2)?,
                app: r.get(3)?,
                tool: r.get(4)?,
                args: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or(Value::Null),
                status: r.get(6)?,
                code: r.get(7)?,
                duration_ms: r.get::<_, i64>(8)?.max(0) as u64,
                excerpt: r.get(9)?,
                asked: r.get(10)?,
                person: r.get(11)?,
                fingerprint: r.get(12)?,
                run: r.get(13)?,
            },
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// `2026-11-23 02:30:00` for Unix milliseconds (civil date from days, no time zone data).
pub(crate) fn utc(at_ms: u64) -> String {
    let secs = at_ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// `1h`, `30m`, `2d`, `45s`, or seconds: the Unix time (ms) that far back.
pub(crate) fn since(text: &str) -> Result<u64, Error> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| c.is_alphabetic()) {
        Some((i, _)) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| Error::Duration(text.to_owned()))?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(Error::Duration(text.to_owned())),
    };
    Ok(now_ms().saturating_sub(secs.saturating_mul(1000)))
}

/// How many records `file` holds.
pub fn count(file: &Path) -> Result<u64, Error> {
    let conn = connect(file).map_err(|source| Error::Open {
        file: file.to_owned(),
        source,
    })?;
    Ok(conn
        .query_row("SELECT count(*) FROM history", [], |r| r.get::<_, i64>(0))
        .map(|n| n.max(0) as u64)?)
}

#[cfg(test)]
mod tests;
