//! The requests an initialized stdio session answers without rmcp's service loop:
//! `tools/call`, `tools/list`, `resources/read` and `ping` go from the framing layer,
//! already parsed and checked, to the same handler rmcp would call
//! (`Service::handle_request`: its revision and `_meta` checks included), and the answer
//! goes to the output queue.
//!
//! Through rmcp a call parses its line again (trying each request type in turn), waits for
//! the service loop, is spawned, and its answer passes two channels and is encoded into a
//! pipe the framing reads back and parses once more: four task wake-ups and three parses
//! where this path has one spawn and no re-parse. What it keeps of rmcp's loop: each call
//! has its own cancellation token, a `notifications/cancelled` naming it cancels it, and a
//! cancelled call is not answered.
//!
//! Everything else goes through rmcp: `initialize`, notifications, `subscriptions/listen`,
//! the client's answers to the gateway's own requests, a request whose params rmcp's types
//! do not read (rmcp answers it as it always has), and a request that names a protocol
//! revision other than the session's (rmcp scopes what such a request's handler may send).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequest, ClientRequest, GetExtensions, GetMeta, ListToolsRequest, PingRequest,
    ReadResourceRequest, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{RoleServer, Service};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Outgoing;
use crate::mcp::Server;

/// One session's requests in flight on the direct path.
pub(super) struct Direct {
    server: Server,
    peer: Peer<RoleServer>,
    /// The output queue; `None` once the session takes no more requests here.
    out: Mutex<Option<mpsc::Sender<Outgoing>>>,
    /// Each call's number and token by its id (as JSON text): removed when it is answered
    /// or cancelled. The number tells a call from a later one the client sent with the id
    /// of a cancelled one.
    running: Mutex<HashMap<String, (u64, CancellationToken)>>,
    calls_made: AtomicU64,
    /// The framing's count of requests in flight, which a cancellation ends here (an
    /// answer ends it when it is written: `outbound`).
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
    /// Cancels every call of the session (the gateway stops, or the session's grace ends).
    session: CancellationToken,
    calls: TaskTracker,
}

impl Direct {
    pub(super) fn new(
        server: Server,
        peer: Peer<RoleServer>,
        out: mpsc::Sender<Outgoing>,
        in_flight: Arc<Mutex<HashMap<String, usize>>>,
    ) -> Self {
        Self {
            server,
            peer,
            out: Mutex::new(Some(out)),
            running: Mutex::default(),
            calls_made: AtomicU64::new(0),
            in_flight,
            session: CancellationToken::new(),
            calls: TaskTracker::new(),
        }
    }

    /// Starts `message` here when it is a request this path answers (`true`); `false`
    /// leaves it to rmcp.
    pub(super) fn take(self: &Arc<Self>, message: &Value) -> bool {
        let (Some(method), Some(id)) = (
            message.get("method").and_then(Value::as_str),
            message.get("id"),
        ) else {
            return false;
        };
        let (request, kind) = match method {
            "tools/call" => (
                CallToolRequest::deserialize(message).map(ClientRequest::from),
                "CallToolRequest",
            ),
            "tools/list" => (
                ListToolsRequest::deserialize(message).map(ClientRequest::from),
                "ListToolsRequest",
            ),
            "resources/read" => (
                ReadResourceRequest::deserialize(message).map(ClientRequest::from),
                "ReadResourceRequest",
            ),
            "ping" => (
                PingRequest::deserialize(message).map(ClientRequest::from),
                "PingRequest",
            ),
            _ => return false,
        };
        let (Ok(mut request), Ok(request_id)) = (request, RequestId::deserialize(id)) else {
            return false;
        };
        if let Some(named) = request.get_meta().protocol_version()
            && self
                .peer
                .peer_info()
                .is_none_or(|info| info.protocol_version != named)
        {
            return false;
        }
        let Some(out) = self.out.lock().expect("direct lock").clone() else {
            return false;
        };
        let key = id.to_string();
        let ct = self.session.child_token();
        let call = self.calls_made.fetch_add(1, Ordering::Relaxed);
        self.running
            .lock()
            .expect("direct lock")
            .insert(key.clone(), (call, ct.clone()));
        // The kind of request and its id only: arguments may carry secrets.
        tracing::debug!(id = %request_id, request = kind, "received request");
        // As rmcp's loop builds it: the request's `_meta` and extensions move to the context.
        let mut ctx = RequestContext::new(request_id.clone(), self.peer.clone());
        ctx.ct = ct.clone();
        std::mem::swap(&mut ctx.meta, request.get_meta_mut());
        std::mem::swap(&mut ctx.extensions, request.extensions_mut());
        let this = self.clone();
        self.calls.spawn(async move {
            let result = Service::handle_request(&this.server, request, ctx).await;
            // What the call started ends with its answer (as rmcp's loop does it).
            ct.cancel();
            let answered = {
                let mut running = this.running.lock().expect("direct lock");
                let ours = running.get(&key).is_some_and(|(c, _)| *c == call);
                ours && running.remove(&key).is_some()
            };
            // A call the client cancelled gets no answer (MCP's cancellation rule), and
            // its id may name a newer call by now.
            if !answered {
                return;
            }
            let message = match result {
                Ok(result) => ServerJsonRpcMessage::response(result, request_id),
                Err(error) => ServerJsonRpcMessage::error(error, Some(request_id)),
            };
            let mut line = serde_json::to_vec(&message).expect("MCP messages serialize");
            line.push(b'\n');
            let _ = out.send(Outgoing::Answer(line, key)).await;
        });
        true
    }

    /// Cancels the call a `notifications/cancelled` names when it runs here (`true`).
    pub(super) fn cancel(&self, message: &Value) -> bool {
        let Some(key) = cancelled_id(message) else {
            return false;
        };
        let Some((_, ct)) = self.running.lock().expect("direct lock").remove(&key) else {
            return false;
        };
        self.in_flight.lock().expect("in-flight lock").remove(&key);
        tracing::info!(id = %key, "received notification: CancelledNotification; cancelled");
        ct.cancel();
        true
    }

    /// Takes no more requests; those running go on.
    pub(super) fn close(&self) {
        self.out.lock().expect("direct lock").take();
        self.calls.close();
    }

    /// Takes no more requests and cancels those running.
    pub(super) fn stop(&self) {
        self.close();
        self.session.cancel();
    }

    /// Waits until the calls running here have ended (after [`Direct::close`]).
    pub(super) async fn idle(&self) {
        self.calls.wait().await;
    }
}

/// The id (as JSON text) a `notifications/cancelled` names.
fn cancelled_id(message: &Value) -> Option<String> {
    if message.get("method").and_then(Value::as_str) != Some("notifications/cancelled") {
        return None;
    }
    let id = message.get("params")?.get("requestId")?;
    (id.is_string() || id.is_i64()).then(|| id.to_string())
}
