//! The `stdio` executor (docs/mcp.md, The stdio adapter protocol): a local adapter
//! process speaking newline-delimited JSON envelopes.
//!
//! One envelope per line (see `envelope`); `progress` envelopes are forwarded as MCP
//! progress.
//!
//! One adapter process per app serves many requests at once, matched by `request_id`.
//! It is started on first use and again after it exits (an adapter may serve one request
//! and exit). A request is retried once on a fresh adapter when it cannot have reached the
//! app: it could not be written, or the adapter exited with status 0 without answering it
//! (an adapter that exits cleanly has answered everything it read — the one-shot case,
//! where a request can land in the pipe of an adapter that is already on its way out). A timed-out call kills its
//! adapter (its state is unknown; the next call starts a new one); a cancelled call kills
//! it only when no other call is waiting on it. A line that is not an envelope fails the
//! calls waiting on that adapter with an excerpt of the line.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use aai_descriptor::Executor;
use serde_json::Value;
use tokio::process::ChildStdout;
use tokio::sync::oneshot;

use super::child::{self, Child, Ended};
use super::envelope::{self, excerpt};
use super::process;
use super::{Execute, ProgressSink, Request};
use crate::error::{Code, GatewayError};

/// Longest accepted reply line.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// How a call to a stdio adapter failed. `From<Error> for GatewayError` below gives the
/// wire codes. Clone: one adapter's end fails every call waiting on it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The adapter did not start.
    #[error(transparent)]
    Start(#[from] process::StartError),
    /// The request could not be written, twice (`stderr`: the adapter's last words).
    #[error("cannot send the request to the adapter: {why}{stderr}")]
    Send {
        /// The pipe's error.
        why: String,
        /// The note of its last stderr lines.
        stderr: String,
    },
    /// Two adapters in a row exited cleanly without reading the request.
    #[error("the adapter exited without replying, twice{0}")]
    ExitedTwice(String),
    /// The adapter's reader ended without a word for this call.
    #[error("the adapter stopped before replying")]
    Stopped,
    /// No reply within the call's time; the adapter was stopped.
    #[error("no reply from the adapter within {:.1} s; the adapter was stopped and will be restarted on the next call", .0.as_secs_f64())]
    TimedOut(std::time::Duration),
    /// The client cancelled the call.
    #[error("the call was cancelled")]
    Cancelled,
    /// A reply line over the limit; the adapter was stopped.
    #[error("the adapter wrote a line longer than {MAX_LINE} bytes; it was stopped")]
    LineTooLong,
    /// The adapter exited with calls waiting.
    #[error("the adapter exited ({status}) before replying{stderr}")]
    Exited {
        /// How it ended.
        status: String,
        /// The note of its last stderr lines.
        stderr: String,
    },
    /// A line that is not an envelope.
    #[error("the adapter wrote a line that is {0}")]
    Malformed(#[from] envelope::Malformed),
    /// The adapter's reply envelope is an error.
    #[error(transparent)]
    Reply(#[from] envelope::Failure),
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match e {
            Error::Start(start) => return start.into(),
            Error::Reply(failure) => return failure.into(),
            Error::TimedOut(_) => Code::Timeout,
            Error::Send { .. }
            | Error::ExitedTwice(_)
            | Error::Stopped
            | Error::Cancelled
            | Error::LineTooLong
            | Error::Exited { .. }
            | Error::Malformed(_) => Code::AutomationFailed,
        };
        GatewayError::new(code, e.to_string())
    }
}

/// What a waiting call gets.
enum Reply {
    Done(Result<Value, Error>),
    /// The adapter exited cleanly without reading the request: safe to send again.
    NotDelivered,
}

struct Pending {
    reply: oneshot::Sender<Reply>,
    progress: Option<ProgressSink>,
}

/// What an adapter was started as; a binding that no longer matches gets a new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Started {
    /// Program, arguments, environment.
    pub(crate) process: aai_descriptor::Process,
    /// The descriptor's folder.
    pub(crate) base_dir: std::path::PathBuf,
}

/// One running adapter: the child, and what the pool needs to know of it.
struct Adapter {
    child: Child<String, Pending>,
    started: Started,
    /// Replaced or removed by a reload: stopped once its last call is answered.
    retiring: AtomicBool,
}

impl Adapter {
    fn app(&self) -> &str {
        self.child.label()
    }

    fn kill(&self) {
        self.child.kill();
    }

    /// Fails every waiting call with `error`.
    fn fail_all(&self, error: &Error) {
        for p in self.child.drain() {
            let _ = p.reply.send(Reply::Done(Err(error.clone())));
        }
    }

    fn stderr_note(&self) -> String {
        self.child.stderr_note()
    }
}

/// Runs stdio adapters.
#[derive(Default)]
pub(crate) struct StdioExecutor {
    adapters: Mutex<HashMap<String, Arc<Adapter>>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for StdioExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.adapters.lock().map(|a| a.len()).unwrap_or(0);
        f.debug_struct("StdioExecutor")
            .field("adapters", &n)
            .finish()
    }
}

impl Execute for StdioExecutor {
    async fn execute(&self, req: Request<'_>) -> Result<Value, super::Error> {
        Ok(self.call(req).await?)
    }
}

impl StdioExecutor {
    async fn call(&self, req: Request<'_>) -> Result<Value, Error> {
        let Executor::Stdio(process) = req.executor else {
            unreachable!("dispatched by executor type");
        };
        let id = format!("{}", self.next_id.fetch_add(1, Ordering::Relaxed) + 1);
        let envelope = envelope::request(&req.tool.name, &req.args, &id);

        let mut attempt = 0;
        let mut retired = 0;
        loop {
            attempt += 1;
            let adapter = self.adapter(req.app, process, req.base_dir, &req.secrets)?;
            let (tx, rx) = oneshot::channel();
            let waiting = adapter.child.wait(
                id.clone(),
                Pending {
                    reply: tx,
                    progress: req.ctx.progress.clone(),
                },
            );
            // The adapter was being stopped (its last call was cancelled) between handing
            // it out and now: nothing was sent, so a new one takes the request.
            if !waiting {
                self.forget(&adapter);
                retired += 1;
                if retired == 3 {
                    return Err(Error::Send {
                        why: "the adapter was stopped each time the request was about to be sent"
                            .to_owned(),
                        stderr: adapter.stderr_note(),
                    });
                }
                attempt -= 1;
                continue;
            }
            if let Err(e) = adapter.child.send(&envelope).await {
                adapter.child.give_up(&id);
                adapter.kill();
                self.forget(&adapter);
                if attempt == 2 {
                    return Err(Error::Send {
                        why: e.to_string(),
                        stderr: adapter.stderr_note(),
                    });
                }
                tracing::info!(app = %req.app, "the adapter was gone before the request was written; starting a new one");
                continue;
            }
            match self.wait_reply(&req, &adapter, &id, rx).await {
                Reply::Done(result) => return result,
                Reply::NotDelivered if attempt < 2 => {
                    tracing::info!(app = %req.app, "the adapter exited cleanly without reading the request; sending it to a new one");
                }
                Reply::NotDelivered => {
                    return Err(Error::ExitedTwice(adapter.stderr_note()));
                }
            }
        }
    }

    /// Waits for the reply to request `id`, the deadline, or cancellation.
    async fn wait_reply(
        &self,
        req: &Request<'_>,
        adapter: &Arc<Adapter>,
        id: &str,
        rx: oneshot::Receiver<Reply>,
    ) -> Reply {
        tokio::select! {
            reply = rx => reply.unwrap_or(Reply::Done(Err(Error::Stopped))),
            () = tokio::time::sleep(req.ctx.timeout) => {
                adapter.child.give_up(id);
                tracing::warn!(app = %req.app, tool = %req.tool.name, "call timed out; stopping the adapter");
                adapter.kill();
                self.forget(adapter);
                Reply::Done(Err(Error::TimedOut(req.ctx.timeout)))
            }
            () = req.ctx.cancel.cancelled() => {
                if adapter.child.give_up_idle(id) {
                    tracing::info!(app = %req.app, "call cancelled; stopping the idle adapter");
                    adapter.kill();
                    self.forget(adapter);
                }
                Reply::Done(Err(Error::Cancelled))
            }
        }
    }

    /// The running adapter of `app`, started if needed.
    fn adapter(
        &self,
        app: &str,
        process: &aai_descriptor::Process,
        base_dir: &std::path::Path,
        secrets: &[(String, crate::auth::Secret)],
    ) -> Result<Arc<Adapter>, Error> {
        let started = Started {
            process: process.clone(),
            base_dir: base_dir.to_owned(),
        };
        let mut adapters = self.adapters.lock().expect("adapters lock");
        if let Some(a) = adapters.get(app).filter(|a| a.child.is_alive()) {
            if a.started == started {
                return Ok(a.clone());
            }
            // The descriptor changed under a running adapter: new calls get a new one.
            tracing::info!(app, "the adapter's command changed; starting a new one");
            retire(a);
        }
        let spawned = process::spawn(&process::Spec {
            program: &process.command,
            args: &process.args,
            env: &crate::auth::fill::fill_all(&process.env, secrets),
            base_dir,
            label: app,
        })?;
        let (child, stdout) = Child::new(app, spawned);
        let adapter = Arc::new(Adapter {
            child,
            started,
            retiring: AtomicBool::new(false),
        });
        tokio::spawn(read_replies(adapter.clone(), stdout));
        adapters.insert(app.to_owned(), adapter.clone());
        Ok(adapter)
    }

    /// Drops `adapter` from the pool if it is still the pooled one.
    fn forget(&self, adapter: &Arc<Adapter>) {
        let mut adapters = self.adapters.lock().expect("adapters lock");
        if adapters
            .get(adapter.app())
            .is_some_and(|a| Arc::ptr_eq(a, adapter))
        {
            adapters.remove(adapter.app());
        }
    }

    /// After a reload: retires every adapter whose app is gone or was started differently
    /// than `live` now says (`app id → how it would start now`). A retired adapter
    /// finishes its in-flight calls, then stops.
    pub(crate) fn retire_stale(&self, live: super::Live<'_>) {
        let mut adapters = self.adapters.lock().expect("adapters lock");
        adapters.retain(|app, adapter| {
            let keep = matches!(live(app), Some(super::Start::Stdio(s)) if s == adapter.started);
            if !keep {
                tracing::info!(app, "the app was removed or changed; retiring its adapter");
                retire(adapter);
            }
            keep
        });
    }

    /// Stops every adapter.
    pub(crate) fn shutdown(&self) {
        let adapters: Vec<Arc<Adapter>> = self
            .adapters
            .lock()
            .expect("adapters lock")
            .drain()
            .map(|(_, a)| a)
            .collect();
        for a in adapters {
            a.kill();
        }
    }
}

/// Marks `adapter` retiring; stops it now when no call waits on it.
fn retire(adapter: &Adapter) {
    adapter.retiring.store(true, Ordering::SeqCst);
    if adapter.child.waiting_count() == 0 {
        adapter.kill();
    }
}

/// Reads reply lines until the adapter closes stdout, then fails what is still waiting.
async fn read_replies(adapter: Arc<Adapter>, stdout: ChildStdout) {
    match child::read_lines(stdout, MAX_LINE, |line| handle_line(&adapter, line)).await {
        Ended::Closed => {}
        Ended::TooLong => {
            adapter.fail_all(&Error::LineTooLong);
            adapter.kill();
        }
        Ended::Failed(e) => {
            tracing::warn!(app = %adapter.app(), "reading adapter output failed: {e}");
        }
    }
    let (status, clean) = match adapter.child.ended() {
        Some(mut g) => {
            let ended = tokio::time::timeout(std::time::Duration::from_secs(2), g.wait())
                .await
                .unwrap_or_else(|_| ("still running after closing stdout".to_owned(), false));
            drop(g);
            ended
        }
        None => ("stopped by the gateway".to_owned(), false),
    };
    tracing::info!(app = %adapter.app(), "adapter exited: {status}");
    if clean {
        for p in adapter.child.drain() {
            let _ = p.reply.send(Reply::NotDelivered);
        }
        return;
    }
    // Give the stderr reader a moment to collect the last lines.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    adapter.fail_all(&Error::Exited {
        status,
        stderr: adapter.stderr_note(),
    });
}

fn handle_line(adapter: &Adapter, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    let envelope = match envelope::parse(text) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(app = %adapter.app(), "adapter wrote a line that is not a JSON envelope");
            adapter.fail_all(&Error::Malformed(e));
            return;
        }
    };
    let Some(id) = envelope::request_id(&envelope) else {
        tracing::warn!(app = %adapter.app(), "adapter envelope without request_id: {}", excerpt(text, 200));
        return;
    };
    match envelope::reply(&envelope, "the adapter") {
        envelope::Reply::Progress(progress) => {
            let sink = adapter.child.with(&id, |p| p.progress.clone()).flatten();
            if let Some(sink) = sink {
                sink(progress);
            }
        }
        envelope::Reply::Done(result) => {
            let Some(pending) = adapter.child.take(&id) else {
                tracing::debug!(app = %adapter.app(), request_id = %id, "reply for a call nobody waits for (timed out or cancelled)");
                return;
            };
            let _ = pending
                .reply
                .send(Reply::Done(result.map_err(Error::Reply)));
            if adapter.retiring.load(Ordering::SeqCst) && adapter.child.waiting_count() == 0 {
                adapter.kill();
            }
        }
    }
}
