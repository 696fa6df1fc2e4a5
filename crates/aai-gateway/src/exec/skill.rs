//! The `skill` executor (our extension; `docs/skills.md`): an Agent Skill's folder, read
//! by its one tool, `read {section?, file?}`:
//!
//! * nothing: the body of `SKILL.md` (what follows its front matter);
//! * `section`: one section of that body, by its heading (any level, case and spaces
//!   ignored), up to the next heading of the same or a higher level;
//! * `file`: one file of the skill, by its path inside the folder. A path that is absolute,
//!   climbs out (`..`), or resolves (through links) outside the folder is refused before
//!   anything is read; so is a file over 1 MiB or one that is not UTF-8 text.

use std::path::{Component, Path};

use aai_descriptor::Executor;
use serde_json::{Value, json};

use super::{Execute, Request};
use crate::error::{Code, GatewayError};

/// The largest file `read` returns.
const MAX_FILE: u64 = 1024 * 1024;

/// Why a skill could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The skill's folder or `SKILL.md` cannot be read.
    #[error("the skill at {path} cannot be read: {why}")]
    Unreadable {
        /// The folder.
        path: String,
        /// Why.
        why: std::io::Error,
    },
    /// `file` names something outside the skill's folder.
    #[error("`{0}` is not a file of this skill (paths stay inside its folder)")]
    Outside(String),
    /// `file` names nothing there.
    #[error("the skill has no file `{0}`")]
    NoFile(String),
    /// `file` is too large or not text.
    #[error("`{0}` is {1}")]
    NotText(String, &'static str),
    /// No section has that heading.
    #[error("SKILL.md has no section `{section}`; its sections are: {listed}")]
    NoSection {
        /// The heading asked for.
        section: String,
        /// The headings there are.
        listed: String,
    },
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match e {
            Error::Unreadable { .. } => Code::ServiceUnavailable,
            Error::Outside(_) | Error::NoFile(_) | Error::NotText(..) | Error::NoSection { .. } => {
                Code::InvalidParams
            }
        };
        GatewayError::new(code, e.to_string())
    }
}

/// Reads skills.
#[derive(Debug, Default)]
pub(crate) struct SkillExecutor;

impl Execute for SkillExecutor {
    async fn execute(&self, req: Request<'_>) -> Result<Value, super::Error> {
        let Executor::Skill(skill) = req.executor else {
            unreachable!("dispatched by executor type");
        };
        let folder = req.base_dir.join(&skill.path);
        let arg = |k: &str| req.args.get(k).and_then(Value::as_str).map(str::to_owned);
        let (section, file) = (arg("section"), arg("file"));
        let text = tokio::task::spawn_blocking(move || read(&folder, section, file))
            .await
            .map_err(|e| {
                super::Error::from(Error::Unreadable {
                    path: String::new(),
                    why: std::io::Error::other(e.to_string()),
                })
            })?
            .map_err(super::Error::from)?;
        Ok(json!({"content": [{"type": "text", "text": text}]}))
    }
}

/// What `read` returns for `section` or `file` of the skill in `folder`.
fn read(folder: &Path, section: Option<String>, file: Option<String>) -> Result<String, Error> {
    if let Some(file) = file.filter(|f| !f.is_empty()) {
        return read_file(folder, &file);
    }
    // SKILL.md itself passes the checks a `file` does: inside the folder (not a link
    // out), a regular file (never a FIFO), at most 1 MiB.
    let text = read_file(folder, "SKILL.md")?;
    let body = body(&text);
    match section.filter(|s| !s.trim().is_empty()) {
        None => Ok(body.to_owned()),
        Some(wanted) => section_of(body, &wanted).ok_or_else(|| Error::NoSection {
            listed: crate::text::headings(body)
                .map(|(_, h)| format!("`{h}`"))
                .collect::<Vec<_>>()
                .join(", "),
            section: wanted,
        }),
    }
}

/// A file of the skill: inside its folder, text, at most [`MAX_FILE`].
fn read_file(folder: &Path, file: &str) -> Result<String, Error> {
    let unreadable = |why| Error::Unreadable {
        path: folder.display().to_string(),
        why,
    };
    let relative = Path::new(file);
    if relative.is_absolute()
        || relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(Error::Outside(file.to_owned()));
    }
    let root = folder.canonicalize().map_err(unreadable)?;
    let Ok(path) = root.join(relative).canonicalize() else {
        return Err(Error::NoFile(file.to_owned()));
    };
    // A link inside the folder may point out of it.
    if !path.starts_with(&root) {
        return Err(Error::Outside(file.to_owned()));
    }
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() && meta.len() > MAX_FILE => {
            Err(Error::NotText(file.to_owned(), "larger than 1 MiB"))
        }
        Ok(meta) if meta.is_file() => {
            let bytes = std::fs::read(&path).map_err(unreadable)?;
            String::from_utf8(bytes).map_err(|_| Error::NotText(file.to_owned(), "not UTF-8 text"))
        }
        _ => Err(Error::NoFile(file.to_owned())),
    }
}

/// `SKILL.md` without its front matter (`---` … `---` at the top).
pub(crate) fn body(text: &str) -> &str {
    crate::text::front_matter(text).map_or(text, |(_, rest)| rest)
}

/// The section of `body` under the heading `wanted`, heading included.
fn section_of(body: &str, wanted: &str) -> Option<String> {
    let norm = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let wanted = norm(wanted.trim_start_matches('#'));
    let mut headings = crate::text::heading_lines(body);
    let (start, level, _) = headings.find(|(_, _, text)| norm(text) == wanted)?;
    // Up to the next heading of the same or a higher level.
    let end = headings
        .find(|(_, l, _)| *l <= level)
        .map(|(line, ..)| line);
    let lines: Vec<&str> = body.lines().collect();
    Some(
        lines[start..end.unwrap_or(lines.len())]
            .join("\n")
            .trim_end()
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKILL: &str = "---\nname: pdf-tools\ndescription: Fill PDF forms\n---\n\n# PDF tools\n\nIntro.\n\n## Filling forms\n\nUse the form.\n\n```sh\n# not a heading\n```\n\n### Details\n\nMore.\n\n## Other\n\nLast.\n";

    #[test]
    fn the_body_and_its_sections_are_read_by_heading() {
        assert!(body(SKILL).starts_with("# PDF tools"));
        let s = section_of(body(SKILL), "filling  FORMS").unwrap();
        assert!(s.starts_with("## Filling forms") && s.contains("# not a heading"));
        assert!(s.contains("### Details") && !s.contains("## Other"), "{s}");
        assert!(section_of(body(SKILL), "nope").is_none());
        let listed: Vec<_> = crate::text::headings(body(SKILL)).map(|(_, h)| h).collect();
        assert_eq!(listed, ["PDF tools", "Filling forms", "Details", "Other"]);
        assert_eq!(crate::text::front_matter("no front matter"), None);
    }

    #[test]
    fn a_file_outside_the_folder_is_refused_before_it_is_read() {
        let dir = std::env::temp_dir().join(format!("aai-skill-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("ref")).unwrap();
        std::fs::write(dir.join("ref/forms.md"), "forms").unwrap();
        assert_eq!(read_file(&dir, "ref/forms.md").unwrap(), "forms");
        for bad in ["../../etc/passwd", "/etc/passwd", "ref/../../x"] {
            assert!(
                matches!(read_file(&dir, bad), Err(Error::Outside(_))),
                "{bad}"
            );
        }
        assert!(matches!(read_file(&dir, "nope.md"), Err(Error::NoFile(_))));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc/hostname", dir.join("link")).unwrap();
            assert!(matches!(read_file(&dir, "link"), Err(Error::Outside(_))));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
