//! Which descriptor files a changed path stands for, so that a file event (or the
//! gateway's own write) re-reads only those and not every file of every directory
//! (docs/performance.md, "Over a gateway's life").
//!
//! A path stands for the file a whole scan would list there: in a folder layout,
//! `<dir>/<name>` and anything in `<dir>/<name>/aai.json`'s place stand for that file; in
//! a flat layout, `<dir>/<name>.json` for itself; in the macOS layout, the bundle's
//! `Contents/Resources/aai.json`. A web app's `meta.json` stands for its descriptor, read
//! again whatever its stamp (where it came from is part of it).

use std::path::{Component, Path, PathBuf};

use super::scan::{OWN_FOLDERS, is_descriptor_name};
use super::{Layout, SearchDir, SourceKind};

/// Beyond this many changed paths, listing every directory costs less than placing each.
const MAX_TOUCHED: usize = 2_000;

/// A file a change may have touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Touched {
    /// Its search directory, by index.
    pub(super) index: usize,
    /// The file.
    pub(super) path: PathBuf,
    /// Read whatever its stamp says.
    pub(super) reread: bool,
}

/// What only a whole scan can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Whole {
    /// Every directory must be listed (too many paths; a search directory made, whose
    /// files' events may have come before its watch), but only descriptors changed.
    List,
    /// And what clients see must be rebuilt, whatever the descriptors: a new folder that
    /// is no app's (a skill, a path a `discovery.checks` entry looks for).
    Rebuild,
}

/// The candidate files `changed` stands for in the `searched` directories of `dirs`,
/// sorted by (directory, path) as a whole scan lists them, each once; or what only a
/// whole scan can tell. A path that stands for no file (a log, the history) stands for
/// nothing.
pub(super) fn candidates(
    dirs: &[SearchDir],
    searched: &[usize],
    changed: &[PathBuf],
) -> Result<Vec<Touched>, Whole> {
    if changed.len() > MAX_TOUCHED {
        return Err(Whole::List);
    }
    let mut out: Vec<Touched> = Vec::new();
    let mut whole = None;
    let mut canonical: Option<Vec<(PathBuf, &Path)>> = None;
    for path in changed {
        // A watcher may name a path through its real folders (FSEvents on macOS:
        // `/private/var/…` for `/var/…`): it is placed as the scan lists it. A path under
        // no search directory at all is not understood: everything is listed.
        let path = if dirs.iter().any(|d| path.starts_with(&d.dir)) {
            path.clone()
        } else {
            let real = canonical.get_or_insert_with(|| {
                dirs.iter()
                    .filter_map(|d| Some((std::fs::canonicalize(&d.dir).ok()?, d.dir.as_path())))
                    .collect()
            });
            match real
                .iter()
                .find_map(|(real, dir)| Some(dir.join(path.strip_prefix(real).ok()?)))
            {
                Some(path) => path,
                None => return Err(Whole::List),
            }
        };
        let path = &path;
        let before = out.len();
        for &index in searched {
            if let Some((file, reread)) = stands_for(&dirs[index], path) {
                out.push(Touched {
                    index,
                    path: file,
                    reread,
                });
            }
        }
        if out.len() == before && path.is_dir() {
            if !dirs.iter().any(|d| d.dir.starts_with(path)) {
                return Err(Whole::Rebuild);
            }
            whole = Some(Whole::List);
        }
    }
    if let Some(whole) = whole {
        return Err(whole);
    }
    out.sort_by(|a, b| (a.index, &a.path).cmp(&(b.index, &b.path)));
    // One file touched twice is looked at once, read again if either asked.
    out.dedup_by(|later, first| {
        let same = (later.index, &later.path) == (first.index, &first.path);
        if same {
            first.reread |= later.reread;
        }
        same
    });
    Ok(out)
}

/// The file `path` stands for in `dir`, and whether it must be read again whatever its
/// stamp.
fn stands_for(dir: &SearchDir, path: &Path) -> Option<(PathBuf, bool)> {
    if dir.layout == Layout::File {
        return (path == dir.dir).then(|| (path.to_owned(), false));
    }
    let rest = path.strip_prefix(&dir.dir).ok()?;
    let parts: Vec<&str> = rest
        .components()
        .map(|c| match c {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let folders = matches!(dir.layout, Layout::AppDirs | Layout::Mixed);
    let app_folder = |name: &str| !(dir.kind == SourceKind::User && OWN_FOLDERS.contains(&name));
    let in_folder = |name: &str| dir.dir.join(name).join("aai.json");
    match parts.as_slice() {
        // `<dir>/<name>.json` in a flat layout, or a folder in a folder layout (made,
        // renamed or removed): which it is, the look at the file tells.
        [name]
            if matches!(dir.layout, Layout::Flat | Layout::Mixed)
                && is_descriptor_name(name)
                && !(folders && path.is_dir()) =>
        {
            Some((path.to_owned(), false))
        }
        [name] if folders && app_folder(name) => Some((in_folder(name), false)),
        [name, "aai.json"] if folders && app_folder(name) => Some((path.to_owned(), false)),
        [name, "meta.json"] if folders && dir.kind == SourceKind::WebCache => {
            Some((in_folder(name), true))
        }
        [bundle, ..] if dir.layout == Layout::Bundles && bundle.ends_with(".app") => Some((
            dir.dir.join(bundle).join("Contents/Resources/aai.json"),
            false,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{Touched, Whole, candidates};
    use crate::catalog::{Layout, SearchDir, SourceKind};

    #[test]
    fn each_changed_path_stands_for_the_file_a_whole_scan_would_list_there() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let flat = root.path().join("flat");
        let dirs = [
            SearchDir {
                kind: SourceKind::User,
                dir: home.clone(),
                layout: Layout::AppDirs,
            },
            SearchDir {
                kind: SourceKind::System,
                dir: flat.clone(),
                layout: Layout::Flat,
            },
            SearchDir {
                kind: SourceKind::WebCache,
                dir: home.join("web"),
                layout: Layout::AppDirs,
            },
        ];
        let touched = |index, path: std::path::PathBuf, reread| Touched {
            index,
            path,
            reread,
        };
        let changed = [
            home.join("com.example.b/aai.json"),
            // A folder made, renamed or removed: the file in it.
            home.join("com.example.a"),
            // Where a web app came from: its descriptor, read again; the descriptor's
            // own event asks the same file to be looked at once.
            home.join("web/com.example.w/meta.json"),
            home.join("web/com.example.w/aai.json"),
            flat.join("com.example.f.json"),
            // No file stands for these.
            home.join("logs/aai.log"),
            home.join("com.example.b/notes.json"),
            flat.join("config.json"),
        ];
        assert_eq!(
            candidates(&dirs, &[0, 1, 2], &changed).unwrap(),
            [
                touched(0, home.join("com.example.a/aai.json"), false),
                touched(0, home.join("com.example.b/aai.json"), false),
                touched(1, flat.join("com.example.f.json"), false),
                touched(2, home.join("web/com.example.w/aai.json"), true),
            ]
        );
        // A directory searched twice is searched at its first place only.
        assert_eq!(
            candidates(&dirs, &[0], &[flat.join("com.example.f.json")]).unwrap(),
            []
        );
        // A path under no search directory is not understood; one through the real
        // folder of a directory reached by a symlink is placed as the scan lists it.
        assert_eq!(
            candidates(&dirs, &[0, 1, 2], &[root.path().join("elsewhere.json")]),
            Err(Whole::List)
        );
        #[cfg(unix)]
        {
            let real = root.path().join("real");
            std::fs::create_dir_all(&real).unwrap();
            let link = root.path().join("link");
            std::os::unix::fs::symlink(&real, &link).unwrap();
            let linked = [SearchDir {
                kind: SourceKind::Config,
                dir: link.clone(),
                layout: Layout::Mixed,
            }];
            let real = std::fs::canonicalize(&real).unwrap();
            assert_eq!(
                candidates(&linked, &[0], &[real.join("com.example.r/aai.json")]).unwrap(),
                [touched(0, link.join("com.example.r/aai.json"), false)]
            );
        }
        // A new folder no app's file stands for (a skill, a path a check looks for):
        // only a whole scan can tell.
        let skill = home.join("skills/new");
        std::fs::create_dir_all(&skill).unwrap();
        assert_eq!(candidates(&dirs, &[0, 1, 2], &[skill]), Err(Whole::Rebuild));
        // A search directory made (the web cache, on the first discovery): listed whole,
        // as is a flood of paths; only descriptors are in them.
        std::fs::create_dir_all(home.join("web")).unwrap();
        assert_eq!(
            candidates(&dirs, &[0, 1, 2], &[home.join("web")]),
            Err(Whole::List)
        );
        let many: Vec<_> = (0..=super::MAX_TOUCHED)
            .map(|i| home.join(format!("a{i}")))
            .collect();
        assert_eq!(candidates(&dirs, &[0, 1, 2], &many), Err(Whole::List));
    }
}
