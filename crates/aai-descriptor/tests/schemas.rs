//! The published JSON Schemas in `schema/` cannot drift from the parser: every valid
//! fixture passes the schema of its form, and every structurally broken fixture fails it.
//! (Semantic problems — a placeholder that is not a parameter, an executor that does not
//! fit the platform — are `validate`'s, not a schema's.)
//!
//! Run: `cargo test -p aai-descriptor --test schemas`

use std::fs;
use std::path::PathBuf;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> Value {
    let path = root().join(path);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn validator(form: &str) -> jsonschema::Validator {
    let schema = read(&format!("schema/aai-{form}.schema.json"));
    jsonschema::draft7::meta::validate(&schema)
        .unwrap_or_else(|e| panic!("schema/aai-{form}.schema.json is not draft-07: {e}"));
    jsonschema::draft7::new(&schema).unwrap_or_else(|e| panic!("aai-{form}: {e}"))
}

/// The form a document is read as (the rule of `dialect::detect`).
fn form(doc: &Value) -> Option<&'static str> {
    let has = |k: &str| doc.get(k).is_some();
    let major_two = doc["schemaVersion"]
        .as_str()
        .is_some_and(|v| v.trim().split('.').next() == Some("2"));
    let no_execution = !["execution", "platform", "tools"].iter().any(|k| has(k));
    if has("platforms") || has("appId") {
        Some("platforms")
    } else if major_two && (has("access") || no_execution) {
        Some("access")
    } else if has("schemaVersion") {
        Some("camelcase")
    } else if has("app") {
        let named = doc.pointer("/app/name").is_some_and(Value::is_object);
        Some(if named && !has("schema_version") {
            "camelcase"
        } else {
            "snake-case"
        })
    } else {
        None
    }
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn every_valid_fixture_passes_the_schema_of_its_form() {
    let dir = root().join("fixtures/valid");
    let mut seen = 0;
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let doc = read(&format!("fixtures/valid/{name}"));
        let form = form(&doc).unwrap_or_else(|| panic!("{name}: no form"));
        // An access-form file takes its id from its name, as in a folder of descriptors.
        let origin = aai_descriptor::Origin {
            id: name.strip_suffix(".json"),
            platform: None,
        };
        let parsed = aai_descriptor::parse_with(&doc.to_string(), &name, &origin);
        let dialect = parsed.app.map(|a| a.dialect);
        let expected = match form {
            "platforms" => aai_descriptor::Dialect::Platforms,
            "access" => aai_descriptor::Dialect::Access,
            "camelcase" => aai_descriptor::Dialect::CamelCase,
            _ => aai_descriptor::Dialect::SnakeCase,
        };
        assert_eq!(
            dialect,
            Some(expected),
            "{name}: the parser reads another form"
        );
        let found = errors(&validator(form), &doc);
        assert!(found.is_empty(), "{name} ({form}): {found:#?}");
        seen += 1;
    }
    assert!(seen >= 10, "only {seen} fixtures");
}

#[test]
fn structurally_broken_fixtures_fail_their_schema() {
    for name in [
        "d0-linux-missing-method.json",
        "d2-auth-incomplete.json",
        "d2-many-problems.json",
        "ext-mcp-both-transports.json",
        "access-many-problems.json",
        "access-cli.json",
        "access-skill-url.json",
    ] {
        let doc = read(&format!("fixtures/broken/{name}"));
        let parsed = aai_descriptor::parse(&doc.to_string(), name);
        assert!(parsed.app.is_none(), "{name} is rejected by the parser");
        let form = form(&doc).unwrap_or_else(|| panic!("{name}: no form"));
        assert!(
            !validator(form).is_valid(&doc),
            "{name} passes the {form} schema"
        );
    }
    let stranger = read("fixtures/broken/not-a-descriptor.json");
    for form in ["platforms", "camelcase", "snake-case", "access"] {
        assert!(
            !validator(form).is_valid(&stranger),
            "{form} takes anything"
        );
    }
}

#[test]
fn the_schemas_have_ids_an_editor_can_use() {
    for file in [
        "aai-platforms",
        "aai-camelcase",
        "aai-snake-case",
        "aai-access",
        "config",
    ] {
        let schema = read(&format!("schema/{file}.schema.json"));
        assert_eq!(
            schema["$id"],
            format!(
                "https://raw.githubusercontent.com/aai-protocol/aai-gateway/main/schema/{file}.schema.json"
            ),
        );
        assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    }
}
