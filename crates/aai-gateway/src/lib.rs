//! aai-gateway: lets AI agents call applications directly, through the applications'
//! native automation channels, described by `aai.json` descriptors.
//!
//! # Layout
//! * [`cli`] — the command line; `main.rs` only calls [`cli::main`].
//! * [`config`] — `config.json`.
//! * [`discovery`] — where descriptors are found, precedence, merging, shadowing.
//! * [`host`] — facts about this machine; which bindings can run here.
//! * [`logging`] — stderr logging (never stdout).
//!
//! The descriptor model and its parsers live in the `aai-descriptor` crate (no I/O).

pub mod cli;
pub mod config;
pub mod discovery;
pub mod host;
pub mod logging;
