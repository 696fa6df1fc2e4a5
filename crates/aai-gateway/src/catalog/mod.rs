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
pub(crate) mod skills;
pub(crate) mod web;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aai_descriptor::{App, Diagnostic, Sink};
use rayon::prelude::*;

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
    pub binding_sources: Vec<PathBuf>,
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

/// From how many candidate files (the paths a scan probes for `aai.json`) it parses on
/// every core (docs/performance.md, "Link order and smaller keys": at 1,000 apps one
/// thread keeps 0.5 MiB less resident and the scan takes 29 ms instead of 18).
const PARALLEL_SCAN_FROM: usize = 2_000;

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

/// Scans `dirs` (in precedence order) and loads every descriptor.
pub fn scan(dirs: &[SearchDir]) -> Catalog {
    scan_with(dirs, &mut reads::Reads::default()).0
}

/// One descriptor file as a scan found it.
struct Scanned {
    index: usize,
    path: PathBuf,
    app: Option<Arc<App>>,
    diagnostics: Vec<Diagnostic>,
    /// It could not be read (an I/O error other than its absence).
    unread: bool,
    /// Read now, with the stamp it had and its bytes' hash (`None`: reused by stamp).
    fresh: Option<(reads::Stamp, u64)>,
    /// Its bytes were parsed (new or changed), not only read again.
    parsed: bool,
}

/// [`scan`], reading only the files that changed since the scan `reads` remembers, and
/// remembering this one's; what it read, reused and lost.
pub(crate) fn scan_with(dirs: &[SearchDir], reads: &mut reads::Reads) -> (Catalog, reads::Counts) {
    let mut listing_problems = Vec::new();
    let mut seen_dirs: Vec<PathBuf> = Vec::new();
    let mut files: Vec<(usize, PathBuf)> = Vec::new();
    for (index, dir) in dirs.iter().enumerate() {
        // The same directory reached twice (a scanPath naming $AAI_HOME, a symlink) is
        // searched once, at its highest precedence.
        let canonical = fs::canonicalize(&dir.dir).unwrap_or_else(|_| dir.dir.clone());
        if seen_dirs.contains(&canonical) {
            continue;
        }
        seen_dirs.push(canonical);
        for path in list(dir, &mut listing_problems) {
            files.push((index, path));
        }
    }
    let mut unreadable: Vec<String> = listing_problems.iter().map(ToString::to_string).collect();

    let now = std::time::SystemTime::now();
    let known = &*reads;
    let parse = |(index, path): (usize, PathBuf)| -> Option<Scanned> {
        let source = path.display().to_string();
        let unread = |e: std::io::Error| Scanned {
            index,
            app: None,
            diagnostics: failed(&source, format!("cannot read the file: {e}")).diagnostics,
            unread: true,
            fresh: None,
            parsed: false,
            path: path.clone(),
        };
        // The stamp is taken before the read: a write in between is seen by the next scan.
        let stamp = match fs::metadata(&path) {
            Ok(meta) => reads::Stamp::of(&meta, now),
            // Layouts probe `<dir>/<name>/aai.json` without listing it first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => return Some(unread(e)),
        };
        if let Some(read) = known.reusable(&path, &stamp) {
            return Some(Scanned {
                index,
                app: read.app.clone(),
                diagnostics: read.diagnostics.clone(),
                unread: false,
                fresh: None,
                parsed: false,
                path,
            });
        }
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => return Some(unread(e)),
        };
        let hash = reads::Read::hash_of(&bytes);
        // Read again with the same bytes (a racy stamp, a rewrite of the same text).
        if let Some(read) = known.same_bytes(&path, hash) {
            return Some(Scanned {
                index,
                app: read.app.clone(),
                diagnostics: read.diagnostics.clone(),
                unread: false,
                fresh: Some((stamp, hash)),
                parsed: false,
                path,
            });
        }
        let id = fallback_id(&path, dirs[index].layout);
        let origin = origin_of(id.as_deref());
        let parsed = match String::from_utf8(bytes) {
            Ok(text) => aai_descriptor::parse_with(&text, &source, &origin),
            Err(_) => failed(&source, "the file is not UTF-8 text".to_owned()),
        };
        Some(Scanned {
            index,
            app: parsed.app.map(Arc::new),
            diagnostics: parsed.diagnostics,
            unread: false,
            fresh: Some((stamp, hash)),
            parsed: true,
            path,
        })
    };
    // Small catalogs are read on this one thread: what a parse leaves behind is reused by
    // the next, so the apps kept sit in one malloc arena instead of three, and the other
    // core stays free for the client's handshake. Large ones are read by every core.
    let scanned: Vec<Scanned> = if files.len() < PARALLEL_SCAN_FROM {
        files.into_iter().filter_map(parse).collect()
    } else {
        files.into_par_iter().filter_map(parse).collect()
    };
    let seen: std::collections::HashSet<PathBuf> = scanned.iter().map(|s| s.path.clone()).collect();
    let fresh: Vec<_> = scanned
        .iter()
        .filter_map(|s| {
            let (stamp, hash) = s.fresh?;
            let read = reads::Read::new(stamp, hash, s.app.clone(), s.diagnostics.clone());
            Some((s.path.clone(), read))
        })
        .collect();
    let mut counts = reads::Counts {
        read: scanned.iter().filter(|s| s.parsed).count(),
        reused: scanned.iter().filter(|s| !s.parsed && !s.unread).count(),
        gone: 0,
    };
    counts.gone = reads.keep(fresh, counts.read > 0, &seen);
    unreadable.extend(
        scanned
            .iter()
            .filter(|s| s.unread)
            .map(|s| s.path.display().to_string()),
    );

    let mut catalog = Catalog {
        files: scanned.len(),
        unreadable,
        ..Catalog::default()
    };
    catalog.diagnostics.extend(listing_problems);
    let mut by_id: HashMap<String, (usize, usize)> = HashMap::new(); // id -> (app index, dir index)
    let mut notes = Vec::new();
    let home = checks::user_home();
    for Scanned {
        index,
        path,
        app,
        diagnostics,
        ..
    } in scanned
    {
        let dir = &dirs[index];
        let Some(app) = app else {
            catalog
                .broken
                .push(Broken::new(&path, dir.layout, &diagnostics));
            catalog.diagnostics.extend(diagnostics);
            continue;
        };
        catalog.diagnostics.extend(diagnostics);
        // Not active here: left out before precedence, as if the file were not there.
        let folder = path.parent().unwrap_or(Path::new(""));
        if let Some((i, why)) =
            checks::unmet(&app.checks, folder, home.as_deref(), crate::host::on_path)
        {
            let why = format!("check {} (`discovery.checks[{i}]`): {why}", i + 1);
            let sink = Sink::new(path.display().to_string());
            sink.warning(
                format!("/discovery/checks/{i}"),
                format!(
                    "app `{}` is not active on this machine and is not served: {why}",
                    app.id
                ),
            );
            notes.extend(sink.into_vec());
            catalog.inactive.push(Inactive {
                id: app.id.clone(),
                file: path,
                why,
            });
            continue;
        }
        if dir.layout == Layout::AppDirs && dir.kind == SourceKind::User {
            check_folder_name(&path, &app.id, &mut notes);
        }
        match by_id.get(&app.id) {
            None => {
                by_id.insert(app.id.clone(), (catalog.apps.len(), index));
                let binding_sources = vec![path; app.bindings.len()];
                catalog.apps.push(Loaded {
                    app,
                    kind: dir.kind,
                    binding_sources,
                });
            }
            Some(&(at, winner_dir)) if winner_dir == index => {
                merge(&mut catalog.apps[at], app, path, &mut notes);
            }
            Some(&(at, winner_dir)) => {
                let winner = &catalog.apps[at];
                let sink = Sink::new(path.display().to_string());
                sink.warning(
                    "",
                    format!(
                        "app `{}` is shadowed by {} ({} location `{}` takes precedence over {} location `{}`)",
                        app.id,
                        winner.source().display(),
                        dirs[winner_dir].kind.as_str(),
                        dirs[winner_dir].dir.display(),
                        dir.kind.as_str(),
                        dir.dir.display(),
                    ),
                );
                notes.extend(sink.into_vec());
            }
        }
    }
    catalog.diagnostics.extend(notes);
    catalog.apps.sort_by(|a, b| a.app.id.cmp(&b.app.id));
    (catalog, counts)
}

fn failed(source: &str, message: String) -> aai_descriptor::Parsed {
    let sink = Sink::new(source);
    sink.error("", message);
    aai_descriptor::Parsed {
        app: None,
        diagnostics: sink.into_vec(),
        id_from_origin: false,
    }
}

/// Adds `app`'s bindings to `into`; a platform that is already bound is reported.
fn merge(into: &mut Loaded, app: Arc<App>, path: PathBuf, notes: &mut Vec<Diagnostic>) {
    for binding in &app.bindings {
        if let Some(i) = into
            .app
            .bindings
            .iter()
            .position(|b| b.platform == binding.platform)
        {
            let sink = Sink::new(path.display().to_string());
            sink.warning(
                "",
                format!(
                    "app `{}` already has a `{}` binding from {}; this file's is ignored",
                    app.id,
                    binding.platform.as_str(),
                    into.binding_sources[i].display()
                ),
            );
            notes.extend(sink.into_vec());
            continue;
        }
        Arc::make_mut(&mut into.app).bindings.push(binding.clone());
        into.binding_sources.push(path.clone());
    }
}

/// In the user dir the folder is meant to be named after the app id (docs/descriptors.md,
/// Where descriptors are found).
fn check_folder_name(path: &Path, id: &str, notes: &mut Vec<Diagnostic>) {
    let folder = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy());
    if let Some(folder) = folder.filter(|f| f != id) {
        let sink = Sink::new(path.display().to_string());
        sink.warning(
            "/appId",
            format!("the folder is `{folder}` but the app id is `{id}`; name the folder after the app id"),
        );
        notes.extend(sink.into_vec());
    }
}

/// The candidate files of one search directory, sorted. A missing directory is normal;
/// an unreadable one is reported.
fn list(dir: &SearchDir, problems: &mut Vec<Diagnostic>) -> Vec<PathBuf> {
    if dir.layout == Layout::File {
        return vec![dir.dir.clone()];
    }
    let entries = match fs::read_dir(&dir.dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return vec![dir.dir.clone()];
        }
        Err(e) => {
            let sink = Sink::new(dir.dir.display().to_string());
            sink.warning("", format!("cannot list the directory: {e}"));
            problems.extend(sink.into_vec());
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                let sink = Sink::new(dir.dir.display().to_string());
                sink.warning("", format!("cannot list the directory: {e}"));
                problems.extend(sink.into_vec());
                continue;
            }
        };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // `file_type` comes from the directory listing (no extra stat) and does not
        // follow symlinks; a symlink is resolved by reading through it.
        let Ok(ty) = entry.file_type() else { continue };
        let is_dir = ty.is_dir() || (ty.is_symlink() && entry.path().is_dir());
        let path = entry.path();
        match dir.layout {
            Layout::AppDirs | Layout::Mixed
                if is_dir
                // The gateway's own folders in `$AAI_HOME` (the web cache, the logs,
                // kept tool lists) are not app folders.
                && !(dir.kind == SourceKind::User && OWN_FOLDERS.contains(&name.as_ref())) =>
            {
                out.push(path.join("aai.json"));
            }
            Layout::Flat | Layout::Mixed if !is_dir && is_descriptor_name(&name) => out.push(path),
            Layout::Bundles if is_dir && name.ends_with(".app") => {
                out.push(path.join("Contents/Resources/aai.json"));
            }
            _ => {}
        }
    }
    out.sort();
    out
}

/// The folders of `$AAI_HOME` that are the gateway's own, never an app's (`trash` holds
/// removed apps: `manage/trash.rs`).
const OWN_FOLDERS: [&str; 5] = ["web", "logs", "cache", "skills", "trash"];

/// The candidate descriptor files of one directory that exist, sorted (for `validate`).
pub(crate) fn scan_files(dir: &SearchDir) -> Vec<PathBuf> {
    let mut ignored = Vec::new();
    list(dir, &mut ignored)
        .into_iter()
        .filter(|p| p.is_file())
        .collect()
}

/// `*.json`, except the gateway's own `config.json`.
fn is_descriptor_name(name: &str) -> bool {
    name.ends_with(".json") && name != "config.json" && !name.starts_with('.')
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
