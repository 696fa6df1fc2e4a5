//! Rolling back an atomic script run or batch (docs/workflows.md, "Undo"): each completed
//! call's undo (descriptor `undo`: another tool of the app, its arguments taken from the
//! call's arguments and result) runs, newest first, when the run or batch did not finish.
//!
//! An undo is a call like any other: through the pipeline as the same caller, within the
//! same run (views, consent, rate limits, history). A call of a tool that only reads needs
//! none; one whose tool names no undo, or whose undo's arguments the call did not give,
//! stays done and is reported so. A failed undo does not stop the others.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::pipeline::{Origin, Outcome, Pipeline};

/// Atomic runs and batches under way, their rollbacks included; the process waits for them
/// (a bounded while, [`settled`]) before it ends.
static UNDERWAY: AtomicUsize = AtomicUsize::new(0);
/// Told when the last one ends.
static SETTLED: tokio::sync::Notify = tokio::sync::Notify::const_new();
/// How each one is cancelled, by its number.
static CANCELS: std::sync::Mutex<Vec<(u64, CancellationToken)>> = std::sync::Mutex::new(Vec::new());
/// The number of the next one.
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Counts one atomic run or batch (and keeps its cancellation) until it is dropped.
struct Underway(u64);

impl Underway {
    fn enter(cancel: &CancellationToken) -> Underway {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        CANCELS
            .lock()
            .expect("cancels lock")
            .push((id, cancel.clone()));
        UNDERWAY.fetch_add(1, Ordering::SeqCst);
        Underway(id)
    }
}

impl Drop for Underway {
    fn drop(&mut self) {
        CANCELS
            .lock()
            .expect("cancels lock")
            .retain(|(id, _)| *id != self.0);
        if UNDERWAY.fetch_sub(1, Ordering::SeqCst) == 1 {
            SETTLED.notify_waiters();
        }
    }
}

/// Runs an atomic run or batch (`work`) on a task of its own, so that it finishes — its
/// rollback included — even when the request waiting for it goes away: a client gone
/// without a cancel (its input closed) drops the request, which cancels `cancel`, and the
/// work then stops and undoes what it did. `None` when the task itself failed.
pub(crate) async fn detached<F>(work: F, cancel: &CancellationToken) -> Option<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let gone = cancel.clone().drop_guard();
    let underway = Underway::enter(cancel);
    let task = tokio::spawn(async move {
        let out = work.await;
        drop(underway);
        out
    });
    let out = task.await.ok();
    gone.disarm();
    out
}

/// Cancels the atomic runs and batches under way (their sessions are over: nobody waits
/// for their results) and waits until they have undone what they did, for at most `wait`
/// (what the process does before it ends).
pub(crate) async fn settled(wait: Duration) {
    for (_, cancel) in CANCELS.lock().expect("cancels lock").iter() {
        cancel.cancel();
    }
    let all_done = async {
        loop {
            let notified = SETTLED.notified();
            if UNDERWAY.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    };
    if tokio::time::timeout(wait, all_done).await.is_err() {
        tracing::warn!(
            "{} atomic runs or batches were still undoing their calls {wait:?} after the session ended; the process ends without them",
            UNDERWAY.load(Ordering::SeqCst)
        );
    }
}

/// A completed call of an atomic run or batch, and what would undo it.
#[derive(Debug)]
pub(crate) struct Step {
    /// Its place: the index in the batch, or the number of the run's call (from 0).
    pub index: usize,
    /// The app as it was called.
    pub app: String,
    /// The tool.
    pub tool: String,
    /// What undoes it.
    pub plan: Plan,
}

/// What undoes one call.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Call `tool` of `app` (its id) with `args`.
    Call {
        /// The app's id.
        app: String,
        /// The undo tool.
        tool: String,
        /// Its arguments.
        args: Value,
    },
    /// The tool only reads: nothing to undo.
    ReadOnly,
    /// The tool names no undo.
    None,
    /// The undo's arguments could not be made from the call: why.
    Unmade(String),
    /// The run was stopped while the call was under way: it may have taken effect, and
    /// there is no result to undo it from.
    Stopped,
}

/// What became of one call's undo.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Undone {
    /// The call's place (see [`Step::index`]).
    pub index: usize,
    /// The app as it was called.
    pub app: String,
    /// The tool.
    pub tool: String,
    /// `undone`, `failed`, or `not undoable`.
    pub status: &'static str,
    /// The undo tool, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undo: Option<String>,
    /// Why it failed, or why there is no undo.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

/// A downstream result marked `isError`: its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Failed(pub String);

/// A tool's result as a script (and an undo's pointers) read it: a downstream server's
/// whole MCP result becomes its `structuredContent`, else its text (parsed when it is
/// JSON); a result marked `isError` is `Err` with its text. Other tools' results are
/// their value.
pub(crate) fn value_of(outcome: &Outcome) -> Result<Value, Failed> {
    let value = &outcome.value;
    if !outcome.mcp {
        return Ok(value.clone());
    }
    let content = value.get("content").and_then(Value::as_array);
    let texts: Vec<&str> = content
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect();
    let text = texts.join("\n");
    if value.get("isError") == Some(&Value::Bool(true)) {
        return Err(Failed(text));
    }
    if let Some(structured) = value.get("structuredContent").filter(|s| !s.is_null()) {
        return Ok(structured.clone());
    }
    if content.is_some_and(|c| c.len() == texts.len()) {
        return Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)));
    }
    Ok(content.map_or(Value::Null, |c| Value::Array(c.clone())))
}

/// What a rollback did, for a result's text: a line per completed call, newest first
/// (`2. com.a add: undone (remove)`), or that nothing needed undoing.
pub(crate) fn summary(undone: &[Undone]) -> String {
    if undone.is_empty() {
        return "nothing to undo (no completed call changed anything)".to_owned();
    }
    format!(
        "the completed calls' undos, newest first:\n{}",
        lines(undone)
    )
}

/// One line per undo: `2. com.a add: undone (remove)`.
fn lines(undone: &[Undone]) -> String {
    let line = |u: &Undone| {
        let mut line = format!("{}. {} {}: {}", u.index, u.app, u.tool, u.status);
        if let Some(undo) = &u.undo {
            line.push_str(&format!(" ({undo})"));
        }
        let why = u.error.as_ref().map(|e| match e {
            Value::String(s) => s.clone(),
            e => e
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        });
        if let Some(why) = why.filter(|w| !w.is_empty()) {
            line.push_str(": ");
            line.push_str(&crate::text::excerpt(&why, 300));
        }
        line
    };
    undone.iter().map(line).collect::<Vec<_>>().join("\n")
}

impl Pipeline {
    /// What undoes a completed call of `tool` of `app` (as `origin`'s caller sees it) that
    /// was given `args` and gave `outcome`.
    pub(crate) async fn undo_plan(
        &self,
        app: &str,
        tool: &str,
        args: &Value,
        outcome: &Outcome,
        origin: &Origin,
    ) -> Plan {
        let snapshot = self.view(self.snapshot().await, &origin.caller);
        let Some(entry) = snapshot.find(app) else {
            return Plan::None;
        };
        let Some(tool) = entry.binding().tool(tool) else {
            return Plan::None;
        };
        if tool.read_only {
            return Plan::ReadOnly;
        }
        let Some(undo) = &tool.undo else {
            return Plan::None;
        };
        let result = value_of(outcome).unwrap_or(Value::Null);
        // The undo reads the arguments the app got: the schema's defaults and the
        // arguments the user fixed (config `apps.<id>.tools`) too.
        let sent = crate::overrides::with_fixed(tool, crate::pipeline::with_defaults(tool, args));
        match undo.arguments(&sent, &result) {
            Ok(args) => Plan::Call {
                app: entry.app.id.clone(),
                tool: undo.tool.clone(),
                args,
            },
            Err(missing) => Plan::Unmade(missing.to_string()),
        }
    }

    /// The calls an atomic batch of `calls` (`(app, tool)`) could not undo, as `app tool`,
    /// each once: tools that change something and name no undo. Names are cut to 200
    /// characters, and past 20 of them the rest are counted (the list goes into a
    /// question).
    pub(crate) async fn irreversible<'a>(
        &self,
        calls: impl Iterator<Item = (&'a str, &'a str)>,
        origin: &Origin,
    ) -> Vec<String> {
        const SHOWN: usize = 20;
        let snapshot = self.view(self.snapshot().await, &origin.caller);
        let mut out: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut more = 0;
        for (app, tool) in calls {
            let found = snapshot
                .find(app)
                .and_then(|e| e.binding().tool(tool).map(|t| (e, t)));
            // A call of a tool this caller cannot reach fails, changing nothing.
            let undoable = found.is_none_or(|(_, t)| t.read_only || t.undo.is_some());
            let name = format!(
                "{} {}",
                crate::text::excerpt(app, 200),
                crate::text::excerpt(tool, 200)
            );
            if undoable || !seen.insert(name.clone()) {
                continue;
            }
            if out.len() < SHOWN {
                out.push(name);
            } else {
                more += 1;
            }
        }
        if more > 0 {
            out.push(format!("and {more} more"));
        }
        out
    }

    /// Runs the undos of `steps`, newest first, each as a call of `origin`'s caller within
    /// the run's rollback ([`Within::undoing`]); every step but those that only read is
    /// reported. The undos are not cancelled with the run (a cancelled run is what they
    /// take back); together they have `undo.timeoutMs`: the one running then is
    /// cancelled, and those not started are reported as not undone.
    pub(crate) async fn roll_back(&self, steps: Vec<Step>, origin: &Origin) -> Vec<Undone> {
        let budget = self.settings().undo_timeout;
        let deadline = tokio::time::Instant::now() + budget;
        let origin = Origin {
            within: origin
                .within
                .as_ref()
                .map(|w| std::sync::Arc::new(w.undoing())),
            ..origin.clone()
        };
        let out_of_time = || {
            serde_json::json!({
                "code": "TIMEOUT",
                "message": format!(
                    "the rollback ran out of its {} ms (config `undo.timeoutMs`)",
                    budget.as_millis()
                ),
            })
        };
        let mut out = Vec::with_capacity(steps.len());
        for step in steps.into_iter().rev() {
            let mut undone = Undone {
                index: step.index,
                app: step.app,
                tool: step.tool,
                status: "not undoable",
                undo: None,
                error: None,
            };
            match step.plan {
                Plan::ReadOnly => continue,
                Plan::None => {
                    undone.error = Some(Value::String("the tool names no undo".into()));
                }
                Plan::Unmade(why) => undone.error = Some(Value::String(why)),
                Plan::Stopped => {
                    undone.error = Some(Value::String(
                        "stopped mid-call: it may have taken effect, and its result, which an undo needs, never came".into(),
                    ));
                }
                Plan::Call { app, tool, args } => {
                    undone.undo = Some(tool.clone());
                    undone.status = "failed";
                    if tokio::time::Instant::now() >= deadline {
                        undone.error = Some(out_of_time());
                        out.push(undone);
                        continue;
                    }
                    let cancel = CancellationToken::new();
                    let call = self.call(&app, &tool, Some(args), cancel.clone(), None, &origin);
                    tokio::pin!(call);
                    let called = tokio::select! {
                        called = &mut call => Some(called),
                        () = tokio::time::sleep_until(deadline) => {
                            // Cancelled, it still ends (and is recorded) as a cancelled call.
                            cancel.cancel();
                            let _ = tokio::time::timeout(CANCEL_GRACE, &mut call).await;
                            None
                        }
                    };
                    let failed = match called {
                        Some(Ok(outcome)) => value_of(&outcome).err().map(|Failed(text)| {
                            serde_json::json!({"code": "AUTOMATION_FAILED", "message": text})
                        }),
                        Some(Err(e)) => Some(e.to_json()),
                        None => Some(out_of_time()),
                    };
                    if failed.is_none() {
                        undone.status = "undone";
                    }
                    undone.error = failed;
                }
            }
            out.push(undone);
        }
        out
    }

    /// What stands for a call an atomic run was stopped in (it never answered): nothing
    /// when its tool only reads, else [`Plan::Stopped`].
    pub(crate) async fn stopped_plan(&self, app: &str, tool: &str, origin: &Origin) -> Plan {
        let snapshot = self.view(self.snapshot().await, &origin.caller);
        let read_only = snapshot
            .find(app)
            .and_then(|e| e.binding().tool(tool))
            .is_some_and(|t| t.read_only);
        if read_only {
            Plan::ReadOnly
        } else {
            Plan::Stopped
        }
    }
}

/// How long an undo cancelled at the rollback's deadline may take to end.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_mcp_result_is_read_as_a_script_reads_it() {
        let mcp = |value: Value| Outcome {
            value,
            structured: false,
            mcp: true,
        };
        let structured = mcp(
            json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"id": 3}}),
        );
        assert_eq!(value_of(&structured), Ok(json!({"id": 3})));
        let text = mcp(json!({"content": [{"type": "text", "text": "{\"id\": 4}"}]}));
        assert_eq!(value_of(&text), Ok(json!({"id": 4})));
        let plain = mcp(json!({"content": [{"type": "text", "text": "done"}]}));
        assert_eq!(value_of(&plain), Ok(json!("done")));
        let failed = mcp(json!({"content": [{"type": "text", "text": "no"}], "isError": true}));
        assert_eq!(value_of(&failed), Err(Failed("no".to_owned())));
        let image = mcp(json!({"content": [{"type": "image", "data": "AA=="}]}));
        assert_eq!(
            value_of(&image),
            Ok(json!([{"type": "image", "data": "AA=="}]))
        );
        let own = Outcome {
            value: json!({"id": 5}),
            structured: true,
            mcp: false,
        };
        assert_eq!(value_of(&own), Ok(json!({"id": 5})));
    }
}
