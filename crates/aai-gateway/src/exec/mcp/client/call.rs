//! One `tools/call` of a downstream server: its progress, its cancellation and deadline,
//! and, at the 2026-07-28 revision, the rounds a server asks for input in
//! (`InputRequiredResult`: its questions are put to the call's own client, and the call is
//! sent again with the answers and the server's `requestState`, under a new request id).

use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, ErrorCode,
    InputRequest, InputRequests, InputRequiredResult, InputResponses, RequestId, ServerResult,
};
use rmcp::service::{InboundStreamOrigin, PeerRequestOptions, RequestContext, RoleClient};
use serde_json::{Map, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::super::asks::InFlight;
use super::direct::{Answer, Wire};
use super::{CallError, Caller, Connection, token_key};
use crate::exec::ProgressSink;
use crate::telemetry::{TRACEPARENT, TRACESTATE};

/// Most input rounds of one call (rmcp's default cap too): a server asking for more is
/// broken or hostile.
const MAX_ROUNDS: usize = 10;

/// A `tools/call` answered with something else.
fn not_a_tool_result() -> CallError {
    CallError::Rpc {
        code: ErrorCode::INTERNAL_ERROR.0,
        message: "the server answered tools/call with something other than a tool result"
            .to_owned(),
    }
}

/// Why a round was abandoned, as the server is told.
fn reason(why: &CallError) -> &'static str {
    match why {
        CallError::Timeout => "timed out",
        _ => "cancelled by the client",
    }
}

/// How one round of a call ended.
enum Round {
    Done(Value),
    /// The server needs input first (its questions, its state to echo).
    Input(InputRequiredResult),
}

impl Connection {
    /// Calls `name` with `args`; the result is the server's `CallToolResult` as JSON,
    /// untouched. Progress goes to `progress`; `cancel` and `deadline` cancel the request
    /// downstream too. `deadline` covers every round.
    pub(in crate::exec::mcp) async fn call(
        &self,
        name: &str,
        args: Map<String, Value>,
        progress: Option<ProgressSink>,
        cancel: &CancellationToken,
        deadline: Duration,
        caller: Caller,
    ) -> Result<Value, CallError> {
        let trace = caller.trace.clone();
        let in_flight = self.calls.enter(caller);
        let until = Instant::now() + deadline;
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = Some(args);
        let mut state_only = 0u32;
        for _ in 0..MAX_ROUNDS {
            let mut request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            if let Some(trace) = &trace {
                // W3C trace context in `_meta`, as MCP's convention has it (and as headers
                // over HTTP: `with_trace_headers`).
                use rmcp::model::GetMeta;
                let meta = request.get_meta_mut();
                meta.insert(TRACEPARENT.to_owned(), Value::String(trace.traceparent()));
                if let Some(state) = trace.tracestate() {
                    meta.insert(TRACESTATE.to_owned(), Value::String(state.to_owned()));
                }
            }
            let round = self
                .round(request, &in_flight, progress.as_ref(), cancel, until)
                .await?;
            let asked = match round {
                Round::Done(result) => return Ok(result),
                Round::Input(asked) => asked,
            };
            let requests = asked.input_requests.unwrap_or_default();
            if requests.is_empty() {
                // Only state to echo: the server is still working; back off a little.
                let pause = Duration::from_millis(50 << state_only.min(2));
                state_only += 1;
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = cancel.cancelled() => return Err(CallError::Cancelled),
                    () = tokio::time::sleep_until(until) => return Err(CallError::Timeout),
                }
            } else {
                state_only = 0;
            }
            let answers = tokio::select! {
                answers = self.answer(requests, &in_flight) => answers?,
                () = cancel.cancelled() => return Err(CallError::Cancelled),
                () = tokio::time::sleep_until(until) => return Err(CallError::Timeout),
            };
            params.input_responses = (!answers.is_empty()).then_some(answers);
            params.request_state = asked.request_state;
        }
        Err(CallError::Rpc {
            code: ErrorCode::INTERNAL_ERROR.0,
            message: format!(
                "the server asked for input {MAX_ROUNDS} times in one call; the call was given up"
            ),
        })
    }

    /// One request of a call, answered or abandoned (cancelled downstream).
    async fn round(
        &self,
        request: ClientRequest,
        in_flight: &InFlight,
        progress: Option<&ProgressSink>,
        cancel: &CancellationToken,
        until: Instant,
    ) -> Result<Round, CallError> {
        if let Some(wire) = &self.wire {
            return self
                .round_direct(wire, request, in_flight, progress, cancel, until)
                .await;
        }
        let peer = self.service.peer().clone();
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| self.closed(&e.to_string()))?;
        let key = token_key(&handle.progress_token);
        in_flight.sent(handle.id.clone(), key.clone());
        if let Some(sink) = progress {
            self.sinks
                .lock()
                .expect("sinks lock")
                .insert(key.clone(), sink.clone());
        }
        let id = handle.id.clone();
        let outcome = tokio::select! {
            answer = handle.await_response() => Ok(answer),
            () = cancel.cancelled() => Err(CallError::Cancelled),
            () = tokio::time::sleep_until(until) => Err(CallError::Timeout),
        };
        if progress.is_some() {
            self.progress_done(&key, outcome.is_ok()).await;
        }
        let answer = match outcome {
            Ok(answer) => answer,
            Err(why) => {
                let reason = reason(&why);
                // Best effort: the server may be gone already.
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some(reason.to_owned()),
                    ))
                    .await;
                return Err(why);
            }
        };
        match answer {
            Ok(ServerResult::CallToolResult(result)) => serde_json::to_value(result)
                .map(Round::Done)
                .map_err(|e| CallError::Rpc {
                    code: ErrorCode::INTERNAL_ERROR.0,
                    message: e.to_string(),
                }),
            Ok(ServerResult::InputRequiredResult(asked)) => Ok(Round::Input(asked)),
            Ok(_) => Err(not_a_tool_result()),
            // A server may echo the request's headers in its error.
            Err(rmcp::ServiceError::McpError(e)) => Err(CallError::Rpc {
                code: e.code.0,
                message: self.clean(&e.message),
            }),
            Err(e) => Err(self.closed(&e.to_string())),
        }
    }

    /// [`Connection::round`] without rmcp's service loop ([`super::direct`]).
    async fn round_direct(
        &self,
        wire: &Wire,
        request: ClientRequest,
        in_flight: &InFlight,
        progress: Option<&ProgressSink>,
        cancel: &CancellationToken,
        until: Instant,
    ) -> Result<Round, CallError> {
        let mut sent = wire.prepare(request).map_err(|e| self.closed(&e))?;
        // Known before the request is written: a server may ask or report at once.
        let key = token_key(&sent.token);
        in_flight.sent(sent.id.clone(), key.clone());
        if let Some(sink) = progress {
            self.sinks
                .lock()
                .expect("sinks lock")
                .insert(key.clone(), sink.clone());
        }
        let outcome = tokio::select! {
            answer = wire.send(&mut sent) => Ok(answer),
            () = cancel.cancelled() => Err(CallError::Cancelled),
            () = tokio::time::sleep_until(until) => Err(CallError::Timeout),
        };
        if progress.is_some() {
            self.progress_done(&key, outcome.is_ok()).await;
        }
        let answer = match outcome {
            Ok(answer) => answer,
            Err(why) => {
                let reason = reason(&why);
                wire.cancel(&sent, reason);
                return Err(why);
            }
        };
        match answer {
            Ok(Answer::Done(result)) => Ok(Round::Done(result)),
            Ok(Answer::Input(asked)) => Ok(Round::Input(asked)),
            // A server may echo the request's headers in its error.
            Ok(Answer::Failed(e)) => Err(CallError::Rpc {
                code: e.code.0,
                message: self.clean(&e.message),
            }),
            Ok(Answer::Odd(why)) => {
                tracing::debug!("{why}");
                Err(not_a_tool_result())
            }
            Err(why) => Err(self.closed(&why)),
        }
    }

    /// A round's progress sink goes. rmcp hands each notification to a task of its own,
    /// spawned before the answer that followed it on the wire is delivered: after an
    /// answer, those tasks run first, so the last progress is not lost. Only for a round
    /// with a sink: each yield is a turn of the runtime's driver (an `epoll_wait`), four of
    /// a forwarded call's eleven system calls.
    async fn progress_done(&self, key: &str, answered: bool) {
        if answered {
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
        }
        self.sinks.lock().expect("sinks lock").remove(key);
    }

    /// The answers to a round's questions, each put to the call's own client exactly as
    /// the same request sent on the call's stream would be ([`super::super::asks`]), one
    /// after the other (a user answers one question at a time).
    #[allow(deprecated)] // roots: deprecated from 2026-07-28, still asked for
    async fn answer(
        &self,
        requests: InputRequests,
        in_flight: &InFlight,
    ) -> Result<InputResponses, CallError> {
        let refused = |e: rmcp::ErrorData| CallError::Rpc {
            code: e.code.0,
            message: e.message.into_owned(),
        };
        let mut answers = InputResponses::new();
        for (key, request) in requests {
            let context = self.context_of(&key, in_flight.id());
            let answer = match request {
                InputRequest::Elicitation(request) => {
                    let answer = self
                        .calls
                        .elicitation(request.params, &context)
                        .await
                        .map_err(refused)?;
                    serde_json::to_value(answer)
                }
                InputRequest::CreateMessage(request) => {
                    let params =
                        serde_json::to_value(&request.params).map_err(|e| CallError::Rpc {
                            code: ErrorCode::INTERNAL_ERROR.0,
                            message: e.to_string(),
                        })?;
                    Ok(self
                        .calls
                        .sampling(params, &context)
                        .await
                        .map_err(refused)?)
                }
                InputRequest::ListRoots(_) => {
                    let answer = self.calls.roots(&context).await.map_err(refused)?;
                    serde_json::to_value(answer)
                }
                other => {
                    let kind = serde_json::to_value(&other)
                        .ok()
                        .and_then(|v| v.get("method").and_then(Value::as_str).map(str::to_owned))
                        .unwrap_or_default();
                    return Err(CallError::Rpc {
                        code: ErrorCode::METHOD_NOT_FOUND.0,
                        message: format!(
                            "the server asked for input of a kind the gateway cannot answer (`{}`)",
                            crate::text::excerpt(&kind, 60)
                        ),
                    });
                }
            }
            .map_err(|e| CallError::Rpc {
                code: ErrorCode::INTERNAL_ERROR.0,
                message: e.to_string(),
            })?;
            answers.insert(key, answer);
        }
        Ok(answers)
    }

    /// The context an input request is handled in: as if it came on the stream of the
    /// call's latest request, so it is routed to that call.
    fn context_of(&self, key: &str, call: Option<RequestId>) -> RequestContext<RoleClient> {
        let mut context =
            RequestContext::new(RequestId::String(key.into()), self.service.peer().clone());
        if let Some(call) = call {
            context
                .extensions
                .insert(InboundStreamOrigin::OutboundRequest(call));
        }
        context
    }
}
