//! `$AAI_HOME/state.db` (SQLite, bundled): what the gateway remembers between runs —
//! consent grants, the ids local descriptors have used (a web app may never take one),
//! and the call history (`history`). The server, `consent` CLI and the web UI share the
//! file; SQLite's locking makes that safe. It is created owner-only (0600).
//!
//! A file the gateway may read but not write (read-only permissions, a read-only mount)
//! is still read: its grants hold, and what would be written is kept for this run only.
//!
//! Calls never wait on the disk for reads: the consent gate keeps the grants in memory
//! and reloads them only when a grant is missing (the CLI or UI may have added one).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rusqlite::{Connection, params};

/// A remembered "always allow".
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Grant {
    /// Who may call: the client's name and transport (`claude-code@stdio`).
    pub caller: String,
    /// The app id.
    pub app: String,
    /// The tool, or `*` for every tool of the app.
    pub tool: String,
    /// Unix time of the grant.
    pub granted_at: u64,
    /// For a web app asked about on its first https call: the SHA-256 fingerprint of the
    /// certificate the user saw. The grant holds only while the site shows that
    /// certificate. `None`: not tied to one (local apps, grants from the CLI or UI form).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    /// For a grant of one tool: what was approved of it (`consent::fingerprint`); a
    /// changed tool is asked about again. `None`: none known yet (a grant from before
    /// fingerprints, from the CLI or the UI form, or for every tool) — a tool grant then
    /// adopts the tool as it is at its next use. Listed as its fingerprint.
    #[serde(
        rename = "fingerprint",
        serialize_with = "crate::consent::fingerprint::serialize_fingerprint",
        skip_serializing_if = "Option::is_none"
    )]
    pub definition: Option<crate::consent::fingerprint::Definition>,
}

/// Why the state file could not be used.
#[derive(Debug, thiserror::Error)]
#[error("the state file {file} is not usable: {source}")]
pub struct Error {
    file: PathBuf,
    #[source]
    source: rusqlite::Error,
}

/// `state.db`, opened on first use and then kept: the server's handshake never waits for
/// the disk. Clones share one file.
#[derive(Debug, Clone)]
pub struct Deferred(Arc<DeferredInner>);

#[derive(Debug)]
struct DeferredInner {
    file: Option<PathBuf>,
    opened: OnceLock<Option<Arc<State>>>,
}

impl Deferred {
    /// The state in `file`, opened when first needed.
    pub fn at(file: PathBuf) -> Deferred {
        Deferred(Arc::new(DeferredInner {
            file: Some(file),
            opened: OnceLock::new(),
        }))
    }

    /// The open state, or `None` when it cannot be opened (said once, as a warning:
    /// grants are then kept for this run only).
    pub fn get(&self) -> Option<&Arc<State>> {
        self.0
            .opened
            .get_or_init(|| {
                let file = self.0.file.as_deref()?;
                State::open(file)
                    .inspect_err(|e| {
                        tracing::warn!("{e}; consent grants are kept for this run only");
                    })
                    .ok()
                    .map(Arc::new)
            })
            .as_ref()
    }
}

/// A state that is already open (or, with `None`, none at all).
impl From<Option<Arc<State>>> for Deferred {
    fn from(state: Option<Arc<State>>) -> Deferred {
        Deferred(Arc::new(DeferredInner {
            file: None,
            opened: OnceLock::from(state),
        }))
    }
}

/// The open state file.
#[derive(Debug)]
pub struct State {
    file: PathBuf,
    conn: Mutex<Connection>,
    read_only: bool,
}

impl State {
    /// Opens (creating when needed) `file`; one that can only be read is opened read-only
    /// (with a warning).
    pub fn open(file: &Path) -> Result<State, Error> {
        let fail = |source| Error {
            file: file.to_owned(),
            source,
        };
        let warn = || {
            tracing::warn!(
                "the state file {} can be read but not written: its grants hold, new ones are kept for this run only, and call history is off",
                file.display()
            );
        };
        match Self::open_writable(file) {
            // SQLite opens a file it may not write read-only, by itself.
            Ok(mut state)
                if state
                    .conn
                    .lock()
                    .expect("state lock")
                    .is_readonly(rusqlite::MAIN_DB)
                    .unwrap_or(false) =>
            {
                warn();
                state.read_only = true;
                Ok(state)
            }
            Ok(state) => Ok(state),
            Err(e) if file.exists() && is_read_only(&e.source) => {
                let conn = Connection::open_with_flags(
                    file,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .map_err(fail)?;
                conn.busy_timeout(std::time::Duration::from_secs(2))
                    .map_err(fail)?;
                warn();
                Ok(State {
                    file: file.to_owned(),
                    conn: Mutex::new(conn),
                    read_only: true,
                })
            }
            Err(e) => Err(e),
        }
    }

    fn open_writable(file: &Path) -> Result<State, Error> {
        let fail = |source| Error {
            file: file.to_owned(),
            source,
        };
        let conn = crate::files::open_sqlite(file, std::time::Duration::from_secs(2), |conn| {
            conn.execute_batch(
                "PRAGMA journal_mode = WAL;
                 CREATE TABLE IF NOT EXISTS grants (
                     caller TEXT NOT NULL,
                     app TEXT NOT NULL,
                     tool TEXT NOT NULL,
                     granted_at INTEGER NOT NULL,
                     PRIMARY KEY (caller, app, tool)
                 );
                 CREATE TABLE IF NOT EXISTS local_apps (
                     app TEXT PRIMARY KEY,
                     seen_at INTEGER NOT NULL
                 );",
            )?;
            // Files from before certificate pinning lack the column.
            if !has_column(conn, "cert")? {
                conn.execute_batch("ALTER TABLE grants ADD COLUMN cert TEXT")?;
            }
            // And files from before tool fingerprints this one: their grants adopt the
            // tool as it is at its next use (`consent::fingerprint`).
            if !has_column(conn, "definition")? {
                conn.execute_batch("ALTER TABLE grants ADD COLUMN definition TEXT")?;
            }
            Ok(())
        })
        .map_err(fail)?;
        Ok(State {
            file: file.to_owned(),
            conn: Mutex::new(conn),
            read_only: false,
        })
    }

    /// Whether the file can only be read.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The ids local (and built-in) descriptors have had in any scan.
    pub fn local_ids(&self) -> Result<std::collections::HashSet<String>, Error> {
        let conn = self.conn.lock().expect("state lock");
        let exists = conn
            .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'local_apps'")
            .and_then(|mut s| s.exists([]))
            .map_err(|e| self.fail(e))?;
        if !exists {
            return Ok(Default::default());
        }
        let mut stmt = conn
            .prepare("SELECT app FROM local_apps")
            .map_err(|e| self.fail(e))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| self.fail(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.fail(e))
    }

    /// Remembers that local descriptors have used `ids`.
    pub fn note_local_ids(&self, ids: &[&str]) -> Result<(), Error> {
        if self.read_only || ids.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn.lock().expect("state lock");
        let tx = conn.transaction().map_err(|e| self.fail(e))?;
        {
            let mut stmt = tx
                .prepare("INSERT OR IGNORE INTO local_apps (app, seen_at) VALUES (?1, strftime('%s','now'))")
                .map_err(|e| self.fail(e))?;
            for id in ids {
                stmt.execute([id]).map_err(|e| self.fail(e))?;
            }
        }
        tx.commit().map_err(|e| self.fail(e))
    }

    /// The default file under `home`.
    pub fn file_in(home: &Path) -> PathBuf {
        home.join("state.db")
    }

    fn fail(&self, source: rusqlite::Error) -> Error {
        Error {
            file: self.file.clone(),
            source,
        }
    }

    /// Every grant, oldest first.
    pub fn grants(&self) -> Result<Vec<Grant>, Error> {
        let conn = self.conn.lock().expect("state lock");
        // A read-only file from before certificate pinning has no `cert` column, and
        // one from before tool fingerprints no `definition`.
        let column = |name: &'static str| -> Result<&'static str, Error> {
            Ok(if has_column(&conn, name).map_err(|e| self.fail(e))? {
                name
            } else {
                "NULL"
            })
        };
        let query = format!(
            "SELECT caller, app, tool, granted_at, {}, {} FROM grants ORDER BY granted_at, caller, app, tool",
            column("cert")?,
            column("definition")?
        );
        let mut stmt = conn.prepare(&query).map_err(|e| self.fail(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Grant {
                    caller: r.get(0)?,
                    app: r.get(1)?,
                    tool: r.get(2)?,
                    granted_at: r.get::<_, i64>(3)?.max(0) as u64,
                    cert: r.get(4)?,
                    definition: read_definition(r.get::<_, Option<String>>(5)?.as_deref()),
                })
            })
            .map_err(|e| self.fail(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.fail(e))
    }

    /// Records a grant (again: its time is renewed).
    pub fn grant(&self, grant: &Grant) -> Result<(), Error> {
        let conn = self.conn.lock().expect("state lock");
        conn.execute(
            "INSERT OR REPLACE INTO grants (caller, app, tool, granted_at, cert, definition) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                grant.caller,
                grant.app,
                grant.tool,
                i64::try_from(grant.granted_at).unwrap_or(i64::MAX),
                grant.cert,
                write_definition(grant.definition.as_ref())
            ],
        )
        .map(drop)
        .map_err(|e| self.fail(e))
    }

    /// Ties the grant of `caller` for `tool` of `app`, which keeps no tool definition yet,
    /// to `definition` (its time stays).
    pub fn adopt(
        &self,
        caller: &str,
        app: &str,
        tool: &str,
        definition: &crate::consent::fingerprint::Definition,
    ) -> Result<(), Error> {
        if self.read_only {
            return Ok(());
        }
        let conn = self.conn.lock().expect("state lock");
        conn.execute(
            "UPDATE grants SET definition = ?4 WHERE caller = ?1 AND app = ?2 AND tool = ?3 AND definition IS NULL",
            params![caller, app, tool, write_definition(Some(definition))],
        )
        .map(drop)
        .map_err(|e| self.fail(e))
    }

    /// Removes the grants of `app` (only `tool`'s, only `caller`'s when given); how many.
    pub fn revoke(
        &self,
        app: &str,
        tool: Option<&str>,
        caller: Option<&str>,
    ) -> Result<usize, Error> {
        let conn = self.conn.lock().expect("state lock");
        conn.execute(
            "DELETE FROM grants WHERE app = ?1 AND (?2 IS NULL OR tool = ?2) AND (?3 IS NULL OR caller = ?3)",
            params![app, tool, caller],
        )
        .map_err(|e| self.fail(e))
    }
}

fn has_column(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.prepare("SELECT 1 FROM pragma_table_info('grants') WHERE name = ?1")
        .and_then(|mut s| s.exists([name]))
}

/// A stored tool definition read back; one that does not read is none (the grant then
/// adopts the tool as it is at its next use).
pub(crate) fn read_definition(
    text: Option<&str>,
) -> Option<crate::consent::fingerprint::Definition> {
    serde_json::from_str(text?).ok()
}

/// A tool definition as it is stored (JSON).
pub(crate) fn write_definition(
    definition: Option<&crate::consent::fingerprint::Definition>,
) -> Option<String> {
    definition.map(|d| serde_json::to_string(d).expect("definitions serialize"))
}

/// Whether SQLite refused because the file (or its folder) cannot be written.
fn is_read_only(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(
            rusqlite::ErrorCode::ReadOnly
                | rusqlite::ErrorCode::CannotOpen
                | rusqlite::ErrorCode::PermissionDenied
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(unix)]
    fn a_read_only_file_is_still_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = State::file_in(dir.path());
        let state = State::open(&file).unwrap();
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        state
            .grant(&Grant {
                caller: "x@stdio".into(),
                app: "com.a".into(),
                tool: "*".into(),
                granted_at: 1,
                cert: None,
                definition: None,
            })
            .unwrap();
        state.note_local_ids(&["com.local"]).unwrap();
        drop(state);
        for name in ["state.db-wal", "state.db-shm"] {
            let _ = std::fs::remove_file(dir.path().join(name));
        }
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o400)).unwrap();
        if std::fs::OpenOptions::new().write(true).open(&file).is_ok() {
            return; // root writes anyway: nothing to prove here
        }
        let state = State::open(&file).unwrap();
        assert!(state.read_only());
        assert_eq!(state.grants().unwrap().len(), 1);
        assert!(state.local_ids().unwrap().contains("com.local"));
    }

    #[test]
    fn a_file_from_before_fingerprints_keeps_its_grants_and_adopts_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = State::file_in(dir.path());
        {
            let conn = Connection::open(&file).unwrap();
            conn.execute_batch(
                "CREATE TABLE grants (caller TEXT NOT NULL, app TEXT NOT NULL, tool TEXT NOT NULL,
                     granted_at INTEGER NOT NULL, cert TEXT, PRIMARY KEY (caller, app, tool));
                 INSERT INTO grants VALUES ('x@stdio', 'com.a', 'send', 7, NULL);",
            )
            .unwrap();
        }
        let state = State::open(&file).unwrap();
        let grants = state.grants().unwrap();
        assert_eq!(grants.len(), 1);
        assert_eq!(grants[0].definition, None);
        let tool = |description: &str| aai_descriptor::Tool {
            name: "send".into(),
            description: description.into(),
            parameters: aai_descriptor::Schema::compile(&serde_json::json!({"type": "object"}))
                .unwrap(),
            returns: None,
            timeout: None,
            read_only: false,
            undo: None,
            call: aai_descriptor::ToolCall::Forward,
            overridden: None,
        };
        let first = crate::consent::fingerprint::Definition::of(&tool("Send"));
        let other = crate::consent::fingerprint::Definition::of(&tool("Send it all"));
        state.adopt("x@stdio", "com.a", "send", &first).unwrap();
        // Adopted once: a later adoption does not move it.
        state.adopt("x@stdio", "com.a", "send", &other).unwrap();
        let grants = state.grants().unwrap();
        assert_eq!(grants[0].definition.as_ref(), Some(&first));
        assert_eq!(grants[0].granted_at, 7, "its time stays");
    }

    #[test]
    fn grants_persist_and_revoke() {
        let dir = tempfile::tempdir().unwrap();
        let file = State::file_in(dir.path());
        let state = State::open(&file).unwrap();
        let g = |caller: &str, tool: &str| Grant {
            caller: caller.into(),
            app: "com.a".into(),
            tool: tool.into(),
            granted_at: 5,
            cert: None,
            definition: None,
        };
        state.grant(&g("x@stdio", "send")).unwrap();
        state.grant(&g("x@stdio", "*")).unwrap();
        state.grant(&g("y@http", "send")).unwrap();
        state.grant(&g("y@http", "send")).unwrap();
        drop(state);
        let state = State::open(&file).unwrap();
        assert_eq!(state.grants().unwrap().len(), 3);
        assert_eq!(
            state.revoke("com.a", Some("send"), Some("y@http")).unwrap(),
            1
        );
        assert_eq!(state.revoke("com.a", None, None).unwrap(), 2);
        assert!(state.grants().unwrap().is_empty());
    }
}
