//! Where descriptors live on each OS (docs/descriptors.md, Where descriptors are found).
//!
//! Every OS's paths are computed on every OS, from an environment lookup and a root
//! prefix, so the macOS and Windows layouts are tested here against a fake root.
//! `AAI_SYSTEM_ROOT` sets the prefix for real runs (packaging checks, hermetic tests).

use std::path::{Component, Path, PathBuf};

use super::{Layout, SearchDir, SourceKind};
use crate::host::Os;

/// The search directories in precedence order: the user dir (`home`), config
/// `scanPaths`, this OS's system paths (re-rooted at `$AAI_SYSTEM_ROOT` when set, for
/// tests), then the web cache.
pub(crate) fn search_dirs(home: &Path, scan_paths: &[PathBuf], os: Os) -> Vec<SearchDir> {
    let mut dirs = vec![SearchDir {
        kind: SourceKind::User,
        dir: home.to_owned(),
        layout: Layout::AppDirs,
    }];
    dirs.extend(scan_paths.iter().cloned().map(SearchDir::config));
    let root = system_root();
    let env = |k: &str| std::env::var(k).ok();
    dirs.extend(system_dirs(os, &env, &root));
    dirs.push(SearchDir {
        kind: SourceKind::WebCache,
        dir: super::web::cache_dir(home),
        layout: Layout::AppDirs,
    });
    dirs
}

/// Where system paths start: `$AAI_SYSTEM_ROOT`, else `/`.
pub(crate) fn system_root() -> PathBuf {
    std::env::var_os("AAI_SYSTEM_ROOT")
        .filter(|r| !r.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// The system search directories of `os`, in precedence order (per-user before
/// system-wide). `env` looks up environment variables; every path is put under `root`.
pub(crate) fn system_dirs(
    os: Os,
    env: &dyn Fn(&str) -> Option<String>,
    root: &Path,
) -> Vec<SearchDir> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty());
    let dir = |path: PathBuf, layout: Layout| SearchDir {
        kind: SourceKind::System,
        dir: rooted(root, &path),
        layout,
    };
    match os {
        Os::Linux => {
            let home = var("HOME").map(PathBuf::from);
            let data_home = var("XDG_DATA_HOME")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".local/share")));
            let data_dirs =
                var("XDG_DATA_DIRS").unwrap_or_else(|| "/usr/local/share:/usr/share".to_owned());
            let mut dirs: Vec<SearchDir> = data_home
                .into_iter()
                .chain(
                    data_dirs
                        .split(':')
                        .filter(|d| !d.is_empty())
                        .map(PathBuf::from),
                )
                .map(|d| dir(d.join("applications/aai"), Layout::Flat))
                .collect();
            dirs.push(dir(PathBuf::from("/opt"), Layout::AppDirs));
            dirs
        }
        Os::Macos => {
            let mut dirs = Vec::new();
            if let Some(home) = var("HOME") {
                dirs.push(dir(Path::new(&home).join("Applications"), Layout::Bundles));
            }
            dirs.push(dir(PathBuf::from("/Applications"), Layout::Bundles));
            dirs
        }
        Os::Windows => ["APPDATA", "PROGRAMDATA"]
            .into_iter()
            .filter_map(var)
            .map(|base| dir(windows_join(&base, "aai"), Layout::Flat))
            .collect(),
        Os::Other => Vec::new(),
    }
}

/// The user directory `$AAI_HOME` defaults to: `~/.aai` (Windows `%USERPROFILE%\.aai`).
pub(crate) fn default_home(os: Os, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let base = match os {
        Os::Windows => env("USERPROFILE"),
        _ => env("HOME"),
    }
    .filter(|v| !v.is_empty())
    .map(PathBuf::from)
    .or_else(std::env::home_dir)?;
    Some(base.join(".aai"))
}

/// `base\child` for a Windows path given as text, whatever OS builds it.
fn windows_join(base: &str, child: &str) -> PathBuf {
    let base = base.trim_end_matches(['\\', '/']);
    PathBuf::from(format!("{base}\\{child}"))
}

/// Puts `path` under `root`; a root of `/` (or empty) leaves it as it is. Windows paths
/// (`C:\ProgramData`) keep their drive letter as a folder name under a fake root.
fn rooted(root: &Path, path: &Path) -> PathBuf {
    if root.as_os_str().is_empty() || root == Path::new("/") {
        return path.to_owned();
    }
    let text = path.to_string_lossy();
    if text.contains('\\') || text.as_bytes().get(1) == Some(&b':') {
        let mut out = root.to_owned();
        for part in text.split(['\\', '/']).filter(|p| !p.is_empty()) {
            out.push(part.trim_end_matches(':'));
        }
        return out;
    }
    let mut out = root.to_owned();
    for c in path.components() {
        if let Component::Normal(part) = c {
            out.push(part);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn shown(dirs: &[SearchDir]) -> Vec<String> {
        dirs.iter()
            .map(|d| format!("{} {:?}", d.dir.display(), d.layout))
            .collect()
    }

    #[test]
    fn linux_paths() {
        let e = env(&[("HOME", "/home/u")]);
        assert_eq!(
            shown(&system_dirs(Os::Linux, &e, Path::new("/fake"))),
            [
                "/fake/home/u/.local/share/applications/aai Flat",
                "/fake/usr/local/share/applications/aai Flat",
                "/fake/usr/share/applications/aai Flat",
                "/fake/opt AppDirs",
            ]
        );
        let e = env(&[
            ("HOME", "/h"),
            ("XDG_DATA_HOME", "/x"),
            ("XDG_DATA_DIRS", "/a:/b"),
        ]);
        assert_eq!(
            shown(&system_dirs(Os::Linux, &e, Path::new("/"))),
            [
                "/x/applications/aai Flat",
                "/a/applications/aai Flat",
                "/b/applications/aai Flat",
                "/opt AppDirs"
            ]
        );
    }

    #[test]
    fn macos_paths() {
        let e = env(&[("HOME", "/Users/alice")]);
        assert_eq!(
            shown(&system_dirs(Os::Macos, &e, Path::new("/fake"))),
            [
                "/fake/Users/alice/Applications Bundles",
                "/fake/Applications Bundles"
            ]
        );
    }

    #[test]
    fn windows_paths() {
        let e = env(&[
            ("APPDATA", r"C:\Users\Alice\AppData\Roaming"),
            ("PROGRAMDATA", r"C:\ProgramData"),
            ("USERPROFILE", r"C:\Users\Alice"),
        ]);
        assert_eq!(
            shown(&system_dirs(Os::Windows, &e, Path::new("/fake"))),
            [
                "/fake/C/Users/Alice/AppData/Roaming/aai Flat",
                "/fake/C/ProgramData/aai Flat"
            ]
        );
        assert_eq!(
            default_home(Os::Windows, &e).unwrap(),
            PathBuf::from(r"C:\Users\Alice").join(".aai")
        );
    }
}
