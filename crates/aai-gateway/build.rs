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

/// Release builds link the functions a gateway runs (at start, per request) side by side
/// at the front of `.text`, in the order `link-order/<target>.txt` lists them (written by
/// `packaging/link-order`): start-up's first, then the rest of a session. The kernel maps a
/// binary's code 64 KiB around each page it first runs, so functions scattered over 15 MB
/// of text make most of it resident; packed, the code a gateway runs fits in a few MiB
/// (docs/performance.md, "Link order"). Targets without a list (the names carry the
/// target's hash) link as usual. Names the list has and the binary does not (code changed
/// since the list was written) are skipped; `AAI_LINK_ORDER=0` links without the list.
///
/// Only LLD takes an ordering file (the system's `ld` refuses it). rustup's toolchains
/// link with it on x86_64 Linux (gnu) since 1.90; for another target (x86_64 musl, whose
/// release binaries link with the system's `cc` and `ld`), the `cc` is told to use the
/// LLD that rustup ships with the toolchain, when a test link shows that works. A build
/// that names its own linker or link arguments is left alone.
///
/// A static musl binary relocates itself at start, reading every entry of its relocation
/// table (0.7 MiB, then resident); packed (`-z pack-relative-relocs`) the table is a few
/// KiB. musl's start code reads the packed form since 1.2.4; a test program linked that
/// way must run and print its relocated table, else the table stays as it is.
fn link_order(dir: &Path) {
    println!("cargo::rerun-if-env-changed=AAI_LINK_ORDER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    // The linker decides which arguments apply, and cargo does not rerun a build script
    // when it changes; an environment variable is the one way it can be told.
    let target = var("TARGET");
    let linker = target.to_uppercase().replace('-', "_");
    println!("cargo::rerun-if-env-changed=CARGO_TARGET_{linker}_LINKER");
    let lists = dir.join("link-order");
    // A list written for a new target is picked up by the next build.
    if let Some(lists) = lists.to_str().filter(|_| lists.is_dir()) {
        println!("cargo::rerun-if-changed={lists}");
    }
    let list = lists.join(format!("{target}.txt"));
    // The published crate has no lists (docs/performance.md): nothing to watch.
    let Some(path) = list.to_str().filter(|_| list.exists()) else {
        return;
    };
    println!("cargo::rerun-if-changed={path}");
    let wanted = var("PROFILE") == "release"
        && var("AAI_LINK_ORDER") != "0"
        && var("RUSTC_LINKER").is_empty()
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("link");
    let Some(probe) = wanted.then(Probe::new).flatten() else {
        return;
    };
    let Some(mut args) = probe.lld_args() else {
        return;
    };
    // Each argument whole (`-Wl,` would split a path at its commas).
    let packed: Vec<String> = ["-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"]
        .map(String::from)
        .into();
    // musl targets link statically unless the flags say otherwise (cargo 1.95 leaves
    // `crt-static` out of the features it tells build scripts, CARGO_CFG_TARGET_FEATURE).
    let static_musl = var("CARGO_CFG_TARGET_ENV") == "musl"
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("crt-static");
    if static_musl && probe.runs([args.as_slice(), &packed].concat()) {
        args.extend(packed);
    }
    args.extend([
        "-Xlinker".to_owned(),
        format!("--symbol-ordering-file={path}"),
        "-Xlinker".to_owned(),
        "--no-warn-symbol-ordering".to_owned(),
    ]);
    for arg in args {
        println!("cargo::rustc-link-arg-bin=aai-gateway={arg}");
    }
}

/// Test links of one small program for the target, in the build script's own folder.
struct Probe {
    rustc: String,
    target: String,
    host: String,
    out: std::path::PathBuf,
}

/// The probe's program: a table of pointers the loader must relocate, printed.
const PROBE: &str = "static T: [&str; 3] = [\"a\", \"bb\", \"ccc\"];\n\
                     fn main() { println!(\"{}\", T.concat()); }\n";

// Like `git` below: at build time, in cargo's build-script process.
#[allow(clippy::disallowed_methods)]
impl Probe {
    fn new() -> Option<Probe> {
        let var = |name: &str| std::env::var(name).ok();
        let out = std::path::PathBuf::from(var("OUT_DIR")?);
        std::fs::write(out.join("lld-probe.rs"), PROBE).ok()?;
        Some(Probe {
            rustc: var("RUSTC")?,
            target: var("TARGET")?,
            host: var("HOST")?,
            out,
        })
    }

    /// Links the program with `extra` link arguments: the linker command on success.
    fn link(&self, extra: &[String]) -> Option<String> {
        let mut command = Command::new(&self.rustc);
        command
            .args(["--print", "link-args", "--crate-type", "bin", "--target"])
            .arg(&self.target)
            .arg("-o")
            .arg(self.out.join("lld-probe"))
            .arg(self.out.join("lld-probe.rs"));
        for arg in extra {
            command.arg("-C").arg(format!("link-arg={arg}"));
        }
        let done = command.output().ok().filter(|o| o.status.success())?;
        Some(String::from_utf8_lossy(&done.stdout).into_owned())
    }

    /// Whether the program linked with `extra` runs here and prints its table.
    fn runs(&self, extra: Vec<String>) -> bool {
        self.link(&extra).is_some()
            && Command::new(self.out.join("lld-probe"))
                .output()
                .is_ok_and(|o| o.status.success() && o.stdout == b"abbccc\n")
    }

    /// The arguments that make the target's link use LLD: none when the compiler
    /// already does (its linker command says `-fuse-ld=lld`), the toolchain's own LLD
    /// when a test link with it succeeds, else `None`.
    fn lld_args(&self) -> Option<Vec<String>> {
        if self.link(&[])?.contains("-fuse-ld=lld") {
            return Some(Vec::new());
        }
        let sysroot = Command::new(&self.rustc)
            .args(["--print", "sysroot"])
            .output();
        let sysroot = String::from_utf8(sysroot.ok()?.stdout).ok()?;
        let gcc_ld = Path::new(sysroot.trim())
            .join("lib/rustlib")
            .join(&self.host)
            .join("bin/gcc-ld");
        let args = vec![format!("-B{}", gcc_ld.to_str()?), "-fuse-ld=lld".to_owned()];
        (gcc_ld.join("ld.lld").exists() && self.link(&args).is_some()).then_some(args)
    }
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
