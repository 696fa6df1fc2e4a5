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
/// Only when the compiler links with LLD, which takes an ordering file (the system's `ld`
/// refuses it): rustup's toolchains do on x86_64 Linux since 1.90, unless a build names
/// its own linker; a distribution's compiler may not. The compiler is asked.
fn link_order(dir: &Path) {
    println!("cargo::rerun-if-env-changed=AAI_LINK_ORDER");
    let list = dir.join("link-order.txt");
    // The published crate has no list (docs/performance.md): nothing to watch.
    let Some(path) = list.to_str().filter(|_| list.exists()) else {
        return;
    };
    println!("cargo::rerun-if-changed={path}");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let wanted = var("PROFILE") == "release"
        && var("TARGET") == "x86_64-unknown-linux-gnu"
        && var("AAI_LINK_ORDER") != "0"
        && var("RUSTC_LINKER").is_empty()
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("link");
    if wanted && links_with_lld() {
        // Each argument whole (`-Wl,` would split a path at its commas).
        for arg in [
            "-Xlinker".to_owned(),
            format!("--symbol-ordering-file={path}"),
            "-Xlinker".to_owned(),
            "--no-warn-symbol-ordering".to_owned(),
        ] {
            println!("cargo::rustc-link-arg-bin=aai-gateway={arg}");
        }
    }
}

/// Whether the compiler links this target with LLD: the linker command it prints for an
/// empty program says `-fuse-ld=lld` (one small link, in the build script's own folder).
#[allow(clippy::disallowed_methods)] // at build time, like `git` below
fn links_with_lld() -> bool {
    let (Ok(rustc), Ok(out)) = (std::env::var("RUSTC"), std::env::var("OUT_DIR")) else {
        return false;
    };
    let out = Path::new(&out);
    let probe = out.join("lld-probe.rs");
    if std::fs::write(&probe, "fn main() {}\n").is_err() {
        return false;
    }
    Command::new(rustc)
        .args(["--print", "link-args", "--crate-type", "bin", "--target"])
        .arg("x86_64-unknown-linux-gnu")
        .arg("-o")
        .arg(out.join("lld-probe"))
        .arg(&probe)
        .output()
        .is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains("-fuse-ld=lld")
        })
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
