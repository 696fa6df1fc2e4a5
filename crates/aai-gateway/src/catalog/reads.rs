//! What the last scan read, by file: a scan reuses a descriptor's parse while the file is
//! unchanged, so a change re-reads only the files it touched, and a scan of an unchanged
//! catalog reads none. The apps are shared (`Arc`) with the snapshot served from them, so
//! keeping the parses costs no second copy.
//!
//! A file counts as unchanged when its size, modification time, change time and inode are
//! what they were, and it was not modified just before it was read: a file written again
//! within the same timestamp tick could look unchanged, so one that recent is read again
//! rather than trusted, as git does with its index. "Just before" is [`RACY_FINE`] where
//! times have sub-second parts (the kernel's clock still ticks every few milliseconds),
//! [`RACY_COARSE`] where they are whole seconds (FAT, HFS+).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aai_descriptor::{App, Diagnostic};

/// How recent a modification with a sub-second time must be to be read again anyway.
const RACY_FINE: Duration = Duration::from_millis(50);
/// The same, for whole-second times.
const RACY_COARSE: Duration = Duration::from_secs(2);

/// The parses of the last scan, by file.
#[derive(Debug, Default)]
pub(crate) struct Reads {
    files: HashMap<Key, Read>,
    /// The files the last scan found, in its order (directories by precedence, paths
    /// sorted): a scan of touched paths starts from it. `None` before a whole scan.
    listing: Option<Vec<(usize, Arc<Path>)>>,
    /// A scan read or lost files since the last snapshot was installed: the next scan
    /// must rebuild even if it reads nothing new itself.
    unapplied: bool,
}

/// A path as the reads key it: by its bytes. Hashing a `Path` walks its components,
/// which cost 3 ms a scan at 10,000 files; the paths a scan makes are made the same way
/// (`<dir>/<name>/aai.json`), so their bytes are as good a key.
#[derive(Debug)]
struct Key(Arc<Path>);

fn bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_encoded_bytes()
}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        bytes(&self.0).hash(state);
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        bytes(&self.0) == bytes(&other.0)
    }
}

impl Eq for Key {}

impl std::borrow::Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        bytes(&self.0)
    }
}

/// One file's parse, the stamp the file had when it was read, and a hash of its bytes.
#[derive(Debug, Clone)]
pub(super) struct Read {
    stamp: Stamp,
    /// A file read again (its stamp changed, or it was racy) with the same bytes keeps
    /// its parse: the gateway's own writes, seen again by the watcher, change nothing.
    hash: u64,
    /// The app, when the file loaded.
    pub(super) app: Option<Arc<App>>,
    /// What the parser said of it.
    pub(super) diagnostics: Vec<Diagnostic>,
}

impl Read {
    /// A parse of a file that had `stamp`.
    pub(super) fn new(
        stamp: Stamp,
        hash: u64,
        app: Option<Arc<App>>,
        diagnostics: Vec<Diagnostic>,
    ) -> Read {
        Read {
            stamp,
            hash,
            app,
            diagnostics,
        }
    }

    /// The hash of a file's bytes (within one run: the reads are not kept across runs).
    pub(super) fn hash_of(bytes: &[u8]) -> u64 {
        use std::hash::{Hash as _, Hasher as _};
        let mut h = std::hash::DefaultHasher::new();
        bytes.hash(&mut h);
        h.finish()
    }
}

/// What says a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    changed: Option<(i64, i64)>,
    /// Device and inode.
    inode: (u64, u64),
    /// Modified just before it was read: never reused.
    racy: bool,
}

impl Stamp {
    /// The stamp of `meta`, read at `now`.
    pub(super) fn of(meta: &std::fs::Metadata, now: SystemTime) -> Stamp {
        let modified = meta.modified().ok();
        let racy = modified.is_none_or(|m| {
            let coarse = m
                .duration_since(SystemTime::UNIX_EPOCH)
                .is_ok_and(|t| t.subsec_nanos() == 0);
            let window = if coarse { RACY_COARSE } else { RACY_FINE };
            // A time in the future (a clock set back) is racy too.
            !now.duration_since(m).is_ok_and(|d| d >= window)
        });
        #[cfg(unix)]
        let (changed, inode) = {
            use std::os::unix::fs::MetadataExt as _;
            (
                Some((meta.ctime(), meta.ctime_nsec())),
                (meta.dev(), meta.ino()),
            )
        };
        // Without a change time and an inode, size and modification time alone could
        // miss an edit (a copy that keeps times): every file is read again and hashed,
        // and parsed only when its bytes changed.
        #[cfg(not(unix))]
        let (changed, inode, racy) = (None, (0, 0), true);
        Stamp {
            len: meta.len(),
            modified,
            changed,
            inode,
            racy,
        }
    }
}

/// What one scan did with the reads.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Files read and parsed (new or changed).
    pub(crate) read: usize,
    /// Files whose last parse was reused.
    pub(crate) reused: usize,
    /// Files the last scan had that this one did not find.
    pub(crate) gone: usize,
}

impl Counts {
    /// Whether the scan found every file as the last scan left it.
    pub(crate) fn unchanged(&self) -> bool {
        self.read == 0 && self.gone == 0
    }
}

impl Reads {
    /// The last parse of `path`, when its bytes still hash to `hash`.
    pub(super) fn same_bytes(&self, path: &Path, hash: u64) -> Option<&Read> {
        self.files.get(bytes(path)).filter(|read| read.hash == hash)
    }

    /// The last parse of `path`, when its stamp is still `stamp`.
    pub(super) fn reusable(&self, path: &Path, stamp: &Stamp) -> Option<&Read> {
        self.files
            .get(bytes(path))
            .filter(|read| !stamp.racy && !read.stamp.racy && read.stamp == *stamp)
    }

    /// The last parse of `path`, whatever its stamp now.
    pub(super) fn read_of(&self, path: &Path) -> Option<&Read> {
        self.files.get(bytes(path))
    }

    /// The path as the reads hold it, to share.
    pub(super) fn key(&self, path: &Path) -> Option<Arc<Path>> {
        self.files
            .get_key_value(bytes(path))
            .map(|(k, _)| k.0.clone())
    }

    /// The last scan's listing, once a whole scan was made.
    pub(super) fn listing(&self) -> Option<&[(usize, Arc<Path>)]> {
        self.listing.as_deref()
    }

    /// Forgets the listing: the next scan lists everything.
    pub(super) fn unlist(&mut self) {
        self.listing = None;
    }

    /// Keeps `listing` as what the scan found.
    pub(super) fn list(&mut self, mut listing: Vec<(usize, Arc<Path>)>) {
        listing.shrink_to_fit();
        self.listing = Some(listing);
    }

    /// Keeps this scan's reads: `fresh` ones replace the old, and files `still` does not
    /// hold are forgotten. Returns how many were forgotten.
    /// `changed` says whether any fresh read parsed new bytes (not only a new stamp).
    pub(super) fn keep(
        &mut self,
        fresh: Vec<(Arc<Path>, Read)>,
        changed: bool,
        still: impl Fn(&Path) -> bool,
    ) -> usize {
        let before = self.files.len();
        self.files.retain(|path, _| still(&path.0));
        let gone = before - self.files.len();
        self.unapplied |= gone > 0 || changed;
        self.files
            .extend(fresh.into_iter().map(|(path, read)| (Key(path), read)));
        gone
    }

    /// Whether what the scans read since the last install is all served: a scan that
    /// reads nothing new may then rebuild nothing.
    pub(crate) fn applied(&self) -> bool {
        !self.unapplied
    }

    /// Notes that a snapshot of everything read so far is served.
    pub(crate) fn installed(&mut self) {
        self.unapplied = false;
    }
}
