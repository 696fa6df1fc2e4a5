//! `auth status [app]`, `auth set <app> [--stdin]`, `auth login <app> [--person S]`,
//! `auth logout <app> [--person S]`: the user's side of credentials. In team mode a
//! sign-in is each person's own (`--person`, stored as `store::account` says) unless the
//! app's is shared (`apps.<id>.signIn`). Values are never printed; `set` reads a terminal without echo, or
//! standard input with `--stdin` (a bare string for `apiKey` and `cookie`, a JSON object
//! `{"appId", "appSecret"}` for `appCredential`).

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;

use aai_descriptor::{Auth, AuthKind};

use super::Context;
use super::table::Table;
use crate::auth::store::{Credential, Store};
use crate::catalog;
use crate::error::GatewayError;

/// What to do.
#[derive(Debug)]
pub(super) enum Action {
    Status(Option<String>),
    Login {
        app: String,
        yes: bool,
        person: Option<String>,
    },
    Set {
        app: String,
        stdin: bool,
        secret: Option<String>,
    },
    Logout {
        app: String,
        person: Option<String>,
    },
}

pub(super) fn run(ctx: &Context, action: Action) -> ExitCode {
    let catalog = catalog::scan(&ctx.search_dirs());
    let apps: Vec<(String, Auth)> = catalog
        .apps
        .iter()
        .filter_map(|l| {
            let auth = l.app.bindings.iter().find_map(|b| b.auth.clone())?;
            Some((l.app.id.clone(), auth))
        })
        .collect();
    // The `${NAME}` placeholders each app's servers and agents take.
    let placeholders: Vec<(String, Vec<String>)> = catalog
        .apps
        .iter()
        .filter_map(|l| {
            let names: Vec<String> = l
                .app
                .bindings
                .iter()
                .flat_map(|b| crate::auth::fill::names(&b.executor))
                .collect();
            (!names.is_empty()).then(|| (l.app.id.clone(), names))
        })
        .collect();
    // Remote MCP servers without a descriptor `auth` sign in the MCP way (`auth::mcp`).
    let mcp_apps: Vec<(String, String)> = catalog
        .apps
        .iter()
        .filter_map(|l| {
            l.app
                .bindings
                .iter()
                .find_map(|b| match (&b.executor, &b.auth) {
                    (
                        aai_descriptor::Executor::Mcp(aai_descriptor::McpServer::Http {
                            url, ..
                        }),
                        None,
                    ) => Some((l.app.id.clone(), url.clone())),
                    _ => None,
                })
        })
        .collect();
    let mcp_url = |id: &str| {
        mcp_apps
            .iter()
            .find(|(a, _)| a == id)
            .map(|(_, u)| u.clone())
    };
    let find = |id: &str| {
        apps.iter()
            .find(|(a, _)| a == id)
            .map(|(_, auth)| auth.clone())
    };
    let runtime = match super::runtime() {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let store = match super::credential_store(ctx, &runtime) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    if matches!(action, Action::Status(_) | Action::Set { .. }) {
        store.warn_if_plain();
    }
    match action {
        Action::Status(only) => {
            let mut table = Table::new(&["APP", "AUTH", "STORED"]);
            // The store may be unusable (no Secret Service); the apps and what each needs
            // are still listed, and the problem is said once.
            let mut store_problem = None;
            // What is stored for `id`, in words; "unknown" once the store failed (the
            // problem is kept to say once).
            let stored = |problem: &mut Option<String>,
                          id: &str,
                          say: &dyn Fn(Option<Credential>) -> String| {
                if problem.is_some() {
                    return "unknown".to_owned();
                }
                match runtime.block_on(store.get(id)) {
                    Ok(c) => say(c),
                    Err(e) => {
                        *problem = Some(GatewayError::from(e).explain());
                        "unknown".to_owned()
                    }
                }
            };
            for (id, auth) in apps
                .iter()
                .filter(|(id, _)| only.as_deref().is_none_or(|o| o == id))
            {
                let stored = stored(&mut store_problem, id, &|c: Option<Credential>| match c {
                    Some(c) if c.kind() == auth.kind() => "yes".to_owned(),
                    Some(c) => format!("a {} credential (the app needs {})", c.kind(), auth.kind()),
                    None => "no".to_owned(),
                });
                table.row(vec![id.clone(), auth.kind().to_string(), stored]);
            }
            for (id, _) in mcp_apps
                .iter()
                .filter(|(id, _)| only.as_deref().is_none_or(|o| o == id))
            {
                let stored = stored(&mut store_problem, id, &|c: Option<Credential>| match c {
                    Some(Credential::McpOAuth(g)) if g.tokens.is_some() => {
                        format!("signed in ({})", crate::auth::mcp::origin(&g.issuer))
                    }
                    Some(Credential::McpOAuth(_)) => {
                        format!("a client; not signed in: aai-gateway auth login {id}")
                    }
                    _ => format!("no (when the server asks: aai-gateway auth login {id})"),
                });
                table.row(vec![id.clone(), "oauth2 (MCP)".to_owned(), stored]);
            }
            // In team mode, who has signed in for themselves.
            let signs_in = mcp_apps.iter().map(|(id, _)| id).chain(
                apps.iter()
                    .filter(|(_, auth)| matches!(auth, Auth::OAuth2(_)))
                    .map(|(id, _)| id),
            );
            for id in signs_in
                .filter(|id| only.as_deref().is_none_or(|o| o == id.as_str()))
                .filter(|_| ctx.config.web_auth.is_some())
            {
                if store_problem.is_some() {
                    break;
                }
                let people = match ctx.config.apps.get(id.as_str()) {
                    Some(a) if a.shared_sign_in => "shared: everyone uses the sign-in above".into(),
                    _ => match runtime.block_on(store.people(id)) {
                        Ok(Some(people)) if people.is_empty() => "nobody yet".to_owned(),
                        Ok(Some(people)) => format!("signed in: {}", people.join(", ")),
                        Ok(None) => "the OS keyring cannot list them".to_owned(),
                        Err(e) => {
                            store_problem = Some(GatewayError::from(e).explain());
                            "unknown".to_owned()
                        }
                    },
                };
                table.row(vec![id.clone(), "each person's own".to_owned(), people]);
            }
            for (id, names) in placeholders
                .iter()
                .filter(|(id, _)| only.as_deref().is_none_or(|o| o == id))
            {
                for name in names {
                    let stored = if store_problem.is_some() {
                        "unknown".to_owned()
                    } else {
                        match runtime.block_on(store.get(&crate::auth::fill::entry(id, name))) {
                            Ok(Some(_)) => "yes".to_owned(),
                            Ok(None)
                                if ctx.config.secrets_from_environment
                                    && std::env::var_os(name).is_some() =>
                            {
                                "from the environment".to_owned()
                            }
                            Ok(None) => format!("no: aai-gateway auth set {id} --secret {name}"),
                            Err(e) => {
                                store_problem = Some(GatewayError::from(e).explain());
                                "unknown".to_owned()
                            }
                        }
                    };
                    table.row(vec![id.clone(), format!("secret {name}"), stored]);
                }
            }
            if let Some(o) = only.filter(|o| {
                find(o).is_none()
                    && mcp_url(o).is_none()
                    && !placeholders.iter().any(|(id, _)| id == o)
            }) {
                return fail(&format!("no app `{o}` that needs credentials"));
            }
            if apps.is_empty() && placeholders.is_empty() && mcp_apps.is_empty() {
                let _ = writeln!(std::io::stdout(), "No app needs credentials.");
            } else {
                let _ = write!(std::io::stdout(), "{}", table.render());
            }
            match store_problem {
                None => ExitCode::SUCCESS,
                Some(problem) => fail(&format!("cannot read stored credentials: {problem}")),
            }
        }
        Action::Set { app, stdin, secret } => {
            // A `${NAME}` placeholder's value is stored like an API key, under its own
            // entry; `--generate`'s model service key too.
            let kind = if let Some(name) = &secret {
                if !placeholders
                    .iter()
                    .any(|(id, names)| *id == app && names.contains(name))
                {
                    return fail(&format!(
                        "`{app}` has no `${{{name}}}` placeholder; see `aai-gateway auth status`"
                    ));
                }
                AuthKind::ApiKey
            } else if app == super::generate::KEY_ID {
                AuthKind::ApiKey
            } else if mcp_url(&app).is_some() {
                return set_mcp_client(&runtime, &store, &app, stdin);
            } else {
                let Some(auth) = find(&app) else {
                    return fail(&format!(
                        "no app `{app}` that needs credentials; see `aai-gateway auth status`"
                    ));
                };
                auth.kind()
            };
            if kind == AuthKind::OAuth2 {
                return fail(&format!(
                    "this app signs in with OAuth 2: run `aai-gateway auth login {app}`"
                ));
            }
            let prompt = match kind {
                AuthKind::AppCredential => {
                    "App credential as JSON {\"appId\": …, \"appSecret\": …}: "
                }
                AuthKind::Cookie => "Cookie header value (name=value; name2=value2): ",
                AuthKind::ApiKey | AuthKind::OAuth2 => "API key: ",
            };
            let input = match read_value(stdin, prompt) {
                Ok(t) => t,
                Err(why) => return fail(&why),
            };
            let credential = match Credential::parse(kind, &input) {
                Ok(c) => c,
                Err(e) => return fail(&format!("not stored: {e}")),
            };
            let key = match &secret {
                Some(name) => crate::auth::fill::entry(&app, name),
                None => app.clone(),
            };
            if let Err(e) = runtime.block_on(store.set(&key, credential)) {
                return fail(&GatewayError::from(e).explain());
            }
            let _ = match &secret {
                Some(name) => writeln!(std::io::stdout(), "stored the secret {name} of {app}"),
                None => writeln!(std::io::stdout(), "stored the {kind} credential of {app}"),
            };
            ExitCode::SUCCESS
        }
        Action::Login { app, yes, person } => {
            let who = match whose(ctx, &app, person) {
                Ok(who) => who,
                Err(why) => return fail(&why),
            };
            let account = crate::auth::store::account(&app, &who);
            let done = match who.person() {
                Some(person) => format!("signed in to {app} for {person}"),
                None => format!("signed in to {app}"),
            };
            if let Some(url) = mcp_url(&app) {
                let how = McpSignIn {
                    app: &app,
                    account: &account,
                    url: &url,
                    yes,
                    client_document: ctx.config.oauth_client_metadata_url.as_deref(),
                };
                return runtime.block_on(mcp_login(&store, how, &done));
            }
            let Some(Auth::OAuth2(oauth)) = find(&app) else {
                return fail(&format!(
                    "`{app}` does not sign in with OAuth 2; see `aai-gateway auth status`"
                ));
            };
            let client_id = ctx
                .config
                .apps
                .get(&app)
                .and_then(|a| a.client_id.clone())
                .or_else(|| oauth.client_id.clone());
            let Some(client_id) = client_id else {
                return fail(&format!(
                    "no OAuth client id for `{app}`: register the gateway with the provider and set \"apps\": {{\"{app}\": {{\"clientId\": \"…\"}}}} in config.json"
                ));
            };
            let signed_in = runtime.block_on(crate::auth::oauth::login(
                &oauth,
                &client_id,
                open_browser,
                crate::peer::of_callback,
            ));
            let tokens = match signed_in {
                Ok(t) => t,
                Err(e) => return fail(&GatewayError::from(e).explain()),
            };
            if let Err(e) = runtime.block_on(store.set(&account, Credential::OAuth(tokens))) {
                return fail(&GatewayError::from(e).explain());
            }
            let _ = writeln!(std::io::stdout(), "{done}");
            ExitCode::SUCCESS
        }
        Action::Logout { app, person } => {
            let who = match whose(ctx, &app, person) {
                Ok(who) => who,
                Err(why) => return fail(&why),
            };
            let whose = who
                .person()
                .map(|p| format!(" for {p}"))
                .unwrap_or_default();
            let account = crate::auth::store::account(&app, &who);
            if who.person().is_some() {
                // A sign-in of theirs in progress in the web UI goes too.
                let pending = format!("{account}{}", crate::auth::store::PENDING);
                if let Err(e) = runtime.block_on(store.delete(&pending)) {
                    return fail(&GatewayError::from(e).explain());
                }
            }
            match runtime.block_on(store.delete(&account)) {
                Ok(true) => {
                    let _ = writeln!(std::io::stdout(), "removed the credential of {app}{whose}");
                    ExitCode::SUCCESS
                }
                Ok(false) => {
                    let _ = writeln!(
                        std::io::stdout(),
                        "no credential was stored for {app}{whose}"
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&GatewayError::from(e).explain()),
            }
        }
    }
}

/// Whose sign-in `--person` names: a person's own only in team mode (`web.auth`), for a
/// valid subject, and not for an app whose sign-in is shared.
fn whose(ctx: &Context, app: &str, person: Option<String>) -> Result<crate::identity::Who, String> {
    let Some(person) = person else {
        return Ok(crate::identity::Who::Shared);
    };
    if !crate::auth::store::is_app_id(app) {
        return Err(format!(
            "`{app}` is not an app id (letters, digits, `.`, `-` and `_`)"
        ));
    }
    if ctx.config.web_auth.is_none() {
        return Err(
            "--person is for team mode: the gateway has no `web.auth`, so everyone uses the one sign-in (leave --person out)".into(),
        );
    }
    if !crate::identity::Person::valid_subject(&person) {
        return Err(format!(
            "--person takes a subject (the `sub` of the person's token): not empty, at most {} characters, no control characters",
            crate::identity::Person::MAX_SUBJECT
        ));
    }
    if ctx.config.apps.get(app).is_some_and(|a| a.shared_sign_in) {
        return Err(format!(
            "`{app}` has a shared sign-in (`apps.{app}.signIn: \"shared\"`): sign in without --person"
        ));
    }
    Ok(crate::identity::Who::Person(person.into()))
}

/// `auth set` for a remote MCP server: the client the user registered with its
/// authorization server, as `{"clientId", "clientSecret"}` (the secret may be left out).
fn set_mcp_client(
    runtime: &tokio::runtime::Runtime,
    store: &Store,
    app: &str,
    stdin: bool,
) -> ExitCode {
    let input = match read_value(
        stdin,
        "Client as JSON {\"clientId\": …, \"clientSecret\": …}: ",
    ) {
        Ok(t) => t,
        Err(why) => return fail(&why),
    };
    let value: serde_json::Value = serde_json::from_str(input.trim()).unwrap_or_default();
    let text = |a: &str, b: &str| {
        value
            .get(a)
            .or_else(|| value.get(b))
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let Some(client_id) = text("clientId", "client_id") else {
        return fail(
            "not stored: expected a JSON object with a non-empty \"clientId\" (and \"clientSecret\" for a confidential client)",
        );
    };
    let secret = text("clientSecret", "client_secret").map(crate::auth::Secret::new);
    let grant = crate::auth::mcp::Grant::preregistered(client_id, secret);
    if let Err(e) = runtime.block_on(store.set(app, Credential::McpOAuth(grant))) {
        return fail(&GatewayError::from(e).explain());
    }
    let _ = writeln!(
        std::io::stdout(),
        "stored the OAuth client of {app}; sign in with `aai-gateway auth login {app}`"
    );
    ExitCode::SUCCESS
}

/// What `auth login` of a remote MCP server needs.
struct McpSignIn<'a> {
    app: &'a str,
    /// Where the grant is stored (`store::account`).
    account: &'a str,
    url: &'a str,
    yes: bool,
    client_document: Option<&'a str>,
}

/// `auth login` for a remote MCP server: discovery on the server's origin, the user's
/// yes (the two origins shown), then the sign-in (`auth::mcp::sign_in`); the grant is
/// stored only once the server accepts its token.
async fn mcp_login(store: &Store, how: McpSignIn<'_>, done: &str) -> ExitCode {
    use crate::auth::mcp;
    let McpSignIn {
        app, account, url, ..
    } = how;
    let explain = |e: mcp::Error| fail(&GatewayError::from(e).explain());
    let stored = |account: &str| {
        let account = account.to_owned();
        async move {
            match store.get(&account).await {
                Ok(Some(Credential::McpOAuth(g))) => Ok(Some(g)),
                Ok(_) => Ok(None),
                Err(e) => Err(fail(&GatewayError::from(e).explain())),
            }
        }
    };
    let mut before = match stored(account).await {
        Ok(before) => before,
        Err(code) => return code,
    };
    // A person's first sign-in uses the client an admin stored for the app (`auth set`),
    // never the app's tokens.
    if before.is_none() && account != app {
        before = match stored(app).await {
            Ok(shared) => shared
                .filter(|g| g.preregistered)
                .map(|g| mcp::Grant { tokens: None, ..g }),
            Err(code) => return code,
        };
    }
    let plan = match mcp::prepare(url).await {
        Ok(p) => p,
        Err(e) => return explain(e),
    };
    // Consent: nothing reaches the authorization server before the user agrees.
    let (server_origin, issuer_origin) = (mcp::origin(url), mcp::origin(&plan.issuer));
    eprintln!(
        "aai-gateway: signing in to {app}: the MCP server at {server_origin} sends you to {issuer_origin} to sign in; the gateway registers with it and keeps the tokens in the credential store"
    );
    if !how.yes {
        if !std::io::stdin().is_terminal() {
            return fail("standard input is not a terminal; pass --yes to sign in without asking");
        }
        eprint!("Continue? [y/N] ");
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return fail("not signed in");
        }
    }
    let sign_in = mcp::SignIn {
        app,
        plan: &plan,
        before: before.as_ref(),
        client_document: how.client_document,
        owner_of: crate::peer::of_callback,
    };
    let step_up = || eprintln!("aai-gateway: the server wants more scope; signing in again");
    let grant = match mcp::sign_in(sign_in, &open_browser, &step_up).await {
        Ok(g) => g,
        Err(e) => return explain(e),
    };
    if let Err(e) = store.set(account, Credential::McpOAuth(grant)).await {
        return fail(&GatewayError::from(e).explain());
    }
    let _ = writeln!(std::io::stdout(), "{done}");
    ExitCode::SUCCESS
}

/// Opens `url` with `$BROWSER`, else the desktop's opener; always prints it too (on the
/// user's terminal). The browser is given the callback's `/start` address, which sends
/// it on to `url`, where the OS proves who connects: a command line is readable by every
/// user of the machine, and `url` holds the sign-in's `state`.
fn open_browser(url: &str) {
    eprintln!("aai-gateway: sign in at {url}");
    let address = crate::peer::provable_on(crate::host::Host::current().os())
        .then(|| crate::auth::oauth::start_address(url))
        .flatten();
    let address = address.as_deref().unwrap_or(url);
    let opener = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| {
            if cfg!(target_os = "macos") {
                "open".to_owned()
            } else if cfg!(windows) {
                "cmd /c start".to_owned()
            } else {
                "xdg-open".to_owned()
            }
        });
    // `$BROWSER` may list several commands separated by `:`; the first that starts wins.
    let started = opener
        .split(':')
        .any(|command| crate::exec::process::launch(command, address).is_ok());
    if !started {
        eprintln!("aai-gateway: could not open a browser; open the address above yourself");
    }
}

/// What `auth set` was given: standard input with `--stdin`, else a line from the terminal
/// with echo off (after `prompt`); why not, in words.
fn read_value(stdin: bool, prompt: &str) -> Result<String, String> {
    if stdin {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        Ok(text)
    } else if std::io::stdin().is_terminal() {
        read_hidden(prompt).map_err(|e| format!("cannot read the terminal: {e}"))
    } else {
        Err("standard input is not a terminal; pass --stdin to read the value from it".to_owned())
    }
}

/// Reads a line from the terminal with echo off.
fn read_hidden(prompt: &str) -> std::io::Result<String> {
    eprint!("{prompt}");
    let _ = std::io::stderr().flush();
    #[cfg(unix)]
    {
        use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        let saved = tcgetattr(&stdin).map_err(std::io::Error::from)?;
        let mut quiet = saved.clone();
        quiet.local_flags.remove(LocalFlags::ECHO);
        tcsetattr(&stdin, SetArg::TCSANOW, &quiet).map_err(std::io::Error::from)?;
        let mut line = String::new();
        let read = stdin.read_line(&mut line);
        let _ = tcsetattr(&stdin, SetArg::TCSANOW, &saved);
        eprintln!();
        read.map(|_| line)
    }
    #[cfg(not(unix))]
    {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    }
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "aai-gateway: {message}");
    ExitCode::FAILURE
}
