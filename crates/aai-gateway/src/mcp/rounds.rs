//! The round trips of MCP 2026-07-28 (multi round-trip requests): a server cannot send a
//! client requests mid-call, so a `tools/call` that needs the user answers with an
//! input-required result, and the client calls again with the answers and the sealed
//! `requestState`. Two kinds of question travel this way:
//!
//! * the gateway's own consent question, asked before the call runs (`consent`);
//! * a downstream MCP server's elicitation, sampling or roots request made while its
//!   call runs (`server`). The call is parked, still running, until the client's retry
//!   brings the answer; then it goes on, and ends in its result or the next question.
//!
//! Each state is sealed with a key random per run, bound to the caller, app and tool,
//! answered once, and expires after [`ROUND_TTL`]. At most [`MAX_PARKED`] calls wait for
//! an answer at once; a parked call not resumed in time is cancelled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientCapabilities, ElicitRequest, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, SealOptions,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::consent::{Choice, Reply};
use crate::error::{Code, GatewayError};
use crate::exec::{Ask, Unanswered};
use crate::pipeline::Outcome;

/// The key of the consent question in an input-required result.
const CONSENT_INPUT: &str = "consent";
/// The key of a downstream server's request in an input-required result.
const SERVER_INPUT: &str = "server";

/// How long a question asked through an input-required result may be answered.
const ROUND_TTL: Duration = Duration::from_secs(600);

/// Most calls parked at once, waiting for their client's answer.
pub(super) const MAX_PARKED: usize = 64;

/// A state's sealed content: what it asks ([`CONSENT`] or [`SERVER`]), then 16 random
/// bytes.
type Nonce = Vec<u8>;
/// A state of the consent question.
const CONSENT: u8 = 0;
/// A state of a downstream server's request.
const SERVER: u8 = 1;

/// What a retried `tools/call` brings back.
#[derive(Debug, Clone, Copy)]
pub(super) struct Round<'a> {
    pub responses: Option<&'a InputResponses>,
    pub state: Option<&'a str>,
}

/// Seals `requestState` with a key random per run: the client echoes it unverified.
fn codec() -> &'static rmcp::model::RequestStateCodec {
    static CODEC: std::sync::OnceLock<rmcp::model::RequestStateCodec> = std::sync::OnceLock::new();
    CODEC.get_or_init(|| {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the OS has randomness");
        rmcp::model::RequestStateCodec::try_new(key.to_vec()).expect("a 32-byte key")
    })
}

/// Whether the state sealing `nonce` is opened for the first time in this run. Used
/// nonces are kept until their states expire (states of an earlier run do not open).
fn first_use(nonce: &[u8]) -> bool {
    static USED: Mutex<Option<HashMap<Vec<u8>, Instant>>> = Mutex::new(None);
    let mut used = USED.lock().expect("used states lock");
    let used = used.get_or_insert_with(HashMap::new);
    let now = Instant::now();
    used.retain(|_, at| now.duration_since(*at) < ROUND_TTL);
    used.insert(nonce.to_vec(), now).is_none()
}

/// What a state is bound to: this caller, this app and tool as the client named them.
pub(super) fn bound_to(caller: &crate::identity::Caller, app: &str, tool: &str) -> Vec<u8> {
    format!("{}\n{app}\n{tool}", caller.key()).into_bytes()
}

/// A new state of `kind` bound to `bound`, and the nonce it seals.
fn seal(bound: &[u8], kind: u8) -> Result<(String, Nonce), GatewayError> {
    let options = SealOptions::new().associated_data(bound).ttl(ROUND_TTL);
    let mut nonce = [kind; 17];
    getrandom::fill(&mut nonce[1..]).map_err(|e| {
        GatewayError::new(
            Code::AutomationFailed,
            format!("no randomness for the request state: {e}"),
        )
    })?;
    Ok((codec().seal_with(&nonce, &options), nonce.to_vec()))
}

impl Round<'_> {
    /// The nonce of this retry's state: `None` when this is no retry. A state that does
    /// not verify (forged, expired, from another run, or for another caller, app or tool)
    /// is refused.
    pub(super) fn open(&self, bound: &[u8]) -> Result<Option<Nonce>, GatewayError> {
        let Some(state) = self.state else {
            return Ok(None);
        };
        let nonce = codec().open_with(state, bound).map_err(|e| {
            tracing::debug!("requestState refused: {e}");
            GatewayError::new(
                Code::InvalidParams,
                "the requestState of this retry is not one this gateway issued for this call (or it expired); call the tool again without it",
            )
        })?;
        // Each question is answered once: a replayed "allow once" must not run again.
        if !first_use(&nonce) {
            return Err(GatewayError::new(
                Code::InvalidParams,
                "this requestState was already answered; call the tool again without it",
            ));
        }
        Ok(Some(nonce))
    }

    /// The user's answer to the consent question.
    pub(super) fn consent_reply(&self) -> Reply {
        use rmcp::model::{ElicitResult, ElicitationAction};
        let reply = self
            .responses
            .and_then(|r| r.get(CONSENT_INPUT))
            .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
        match reply {
            Some(r) if r.action == ElicitationAction::Accept => r
                .content
                .and_then(|c| c.get("decision")?.as_str().and_then(Choice::parse))
                .map_or(Reply::Declined, Reply::Chosen),
            // Closed without a choice, or no answer to the question at all: not a no.
            Some(r) if r.action == ElicitationAction::Cancel => {
                Reply::Unshown("the client answered `cancel`".into())
            }
            None => Reply::Unshown("the retry carried no answer".into()),
            Some(_) => Reply::Declined,
        }
    }
}

/// The consent question as an input-required result, its state sealed and bound to the
/// call.
pub(super) fn consent_required(
    question: &crate::consent::Question,
    app: &str,
    tool: &str,
) -> Result<InputRequiredResult, GatewayError> {
    let form = consent_form(question).ok_or_else(|| {
        GatewayError::new(
            Code::AutomationFailed,
            "the consent form could not be built",
        )
    })?;
    let mut requests = InputRequests::new();
    requests.insert(
        CONSENT_INPUT.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(form)),
    );
    let (state, _) = seal(&bound_to(&question.caller, app, tool), CONSENT)?;
    Ok(InputRequiredResult::new(Some(requests), Some(state)))
}

/// The consent question as an elicitation form with one choice.
pub(super) fn consent_form(
    question: &crate::consent::Question,
) -> Option<rmcp::model::ElicitRequestParams> {
    use rmcp::model::{ElicitRequestParams, ElicitationSchema, EnumSchema};
    let values = question
        .choices()
        .map(|(_, v, _)| (*v).to_owned())
        .collect();
    let titles = question
        .choices()
        .map(|(_, _, t)| (*t).to_owned())
        .collect();
    let choice = EnumSchema::builder(values)
        .enum_titles(titles)
        .ok()?
        .build();
    let schema = ElicitationSchema::builder()
        .required_enum_schema("decision", choice)
        .build()
        .ok()?;
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question.text(),
        requested_schema: schema,
    })
}

/// How a call of a round-trip client asks the user: the tool's own question with the
/// answer the client gave in the round before the call (once, and only that question);
/// any other (an ACP agent's permission request, a downstream server's sampling) in a
/// round of its own, as an elicitation form, when the client takes forms.
pub(super) struct Prompter {
    answered: Mutex<Option<(crate::consent::Question, Reply)>>,
    client: crate::exec::UpstreamRef,
}

impl std::fmt::Debug for Prompter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("rounds::Prompter")
    }
}

impl Prompter {
    pub(super) fn new(
        answered: Option<(crate::consent::Question, Reply)>,
        client: crate::exec::UpstreamRef,
    ) -> Prompter {
        Prompter {
            answered: Mutex::new(answered),
            client,
        }
    }
}

impl crate::consent::Prompter for Prompter {
    fn ask<'a>(
        &'a self,
        question: &'a crate::consent::Question,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Reply> + Send + 'a>> {
        Box::pin(async move {
            let given = {
                let mut answered = self.answered.lock().expect("answered lock");
                match answered.take() {
                    Some((asked, reply))
                        if asked.app == question.app && asked.tool == question.tool =>
                    {
                        Some(reply)
                    }
                    other => {
                        *answered = other;
                        None
                    }
                }
            };
            if let Some(reply) = given {
                return reply;
            }
            if !self.client.offers(Ask::Elicitation) {
                return Reply::Unavailable("the client takes no forms".to_owned());
            }
            let Some(form) = consent_form(question).and_then(|f| serde_json::to_value(f).ok())
            else {
                return Reply::Unavailable("the consent form could not be built".to_owned());
            };
            let answer = match self.client.request(Ask::Elicitation, form).await {
                Ok(answer) => answer,
                Err(e) => return Reply::Unavailable(e.0),
            };
            let Ok(answer) = serde_json::from_value::<rmcp::model::ElicitResult>(answer) else {
                return Reply::Unavailable("the client's answer is not a form's".to_owned());
            };
            match answer.action {
                rmcp::model::ElicitationAction::Accept => answer
                    .content
                    .and_then(|c| c.get("decision")?.as_str().and_then(Choice::parse))
                    .map_or(Reply::Declined, Reply::Chosen),
                rmcp::model::ElicitationAction::Cancel => {
                    Reply::Unshown("the client answered `cancel`".into())
                }
                _ => Reply::Declined,
            }
        })
    }
}

/// What a running call of a round-trip client tells its front door.
enum Event {
    /// Its downstream server asks the client `request`; the answer goes to `reply`.
    Ask {
        ask: Ask,
        request: Box<InputRequest>,
        reply: oneshot::Sender<Result<Value, Unanswered>>,
    },
    /// It ended.
    Done(Result<Outcome, GatewayError>),
}

/// A call of a round-trip client, running: between rounds it is parked in [`Parking`].
/// Dropped, it cancels the call.
pub(super) struct Running {
    events: mpsc::Receiver<Event>,
    /// The question the client is answering, and where its answer goes.
    waiting: Option<(Ask, oneshot::Sender<Result<Value, Unanswered>>)>,
    cancel: CancellationToken,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// What a round of a call gives the client.
pub(super) enum Driven {
    /// A question for the client, the call parked until it answers.
    Input(InputRequiredResult),
    /// The call's end.
    Done(Outcome),
}

impl Running {
    /// Starts `call` (given the upstream through which its downstream server asks, and
    /// the token that cancels it) for a client with `capabilities`.
    pub(super) fn start<F, Fut>(
        capabilities: Option<ClientCapabilities>,
        session: u64,
        call: F,
    ) -> Running
    where
        F: FnOnce(crate::exec::UpstreamRef, CancellationToken) -> Fut,
        Fut: std::future::Future<Output = Result<Outcome, GatewayError>> + Send + 'static,
    {
        // One question at a time crosses to the client; a server's others wait.
        let (sender, events) = mpsc::channel(1);
        let cancel = CancellationToken::new();
        let upstream = Arc::new(RoundTrip {
            capabilities,
            session,
            events: sender.clone(),
        });
        let running = call(upstream, cancel.clone());
        tokio::spawn(async move {
            let outcome = running.await;
            let _ = sender.send(Event::Done(outcome)).await;
        });
        Running {
            events,
            waiting: None,
            cancel,
        }
    }

    /// Hands the client's answer (in `responses`) to the downstream server that asked.
    fn answer(&mut self, responses: Option<&InputResponses>) {
        let Some((ask, reply)) = self.waiting.take() else {
            return;
        };
        let answer = match responses.and_then(|r| r.get(SERVER_INPUT)) {
            None => Err(Unanswered(
                "the client's retry carried no answer to the server's request".to_owned(),
            )),
            Some(value) => checked(ask, value),
        };
        let _ = reply.send(answer);
    }
}

/// The client's answer, read as the result type of its request.
#[allow(deprecated)] // sampling and roots: deprecated from 2026-07-28, still served
fn checked(ask: Ask, value: &Value) -> Result<Value, Unanswered> {
    let bad = |e: serde_json::Error| Unanswered(format!("the client's answer is not valid: {e}"));
    let typed = match ask {
        Ask::Elicitation => serde_json::to_value(
            serde_json::from_value::<rmcp::model::ElicitResult>(value.clone()).map_err(bad)?,
        ),
        Ask::Sampling => serde_json::to_value(
            serde_json::from_value::<rmcp::model::CreateMessageResult>(value.clone())
                .map_err(bad)?,
        ),
        Ask::Roots => serde_json::to_value(
            serde_json::from_value::<rmcp::model::ListRootsResult>(value.clone()).map_err(bad)?,
        ),
    };
    typed.map_err(bad)
}

/// The calls parked between rounds, by their state's nonce (one per listener).
#[derive(Default)]
pub(super) struct Parking {
    parked: Mutex<HashMap<Nonce, (Instant, Running)>>,
}

impl Parking {
    /// For a state of a downstream server's request, the call parked under it, taken out
    /// of the parking (it is answered once); `None` for a consent state. A call that is no
    /// longer parked (it ended, or waited past [`ROUND_TTL`]) is an error: its answer is
    /// not taken as leave to run the tool again.
    pub(super) fn take(&self, nonce: &[u8]) -> Result<Option<Running>, GatewayError> {
        if nonce.first() != Some(&SERVER) {
            return Ok(None);
        }
        self.parked
            .lock()
            .expect("parking lock")
            .remove(nonce)
            .map(|(_, running)| Some(running))
            .ok_or_else(|| {
                GatewayError::new(
                    Code::InvalidParams,
                    "the call this answer is for is no longer waiting for it (it ended, or waited too long); call the tool again",
                )
            })
    }

    /// Parks `running` under `nonce`: refused (and the call cancelled) when
    /// [`MAX_PARKED`] calls wait already. Calls parked longer than [`ROUND_TTL`] go.
    fn park(&self, nonce: Nonce, running: Running) -> Result<(), GatewayError> {
        let mut parked = self.parked.lock().expect("parking lock");
        parked.retain(|_, (at, _)| at.elapsed() < ROUND_TTL);
        if parked.len() >= MAX_PARKED {
            return Err(GatewayError::new(
                Code::AutomationFailed,
                format!(
                    "{MAX_PARKED} calls are waiting for their clients' answers; the server's request cannot be passed on now"
                ),
            ));
        }
        parked.insert(nonce, (Instant::now(), running));
        Ok(())
    }

    /// Runs a round of `running`: the answer of this retry goes to the server that asked,
    /// then the call goes on until it ends or asks again (then it is parked, and the
    /// question returned). Cancelling the request (`cancel`) cancels the call.
    pub(super) async fn drive(
        &self,
        mut running: Running,
        responses: Option<&InputResponses>,
        cancel: &CancellationToken,
        bound: &[u8],
    ) -> Result<Driven, GatewayError> {
        running.answer(responses);
        let event = tokio::select! {
            event = running.events.recv() => event,
            () = cancel.cancelled() => {
                return Err(GatewayError::new(Code::AutomationFailed, "the call was cancelled"));
            }
        };
        match event {
            Some(Event::Done(outcome)) => outcome.map(Driven::Done),
            Some(Event::Ask {
                ask,
                request,
                reply,
            }) => {
                running.waiting = Some((ask, reply));
                let (state, nonce) = seal(bound, SERVER)?;
                self.park(nonce, running)?;
                let mut requests = InputRequests::new();
                requests.insert(SERVER_INPUT.to_owned(), *request);
                Ok(Driven::Input(InputRequiredResult::new(
                    Some(requests),
                    Some(state),
                )))
            }
            None => Err(GatewayError::new(
                Code::AutomationFailed,
                "the call ended without a result",
            )),
        }
    }
}

/// A round-trip client as a downstream server's requests reach it: each request becomes
/// the input-required result of the call's current round.
struct RoundTrip {
    capabilities: Option<ClientCapabilities>,
    session: u64,
    events: mpsc::Sender<Event>,
}

impl crate::exec::Upstream for RoundTrip {
    fn offers(&self, ask: Ask) -> bool {
        let Some(caps) = &self.capabilities else {
            return false;
        };
        match ask {
            Ask::Elicitation => caps.elicitation.is_some(),
            #[allow(deprecated)] // sampling and roots: deprecated from 2026-07-28, still served
            Ask::Sampling => caps.sampling.is_some(),
            #[allow(deprecated)]
            Ask::Roots => caps.roots.is_some(),
        }
    }

    fn session(&self) -> u64 {
        self.session
    }

    #[allow(deprecated)] // sampling and roots: deprecated from 2026-07-28, still served
    fn request(
        &self,
        ask: Ask,
        params: Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, Unanswered>> + Send>>
    {
        let events = self.events.clone();
        Box::pin(async move {
            let bad = |e: serde_json::Error| Unanswered(format!("the request is not valid: {e}"));
            let request = match ask {
                Ask::Elicitation => InputRequest::Elicitation(ElicitRequest::new(
                    serde_json::from_value(params).map_err(bad)?,
                )),
                Ask::Sampling => {
                    let params: rmcp::model::CreateMessageRequestParams =
                        serde_json::from_value(params).map_err(bad)?;
                    params.validate().map_err(Unanswered)?;
                    InputRequest::CreateMessage(rmcp::model::CreateMessageRequest::new(params))
                }
                Ask::Roots => InputRequest::ListRoots(rmcp::model::ListRootsRequest::default()),
            };
            let (reply, answer) = oneshot::channel();
            events
                .send(Event::Ask {
                    ask,
                    request: Box::new(request),
                    reply,
                })
                .await
                .map_err(|_| Unanswered("the call's client is gone".to_owned()))?;
            answer.await.map_err(|_| {
                Unanswered("the client did not come back with an answer in time".to_owned())
            })?
        })
    }
}
