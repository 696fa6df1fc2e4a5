//! The version rules (docs/descriptors.md, Versions): what a change between two releases
//! of a descriptor means for the agents that use it, and which semver bump it needs.
//!
//! | change | bump |
//! |---|---|
//! | tool removed or renamed, platform removed | MAJOR |
//! | required parameter added, optional parameter made required, parameter removed | MAJOR |
//! | parameter type changed, enum value removed | MAJOR |
//! | tool or platform added, optional parameter added, required parameter made optional, enum value added | MINOR |
//! | description changed (app, tool or parameter) | PATCH |
//!
//! "If existing agents might break, bump MAJOR." A removed parameter is MAJOR because agents
//! that send it would be refused. A tool that disappears while one with the same
//! parameters appears is reported as a rename.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::model::{App, Tool};

/// A semver bump, from none to MAJOR (ordered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Bump {
    /// No version change.
    None,
    /// `x.y.Z`.
    Patch,
    /// `x.Y.0`.
    Minor,
    /// `X.0.0`.
    Major,
}

impl fmt::Display for Bump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bump::None => "none",
            Bump::Patch => "PATCH",
            Bump::Minor => "MINOR",
            Bump::Major => "MAJOR",
        })
    }
}

/// One change and the bump it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The bump this change needs.
    pub bump: Bump,
    /// What changed, in words (`tool \`send\` (linux) was removed`).
    pub what: String,
}

/// Everything that changed between two releases.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The changes, most severe first.
    pub changes: Vec<Change>,
    /// The bump the changes need.
    pub needed: Bump,
    /// The bump the versions make (`None` when the new version is not greater).
    pub made: Bump,
    /// The old and new `version`.
    pub versions: (String, String),
    /// Why the versions cannot be compared, if they cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl Report {
    /// Whether the new version is bumped enough for the changes.
    pub fn enough(&self) -> bool {
        self.problem.is_none() && self.made >= self.needed
    }
}

/// `MAJOR.MINOR.PATCH` of a semver version (pre-release and build parts do not count).
fn semver(text: &str) -> Option<(u64, u64, u64)> {
    let v = semver::Version::parse(text.trim()).ok()?;
    Some((v.major, v.minor, v.patch))
}

/// The bump from `old` to `new`, or why there is none.
fn made(old: &str, new: &str) -> Result<Bump, String> {
    let (Some(o), Some(n)) = (semver(old), semver(new)) else {
        return Err(format!(
            "versions must be semver MAJOR.MINOR.PATCH to be compared (old `{old}`, new `{new}`)"
        ));
    };
    Ok(match () {
        () if n.0 > o.0 => Bump::Major,
        () if n.0 == o.0 && n.1 > o.1 => Bump::Minor,
        () if n.0 == o.0 && n.1 == o.1 && n.2 > o.2 => Bump::Patch,
        () if n == o => Bump::None,
        () => return Err(format!("the new version {new} is lower than the old {old}")),
    })
}

/// Compares two releases of one app's descriptor.
pub fn compare(old: &App, new: &App) -> Report {
    let mut changes = Vec::new();
    let mut add = |bump: Bump, what: String| changes.push(Change { bump, what });
    if old.id != new.id {
        add(
            Bump::Major,
            format!("the app id changed from `{}` to `{}`", old.id, new.id),
        );
    }
    if old.description != new.description {
        add(Bump::Patch, "the app's description changed".to_owned());
    }
    for binding in &old.bindings {
        let platform = binding.platform.as_str();
        let Some(newer) = new.binding(binding.platform) else {
            add(Bump::Major, format!("platform {platform} was removed"));
            continue;
        };
        let before: BTreeMap<&str, &Tool> =
            binding.tools.iter().map(|t| (t.name.as_str(), t)).collect();
        let after: BTreeMap<&str, &Tool> =
            newer.tools.iter().map(|t| (t.name.as_str(), t)).collect();
        let mut added: Vec<&Tool> = newer
            .tools
            .iter()
            .filter(|t| !before.contains_key(t.name.as_str()))
            .collect();
        for tool in &binding.tools {
            match after.get(tool.name.as_str()) {
                Some(now) => compare_tool(platform, tool, now, &mut add),
                None => {
                    // The same parameters under a new name: a rename.
                    let same = |t: &&Tool| t.parameters.json() == tool.parameters.json();
                    match added.iter().position(same) {
                        Some(at) => {
                            let renamed = added.remove(at);
                            add(
                                Bump::Major,
                                format!(
                                    "tool `{}` ({platform}) was renamed to `{}`",
                                    tool.name, renamed.name
                                ),
                            );
                        }
                        None => add(
                            Bump::Major,
                            format!("tool `{}` ({platform}) was removed", tool.name),
                        ),
                    }
                }
            }
        }
        for tool in added {
            add(
                Bump::Minor,
                format!("tool `{}` ({platform}) was added", tool.name),
            );
        }
    }
    for binding in &new.bindings {
        if old.binding(binding.platform).is_none() {
            add(
                Bump::Minor,
                format!("platform {} was added", binding.platform.as_str()),
            );
        }
    }
    changes.sort_by_key(|c| std::cmp::Reverse(c.bump));
    let needed = changes.iter().map(|c| c.bump).max().unwrap_or(Bump::None);
    let versions = (
        old.version.clone().unwrap_or_default(),
        new.version.clone().unwrap_or_default(),
    );
    let (made, problem) = match made(&versions.0, &versions.1) {
        Ok(b) => (b, None),
        Err(why) => (Bump::None, Some(why)),
    };
    Report {
        changes,
        needed,
        made,
        versions,
        problem,
    }
}

/// The changes of one tool that kept its name.
fn compare_tool(platform: &str, old: &Tool, new: &Tool, add: &mut impl FnMut(Bump, String)) {
    let name = &old.name;
    if old.description != new.description {
        add(
            Bump::Patch,
            format!("the description of tool `{name}` ({platform}) changed"),
        );
    }
    // The same schema text: nothing to read into trees (a schema keeps the tree it read).
    if old.parameters.text() == new.parameters.text() {
        return;
    }
    let (old_schema, new_schema) = (old.parameters.json(), new.parameters.json());
    let none = serde_json::Map::new();
    let required = |s: &Value| -> Vec<String> {
        s.get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (before, after) = (
        properties(old_schema).unwrap_or(&none),
        properties(new_schema).unwrap_or(&none),
    );
    let (was_required, is_required) = (required(old_schema), required(new_schema));
    let param = |p: &str| format!("parameter `{p}` of tool `{name}` ({platform})");
    for (p, schema) in before {
        let Some(now) = after.get(p) else {
            add(Bump::Major, format!("{} was removed", param(p)));
            continue;
        };
        let (req_before, req_after) = (was_required.contains(p), is_required.contains(p));
        if !req_before && req_after {
            add(Bump::Major, format!("{} became required", param(p)));
        } else if req_before && !req_after {
            add(Bump::Minor, format!("{} became optional", param(p)));
        }
        if schema.get("type") != now.get("type") {
            let shown = |v: Option<&Value>| v.map_or_else(|| "any".to_owned(), Value::to_string);
            add(
                Bump::Major,
                format!(
                    "the type of {} changed from {} to {}",
                    param(p),
                    shown(schema.get("type")),
                    shown(now.get("type"))
                ),
            );
        }
        let values = |s: &Value| s.get("enum").and_then(Value::as_array).cloned();
        if let (Some(was), Some(is)) = (values(schema), values(now)) {
            if was.iter().any(|v| !is.contains(v)) {
                add(Bump::Major, format!("{} lost enum values", param(p)));
            } else if is.iter().any(|v| !was.contains(v)) {
                add(Bump::Minor, format!("{} gained enum values", param(p)));
            }
        }
        if schema.get("description") != now.get("description") {
            add(
                Bump::Patch,
                format!("the description of {} changed", param(p)),
            );
        }
    }
    for p in after.keys().filter(|p| !before.contains_key(*p)) {
        if is_required.contains(p) {
            add(Bump::Major, format!("required {} was added", param(p)));
        } else {
            add(Bump::Minor, format!("optional {} was added", param(p)));
        }
    }
}

/// A schema's `properties`.
fn properties(schema: &Value) -> Option<&serde_json::Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(version: &str, tools: Value) -> App {
        let doc = serde_json::json!({
            "schemaVersion": "1.0", "version": version, "platform": "linux",
            "app": {"id": "com.example.v", "name": {"en": "V"}, "defaultLang": "en", "description": "d"},
            "execution": {"type": "stdio", "command": "v"},
            "tools": tools,
        });
        let parsed = crate::parse(&doc.to_string(), "test.json");
        parsed
            .app
            .unwrap_or_else(|| panic!("{:?}", parsed.diagnostics))
    }

    fn tool(name: &str, props: Value, required: &[&str]) -> Value {
        serde_json::json!({"name": name, "description": name,
            "parameters": {"type": "object", "properties": props, "required": required}})
    }

    #[test]
    fn a_removed_tool_released_as_minor_is_not_enough() {
        let old = app(
            "1.0.0",
            serde_json::json!([
                tool("a", serde_json::json!({}), &[]),
                tool("b", serde_json::json!({"x": {"type": "string"}}), &[])
            ]),
        );
        let new = app(
            "1.1.0",
            serde_json::json!([tool("a", serde_json::json!({}), &[])]),
        );
        let report = compare(&old, &new);
        assert_eq!(report.needed, Bump::Major);
        assert_eq!(report.made, Bump::Minor);
        assert!(!report.enough());
        assert_eq!(report.changes[0].what, "tool `b` (linux) was removed");
    }

    #[test]
    fn each_rule_of_the_documented_table() {
        let s = |t: &str| serde_json::json!({"type": t});
        let old = app(
            "1.0.0",
            serde_json::json!([
                tool(
                    "keep",
                    serde_json::json!({"a": s("string"), "b": s("integer"), "c": s("string")}),
                    &["a"]
                ),
                tool("old_name", serde_json::json!({"q": s("string")}), &[]),
            ]),
        );
        let new = app(
            "2.0.0",
            serde_json::json!([
                tool(
                    "keep",
                    serde_json::json!({"a": s("string"), "b": s("string"), "d": s("string"), "e": s("string")}),
                    &["a", "e"]
                ),
                tool("new_name", serde_json::json!({"q": s("string")}), &[]),
                tool("extra", serde_json::json!({}), &[]),
            ]),
        );
        let report = compare(&old, &new);
        let said: Vec<(Bump, &str)> = report
            .changes
            .iter()
            .map(|c| (c.bump, c.what.as_str()))
            .collect();
        for expected in [
            (
                Bump::Major,
                "tool `old_name` (linux) was renamed to `new_name`",
            ),
            (
                Bump::Major,
                "parameter `c` of tool `keep` (linux) was removed",
            ),
            (
                Bump::Major,
                "the type of parameter `b` of tool `keep` (linux) changed from \"integer\" to \"string\"",
            ),
            (
                Bump::Major,
                "required parameter `e` of tool `keep` (linux) was added",
            ),
            (
                Bump::Minor,
                "optional parameter `d` of tool `keep` (linux) was added",
            ),
            (Bump::Minor, "tool `extra` (linux) was added"),
        ] {
            assert!(said.contains(&expected), "{expected:?} not in {said:#?}");
        }
        assert!(report.enough());
    }

    #[test]
    fn description_changes_need_a_patch_and_versions_must_grow() {
        let old = app(
            "1.2.3",
            serde_json::json!([tool("a", serde_json::json!({}), &[])]),
        );
        let mut new = app(
            "1.2.3",
            serde_json::json!([tool("a", serde_json::json!({}), &[])]),
        );
        new.bindings[0].tools[0].description = "clearer".into();
        let report = compare(&old, &new);
        assert_eq!((report.needed, report.made), (Bump::Patch, Bump::None));
        assert!(!report.enough());
        new.version = Some("1.2.4".into());
        assert!(compare(&old, &new).enough());
        new.version = Some("1.1.9".into());
        let report = compare(&old, &new);
        assert!(report.problem.unwrap().contains("lower"));
        new.version = Some("one".into());
        assert!(
            compare(&old, &new)
                .problem
                .unwrap()
                .contains("MAJOR.MINOR.PATCH")
        );
        assert_eq!(semver("2.0.1-beta.1+7"), Some((2, 0, 1)));
        assert_eq!(made("1.4.2", "2.0.0-rc.1"), Ok(Bump::Major));
    }
}
