//! A long-lived child the gateway talks to in JSON lines: a stdio adapter (`stdio.rs`, the
//! envelope) or an ACP agent (`acp.rs`, JSON-RPC 2.0 both ways). What both need is here:
//! one writer, the calls waiting for their answer by id, the reader that hands each line
//! to its protocol and says how the stream ended, the child's last stderr lines, and the
//! switch that stops it. The protocols stay in their modules.
//!
//! A line longer than the limit ends the conversation (the caller stops the child and
//! fails what waits): a lost line could be the answer a call is waiting for, so it must
//! not be skipped. The limit holds while the line arrives, so a child that never writes a
//! line end cannot grow the gateway's memory or hold a call until its timeout.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

use super::process::{ChildGuard, Spawned, StderrTail};

/// A running child and the calls waiting on it (`W`: what a waiting call is handed, by
/// id `Id`).
pub(crate) struct Child<Id, W> {
    label: String,
    stdin: tokio::sync::Mutex<ChildStdin>,
    waiting: Mutex<HashMap<Id, W>>,
    guard: Mutex<Option<ChildGuard>>,
    alive: AtomicBool,
    stderr: StderrTail,
}

impl<Id: Eq + Hash, W> Child<Id, W> {
    /// Takes over a started process (`label`: its app, for the log); its stdout is for
    /// [`read_lines`].
    pub(crate) fn new(label: &str, spawned: Spawned) -> (Self, ChildStdout) {
        let child = Child {
            label: label.to_owned(),
            stdin: tokio::sync::Mutex::new(spawned.stdin),
            waiting: Mutex::default(),
            guard: Mutex::new(Some(spawned.guard)),
            alive: AtomicBool::new(true),
            stderr: spawned.stderr_tail,
        };
        (child, spawned.stdout)
    }

    /// The app it serves.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Writes `message` as one line.
    pub(crate) async fn send(&self, message: &Value) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(message).expect("JSON values serialize");
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        stdin.write_all(&line).await?;
        stdin.flush().await
    }

    /// Registers a call waiting for the answer `id`; `false` (nothing registered) when the
    /// child is already stopped or being stopped, so the call goes to a new one. Checked
    /// under the same lock that [`Self::give_up_idle`] retires it under.
    pub(crate) fn wait(&self, id: Id, waiter: W) -> bool {
        let mut waiting = self.waiting();
        if !self.is_alive() {
            return false;
        }
        waiting.insert(id, waiter);
        true
    }

    /// The call waiting for `id`, taken out (`None`: nobody waits any more — it timed
    /// out or was cancelled).
    pub(crate) fn take<Q: Hash + Eq + ?Sized>(&self, id: &Q) -> Option<W>
    where
        Id: Borrow<Q>,
    {
        self.waiting().remove(id)
    }

    /// Applies `f` to the call waiting for `id`, if any, leaving it waiting.
    pub(crate) fn with<Q: Hash + Eq + ?Sized, T>(
        &self,
        id: &Q,
        f: impl FnOnce(&W) -> T,
    ) -> Option<T>
    where
        Id: Borrow<Q>,
    {
        self.waiting().get(id).map(f)
    }

    /// Gives up waiting for `id`; how many calls still wait.
    pub(crate) fn give_up<Q: Hash + Eq + ?Sized>(&self, id: &Q) -> usize
    where
        Id: Borrow<Q>,
    {
        let mut waiting = self.waiting();
        waiting.remove(id);
        waiting.len()
    }

    /// Stops waiting for `id`; when no other call waits, marks the child stopped in the same
    /// step (no new call can register with it any more) and returns `true`: the caller
    /// kills it.
    pub(crate) fn give_up_idle<Q: Hash + Eq + ?Sized>(&self, id: &Q) -> bool
    where
        Id: Borrow<Q>,
    {
        let mut waiting = self.waiting();
        waiting.remove(id);
        let idle = waiting.is_empty();
        if idle {
            self.alive.store(false, Ordering::SeqCst);
        }
        idle
    }

    /// How many calls wait.
    pub(crate) fn waiting_count(&self) -> usize {
        self.waiting().len()
    }

    /// Every waiting call, taken out.
    pub(crate) fn drain(&self) -> Vec<W> {
        self.waiting().drain().map(|(_, w)| w).collect()
    }

    /// Whether it still runs as far as the gateway knows (its stdout is open and nobody
    /// stopped it).
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Stops it and its process group now.
    pub(crate) fn kill(&self) {
        self.alive.store(false, Ordering::SeqCst);
        if let Some(mut guard) = self.guard.lock().expect("guard lock").take() {
            guard.kill();
        }
    }

    /// After its stdout ended: marks it gone and hands over its guard, unless it was
    /// already stopped (`None`).
    pub(crate) fn ended(&self) -> Option<ChildGuard> {
        self.alive.store(false, Ordering::SeqCst);
        self.guard.lock().expect("guard lock").take()
    }

    /// The note of its last stderr lines, for an error (empty when it wrote none).
    pub(crate) fn stderr_note(&self) -> String {
        self.stderr.note()
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<Id, W>> {
        self.waiting.lock().expect("waiting lock")
    }
}

/// How a child's stdout ended.
#[derive(Debug)]
pub(crate) enum Ended {
    /// It was closed.
    Closed,
    /// A line grew past the limit.
    TooLong,
    /// Reading failed.
    Failed(std::io::Error),
}

/// Reads `stdout` until it ends, handing each line that is not blank (without its line
/// end) to `on_line`; a line past `max` bytes ends the reading.
pub(crate) async fn read_lines(
    stdout: ChildStdout,
    max: usize,
    on_line: impl FnMut(&[u8]),
) -> Ended {
    lines(BufReader::new(stdout), max, on_line).await
}

async fn lines<R: AsyncBufRead + Unpin>(
    mut reader: R,
    max: usize,
    mut on_line: impl FnMut(&[u8]),
) -> Ended {
    let mut line = Vec::new();
    loop {
        line.clear();
        let closed = loop {
            let buf = match reader.fill_buf().await {
                Ok(buf) => buf,
                Err(e) => return Ended::Failed(e),
            };
            if buf.is_empty() {
                break true;
            }
            let (take, end) = match buf.iter().position(|&b| b == b'\n') {
                Some(at) => (at, true),
                None => (buf.len(), false),
            };
            if line.len() + take > max {
                return Ended::TooLong;
            }
            line.extend_from_slice(&buf[..take]);
            reader.consume(take + usize::from(end));
            if end {
                break false;
            }
        };
        if !line.trim_ascii().is_empty() {
            on_line(&line);
        }
        if closed {
            return Ended::Closed;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(input: &[u8], max: usize) -> (Vec<String>, Ended) {
        let mut seen = Vec::new();
        let ended = lines(input, max, |l| {
            seen.push(String::from_utf8_lossy(l).into_owned());
        })
        .await;
        (seen, ended)
    }

    #[tokio::test]
    async fn lines_are_handed_over_whole_and_blank_ones_skipped() {
        let (seen, ended) = read(b"{\"a\":1}\n\n  \r\n{\"b\":2}\r\nlast", 100).await;
        assert_eq!(seen, ["{\"a\":1}", "{\"b\":2}\r", "last"]);
        assert!(matches!(ended, Ended::Closed));
    }

    #[tokio::test]
    async fn a_line_past_the_limit_ends_the_reading_before_it_is_whole() {
        let (seen, ended) = read(b"ok\n0123456789", 5).await;
        assert_eq!(seen, ["ok"]);
        assert!(matches!(ended, Ended::TooLong));
        // Exactly the limit is fine.
        let (seen, ended) = read(b"01234\n", 5).await;
        assert_eq!(seen, ["01234"]);
        assert!(matches!(ended, Ended::Closed));
        // A stream that never ends its line is cut at the limit, not read to its end.
        let endless = vec![b'x'; 1 << 20];
        let (seen, ended) = read(&endless, 1000).await;
        assert!(seen.is_empty());
        assert!(matches!(ended, Ended::TooLong));
    }
}
