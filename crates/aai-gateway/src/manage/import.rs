//! What an import would write: a source (an MCP client configuration or one server of
//! it, an OpenAPI document, an Agent Skill, an `aai.json`) turned into drafts through the
//! same converters as the CLI's `import` (`aai_author`). Making drafts writes nothing and
//! runs nothing; a URL is fetched (https, or http on this machine) like `web_discover`
//! fetches a descriptor.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::Error;
use crate::exec::start::Start;

/// The largest source read by URL or path (an OpenAPI document, a configuration file, a
/// skill file, a descriptor): an agent's
/// import reads and converts it before anyone is asked, at some 40 times its size in
/// memory (docs/manage.md). The CLI's `import openapi` takes up to
/// [`aai_author::openapi::MAX_DOCUMENT`].
const MAX_SOURCE: usize = 16 * 1024 * 1024;
/// A skill folder copied whole: at most this many files and folders, this many bytes in
/// all, folders this deep.
const SKILL_FILES: usize = 1000;
const SKILL_BYTES: u64 = 32 * 1024 * 1024;
const SKILL_DEPTH: usize = 16;

/// Names in `$AAI_HOME` that are the gateway's own files and folders: no app id may take
/// them (an app's folder there would break the home).
const HOME_NAMES: [&str; 12] = [
    "config.json",
    "apps.json",
    "credentials.json",
    "state.db",
    "state.db-wal",
    "state.db-shm",
    "token",
    "web",
    "logs",
    "cache",
    "skills",
    "trash",
];

/// The home drafts are made for, and the app ids the caller may not see: those are
/// neither replaced nor described through an import.
struct Home<'a> {
    dir: &'a Path,
    hidden: &'a (dyn Fn(&str) -> bool + Sync),
}

impl Home<'_> {
    fn visible(&self, id: &str) -> Result<(), Error> {
        if (self.hidden)(id) {
            return Err(Error::Exists(format!(
                "`{id}` cannot be imported by this client"
            )));
        }
        Ok(())
    }

    fn ours(&self, folder: &Path, id: &str) -> Result<bool, Error> {
        self.visible(id)?;
        ours(folder, id)
    }
}

/// What a source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// MCP servers (`mcpServers`, `servers`, Codex's TOML, or one server's entry).
    Mcp,
    /// An OpenAPI 3.x document.
    OpenApi,
    /// An Agent Skill (a folder with `SKILL.md`, or a `SKILL.md` by URL).
    Skill,
    /// An `aai.json` descriptor.
    Descriptor,
}

impl Kind {
    /// The name used in arguments and results.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Mcp => "mcp",
            Kind::OpenApi => "openapi",
            Kind::Skill => "skill",
            Kind::Descriptor => "aai.json",
        }
    }

    fn parse(name: &str) -> Result<Kind, Error> {
        Ok(match name {
            "mcp" => Kind::Mcp,
            "openapi" => Kind::OpenApi,
            "skill" => Kind::Skill,
            "aai.json" | "aai" | "descriptor" => Kind::Descriptor,
            other => {
                return Err(Error::Args(format!(
                    "`kind` `{other}` is not one of `mcp`, `openapi`, `skill`, `aai.json`"
                )));
            }
        })
    }
}

/// What an import is asked to read.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    /// The `source` argument: an object (MCP configuration) or a URL or path.
    pub source: &'a Value,
    /// `kind`, when the caller said.
    pub kind: Option<&'a str>,
    /// `name`: the server's name, for one server's entry.
    pub name: Option<&'a str>,
    /// `summary`: the description the imported app is listed with.
    pub summary: Option<&'a str>,
}

/// What one draft writes.
#[derive(Debug, Clone)]
pub(crate) enum Payload {
    /// `<folder>/aai.json` (and its fingerprint, as `import` writes).
    Descriptor(String),
    /// `<folder>/SKILL.md` alone.
    SkillFile(String),
    /// A copy of this folder (regular files and folders; links are not followed).
    SkillFolder(PathBuf),
}

/// One app an import would add.
#[derive(Debug, Clone)]
pub(crate) struct Draft {
    /// Its app id.
    pub id: String,
    /// What it came from.
    pub kind: Kind,
    /// Its name.
    pub name: String,
    /// Its tools; `None` for a server that lists them when it first runs.
    pub tools: Option<Vec<String>>,
    /// What its bindings start (an adapter's or a server's command, or the server it
    /// connects to): an approved import allows these to start for the rest of the run.
    pub starts: Vec<Start>,
    /// What its calls can run, read or reach, for every binding ([`crate::exec::reach`]):
    /// what the import question names.
    pub reach: Vec<String>,
    /// The folder it is written to.
    pub folder: PathBuf,
    /// What is written there.
    pub payload: Payload,
    /// Credential store entries (key, value) stored with it.
    pub secrets: Vec<(String, String)>,
    /// What the user should know.
    pub notes: Vec<String>,
    /// It replaces a descriptor an earlier import wrote (not edited since).
    pub replaces: bool,
}

impl Draft {
    /// The names of the credentials stored with it (never a value).
    pub(crate) fn secret_names(&self) -> Vec<&str> {
        self.secrets
            .iter()
            .map(|(key, _)| crate::auth::fill::name_of(&self.id, key).unwrap_or("its API key"))
            .collect()
    }

    /// The preview of this draft, as the tool returns it.
    pub(crate) fn preview(&self) -> Value {
        let mut out = json!({
            "app": self.id,
            "kind": self.kind.as_str(),
            "name": self.name,
            "writes": self.folder,
        });
        match &self.tools {
            Some(tools) => out["tools"] = json!(tools),
            None => out["tools"] = json!("listed by the server when it first runs"),
        }
        if !self.reach.is_empty() {
            out["reaches"] = json!(self.reach);
        }
        if !self.secrets.is_empty() {
            out["credentials"] = json!(self.secret_names());
        }
        if self.replaces {
            out["replaces"] = json!(true);
        }
        if !self.notes.is_empty() {
            out["notes"] = json!(self.notes);
        }
        out
    }
}

/// The drafts `request` makes for the home `home` on `platform` (`linux`, `macos`, …).
pub(crate) async fn drafts(
    dir: &Path,
    platform: &str,
    request: &Request<'_>,
    hidden: &(dyn Fn(&str) -> bool + Sync),
) -> Result<Vec<Draft>, Error> {
    let home = &Home { dir, hidden };
    let kind = request.kind.map(Kind::parse).transpose()?;
    let mut drafts = match request.source {
        Value::Object(_) => {
            if kind.is_some_and(|k| k != Kind::Mcp) {
                return Err(Error::Args(
                    "an object `source` is an MCP configuration; give a URL or path for other kinds".into(),
                ));
            }
            let text = mcp_text(request.source, request.name)?;
            mcp(home, platform, &text)?
        }
        Value::String(s) if s.starts_with("https://") || s.starts_with("http://") => {
            let _one = one_at_a_time().await;
            let text = fetch(s, MAX_SOURCE).await?;
            from_text(home, platform, &text, kind, Some(s)).map_err(first_line)?
        }
        Value::String(s) if !s.is_empty() => {
            let _one = one_at_a_time().await;
            from_path(home, platform, Path::new(s), kind).map_err(first_line)?
        }
        _ => {
            return Err(Error::Args(
                "`source` is an MCP configuration (object), or a URL or path (string)".into(),
            ));
        }
    };
    if drafts.is_empty() {
        return Err(Error::Args("the source has nothing to import".into()));
    }
    for d in &mut drafts {
        check_id(home.dir, &d.id)?;
        if let Some(summary) = request.summary {
            set_summary(d, summary);
        }
    }
    Ok(drafts)
}

/// A source over [`MAX_SOURCE`], refused before it is parsed.
fn too_large(source: &str, len: u64) -> Error {
    Error::Args(format!(
        "{source} is {len} bytes; an import reads at most {} MiB (a larger OpenAPI document can be imported with `aai-gateway import openapi`, which the user runs)",
        MAX_SOURCE / (1024 * 1024)
    ))
}

/// Sources read by URL or path: one at a time. A large OpenAPI document takes a few
/// times its size in memory while it is parsed and converted, and a preview asks nobody,
/// so previews at once would add up; the others wait their turn (a call's timeout still
/// ends the wait).
static READING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// The turn of one source read by URL or path ([`READING`]).
async fn one_at_a_time() -> tokio::sync::SemaphorePermit<'static> {
    READING
        .acquire()
        .await
        .expect("the semaphore is never closed")
}

/// A converter's error about a text the caller did not pass inline (a file, a page) keeps
/// its first line only: parsers quote the offending line of the source, which may be any
/// file the gateway can read.
fn first_line(e: Error) -> Error {
    match e {
        Error::Args(text) => Error::Args(crate::text::excerpt(
            text.lines().next().unwrap_or_default(),
            300,
        )),
        other => other,
    }
}

/// An id an import may write: an app id in reverse-DNS form (a dot, no `..`), not the
/// gateway's own, not a name of the home's own files, and not something in the home
/// that is not a folder.
fn check_id(home: &Path, id: &str) -> Result<(), Error> {
    if id == super::APP_ID {
        return Err(Error::Args(format!(
            "`{}` is the gateway's own app; an import cannot take its id",
            super::APP_ID
        )));
    }
    let fits = !id.is_empty()
        && id.len() <= 128
        && id.contains('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        && !id.starts_with(['.', '-'])
        && !id.ends_with('.')
        && !id.contains("..");
    if !fits || HOME_NAMES.iter().any(|n| n.eq_ignore_ascii_case(id)) {
        return Err(Error::Args(format!(
            "`{}` cannot be an imported app's id: an id is 1-128 letters, digits, `.`, `-` and `_` in reverse-DNS form (e.g. `com.example.api`), and not a name the gateway's home uses",
            crate::text::excerpt(id, 130)
        )));
    }
    match std::fs::symlink_metadata(home.join(id)) {
        Ok(meta) if !meta.is_dir() => Err(Error::Exists(format!(
            "{} exists and is not an app's folder",
            home.join(id).display()
        ))),
        _ => Ok(()),
    }
}

/// The configuration text of an object `source`: a whole configuration as it is, a map
/// of servers or one server's entry (named by `name`) inside `mcpServers`.
fn mcp_text(source: &Value, name: Option<&str>) -> Result<String, Error> {
    let keyed = ["mcpServers", "servers", "mcp"]
        .iter()
        .any(|k| source.get(k).is_some());
    let one = source.get("command").is_some() || source.get("url").is_some();
    let doc = if keyed {
        source.clone()
    } else if one {
        let name = name.filter(|n| !n.is_empty()).ok_or_else(|| {
            Error::Args("one server's entry needs `name` (the server's name)".into())
        })?;
        json!({"mcpServers": {name: source}})
    } else {
        json!({"mcpServers": source})
    };
    Ok(doc.to_string())
}

/// Drafts from a fetched text, by its content or `kind`.
fn from_text(
    home: &Home<'_>,
    platform: &str,
    text: &str,
    kind: Option<Kind>,
    url: Option<&str>,
) -> Result<Vec<Draft>, Error> {
    match kind.map_or_else(|| detect(text), Ok)? {
        Kind::Mcp => mcp(home, platform, text),
        Kind::OpenApi => openapi(home, text, url),
        Kind::Skill => skill_file(home, text),
        Kind::Descriptor => descriptor(home, text, url.unwrap_or("the descriptor")),
    }
}

/// What a text is: JSON by its keys, else a `SKILL.md` by its front matter, else YAML
/// OpenAPI or Codex's TOML by their marks.
fn detect(text: &str) -> Result<Kind, Error> {
    let text = text.trim_start_matches('\u{feff}');
    // The top-level keys only: a document is parsed whole once, by its converter.
    type Keys = std::collections::HashMap<String, serde::de::IgnoredAny>;
    if let Ok(keys) = serde_json::from_str::<Keys>(text) {
        let has = |k: &str| keys.contains_key(k);
        let mcp_servers = || {
            has("mcp")
                && serde_json::from_str::<Value>(text)
                    .is_ok_and(|v| v.pointer("/mcp/servers").is_some())
        };
        return Ok(if has("openapi") || has("swagger") {
            Kind::OpenApi
        } else if has("mcpServers") || has("servers") || mcp_servers() {
            Kind::Mcp
        } else {
            Kind::Descriptor
        });
    }
    if crate::catalog::skills::folder_name(text).is_some() {
        return Ok(Kind::Skill);
    }
    if text
        .lines()
        .any(|l| l.starts_with("openapi:") || l.starts_with("swagger:"))
    {
        return Ok(Kind::OpenApi);
    }
    if text
        .lines()
        .any(|l| l.trim_start().starts_with("[mcp_servers."))
    {
        return Ok(Kind::Mcp);
    }
    Err(Error::Args(
        "the source is not an OpenAPI document, MCP configuration, SKILL.md or aai.json; give `kind` if it is one".into(),
    ))
}

/// Drafts from a path: a skill's folder, or a file read like a fetched text.
fn from_path(
    home: &Home<'_>,
    platform: &str,
    path: &Path,
    kind: Option<Kind>,
) -> Result<Vec<Draft>, Error> {
    if !path.is_absolute() {
        return Err(Error::Args(format!(
            "`{}` is not an absolute path (nor an https URL)",
            path.display()
        )));
    }
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::Args(format!("cannot read {}: {e}", path.display())))?;
    if meta.is_dir() {
        if kind.is_some_and(|k| k != Kind::Skill) {
            return Err(Error::Args(format!("{} is a folder", path.display())));
        }
        return skill_folder(home, path);
    }
    if !meta.is_file() {
        return Err(Error::Args(format!("{} is not a file", path.display())));
    }
    if meta.len() > MAX_SOURCE as u64 {
        return Err(too_large(&path.display().to_string(), meta.len()));
    }
    let mut text = String::new();
    // At most one byte more than the limit: a file that grew since is refused too.
    std::io::Read::read_to_string(
        &mut std::io::Read::take(
            std::fs::File::open(path)
                .map_err(|e| Error::Args(format!("cannot read {}: {e}", path.display())))?,
            MAX_SOURCE as u64 + 1,
        ),
        &mut text,
    )
    .map_err(|e| Error::Args(format!("cannot read {} as text: {e}", path.display())))?;
    if text.len() > MAX_SOURCE {
        return Err(too_large(&path.display().to_string(), text.len() as u64));
    }
    let kind = match kind {
        Some(k) => k,
        None if path.file_name().is_some_and(|n| n == "SKILL.md") => Kind::Skill,
        None => detect(&text)?,
    };
    if kind == Kind::Skill && path.file_name().is_some_and(|n| n == "SKILL.md") {
        return skill_folder(home, path.parent().unwrap_or(path));
    }
    from_text(home, platform, &text, Some(kind), None)
}

fn mcp(home: &Home<'_>, platform: &str, text: &str) -> Result<Vec<Draft>, Error> {
    // The agent's snippet carries its own values: the importing environment is not read.
    let none = |_: &str| None;
    let servers = aai_author::mcp_config::servers(text, "the configuration", platform, &none)
        .map_err(Error::Args)?;
    let mut out = Vec::new();
    for s in servers {
        let doc = s
            .descriptor
            .map_err(|why| Error::Args(format!("server `{}`: {why}", s.name)))?;
        let text = pretty(&doc);
        let app = valid(&text, &s.id)?;
        let folder = home.dir.join(&s.id);
        let replaces = home.ours(&folder, &s.id)?;
        let secrets = store_entries(&s.id, s.secret, s.secrets);
        out.push(Draft {
            starts: starts(&app, &folder),
            reach: crate::exec::reach::of_app(&app, &folder),
            id: s.id,
            kind: Kind::Mcp,
            name: s.name,
            tools: None,
            folder,
            payload: Payload::Descriptor(text),
            secrets,
            notes: s.notes,
            replaces,
        });
    }
    Ok(out)
}

/// The credential store entries of an imported server `id`: its credential under its id,
/// each placeholder's value under its own entry.
pub(crate) fn store_entries(
    id: &str,
    credential: Option<String>,
    placeholders: Vec<(String, String)>,
) -> Vec<(String, String)> {
    credential
        .map(|value| (id.to_owned(), value))
        .into_iter()
        .chain(
            placeholders
                .into_iter()
                .map(|(name, value)| (crate::auth::fill::entry(id, &name), value)),
        )
        .collect()
}

fn openapi(home: &Home<'_>, text: &str, url: Option<&str>) -> Result<Vec<Draft>, Error> {
    use aai_author::openapi;
    let doc =
        openapi::parse(text).map_err(|e| Error::Args(format!("the OpenAPI document: {e}")))?;
    let import = openapi::import(
        &doc,
        openapi::Options {
            only: &[],
            base_url: None,
            source_url: url,
            id: None,
        },
    )
    .map_err(|e| Error::Args(format!("the OpenAPI document: {e}")))?;
    let text = pretty(&import.descriptor);
    let app = valid(&text, &import.id)?;
    let folder = home.dir.join(&import.id);
    Ok(vec![Draft {
        replaces: home.ours(&folder, &import.id)?,
        reach: crate::exec::reach::of_app(&app, &folder),
        tools: Some(tool_names(&app)),
        starts: starts(&app, &folder),
        id: import.id,
        kind: Kind::OpenApi,
        name: app.name.primary().to_owned(),
        folder,
        payload: Payload::Descriptor(text),
        secrets: Vec::new(),
        notes: import.notes,
    }])
}

fn descriptor(home: &Home<'_>, text: &str, source: &str) -> Result<Vec<Draft>, Error> {
    let app = valid(text, source)?;
    let folder = home.dir.join(&app.id);
    let binding = &app.bindings[0];
    Ok(vec![Draft {
        replaces: home.ours(&folder, &app.id)?,
        reach: crate::exec::reach::of_app(&app, &folder),
        tools: (!matches!(binding.executor, aai_descriptor::Executor::Mcp(_)))
            .then(|| tool_names(&app)),
        starts: starts(&app, &folder),
        id: app.id.clone(),
        kind: Kind::Descriptor,
        name: app.name.primary().to_owned(),
        folder,
        payload: Payload::Descriptor(text.to_owned()),
        secrets: Vec::new(),
        notes: Vec::new(),
    }])
}

fn skill_file(home: &Home<'_>, text: &str) -> Result<Vec<Draft>, Error> {
    let name = crate::catalog::skills::folder_name(text)
        .ok_or_else(|| Error::Args("the SKILL.md has no front matter with a `name`".into()))?;
    skill(home, name, Payload::SkillFile(text.to_owned()))
}

fn skill_folder(home: &Home<'_>, folder: &Path) -> Result<Vec<Draft>, Error> {
    if !folder.join("SKILL.md").is_file() {
        return Err(Error::Args(format!("{} has no SKILL.md", folder.display())));
    }
    let text = crate::catalog::skills::descriptor_text(folder).ok_or_else(|| {
        Error::Args(format!(
            "{}/SKILL.md has no front matter with a `name`",
            folder.display()
        ))
    })?;
    let id = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.pointer("/app/id")?.as_str().map(str::to_owned))
        .unwrap_or_default();
    let name = id.strip_prefix("skill.").unwrap_or(&id).to_owned();
    let (files, bytes) = count_files(folder)?;
    let mut drafts = skill(home, name, Payload::SkillFolder(folder.to_owned()))?;
    drafts[0].notes.push(format!(
        "copies {} ({bytes} bytes)",
        crate::text::count(files, "file", "files")
    ));
    Ok(drafts)
}

fn skill(home: &Home<'_>, name: String, payload: Payload) -> Result<Vec<Draft>, Error> {
    home.visible(&format!("skill.{name}"))?;
    let folder = home.dir.join("skills").join(&name);
    if folder.exists() {
        return Err(Error::Exists(format!(
            "the skill `{name}` is installed already at {}; remove `skill.{name}` first",
            folder.display()
        )));
    }
    Ok(vec![Draft {
        id: format!("skill.{name}"),
        kind: Kind::Skill,
        name,
        tools: Some(vec!["read".to_owned()]),
        starts: Vec::new(),
        reach: vec![format!("read the files under `{}`", folder.display())],
        folder,
        payload,
        secrets: Vec::new(),
        notes: Vec::new(),
        replaces: false,
    }])
}

/// The files of a skill folder to copy (links and other kinds left out), as paths
/// relative to it, folders first, checked against the limits; and their bytes.
fn walk(folder: &Path) -> Result<(Vec<(PathBuf, bool)>, u64), Error> {
    let too_big = || {
        Error::Args(format!(
            "{} is larger than a skill may be ({SKILL_FILES} files and folders, {SKILL_BYTES} bytes, {SKILL_DEPTH} levels)",
            folder.display()
        ))
    };
    let mut out = Vec::new();
    let mut bytes = 0;
    let mut stack = vec![(PathBuf::new(), 0)];
    while let Some((relative, depth)) = stack.pop() {
        let dir = folder.join(&relative);
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| Error::Args(format!("cannot read {}: {e}", dir.display())))?;
        for entry in entries.filter_map(Result::ok) {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = relative.join(entry.file_name());
            if kind.is_dir() {
                if depth + 1 > SKILL_DEPTH {
                    return Err(too_big());
                }
                stack.push((path.clone(), depth + 1));
                out.push((path, true));
            } else if kind.is_file() {
                bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
                out.push((path, false));
            }
            if out.len() > SKILL_FILES || bytes > SKILL_BYTES {
                return Err(too_big());
            }
        }
    }
    Ok((out, bytes))
}

fn count_files(folder: &Path) -> Result<(usize, u64), Error> {
    let (entries, bytes) = walk(folder)?;
    Ok((entries.iter().filter(|(_, dir)| !dir).count(), bytes))
}

/// Copies the skill folder `from` to `to`: regular files and folders only, owner-only,
/// within the limits. `to` is created here and must not exist (two imports of one name
/// cannot mix); the copy is made beside it and renamed into place whole.
pub(crate) fn copy_skill(from: &Path, to: &Path) -> std::io::Result<()> {
    let (entries, _) = walk(from).map_err(|e| std::io::Error::other(e.to_string()))?;
    let parent = to.parent().unwrap_or(to);
    crate::files::private_dir(parent)?;
    // Taken first, empty: a second import of the same name fails here.
    std::fs::create_dir(to)?;
    let staging = parent.join(format!(
        ".import-{}-{}",
        std::process::id(),
        crate::history::now_ms()
    ));
    let copied = (|| {
        crate::files::private_dir(&staging)?;
        for (relative, dir) in &entries {
            let target = staging.join(relative);
            if *dir {
                crate::files::private_dir(&target)?;
            } else {
                crate::files::write_private(&target, &std::fs::read(from.join(relative))?)?;
            }
        }
        // Replaces the empty folder taken above.
        std::fs::rename(&staging, to)
    })();
    if copied.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
        let _ = std::fs::remove_dir(to);
    }
    copied
}

/// Whether writing app `id` into `folder` replaces a descriptor an earlier import wrote;
/// one the user wrote or edited is never replaced.
pub(crate) fn ours(folder: &Path, id: &str) -> Result<bool, Error> {
    check_id(folder.parent().unwrap_or(folder), id)?;
    let current = std::fs::read_to_string(folder.join("aai.json")).ok();
    if current.is_none() {
        if folder.exists() {
            return Err(Error::Exists(format!(
                "{} exists and holds no descriptor; remove it first",
                folder.display()
            )));
        }
        return Ok(false);
    }
    let recorded = std::fs::read_to_string(folder.join(".generated")).ok();
    match aai_author::plan::plan(current.as_deref(), recorded.as_deref(), "") {
        aai_author::plan::Plan::Edited => Err(Error::Exists(format!(
            "`{id}` has a descriptor you wrote or edited at {}; remove the app first",
            folder.display()
        ))),
        _ => Ok(true),
    }
}

/// The app `text` describes, when it validates.
fn valid(text: &str, source: &str) -> Result<aai_descriptor::App, Error> {
    let parsed = aai_descriptor::parse(text, source);
    match parsed.app {
        Some(app)
            if !parsed
                .diagnostics
                .iter()
                .any(aai_descriptor::Diagnostic::is_error) =>
        {
            Ok(app)
        }
        _ => Err(Error::Invalid(
            parsed
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .take(5)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )),
    }
}

fn tool_names(app: &aai_descriptor::App) -> Vec<String> {
    app.bindings[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

/// What `app`'s bindings start, each once.
fn starts(app: &aai_descriptor::App, folder: &Path) -> Vec<Start> {
    let mut out: Vec<Start> = Vec::new();
    for b in &app.bindings {
        if let Some(start) = crate::exec::start::start_of(&b.executor, folder)
            && !out.contains(&start)
        {
            out.push(start);
        }
    }
    out
}

/// Sets the app's description in a descriptor the import made (camelCase `app.description`).
fn set_summary(draft: &mut Draft, summary: &str) {
    let Payload::Descriptor(text) = &mut draft.payload else {
        draft.notes.push(
            "`summary` is not applied to a skill (its description is its front matter's)".into(),
        );
        return;
    };
    let Ok(mut doc) = serde_json::from_str::<Value>(text) else {
        return;
    };
    match doc.get_mut("app").and_then(Value::as_object_mut) {
        Some(app) if app.contains_key("description") || app.contains_key("name") => {
            app.insert("description".into(), json!(summary));
            *text = pretty(&doc);
        }
        _ => draft.notes.push(
            "`summary` is not applied: this descriptor's form keeps no `app.description`".into(),
        ),
    }
}

fn pretty(doc: &Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(doc).expect("JSON"))
}

/// A text from an https (or loopback http) URL, at most `max` bytes.
pub(crate) async fn fetch(source: &str, max: usize) -> Result<String, Error> {
    let url = reqwest::Url::parse(source)
        .map_err(|e| Error::Args(format!("`{source}` is not a URL: {e}")))?;
    crate::net::check_fetchable(&url).map_err(|e| Error::Fetch(e.to_string()))?;
    let shown = crate::net::redact(&url);
    let client = crate::net::client(crate::net::Purpose::Descriptor)
        .map_err(|e| Error::Fetch(e.to_string()))?;
    let response = client
        .get(url)
        .timeout(std::time::Duration::from_secs(60))
        .send()
        .await
        .map_err(|e| {
            Error::Fetch(format!(
                "cannot fetch {shown}: {}",
                crate::net::describe(&e)
            ))
        })?;
    let status = response.status();
    if !status.is_success() {
        return Err(Error::Fetch(format!("{shown} answered {status}")));
    }
    let body = crate::net::read_capped(response, max)
        .await
        .map_err(|e| Error::Fetch(format!("{shown}: {e}")))?;
    String::from_utf8(body).map_err(|_| Error::Fetch(format!("{shown}: not UTF-8 text")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_told_by_its_content() {
        assert_eq!(detect(r#"{"openapi":"3.1.0"}"#).unwrap(), Kind::OpenApi);
        assert_eq!(detect(r#"{"mcpServers":{}}"#).unwrap(), Kind::Mcp);
        assert_eq!(
            detect(r#"{"schemaVersion":"1.0"}"#).unwrap(),
            Kind::Descriptor
        );
        assert_eq!(detect("---\nname: pdf\n---\nbody").unwrap(), Kind::Skill);
        assert_eq!(detect("openapi: 3.0.0\ninfo: {}").unwrap(), Kind::OpenApi);
        assert_eq!(
            detect("[mcp_servers.x]\ncommand = \"x\"").unwrap(),
            Kind::Mcp
        );
        assert!(detect("hello").is_err());
    }

    fn request(source: &Value) -> Request<'_> {
        Request {
            source,
            kind: Some("openapi"),
            name: None,
            summary: None,
        }
    }

    #[tokio::test]
    async fn a_source_over_the_cap_is_refused_before_it_is_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let none = |_: &str| false;
        // Not YAML either: parsed, it would be refused as an invalid document instead.
        let big = dir.path().join("big.yaml");
        std::fs::write(&big, "{".repeat(MAX_SOURCE + 1)).unwrap();
        let source = json!(big.to_str().unwrap());
        let err = drafts(dir.path(), "linux", &request(&source), &none)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("an import reads at most 16 MiB"), "{err}");
        assert!(err.contains("aai-gateway import openapi"), "{err}");

        // By URL: the body stops at the cap.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = [0u8; 4096];
            let _ = socket.read(&mut head).await;
            let _ = socket
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/yaml\r\n\r\n")
                .await;
            let chunk = vec![b'{'; 1024 * 1024];
            for _ in 0..=MAX_SOURCE / chunk.len() {
                if socket.write_all(&chunk).await.is_err() {
                    return;
                }
            }
        });
        let source = json!(format!("http://127.0.0.1:{port}/openapi.yaml"));
        let err = drafts(dir.path(), "linux", &request(&source), &none)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("larger than 16 MiB"), "{err}");
        server.abort();
    }

    #[tokio::test]
    async fn sources_are_read_one_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let doc = dir.path().join("openapi.json");
        std::fs::write(
            &doc,
            r#"{"openapi":"3.0.0","info":{"title":"T","version":"1.0.0"},
            "servers":[{"url":"https://api.example.com"}],
            "paths":{"/a":{"get":{"operationId":"a","responses":{}}}}}"#,
        )
        .unwrap();
        let source = json!(doc.to_str().unwrap());
        let home = dir.path().join("home");
        let none = |_: &str| false;
        let request = request(&source);
        let turn = one_at_a_time().await;
        let other = drafts(&home, "linux", &request, &none);
        tokio::pin!(other);
        let waited = tokio::time::timeout(std::time::Duration::from_millis(300), &mut other).await;
        assert!(waited.is_err(), "a second source waits while one is read");
        drop(turn);
        let drafts = other.await.unwrap();
        assert_eq!(drafts[0].tools.as_deref(), Some(&["a".to_owned()][..]));
    }

    #[test]
    fn one_servers_entry_needs_its_name_and_a_map_is_wrapped() {
        let one = json!({"command": "npx", "args": ["-y", "x"]});
        assert!(mcp_text(&one, None).is_err());
        let text = mcp_text(&one, Some("x")).unwrap();
        assert!(text.contains(r#""mcpServers":{"x":"#), "{text}");
        let map = json!({"a": {"command": "a"}});
        assert!(
            mcp_text(&map, None)
                .unwrap()
                .starts_with(r#"{"mcpServers""#)
        );
    }

    #[test]
    fn an_mcp_draft_names_its_command_and_credentials_without_values() {
        let home = tempfile::tempdir().unwrap();
        let text = r#"{"mcpServers":{"gh":{"command":"npx","args":["-y","@x/server-github"],
            "env":{"GITHUB_TOKEN":"ghp_secret"}}}}"#;
        let none = |_: &str| false;
        let home = Home {
            dir: home.path(),
            hidden: &none,
        };
        let drafts = mcp(&home, "linux", text).unwrap();
        let d = &drafts[0];
        assert_eq!(d.id, "mcp.gh");
        let start = &d.starts[0];
        assert!(start.downloads && start.shown.contains("@x/server-github"));
        assert_eq!(d.reach, [start.describe()]);
        let preview = d.preview().to_string();
        assert!(!preview.contains("ghp_secret"), "{preview}");
        assert!(preview.contains("GITHUB_TOKEN"), "{preview}");
        let Payload::Descriptor(text) = &d.payload else {
            panic!()
        };
        assert!(!text.contains("ghp_secret"));
    }

    #[test]
    fn a_descriptor_the_user_edited_is_not_replaced() {
        let home = tempfile::tempdir().unwrap();
        let folder = home.path().join("mcp.gh");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("aai.json"), "{}").unwrap();
        assert!(matches!(ours(&folder, "mcp.gh"), Err(Error::Exists(_))));
        std::fs::write(
            folder.join(".generated"),
            aai_author::plan::fingerprint("{}"),
        )
        .unwrap();
        assert!(ours(&folder, "mcp.gh").unwrap());
    }
}
