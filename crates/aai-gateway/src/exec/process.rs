//! The one place child processes are created: long-lived adapters ([`spawn`]) and
//! one-shot commands ([`run`]: a deadline, stdin, captured and capped output).
//!
//! Every child gets an explicit environment (a short allow-list of the gateway's own
//! variables plus the descriptor's `env`, so the gateway's secrets never leak into
//! adapters), its own process group on Unix (so stopping it stops everything it started),
//! piped stdio, and a guard that kills the whole group when dropped. Its stderr goes to
//! the log, and the last lines are kept for error messages.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio_util::sync::CancellationToken;

use crate::error::{Code, GatewayError};

/// Variables a child inherits from the gateway; everything else is dropped.
const INHERITED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TEMP",
    "TMP",
    "XDG_RUNTIME_DIR",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_DATA_DIRS",
    "XDG_CONFIG_DIRS",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS",
    "SystemRoot",
    "SYSTEMDRIVE",
    "WINDIR",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
    "PROGRAMDATA",
    "COMSPEC",
    "PATHEXT",
];

/// How many stderr lines are kept for error messages.
const STDERR_TAIL: usize = 20;
/// Longest stderr line kept; the rest of a longer line is read and dropped.
const MAX_STDERR_LINE: usize = 4096;
/// At most this many stderr lines of one adapter reach the log per second; the rest are
/// counted and the count is logged.
const STDERR_LINES_PER_SEC: u32 = 50;

/// Reads a child's stderr to its end: each line cut to [`MAX_STDERR_LINE`] bytes (so a
/// gigabyte without a newline costs 4 KiB), kept in the tail, and logged at a bounded rate.
async fn drain_stderr(stderr: tokio::process::ChildStderr, label: String, tail: StderrTail) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::with_capacity(256);
    let mut window = std::time::Instant::now();
    let (mut logged, mut dropped) = (0u32, 0u64);
    loop {
        line.clear();
        match crate::lines::read_line_capped(&mut reader, &mut line, MAX_STDERR_LINE).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line).trim_end().to_owned();
        if window.elapsed() >= Duration::from_secs(1) {
            if dropped > 0 {
                tracing::info!(app = %label, "{dropped} more adapter stderr lines were not logged");
            }
            window = std::time::Instant::now();
            (logged, dropped) = (0, 0);
        }
        if logged < STDERR_LINES_PER_SEC {
            logged += 1;
            tracing::info!(app = %label, "adapter stderr: {text}");
        } else {
            if dropped == 0 {
                tracing::info!(
                    app = %label,
                    "adapter stderr: more than {STDERR_LINES_PER_SEC} lines a second; counting the rest"
                );
            }
            dropped += 1;
        }
        tail.push(text);
    }
    if dropped > 0 {
        tracing::info!(app = %label, "{dropped} more adapter stderr lines were not logged");
    }
}

/// What to start.
#[derive(Debug)]
pub(crate) struct Spec<'a> {
    /// Program: a name looked up on `PATH`, or a path (relative to `base_dir`).
    pub program: &'a str,
    /// Arguments.
    pub args: &'a [String],
    /// Extra environment.
    pub env: &'a [(String, String)],
    /// Directory relative programs are resolved against (the descriptor's folder).
    pub base_dir: &'a Path,
    /// Who this is, for logs (the app id).
    pub label: &'a str,
}

/// A started child with its pipes.
#[derive(Debug)]
pub(crate) struct Spawned {
    /// Kills the process group when dropped.
    pub guard: ChildGuard,
    /// The child's stdin.
    pub stdin: ChildStdin,
    /// The child's stdout.
    pub stdout: ChildStdout,
    /// The last lines the child wrote to stderr.
    pub stderr_tail: StderrTail,
}

/// The last lines of a child's stderr.
#[derive(Debug, Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    /// The kept lines, oldest first, joined by ` | `; empty when there are none.
    pub(crate) fn text(&self) -> String {
        let lines = self.0.lock().expect("stderr tail lock");
        lines.iter().cloned().collect::<Vec<_>>().join(" | ")
    }

    /// `; its last stderr lines: …` for an error message, or nothing when there are none.
    pub(crate) fn note(&self) -> String {
        let tail = self.text();
        if tail.is_empty() {
            String::new()
        } else {
            format!(
                "; its last stderr lines: {}",
                crate::text::excerpt(&tail, 600)
            )
        }
    }

    fn push(&self, line: String) {
        let mut lines = self.0.lock().expect("stderr tail lock");
        if lines.len() == STDERR_TAIL {
            lines.pop_front();
        }
        lines.push_back(line);
    }
}

/// Owns a child; stops its whole process group when dropped or killed.
#[derive(Debug)]
pub(crate) struct ChildGuard {
    child: Child,
    pid: Option<u32>,
    label: String,
}

impl ChildGuard {
    /// The child's process id (also its process group id on Unix).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Stops the child and everything in its process group, now.
    pub(crate) fn kill(&mut self) {
        self.kill_group();
        let _ = self.child.start_kill();
    }

    /// Stops everything in the child's process group (the child itself may be gone).
    fn kill_group(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
            // The group may already be gone; that is fine.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }

    /// Waits for the child to exit; says how it ended and whether that was a clean exit.
    pub(crate) async fn wait(&mut self) -> (String, bool) {
        match self.child.wait().await {
            Ok(status) => (status.to_string(), status.success()),
            Err(e) => (format!("unknown status ({e})"), false),
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        tracing::debug!(app = %self.label, pid = ?self.pid, "stopping child process group");
        self.kill();
    }
}

/// The command for `spec`: explicit environment, its folder, its own process group,
/// killed on drop.
#[allow(clippy::disallowed_methods)] // the one place processes are created
fn command(spec: &Spec<'_>) -> Result<(Command, PathBuf), StartError> {
    let program = resolve(spec.program, spec.base_dir)?;
    let mut cmd = Command::new(&program);
    cmd.args(spec.args)
        .env_clear()
        .envs(
            INHERITED
                .iter()
                .filter_map(|k| std::env::var_os(k).map(|v| (k, v))),
        )
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(spec.base_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    Ok((cmd, program))
}

fn start(spec: &Spec<'_>) -> Result<(Child, PathBuf), StartError> {
    let (mut cmd, program) = command(spec)?;
    let child = cmd.spawn().map_err(|e| StartError::Spawn {
        program: program.clone(),
        why: e.to_string(),
    })?;
    Ok((child, program))
}

/// Starts a long-lived child as described by `spec` (an adapter): its stdin and stdout
/// are the caller's, its stderr goes to the log.
pub(crate) fn spawn(spec: &Spec<'_>) -> Result<Spawned, StartError> {
    let (mut child, program) = start(spec)?;
    let pid = child.id();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        unreachable!("all three pipes were requested");
    };
    let stderr_tail = StderrTail::default();
    tokio::spawn(drain_stderr(
        stderr,
        spec.label.to_owned(),
        stderr_tail.clone(),
    ));
    tracing::debug!(app = %spec.label, ?pid, program = %program.display(), "started child");
    Ok(Spawned {
        guard: ChildGuard {
            child,
            pid,
            label: spec.label.to_owned(),
        },
        stdin,
        stdout,
        stderr_tail,
    })
}

/// Limits of a one-shot [`run`].
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Kill the child (and its group) after this long.
    pub deadline: Duration,
    /// Keep at most this many bytes of stdout and of stderr each; the rest is read and
    /// dropped, so the child never blocks on a full pipe.
    pub max_output: usize,
    /// Kill the child when this is cancelled.
    pub cancel: CancellationToken,
}

/// What a one-shot child produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Output {
    /// The exit code (`None` when a signal ended it).
    pub code: Option<i32>,
    /// Its stdout, at most `max_output` bytes.
    pub stdout: Vec<u8>,
    /// Its stderr, at most `max_output` bytes.
    pub stderr: Vec<u8>,
    /// Whether either stream was cut.
    pub truncated: bool,
}

impl Output {
    /// Whether it exited with status 0.
    pub(crate) fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Why a program could not be started.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StartError {
    /// A path that does not exist.
    #[error("`{}` does not exist", .0.display())]
    Missing(PathBuf),
    /// A bare name not found on `PATH`.
    #[error("command `{0}` is not on PATH; is the app installed?")]
    NotOnPath(String),
    /// The OS refused to start it.
    #[error("cannot start `{}`: {why}", program.display())]
    Spawn {
        /// The program, resolved.
        program: PathBuf,
        /// The OS's words.
        why: String,
    },
    /// An empty command line.
    #[error("no command to start")]
    NoCommand,
}

impl From<StartError> for GatewayError {
    fn from(e: StartError) -> GatewayError {
        let code = match e {
            StartError::Missing(_) | StartError::NotOnPath(_) => Code::AppNotFound,
            StartError::Spawn { .. } => Code::AppNotRunning,
            StartError::NoCommand => Code::AutomationFailed,
        };
        GatewayError::new(code, e.to_string())
    }
}

/// Why a one-shot child gave no output.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// It could not be started.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The deadline passed; the child and its group were killed.
    #[error("no result within {:.1} s; the process was stopped", .0.as_secs_f64())]
    TimedOut(Duration),
    /// The call was cancelled; the child and its group were killed.
    #[error("the call was cancelled")]
    Cancelled,
    /// Talking to the child failed.
    #[error("the process's pipes failed: {0}")]
    Io(String),
}

impl From<RunError> for GatewayError {
    fn from(e: RunError) -> GatewayError {
        let code = match e {
            RunError::Start(start) => return start.into(),
            RunError::TimedOut(_) => Code::Timeout,
            RunError::Cancelled | RunError::Io(_) => Code::AutomationFailed,
        };
        GatewayError::new(code, e.to_string())
    }
}

/// Runs a child to completion (a script interpreter, `adb`, `xcrun`): writes `stdin` and
/// closes it, collects capped stdout and stderr, and kills the whole process group at the
/// deadline, on cancellation, or when the returned future is dropped.
pub(crate) async fn run(
    spec: &Spec<'_>,
    stdin: &[u8],
    limits: &Limits,
) -> Result<Output, RunError> {
    let (mut child, program) = start(spec)?;
    let pid = child.id();
    tracing::debug!(app = %spec.label, ?pid, program = %program.display(), "started one-shot child");
    let (Some(mut input), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        unreachable!("all three pipes were requested");
    };
    let mut guard = ChildGuard {
        child,
        pid,
        label: spec.label.to_owned(),
    };
    let max = limits.max_output;
    let work = async {
        let write = async {
            // A child that exits without reading its stdin is not an error.
            let _ = input.write_all(stdin).await;
            drop(input);
        };
        let ((), out, err) = tokio::join!(write, capped(stdout, max), capped(stderr, max));
        let status = guard
            .child
            .wait()
            .await
            .map_err(|e| RunError::Io(e.to_string()))?;
        let (stdout, cut_out) = out.map_err(|e| RunError::Io(e.to_string()))?;
        let (stderr, cut_err) = err.map_err(|e| RunError::Io(e.to_string()))?;
        Ok(Output {
            code: status.code(),
            stdout,
            stderr,
            truncated: cut_out || cut_err,
        })
    };
    let result = tokio::select! {
        r = work => r,
        () = tokio::time::sleep(limits.deadline) => Err(RunError::TimedOut(limits.deadline)),
        () = limits.cancel.cancelled() => Err(RunError::Cancelled),
    };
    if result.is_err() {
        guard.kill();
    } else {
        // The leader exited; stop anything it left running in its group.
        guard.kill_group();
    }
    result
}

/// Reads `stream` to its end, keeping at most `max` bytes; says whether it cut.
async fn capped(
    mut stream: impl tokio::io::AsyncRead + Unpin,
    max: usize,
) -> std::io::Result<(Vec<u8>, bool)> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut cut = false;
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok((kept, cut));
        }
        let room = max.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
        cut |= n > room;
    }
}

/// Makes this process the reaper of its orphaned descendants (Linux; a no-op elsewhere):
/// an adapter's grandchild that left the adapter's process group (`setsid`) is reparented
/// here when the adapter dies, instead of to init, so [`reap_all`] can stop it. For the
/// server process only — never for a process that hosts other work (a test harness).
pub(crate) fn become_subreaper() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::debug!("cannot become a child subreaper: {e}");
    }
}

/// At exit: kills every process that is still a child of this one (adapters' leftovers,
/// escaped grandchildren reparented here) and waits for them, at most `deadline`, so none
/// outlives the gateway or stays a zombie. For the server and CLI processes only.
pub(crate) fn reap_all(deadline: std::time::Duration) {
    #[cfg(target_os = "linux")]
    {
        use nix::sys::signal::{Signal, kill};
        use nix::sys::wait::{WaitPidFlag, waitpid};
        use nix::unistd::Pid;
        let me = i32::try_from(std::process::id()).unwrap_or(0);
        let children = || -> Vec<Pid> {
            std::fs::read_dir("/proc")
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| parent_of(*pid) == Some(me))
                .map(Pid::from_raw)
                .collect()
        };
        // Killing a child can hand us its orphans (we are their subreaper) a moment
        // later, so look again until nothing is left.
        let started = std::time::Instant::now();
        loop {
            let left = children();
            if left.is_empty() {
                break;
            }
            if started.elapsed() >= deadline {
                tracing::warn!("{} child processes did not exit in time", left.len());
                break;
            }
            for pid in &left {
                let _ = kill(*pid, Signal::SIGKILL);
                // Reap it if it is already gone; a zombie is not alive.
                let _ = waitpid(*pid, Some(WaitPidFlag::WNOHANG));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = deadline;
}

/// The parent pid of `pid`, from `/proc/<pid>/stat` (Linux).
#[cfg(target_os = "linux")]
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Starts a program the gateway does not own — a web browser for a sign-in — detached:
/// no pipes, no process group of ours, not killed when the gateway is done with it.
/// `command` is split on white space; `%s` in it is replaced by `arg`, else `arg` is
/// appended (the `$BROWSER` convention).
#[allow(clippy::disallowed_methods)] // the one place processes are created
pub(crate) fn launch(command: &str, arg: &str) -> Result<(), StartError> {
    let mut words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
    if words.is_empty() {
        return Err(StartError::NoCommand);
    }
    if words.iter().any(|w| w.contains("%s")) {
        for w in &mut words {
            *w = w.replace("%s", arg);
        }
    } else {
        words.push(arg.to_owned());
    }
    let program = resolve(&words[0], Path::new("."))?;
    std::process::Command::new(&program)
        .args(&words[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| StartError::Spawn {
            program,
            why: e.to_string(),
        })
}

/// A bare name is looked up on `PATH`; a relative path is relative to `base_dir`.
fn resolve(program: &str, base_dir: &Path) -> Result<PathBuf, StartError> {
    let path = Path::new(program);
    if path.components().count() > 1 || path.is_absolute() {
        let full = if path.is_absolute() {
            path.to_owned()
        } else {
            base_dir.join(path)
        };
        return if full.exists() {
            Ok(full)
        } else {
            Err(StartError::Missing(full))
        };
    }
    crate::host::on_path(program).ok_or_else(|| StartError::NotOnPath(program.to_owned()))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn spec<'a>(program: &'a str, args: &'a [String]) -> Spec<'a> {
        Spec {
            program,
            args,
            env: &[],
            base_dir: Path::new("/"),
            label: "test",
        }
    }

    fn limits(deadline_ms: u64, max_output: usize) -> Limits {
        Limits {
            deadline: Duration::from_millis(deadline_ms),
            max_output,
            cancel: CancellationToken::new(),
        }
    }

    #[tokio::test]
    async fn run_feeds_stdin_and_captures_capped_output() {
        let args = ["-c".to_owned(), "cat; echo err >&2; exit 3".to_owned()];
        let out = run(&spec("sh", &args), b"hello", &limits(10_000, 1 << 20))
            .await
            .unwrap();
        assert_eq!(
            (out.code, out.stdout.as_slice(), out.stderr.as_slice()),
            (Some(3), &b"hello"[..], &b"err\n"[..])
        );
        assert!(!out.truncated && !out.success());
        let args = ["-c".to_owned(), "head -c 100000 /dev/zero".to_owned()];
        let out = run(&spec("sh", &args), b"", &limits(10_000, 10))
            .await
            .unwrap();
        assert_eq!(out.stdout.len(), 10);
        assert!(out.truncated && out.success());
    }

    #[tokio::test]
    async fn run_kills_the_group_at_the_deadline_and_on_cancel() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let args = ["-c".to_owned(), script];
        let started = std::time::Instant::now();
        // 2 s: time for a cold `sh` on a loaded machine to write the pid file first.
        let e = run(&spec("sh", &args), b"", &limits(2_000, 100))
            .await
            .unwrap_err();
        assert!(matches!(e, RunError::TimedOut(_)), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let grandchild: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild was in the group: it is gone (or a zombie of init) shortly after.
        let mut gone = false;
        for _ in 0..50 {
            let state =
                std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
            if state.is_empty() || state.split_whitespace().nth(2) == Some("Z") {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(gone, "the grandchild survived the deadline");
        let l = limits(10_000, 100);
        let cancel = l.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cancel.cancel();
        });
        let args = ["30".to_owned()];
        let e = run(&spec("sleep", &args), b"", &l).await.unwrap_err();
        assert!(matches!(e, RunError::Cancelled), "{e}");
    }

    #[tokio::test]
    async fn a_missing_program_is_a_start_error() {
        let e = run(&spec("no-such-program-aai", &[]), b"", &limits(1000, 10))
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                RunError::Start(StartError::NotOnPath(_) | StartError::Missing(_))
            ),
            "{e}"
        );
    }
}
