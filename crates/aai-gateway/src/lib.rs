//! aai-gateway: lets AI agents call applications directly, through the applications'
//! native automation channels, described by `aai.json` descriptors.
//!
//! # Layout
//! * [`cli`] — the command line; `main.rs` only calls [`cli::main`].
//! * [`gateway`] — the running gateway: scans, the snapshot, the change broadcast, shutdown.
//! * [`catalog`] — where descriptors are found (files, built-ins, the web cache), precedence,
//!   merging, the watcher, `--discover`.
//! * [`registry`] — the served apps: usable binding, slugs, lookup, search, guides.
//! * [`pipeline`] — one call: lookup, defaults, validation, consent, credentials, executor,
//!   history.
//! * [`consent`], [`dialog`] — the consent gate and the native dialogs; [`state`] — grants.
//! * [`history`] — call history in `state.db`.
//! * [`auth`] — secrets, the credential store, OAuth 2, what a web request carries.
//! * [`exec`] — executors (one module each) and the one process spawner.
//! * [`net`] — the one place HTTP clients are built.
//! * [`mcp`] — the MCP server; the only module that knows rmcp.
//! * [`listen`] — the HTTP listener (`/mcp`, `/ui`) and its Host/Origin/token guard;
//!   [`ui`] — the web UI.
//! * [`config`], [`error`], [`host`], [`logging`], [`hash`], [`lines`], [`text`] — settings,
//!   the error model, this machine, logs, and small helpers.
//!
//! The descriptor model and its parsers live in the `aai-descriptor` crate (no I/O).

pub mod auth;
pub mod batch;
pub mod budget;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod consent;
pub mod dialog;
pub mod error;
pub mod exec;
pub mod files;
pub mod gateway;
pub mod hash;
pub mod history;
pub mod host;
pub mod lines;
pub mod listen;
pub mod llm;
pub mod logging;
pub mod mcp;
pub mod net;
pub mod peer;
pub mod pipeline;
pub mod registry;
pub mod site;
pub mod state;
pub mod text;
pub mod ui;
