//! A call's stages, in order: [`Pipeline::find`] the app (the person's rate limit, a URL
//! discovered, the lookup); [`Pipeline::resolve`] it (the app's rate limit, the start of a
//! server that has never listed its tools asked about, its tools listed);
//! [`Pipeline::authorize`] the call (the tool, its arguments, the gateway's own app,
//! consent); [`Pipeline::execute`] it (credentials, the executor, one renewal of a refused
//! credential); then the result checked against the tool's `returns`. Every error after the
//! app is found names the app and the tool, once, in [`Pipeline::call_inner`].

use std::sync::Arc;

use aai_descriptor::{Binding, Executor, McpServer, Tool};
use serde_json::Value;

use super::{
    AGENT_TIMEOUT, Control, Outcome, Pipeline, Trace, UNLISTED, base_dir, is_url, no_such_tool,
    not_served, validate,
};
use crate::consent::Question;
use crate::error::GatewayError;
use crate::exec::{self, CallContext, Request};
use crate::identity::{Caller, Who};
use crate::registry::{Entry, Snapshot};
use crate::telemetry::{self, Kind};

/// The app of a call, found, its tools listed.
struct Resolved {
    snapshot: Arc<Snapshot>,
    /// The user was asked already (about the call and its server's start together).
    asked: bool,
}

/// What authorizing a call gave.
enum Authorized {
    /// It may run, with these arguments (defaults filled in, validated); `question` is
    /// what the user was asked (or would have been), for the asks of the call itself.
    Run {
        args: Value,
        question: Box<Question>,
    },
    /// It ran already: the gateway's own app.
    Done(Outcome),
}

/// How a call reaches its credentials.
#[derive(Clone, Copy)]
struct Credentials<'a> {
    /// A web app's or a remote MCP server's descriptor `auth`, and the URL it is for.
    web: Option<(&'a aai_descriptor::Auth, &'a str)>,
    /// A remote MCP server without a descriptor `auth` signs in the MCP way (`auth::mcp`).
    mcp_sign_in: Option<&'a str>,
    /// Whose sign-in is used ([`Pipeline::who`]).
    who: &'a Who,
}

impl<'a> Credentials<'a> {
    fn of(binding: &'a Binding, who: &'a Who) -> Credentials<'a> {
        let web = match (&binding.executor, &binding.auth) {
            (Executor::Http(h), Some(a)) => Some((a, h.base_url.as_str())),
            (Executor::Mcp(McpServer::Http { url, .. }), Some(a)) => Some((a, url.as_str())),
            _ => None,
        };
        let mcp_sign_in = match (&binding.executor, &binding.auth) {
            (Executor::Mcp(McpServer::Http { url, .. }), None) => Some(url.as_str()),
            _ => None,
        };
        Credentials {
            web,
            mcp_sign_in,
            who,
        }
    }

    /// Whether the credential is a sign-in (OAuth), which in team mode is each person's
    /// own; an API key, cookie, app credential or `${NAME}` secret is the app's.
    fn signs_in(&self) -> bool {
        self.mcp_sign_in.is_some() || matches!(self.web, Some((aai_descriptor::Auth::OAuth2(_), _)))
    }

    /// The span attribute naming them.
    fn kind(&self) -> &'static str {
        match (self.web, self.mcp_sign_in) {
            (Some((a, _)), _) => a.kind().as_str(),
            (None, Some(_)) => "mcp-authorization",
            (None, None) => "none",
        }
    }
}

/// After a refused attempt: try once more (a credential was renewed), or stop.
enum Next {
    Again,
    Stop(GatewayError),
}

impl Pipeline {
    /// Team mode (`web.auth`): a person's calls to a remote MCP server that trusts the
    /// team's authorization server use their own token exchanged for one of that server's
    /// (`access::exchange`), when the authorization server offers it.
    pub fn set_team(&self, team: Arc<crate::access::resource::Resource>) {
        let _ = self
            .exchange
            .set(crate::access::exchange::Exchanger::new(team));
    }

    /// What a request to the remote MCP server of `app` at `url` carries for `who`: their
    /// own sign-in (see `Authenticator::mcp_material`: one they made wins, and asking for
    /// wider scope works through it), else a person's token exchanged for the server's.
    /// The flag says whether it was exchanged.
    pub(crate) async fn mcp_material(
        &self,
        app: &str,
        who: &Who,
        person: Option<&crate::identity::Person>,
        url: &str,
    ) -> Result<(Option<crate::auth::Material>, bool), crate::auth::Error> {
        if let Some(material) = self.auth.mcp_material(app, who, url).await? {
            return Ok((Some(material), false));
        }
        if let (Some(exchange), Who::Person(_), Some(person)) = (self.exchange.get(), who, person)
            && let Some(token) = exchange.token(url, person).await
        {
            return Ok((Some(crate::auth::bearer(&token)), true));
        }
        if who.person().is_some() {
            self.auth.warn_of_unused_sign_in(app).await;
        }
        Ok((None, false))
    }

    /// Whose sign-in `caller`'s calls to `entry`'s app use upstream: a person of the team
    /// their own, when the app signs in with OAuth and its sign-in is not shared
    /// (`apps.<id>.signIn`); everyone else, and every other credential, the app's one.
    pub fn who(&self, entry: &Entry, caller: &Caller) -> Who {
        match &caller.person {
            Some(person)
                if Credentials::of(entry.binding(), &Who::Shared).signs_in()
                    && !self.settings.shared_sign_ins.contains(&entry.app.id) =>
            {
                Who::Person(person.subject.as_str().into())
            }
            _ => Who::Shared,
        }
    }

    /// The call itself; `trace` receives the app's id and the secrets the request carried
    /// (for scrubbing what is recorded).
    pub(super) async fn call_inner(
        &self,
        app: &str,
        tool: &str,
        args: Option<Value>,
        control: Control<'_>,
        origin: &super::Origin,
        trace: &mut Trace,
    ) -> Result<Outcome, GatewayError> {
        let (snapshot, app_id) = self.find(app, tool, origin, trace).await?;
        let staged = async {
            let resolved = self
                .resolve(snapshot, &app_id, tool, origin, control.spans, trace)
                .await?;
            let snapshot = resolved.snapshot.clone();
            let entry = snapshot
                .find(&app_id)
                .ok_or_else(|| not_served(&snapshot, &app_id, self.settings.os))?;
            let binding = entry.binding();
            let Some(found) = binding.tool(tool) else {
                return Err(no_such_tool(&app_id, binding, tool));
            };
            trace.tool = Some(found.name.clone());
            let (args, question) = match self
                .authorize(&resolved, entry, found, args, origin, control.spans, trace)
                .await?
            {
                Authorized::Done(outcome) => return Ok(outcome),
                Authorized::Run { args, question } => (args, question),
            };
            let reply = self
                .execute(entry, found, args, &question, &control, origin, trace)
                .await?;
            Ok(checked(&app_id, found, reply))
        };
        let result = staged.await;
        result.map_err(|e| e.at(&app_id, trace.tool.as_deref().unwrap_or(tool)))
    }

    /// The app `app` names, after the caller's person bucket admitted the call: a URL the
    /// caller wrote out is discovered first (only then does anything leave the machine: an
    /// unknown id, even one that looks like a domain, is APP_NOT_FOUND). Returns the
    /// snapshot and the app's id.
    async fn find(
        &self,
        app: &str,
        tool: &str,
        origin: &super::Origin,
        trace: &mut Trace,
    ) -> Result<(Arc<Snapshot>, String), GatewayError> {
        let mut snapshot = self.view(self.snapshot().await, &origin.caller);
        // Each call counts against its person first, whatever becomes of it.
        if let Some(limits) = &self.limits
            && let Err(e) = limits.admit_person(&origin.caller).await
        {
            if let Some(entry) = snapshot.find(app) {
                trace.app_id = Some(entry.app.id.clone());
                trace.tool = entry.binding().tool(tool).map(|t| t.name.clone());
            }
            trace.limited = Some(e.scope());
            return Err(e.into());
        }
        let mut app = std::borrow::Cow::Borrowed(app);
        if snapshot.find(&app).is_none() && snapshot.missing(&app).is_none() && is_url(&app) {
            app = self.apps.discover_web(&app).await?.into();
            snapshot = self.view(self.snapshot().await, &origin.caller);
        }
        let id = snapshot
            .find(&app)
            .ok_or_else(|| not_served(&snapshot, &app, self.settings.os))?
            .app
            .id
            .clone();
        trace.app_id = Some(id.clone());
        Ok((snapshot, id))
    }

    /// The app's bucket; then, for a downstream MCP server that may not start yet and has
    /// never listed its tools, the user asked about the call and the start together
    /// (before anything runs); then the server's tools listed on its first use.
    async fn resolve(
        &self,
        snapshot: Arc<Snapshot>,
        app_id: &str,
        tool: &str,
        origin: &super::Origin,
        spans: &telemetry::Call,
        trace: &mut Trace,
    ) -> Result<Resolved, GatewayError> {
        let entry = snapshot
            .find(app_id)
            .ok_or_else(|| not_served(&snapshot, app_id, self.settings.os))?;
        if let Some(limits) = &self.limits
            && let Err(e) = limits.admit_app(app_id).await
        {
            trace.tool = entry.binding().tool(tool).map(|t| t.name.clone());
            trace.limited = Some(e.scope());
            return Err(e.into());
        }
        let mut asked = false;
        if entry.binding().tool(tool).is_none()
            && self.unapproved_server(entry)
            && let Some(start) = self.start_to_approve(entry)
        {
            let question = Question {
                start: Some(start),
                ..Question::for_call(&origin.caller, app_id, snapshot.name(entry), tool, UNLISTED)
            };
            self.asked(&question, origin, spans).await?;
            asked = true;
        }
        let snapshot = self.view(
            self.remote_tools(snapshot, app_id, &origin.caller).await?,
            &origin.caller,
        );
        Ok(Resolved { snapshot, asked })
    }

    /// The tool's arguments (defaults filled in, validated); the gateway's own app run
    /// (it asks about each change itself); else consent for the call, asked unless the
    /// user was asked already and what starts has not changed since.
    #[allow(clippy::too_many_arguments)]
    async fn authorize(
        &self,
        resolved: &Resolved,
        entry: &Entry,
        tool: &Tool,
        args: Option<Value>,
        origin: &super::Origin,
        spans: &telemetry::Call,
        trace: &mut Trace,
    ) -> Result<Authorized, GatewayError> {
        let snapshot = &resolved.snapshot;
        let app_id = entry.app.id.as_str();
        let binding = entry.binding();
        // What an "always" answer is tied to, and history records.
        let definition = self.memo.definition(entry, tool);
        trace.fingerprint = Some(definition.fingerprint.clone());
        // Arguments the user fixed (config `apps.<id>.tools`) are checked apart from the
        // ones the schema agents see describes, and added back for the app.
        let args = crate::overrides::without_fixed(tool, args)?;
        let mut args = crate::overrides::with_fixed(tool, validate(tool, args).await?);
        if tool
            .overridden
            .as_ref()
            .is_some_and(|o| !o.fixed.is_empty())
        {
            // What the app gets with the fixed arguments, checked against its own schema
            // too (a rename or a default changes nothing it would refuse).
            args = validate(tool.as_defined(), Some(args)).await?;
        }
        if matches!(binding.executor, Executor::Gateway) {
            let outcome = self
                .manage(snapshot, entry, tool, &args, origin, spans)
                .await?;
            return Ok(Authorized::Done(outcome));
        }
        let question = Question {
            args: Question::shown_args(&args),
            read_only: tool.read_only,
            site: self.site_to_check(app_id, binding, &origin.caller).await?,
            start: self.start_to_name(entry),
            definition: Some(definition),
            within: origin.within.as_ref().map(|w| (w.clone(), w.note(tool))),
            ..Question::for_call(
                &origin.caller,
                app_id,
                snapshot.name(entry),
                &tool.name,
                &tool.description,
            )
        };
        // Asked already, unless what starts changed while the user was asked (the
        // descriptor was edited): the new command is asked about again.
        if !resolved.asked || self.start_to_approve(entry).is_some() {
            self.asked(&question, origin, spans).await?;
        }
        Ok(Authorized::Run {
            args,
            question: Box::new(question),
        })
    }

    /// The call run by its executor, with its credentials: the secrets of the binding's
    /// `${NAME}` placeholders and the app's credential, read now. A credential the
    /// service refuses is renewed once when it can be (an exchanged or OAuth token, a
    /// remote MCP server's token); else the error says how to sign in again.
    #[allow(clippy::too_many_arguments)]
    async fn execute(
        &self,
        entry: &Entry,
        tool: &Tool,
        args: Value,
        question: &Question,
        control: &Control<'_>,
        origin: &super::Origin,
        trace: &mut Trace,
    ) -> Result<exec::Reply, GatewayError> {
        let spans = control.spans;
        let app_id = entry.app.id.as_str();
        let binding = entry.binding();
        let who = self.who(entry, &origin.caller);
        let credentials = Credentials::of(binding, &who);
        let ctx = self.context(entry, tool, question, control, origin);
        let mut credentials_span = Some(spans.child(telemetry::CREDENTIALS, Kind::Internal));
        // The secrets the binding's `${NAME}` placeholders stand for (none: nothing read).
        let filled = match self
            .auth
            .placeholders(
                app_id,
                &binding.executor,
                self.settings.secrets_from_environment,
            )
            .await
        {
            Ok(filled) => filled,
            Err(e) => {
                let e = GatewayError::from(e);
                if let Some(span) = credentials_span.take() {
                    spans.end(span, Err(e.code.name()));
                }
                return Err(e);
            }
        };
        let mut attempt = 0;
        let mut exchanged = false;
        loop {
            attempt += 1;
            let mut span = credentials_span
                .take()
                .unwrap_or_else(|| spans.child(telemetry::CREDENTIALS, Kind::Internal));
            span.set("aai.credentials.kind", credentials.kind());
            span.set(
                "aai.credentials.placeholders",
                i64::try_from(filled.len()).unwrap_or(i64::MAX),
            );
            span.set("aai.attempt", i64::from(attempt));
            let material = match (credentials.web, credentials.mcp_sign_in) {
                (Some((a, base)), _) => self.auth.material(app_id, &who, a, base).await.map(Some),
                (None, Some(url)) => {
                    let person = origin.caller.person.as_deref();
                    let material = self.mcp_material(app_id, &who, person, url).await;
                    material.map(|(material, by_exchange)| {
                        exchanged = by_exchange;
                        material
                    })
                }
                (None, None) => Ok(None),
            }
            .map_err(GatewayError::from);
            spans.end(
                span,
                material.as_ref().map(|_| ()).map_err(|e| e.code.name()),
            );
            let material = material?;
            // What the service may echo back of the credential, to scrub from errors.
            let mut secrets = material
                .as_ref()
                .map(crate::auth::Material::secret_forms)
                .unwrap_or_default();
            secrets.extend(crate::auth::echoes(filled.iter().map(|(_, v)| v.expose())));
            trace.secrets.clone_from(&secrets);
            let mut executing = spans.child(telemetry::EXECUTE, Kind::Client);
            executing.set("aai.executor", binding.executor.kind().as_str());
            executing.set("aai.attempt", i64::from(attempt));
            let result = self
                .executors
                .execute(Request {
                    app: app_id,
                    executor: &binding.executor,
                    base_dir: base_dir(entry),
                    tool: tool.as_defined(),
                    args: args.clone(),
                    auth: material,
                    who: who.clone(),
                    secrets: filled.clone(),
                    ctx: CallContext {
                        trace: executing.context().cloned(),
                        ..ctx.clone()
                    },
                })
                .await;
            let result = result.map_err(|e| {
                let scope = e.needs_scope();
                (
                    e.unauthorized(),
                    scope,
                    GatewayError::from(e).scrub(&secrets),
                )
            });
            spans.end(
                executing,
                result
                    .as_ref()
                    .map(|_| ())
                    .map_err(|(_, _, e)| e.code.name()),
            );
            let (unauthorized, scopes, e) = match result {
                Ok(reply) => return Ok(reply),
                Err(refused) => refused,
            };
            // An exchanged token refused: exchanged once more.
            if let (true, true, 1, Some(url), Some(exchange), Some(person)) = (
                exchanged,
                unauthorized,
                attempt,
                credentials.mcp_sign_in,
                self.exchange.get(),
                &origin.caller.person,
            ) {
                exchange.forget(url, person);
                continue;
            }
            match self
                .after_refusal(app_id, credentials, attempt, unauthorized, scopes, e)
                .await?
            {
                Next::Again => continue,
                Next::Stop(e) => return Err(e),
            }
        }
    }

    /// What reaching `entry`'s app takes outside a call (listening to a downstream
    /// server's resource): its credential and the values of its `${NAME}` placeholders,
    /// read now.
    pub(super) async fn credentials(
        &self,
        entry: &Entry,
        who: &Who,
        caller: &Caller,
    ) -> Result<
        (
            Option<crate::auth::Material>,
            Vec<(String, crate::auth::Secret)>,
        ),
        GatewayError,
    > {
        let app_id = entry.app.id.as_str();
        let binding = entry.binding();
        let filled = self
            .auth
            .placeholders(
                app_id,
                &binding.executor,
                self.settings.secrets_from_environment,
            )
            .await?;
        let material = match Credentials::of(binding, who) {
            Credentials {
                web: Some((a, base)),
                ..
            } => self.auth.material(app_id, who, a, base).await.map(Some)?,
            Credentials {
                mcp_sign_in: Some(url),
                ..
            } => {
                let person = caller.person.as_deref();
                self.mcp_material(app_id, who, person, url).await?.0
            }
            _ => None,
        };
        Ok((material, filled))
    }

    /// How the call runs: its timeout (the tool's, else the binding's, else the default; an
    /// agent's own default), cancellation, progress, retries, and what the executor may
    /// ask of the user or the client mid-call.
    fn context(
        &self,
        entry: &Entry,
        tool: &Tool,
        question: &Question,
        control: &Control<'_>,
        origin: &super::Origin,
    ) -> CallContext {
        let binding = entry.binding();
        let agent = matches!(binding.executor, Executor::Acp(_));
        let mcp = matches!(binding.executor, Executor::Mcp(_));
        CallContext {
            timeout: tool.timeout.or(binding.timeout).unwrap_or(if agent {
                AGENT_TIMEOUT
            } else {
                self.settings.default_timeout
            }),
            cancel: control.cancel.clone(),
            progress: control.progress.clone(),
            retries: self.settings.retries,
            // Agents ask for permission mid-call, and MCP servers for sampling; only
            // agents open sessions in a folder.
            permission: (agent || mcp).then(|| self.permission_asker(question, origin)),
            cwd: self
                .settings
                .cwd
                .get(&entry.app.id)
                .cloned()
                .filter(|_| agent),
            upstream: origin.client.clone().filter(|_| mcp),
            trace: None,
        }
    }

    /// What follows a failed attempt: a remote MCP server that wants more scope has the
    /// next sign-in ask for it; a refused token is refreshed once (a remote MCP server's,
    /// or an exchanged or OAuth credential), else the error says how to sign in again; a
    /// static credential refused says so; any other error stands.
    async fn after_refusal(
        &self,
        app_id: &str,
        credentials: Credentials<'_>,
        attempt: u32,
        unauthorized: bool,
        scopes: Option<Vec<String>>,
        e: GatewayError,
    ) -> Result<Next, GatewayError> {
        let first = attempt == 1;
        let who = credentials.who;
        Ok(match (credentials.web, credentials.mcp_sign_in) {
            (None, Some(_)) if scopes.is_some() => {
                let scopes = scopes.unwrap_or_default();
                self.auth.mcp_wants(app_id, who, &scopes).await?;
                Next::Stop(GatewayError::from(self.auth.mcp_required(
                    app_id,
                    who,
                    &format!("{}; sign in again to grant it", e.detail),
                )))
            }
            (None, Some(_)) if unauthorized => {
                if first && self.auth.after_mcp_unauthorized(app_id, who).await? {
                    Next::Again
                } else {
                    Next::Stop(GatewayError::from(
                        self.auth.mcp_required(app_id, who, &e.detail),
                    ))
                }
            }
            (Some((a, _)), _) if unauthorized => {
                if first && self.auth.after_unauthorized(app_id, who, a).await? {
                    Next::Again
                } else {
                    Next::Stop(GatewayError::from(self.auth.required(
                        app_id,
                        who,
                        a,
                        &format!("the service rejected the stored credential ({})", e.detail),
                    )))
                }
            }
            _ => Next::Stop(e),
        })
    }
}

/// The result as the call returns it: a downstream MCP server's or an agent's whole MCP
/// result passed on; else the tool's JSON, checked against its `returns` (a mismatch is
/// logged, not refused) and structured when it declares one.
fn checked(app_id: &str, tool: &Tool, reply: exec::Reply) -> Outcome {
    let value = match reply {
        exec::Reply::Mcp(value) => {
            return Outcome {
                value,
                structured: false,
                mcp: true,
            };
        }
        exec::Reply::Json(value) => value,
    };
    if let Some(returns) = &tool.returns
        && let Ok(v) = returns.validator()
        && !v.is_valid(&value)
    {
        tracing::warn!(app = app_id, tool = %tool.name, "result does not match the tool's `returns` schema");
    }
    Outcome {
        structured: tool.returns.is_some() && value.is_object(),
        value,
        mcp: false,
    }
}
