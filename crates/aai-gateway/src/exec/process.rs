//! The one place child processes are created.
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

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

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

/// What to start.
#[derive(Debug)]
pub struct Spec<'a> {
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
pub struct Spawned {
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
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    /// The kept lines, oldest first, joined by ` | `; empty when there are none.
    pub fn text(&self) -> String {
        let lines = self.0.lock().expect("stderr tail lock");
        lines.iter().cloned().collect::<Vec<_>>().join(" | ")
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
pub struct ChildGuard {
    child: Child,
    pid: Option<u32>,
    label: String,
}

impl ChildGuard {
    /// The child's process id (also its process group id on Unix).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Stops the child and everything in its process group, now.
    pub fn kill(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
            // The group may already be gone; that is fine.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.start_kill();
    }

    /// Waits for the child to exit; says how it ended and whether that was a clean exit.
    pub async fn wait(&mut self) -> (String, bool) {
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

/// Starts a child as described by `spec`.
pub fn spawn(spec: &Spec<'_>) -> Result<Spawned, GatewayError> {
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
    let mut child = cmd.spawn().map_err(|e| {
        GatewayError::new(
            Code::AppNotRunning,
            format!("cannot start `{}`: {e}", program.display()),
        )
    })?;
    let pid = child.id();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        unreachable!("all three pipes were requested");
    };
    let stderr_tail = StderrTail::default();
    let tail = stderr_tail.clone();
    let label = spec.label.to_owned();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::info!(app = %label, "adapter stderr: {line}");
            tail.push(line);
        }
    });
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

/// Starts a program the gateway does not own — a web browser for a sign-in — detached:
/// no pipes, no process group of ours, not killed when the gateway is done with it.
/// `command` is split on white space; `%s` in it is replaced by `arg`, else `arg` is
/// appended (the `$BROWSER` convention).
pub fn launch(command: &str, arg: &str) -> Result<(), GatewayError> {
    let mut words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
    if words.is_empty() {
        return Err(GatewayError::new(
            Code::AutomationFailed,
            "no command to start",
        ));
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
        .map_err(|e| {
            GatewayError::new(
                Code::AutomationFailed,
                format!("cannot start `{}`: {e}", program.display()),
            )
        })
}

/// A bare name is looked up on `PATH`; a relative path is relative to `base_dir`.
fn resolve(program: &str, base_dir: &Path) -> Result<PathBuf, GatewayError> {
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
            Err(GatewayError::new(
                Code::AppNotFound,
                format!("`{}` does not exist", full.display()),
            ))
        };
    }
    crate::host::on_path(program).ok_or_else(|| {
        GatewayError::new(
            Code::AppNotFound,
            format!("command `{program}` is not on PATH; is the app installed?"),
        )
    })
}
