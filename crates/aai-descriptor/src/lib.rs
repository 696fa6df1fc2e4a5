//! The `aai.json` descriptor: one normalized model for the three generations of the
//! format and the reference gateway's 2.0 form, with validation that explains every
//! problem.
//!
//! ```
//! let text = r#"{"schemaVersion":"1.0","version":"1.0.0","platform":"web",
//!   "app":{"id":"com.example.api","name":{"en":"Example","zh-CN":"示例"},"defaultLang":"en",
//!          "description":"An API"},
//!   "execution":{"type":"http","baseUrl":"https://api.example.com/v1"},
//!   "tools":[{"name":"search","description":"Search","parameters":{"type":"object"},
//!             "execution":{"path":"/search","method":"GET"}}]}"#;
//! let parsed = aai_descriptor::parse(text, "aai.json");
//! let app = parsed.app.expect("valid");
//! assert_eq!(app.name.resolve(Some("zh-TW")), "示例");
//! assert!(parsed.diagnostics.is_empty());
//! ```
//!
//! # Layout
//! * [`model`] — the normalized App → Binding → Tool model every dialect becomes.
//! * [`name`] — localized names and locale fallback.
//! * [`schema`] — compiled draft-07 schemas of tool parameters and results.
//! * [`undo`] — a tool's inverse, and its arguments made from a call.
//! * [`event`] — what an app announces (D-Bus signals, property changes).
//! * [`diagnostic`] — what is wrong, where (file + JSON pointer), how bad.
//! * [`lint`] — description text that addresses the model ("tool poisoning"): warnings.
//! * [`read`] — a JSON reader that reports as it goes (also reads the gateway config).
//! * `dialect` — detection and one parser per dialect (the access form's needs an
//!   [`Origin`]: its files may name no id or platform).
//!
//! This crate does no I/O and has no async: it turns text into a model.

pub mod diagnostic;
mod dialect;
pub mod event;
pub mod failure;
pub mod hash;
pub mod lint;
pub mod model;
pub mod name;
pub mod read;
pub mod schema;
pub mod script;
pub mod undo;
pub mod versions;

pub use diagnostic::{Diagnostic, Severity, Sink};
pub use dialect::app::{JSON_INTERFACE, header_name_problem, header_params, path_params};
pub use dialect::common::{
    dot_segment, looks_secret, looks_secret_value, placeholder_name, placeholder_names,
    portable_tool_name,
};
pub use event::{Event, EventSource};
pub use failure::Failure;
pub use model::*;
pub use name::{AppName, locale_from_posix};
pub use schema::Schema;
pub use undo::{Undo, UndoArg};

/// The outcome of parsing one file: the app if the file has no errors, and every
/// diagnostic (warnings too) in the order found.
#[derive(Debug)]
pub struct Parsed {
    /// The app, unless an error rejected the file.
    pub app: Option<App>,
    /// Everything worth telling about the file.
    pub diagnostics: Vec<Diagnostic>,
    /// The app's id is [`Origin::id`]: the file names none (an access-form file).
    pub id_from_origin: bool,
}

/// What the caller knows of a file that its text may not say. Only the access form (the
/// reference gateway's 2.0 files) needs it: such a file names no id and no platform.
#[derive(Debug, Clone, Copy, Default)]
pub struct Origin<'a> {
    /// The id of an app whose file names none: the gateway's catalog gives the folder's
    /// name for `<folder>/aai.json`, else the file's name without `.json`. Without one,
    /// such a file is an error.
    pub id: Option<&'a str>,
    /// The platform of the binding of a file that names none: the host's. Without one,
    /// the platform this crate was built for.
    pub platform: Option<Platform>,
}

/// Parses a descriptor in any dialect. `source` names the file in diagnostics. An
/// access-form file without `app.id` is an error here; see [`parse_with`].
pub fn parse(text: &str, source: &str) -> Parsed {
    parse_with(text, source, &Origin::default())
}

/// Parses a descriptor in any dialect, with what the caller knows of the file (`origin`)
/// for what its text leaves out.
pub fn parse_with(text: &str, source: &str, origin: &Origin<'_>) -> Parsed {
    let sink = Sink::new(source);
    let mut id_from_origin = false;
    let app = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(root) => {
            let app = parse_value(&root, &sink, origin);
            // Warnings only: the text is served as written.
            for found in lint::value(&root, "") {
                sink.warning(found.pointer.clone(), found.message());
            }
            id_from_origin = app.as_ref().is_some_and(|a| a.dialect == Dialect::Access)
                && root.pointer("/app/id").is_none();
            app
        }
        Err(e) => {
            sink.error(
                "",
                format!(
                    "invalid JSON at line {} column {}: {}",
                    e.line(),
                    e.column(),
                    strip_position(&e.to_string())
                ),
            );
            None
        }
    };
    let app = app.filter(|_| !sink.has_errors());
    Parsed {
        id_from_origin: id_from_origin && app.is_some(),
        app,
        diagnostics: sink.into_vec(),
    }
}

fn parse_value(root: &serde_json::Value, sink: &Sink, origin: &Origin<'_>) -> Option<App> {
    let dialect = match dialect::detect(root) {
        Ok(d) => d,
        Err(why) => {
            sink.error("", why.to_string());
            return None;
        }
    };
    let mut obj = read::Obj::new(sink, root, String::new())?;
    match dialect {
        Dialect::Platforms => dialect::platforms::parse(&mut obj),
        Dialect::SnakeCase => dialect::app::parse(&mut obj, dialect::app::Case::Snake),
        Dialect::CamelCase => dialect::app::parse(&mut obj, dialect::app::Case::Camel),
        Dialect::Access => dialect::access::parse(&mut obj, origin),
    }
}

/// serde_json appends " at line L column C"; the message states the position already.
fn strip_position(message: &str) -> &str {
    message
        .rfind(" at line ")
        .map_or(message, |i| &message[..i])
}
