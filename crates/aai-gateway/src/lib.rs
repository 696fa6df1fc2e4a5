//! aai-gateway: lets AI agents call applications directly, through the applications'
//! native automation channels, described by `aai.json` descriptors.
//!
//! # Layout
//! * [`cli`] — the command line; `main.rs` only calls [`cli::main`]; [`clients`] — the MCP
//!   clients it registers with and how their configuration files are edited.
//! * [`gateway`] — the running gateway: scans, the snapshot, the change broadcast, the
//!   watcher, and [`gateway::Lifecycle`], the one start and teardown of every command.
//! * [`catalog`] — where descriptors are found (files, built-ins, the web cache), precedence,
//!   merging.
//! * [`registry`] — the served apps: usable binding, slugs, lookup, search, guides.
//! * [`pipeline`] — [`pipeline::Pipeline`], one call for every front door: lookup,
//!   defaults, validation, consent, credentials, executor, history; [`batch`] — many;
//!   [`ratelimit`] — the token buckets it asks first; [`metrics`] — what it counts.
//! * [`consent`] — the consent gate, the native dialogs, `state.db` (grants) and web
//!   apps' certificates; [`identity`] — who is calling (the client, the person).
//! * [`history`] — call history in `state.db`; [`store`] — the shared PostgreSQL store
//!   of a team's replicas.
//! * [`auth`] — secrets, the credential store, OAuth 2, what a web request carries.
//! * [`exec`] — executors (one module each) and the one process spawner.
//! * [`net`] — the one place HTTP clients are built.
//! * [`mcp`] — the MCP server; with `exec::mcp`'s client, the only place that knows rmcp.
//! * [`listen`] — the HTTP listener (`/mcp`, `/ui`) and its Host/Origin/token guard
//!   ([`access`]: what it shares with what it mounts); [`peer`] — who owns a loopback
//!   connection; [`ui`] — the web UI.
//! * [`manage`] — the agent's own app (`aai`): imports, hiding, the trash;
//!   [`visibility`] — what each client is shown.
//! * [`telemetry`] — OpenTelemetry traces.
//! * [`config`], [`error`], [`files`], [`host`], [`logging`], [`lines`], [`budget`],
//!   [`text`] — settings, the error model, the home's owner-only files, this machine,
//!   logs, what a request may cost before it is parsed, and small helpers.
//!
//! The descriptor model and its parsers live in the `aai-descriptor` crate, authoring
//! (drafts from other formats) in `aai-author`; neither does I/O.

pub mod access;
pub mod auth;
pub mod batch;
pub mod budget;
pub mod catalog;
pub mod cli;
pub mod clients;
pub mod config;
pub mod consent;
pub mod error;
pub mod exec;
pub mod files;
pub mod gateway;
pub mod history;
pub mod host;
pub mod identity;
pub mod lines;
pub mod listen;
pub mod logging;
pub mod manage;
pub mod mcp;
pub mod metrics;
pub mod net;
pub mod peer;
pub mod pipeline;
pub mod ratelimit;
pub mod registry;
pub mod store;
pub mod telemetry;
pub mod text;
pub mod ui;
pub mod visibility;
