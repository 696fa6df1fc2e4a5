//! The calling client as the gateway asks it things over a session of an earlier revision
//! than 2026-07-28: a downstream server's requests passed through ([`Client`], riding the
//! response stream of the call they belong to), and the consent question as an
//! elicitation form ([`Elicit`]). A 2026-07-28 client is asked in rounds instead
//! (`rounds.rs`).

use rmcp::{Peer, RoleServer};
use serde_json::Value;

/// The calling client (its session's peer), for requests passed through from a downstream
/// server: parsed into rmcp's types here, JSON on both sides. Each request rides the
/// response stream of the call it belongs to (`call`) over Streamable HTTP, so that it
/// reaches the client whether or not the client holds a GET stream open.
pub(super) struct Client {
    pub peer: Peer<RoleServer>,
    pub session: u64,
    pub call: rmcp::model::RequestId,
}

impl crate::exec::Upstream for Client {
    fn offers(&self, ask: crate::exec::Ask) -> bool {
        use crate::exec::Ask;
        let Some(info) = self.peer.peer_info() else {
            return false;
        };
        let caps = &info.capabilities;
        match ask {
            Ask::Elicitation => caps.elicitation.is_some(),
            Ask::Sampling => caps.sampling.is_some(),
            Ask::Roots => caps.roots.is_some(),
        }
    }

    fn session(&self) -> u64 {
        self.session
    }

    #[allow(deprecated)] // sampling and roots: deprecated from 2026-07-28, used before it
    fn request(
        &self,
        ask: crate::exec::Ask,
        params: Value,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Value, crate::exec::Unanswered>> + Send>,
    > {
        use crate::exec::{Ask, Unanswered};
        let peer = self.peer.clone();
        let call = self.call.clone();
        Box::pin(async move {
            use rmcp::model::{ClientResult, ServerRequest};
            let bad = |e: serde_json::Error| Unanswered(format!("the request is not valid: {e}"));
            let answer = match ask {
                Ask::Elicitation => {
                    // Read as rmcp's type first: a request that is not a valid form fails here.
                    let typed: rmcp::model::ElicitRequestParams =
                        serde_json::from_value(params).map_err(bad)?;
                    let params = serde_json::to_value(&typed).map_err(bad)?;
                    serde_json::to_value(
                        elicit(&peer, params, Some(call))
                            .await
                            .map_err(Unanswered)?,
                    )
                }
                Ask::Sampling => {
                    let params: rmcp::model::CreateMessageRequestParams =
                        serde_json::from_value(params).map_err(bad)?;
                    params.validate().map_err(Unanswered)?;
                    let request = ServerRequest::CreateMessageRequest(
                        rmcp::model::CreateMessageRequest::new(params),
                    );
                    match send_for(&peer, request, call).await? {
                        ClientResult::CreateMessageResult(r) => serde_json::to_value(r),
                        _ => {
                            return Err(Unanswered(
                                "the client answered something else than a sampling result"
                                    .to_owned(),
                            ));
                        }
                    }
                }
                Ask::Roots => {
                    let request =
                        ServerRequest::ListRootsRequest(rmcp::model::ListRootsRequest::default());
                    match send_for(&peer, request, call).await? {
                        ClientResult::ListRootsResult(r) => serde_json::to_value(r),
                        _ => {
                            return Err(Unanswered(
                                "the client answered something else than a roots list".to_owned(),
                            ));
                        }
                    }
                }
            };
            answer.map_err(|e| Unanswered(e.to_string()))
        })
    }
}

/// Sends `request` to the client on the response stream of the call `call` (Streamable
/// HTTP; on stdio there is one stream).
#[allow(deprecated)] // sampling and roots: deprecated from 2026-07-28, used before it
async fn send_for(
    peer: &Peer<RoleServer>,
    mut request: rmcp::model::ServerRequest,
    call: rmcp::model::RequestId,
) -> Result<rmcp::model::ClientResult, crate::exec::Unanswered> {
    use rmcp::model::GetExtensions;
    request
        .extensions_mut()
        .insert(rmcp::service::OriginatingRequestId(call));
    // Sent from a task of its own: rmcp marks a request sent inside a request handler with
    // that handler's request, and the downstream server's request being handled here is
    // not one of this client's (task-locals do not cross a spawn). Aborted when the wait
    // for it is dropped.
    let peer = peer.clone();
    let sending = tokio::spawn(async move { peer.send_request(request).await });
    let mut sending = AbortOnDrop(sending);
    match (&mut sending.0).await {
        Ok(answer) => answer.map_err(|e| crate::exec::Unanswered(e.to_string())),
        Err(e) => Err(crate::exec::Unanswered(format!(
            "the request to the client failed: {e}"
        ))),
    }
}

/// A spawned task, aborted when this is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sends `elicitation/create` as the session's revision writes it: before 2025-11-25 a
/// form has no `mode` (rmcp writes one always).
async fn elicit(
    peer: &Peer<RoleServer>,
    params: Value,
    call: Option<rmcp::model::RequestId>,
) -> Result<rmcp::model::ElicitResult, String> {
    use rmcp::model::{ClientResult, CustomRequest, ServerRequest};
    let mut params = params;
    let modeless = peer
        .peer_info()
        .is_some_and(|i| i.protocol_version < rmcp::model::ProtocolVersion::V_2025_11_25);
    if modeless
        && let Value::Object(p) = &mut params
        && p.get("mode").and_then(Value::as_str) == Some("form")
    {
        p.remove("mode");
    }
    let request =
        ServerRequest::CustomRequest(CustomRequest::new("elicitation/create", Some(params)));
    let answer = match call {
        // A downstream server's question rides the response stream of the call it belongs to.
        Some(call) => send_for(peer, request, call).await.map_err(|e| e.0)?,
        None => peer
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?,
    };
    match answer {
        ClientResult::ElicitResult(r) => Ok(r),
        ClientResult::CustomResult(v) => serde_json::from_value(v.0).map_err(|e| e.to_string()),
        _ => Err("the client answered something else than an elicitation result".to_owned()),
    }
}

/// Asks the user through MCP elicitation: a form with one choice.
pub(super) struct Elicit(pub Peer<RoleServer>);

impl std::fmt::Debug for Elicit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Elicit")
    }
}

impl crate::consent::Prompter for Elicit {
    fn ask<'a>(
        &'a self,
        question: &'a crate::consent::Question,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = crate::consent::Reply> + Send + 'a>>
    {
        use crate::consent::{Choice, Reply};
        use rmcp::model::ElicitationAction;
        Box::pin(async move {
            let Some(form) = super::rounds::consent_form(question) else {
                return Reply::Unavailable("the consent form could not be built".to_owned());
            };
            let form = match serde_json::to_value(&form) {
                Ok(form) => form,
                Err(e) => return Reply::Unavailable(format!("the consent form: {e}")),
            };
            let answer = match elicit(&self.0, form, None).await {
                Ok(answer) => answer,
                // The client could not ask (or answered with an error): not an answer.
                Err(e) => {
                    return Reply::Unavailable(format!("the client's elicitation failed: {e}"));
                }
            };
            match answer.action {
                ElicitationAction::Accept => answer
                    .content
                    .as_ref()
                    .and_then(|c| c.get("decision")?.as_str().and_then(Choice::parse))
                    .map_or(Reply::Declined, Reply::Chosen),
                // Closed without a choice: what clients that cannot show forms answer.
                ElicitationAction::Cancel => Reply::Unshown("the client answered `cancel`".into()),
                // Declined (or an action this rmcp does not know): no.
                _ => Reply::Declined,
            }
        })
    }
}
