//! `$AAI_HOME/state.db` (SQLite, bundled): what the gateway remembers between runs —
//! consent grants now, call history next. The server, `consent` CLI and (later) the web
//! UI share the file; SQLite's locking makes that safe.
//!
//! Calls never wait on the disk for reads: the consent gate keeps the grants in memory
//! and reloads them only when a grant is missing (the CLI or UI may have added one).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
}

/// Why the state file could not be used.
#[derive(Debug, thiserror::Error)]
#[error("the state file {file} is not usable: {source}")]
pub struct Error {
    file: PathBuf,
    #[source]
    source: rusqlite::Error,
}

/// The open state file.
#[derive(Debug)]
pub struct State {
    file: PathBuf,
    conn: Mutex<Connection>,
}

impl State {
    /// Opens (creating when needed) `file`.
    pub fn open(file: &Path) -> Result<State, Error> {
        let fail = |source| Error {
            file: file.to_owned(),
            source,
        };
        if let Some(dir) = file.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let conn = Connection::open(file).map_err(fail)?;
        conn.busy_timeout(std::time::Duration::from_secs(2))
            .map_err(fail)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS grants (
                 caller TEXT NOT NULL,
                 app TEXT NOT NULL,
                 tool TEXT NOT NULL,
                 granted_at INTEGER NOT NULL,
                 PRIMARY KEY (caller, app, tool)
             );",
        )
        .map_err(fail)?;
        // Files from before certificate pinning lack the column.
        let has_cert: bool = conn
            .prepare("SELECT 1 FROM pragma_table_info('grants') WHERE name = 'cert'")
            .and_then(|mut s| s.exists([]))
            .map_err(fail)?;
        if !has_cert {
            conn.execute_batch("ALTER TABLE grants ADD COLUMN cert TEXT")
                .map_err(fail)?;
        }
        Ok(State {
            file: file.to_owned(),
            conn: Mutex::new(conn),
        })
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
        let mut stmt = conn
            .prepare("SELECT caller, app, tool, granted_at, cert FROM grants ORDER BY granted_at, caller, app, tool")
            .map_err(|e| self.fail(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Grant {
                    caller: r.get(0)?,
                    app: r.get(1)?,
                    tool: r.get(2)?,
                    granted_at: r.get::<_, i64>(3)?.max(0) as u64,
                    cert: r.get(4)?,
                })
            })
            .map_err(|e| self.fail(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.fail(e))
    }

    /// Records a grant (again: its time is renewed).
    pub fn grant(&self, grant: &Grant) -> Result<(), Error> {
        let conn = self.conn.lock().expect("state lock");
        conn.execute(
            "INSERT OR REPLACE INTO grants (caller, app, tool, granted_at, cert) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                grant.caller,
                grant.app,
                grant.tool,
                i64::try_from(grant.granted_at).unwrap_or(i64::MAX),
                grant.cert
            ],
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

#[cfg(test)]
mod tests {
    use super::*;

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
