//! Snapshot tests over `fixtures/`: every valid file's normalized model, and every broken
//! file's diagnostics. Review changes with `cargo insta review`.
//!
//! Run: `cargo test -p aai-descriptor --test fixtures`

use std::fs;
use std::path::PathBuf;

fn fixtures(kind: &str) -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(kind);
    let mut files: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// What the gateway's catalog tells the parser of a file named `name` in a folder of
/// descriptors: an access-form file without `app.id` takes the name without `.json`, and
/// (so that snapshots do not depend on the machine) the platform is Linux.
fn origin(name: &str) -> aai_descriptor::Origin<'_> {
    aai_descriptor::Origin {
        id: name.strip_suffix(".json"),
        platform: Some(aai_descriptor::Platform::Linux),
    }
}

#[test]
fn valid_fixtures_normalize() {
    for (name, text) in fixtures("valid") {
        let parsed = aai_descriptor::parse_with(&text, &name, &origin(&name));
        let errors: Vec<_> = parsed.diagnostics.iter().filter(|d| d.is_error()).collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
        let app = parsed.app.unwrap_or_else(|| panic!("{name} did not load"));
        for tool in app.bindings.iter().flat_map(|b| &b.tools) {
            let schemas = std::iter::once(&tool.parameters).chain(&tool.returns);
            for schema in schemas {
                schema
                    .validator()
                    .unwrap_or_else(|e| panic!("{name}: {}: passed load but {e}", tool.name));
            }
        }
        let out = serde_json::json!({ "app": app, "diagnostics": parsed.diagnostics });
        insta::assert_json_snapshot!(format!("valid__{name}"), out);
    }
}

#[test]
fn broken_fixtures_explain_every_problem() {
    for (name, text) in fixtures("broken") {
        let parsed = aai_descriptor::parse_with(&text, &name, &origin(&name));
        assert!(parsed.app.is_none(), "{name} should be rejected");
        assert!(
            parsed.diagnostics.iter().any(|d| d.is_error()),
            "{name}: rejected without an error"
        );
        let lines: Vec<String> = parsed.diagnostics.iter().map(ToString::to_string).collect();
        insta::assert_snapshot!(format!("broken__{name}"), lines.join("\n"));
    }
}
