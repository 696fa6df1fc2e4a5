//! A descriptor draft from a macOS app's scripting definition (`.sdef`, the XML inside a
//! scriptable app's bundle): every command of the app's own suites becomes an AppleScript
//! tool, its direct and named parameters schema properties.
//!
//! Pure: text in, JSON out. What a draft leaves out, and why:
//! * the Standard and Text suites (open, close, count, make… are not the app's own
//!   verbs) and hidden commands;
//! * optional parameters — a template cannot leave a parameter out, and an empty value
//!   would change the command's meaning; edit the draft to add one;
//! * commands that need a parameter of an object type (a window, a document, a
//!   specifier): an object reference is code, and values are never placed in code. Only
//!   text, numbers, booleans, files and dates are parameters (text, files and dates as
//!   quoted text);
//! * commands or parameters whose terms are not plain words (they are written into the
//!   script as code).
//!
//! Every draft passes `validate`; the tests check it.

use serde_json::{Map, Value, json};

/// Suites that are not an app's own.
const SKIPPED_SUITES: [&str; 3] = ["Standard Suite", "Text Suite", "Type Definitions"];

/// What a parameter of a draft is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Integer,
    Number,
    Boolean,
}

impl Kind {
    /// An sdef type, if a value of it can be passed as data.
    fn of(ty: &str) -> Option<Kind> {
        match ty {
            "text" | "string" | "Unicode text" | "file" | "alias" | "date" => Some(Kind::Text),
            "integer" | "short integer" => Some(Kind::Integer),
            "real" | "number" | "double integer" => Some(Kind::Number),
            "boolean" => Some(Kind::Boolean),
            _ => None,
        }
    }

    fn schema(self) -> &'static str {
        match self {
            Kind::Text => "string",
            Kind::Integer => "integer",
            Kind::Number => "number",
            Kind::Boolean => "boolean",
        }
    }

    /// The placeholder as it goes into the script.
    fn slot(self, name: &str) -> String {
        match self {
            Kind::Text => format!("\"${{{name}}}\""),
            _ => format!("${{{name}}}"),
        }
    }
}

/// A term written into a script: plain words only.
fn plain(term: &str) -> bool {
    !term.trim().is_empty()
        && term
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == '_')
}

/// `create window` → `create_window`.
fn tool_name(term: &str) -> String {
    term.split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect::<Vec<_>>()
        .join("_")
}

/// The type of a parameter element: its `type` attribute, or one nested `<type>`; lists
/// are not passed.
fn param_kind(node: roxmltree::Node<'_, '_>) -> Option<Kind> {
    if node.attribute("list") == Some("yes") {
        return None;
    }
    let ty = node.attribute("type").or_else(|| {
        let mut types = node.children().filter(|c| c.has_tag_name("type"));
        let first = types.next()?;
        (types.next().is_none() && first.attribute("list") != Some("yes"))
            .then(|| first.attribute("type"))
            .flatten()
    })?;
    Kind::of(ty)
}

/// One command as a tool, or why it was left out.
fn command(bundle_id: &str, node: roxmltree::Node<'_, '_>) -> Result<Value, String> {
    let term = node.attribute("name").unwrap_or_default();
    if !plain(term) {
        return Err(format!("`{term}`: not a plain term"));
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut script = format!("tell application id \"{bundle_id}\" to {term}");
    for child in node.children().filter(roxmltree::Node::is_element) {
        let direct = child.has_tag_name("direct-parameter");
        if !direct && !child.has_tag_name("parameter") {
            continue;
        }
        if child.attribute("hidden") == Some("yes") {
            continue;
        }
        let optional = child.attribute("optional") == Some("yes");
        let kind = param_kind(child);
        let Some(kind) = kind else {
            if optional {
                continue;
            }
            return Err(format!("`{term}` needs an object parameter"));
        };
        if optional {
            continue;
        }
        let (name, label) = if direct {
            ("target".to_owned(), String::new())
        } else {
            let label = child.attribute("name").unwrap_or_default();
            if !plain(label) {
                return Err(format!("`{term}`: parameter `{label}` is not a plain term"));
            }
            (tool_name(label), format!(" {label}"))
        };
        let mut property = json!({"type": kind.schema()});
        if let Some(d) = child.attribute("description") {
            property["description"] = json!(d);
        }
        properties.insert(name.clone(), property);
        required.push(name.clone());
        script.push_str(&label);
        script.push(' ');
        script.push_str(&kind.slot(&name));
    }
    let description = node
        .attribute("description")
        .map(str::to_owned)
        .unwrap_or_else(|| format!("The `{term}` command"));
    Ok(json!({
        "name": tool_name(term),
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required, "additionalProperties": false},
        "script": script,
        "output_parser": "result as text",
    }))
}

/// What a draft says, and what it left out.
#[derive(Debug)]
pub struct Draft {
    /// The descriptor (D0 platforms form).
    pub descriptor: Value,
    /// Commands left out, each with why.
    pub skipped: Vec<String>,
}

/// Why no draft could be made: what went wrong, and the message that says it.
pub type Error = aai_descriptor::Failure<ErrorKind>;

/// What kept a draft from being made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The bundle identifier is not dotted words (it would name a folder).
    BundleId,
    /// The text is not XML.
    Xml,
}

/// A draft for the app `bundle_id` named `name` from its `.sdef` text; `None` when it has
/// no command of its own to offer.
pub fn draft(bundle_id: &str, name: &str, sdef: &str) -> Result<Option<Draft>, Error> {
    // Dotted words (`com.example.App`): it names a folder under the home directory.
    let word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !bundle_id.split('.').all(word) {
        return Err(Error::new(
            ErrorKind::BundleId,
            format!("`{bundle_id}` is not a bundle identifier"),
        ));
    }
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(sdef, options)
        .map_err(|e| Error::new(ErrorKind::Xml, format!("not a scripting definition: {e}")))?;
    let mut tools: Vec<Value> = Vec::new();
    let mut skipped = Vec::new();
    for suite in doc.descendants().filter(|n| n.has_tag_name("suite")) {
        let suite_name = suite.attribute("name").unwrap_or_default();
        if SKIPPED_SUITES.contains(&suite_name) || suite.attribute("hidden") == Some("yes") {
            continue;
        }
        for cmd in suite.children().filter(|n| n.has_tag_name("command")) {
            if cmd.attribute("hidden") == Some("yes") {
                continue;
            }
            match command(bundle_id, cmd) {
                Ok(tool) => {
                    let name = tool["name"].as_str().unwrap_or_default().to_owned();
                    if tools.iter().any(|t| t["name"] == name.as_str()) {
                        skipped.push(format!("`{name}`: a second command of that name"));
                    } else {
                        tools.push(tool);
                    }
                }
                Err(why) => skipped.push(why),
            }
        }
    }
    if tools.is_empty() {
        return Ok(None);
    }
    let title = doc
        .root_element()
        .attribute("title")
        .filter(|t| !t.trim().is_empty())
        .unwrap_or(name);
    Ok(Some(Draft {
        descriptor: json!({
            "schema_version": "1.0",
            "appId": bundle_id,
            "name": name,
            "description": format!("{title} (generated from its scripting definition; review before use)"),
            "version": "1.0",
            "platforms": {"macos": {"automation": "applescript", "tools": tools}},
        }),
        skipped,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripting definition in the shape scriptable apps ship (suites, commands with
    /// direct and named parameters, nested types, hidden items, the Standard Suite),
    /// written for this test.
    const SDEF: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE dictionary SYSTEM "file://localhost/System/Library/DTDs/sdef.dtd">
<dictionary title="Terminal Pro Terminology" xmlns:xi="http://www.w3.org/2003/XInclude">
  <xi:include href="file:///System/Library/ScriptingDefinitions/CocoaStandard.sdef" xpointer="xpointer(/dictionary/suite)"/>
  <suite name="Standard Suite" code="????" description="Common classes and commands">
    <command name="close" code="coreclos"><direct-parameter type="specifier"/></command>
  </suite>
  <suite name="Terminal Pro Suite" code="TPRO" description="The app's own commands">
    <command name="create window" code="TPROnwin" description="Open a window running a command">
      <parameter name="command" code="Cmnd" type="text" description="The command to run"/>
      <parameter name="profile" code="Prof" type="text" optional="yes"/>
      <result type="window"/>
    </command>
    <command name="set font size" code="TPROfont" description="Change the font size">
      <direct-parameter description="Points"><type type="real"/></direct-parameter>
      <parameter name="animated" code="Anim" type="boolean"/>
    </command>
    <command name="close tab" code="TPROclot"><direct-parameter type="tab"/></command>
    <command name="write text" code="TPROwrte">
      <direct-parameter type="text"/>
      <parameter name="to session" code="Sesn" type="session"/>
    </command>
    <command name="debug dump" code="TPROdbug" hidden="yes"/>
    <command name="odd&quot;name" code="TPROodd1"/>
    <command name="tags" code="TPROtags"><direct-parameter type="text" list="yes"/></command>
    <command name="version check" code="TPROvers" description="The app's version"/>
  </suite>
</dictionary>
"#;

    #[test]
    fn commands_become_tools_and_what_cannot_be_data_is_left_out() {
        let draft = draft("com.example.terminalpro", "Terminal Pro", SDEF)
            .unwrap()
            .unwrap();
        let d = &draft.descriptor;
        let tools = d["platforms"]["macos"]["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["create_window", "set_font_size", "version_check"]);
        assert_eq!(
            tools[0]["script"],
            "tell application id \"com.example.terminalpro\" to create window command \"${command}\""
        );
        assert_eq!(tools[0]["parameters"]["required"], json!(["command"]));
        assert!(
            tools[0]["parameters"]["properties"]
                .get("profile")
                .is_none()
        );
        assert_eq!(
            tools[1]["script"],
            "tell application id \"com.example.terminalpro\" to set font size ${target} animated ${animated}"
        );
        assert_eq!(
            tools[1]["parameters"]["properties"]["target"]["type"],
            "number"
        );
        assert_eq!(
            tools[2]["script"],
            "tell application id \"com.example.terminalpro\" to version check"
        );
        assert_eq!(draft.skipped.len(), 4, "{:?}", draft.skipped);
        assert_eq!(
            d["description"],
            "Terminal Pro Terminology (generated from its scripting definition; review before use)"
        );
    }

    #[test]
    fn every_draft_validates() {
        let draft = draft("com.example.terminalpro", "Terminal Pro", SDEF)
            .unwrap()
            .unwrap();
        let text = serde_json::to_string_pretty(&draft.descriptor).unwrap();
        let parsed = aai_descriptor::parse(&text, "draft.json");
        assert!(
            parsed.app.is_some(),
            "{:?}",
            parsed
                .diagnostics
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn bad_input_is_an_error_or_nothing() {
        assert!(draft("com.example.x", "X", "<not xml").is_err());
        for bad in ["bad id\"", "..", "com..x", ".hidden", "a/b", ""] {
            assert!(draft(bad, "X", SDEF).is_err(), "{bad}");
        }
        let e = draft("com.example.x", "X", "<not xml").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Xml);
        assert!(
            e.to_string().starts_with("not a scripting definition: "),
            "{e}"
        );
        let e = draft("a/b", "X", SDEF).unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string().as_str()),
            (ErrorKind::BundleId, "`a/b` is not a bundle identifier")
        );
        assert!(
            draft("com.example.x", "X", "<dictionary><suite name=\"Standard Suite\"><command name=\"open\"/></suite></dictionary>")
                .unwrap()
                .is_none()
        );
    }
}
