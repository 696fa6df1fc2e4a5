//! The allocator, set up before anything else runs.
//!
//! glibc's malloc gives each thread that allocates an arena of its own (up to eight per
//! core). Memory freed in an arena serves only the threads attached to it, and an arena
//! gives back only the top of its heap. A gateway's catalog is parsed on every core,
//! rebuilt by the scanning thread and looked up by the async threads, so over its life
//! every arena held a little of every catalog: at 10,000 apps, three rewrites of every
//! file, seen by the watcher in bursts, left RSS at 1.71× its start; with two arenas
//! 1.45×, with one 1.20×. One arena made the scan of 10,000 files half as slow again
//! (its two threads wait for malloc's lock: 0.38 → 0.58 s), two cost nothing measurable,
//! and neither moved the forwarded call (docs/performance.md, "A rescan in steps, and
//! two malloc arenas"). musl's allocator has no arenas.
//!
//! This is the workspace's one `unsafe`: `mallopt` is glibc's only way to set the limit
//! from inside the process, and no crate wraps it. A user's own `MALLOC_ARENA_MAX` (or
//! `GLIBC_TUNABLES` naming `arena_max`) is left to stand.

/// How many arenas glibc's malloc may make: the first thread's, and one more that the
/// threads started later share between them.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 2;

/// Limits glibc's malloc to [`ARENAS`] arenas, unless the environment already sets a
/// limit. Called first thing in `main`, while the process has one thread.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn limit_arenas() {
    // glibc ignores a value it cannot read (and 0): such a setting sets nothing.
    let tuned = std::env::var("MALLOC_ARENA_MAX")
        .is_ok_and(|n| n.parse::<u32>().is_ok_and(|n| n > 0))
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
    if tuned {
        return;
    }
    #[expect(
        unsafe_code,
        reason = "mallopt has no safe wrapper; see the module's documentation"
    )]
    // SAFETY: mallopt takes two integers and sets a limit under malloc's own lock; it
    // reads and writes no memory of ours.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

/// Every other allocator: nothing to set.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn limit_arenas() {}

#[cfg(test)]
mod tests {
    /// `unsafe`, or what the `unsafe_code` lint also catches, appears in this file alone
    /// among the workspace's sources (outside comments).
    #[test]
    fn no_other_file_uses_unsafe() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let words = [
            "unsafe",
            "unsafe_code",
            "no_mangle",
            "export_name",
            "link_section",
        ];
        let mut found = Vec::new();
        let mut dirs = vec![root.join("crates")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") || path.ends_with("src/allocator.rs")
                {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                for (n, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or_default();
                    let named = code
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .any(|word| words.contains(&word));
                    if named {
                        found.push(format!("{}:{}", path.display(), n + 1));
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "unsafe outside src/allocator.rs: {found:?}"
        );
        // The check sees what it looks for: this file's own `unsafe`.
        let here = include_str!("allocator.rs");
        assert!(here.lines().any(|l| l.trim_start().starts_with("unsafe {")));
    }
}
