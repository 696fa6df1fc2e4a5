//! Files the gateway keeps for its user alone: `$AAI_HOME` and what the gateway writes in
//! it (the state database, logs, caches, descriptors it writes) are readable by the owner
//! only — folders 0700, files 0600 — since they hold the call history, grants and the
//! descriptors of the user's apps. Files the user writes there (`config.json`, their own
//! descriptors) are theirs and left alone. [`tighten_home`] narrows what an older version left
//! wider, once at start, and says so. Elsewhere than Unix, the user's profile folder is
//! already private and nothing is changed.

use std::path::Path;
use std::time::{Duration, Instant};

/// Opens the SQLite database `path` (created owner-only when new), waiting up to `busy`
/// for another connection, and runs `init` on it (its schema: idempotent statements).
///
/// `state.db` is opened by two connections of one process at once (the consent state and
/// the history writer), and on a new file both create their tables: SQLite then refuses
/// one of them at once, without waiting ("database is locked": waiting could deadlock).
/// `init` is run again until it goes through or `busy` has passed.
pub(crate) fn open_sqlite(
    path: &Path,
    busy: Duration,
    init: impl Fn(&rusqlite::Connection) -> rusqlite::Result<()>,
) -> rusqlite::Result<rusqlite::Connection> {
    // Owner-only before SQLite creates it.
    let _ = create_private(path);
    let conn = rusqlite::Connection::open(path)?;
    conn.busy_timeout(busy)?;
    let deadline = Instant::now() + busy;
    loop {
        match init(&conn) {
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            done => return done.map(|()| conn),
        }
    }
}

/// Creates `dir` when missing, and the folders above it that are missing too, each
/// owner-only. A folder that exists is left as it is ([`tighten_home`] narrows the
/// gateway's own, and says so).
pub(crate) fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        missing.push(d);
        at = d.parent();
    }
    std::fs::create_dir_all(dir)?;
    for d in missing {
        set_mode(d, 0o700)?;
    }
    Ok(())
}

/// Creates `path` empty and owner-only when it does not exist (in a folder made with
/// [`private_dir`]); an existing file is left as it is. No moment exists where the new
/// file is readable by others.
pub(crate) fn create_private(path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        private_dir(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes `bytes` to `path` whole, owner-only: into a temporary file beside it, then
/// renamed over it, so that a reader never sees half a file.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile_in(dir)?;
    tmp.1.write_all(bytes)?;
    tmp.1.sync_all()?;
    drop(tmp.1);
    std::fs::rename(&tmp.0, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp.0);
    })
}

/// A new owner-only file in `dir` with a name nobody else uses.
fn tempfile_in(dir: &Path) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    for _ in 0..16 {
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(std::io::Error::other)?;
        let name = format!(".tmp-{}", crate::text::hex(&nonce));
        let path = dir.join(name);
        match options.open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free temporary file name"))
}

/// Makes `path` owner-only (`0o700` for folders, `0o600` for files).
pub(crate) fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

/// Narrows `$AAI_HOME` and what the gateway keeps in it to the owner, once at start:
/// the home folder, `state.db` (and its journal files), `logs/`, `cache/`, `web/`,
/// and the opt-in credential file. Each path it had to narrow is named in
/// one warning; a path it cannot change is named too. Returns what was narrowed.
pub(crate) fn tighten_home(home: &Path) -> Vec<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mut narrowed = Vec::new();
        let mut check = |path: &Path, depth: usize| {
            let mut todo = vec![(path.to_owned(), depth)];
            while let Some((path, depth)) = todo.pop() {
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if meta.file_type().is_symlink() {
                    continue;
                }
                let want = if meta.is_dir() { 0o700 } else { 0o600 };
                if meta.permissions().mode() & 0o077 != 0 {
                    match std::fs::set_permissions(&path, std::fs::Permissions::from_mode(want)) {
                        Ok(()) => narrowed.push(path.display().to_string()),
                        Err(e) => tracing::warn!(
                            "{} is readable by other users and could not be narrowed: {e}",
                            path.display()
                        ),
                    }
                }
                if meta.is_dir() && depth > 0 {
                    for entry in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                        todo.push((entry.path(), depth - 1));
                    }
                }
            }
        };
        check(home, 0);
        for name in [
            "state.db",
            "state.db-wal",
            "state.db-shm",
            "state.db-journal",
            "credentials.json",
            "token",
        ] {
            check(&home.join(name), 0);
        }
        for folder in ["logs", "cache", "web"] {
            check(&home.join(folder), 4);
        }
        if !narrowed.is_empty() {
            tracing::warn!(
                "other users could read {}; narrowed to the owner: {}",
                crate::text::count(narrowed.len(), "path", "paths"),
                narrowed.join(", ")
            );
        }
        narrowed
    }
    #[cfg(not(unix))]
    {
        let _ = home;
        Vec::new()
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn two_connections_create_a_new_database_at_once() {
        // What the consent state and the history writer do on a new home's first start:
        // SQLite refuses one of them at once now and then ("database is locked").
        let dir = tempfile::tempdir().unwrap();
        for round in 0..40 {
            let file = dir.path().join(format!("state-{round}.db"));
            let opens: Vec<_> = ["a", "b"]
                .map(|table| {
                    let file = file.clone();
                    std::thread::spawn(move || {
                        open_sqlite(&file, Duration::from_secs(2), |conn| {
                            conn.execute_batch(&format!(
                                "PRAGMA journal_mode = WAL;
                                 CREATE TABLE IF NOT EXISTS {table} (x INTEGER);"
                            ))
                        })
                        .map(|_| ())
                    })
                })
                .into_iter()
                .collect();
            for open in opens {
                open.join().unwrap().unwrap();
            }
            assert_eq!(mode(&file), 0o600);
        }
    }

    #[test]
    fn writes_are_whole_and_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        write_private(&path, b"one").unwrap();
        write_private(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }

    #[test]
    fn a_wide_home_is_narrowed_and_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("aai");
        std::fs::create_dir_all(home.join("logs")).unwrap();
        std::fs::write(home.join("state.db"), b"x").unwrap();
        std::fs::write(home.join("logs/gateway.log"), b"x").unwrap();
        std::fs::write(home.join("other.txt"), b"x").unwrap();
        for p in ["", "logs", "state.db", "logs/gateway.log", "other.txt"] {
            let p = home.join(p);
            let m = if p.is_dir() { 0o755 } else { 0o644 };
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(m)).unwrap();
        }
        private_dir(&dir.path().join("new/deeper")).unwrap();
        assert_eq!(
            mode(&dir.path().join("new")),
            0o700,
            "created parents are private too"
        );
        let narrowed = tighten_home(&home);
        assert_eq!(narrowed.len(), 4, "{narrowed:?}");
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&home.join("state.db")), 0o600);
        assert_eq!(mode(&home.join("logs/gateway.log")), 0o600);
        assert_eq!(mode(&home.join("other.txt")), 0o644, "not the gateway's");
        assert!(tighten_home(&home).is_empty(), "once");
    }
}
