//! Agent Skills as apps (`docs/skills.md`): each folder with a `SKILL.md` under
//! `$AAI_HOME/skills/`, `~/.claude/skills/` or `~/.codex/skills/` (in that order; the
//! first skill of a name wins) becomes the app `skill.<name>`. Its name and description
//! come from the front matter (`name`, `description`); its one tool, `read`, returns the
//! body, one section or one file of the folder (`exec/skill.rs`), and its description
//! lists the sections and the files, so they cost a client nothing until it reads the
//! skill's guide.

use std::path::{Path, PathBuf};

use aai_descriptor::App;
use serde_json::json;

/// How many files of a skill its tool's description lists.
const LISTED_FILES: usize = 50;
/// How many directory entries (files, folders, links, hidden ones) one skill's walk
/// visits at most (its files are counted and kept to sort), and a skills folder's
/// listing too: past it, the walk stops with a warning naming the folder.
const WALKED_MAX: usize = 10_000;
/// The largest `SKILL.md` read.
const MAX_SKILL: u64 = 1024 * 1024;

/// The folders skills are found in, for the AAI home `home` and the user's home `user`.
pub(crate) fn roots(home: &Path, user: Option<&Path>) -> Vec<PathBuf> {
    let mut roots = vec![home.join("skills")];
    if let Some(user) = user {
        roots.push(user.join(".claude").join("skills"));
        roots.push(user.join(".codex").join("skills"));
    }
    roots
}

/// The skills in `roots`, as apps with their `SKILL.md` as source. A folder whose
/// `SKILL.md` cannot be read or has no front matter with a name is left out (logged).
pub(crate) fn apps(roots: &[PathBuf]) -> Vec<(App, PathBuf)> {
    let mut out: Vec<(App, PathBuf)> = Vec::new();
    for root in roots {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        let mut folders: Vec<PathBuf> = Vec::new();
        for (visited, entry) in entries.enumerate() {
            if visited >= WALKED_MAX {
                tracing::warn!(folder = %root.display(), "the skills folder has more than {WALKED_MAX} entries; the rest are not looked at");
                break;
            }
            let Ok(entry) = entry else { continue };
            let path = entry.path();
            if path.join("SKILL.md").is_file() {
                folders.push(path);
            }
        }
        folders.sort();
        for folder in folders {
            let Some(text) = descriptor_text(&folder) else {
                tracing::warn!(folder = %folder.display(), "a skill without a readable SKILL.md front matter (name, description) is left out");
                continue;
            };
            let source = folder.join("SKILL.md");
            let parsed = aai_descriptor::parse(&text, &source.to_string_lossy());
            match parsed.app {
                Some(app) if !out.iter().any(|(a, _)| a.id == app.id) => out.push((app, source)),
                Some(app) => tracing::warn!(
                    folder = %folder.display(),
                    "a skill named like one found before (`{}`) is left out",
                    app.id
                ),
                None => {
                    tracing::warn!(folder = %folder.display(), "the skill's descriptor is invalid: {:?}", parsed.diagnostics)
                }
            }
        }
    }
    out
}

/// The descriptor the gateway writes for the skill in `folder` (what `resources/read`
/// serves for it), or `None` when its `SKILL.md` has no usable front matter.
pub(crate) fn descriptor_text(folder: &Path) -> Option<String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    let file = std::fs::File::open(folder.join("SKILL.md")).ok()?;
    // Only a regular file (a FIFO would never end).
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    file.take(MAX_SKILL).read_to_end(&mut bytes).ok()?;
    // Cut at 1 MiB, maybe inside a character: the front matter is at the top anyway.
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (front, body) = crate::text::front_matter(&text)?;
    let fields = fields(front);
    let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let (name, slug) = named(&fields)?;
    let description = get("description")
        .filter(|d| !d.is_empty())
        .map_or_else(|| first_paragraph(body), str::to_owned);
    let sections: Vec<String> = crate::text::headings(body)
        .map(|(_, h)| format!("`{h}`"))
        .take(LISTED_FILES)
        .collect();
    let mut files = Vec::new();
    let mut walk = Walk::new(WALKED_MAX);
    if let Err(stopped) = list_files(folder, folder, &mut files, &mut walk) {
        tracing::warn!(folder = %folder.display(), "the skill's folder has more than {WALKED_MAX} files and folders; its walk stopped at {}, and its file list is partial", stopped.display());
    }
    let seen = files.len();
    files.sort();
    let more = seen.saturating_sub(LISTED_FILES);
    files.truncate(LISTED_FILES);
    let mut about = "Read this skill: with no argument, its instructions (SKILL.md without its front matter); `section` for one section by its heading; `file` for one of its files (a path inside the skill's folder).".to_owned();
    if !sections.is_empty() {
        about.push_str(&format!("\nSections: {}.", sections.join(", ")));
    }
    if !files.is_empty() {
        let files: Vec<String> = files.iter().map(|f| format!("`{f}`")).collect();
        about.push_str(&format!("\nFiles: {}", files.join(", ")));
        if more > 0 {
            let plus = if walk.left == 0 { "+" } else { "" };
            about.push_str(&format!(" and {more}{plus} more"));
        }
        about.push('.');
    }
    let platform = super::builtin::host_platform();
    let doc = json!({
        "schemaVersion": "1.0",
        "version": "1.0.0",
        "platform": platform,
        "app": {
            "id": format!("skill.{slug}"),
            "name": {"en": name},
            "defaultLang": "en",
            "description": description,
            "aliases": ["skill", name],
        },
        "execution": {"type": "skill", "path": folder.to_string_lossy()},
        "tools": [{
            "name": "read",
            "description": about,
            "readOnly": true,
            "parameters": {
                "type": "object",
                "properties": {
                    "section": {"type": "string", "description": "A heading of SKILL.md"},
                    "file": {"type": "string", "description": "A file of the skill, relative to its folder"},
                },
            },
        }],
    });
    serde_json::to_string_pretty(&doc).ok()
}

/// The folder name a skill whose `SKILL.md` is `text` takes (its app id is `skill.<it>`):
/// its front matter's `name`, lower-cased, other characters than letters and digits as `-`.
pub(crate) fn folder_name(text: &str) -> Option<String> {
    let (front, _) = crate::text::front_matter(text)?;
    named(&fields(front)).map(|(_, slug)| slug)
}

/// The front matter's `name` and the slug made of it.
fn named(fields: &[(String, String)]) -> Option<(&str, String)> {
    let name = fields
        .iter()
        .find(|(n, _)| n == "name")
        .map(|(_, v)| v.as_str())
        .filter(|n| !n.is_empty())?;
    let slug: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .trim_matches('-')
        .to_owned();
    (!slug.is_empty()).then_some((name, slug))
}

/// The `key: value` lines of a front matter (quotes taken off; an indented line continues
/// the value before it, as YAML's folded scalars do).
fn fields(front: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in front.lines() {
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = out.last_mut() {
                if !value.is_empty() {
                    value.push(' ');
                }
                value.push_str(line.trim());
            }
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let value = match value {
            ">" | "|" | ">-" | "|-" => "",
            v => v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v),
        };
        out.push((key.trim().to_owned(), value.to_owned()));
    }
    out
}

/// The first paragraph of a markdown body that is not a heading, for a skill without a
/// description.
fn first_paragraph(body: &str) -> String {
    body.split("\n\n")
        .map(str::trim)
        .find(|p| !p.is_empty() && !p.starts_with('#'))
        .map_or_else(
            || "An Agent Skill".to_owned(),
            |p| crate::text::excerpt(p, 300),
        )
}

/// What a walk may still visit.
struct Walk {
    /// Directory entries left (files and folders alike).
    left: usize,
}

impl Walk {
    fn new(max: usize) -> Walk {
        Walk { left: max }
    }
}

/// The files under `dir` (relative to `root`), hidden ones left out, links not followed.
/// Every entry read counts against `walk` (hidden ones, folders and links too); when none
/// is left, the walk stops and the folder it stopped in is the error.
fn list_files(
    root: &Path,
    dir: &Path,
    out: &mut Vec<String>,
    walk: &mut Walk,
) -> Result<(), PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries {
        if walk.left == 0 {
            return Err(dir.to_owned());
        }
        walk.left -= 1;
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            list_files(root, &path, out, walk)?;
        } else if kind.is_file()
            && let Ok(relative) = path.strip_prefix(root)
            && relative != Path::new("SKILL.md")
        {
            out.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_counts_folders_and_stops_at_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("many");
        // Empty folders only: a walk that counted files alone would visit them all.
        for i in 0..300 {
            std::fs::create_dir_all(skill.join(format!("d{i}"))).unwrap();
        }
        std::fs::write(skill.join("SKILL.md"), "---\nname: many\n---\nbody\n").unwrap();
        let mut files = Vec::new();
        let mut walk = Walk::new(100);
        let stopped = list_files(&skill, &skill, &mut files, &mut walk);
        assert_eq!(stopped, Err(skill.clone()));
        assert_eq!(walk.left, 0);
        assert!(files.is_empty());
    }

    #[test]
    fn a_skill_with_more_entries_than_the_limit_is_listed_partially_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("huge");
        for i in 0..=WALKED_MAX {
            std::fs::create_dir_all(skill.join(format!("d{i}"))).unwrap();
        }
        std::fs::write(skill.join("SKILL.md"), "---\nname: huge\n---\nbody\n").unwrap();
        let logs = Logs::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .finish();
        let text = tracing::subscriber::with_default(subscriber, || descriptor_text(&skill));
        assert!(text.is_some(), "the skill is still served");
        let logs = logs.text();
        assert!(logs.contains("walk stopped"), "{logs}");
        assert!(logs.contains(&skill.display().to_string()), "{logs}");
    }

    /// Log lines, kept for a test to read.
    #[derive(Clone, Default)]
    struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Logs {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    impl std::io::Write for Logs {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
        type Writer = Logs;
        fn make_writer(&'a self) -> Logs {
            self.clone()
        }
    }

    #[test]
    fn front_matter_fields_are_read_like_yaml_scalars() {
        let f = super::fields("name: pdf-tools\ndescription: >\n  Fill PDF\n  forms\nother: 'x'\n");
        assert_eq!(f[0], ("name".into(), "pdf-tools".into()));
        assert_eq!(f[1], ("description".into(), "Fill PDF forms".into()));
        assert_eq!(f[2], ("other".into(), "x".into()));
    }
}
