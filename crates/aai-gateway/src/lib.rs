//! aai-gateway: lets AI agents call applications directly, through the applications'
//! native automation channels, described by `aai.json` descriptors.
//!
//! # Layout
//! * [`cli`] — the command line; `main.rs` only calls [`cli::main`].
//! * [`config`] — `config.json`.
//! * [`credentials`] — the credential store (OS keyring, or an opt-in 0600 file).
//! * `discover` — `--discover`: descriptors generated from D-Bus introspection (Unix).
//! * [`discovery`] — where descriptors are found, precedence, merging, shadowing.
//! * [`oauth`] — OAuth 2 sign-in (PKCE, loopback redirect) and token refresh.
//! * [`auth`] — stored credentials → what a web request carries; AUTH_REQUIRED guidance.
//! * [`builtin`] — descriptors compiled in (notifications, MPRIS players), active when present.
//! * [`registry`] — the served apps: usable binding, slugs, lookup; swapped on reload.
//! * [`pipeline`] — one call: lookup, defaults, validation, timeout, executor.
//! * [`exec`] — executors (one module each) and the one process spawner.
//! * [`mcp`] — the MCP server; the only module that knows rmcp.
//! * [`guide`], [`search`] — what agents read to find and use apps.
//! * [`web`] — web app descriptors: `web_discover`, the registry catalog, the cache.
//! * [`error`] — error codes and the seed's error shape.
//! * [`hash`] — the stable hash behind slug suffixes and `--discover` fingerprints.
//! * [`host`] — facts about this machine; which bindings can run here.
//! * [`logging`] — stderr and file logging (never stdout).
//!
//! The descriptor model and its parsers live in the `aai-descriptor` crate (no I/O).

pub mod auth;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod consent;
pub mod dialog;
pub mod error;
pub mod exec;
pub mod gateway;
pub mod hash;
pub mod history;
pub mod host;
pub mod lines;
pub mod logging;
pub mod mcp;
pub mod net;
pub mod pipeline;
pub mod registry;
pub mod state;
pub mod text;
