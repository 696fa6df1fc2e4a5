//! Names the commit the binary was built from, for `--version`: `AAI_GATEWAY_COMMIT` when
//! the builder sets it (the release workflow), else the checkout's `HEAD`, else the commit cargo recorded when it packaged the crate
//! (`.cargo_vcs_info.json`, what `cargo install aai-gateway` builds from), else `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-env-changed=AAI_GATEWAY_COMMIT");
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&dir);
    let commit = std::env::var("AAI_GATEWAY_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| from_git(dir))
        .or_else(|| from_package(dir))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo::rustc-env=AAI_GATEWAY_COMMIT={}", commit.trim());
    link_order(dir);
}

/// Release builds for x86_64 Linux link the functions a gateway runs (at start, per
/// request) side by side at the front of `.text`, in the order `link-order.txt` lists them
/// (written by `packaging/link-order`). The kernel maps a binary's code 64 KiB around each
/// page it first runs, so functions scattered over 15 MB of text make most of it resident;
/// packed, the code a gateway runs fits in a few MiB (docs/performance.md, "Link order").
/// Names the list has and the binary does not (code changed since the list was written)
/// are skipped; `AAI_LINK_ORDER=0` links without the list.
///
/// Only with LLD, the linker Rust uses on x86_64 Linux since 1.90 unless a build names its
/// own: the system's `ld` does not take an ordering file.
fn link_order(dir: &Path) {
    println!("cargo::rerun-if-changed=link-order.txt");
    println!("cargo::rerun-if-env-changed=AAI_LINK_ORDER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let wanted = var("PROFILE") == "release"
        && var("TARGET") == "x86_64-unknown-linux-gnu"
        && var("AAI_LINK_ORDER") != "0"
        && var("RUSTC_LINKER").is_empty()
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("link")
        && rustc_minor().is_some_and(|minor| minor >= 90);
    let list = dir.join("link-order.txt");
    if wanted && list.exists() {
        for arg in [
            format!("--symbol-ordering-file={}", list.display()),
            "--no-warn-symbol-ordering".to_owned(),
        ] {
            println!("cargo::rustc-link-arg-bin=aai-gateway=-Wl,{arg}");
        }
    }
}

/// The minor version of the compiler cargo builds with (`rustc 1.95.0 (…)` → 95).
#[allow(clippy::disallowed_methods)] // at build time, like `git` below
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var("RUSTC").ok()?;
    let out = Command::new(rustc).arg("-V").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}

// The rule that only exec/process.rs creates processes is about the gateway at run time;
// this runs once, at build time, in cargo's build-script process.
#[allow(clippy::disallowed_methods)]
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn from_git(dir: &Path) -> Option<String> {
    let commit = git(dir, &["rev-parse", "--short=12", "HEAD"]).filter(|c| !c.is_empty())?;
    // Rebuild when HEAD moves: a commit changes the ref HEAD points to, a checkout HEAD.
    if let Some(git_dir) = git(dir, &["rev-parse", "--absolute-git-dir"]) {
        let git_dir = Path::new(&git_dir);
        println!("cargo::rerun-if-changed={}", git_dir.join("HEAD").display());
        // The branch's ref file, or packed-refs when the ref is packed (a path that does
        // not exist would rerun this script on every build). Refs live in the common git
        // dir, which is not the git dir in a linked worktree.
        let common = git(dir, &["rev-parse", "--git-common-dir"])
            .map(|c| dir.join(c))
            .unwrap_or_else(|| git_dir.to_owned());
        let head = git(dir, &["symbolic-ref", "-q", "HEAD"]).map(|h| common.join(h));
        for path in head.into_iter().chain([common.join("packed-refs")]) {
            if path.exists() {
                println!("cargo::rerun-if-changed={}", path.display());
            }
        }
    }
    // Uncommitted changes are not marked: watching the index would rebuild the crate on
    // every `git add`.
    Some(commit)
}

/// `cargo package` writes `{"git": {"sha1": "…", "dirty": true?}, …}` into the crate.
fn from_package(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    println!("cargo::rerun-if-changed=.cargo_vcs_info.json");
    let start = text.find("\"sha1\"")? + "\"sha1\"".len();
    let rest = text[start..].trim_start().strip_prefix(':')?.trim_start();
    let sha: String = rest
        .strip_prefix('"')?
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    (sha.len() >= 12).then(|| sha[..12].to_owned())
}
