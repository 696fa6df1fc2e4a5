//! Writing `aai.json` descriptors. Pure: every function takes text (or introspection data
//! a caller gathered) and returns descriptors plus notes; reading files, fetching URLs,
//! asking a language model and writing drafts are the command line's.
//!
//! * [`openapi`] — an OpenAPI 3.0/3.1 document (JSON or YAML) → a web descriptor.
//! * [`mcp_config`] — MCP client configurations (Claude, Cursor, VS Code, Codex, …) →
//!   `mcp` descriptors, with secrets turned into `${NAME}` placeholders.
//! * [`sdef`] — a macOS scripting definition → an AppleScript descriptor draft.
//! * [`dbus`] — D-Bus introspection of a session-bus service → a descriptor draft
//!   (`--discover` on Linux).
//! * [`typelib`] — a reader of COM type libraries (MSFT `.tlb`, or the `TYPELIB`
//!   resource of a PE file); [`com`] — their creatable coclasses → COM descriptor drafts
//!   (`import typelib`, `--discover` on Windows).
//! * [`generate`] — `--generate`: the model's instructions, the first and repair
//!   messages, reading and checking an answer.
//! * [`plan`] — what writing a draft would do to the file already there (new, update,
//!   unchanged, edited by the user), from the texts and the recorded fingerprint.

pub mod com;
pub mod dbus;
pub mod generate;
pub mod mcp_config;
pub mod openapi;
pub mod plan;
pub mod sdef;
mod text;
pub mod typelib;
