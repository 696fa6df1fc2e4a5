//! Finding and loading descriptors (docs/design.md, Discovery).
//!
//! Search directories are taken in precedence order — the user dir (`$AAI_HOME`), then
//! config `scanPaths`, then the OS's system paths. The first directory that provides an
//! app id wins it: files for the same id *in that directory* merge (one binding per
//! platform: a snake_case/camelCase file describes one platform), and files for that id
//! in later directories are reported as shadowed. One bad file never blocks the others.
//!
//! Files are read and parsed on one thread, or on every core for large catalogs; the merge
//! is sequential and deterministic (directories in precedence order, files sorted by path).

pub(crate) mod builtin;
#[cfg(target_os = "linux")]
pub(crate) mod bus;
pub(crate) mod checks;
pub(crate) mod mcp_registry;
pub(crate) mod paths;
pub(crate) mod reads;
mod scan;
pub(crate) mod skills;
pub(crate) mod touched;
pub(crate) mod web;

pub use scan::scan;
pub(crate) use scan::{STEP, scan_files, scan_in_steps, scan_touched};
pub(crate) use touched::Whole;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aai_descriptor::{App, Diagnostic};

/// What kind of place a search directory is, highest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SourceKind {
    /// `$AAI_HOME/<appId>/aai.json`.
    User,
    /// A config `scanPaths` entry.
    Config,
    /// An OS location (`/usr/share/applications/aai`, `/Applications/*.app`, …).
    System,
    /// `$AAI_HOME/web/<appId>/aai.json`: descriptors fetched from the web (see `web`).
    WebCache,
    /// Compiled into the binary (see `builtin`).
    BuiltIn,
}

impl SourceKind {
    /// The name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::User => "user",
            SourceKind::Config => "config",
            SourceKind::System => "system",
            SourceKind::WebCache => "web cache",
            SourceKind::BuiltIn => "built-in",
        }
    }
}

/// How descriptor files are laid out below a search directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `<dir>/<name>/aai.json` (the user dir, `/opt`).
    AppDirs,
    /// `<dir>/*.json` (`/usr/share/applications/aai`, `%PROGRAMDATA%\aai`).
    Flat,
    /// Both of the above (config `scanPaths` directories).
    Mixed,
    /// `<dir>/*.app/Contents/Resources/aai.json` (macOS).
    Bundles,
    /// The directory is one descriptor file (a `scanPaths` entry naming a file).
    File,
}

/// One place to look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchDir {
    /// Precedence class.
    pub kind: SourceKind,
    /// The directory (or file, for [`Layout::File`]).
    pub dir: PathBuf,
    /// How files are laid out in it.
    pub layout: Layout,
}

impl SearchDir {
    /// A `scanPaths` entry: a file, or a directory searched in the mixed layout.
    pub fn config(path: PathBuf) -> SearchDir {
        let layout = if path.is_file() {
            Layout::File
        } else {
            Layout::Mixed
        };
        SearchDir {
            kind: SourceKind::Config,
            dir: path,
            layout,
        }
    }
}

/// The text of the descriptor at `source` as written: the file (at most 1 MiB), or a
/// built-in's compiled-in JSON.
pub(crate) fn descriptor_text(source: &Path) -> std::io::Result<String> {
    let name = source.to_string_lossy();
    if name.starts_with("builtin:") {
        return builtin::text_of(&name, |p| crate::host::on_path(p).is_some()).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such built-in descriptor")
        });
    }
    // A skill's descriptor is the one the gateway writes from its SKILL.md.
    if source.file_name().is_some_and(|n| n == "SKILL.md")
        && let Some(folder) = source.parent()
    {
        return skills::descriptor_text(folder).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the skill's SKILL.md has no usable front matter",
            )
        });
    }
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(source)?
        .take(crate::net::MAX_DESCRIPTOR as u64 + 1)
        .read_to_string(&mut text)?;
    if text.len() > crate::net::MAX_DESCRIPTOR {
        return Err(std::io::Error::other("the descriptor is larger than 1 MiB"));
    }
    Ok(text)
}

/// An app as loaded, with where each binding came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The merged app (shared with the scan's [`reads::Reads`]).
    pub app: Arc<App>,
    /// The precedence class it was found in.
    pub kind: SourceKind,
    /// The file each binding came from (same order as `app.bindings`).
    pub binding_sources: Vec<Arc<Path>>,
}

impl Loaded {
    /// The file that defined the app (its first binding's file).
    pub fn source(&self) -> &Path {
        &self.binding_sources[0]
    }
}

/// Everything a scan found.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Loaded apps, sorted by id.
    pub apps: Vec<Loaded>,
    /// Problems, per file in scan order, then precedence notes.
    pub diagnostics: Vec<Diagnostic>,
    /// How many descriptor files were read.
    pub files: usize,
    /// Files that failed to load, with the app ids they were probably meant for.
    pub broken: Vec<Broken>,
    /// Folders and files that could not be read (other than missing ones): too many open
    /// files, permissions, I/O errors. A scan with any is incomplete: what it lacks may
    /// still exist.
    pub unreadable: Vec<String>,
    /// Apps left out because one of their `discovery.checks` does not hold here.
    pub inactive: Vec<Inactive>,
}

/// An app that loaded but is not active on this machine (`discovery.checks`).
#[derive(Debug, Clone)]
pub struct Inactive {
    /// The app id.
    pub id: String,
    /// Its descriptor.
    pub file: PathBuf,
    /// The check that does not hold and why, e.g. "check 2 (`discovery.checks[1]`): no
    /// `claude` on PATH".
    pub why: String,
}

/// The id of an access-form file that names none, from its place (docs/descriptors.md,
/// access): the folder's name for `<folder>/aai.json` (the `.app` bundle's name, without
/// `.app`, in the macOS layout), else the file's name without `.json`.
pub(crate) fn fallback_id(path: &Path, layout: Layout) -> Option<String> {
    let name = path.file_name()?.to_string_lossy();
    if name != "aai.json" {
        return name.strip_suffix(".json").map(str::to_owned);
    }
    if layout == Layout::Bundles {
        // `<dir>/<Name>.app/Contents/Resources/aai.json`
        let bundle = path.ancestors().nth(3)?.file_name()?.to_string_lossy();
        return Some(bundle.strip_suffix(".app").unwrap_or(&bundle).to_owned());
    }
    Some(path.parent()?.file_name()?.to_string_lossy().into_owned())
}

/// What the parser is told of a file whose place gives `id` (an access-form file names
/// neither its id nor its platform; the platform is the host's, as for built-ins).
pub(crate) fn origin_of<'a>(id: Option<&'a str>) -> aai_descriptor::Origin<'a> {
    aai_descriptor::Origin {
        id,
        platform: aai_descriptor::Platform::parse(builtin::host_platform()),
    }
}

/// A descriptor file that failed to load.
#[derive(Debug, Clone)]
pub struct Broken {
    /// The file.
    pub file: PathBuf,
    /// The app ids it names (its folder in `<dir>/<appId>/aai.json`, and an `app.id` or
    /// `appId` readable in its JSON).
    pub ids: Vec<String>,
    /// Its first error diagnostics, as text.
    pub problems: Vec<String>,
}

/// How many of a broken file's errors are kept for lookups and the UI (the rest are
/// counted).
const BROKEN_PROBLEMS: usize = 10;

impl Broken {
    fn new(path: &Path, layout: Layout, diagnostics: &[Diagnostic]) -> Broken {
        let mut ids = Vec::new();
        if matches!(layout, Layout::AppDirs | Layout::Mixed)
            && path.file_name().is_some_and(|n| n == "aai.json")
            && let Some(folder) = path.parent().and_then(Path::file_name)
        {
            ids.push(folder.to_string_lossy().into_owned());
        }
        let declared = fs::read_to_string(path)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|v| {
                let id = v
                    .pointer("/app/id")
                    .or_else(|| v.get("appId"))?
                    .as_str()?
                    .to_owned();
                Some(id)
            });
        if let Some(id) = declared
            && !ids.contains(&id)
        {
            ids.push(id);
        }
        let errors: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.is_error()).collect();
        let mut problems: Vec<String> = errors
            .iter()
            .take(BROKEN_PROBLEMS)
            .map(ToString::to_string)
            .collect();
        // Never a silent cut: the rest is counted, and where to see it said.
        if errors.len() > BROKEN_PROBLEMS {
            problems.push(format!(
                "… and {} more (`aai-gateway validate {}` lists every one)",
                errors.len() - BROKEN_PROBLEMS,
                crate::text::sh_quote(&path.to_string_lossy())
            ));
        }
        Broken {
            file: path.to_owned(),
            ids,
            problems,
        }
    }
}

/// Everything the gateway serves from: the descriptors in `dirs` (in precedence order),
/// then the built-in apps whose service is present. The one loader behind the server,
/// `--scan`, `call` and `auth`. Blocks (file I/O, a bus query); safe from any context.
///
/// Web apps it may not serve are left out with an error each (`web::guard`): `reserved`
/// holds the ids local descriptors used in earlier scans.
pub fn load(dirs: &[SearchDir], reserved: &std::collections::HashSet<String>) -> Catalog {
    complete(scan(dirs), dirs, reserved)
}

/// `catalog`, a scan of `dirs`, made whole: the web apps it may not serve left out, the
/// built-in apps and skills added (see [`load`]).
pub(crate) fn complete(
    mut catalog: Catalog,
    dirs: &[SearchDir],
    reserved: &std::collections::HashSet<String>,
) -> Catalog {
    web::guard(&mut catalog, reserved);
    // The gateway's own app cannot be shadowed: a file that takes its id is left out.
    let mut taken = Vec::new();
    catalog.apps.retain(|l| {
        let ours = l.app.id == builtin::GATEWAY_ID;
        if ours {
            taken.push(l.source().to_owned());
        }
        !ours
    });
    for file in taken {
        let sink = aai_descriptor::Sink::new(file.display().to_string());
        sink.error(
            "",
            format!(
                "`{}` is the gateway's own app; a descriptor cannot take its id",
                builtin::GATEWAY_ID
            ),
        );
        catalog.diagnostics.extend(sink.into_vec());
    }
    let mut apps = vec![builtin::gateway_app()];
    apps.extend(builtin::apps(&builtin::session_bus_names()));
    apps.extend(builtin::coding_agents(|c| {
        crate::host::on_path(c).is_some()
    }));
    if crate::host::Host::current().os() == crate::host::Os::Macos {
        apps.extend(builtin::macos_apps(&paths::system_root()));
    }
    // Agent Skills: in the AAI home's `skills/` and the folders Claude Code and Codex use.
    if let Some(home) = dirs.iter().find(|d| d.kind == SourceKind::User) {
        let user = std::env::var_os("HOME")
            .or_else(|| std::env::var_os("USERPROFILE"))
            .map(PathBuf::from);
        apps.extend(skills::apps(&skills::roots(&home.dir, user.as_deref())));
    }
    builtin::add_to(&mut catalog, apps);
    catalog
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_own_folders_in_the_home_are_not_app_folders() {
        let home = tempfile::tempdir().unwrap();
        for folder in ["web", "logs", "cache", "com.example.a"] {
            std::fs::create_dir(home.path().join(folder)).unwrap();
            std::fs::write(home.path().join(folder).join("aai.json"), "{}").unwrap();
        }
        let user = SearchDir {
            kind: SourceKind::User,
            dir: home.path().to_owned(),
            layout: Layout::AppDirs,
        };
        assert_eq!(
            scan_files(&user),
            [home.path().join("com.example.a").join("aai.json")]
        );
        // Elsewhere a folder called `logs` is an app folder like any other.
        let config = SearchDir {
            kind: SourceKind::Config,
            ..user
        };
        assert_eq!(scan_files(&config).len(), 4);
    }

    fn access_doc(checks: serde_json::Value, keywords: &[&str]) -> String {
        serde_json::json!({
            "schemaVersion": "2.0", "version": "1.0.0",
            "app": {"name": {"default": "Tool"}},
            "discovery": {"checks": checks},
            "access": {"protocol": "mcp", "config": {"command": "tool-mcp"}},
            "exposure": {"summary": "Use when the user wants a tool.", "keywords": keywords}
        })
        .to_string()
    }

    #[test]
    fn access_form_files_take_their_place_as_id_and_are_served_only_where_their_checks_hold() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let put = |path: std::path::PathBuf, text: &str| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        // Active: its folder `skill` is there (relative to the descriptor's folder).
        std::fs::create_dir_all(home.join("tool/skill")).unwrap();
        put(
            home.join("tool/aai.json"),
            &access_doc(
                serde_json::json!([{"kind": "path", "path": "skill"}]),
                &["deploy"],
            ),
        );
        // Not active: a program that is on no PATH.
        put(
            home.join("claude/aai.json"),
            &access_doc(
                serde_json::json!([
                    {"kind": "path", "path": "."},
                    {"kind": "command", "command": "aai-test-no-such-program-7f3a"}
                ]),
                &[],
            ),
        );
        // A flat folder: the file's name is the id.
        let flat = dir.path().join("flat");
        put(
            flat.join("pdf.json"),
            &access_doc(serde_json::json!([]), &[]),
        );
        let dirs = [
            SearchDir {
                kind: SourceKind::User,
                dir: home.clone(),
                layout: Layout::AppDirs,
            },
            SearchDir::config(flat),
        ];
        let catalog = scan(&dirs);
        let ids: Vec<&str> = catalog.apps.iter().map(|l| l.app.id.as_str()).collect();
        assert_eq!(ids, ["pdf", "tool"], "{:#?}", catalog.diagnostics);
        assert!(catalog.broken.is_empty(), "{:#?}", catalog.diagnostics);
        let [inactive] = catalog.inactive.as_slice() else {
            panic!("{:#?}", catalog.inactive)
        };
        assert_eq!(inactive.id, "claude");
        assert_eq!(inactive.file, home.join("claude/aai.json"));
        assert_eq!(
            inactive.why,
            "check 2 (`discovery.checks[1]`): no `aai-test-no-such-program-7f3a` on PATH"
        );
        // `--scan` says it with the file and the check's pointer.
        let note = catalog
            .diagnostics
            .iter()
            .find(|d| d.pointer == "/discovery/checks/1")
            .expect("a note on the unmet check");
        assert_eq!(
            note.to_string(),
            format!(
                "{}: /discovery/checks/1: warning: app `claude` is not active on this machine and is not served: {}",
                home.join("claude/aai.json").display(),
                inactive.why
            )
        );

        // Not served, with its reason; the others served and found by their keywords.
        let snapshot = crate::registry::Snapshot::build(
            catalog,
            &crate::host::Host::new(crate::host::Os::Linux),
            None,
        );
        let Some(crate::registry::Missing::Inactive(why)) = snapshot.missing("claude") else {
            panic!("claude is missing as inactive")
        };
        assert!(why.why.ends_with("on PATH"));
        assert!(snapshot.find("claude").is_none());
        let hits = crate::registry::search::search(&snapshot, "deploy", 5);
        let found: Vec<&str> = hits.iter().map(|h| h.entry.app.id.as_str()).collect();
        assert_eq!(found, ["tool"]);
    }

    #[test]
    fn the_id_of_a_files_place() {
        let id = |p: &str, layout| fallback_id(Path::new(p), layout);
        assert_eq!(
            id("/h/claude/aai.json", Layout::AppDirs),
            Some("claude".into())
        );
        assert_eq!(id("/s/codex.json", Layout::Flat), Some("codex".into()));
        assert_eq!(
            id("/A/Tool.app/Contents/Resources/aai.json", Layout::Bundles),
            Some("Tool".into())
        );
        assert_eq!(id("/s/notes.txt", Layout::Flat), None);
    }
}
