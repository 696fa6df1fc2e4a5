//! `$AAI_HOME/trash/`: where a removed app's folder goes, so that a removal can be undone.
//! Each removal is the folder itself, renamed to `<appId>@<unix ms>`, and a note beside it
//! (`<appId>@<unix ms>.json`: where it was). Nothing empties the trash by itself.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The trash folder's name under `$AAI_HOME`.
pub(crate) const FOLDER: &str = "trash";

/// One removed app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Trashed {
    /// Its app id.
    pub app: String,
    /// When it was removed (unix ms).
    pub removed_at_ms: u64,
    /// Where its folder was, and goes back to.
    pub origin: PathBuf,
    /// Where its folder is now.
    pub path: PathBuf,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Note {
    app: String,
    origin: PathBuf,
}

/// Why a removal or a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nothing of that app is in the trash.
    #[error("`{0}` is not in the trash")]
    NotTrashed(String),
    /// Its place is taken again (a new import?): left as it is.
    #[error("{0} exists again; remove it first, then restore")]
    Taken(String),
    /// The disk refused.
    #[error("cannot move {path}: {why}")]
    Io {
        /// What was moved.
        path: String,
        /// Why.
        why: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |why| Error::Io {
        path: path.display().to_string(),
        why,
    }
}

/// Moves `folder` (app `app`'s) into the trash of `home`; returns where it went.
pub(crate) fn put(home: &Path, app: &str, folder: &Path) -> Result<PathBuf, Error> {
    let trash = home.join(FOLDER);
    crate::files::private_dir(&trash).map_err(io(&trash))?;
    let mut at = crate::history::now_ms();
    // Two removals in one millisecond (remove, restore, remove): the next free name.
    let target = loop {
        let candidate = trash.join(format!("{app}@{at}"));
        if !candidate.exists() {
            break candidate;
        }
        at += 1;
    };
    let note = Note {
        app: app.to_owned(),
        origin: folder.to_owned(),
    };
    let note_path = note_of(&target);
    crate::files::write_private(
        &note_path,
        serde_json::to_string_pretty(&note)
            .expect("JSON")
            .as_bytes(),
    )
    .map_err(io(&note_path))?;
    if let Err(e) = std::fs::rename(folder, &target) {
        let _ = std::fs::remove_file(&note_path);
        return Err(io(folder)(e));
    }
    Ok(target)
}

/// The note beside a removed folder: its name and `.json`.
fn note_of(folder: &Path) -> PathBuf {
    let mut name = folder.as_os_str().to_owned();
    name.push(".json");
    name.into()
}

/// What the trash of `home` holds, newest first.
pub(crate) fn list(home: &Path) -> Vec<Trashed> {
    let Ok(entries) = std::fs::read_dir(home.join(FOLDER)) else {
        return Vec::new();
    };
    let mut out: Vec<Trashed> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let path = e.path();
            let name = path
                .file_name()?
                .to_str()?
                .strip_suffix(".json")?
                .to_owned();
            let (_, at) = name.rsplit_once('@')?;
            let note: Note = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
            let folder = path.with_file_name(&name);
            folder.is_dir().then(|| Trashed {
                app: note.app,
                removed_at_ms: at.parse().unwrap_or(0),
                origin: note.origin,
                path: folder,
            })
        })
        .collect();
    out.sort_by_key(|t| std::cmp::Reverse(t.removed_at_ms));
    out
}

/// Puts the latest removal of `app` back where it was; returns that place.
pub(crate) fn restore(home: &Path, app: &str) -> Result<PathBuf, Error> {
    let trashed = list(home)
        .into_iter()
        .find(|t| t.app == app)
        .ok_or_else(|| Error::NotTrashed(app.to_owned()))?;
    if trashed.origin.exists() {
        return Err(Error::Taken(trashed.origin.display().to_string()));
    }
    if let Some(parent) = trashed.origin.parent() {
        crate::files::private_dir(parent).map_err(io(parent))?;
    }
    std::fs::rename(&trashed.path, &trashed.origin).map_err(io(&trashed.path))?;
    let _ = std::fs::remove_file(note_of(&trashed.path));
    Ok(trashed.origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removal_is_undone_once_and_not_over_a_new_folder() {
        let home = tempfile::tempdir().unwrap();
        let folder = home.path().join("com.example.x");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("aai.json"), "{}").unwrap();
        let went = put(home.path(), "com.example.x", &folder).unwrap();
        assert!(!folder.exists() && went.join("aai.json").is_file());
        let listed = list(home.path());
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].origin, folder);
        assert_eq!(restore(home.path(), "com.example.x").unwrap(), folder);
        assert!(folder.join("aai.json").is_file());
        assert!(list(home.path()).is_empty());
        assert!(matches!(
            restore(home.path(), "com.example.x"),
            Err(Error::NotTrashed(_))
        ));
        put(home.path(), "com.example.x", &folder).unwrap();
        std::fs::create_dir(&folder).unwrap();
        assert!(matches!(
            restore(home.path(), "com.example.x"),
            Err(Error::Taken(_))
        ));
    }
}
