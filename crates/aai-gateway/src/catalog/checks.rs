//! `discovery.checks` of access-form descriptors (docs/descriptors.md, access): whether an
//! app is active on this machine, decided at each scan. An app with a check that does not
//! hold is not served; the scan says which check and why.
//!
//! Probing runs nothing: a command is looked for on `PATH` (`host::on_path`, the
//! executable bit on Unix, `PATHEXT` on Windows), a file or a folder is looked up with one
//! `stat`. A path starting with `~/` is in the user's home; a relative path is relative to
//! the descriptor's folder.

use std::path::{Path, PathBuf};

use aai_descriptor::Check;

/// The first check of `checks` that does not hold, as its index and why.
///
/// `folder` is the descriptor's folder, `home` the user's home (for `~/`), `find` finds a
/// program on `PATH` (`host::on_path`; tests give their own).
pub(crate) fn unmet(
    checks: &[Check],
    folder: &Path,
    home: Option<&Path>,
    find: impl Fn(&str) -> Option<PathBuf>,
) -> Option<(usize, String)> {
    checks.iter().enumerate().find_map(|(i, check)| {
        let why =
            match check {
                Check::Command { command } if is_bare(command) => find(command)
                    .is_none()
                    .then(|| format!("no `{command}` on PATH")),
                Check::Command { command: written }
                | Check::File { path: written }
                | Check::Path { path: written } => match place(written, folder, home) {
                    None => Some(format!(
                        "`{written}` is in the home folder, and there is none (HOME is not set)"
                    )),
                    Some(at) => match check {
                        Check::Command { .. } => (!is_program(&at)).then(|| {
                            format!(
                                "the program `{written}` ({}) does not exist or is not executable",
                                at.display()
                            )
                        }),
                        Check::File { .. } => (!at.is_file())
                            .then(|| format!("no file `{written}` ({})", at.display())),
                        Check::Path { .. } => (!at.is_dir())
                            .then(|| format!("no folder `{written}` ({})", at.display())),
                    },
                },
            };
        why.map(|why| (i, why))
    })
}

/// The user's home folder, for `~/` in checks.
pub(crate) fn user_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// A program name without a folder: looked up on `PATH`.
fn is_bare(command: &str) -> bool {
    !command.contains(['/', '\\']) && !command.starts_with('~')
}

/// Where a written path points: `~/…` in `home` (`None` without one), relative in
/// `folder`.
fn place(written: &str, folder: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let in_home = written
        .strip_prefix("~/")
        .or_else(|| written.strip_prefix("~\\"))
        .or_else(|| (written == "~").then_some(""));
    match in_home {
        Some(rest) => home.map(|h| h.join(rest)),
        None => Some(folder.join(written)),
    }
}

fn is_program(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(c: &str) -> Check {
        Check::Command {
            command: c.to_owned(),
        }
    }

    #[test]
    fn every_kind_of_check_is_probed_without_running_anything() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("app");
        let home = dir.path().join("home");
        std::fs::create_dir_all(folder.join("skill")).unwrap();
        std::fs::create_dir_all(home.join(".tool")).unwrap();
        std::fs::write(folder.join("skill/SKILL.md"), "x").unwrap();
        std::fs::write(home.join(".tool/config"), "x").unwrap();
        let on_path = |c: &str| (c == "npx").then(|| PathBuf::from("/usr/bin/npx"));
        let holds = [
            command("npx"),
            Check::Path {
                path: "skill".into(),
            },
            Check::File {
                path: "skill/SKILL.md".into(),
            },
            Check::File {
                path: "~/.tool/config".into(),
            },
            Check::Path {
                path: folder.to_string_lossy().into_owned(),
            },
        ];
        assert_eq!(unmet(&holds, &folder, Some(&home), on_path), None);

        let first_unmet = |check: Check| {
            let mut all = holds.to_vec();
            all.insert(1, check);
            unmet(&all, &folder, Some(&home), on_path)
        };
        assert_eq!(
            first_unmet(command("claude")),
            Some((1, "no `claude` on PATH".to_owned()))
        );
        // A folder is not a file, and a file is not a folder.
        let (i, why) = first_unmet(Check::File {
            path: "skill".into(),
        })
        .unwrap();
        assert_eq!(i, 1);
        assert!(why.starts_with("no file `skill` ("), "{why}");
        let (_, why) = first_unmet(Check::Path {
            path: "~/.tool/config".into(),
        })
        .unwrap();
        assert!(why.starts_with("no folder `~/.tool/config` ("), "{why}");
        // A path to a program: a file that is not executable does not count.
        let (_, why) = first_unmet(command("skill/SKILL.md")).unwrap();
        assert!(why.contains("does not exist or is not executable"), "{why}");
        // Without a home, `~/` names nothing (it is not a folder named `~`).
        let (i, why) = unmet(&holds, &folder, None, on_path).unwrap();
        assert_eq!(i, 3);
        assert!(why.contains("there is none"), "{why}");
    }
}
