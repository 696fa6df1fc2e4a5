//! Hot reload: a file watcher on the descriptor directories plus a periodic rescan
//! (`scanInterval`). Each rescan goes through [`Gateway::rescan`], which tells every
//! front door when what agents see changed (MCP sessions then get
//! `notifications/tools/list_changed` and `notifications/resources/list_changed`).
//!
//! The user dir and `scanPaths` are watched recursively; system directories only at
//! their top level (watching all of `/opt` would be costly) and are otherwise covered by
//! the periodic rescan. Only `*.json` paths (not `config.json`), new folders and folders
//! renamed or removed in a search directory trigger a rescan, so log writes under
//! `$AAI_HOME` do not; bursts of events are coalesced, and a burst of descriptor events
//! looks at the files it touched alone (`catalog/touched.rs`). On Unix the session
//! bus is watched too: a media player or notification daemon appearing or leaving
//! changes the built-in apps at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

use super::{Gateway, Why};
use crate::catalog::SourceKind;

/// How long to wait for an event burst to settle before rescanning.
const SETTLE: Duration = Duration::from_millis(150);

/// How many paths of a burst are kept; more than the scan places one by one
/// (`catalog/touched.rs`).
const KEPT_PATHS: usize = 4_096;

/// Stops watching when dropped.
#[derive(Debug)]
pub(crate) struct Watcher {
    /// Filled in by the first scan's thread once the folders are watched.
    _fs: Arc<Mutex<Option<notify::RecommendedWatcher>>>,
    task: tokio::task::JoinHandle<()>,
    #[cfg(target_os = "linux")]
    bus_task: tokio::task::JoinHandle<()>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
        #[cfg(target_os = "linux")]
        self.bus_task.abort();
    }
}

/// Starts watching for `gateway`, and runs its first scan.
///
/// Both happen on a blocking thread, off the handshake: watching a folder recursively
/// walks it (1,000 apps are 1,000 watches), and a client's `initialize` need not wait for
/// that. The watches come first, so no change on disk can fall between them and the scan.
pub(crate) fn start(gateway: Arc<Gateway>) -> Watcher {
    let (tx, mut rx) = mpsc::unbounded_channel::<Why>();
    #[cfg(target_os = "linux")]
    let bus_task = {
        let tx = tx.clone();
        tokio::spawn(crate::catalog::bus::watch_names(
            crate::catalog::builtin::watches,
            move || {
                let _ = tx.send(Why::Other);
            },
        ))
    };
    let fs = Arc::new(Mutex::new(None));
    {
        let (gateway, fs) = (gateway.clone(), fs.clone());
        tokio::task::spawn_blocking(move || {
            *fs.lock().expect("watcher lock") = file_watcher(&gateway, tx);
            gateway.rescan();
        });
    }
    let interval = gateway.config.scan_interval;
    let task = tokio::spawn(async move {
        let mut ticker = interval.map(|every| {
            let mut t = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        let mut files = true;
        loop {
            let why = tokio::select! {
                event = rx.recv(), if files => {
                    let Some(mut why) = event else {
                        // No file watcher: only the interval remains.
                        files = false;
                        if ticker.is_none() {
                            return;
                        }
                        continue;
                    };
                    tokio::time::sleep(SETTLE).await;
                    // A burst rescans as one: the paths of all its file events, or
                    // everything when anything else is in it (a bus change, `apps.json`).
                    // Past a bound the paths are not kept (a rewrite of every file):
                    // that many lists everything anyway (`catalog/touched.rs`).
                    while let Ok(more) = rx.try_recv() {
                        why = match (why, more) {
                            (Why::Files(mut paths), Why::Files(more)) => {
                                if paths.len() < KEPT_PATHS {
                                    paths.extend(more);
                                    if paths.len() >= KEPT_PATHS {
                                        paths.sort_unstable();
                                        paths.dedup();
                                    }
                                }
                                Why::Files(paths)
                            }
                            (Why::Files(_), other) | (other, _) => other,
                        };
                    }
                    if let Why::Files(paths) = &mut why {
                        paths.sort_unstable();
                        paths.dedup();
                    }
                    why
                }
                () = tick(&mut ticker) => Why::Other,
            };
            gateway.rescan_async_for(why).await;
        }
    });
    Watcher {
        _fs: fs,
        task,
        #[cfg(target_os = "linux")]
        bus_task,
    }
}

async fn tick(ticker: &mut Option<tokio::time::Interval>) {
    match ticker {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// What a relevant event asks of the scan. Paths go to the scan (`Why::Files`), which
/// looks only at the files they stand for, or at every file when one is a new folder no
/// app's file stands for (a skill, a path a `discovery.checks` entry looks for).
/// `apps.json` (who sees what) is no descriptor: it rebuilds through `Why::Other`.
fn why(event: &notify::Event) -> Why {
    if event
        .paths
        .iter()
        .any(|p| p.file_name().is_some_and(|n| n == "apps.json"))
    {
        Why::Other
    } else {
        Why::Files(event.paths.clone())
    }
}

/// Whether an event kind means something on disk changed (created, written, renamed,
/// removed) rather than was looked at (opened, read, closed, its times touched).
fn is_change(kind: &notify::EventKind) -> bool {
    use notify::EventKind;
    use notify::event::ModifyKind;
    match kind {
        EventKind::Create(_) | EventKind::Remove(_) => true,
        EventKind::Modify(ModifyKind::Metadata(_)) => false,
        EventKind::Modify(_) => true,
        EventKind::Access(_) | EventKind::Any | EventKind::Other => false,
    }
}

/// Whether an event kind moves or removes what it names: an app folder, perhaps (a
/// symlink to one is removed as a file). What it stands for, the scan works out.
fn moved(kind: &notify::EventKind) -> bool {
    use notify::EventKind;
    use notify::event::ModifyKind;
    matches!(
        kind,
        EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
    )
}

fn file_watcher(
    gateway: &Gateway,
    tx: mpsc::UnboundedSender<Why>,
) -> Option<notify::RecommendedWatcher> {
    let roots: Vec<std::path::PathBuf> = gateway
        .search_dirs()
        .iter()
        .map(|d| d.dir.clone())
        .collect();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        // Events were lost (the kernel's queue overflowed) or the watcher says to look
        // again: nothing says what changed, so everything is scanned and rebuilt.
        if event.need_rescan() {
            let _ = tx.send(Why::Other);
            return;
        }
        // Only changes count: reading a descriptor (the gateway's own scans included)
        // raises open/access events, and reacting to those would rescan forever.
        if !is_change(&event.kind) {
            return;
        }
        // A new folder counts too: its `aai.json` may be written before the recursive
        // watch on the folder exists, and then no event names the file. So does a folder
        // renamed or removed in a search directory: an app folder moved in or out.
        let relevant = event.paths.iter().any(|p| {
            (p.extension().is_some_and(|e| e == "json")
                && p.file_name().is_some_and(|n| n != "config.json"))
                || (event.kind.is_create() && p.is_dir())
                || (moved(&event.kind) && p.parent().is_some_and(|d| roots.iter().any(|r| r == d)))
        });
        if relevant {
            let _ = tx.send(why(&event));
        }
    })
    .map_err(|e| {
        tracing::warn!("file watching is unavailable ({e}); relying on the periodic rescan")
    })
    .ok()?;
    for dir in gateway.search_dirs() {
        if !dir.dir.is_dir() {
            continue;
        }
        let mode = match dir.kind {
            SourceKind::User | SourceKind::Config => RecursiveMode::Recursive,
            SourceKind::System | SourceKind::WebCache | SourceKind::BuiltIn => {
                RecursiveMode::NonRecursive
            }
        };
        if let Err(e) = watcher.watch(&dir.dir, mode) {
            tracing::debug!("cannot watch {}: {e}", dir.dir.display());
        }
    }
    Some(watcher)
}

#[cfg(test)]
mod tests {
    use super::{Why, why};
    use notify::event::{CreateKind, ModifyKind};
    use notify::{Event, EventKind};

    #[test]
    fn file_events_name_their_paths_and_who_sees_what_rebuilds_everything() {
        let dir = tempfile::tempdir().unwrap();
        let written = |paths: &[std::path::PathBuf]| {
            let mut event = Event::new(EventKind::Modify(ModifyKind::Any));
            event.paths = paths.to_vec();
            why(&event)
        };
        let descriptor = dir.path().join("com.example.a/aai.json");
        let meta = dir.path().join("web/com.example.w/meta.json");
        assert_eq!(
            written(&[descriptor.clone(), meta.clone()]),
            Why::Files(vec![descriptor.clone(), meta])
        );
        // Who sees what: no descriptor, but the snapshot depends on it.
        let apps = dir.path().join("apps.json");
        assert_eq!(written(&[descriptor, apps]), Why::Other);
        // A new folder goes to the scan, which tells an app's from a skill's.
        let folder = dir.path().join("skills/new");
        std::fs::create_dir_all(&folder).unwrap();
        let mut event = Event::new(EventKind::Create(CreateKind::Folder));
        event.paths = vec![folder.clone()];
        assert_eq!(why(&event), Why::Files(vec![folder]));
    }
}
