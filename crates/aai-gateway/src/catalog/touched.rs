//! Which descriptor files a changed path stands for, so that a file event (or the
//! gateway's own write) re-reads only those and not every file of every directory
//! (docs/performance.md, "Over a gateway's life").
//!
//! A path stands for the file a whole scan would list there: in a folder layout,
//! `<dir>/<name>` and anything in `<dir>/<name>/aai.json`'s place stand for that file; in
//! a flat layout, `<dir>/<name>.json` for itself; in the macOS layout, the bundle's
//! `Contents/Resources/aai.json`. A web app's `meta.json` stands for its descriptor, read
//! again whatever its stamp (where it came from is part of it).

use std::ffi::OsStr;
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
    /// Every directory must be listed (no whole scan yet; a search directory made, whose
    /// files' events may have come before its watch; a path the scan cannot place), but
    /// only descriptors changed.
    List,
    /// And what clients see must be rebuilt, whatever the descriptors: a new folder that
    /// is no app's (a skill, a path a `discovery.checks` entry looks for), or a burst too
    /// large to look at path by path (what it held is not known).
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
        return Err(Whole::Rebuild);
    }
    let mut out: Vec<Touched> = Vec::new();
    let mut whole = None;
    let mut real = Real::default();
    for changed in changed {
        let Some(paths) = real.as_searched(dirs, searched, changed) else {
            // Under no search directory as the gateway names it: not understood.
            whole = whole.or(Some(Whole::List));
            continue;
        };
        let before = out.len();
        for path in &paths {
            for &index in searched {
                stands_for(&dirs[index], path, |file, reread| {
                    out.push(Touched {
                        index,
                        path: file,
                        reread,
                    });
                });
            }
        }
        if out.len() == before && changed.is_dir() {
            if !dirs.iter().any(|d| d.dir.starts_with(changed)) {
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

/// The search directories' real folders, found on first need.
#[derive(Default)]
struct Real(Option<Vec<Option<PathBuf>>>);

impl Real {
    /// `path` as the searched directories name it: as it is, and through the searched
    /// twin of a directory that is not searched itself (the same folder reached twice, a
    /// symlink: a watcher reports it through either); or through a directory's real
    /// folder (FSEvents on macOS names `/private/var/…` for `/var/…`). `None` when it is
    /// under no search directory at all.
    fn as_searched(
        &mut self,
        dirs: &[SearchDir],
        searched: &[usize],
        path: &Path,
    ) -> Option<Vec<PathBuf>> {
        let mut out = Vec::new();
        let mut under_any = false;
        for (index, dir) in dirs.iter().enumerate() {
            let Ok(rest) = path.strip_prefix(&dir.dir) else {
                continue;
            };
            under_any = true;
            if searched.contains(&index) {
                if out.is_empty() {
                    out.push(path.to_owned());
                }
            } else if let Some(twin) = self.twin(dirs, searched, index) {
                out.push(twin.join(rest));
            }
        }
        if under_any {
            return Some(out);
        }
        let real = self.of(dirs);
        let (index, rest) = real
            .iter()
            .enumerate()
            .find_map(|(index, real)| Some((index, path.strip_prefix(real.as_deref()?).ok()?)))?;
        let dir = if searched.contains(&index) {
            dirs[index].dir.clone()
        } else {
            self.twin(dirs, searched, index)?
        };
        Some(vec![dir.join(rest)])
    }

    /// The searched directory that is the same folder as `dirs[index]`.
    fn twin(&mut self, dirs: &[SearchDir], searched: &[usize], index: usize) -> Option<PathBuf> {
        let real = self.of(dirs);
        let mine = real[index].as_ref()?;
        searched
            .iter()
            .find(|&&i| real[i].as_ref() == Some(mine))
            .map(|&i| dirs[i].dir.clone())
    }

    fn of(&mut self, dirs: &[SearchDir]) -> &[Option<PathBuf>] {
        self.0.get_or_insert_with(|| {
            dirs.iter()
                .map(|d| std::fs::canonicalize(&d.dir).ok())
                .collect()
        })
    }
}

/// Hands `found` each file `path` stands for in `dir` (at most two: in a mixed layout
/// `<dir>/<name>.json` may be a file or a folder), and whether it must be read again
/// whatever its stamp.
fn stands_for(dir: &SearchDir, path: &Path, mut found: impl FnMut(PathBuf, bool)) {
    // A directory that is one file: itself (a scanPath naming a file).
    if path == dir.dir {
        if dir.layout == Layout::File || !dir.dir.is_dir() {
            found(path.to_owned(), false);
        }
        return;
    }
    if dir.layout == Layout::File {
        return;
    }
    let Ok(rest) = path.strip_prefix(&dir.dir) else {
        return;
    };
    let parts: Vec<&OsStr> = rest
        .components()
        .map_while(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    if parts.len() != rest.components().count() {
        return;
    }
    let flat = matches!(dir.layout, Layout::Flat | Layout::Mixed);
    let folders = matches!(dir.layout, Layout::AppDirs | Layout::Mixed);
    // As `list` reads names: lossily.
    let app_folder = |name: &OsStr| {
        !(dir.kind == SourceKind::User && OWN_FOLDERS.contains(&&*name.to_string_lossy()))
    };
    let in_folder = |name: &OsStr| dir.dir.join(name).join("aai.json");
    let is = |name: &OsStr, what: &str| name == OsStr::new(what);
    match parts.as_slice() {
        // `<dir>/<name>.json` in a flat layout, and a folder in a folder layout (made,
        // renamed or removed): which it is, the look at the file tells.
        [name] => {
            if flat && is_descriptor_name(&name.to_string_lossy()) {
                found(path.to_owned(), false);
            }
            if folders && app_folder(name) {
                found(in_folder(name), false);
            }
        }
        [name, file] if folders && is(file, "aai.json") && app_folder(name) => {
            found(path.to_owned(), false);
        }
        [name, file] if folders && is(file, "meta.json") && dir.kind == SourceKind::WebCache => {
            found(in_folder(name), true);
        }
        [bundle, ..]
            if dir.layout == Layout::Bundles && bundle.to_string_lossy().ends_with(".app") =>
        {
            found(
                dir.dir.join(bundle).join("Contents/Resources/aai.json"),
                false,
            );
        }
        _ => {}
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
            // In a mixed layout `<name>.json` may be a file or a folder: both are looked
            // at (one moved out is gone either way).
            assert_eq!(
                candidates(&linked, &[0], &[link.join("tool.json")]).unwrap(),
                [
                    touched(0, link.join("tool.json"), false),
                    touched(0, link.join("tool.json/aai.json"), false)
                ]
            );
            // A directory reached twice is searched once, at its first place; a watcher
            // may report it through the other (the later watch of one folder wins).
            let twice = [
                dirs[0].clone(),
                SearchDir {
                    kind: SourceKind::Config,
                    dir: root.path().join("home-again"),
                    layout: Layout::Mixed,
                },
            ];
            std::fs::create_dir_all(&home).unwrap();
            std::os::unix::fs::symlink(&home, &twice[1].dir).unwrap();
            assert_eq!(
                candidates(&twice, &[0], &[twice[1].dir.join("com.example.t/aai.json")]).unwrap(),
                [touched(0, home.join("com.example.t/aai.json"), false)]
            );
        }
        // A new folder no app's file stands for (a skill, a path a check looks for):
        // only a whole scan can tell.
        let skill = home.join("skills/new");
        std::fs::create_dir_all(&skill).unwrap();
        assert_eq!(candidates(&dirs, &[0, 1, 2], &[skill]), Err(Whole::Rebuild));
        // A search directory made (the web cache, on the first discovery): listed whole;
        // only descriptors are in it. A flood of paths: what it held is not known.
        std::fs::create_dir_all(home.join("web")).unwrap();
        assert_eq!(
            candidates(&dirs, &[0, 1, 2], &[home.join("web")]),
            Err(Whole::List)
        );
        let many: Vec<_> = (0..=super::MAX_TOUCHED)
            .map(|i| home.join(format!("a{i}")))
            .collect();
        assert_eq!(candidates(&dirs, &[0, 1, 2], &many), Err(Whole::Rebuild));
    }
}
