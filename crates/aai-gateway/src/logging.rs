//! Logging: stderr and, for the server, `$AAI_HOME/logs/aai-gateway.log` — never stdout,
//! which belongs to command output and to MCP in stdio mode. `AAI_LOG` (an `EnvFilter`
//! directive such as `debug` or `aai_gateway=trace`) overrides the config's `logLevel`.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Mutex;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, fmt};

/// Libraries whose debug output carries message payloads — MCP results, HTTP bodies and
/// headers, D-Bus messages (secrets travel in them): capped at `info` unless a directive
/// names them.
const PAYLOAD_LOGGERS: &[&str] = &[
    "rmcp",
    "reqwest",
    "hyper",
    "hyper_util",
    "h2",
    "rustls",
    "zbus",
    "secret_service",
];

/// The filter for `directives`, with the payload loggers capped.
fn filter(directives: &str) -> EnvFilter {
    let mut full = directives.to_owned();
    for name in PAYLOAD_LOGGERS {
        if !directives.contains(name) {
            full.push_str(&format!(",{name}=info"));
        }
    }
    EnvFilter::new(full)
}

/// Installs the global subscriber once; later calls do nothing. A log directory that
/// cannot be written is reported on stderr and skipped.
pub fn init(level: &str, dir: Option<&Path>) {
    let directives = std::env::var("AAI_LOG").unwrap_or_else(|_| level.to_owned());
    let filter = filter(&directives);
    let file = dir.and_then(|dir| {
        std::fs::create_dir_all(dir)
            .and_then(|()| {
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join("aai-gateway.log"))
            })
            .map_err(|e| eprintln!("aai-gateway: not logging to {}: {e}", dir.display()))
            .ok()
    });
    let stderr = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let file = file.map(|f| {
        fmt::layer()
            .with_writer(Mutex::new(f))
            .with_ansi(false)
            .with_target(false)
    });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(stderr)
        .with(file)
        .try_init();
}
