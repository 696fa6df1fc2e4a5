//! Executor progress to the client as `notifications/progress`, coalesced when the client
//! reads slower than the executor writes.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;

use crate::exec::{Progress, ProgressSink};

/// Forwards executor progress as `notifications/progress`, in order, when the client
/// sent a progress token. At most [`PROGRESS_QUEUE`] updates wait to be sent; past that
/// the newest waiting one is replaced (coalesced), so a flood of 600,000 updates costs a
/// bounded queue while a normal stream (an agent's text) arrives whole. After the call's
/// result is ready ([`ProgressForwarder::flush`]) nothing more is sent: every
/// notification comes before the result.
pub(super) fn progress_sink(ctx: &RequestContext<RoleServer>) -> Option<ProgressForwarder> {
    let token = ctx.meta.get_progress_token()?;
    let peer = ctx.peer.clone();
    // A progress `message` came with 2025-03-26.
    let messages = ctx
        .protocol_version()
        .is_none_or(|v| v >= rmcp::model::ProtocolVersion::V_2025_03_26);
    let shared = Arc::new(Coalesced::default());
    let worker = shared.clone();
    tokio::spawn(async move {
        loop {
            let notified = worker.wake.notified();
            let next = {
                let mut slot = worker.slot.lock().expect("progress lock");
                match slot.waiting.pop_front() {
                    // Sent, this one covers every update pushed before it (and, when
                    // it is the last one waiting, every update so far).
                    Some(p) => Some((p, slot.pushed - slot.waiting.len() as u64)),
                    None if slot.closed => break,
                    None => None,
                }
            };
            let Some((p, upto)) = next else {
                notified.await;
                continue;
            };
            let mut param = ProgressNotificationParam::new(token.clone(), p.progress);
            if let Some(total) = p.total {
                param = param.with_total(total);
            }
            if let Some(message) = p.message.filter(|_| messages) {
                param = param.with_message(message);
            }
            let failed = peer.notify_progress(param).await.is_err();
            worker.slot.lock().expect("progress lock").sent = upto;
            worker.sent.notify_waiters();
            if failed {
                break;
            }
        }
    });
    Some(ProgressForwarder(shared))
}

/// The one waiting update of a call's progress, and how far sending has got.
#[derive(Default)]
struct Coalesced {
    slot: std::sync::Mutex<Slot>,
    /// Wakes the sender: a new update, or the end.
    wake: tokio::sync::Notify,
    /// Wakes a flush: an update was sent.
    sent: tokio::sync::Notify,
}

/// Most progress updates waiting to be sent for one call.
const PROGRESS_QUEUE: usize = 256;

#[derive(Default)]
struct Slot {
    waiting: std::collections::VecDeque<Progress>,
    /// Updates pushed so far, and how many of them are sent (or replaced by a later one
    /// that is).
    pushed: u64,
    sent: u64,
    /// The result is ready: later updates are dropped.
    closed: bool,
}

/// One call's progress notifications.
pub(super) struct ProgressForwarder(Arc<Coalesced>);

impl ProgressForwarder {
    /// The executors' end.
    pub(super) fn sink(&self) -> ProgressSink {
        let shared = self.0.clone();
        Arc::new(move |p| {
            let mut slot = shared.slot.lock().expect("progress lock");
            if slot.closed {
                return;
            }
            if slot.waiting.len() >= PROGRESS_QUEUE {
                slot.waiting.pop_back();
            }
            slot.waiting.push_back(p);
            slot.pushed += 1;
            drop(slot);
            shared.wake.notify_one();
        })
    }

    /// Waits until the progress so far has been sent (a client drops progress that
    /// arrives after the result), for at most `FLUSH_WAIT`; from then on nothing more is
    /// sent.
    pub(super) async fn flush(&self) {
        const FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
        let shared = &self.0;
        let target = {
            let mut slot = shared.slot.lock().expect("progress lock");
            slot.closed = true;
            slot.pushed
        };
        shared.wake.notify_one();
        let _ = tokio::time::timeout(FLUSH_WAIT, async {
            loop {
                let sent = shared.sent.notified();
                if shared.slot.lock().expect("progress lock").sent >= target {
                    return;
                }
                sent.await;
            }
        })
        .await;
    }
}
