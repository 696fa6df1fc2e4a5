//! The committed type libraries in `fixtures/typelib` are what their IDL compiles to: widl
//! (Debian `mingw-w64-tools`) compiles each `.idl` again, windres and ld (Debian
//! `binutils-mingw-w64-x86-64`, with `cpp`) embed the Outlook-like one in a DLL, and the
//! drafts of the fresh files must equal the drafts of the committed ones (widl stamps its
//! creation time into a library, so the bytes differ).
//!
//! Without those tools the test says so and passes, unless `AAI_TEST_REQUIRE_PEERS=1`,
//! where it fails (CI installs them with `tests/install-peers`).
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::Command;

use aai_author::{com, typelib};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/typelib")
}

/// `program` on PATH, or the test's verdict on its absence.
fn tool(program: &str) -> Option<String> {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()));
    if found {
        return Some(program.to_owned());
    }
    assert!(
        std::env::var("AAI_TEST_REQUIRE_PEERS").as_deref() != Ok("1"),
        "required test peer missing: {program} (tests/install-peers installs it)"
    );
    eprintln!("*** SKIPPING: test peer missing: {program} ***");
    None
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn drafts(bytes: &[u8]) -> Vec<(String, serde_json::Value, Vec<String>)> {
    let lib = typelib::read(bytes).expect("a type library");
    com::drafts(&lib, com::Options::default())
        .expect("drafts")
        .into_iter()
        .map(|d| (d.id, d.descriptor, d.notes))
        .collect()
}

#[test]
fn the_committed_libraries_are_what_widl_compiles() {
    let (Some(widl), Some(windres), Some(ld), Some(_cpp)) = (
        tool("x86_64-w64-mingw32-widl"),
        tool("x86_64-w64-mingw32-windres"),
        tool("x86_64-w64-mingw32-ld"),
        tool("cpp"),
    ) else {
        return;
    };
    let dir = fixtures();
    let out = std::env::temp_dir().join(format!("aai-typelib-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    for name in ["outlook", "excel"] {
        let tlb = out.join(format!("{name}.tlb"));
        run(Command::new(&widl)
            .current_dir(&dir)
            .args(["-I.", "-t", "-o"])
            .arg(&tlb)
            .arg(format!("{name}.idl")));
        let fresh = std::fs::read(&tlb).unwrap();
        let committed = std::fs::read(dir.join(format!("{name}.tlb"))).unwrap();
        assert_eq!(drafts(&fresh), drafts(&committed), "{name}.tlb");
    }
    // The DLL: the fresh library as its TYPELIB resource 1.
    std::fs::write(out.join("outlook.rc"), "1 TYPELIB \"outlook.tlb\"\n").unwrap();
    run(Command::new(&windres).current_dir(&out).args([
        "--preprocessor=cpp",
        "-O",
        "coff",
        "-o",
        "outlook.res.o",
        "outlook.rc",
    ]));
    run(Command::new(&ld).current_dir(&out).args([
        "--dll",
        "-e",
        "0",
        "-o",
        "outlook.dll",
        "outlook.res.o",
    ]));
    let fresh = std::fs::read(out.join("outlook.dll")).unwrap();
    assert_eq!(
        typelib::resource(&fresh, Some(1)).unwrap(),
        std::fs::read(out.join("outlook.tlb")).unwrap()
    );
    let committed = std::fs::read(dir.join("outlook.dll")).unwrap();
    assert_eq!(drafts(&fresh), drafts(&committed));
    let _ = std::fs::remove_dir_all(&out);
}
