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

pub(crate) mod access;
pub(crate) mod allocator;
pub(crate) mod auth;
pub(crate) mod batch;
pub(crate) mod budget;
pub(crate) mod catalog;
pub(crate) mod cli;
pub(crate) mod clients;
pub(crate) mod config;
pub(crate) mod consent;
pub(crate) mod error;
pub(crate) mod events;
pub(crate) mod exec;
pub(crate) mod files;
pub(crate) mod gateway;
pub(crate) mod history;
pub(crate) mod host;
pub(crate) mod identity;
pub(crate) mod lines;
pub(crate) mod listen;
pub(crate) mod logging;
pub(crate) mod manage;
pub(crate) mod mcp;
pub(crate) mod metrics;
pub(crate) mod net;
pub(crate) mod overrides;
pub(crate) mod peer;
pub(crate) mod pipeline;
pub(crate) mod ratelimit;
pub(crate) mod registry;
pub(crate) mod rollback;
pub(crate) mod store;
pub(crate) mod telemetry;
pub(crate) mod text;
pub(crate) mod ui;
pub(crate) mod usage;
pub(crate) mod visibility;
pub(crate) mod workflow;

pub use cli::main;

/// What the crate's own integration tests and benchmarks drive, under the paths of the
/// modules that define it. Not an API: nothing outside this repository should use it.
#[doc(hidden)]
pub mod testing {
    pub mod access {
        pub use crate::access::{Remote, resource};
    }
    pub mod auth {
        pub use crate::auth::{Authenticator, Secret, store};
    }
    pub mod batch {
        pub use crate::batch::{Batch, Call, Mode, Status};
    }
    pub mod catalog {
        pub use crate::catalog::{Layout, SearchDir, SourceKind, load, scan};
    }
    pub mod config {
        pub use crate::config::{Config, ConsentMode, Exposure, Limit, RateLimits, WebAuth};
    }
    pub mod consent {
        pub use crate::consent::{Choice, Fixed, Gate, Question, Reply, state};
    }
    pub mod error {
        pub use crate::error::{Code, GatewayError};
    }
    pub mod exec {
        pub use crate::exec::{Executors, start};
    }
    pub mod gateway {
        pub use crate::gateway::{Gateway, Handle, Lifecycle, Running};
    }
    pub mod history {
        pub use crate::history::{
            Filter, Postgres, Record, Retention, Sink, Sqlite, count, excerpt, mask, now_ms,
            rows_shared, usage::Future as UsageFuture,
        };
    }
    pub mod host {
        pub use crate::host::{Host, Os};
    }
    pub mod identity {
        pub use crate::identity::{Caller, Who};
    }
    pub mod mcp {
        pub use crate::mcp::{Server, http, stdio};
    }
    pub mod metrics {
        pub use crate::metrics::{Call, Metrics};
    }
    pub mod net {
        pub use crate::net::install_crypto;
    }
    pub mod pipeline {
        pub use crate::pipeline::{
            Apps, AppsFuture, Origin, Parts, Pipeline, Settings, Within, base_dir,
        };
    }
    pub mod ratelimit {
        pub use crate::ratelimit::Limiter;
    }
    pub mod registry {
        pub use crate::registry::{Snapshot, guide, search};
    }
    pub mod store {
        pub use crate::store::{Error, Shared, migrate::latest};
    }
    pub mod ui {
        pub use crate::ui::Ui;
    }
}
