//! Scanning: listing the search directories, reading what changed, assembling the
//! catalog. A whole scan lists every directory and looks at every file's stamp; a scan of
//! touched paths (a file event, the gateway's own write) starts from the last listing
//! and looks only at the files those paths stand for (`touched.rs`).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aai_descriptor::{App, Diagnostic, Sink};
use rayon::prelude::*;

use super::{
    Broken, Catalog, Inactive, Layout, Loaded, SearchDir, SourceKind, checks, fallback_id,
    origin_of, reads, touched,
};

/// From how many candidate files (the paths a scan probes for `aai.json`) it parses on
/// every core (docs/performance.md, "Link order and smaller keys": at 1,000 apps one
/// thread keeps 0.5 MiB less resident and the scan takes 29 ms instead of 18).
const PARALLEL_SCAN_FROM: usize = 2_000;

/// Scans `dirs` (in precedence order) and loads every descriptor.
pub fn scan(dirs: &[SearchDir]) -> Catalog {
    scan_with(dirs, &mut reads::Reads::default()).0
}

/// How many files a whole scan looks at before it hands on what it has, when it may go in
/// steps: a step's catalog replaces the apps it read, so the old parses go before the next
/// step's are made, and a rescan of 10,000 changed files never holds two catalogs
/// (docs/performance.md, "A rescan in steps").
pub(crate) const STEP: usize = 2_000;

/// One descriptor file as a scan found it.
#[derive(Clone)]
struct Scanned {
    index: usize,
    path: Arc<Path>,
    app: Option<Arc<App>>,
    diagnostics: Vec<Diagnostic>,
    /// It could not be read (an I/O error other than its absence).
    unread: bool,
    /// Read now, with the stamp it had and its bytes' hash (`None`: reused by stamp).
    fresh: Option<(reads::Stamp, u64)>,
    /// Its bytes were parsed (new or changed), not only read again.
    parsed: bool,
}

impl Scanned {
    /// The file as the last scan left it, not looked at again.
    fn kept(index: usize, path: Arc<Path>, read: &reads::Read) -> Scanned {
        Scanned {
            index,
            path,
            app: read.app.clone(),
            diagnostics: read.diagnostics.clone(),
            unread: false,
            fresh: None,
            parsed: false,
        }
    }
}

/// [`scan`], reading only the files that changed since the scan `reads` remembers, and
/// remembering this one's; what it read, reused and lost.
pub(crate) fn scan_with(dirs: &[SearchDir], reads: &mut reads::Reads) -> (Catalog, reads::Counts) {
    scan_in_steps(dirs, reads, false, None)
}

/// How a whole scan goes in steps: after every `.0` files, the catalog goes to `.1`.
pub(crate) type Steps<'a> = (usize, &'a mut dyn FnMut(Catalog));

/// [`scan_with`], reading every file again whatever its stamp when `reread` (a parse is
/// still kept for the same bytes), and handing `step` the catalog as it stands (see
/// [`step_served`]) after each `step.0` files ([`STEP`] for the gateway) once half as
/// many were parsed since the last step, while the listing, the last one and every file
/// read so far are whole. The last step's catalog is the one returned.
pub(crate) fn scan_in_steps(
    dirs: &[SearchDir],
    reads: &mut reads::Reads,
    reread: bool,
    mut step: Option<Steps<'_>>,
) -> (Catalog, reads::Counts) {
    let mut listing_problems = Vec::new();
    let mut files: Vec<(usize, PathBuf)> = Vec::new();
    for index in searched(dirs) {
        for path in list(&dirs[index], &mut listing_problems) {
            files.push((index, path));
        }
    }
    let unreadable: Vec<String> = listing_problems.iter().map(ToString::to_string).collect();
    // Steps stand on a whole picture of what is served: a clean listing now and before.
    if !listing_problems.is_empty() || reads.listing().is_none() {
        step = None;
    }
    // What the last scan listed and this one does not: served as it was until the end.
    let gone: Vec<(usize, Arc<Path>)> = match (&step, reads.listing()) {
        (Some(_), Some(before)) => {
            let listed: HashSet<&[u8]> = files.iter().map(|(_, p)| bytes(p)).collect();
            let gone = before.iter().filter(|(_, p)| !listed.contains(bytes(p)));
            gone.cloned().collect()
        }
        _ => Vec::new(),
    };
    let now = std::time::SystemTime::now();
    // Small catalogs are read on this one thread: what a parse leaves behind is reused by
    // the next, so the apps kept sit in one malloc arena instead of three, and the other
    // core stays free for the client's handshake. Large ones are read by every core, their
    // rescans too (read on one thread, RSS after a full rescan of 10,000 apps was 1.58×
    // start-up's against 1.46×: docs/performance.md, "Over a gateway's life").
    let parallel = files.len() >= PARALLEL_SCAN_FROM;
    let per_step = step.as_ref().map_or(files.len(), |(every, _)| *every);
    let mut scanned: Vec<Scanned> = Vec::with_capacity(files.len());
    let mut rest = files.into_iter();
    // Files parsed since the last step: a step is served once they are half a step's.
    let mut pending = 0;
    while rest.len() > 0 {
        let part: Vec<(usize, PathBuf)> = rest.by_ref().take(per_step.max(1)).collect();
        let known = &*reads;
        let probe = |(index, path): (usize, PathBuf)| probe(dirs, known, index, &path, reread, now);
        let from = scanned.len();
        if parallel {
            scanned.par_extend(part.into_par_iter().filter_map(probe));
        } else {
            scanned.extend(part.into_iter().filter_map(probe));
        }
        let new = &scanned[from..];
        if new.iter().any(|s| s.unread) {
            step = None;
        }
        pending += new.iter().filter(|s| s.parsed).count();
        let Some((_, step)) = step.as_mut().filter(|_| rest.len() > 0) else {
            continue;
        };
        if pending > 0 && pending >= per_step / 2 {
            pending = 0;
            let served = step_served(reads, &scanned, rest.as_slice(), &gone);
            step(assemble(dirs, served, Vec::new(), Vec::new()));
        }
    }
    let listing: Vec<(usize, Arc<Path>)> =
        scanned.iter().map(|s| (s.index, s.path.clone())).collect();
    let (fresh, mut counts) = tally(&scanned);
    let seen: HashSet<&[u8]> = listing.iter().map(|(_, p)| bytes(p)).collect();
    counts.gone = reads.keep(fresh, counts.read > 0, |p| seen.contains(bytes(p)));
    drop(seen);
    // A listing that missed a directory, or a file it could not read, is no ground for a
    // scan of touched paths: the next scan lists everything again.
    if listing_problems.is_empty() && !scanned.iter().any(|s| s.unread) {
        reads.list(listing);
    } else {
        reads.unlist();
    }
    (
        assemble(dirs, scanned, unreadable, listing_problems),
        counts,
    )
}

/// A path's bytes: what the reads and the listings compare.
fn bytes(p: &Path) -> &[u8] {
    p.as_os_str().as_encoded_bytes()
}

/// What a step of a whole scan serves, in listing order: the files looked at so far as
/// they are now, the files still to look at and those gone as they were read last. An app
/// with a file of either kind (its files merged, moved, or shadowing one another) stays
/// as it was until the end: its files looked at so far are served from their last read
/// too (a new one waits). The new parses served replace the last ones in `reads`, so what
/// the step's catalog holds is all that holds the old apps.
fn step_served(
    reads: &mut reads::Reads,
    scanned: &[Scanned],
    rest: &[(usize, PathBuf)],
    gone: &[(usize, Arc<Path>)],
) -> Vec<Scanned> {
    let last = |index: usize, path: &Path| {
        let read = reads.read_of(path)?;
        Some(Scanned::kept(index, reads.key(path)?, read))
    };
    let old: Vec<Scanned> = rest
        .iter()
        .map(|(index, path)| (*index, path.as_path()))
        .chain(gone.iter().map(|(index, path)| (*index, &**path)))
        .filter_map(|(index, path)| last(index, path))
        .collect();
    #[expect(
        clippy::mutable_key_type,
        reason = "an app's caches are inside; the key is its id, which never changes"
    )]
    let waiting: HashSet<IdOf> = old.iter().filter_map(|s| s.app.clone().map(IdOf)).collect();
    let waits = |app: Option<&Arc<App>>| app.is_some_and(|a| waiting.contains(a.id.as_str()));
    let mut served = Vec::with_capacity(scanned.len() + old.len());
    let mut fresh = Vec::new();
    for s in scanned {
        let before = reads.read_of(&s.path);
        if s.fresh.is_some()
            && (waits(s.app.as_ref()) || waits(before.and_then(|r| r.app.as_ref())))
        {
            served.extend(before.map(|read| Scanned::kept(s.index, s.path.clone(), read)));
            continue;
        }
        if let Some((stamp, hash)) = s.fresh {
            let read = reads::Read::new(stamp, hash, s.app.clone(), s.diagnostics.clone());
            fresh.push((s.path.clone(), read));
        }
        served.push(s.clone());
    }
    reads.keep(fresh, true, |_| true);
    served.extend(old);
    served.sort_by(|a, b| (a.index, &*a.path).cmp(&(b.index, &*b.path)));
    served
}

/// [`scan_with`] for a change known to touch only `changed` (paths of files or folders,
/// as a file event names them): the last scan's listing stands for everything else, and
/// only the files `changed` stands for are looked at; or what only a whole scan can tell
/// (no clean whole scan yet, too many paths, a new folder that is not an app's).
/// `Ok(None)`: the paths stand for no file, and everything read is served.
pub(crate) fn scan_touched(
    dirs: &[SearchDir],
    reads: &mut reads::Reads,
    changed: &[PathBuf],
) -> Result<Option<(Catalog, reads::Counts)>, touched::Whole> {
    let listing = reads.listing().ok_or(touched::Whole::List)?;
    let touched = touched::candidates(dirs, &searched(dirs), changed)?;
    // A tool list kept under `cache/`, a credential saved: no descriptor, nothing pending.
    if touched.is_empty() && reads.applied() {
        return Ok(None);
    }
    let now = std::time::SystemTime::now();
    let known = &*reads;
    // Both are sorted by (directory, path), as a whole scan lists them: one merge.
    let mut scanned = Vec::with_capacity(listing.len() + touched.len());
    let mut gone = Vec::new();
    let mut next = touched.into_iter().peekable();
    let mut probed = |t: touched::Touched, scanned: &mut Vec<Scanned>| match probe(
        dirs, known, t.index, &t.path, t.reread, now,
    ) {
        Some(s) => scanned.push(s),
        None => gone.push(t.path),
    };
    for (index, path) in listing {
        while let Some(t) = next.next_if(|t| (t.index, &*t.path) < (*index, &**path)) {
            probed(t, &mut scanned);
        }
        if let Some(t) = next.next_if(|t| (t.index, &*t.path) == (*index, &**path)) {
            probed(t, &mut scanned);
            continue;
        }
        match known.read_of(path) {
            Some(read) => scanned.push(Scanned::kept(*index, path.clone(), read)),
            // Not read last time (it could not be): looked at again.
            None => {
                let t = touched::Touched {
                    index: *index,
                    path: path.to_path_buf(),
                    reread: false,
                };
                probed(t, &mut scanned);
            }
        }
    }
    for t in next {
        probed(t, &mut scanned);
    }
    let listing: Vec<(usize, Arc<Path>)> =
        scanned.iter().map(|s| (s.index, s.path.clone())).collect();
    let (fresh, mut counts) = tally(&scanned);
    counts.gone = reads.keep(fresh, counts.read > 0, |p| !gone.iter().any(|g| g == p));
    if scanned.iter().any(|s| s.unread) {
        reads.unlist();
    } else {
        reads.list(listing);
    }
    Ok(Some((
        assemble(dirs, scanned, Vec::new(), Vec::new()),
        counts,
    )))
}

/// The indexes of the directories a scan searches: each directory once, at its highest
/// precedence (a scanPath naming $AAI_HOME, a symlink).
fn searched(dirs: &[SearchDir]) -> Vec<usize> {
    let mut seen_dirs: Vec<PathBuf> = Vec::new();
    let mut out = Vec::new();
    for (index, dir) in dirs.iter().enumerate() {
        let canonical = fs::canonicalize(&dir.dir).unwrap_or_else(|_| dir.dir.clone());
        if !seen_dirs.contains(&canonical) {
            seen_dirs.push(canonical);
            out.push(index);
        }
    }
    out
}

/// Looks at one candidate file: `None` when it does not exist. Its parse is reused while
/// its stamp holds (unless `reread`), or while its bytes hash the same.
fn probe(
    dirs: &[SearchDir],
    known: &reads::Reads,
    index: usize,
    path: &Path,
    reread: bool,
    now: std::time::SystemTime,
) -> Option<Scanned> {
    let source = path.display().to_string();
    // The same path as the last scan's, so the listing and the reads share it.
    let shared = || known.key(path).unwrap_or_else(|| Arc::from(path));
    let unread = |e: std::io::Error| Scanned {
        index,
        app: None,
        diagnostics: failed(&source, format!("cannot read the file: {e}")).diagnostics,
        unread: true,
        fresh: None,
        parsed: false,
        path: shared(),
    };
    // Layouts probe `<dir>/<name>/aai.json` without listing it first; a touched path
    // may name a file where a folder was.
    let absent = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
        )
    };
    // The stamp is taken before the read: a write in between is seen by the next scan.
    let stamp = match fs::metadata(path) {
        // A folder where a flat layout expects a file is not a descriptor.
        Ok(meta) if meta.is_dir() => return None,
        Ok(meta) => reads::Stamp::of(&meta, now),
        Err(e) if absent(&e) => return None,
        Err(e) => return Some(unread(e)),
    };
    if !reread && let Some(read) = known.reusable(path, &stamp) {
        return Some(Scanned::kept(index, shared(), read));
    }
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if absent(&e) => return None,
        Err(e) => return Some(unread(e)),
    };
    let mut hash = reads::Read::hash_of(&bytes);
    // A web app's file is its descriptor and where it came from (`meta.json` beside it):
    // a new source is a new app to the guard (`web::guard`).
    if dirs[index].kind == SourceKind::WebCache {
        let source = super::web::source_of(path)
            .map(String::from)
            .unwrap_or_default();
        hash = reads::Read::hash_of(&[&hash.to_le_bytes(), source.as_bytes()].concat());
    }
    // Read again with the same bytes (a racy stamp, a rewrite of the same text).
    if let Some(read) = known.same_bytes(path, hash) {
        let mut kept = Scanned::kept(index, shared(), read);
        kept.fresh = Some((stamp, hash));
        return Some(kept);
    }
    let id = fallback_id(path, dirs[index].layout);
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
        path: shared(),
    })
}

/// What a scan read afresh (to keep), and its counts (`gone` still to be filled in).
fn tally(scanned: &[Scanned]) -> (Vec<(Arc<Path>, reads::Read)>, reads::Counts) {
    let fresh = scanned
        .iter()
        .filter_map(|s| {
            let (stamp, hash) = s.fresh?;
            let read = reads::Read::new(stamp, hash, s.app.clone(), s.diagnostics.clone());
            Some((s.path.clone(), read))
        })
        .collect();
    let counts = reads::Counts {
        read: scanned.iter().filter(|s| s.parsed).count(),
        reused: scanned.iter().filter(|s| !s.parsed && !s.unread).count(),
        gone: 0,
    };
    (fresh, counts)
}

/// The catalog of the files a scan found, in its order: precedence, merges, checks.
fn assemble(
    dirs: &[SearchDir],
    scanned: Vec<Scanned>,
    mut unreadable: Vec<String>,
    listing_problems: Vec<Diagnostic>,
) -> Catalog {
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
    // id -> (app index, dir index)
    #[expect(
        clippy::mutable_key_type,
        reason = "an app's caches are inside; the key is its id, which never changes"
    )]
    let mut by_id: HashMap<IdOf, (usize, usize)> = HashMap::with_capacity(scanned.len());
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
        let unmet = || {
            let folder = path.parent().unwrap_or(Path::new(""));
            checks::unmet(&app.checks, folder, home.as_deref(), crate::host::on_path)
        };
        if let Some((i, why)) = (!app.checks.is_empty()).then(unmet).flatten() {
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
                file: path.to_path_buf(),
                why,
            });
            continue;
        }
        if dir.layout == Layout::AppDirs && dir.kind == SourceKind::User {
            check_folder_name(&path, &app.id, &mut notes);
        }
        match by_id.get(app.id.as_str()) {
            None => {
                by_id.insert(IdOf(app.clone()), (catalog.apps.len(), index));
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
    catalog
}

/// An app as a map key, by its id: no copy of the id.
struct IdOf(Arc<App>);

impl std::hash::Hash for IdOf {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.as_str().hash(state);
    }
}

impl PartialEq for IdOf {
    fn eq(&self, other: &IdOf) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for IdOf {}

impl std::borrow::Borrow<str> for IdOf {
    fn borrow(&self) -> &str {
        &self.0.id
    }
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
fn merge(into: &mut Loaded, app: Arc<App>, path: Arc<Path>, notes: &mut Vec<Diagnostic>) {
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
    // The usual case, told from the bytes (taking a path apart costs 3 ms a scan at
    // 10,000 apps): `…/<id>/aai.json`.
    let bytes = path.as_os_str().as_encoded_bytes();
    if let Some(rest) = bytes.strip_suffix(b"aai.json")
        && let Some(rest) = rest.strip_suffix(std::path::MAIN_SEPARATOR_STR.as_bytes())
        && let Some(rest) = rest.strip_suffix(id.as_bytes())
        && rest.ends_with(std::path::MAIN_SEPARATOR_STR.as_bytes())
    {
        return;
    }
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
pub(super) const OWN_FOLDERS: [&str; 5] = ["web", "logs", "cache", "skills", "trash"];

/// The candidate descriptor files of one directory that exist, sorted (for `validate`).
pub(crate) fn scan_files(dir: &SearchDir) -> Vec<PathBuf> {
    let mut ignored = Vec::new();
    list(dir, &mut ignored)
        .into_iter()
        .filter(|p| p.is_file())
        .collect()
}

/// `*.json`, except the gateway's own `config.json`.
pub(super) fn is_descriptor_name(name: &str) -> bool {
    name.ends_with(".json") && name != "config.json" && !name.starts_with('.')
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use super::super::{Layout, SearchDir, SourceKind, reads::Reads};
    use super::{scan_touched, scan_with};

    fn descriptor(id: &str, description: &str) -> String {
        serde_json::json!({"schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": id, "name": {"en": id}, "defaultLang": "en", "description": description},
            "execution": {"type": "stdio", "command": "true"},
            "tools": [{"name": "t", "description": "d", "parameters": {"type": "object"}}]})
        .to_string()
    }

    /// Writes `id`'s descriptor under `dir`, last modified a minute ago (not racy).
    fn write(dir: &std::path::Path, id: &str, description: &str) {
        let folder = dir.join(id);
        std::fs::create_dir_all(&folder).unwrap();
        let file = folder.join("aai.json");
        std::fs::write(&file, descriptor(id, description)).unwrap();
        let then = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(then)
            .unwrap();
    }

    /// `home` as the one search directory, the user's.
    fn user_dir(home: &std::path::Path) -> [SearchDir; 1] {
        [SearchDir {
            kind: SourceKind::User,
            dir: home.to_owned(),
            layout: Layout::AppDirs,
        }]
    }

    fn apps(catalog: &super::Catalog) -> Vec<(&str, &str)> {
        catalog
            .apps
            .iter()
            .map(|l| (l.app.id.as_str(), l.app.description.as_str()))
            .collect()
    }

    #[test]
    fn a_scan_of_touched_paths_looks_at_their_files_alone_and_keeps_the_rest() {
        let home = tempfile::tempdir().unwrap();
        for id in ["com.example.a", "com.example.c", "com.example.e"] {
            write(home.path(), id, "first");
        }
        let dirs = user_dir(home.path());
        let mut reads = Reads::default();
        // Without a whole scan there is no listing to start from.
        assert!(scan_touched(&dirs, &mut reads, &[home.path().join("x")]).is_err());
        let (first, _) = scan_with(&dirs, &mut reads);
        // A change, a new folder, a removed folder; and one change nobody names.
        write(home.path(), "com.example.c", "second");
        write(home.path(), "com.example.b", "new");
        std::fs::remove_dir_all(home.path().join("com.example.e")).unwrap();
        write(home.path(), "com.example.a", "unseen");
        let changed = [
            home.path().join("com.example.c/aai.json"),
            home.path().join("com.example.b"),
            home.path().join("com.example.e/aai.json"),
            home.path().join("com.example.e"),
        ];
        let (second, counts) = scan_touched(&dirs, &mut reads, &changed).unwrap().unwrap();
        assert_eq!((counts.read, counts.reused, counts.gone), (2, 1, 1));
        assert_eq!(
            apps(&second),
            [
                ("com.example.a", "first"),
                ("com.example.b", "new"),
                ("com.example.c", "second"),
            ]
        );
        assert!(Arc::ptr_eq(&first.apps[0].app, &second.apps[0].app));
        // Nothing changed where the paths point: nothing read, nothing lost.
        reads.installed();
        let (_, counts) = scan_touched(&dirs, &mut reads, &changed[..1])
            .unwrap()
            .unwrap();
        assert!(counts.unchanged(), "{counts:?}");
        // Paths that stand for no file, with everything served: nothing to look at.
        let cache = home.path().join("cache/tools.json");
        assert!(scan_touched(&dirs, &mut reads, &[cache]).unwrap().is_none());
        // A whole scan sees what no path named, from the listing the touched scan left.
        let (third, counts) = scan_with(&dirs, &mut reads);
        assert_eq!((counts.read, counts.reused, counts.gone), (1, 2, 0));
        assert_eq!(apps(&third)[0], ("com.example.a", "unseen"));
    }

    #[cfg(unix)]
    #[test]
    fn a_whole_scan_that_could_not_list_a_directory_leaves_no_listing_to_start_from() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        write(&home, "com.example.a", "first");
        // A folder that cannot be listed (even by root): a symlink to itself.
        let looped = root.path().join("looped");
        std::os::unix::fs::symlink(&looped, &looped).unwrap();
        let dirs = [
            SearchDir {
                kind: SourceKind::User,
                dir: home.clone(),
                layout: Layout::AppDirs,
            },
            SearchDir {
                kind: SourceKind::Config,
                dir: looped,
                layout: Layout::Mixed,
            },
        ];
        let mut reads = Reads::default();
        let (catalog, _) = scan_with(&dirs, &mut reads);
        assert!(!catalog.unreadable.is_empty());
        // Its apps, had it any, would be missing from a listing: none is kept.
        let changed = [home.join("com.example.a/aai.json")];
        assert!(matches!(
            scan_touched(&dirs, &mut reads, &changed),
            Err(super::touched::Whole::List)
        ));
    }

    #[test]
    fn a_scan_reads_only_the_files_that_changed_and_shares_the_rest() {
        let home = tempfile::tempdir().unwrap();
        for i in 0..3 {
            write(home.path(), &format!("com.example.a{i}"), "first");
        }
        let dirs = user_dir(home.path());
        let mut reads = Reads::default();
        let (first, counts) = scan_with(&dirs, &mut reads);
        assert_eq!((counts.read, counts.reused, counts.gone), (3, 0, 0));
        let (second, counts) = scan_with(&dirs, &mut reads);
        assert!(counts.unchanged());
        assert_eq!(counts.reused, 3);
        // Not a copy: the very apps of the first scan.
        for (a, b) in first.apps.iter().zip(&second.apps) {
            assert!(std::sync::Arc::ptr_eq(&a.app, &b.app));
        }
        // One file changed (same size, new time), one removed, one added.
        write(home.path(), "com.example.a1", "secnd");
        std::fs::remove_dir_all(home.path().join("com.example.a2")).unwrap();
        write(home.path(), "com.example.b", "new");
        let (third, counts) = scan_with(&dirs, &mut reads);
        assert_eq!((counts.read, counts.reused, counts.gone), (2, 1, 1));
        let ids: Vec<(&str, &str)> = third
            .apps
            .iter()
            .map(|l| (l.app.id.as_str(), l.app.description.as_str()))
            .collect();
        assert_eq!(
            ids,
            [
                ("com.example.a0", "first"),
                ("com.example.a1", "secnd"),
                ("com.example.b", "new")
            ]
        );
        assert!(std::sync::Arc::ptr_eq(
            &first.apps[0].app,
            &third.apps[0].app
        ));
    }

    #[test]
    fn a_file_modified_just_now_is_read_again_and_parsed_only_when_its_bytes_changed() {
        let home = tempfile::tempdir().unwrap();
        let folder = home.path().join("com.example.racy");
        std::fs::create_dir_all(&folder).unwrap();
        let file = folder.join("aai.json");
        // Modified "now" (here: later than now, as after a clock step): a second write
        // within the same timestamp tick would leave the stamp as it was.
        let future = SystemTime::now() + Duration::from_secs(3600);
        let write_racy = |description: &str| {
            std::fs::write(&file, descriptor("com.example.racy", description)).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&file)
                .unwrap()
                .set_modified(future)
                .unwrap();
        };
        write_racy("one");
        write(home.path(), "com.example.old", "d");
        let dirs = user_dir(home.path());
        let mut reads = Reads::default();
        let (first, counts) = scan_with(&dirs, &mut reads);
        assert_eq!((counts.read, counts.reused), (2, 0));
        // Read again, the same bytes: the same parse, nothing to reload.
        let (second, counts) = scan_with(&dirs, &mut reads);
        assert!(counts.unchanged(), "{counts:?}");
        let racy = |c: &crate::catalog::Catalog| {
            c.apps
                .iter()
                .find(|l| l.app.id == "com.example.racy")
                .unwrap()
                .app
                .clone()
        };
        assert!(std::sync::Arc::ptr_eq(&racy(&first), &racy(&second)));
        // Rewritten with the same size and time: seen all the same.
        write_racy("two");
        let (third, counts) = scan_with(&dirs, &mut reads);
        assert_eq!((counts.read, counts.reused), (1, 1));
        assert_eq!(racy(&third).description, "two");
        // Read again whatever the stamps (the web UI's Rescan): the same bytes, the same
        // parses.
        let (fourth, counts) = super::scan_in_steps(&dirs, &mut reads, true, None);
        assert_eq!((counts.read, counts.reused), (0, 2));
        assert!(std::sync::Arc::ptr_eq(&racy(&third), &racy(&fourth)));
    }

    #[test]
    fn a_whole_scan_in_steps_serves_each_step_and_lets_the_old_parses_go() {
        let home = tempfile::tempdir().unwrap();
        for i in 0..5 {
            write(home.path(), &format!("com.example.a{i}"), "old");
        }
        let dirs = user_dir(home.path());
        let mut reads = Reads::default();
        let (first, _) = scan_with(&dirs, &mut reads);
        let old = |i: usize| std::sync::Arc::downgrade(&first.apps[i].app);
        let olds: Vec<_> = (0..5).map(old).collect();
        drop(first);
        // Every file rewritten but a4; a2 removed; b added (it sorts last).
        for i in [0, 1, 3] {
            write(home.path(), &format!("com.example.a{i}"), "new");
        }
        std::fs::remove_dir_all(home.path().join("com.example.a2")).unwrap();
        write(home.path(), "com.example.b", "new");
        let mut seen: Vec<Vec<(String, String)>> = Vec::new();
        let mut step = |c: crate::catalog::Catalog| {
            let apps = c.apps.iter();
            seen.push(
                apps.map(|l| (l.app.id.clone(), l.app.description.clone()))
                    .collect(),
            );
        };
        let (last, counts) = super::scan_in_steps(&dirs, &mut reads, false, Some((2, &mut step)));
        assert_eq!((counts.read, counts.reused, counts.gone), (4, 1, 1));
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| (format!("com.example.{a}"), (*b).to_owned()))
                .collect()
        };
        // Files a0, a1 first (a2, gone, is served as it was until the end; b, not read
        // yet, waits). Then a3, a4 (one changed). Then b: the last step is what the scan
        // returns.
        assert_eq!(
            seen,
            [
                pairs(&[
                    ("a0", "new"),
                    ("a1", "new"),
                    ("a2", "old"),
                    ("a3", "old"),
                    ("a4", "old")
                ]),
                pairs(&[
                    ("a0", "new"),
                    ("a1", "new"),
                    ("a2", "old"),
                    ("a3", "new"),
                    ("a4", "old")
                ]),
            ]
        );
        let ids: Vec<_> = last
            .apps
            .iter()
            .map(|l| (l.app.id.clone(), l.app.description.clone()))
            .collect();
        assert_eq!(
            ids,
            pairs(&[
                ("a0", "new"),
                ("a1", "new"),
                ("a3", "new"),
                ("a4", "old"),
                ("b", "new")
            ])
        );
        // Nothing holds the replaced parses (the reads let each go at its step).
        for i in [0, 1, 2, 3] {
            assert!(olds[i].upgrade().is_none(), "a{i} still held");
        }
        assert!(olds[4].upgrade().is_some());
        // Nothing changed since: no step, nothing read.
        let mut steps = 0;
        let mut count = |_: crate::catalog::Catalog| steps += 1;
        let (_, counts) = super::scan_in_steps(&dirs, &mut reads, false, Some((2, &mut count)));
        assert!(counts.unchanged());
        assert_eq!(steps, 0);
    }

    #[test]
    fn an_app_whose_files_are_still_to_come_stays_as_it_was_until_the_last_step() {
        let home = tempfile::tempdir().unwrap();
        for id in ["com.example.a", "com.example.b", "com.example.c"] {
            write(home.path(), id, "old");
        }
        // Two files for one app in one folder's listing order: the first and the last.
        let merged = |folder: &str, platform: &str, description: &str| {
            let text = descriptor("com.example.m", description).replace("linux", platform);
            let dir = home.path().join(folder);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("aai.json"), text).unwrap();
        };
        merged("a-m", "linux", "old");
        merged("z-m", "macos", "old");
        let dirs = user_dir(home.path());
        let mut reads = Reads::default();
        scan_with(&dirs, &mut reads);
        // a moves to the end of the listing; m's two files change; b and c change.
        std::fs::rename(home.path().join("com.example.a"), home.path().join("zz-a")).unwrap();
        let text = descriptor("com.example.a", "new");
        std::fs::write(home.path().join("zz-a/aai.json"), text).unwrap();
        merged("a-m", "linux", "new");
        merged("z-m", "macos", "new");
        for id in ["com.example.b", "com.example.c"] {
            write(home.path(), id, "new");
        }
        let mut seen: Vec<Vec<(String, String, usize)>> = Vec::new();
        let mut step = |c: crate::catalog::Catalog| {
            let apps = c.apps.iter().map(|l| {
                let short = l.app.id.trim_start_matches("com.example.").to_owned();
                (short, l.app.description.clone(), l.app.bindings.len())
            });
            seen.push(apps.collect());
        };
        // Listing order: a-m, com.example.b, com.example.c, z-m, zz-a.
        super::scan_in_steps(&dirs, &mut reads, false, Some((2, &mut step)));
        let app = |id: &str, description: &str, bindings: usize| {
            (id.to_owned(), description.to_owned(), bindings)
        };
        assert_eq!(
            seen,
            [
                // a-m is new, but m's other file is still to come: m as it was. a's old
                // file is gone, its new one still to come: a as it was.
                vec![
                    app("a", "old", 1),
                    app("b", "new", 1),
                    app("c", "old", 1),
                    app("m", "old", 2)
                ],
                // z-m read: m is new, both its bindings; a still as it was.
                vec![
                    app("a", "old", 1),
                    app("b", "new", 1),
                    app("c", "new", 1),
                    app("m", "new", 2)
                ],
            ]
        );
    }
}
