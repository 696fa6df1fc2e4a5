//! Logging: to stderr only — stdout belongs to command output (and to MCP in stdio mode).
//! `AAI_LOG` (an `EnvFilter` directive such as `debug` or `aai_gateway=trace`) overrides
//! the config's `logLevel`.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber once; later calls do nothing.
pub fn init(level: &str) {
    let filter = EnvFilter::try_from_env("AAI_LOG").unwrap_or_else(|_| EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
