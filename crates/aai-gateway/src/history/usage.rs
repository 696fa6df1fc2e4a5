//! What one client used, read from the history: per app and tool, how many calls
//! succeeded and when the last one was (for [`crate::usage`]). Only what retention keeps is
//! there to read.

use std::path::Path;
use std::pin::Pin;

use super::Error;

/// One app and tool a client used: `(app, tool, successful calls, last call in Unix ms)`.
pub(crate) type Row = (String, String, u64, u64);

/// What [`super::Sink::usage`] gives.
pub type Future = Pin<Box<dyn std::future::Future<Output = Result<Vec<Row>, Error>> + Send>>;

/// Most rows read for one client: its most recent (app, tool) pairs.
const MAX_ROWS: i64 = 10_000;

/// From the local history in `file`, opened read-only: it neither creates the file nor
/// changes its tables (the writer does, at the same moment, when a client connects).
pub(crate) fn sqlite(file: &Path, caller: &str, person: Option<&str>) -> Result<Vec<Row>, Error> {
    if !file.exists() {
        return Ok(Vec::new());
    }
    let open = || {
        let conn = rusqlite::Connection::open_with_flags(
            file,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(conn)
    };
    let conn = open().map_err(|source| Error::Open {
        file: file.to_owned(),
        source,
    })?;
    // The writer creates the table on its own thread when the gateway starts: a client
    // that connects first finds none yet, which is no use at all.
    let has_table = conn
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'history'")?
        .exists([])?;
    if !has_table {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare(
        "SELECT app, tool, COUNT(*), MAX(at_ms) FROM history
         WHERE caller = ?1 AND person IS ?2 AND status = 'ok'
         GROUP BY app, tool ORDER BY MAX(at_ms) DESC LIMIT ?3",
    )?;
    let rows = stmt.query_map(rusqlite::params![caller, person, MAX_ROWS], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?.max(0) as u64,
            r.get::<_, i64>(3)?.max(0) as u64,
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// From the shared store (every replica's calls).
pub(crate) async fn postgres(
    shared: &crate::store::Shared,
    caller: &str,
    person: Option<&str>,
) -> Result<Vec<Row>, Error> {
    let client = shared.client().await?;
    let rows = shared
        .timed(client.query(
            "SELECT app, tool, COUNT(*), MAX(at_ms) FROM aai_history
             WHERE caller = $1 AND person IS NOT DISTINCT FROM $2 AND status = 'ok'
             GROUP BY app, tool ORDER BY MAX(at_ms) DESC LIMIT $3",
            &[&caller, &person, &MAX_ROWS],
        ))
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r.get(0),
                r.get(1),
                r.get::<_, i64>(2).max(0) as u64,
                r.get::<_, i64>(3).max(0) as u64,
            )
        })
        .collect())
}
