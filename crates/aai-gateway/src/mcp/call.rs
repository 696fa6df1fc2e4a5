//! One `aai_exec` call: answered at once, or in rounds, where the call asks its client
//! something (the gateway's consent question, a downstream server's request) and the
//! client answers: through elicitation at 2025-11-25 and earlier, through input-required
//! results at 2026-07-28 (`rounds.rs` keeps the calls parked between round trips).

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use serde_json::Value;

use super::progress::{ProgressForwarder, progress_sink};
use super::rounds::{self, Round};
use super::upstream::{Client, Elicit};
use super::{Server, incoming_trace};
use crate::error::{Code, GatewayError};
use crate::pipeline::Outcome;

impl Server {
    pub(super) async fn exec(
        &self,
        app: &str,
        tool: &str,
        args: Option<Value>,
        ctx: &RequestContext<RoleServer>,
        round: Round<'_>,
    ) -> Result<CallToolResponse, GatewayError> {
        let caller = self.caller(ctx);
        let (elicits, round_trips) = asking(ctx);
        if round_trips {
            let response = self.exec_in_rounds(app, tool, args, ctx, round).await?;
            return Ok(self.with_view(response, app, tool).await);
        }
        let origin = self.session_origin(caller, elicits, ctx);
        let progress = progress_sink(ctx);
        let outcome = self
            .pipeline
            .call(
                app,
                tool,
                args,
                ctx.ct.clone(),
                progress.as_ref().map(ProgressForwarder::sink),
                &origin,
            )
            .await;
        if let Some(progress) = &progress {
            progress.flush().await;
        }
        let outcome = outcome?;
        // Only a downstream server's tools have views: other calls skip the lookup.
        let downstream = outcome.mcp;
        let response = outcome_result(outcome).into();
        if !downstream {
            return Ok(response);
        }
        Ok(self.with_view(response, app, tool).await)
    }

    /// A downstream tool's result with the tool's interactive view (MCP Apps: `_meta.ui`,
    /// its URI named for the app), so that a host can render it whichever way the tool
    /// was called (`aai_exec` in `progressive` exposure too).
    async fn with_view(
        &self,
        response: CallToolResponse,
        app: &str,
        tool: &str,
    ) -> CallToolResponse {
        let CallToolResponse::Complete(mut result) = response else {
            return response;
        };
        let snapshot = self.gateway.snapshot().await;
        // The server knows the tool by its own name (the user may have renamed it).
        let view = snapshot.find(app).and_then(|e| {
            let own = e
                .binding()
                .tool(tool)
                .map_or(tool, |t| &t.as_defined().name);
            self.pipeline.executors().mcp().view(&e.app.id, own)
        });
        if let Some(ui) = view {
            let mut meta = result.meta.take().unwrap_or_default();
            if let Some(uri) = ui.get("resourceUri") {
                meta.0.insert("ui/resourceUri".into(), uri.clone());
            }
            meta.0.insert("ui".into(), ui);
            result.meta = Some(meta);
        }
        CallToolResponse::Complete(result)
    }

    /// Where a call of a session of an earlier revision asks its user (elicitation, when
    /// the client takes it) and its client (a downstream server's requests).
    pub(super) fn session_origin(
        &self,
        caller: crate::identity::Caller,
        elicits: bool,
        ctx: &RequestContext<RoleServer>,
    ) -> crate::pipeline::Origin {
        crate::pipeline::Origin {
            caller,
            prompter: elicits
                .then(|| Arc::new(Elicit(ctx.peer.clone())) as crate::consent::SharedPrompter),
            client: Some(Arc::new(Client {
                peer: ctx.peer.clone(),
                session: self.session,
                call: ctx.id.clone(),
            })),
            trace: incoming_trace(ctx),
            within: None,
        }
    }

    /// The nonce of a retry's state (bound to `bound`), and the call parked under it when
    /// it answers a downstream server's request.
    pub(super) fn resumed(
        &self,
        round: Round<'_>,
        bound: &[u8],
    ) -> Result<(Option<Vec<u8>>, Option<rounds::Running>), GatewayError> {
        let nonce = round.open(bound)?;
        let parked = match nonce.as_deref() {
            Some(nonce) => self.shared.parking.take(nonce)?,
            None => None,
        };
        Ok((nonce, parked))
    }

    /// One of the gateway's own tools of many calls (`aai_batch`, `aai_run`) for a
    /// 2026-07-28 client: `work` (given the origin its calls carry and the token that
    /// cancels it) runs parked between rounds, each consent question and each downstream
    /// server's request one round of this call; a retry resumes it.
    pub(super) async fn many_in_rounds<F, Fut>(
        &self,
        tool: &str,
        ctx: &RequestContext<RoleServer>,
        round: Round<'_>,
        progress: Option<&ProgressForwarder>,
        work: F,
    ) -> Result<CallToolResponse, GatewayError>
    where
        F: FnOnce(crate::pipeline::Origin, tokio_util::sync::CancellationToken) -> Fut,
        Fut: std::future::Future<Output = Result<CallToolResult, GatewayError>> + Send + 'static,
    {
        let caller = self.caller(ctx);
        let bound = rounds::bound_to(&caller, "aai", tool);
        let (_, parked) = self.resumed(round, &bound)?;
        let parking = &self.shared.parking;
        let driven = match parked {
            Some(running) => {
                parking
                    .drive(running, round.responses, &ctx.ct, &bound)
                    .await
            }
            None => {
                let trace = incoming_trace(ctx);
                let running = rounds::Running::start(
                    ctx.client_capabilities(),
                    self.session,
                    move |client, cancel| {
                        let origin = crate::pipeline::Origin {
                            caller,
                            prompter: Some(Arc::new(rounds::Prompter::new(None, client.clone()))),
                            client: Some(client),
                            trace,
                            within: None,
                        };
                        let done = work(origin, cancel);
                        async move {
                            Ok(Outcome {
                                value: serde_json::to_value(done.await?).map_err(|e| {
                                    GatewayError::new(Code::AutomationFailed, e.to_string())
                                })?,
                                structured: false,
                                mcp: true,
                            })
                        }
                    },
                );
                let driven = parking.drive(running, None, &ctx.ct, &bound).await;
                if let Some(progress) = progress {
                    progress.flush().await;
                }
                driven
            }
        };
        driven.map(driven_response)
    }

    /// A call of a 2026-07-28 client: the consent question, then a downstream server's
    /// requests, each an input-required result the client answers by calling again
    /// (`rounds`). Progress reaches the client until the first question.
    async fn exec_in_rounds(
        &self,
        app: &str,
        tool: &str,
        args: Option<Value>,
        ctx: &RequestContext<RoleServer>,
        round: Round<'_>,
    ) -> Result<CallToolResponse, GatewayError> {
        let caller = self.caller(ctx);
        let bound = rounds::bound_to(&caller, app, tool);
        let (nonce, parked) = self.resumed(round, &bound)?;
        let parking = &self.shared.parking;
        let running = match parked {
            // The answer to a downstream server's request: the parked call goes on.
            Some(running) => running,
            None => {
                // The tool's own question, answered in the round before (only that one).
                let question = match nonce.is_some() || asking(ctx).0 {
                    true => {
                        self.pipeline
                            .consent_question(app, tool, args.as_ref(), &caller)
                            .await
                    }
                    false => None,
                };
                let answered = match (nonce, question) {
                    (Some(_), Some(question)) => Some((question, round.consent_reply())),
                    (None, Some(question)) if asking(ctx).0 => {
                        return Ok(rounds::consent_required(&question, app, tool)?.into());
                    }
                    _ => None,
                };
                let progress = progress_sink(ctx);
                let sink = progress.as_ref().map(ProgressForwarder::sink);
                let pipeline = self.pipeline.clone();
                let (app, tool, trace) = (app.to_owned(), tool.to_owned(), incoming_trace(ctx));
                let running = rounds::Running::start(
                    ctx.client_capabilities(),
                    self.session,
                    move |client, cancel| async move {
                        // Any other question of the call (an agent's permission request, a
                        // server's sampling) is asked in a round of its own.
                        let prompter = rounds::Prompter::new(answered, client.clone());
                        let origin = crate::pipeline::Origin {
                            caller,
                            prompter: Some(Arc::new(prompter)),
                            client: Some(client),
                            trace,
                            within: None,
                        };
                        pipeline
                            .call(&app, &tool, args, cancel, sink, &origin)
                            .await
                    },
                );
                let driven = parking.drive(running, None, &ctx.ct, &bound).await;
                if let Some(progress) = &progress {
                    progress.flush().await;
                }
                return driven.map(driven_response);
            }
        };
        parking
            .drive(running, round.responses, &ctx.ct, &bound)
            .await
            .map(driven_response)
    }
}

/// Whether the client takes elicitation requests, and whether it is a 2026-07-28 client
/// (asked through input-required results instead: a server cannot send it requests).
pub(super) fn asking(ctx: &RequestContext<RoleServer>) -> (bool, bool) {
    let elicits = ctx
        .client_capabilities()
        .is_some_and(|c| c.elicitation.is_some());
    let round_trips = ctx.protocol_version().is_some_and(|v| !v.has_initialize());
    (elicits, round_trips)
}

/// A round of a 2026-07-28 client's call, as its answer.
pub(super) fn driven_response(driven: rounds::Driven) -> CallToolResponse {
    match driven {
        rounds::Driven::Input(input) => input.into(),
        rounds::Driven::Done(outcome) => outcome_result(outcome).into(),
    }
}

pub(super) fn outcome_result(outcome: Outcome) -> CallToolResult {
    if outcome.mcp {
        // A downstream server's (or an agent's) result, passed on as it is: a result of
        // this call, whatever revision the server speaks (2026-07-28 clients read
        // `resultType`; rmcp leaves it out for earlier ones).
        let mut result: CallToolResult =
            serde_json::from_value(outcome.value).unwrap_or_else(|e| {
                CallToolResult::error(vec![ContentBlock::text(format!(
                    "the downstream result could not be read: {e}"
                ))])
            });
        result.result_type = Some(rmcp::model::ResultType::COMPLETE);
        return result;
    }
    let body = match &outcome.value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(body)]);
    if outcome.structured {
        result.structured_content = Some(outcome.value);
    }
    result
}
