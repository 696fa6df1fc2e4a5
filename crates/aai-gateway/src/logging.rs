//! Logging: stderr and, for the server, `$AAI_HOME/logs/aai-gateway.log` — never stdout,
//! which belongs to command output and to MCP in stdio mode.
//!
//! * The log file (server only) records the config's `logLevel` (default `info`). It is
//!   rotated by size: at 10 MiB it becomes `aai-gateway.log.1` (older ones shift up) and at
//!   most 5 old files are kept, so a long-running gateway never fills the disk.
//! * stderr shows warnings and errors only. CLI commands other than the server also leave
//!   out the problems of descriptors they did not ask about (`--scan` and `validate` report
//!   those as their output). The server's stderr never blocks it: a line stderr cannot
//!   take at once (a client piped it and does not read) is left out ([`stderr`]).
//! * `AAI_LOG` (an `EnvFilter` directive such as `debug` or `aai_gateway=trace`) overrides
//!   both.
//!
//! Libraries whose debug output carries message payloads (MCP results, HTTP bodies and
//! headers, D-Bus messages, PostgreSQL statements and parameters) are capped unless a directive names them; rmcp is capped at
//! `warn` (its `info` lines dump whole protocol structs), and its per-error
//! "response error" warning (which would make every bad argument of a client a gateway
//! warning, payload included) is dropped: the gateway logs each failed call itself. rmcp's
//! client transports are silent (their errors quote downstream URLs, keys included).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing_subscriber::filter::{DynFilterFn, FilterExt};
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, fmt};

#[cfg(unix)]
mod stderr;

/// The target of descriptor diagnostics logged by a scan.
pub(crate) const DESCRIPTORS: &str = "aai_gateway::descriptors";

/// Rotate the log file at this size.
pub(crate) const MAX_LOG_BYTES: u64 = 10 * 1024 * 1024;
/// Keep this many rotated files.
pub(crate) const KEPT_LOGS: usize = 5;

/// Libraries capped at `info` unless named: their debug output carries payloads.
const PAYLOAD_LOGGERS: &[&str] = &[
    "reqwest",
    "hyper",
    "hyper_util",
    "h2",
    "rustls",
    "zbus",
    "secret_service",
    // Statements with their parameters (history rows, sealed credentials, pending calls).
    "tokio_postgres",
    "deadpool_postgres",
    "postgres_protocol",
];

/// Who is logging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The MCP server: a log file plus warnings on stderr.
    Server,
    /// A CLI command: warnings about what it was asked to do, on stderr.
    Command,
}

/// How much of rmcp's own logging the log keeps, unless `AAI_LOG` names
/// rmcp: warnings (its `info` lines dump whole protocol structs), and nothing of its
/// client transports, whose errors quote reqwest errors and so the full URL of a
/// downstream server, a key in its query included (`downstream.rs` reports each failure
/// itself, without it).
const RMCP_DIRECTIVES: &str =
    "rmcp=warn,rmcp::transport::worker=off,rmcp::transport::streamable_http_client=off";

/// The filter for `directives`, with the payload loggers capped.
fn filter(directives: &str) -> EnvFilter {
    let mut full = directives.to_owned();
    for name in PAYLOAD_LOGGERS {
        if !directives.contains(name) {
            full.push_str(&format!(",{name}=info"));
        }
    }
    if !directives.contains("rmcp") {
        full.push(',');
        full.push_str(RMCP_DIRECTIVES);
    }
    EnvFilter::new(full)
}

/// rmcp's per-error "response error" warning: fields exactly `id`, `error`, `message`.
fn is_rmcp_error_echo(meta: &tracing::Metadata<'_>) -> bool {
    if !meta.target().starts_with("rmcp") || *meta.level() != tracing::Level::WARN {
        return false;
    }
    let mut names: Vec<&str> = meta.fields().iter().map(|f| f.name()).collect();
    names.sort_unstable();
    names == ["error", "id", "message"]
}

/// Drops rmcp's error echo. Decided once per callsite (the metadata is all it needs), so
/// it costs nothing per event. Its level hint (anything) lets the combined filter keep
/// the directives' hint: without one, tracing would consider every `trace!` callsite of
/// every crate live and check it at run time (measured: +10 µs per call).
fn no_error_echo<S>() -> impl tracing_subscriber::layer::Filter<S> {
    DynFilterFn::new(|meta, _| !is_rmcp_error_echo(meta))
        .with_callsite_filter(|meta| {
            if is_rmcp_error_echo(meta) {
                tracing::subscriber::Interest::never()
            } else {
                tracing::subscriber::Interest::always()
            }
        })
        .with_max_level_hint(tracing_subscriber::filter::LevelFilter::TRACE)
}

/// Installs the global subscriber once; later calls do nothing. `level` is the config's
/// `logLevel`; `dir` the log directory (server only). A log directory that cannot be
/// written is reported on stderr and skipped.
pub(crate) fn init(mode: Mode, level: &str, dir: Option<&Path>) {
    let explicit = std::env::var("AAI_LOG").ok().filter(|v| !v.is_empty());
    let stderr_directives = match (&explicit, mode) {
        (Some(d), _) => d.clone(),
        (None, Mode::Server) => "warn".to_owned(),
        (None, Mode::Command) => format!("warn,{DESCRIPTORS}=off"),
    };
    let file_directives = explicit.unwrap_or_else(|| level.to_owned());
    let file = dir.and_then(|dir| {
        RotatingFile::open(dir.join("aai-gateway.log"), MAX_LOG_BYTES, KEPT_LOGS)
            .map_err(|e| eprintln!("aai-gateway: not logging to {}: {e}", dir.display()))
            .ok()
    });
    let stderr = fmt::layer()
        .with_writer(stderr_writer(mode))
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .with_filter(filter(&stderr_directives).and(no_error_echo()));
    let file = file.map(|f| {
        fmt::layer()
            .with_writer(Mutex::new(f))
            .with_ansi(false)
            .with_target(false)
            .with_filter(filter(&file_directives).and(no_error_echo()))
    });
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(file)
        .try_init();
}

/// The server's stderr leaves out what it cannot take at once ([`stderr`]). A command's
/// blocks as it always did: its reader may be slow (a pager), and there is no log file
/// to fall back on.
#[cfg(unix)]
fn stderr_writer(mode: Mode) -> BoxMakeWriter {
    match mode {
        Mode::Server => BoxMakeWriter::new(stderr::UnlessFull::new(std::io::stderr())),
        Mode::Command => BoxMakeWriter::new(std::io::stderr),
    }
}

/// Windows: stderr as it is (an anonymous pipe there cannot be polled).
#[cfg(not(unix))]
fn stderr_writer(_: Mode) -> BoxMakeWriter {
    BoxMakeWriter::new(std::io::stderr)
}

/// An append-only log file that rotates itself by size.
#[derive(Debug)]
pub(crate) struct RotatingFile {
    path: PathBuf,
    file: File,
    size: u64,
    max: u64,
    keep: usize,
}

/// Options that create a log file readable by the owner only: logs name apps, tools and
/// callers.
fn owner_only() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

impl RotatingFile {
    /// Opens (appends to) `path`, rotating at `max` bytes and keeping `keep` old files.
    pub(crate) fn open(path: PathBuf, max: u64, keep: usize) -> std::io::Result<RotatingFile> {
        if let Some(dir) = path.parent() {
            crate::files::private_dir(dir)?;
        }
        let file = owner_only().create(true).append(true).open(&path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path,
            file,
            size,
            max,
            keep,
        })
    }

    fn rotated(&self, n: usize) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file.flush()?;
        if self.keep == 0 {
            self.file = owner_only()
                .create(true)
                .write(true)
                .truncate(true)
                .open(&self.path)?;
        } else {
            let _ = std::fs::remove_file(self.rotated(self.keep));
            for n in (1..self.keep).rev() {
                let _ = std::fs::rename(self.rotated(n), self.rotated(n + 1));
            }
            std::fs::rename(&self.path, self.rotated(1))?;
            self.file = owner_only().create(true).append(true).open(&self.path)?;
        }
        self.size = 0;
        Ok(())
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.size > 0 && self.size + buf.len() as u64 > self.max {
            self.rotate()?;
        }
        let n = self.file.write(buf)?;
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rotates_by_size_and_keeps_a_bounded_number_of_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs").join("g.log");
        let mut f = RotatingFile::open(path.clone(), 100, 2).unwrap();
        for i in 0..20 {
            f.write_all(format!("line {i:02} {}\n", "x".repeat(30)).as_bytes())
                .unwrap();
        }
        drop(f);
        let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["g.log", "g.log.1", "g.log.2"]);
        for name in &names {
            let len = std::fs::metadata(dir.path().join("logs").join(name))
                .unwrap()
                .len();
            assert!(len <= 100, "{name} is {len} bytes");
        }
        let newest = std::fs::read_to_string(&path).unwrap();
        assert!(newest.contains("line 19"), "{newest}");
        let reopened = RotatingFile::open(path, 100, 2).unwrap();
        assert_eq!(
            reopened.size,
            newest.len() as u64,
            "appends after a restart"
        );
    }
}
