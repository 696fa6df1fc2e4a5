//! The command line (docs/design.md, CLI). Only commands that work are defined.

mod apps;
mod auth;
mod call;
mod clients;
mod consent;
mod discover;
mod drafts;
mod generate;
mod history;
mod import;
mod llm;
mod scan;
mod table;
mod validate;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::catalog::{self, SearchDir};
use crate::config::Config;
use crate::gateway::Lifecycle;
use crate::host::{Host, Os};

/// `--version`: the version and the commit it was built from (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("AAI_GATEWAY_COMMIT"),
    ")"
);

/// Lets AI agents call applications directly: an MCP gateway for aai.json apps.
#[derive(Debug, Parser)]
#[command(name = "aai-gateway", version = VERSION, about, long_about = None)]
#[command(group(clap::ArgGroup::new("writer").args(["discover", "generate"]).multiple(false)))]
struct Cli {
    /// The AAI home directory (descriptors, config, state); default ~/.aai.
    #[arg(long, global = true, env = "AAI_HOME", value_name = "DIR")]
    home: Option<PathBuf>,

    /// The config file; default <home>/config.json.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Serve MCP on stdin/stdout (also what running with no arguments does).
    #[arg(long, conflicts_with = "scan")]
    mcp: bool,

    /// Serve MCP over Streamable HTTP at http://127.0.0.1:<httpPort>/mcp (instead of
    /// stdin/stdout).
    #[arg(long, conflicts_with_all = ["scan", "mcp"])]
    web: bool,

    /// With --web: the address to listen on, default 127.0.0.1:<httpPort>. Any other than
    /// loopback needs a bearer token in AAI_HTTP_TOKEN.
    #[arg(long, requires = "web", value_name = "ADDR:PORT")]
    listen: Option<std::net::SocketAddr>,

    /// With --web behind a proxy, one of several replicas: this replica's name (letters,
    /// digits, `-`), which starts every MCP session id it gives (`<name>.<uuid>`), so
    /// that the proxy sends a session's requests back to it (docs/deploy.md).
    #[arg(long, requires = "web", value_name = "NAME", value_parser = replica_name)]
    replica: Option<String>,

    /// List discovered apps, their bindings and tools, and every diagnostic.
    #[arg(long)]
    scan: bool,

    /// Find automatable apps on this system (Linux: the D-Bus session bus; macOS: the
    /// scripting definitions of apps in /Applications; Windows: the type libraries of
    /// registered automation servers) and write descriptors for them into the home
    /// directory.
    #[arg(long, conflicts_with_all = ["scan", "mcp"])]
    discover: bool,

    /// Draft the descriptor of an app with a language model (any OpenAI-compatible
    /// chat-completions service, config `generate.*`): from the introspection of a D-Bus
    /// name, a command's --help, or the file given with --from; checked and repaired until
    /// it validates, then written into the home directory.
    #[arg(long, value_name = "APP", conflicts_with_all = ["scan", "mcp", "discover"])]
    generate: Option<String>,

    /// With --generate: what the model reads (D-Bus introspection XML, a .sdef, an OpenAPI
    /// document, or --help text); <APP> is then the app id.
    #[arg(long, requires = "generate", value_name = "FILE")]
    from: Option<PathBuf>,

    /// With --discover or --generate: write without asking.
    #[arg(long, requires = "writer")]
    yes: bool,

    /// With --discover or --generate: also overwrite descriptors you edited.
    #[arg(long, requires = "writer")]
    force: bool,

    /// With --discover: include the desktop's own plumbing services (and, on macOS, apps a
    /// built-in descriptor already serves).
    #[arg(long, requires = "discover")]
    all: bool,

    /// With --scan, --discover or --generate: print one JSON object instead of a table.
    #[arg(long)]
    json: bool,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the token of this install's HTTP listener (made on first use, kept 0600 in
    /// the home): what a client that the OS cannot vouch for must send.
    Token,
    /// Check descriptor files (or directories of them); exit 1 if any has an error.
    Validate {
        /// Files or directories to check.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// The previous release of the (one) descriptor: report each change with the
        /// semver bump it needs, and exit 1 when the version was not bumped enough.
        #[arg(long, value_name = "OLD")]
        against: Option<PathBuf>,
    },
    /// Show, store or remove the credentials of web apps (values are never shown).
    Auth {
        #[command(subcommand)]
        action: AuthCommand,
    },
    /// Show, grant or revoke consent: which client may run which tools without asking.
    Consent {
        #[command(subcommand)]
        action: ConsentCommand,
    },
    /// The calls the gateway ran, newest first.
    History {
        /// Only this app.
        #[arg(long)]
        app: Option<String>,
        /// Only this tool.
        #[arg(long)]
        tool: Option<String>,
        /// Only this client (`name@transport`).
        #[arg(long)]
        caller: Option<String>,
        /// Only this person's calls (the subject of the team's access token, `web.auth`).
        #[arg(long)]
        person: Option<String>,
        /// Only `ok` or `error`.
        #[arg(long, value_parser = ["ok", "error"])]
        status: Option<String>,
        /// Only the calls of one script run or batch (`run-…`, `batch-…`).
        #[arg(long)]
        run: Option<String>,
        /// Only the last while: 30m, 2h, 7d.
        #[arg(long, value_name = "DURATION")]
        since: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List apps; hide or show an app or tool per client; remove to and restore from the
    /// trash (what the agent does through the gateway's own app, `aai`).
    Apps {
        #[command(subcommand)]
        action: apps::AppsCommand,
    },
    /// Make apps of what other tools already describe.
    Import {
        #[command(subcommand)]
        what: ImportCommand,
    },
    /// Run one tool through the full pipeline: JSON on stdout either way, the result
    /// (exit 0) or the error object `{code, message, data}` (exit 1); a failure is also
    /// said in one line on stderr.
    Call {
        /// App id (or name).
        app: String,
        /// Tool name.
        tool: String,
        /// Arguments as a JSON object; default `{}`.
        args: Option<String>,
    },
    /// The MCP clients the gateway can set itself up in (Claude Code, Claude Desktop,
    /// Cursor, VS Code, Windsurf, Codex, Continue, Cline, Zed, Gemini CLI, Copilot CLI,
    /// opencode, Qwen Code), and whether it is; `clients add <CLIENT>` adds it, `clients
    /// remove <CLIENT>` takes it out.
    Clients {
        #[command(subcommand)]
        action: Option<ClientsCommand>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print the shell completion script for SHELL, e.g.
    /// `aai-gateway completions bash > ~/.local/share/bash-completion/completions/aai-gateway`.
    Completions {
        /// bash, zsh, fish, powershell or elvish.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g.
    /// `aai-gateway manpage > ~/.local/share/man/man1/aai-gateway.1`.
    Manpage,
}

#[derive(Debug, Subcommand)]
enum ClientsCommand {
    /// Every known client, its configuration file, and whether the gateway is set up.
    List {
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Add the gateway to a client's configuration (shows the change; writes it with
    /// --yes or after a "y" at the terminal, keeping a backup), and offer to allow its
    /// tools in the client's own permissions.
    Add(clients::Add),
    /// Take the gateway's entry out of a client's configuration.
    Remove(clients::Change),
}

#[derive(Debug, Subcommand)]
enum ImportCommand {
    /// An OpenAPI 3.0 or 3.1 document (JSON or YAML, a file or an https URL): one web
    /// app whose tools are the document's operations.
    Openapi {
        /// The document: a file, or an https URL (http only for this machine).
        source: String,
        /// Only operations with this tag or operationId (repeatable).
        #[arg(long, value_name = "TAG|OPERATION_ID")]
        only: Vec<String>,
        /// The API's address, instead of the document's first server.
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
        /// The app id, instead of one made from the API's host.
        #[arg(long)]
        id: Option<String>,
        /// Write this file instead of `$AAI_HOME/<appId>/aai.json`.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        write: drafts::Options,
    },
    /// A COM type library (a `.tlb`, or the `TYPELIB` resource of an `.exe`, `.dll` or
    /// `.olb`): one Windows app per creatable coclass, its methods and property getters as
    /// tools (works on any OS; the tools run on Windows).
    Typelib {
        /// The type library file.
        file: PathBuf,
        /// The ProgID the apps create, instead of `<Library>.<Coclass>`; with several
        /// coclasses, the one its last part names.
        #[arg(long, value_name = "PROGID")]
        progid: Option<String>,
        #[command(flatten)]
        write: drafts::Options,
    },
    /// The MCP servers of a client's configuration (Claude Desktop, Claude Code or Cursor
    /// `mcpServers` JSON, VS Code `servers`, Codex `config.toml`): one app per server.
    Mcp {
        /// The configuration file.
        file: PathBuf,
        #[command(flatten)]
        write: drafts::Options,
    },
}

#[derive(Debug, Subcommand)]
enum ConsentCommand {
    /// The remembered grants.
    List {
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Always allow a client to run a tool (or, without --tool, every tool) of an app;
    /// with --start, always allow the app's server or agent to start with its current
    /// command.
    Grant {
        /// App id.
        app: String,
        /// Only this tool.
        #[arg(long, requires = "caller")]
        tool: Option<String>,
        /// The client, as `name@transport` (the CONSENT_REQUIRED error names it).
        #[arg(long, required_unless_present = "start")]
        caller: Option<String>,
        /// Allow the app's server or agent to start (for every client), as its
        /// descriptor starts it now; a changed command asks again.
        #[arg(long)]
        start: bool,
    },
    /// Remove grants of an app (all of them, or one tool's, or one client's).
    Revoke {
        /// App id.
        app: String,
        /// Only this tool's grant.
        #[arg(long)]
        tool: Option<String>,
        /// Only this client's grants.
        #[arg(long)]
        caller: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum AuthCommand {
    /// Which apps need credentials and whether one is stored.
    Status {
        /// Only this app.
        app: Option<String>,
    },
    /// Store the credential of an app (asked for without echo, or read with --stdin).
    Set {
        /// App id.
        app: String,
        /// Read the value from standard input.
        #[arg(long)]
        stdin: bool,
        /// Store the value of the `${NAME}` placeholder NAME of the app's `env` or
        /// `headers`, instead of the app's credential.
        #[arg(long, value_name = "NAME")]
        secret: Option<String>,
    },
    /// Sign in to an OAuth 2 app in the browser and store its tokens.
    Login {
        /// App id.
        app: String,
        /// Sign in without asking (a remote MCP server shows its origins and asks first).
        #[arg(long)]
        yes: bool,
        /// Team mode: store the sign-in as this person's own (their token's subject); the
        /// account signed in to in the browser is the one they act as upstream.
        #[arg(long, value_name = "SUBJECT")]
        person: Option<String>,
    },
    /// Remove the stored credential of an app.
    Logout {
        /// App id.
        app: String,
        /// Team mode: remove this person's own sign-in instead.
        #[arg(long, value_name = "SUBJECT")]
        person: Option<String>,
    },
}

/// Everything a command needs to know about where it runs.
#[derive(Debug)]
pub(crate) struct Context {
    /// `$AAI_HOME`.
    pub home: PathBuf,
    /// Loaded settings.
    pub config: Config,
    /// Locale for names.
    pub locale: Option<String>,
    /// The running host.
    pub host: Host,
    /// Warnings about the config file (unknown keys).
    pub config_warnings: Vec<aai_descriptor::Diagnostic>,
}

impl Context {
    /// The gateway these settings describe (not scanned yet); on the shared store when
    /// the config names one (refused without its key).
    pub(crate) fn into_gateway(
        self,
    ) -> Result<std::sync::Arc<crate::gateway::Gateway>, crate::store::Error> {
        crate::gateway::Gateway::open(self.config, self.home, self.locale, self.host)
    }

    /// The search directories in precedence order: user dir, config paths, system paths,
    /// web cache.
    pub(crate) fn search_dirs(&self) -> Vec<SearchDir> {
        catalog::paths::search_dirs(&self.home, &self.config.scan_paths, self.host.os())
    }
}

/// The credential store the config names: the shared PostgreSQL store (migrated, with its
/// key) when `store` is set, else `credentials.store`.
fn credential_store(
    ctx: &Context,
    runtime: &tokio::runtime::Runtime,
) -> Result<crate::auth::store::Store, String> {
    let Some(settings) = &ctx.config.store else {
        return Ok(crate::auth::store::Store::new(
            ctx.config.credentials,
            &ctx.home,
        ));
    };
    let shared = crate::store::Shared::new(settings, &|k| std::env::var(k).ok())
        .map_err(|e| e.to_string())?;
    runtime
        .block_on(shared.migrate())
        .map_err(|e| e.to_string())?;
    Ok(crate::auth::store::Store::Postgres(shared))
}

/// The single-threaded runtime a command's async work runs on.
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start: {e}"))
}

/// Runs the command line; the binary's `main` is only this.
pub fn main() -> ExitCode {
    crate::allocator::limit_arenas();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "aai-gateway: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, String> {
    match cli.command {
        Some(Command::Clients { action, json }) => Ok(match action {
            None => clients::list(json),
            Some(ClientsCommand::List { json: j }) => clients::list(json || j),
            Some(ClientsCommand::Add(args)) => clients::add(&args, cli.home.as_deref()),
            Some(ClientsCommand::Remove(args)) => clients::remove(&args),
        }),
        Some(Command::Completions { shell }) => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "aai-gateway", &mut out);
            print(&out)
        }
        Some(Command::Manpage) => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut out)
                .map_err(|e| format!("cannot render the man page: {e}"))?;
            print(&out)
        }
        Some(Command::Validate {
            paths,
            json,
            against,
        }) => Ok(match against {
            Some(old) => validate::against(&paths, &old, json),
            None => {
                let named = cli.config.clone();
                let config = match (config_file(cli.home, cli.config), named) {
                    (Ok((_, file, explicit)), _) => validate::overrides_in(&file, explicit),
                    (Err(_), Some(file)) => validate::overrides_in(&file, true),
                    (Err(_), None) => Ok(Default::default()),
                };
                validate::run(&paths, json, config)
            }
        }),
        Some(Command::Auth { action }) => {
            let ctx = context(cli.home, cli.config, false, false)?;
            let action = match action {
                AuthCommand::Status { app } => auth::Action::Status(app),
                AuthCommand::Set { app, stdin, secret } => auth::Action::Set { app, stdin, secret },
                AuthCommand::Logout { app, person } => auth::Action::Logout { app, person },
                AuthCommand::Login { app, yes, person } => auth::Action::Login { app, yes, person },
            };
            Ok(auth::run(&ctx, action))
        }
        Some(Command::Apps { action }) => {
            let ctx = context(cli.home, cli.config, false, false)?;
            Ok(apps::run(&ctx, action))
        }
        Some(Command::Token) => {
            let ctx = context(cli.home, cli.config, false, false)?;
            let token = crate::listen::install_token(&ctx.home).map_err(|e| e.to_string())?;
            let _ = writeln!(std::io::stdout(), "{}", token.expose());
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::History {
            app,
            tool,
            caller,
            person,
            status,
            run,
            since,
            limit,
            json,
        }) => {
            let ctx = context(cli.home, cli.config, false, false)?;
            let since_ms = since
                .as_deref()
                .map(history::since)
                .transpose()
                .map_err(|e| e.to_string())?;
            let filter = crate::history::Filter {
                app,
                tool,
                caller,
                person,
                status,
                run,
                since_ms,
                limit,
            };
            Ok(history::run(&ctx, &filter, json))
        }
        Some(Command::Consent { action }) => {
            let ctx = context(cli.home, cli.config, false, false)?;
            let action = match action {
                ConsentCommand::List { json } => consent::Action::List { json },
                ConsentCommand::Grant {
                    app,
                    tool,
                    caller,
                    start,
                } => consent::Action::Grant {
                    app,
                    tool,
                    caller,
                    start,
                },
                ConsentCommand::Revoke { app, tool, caller } => {
                    consent::Action::Revoke { app, tool, caller }
                }
            };
            Ok(consent::run(ctx, action))
        }
        Some(Command::Import {
            what:
                ImportCommand::Typelib {
                    file,
                    progid,
                    write,
                },
        }) => {
            let ctx = context(cli.home, cli.config, false, false)?;
            Ok(import::typelib(&ctx, &file, progid.as_deref(), write))
        }
        Some(Command::Import {
            what: ImportCommand::Mcp { file, write },
        }) => {
            let ctx = context(cli.home, cli.config, false, false)?;
            Ok(import::mcp(&ctx, &file, write))
        }
        Some(Command::Import {
            what:
                ImportCommand::Openapi {
                    source,
                    only,
                    base_url,
                    id,
                    output,
                    write,
                },
        }) => {
            let ctx = context(cli.home, cli.config, false, false)?;
            let args = import::OpenApi {
                source,
                only,
                base_url,
                id,
                output,
            };
            Ok(import::openapi(&ctx, &args, write))
        }
        Some(Command::Call { app, tool, args }) => {
            let ctx = context(cli.home, cli.config, false, false)?;
            Ok(call::run(ctx, &app, &tool, args.as_deref()))
        }
        None if cli.json && !cli.scan && !cli.discover && cli.generate.is_none() => {
            Err("--json goes with --scan, --discover or --generate".to_owned())
        }
        None if cli.generate.is_some() => {
            let ctx = context(cli.home, cli.config, false, false)?;
            let app = cli.generate.unwrap_or_default();
            let opts = drafts::Options {
                yes: cli.yes,
                force: cli.force,
                json: cli.json,
            };
            Ok(generate::run(&ctx, &app, cli.from.as_deref(), opts))
        }
        None if cli.discover => {
            let ctx = context(cli.home, cli.config, false, false)?;
            let opts = discover::Options {
                yes: cli.yes,
                force: cli.force,
                all: cli.all,
                json: cli.json,
            };
            Ok(discover::run(&ctx, opts))
        }
        None if cli.web => {
            let ctx = context(cli.home, cli.config, true, false)?;
            serve_web(ctx, cli.listen, cli.replica)
        }
        None if cli.scan => {
            let ctx = context(cli.home, cli.config, false, true)?;
            Ok(scan::run(&ctx, cli.json))
        }
        None => {
            let ctx = context(cli.home, cli.config, true, false)?;
            serve(ctx)
        }
    }
}

/// Writes a generated text to stdout; a closed pipe (`| head`) is not an error.
fn print(bytes: &[u8]) -> Result<ExitCode, String> {
    match std::io::stdout().lock().write_all(bytes) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("stdout: {e}")),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// The Streamable HTTP MCP server and the web UI (`--web`).
/// A replica's name: 1 to 32 ASCII letters, digits or `-`.
fn replica_name(name: &str) -> Result<String, String> {
    if (1..=32).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        Ok(name.to_owned())
    } else {
        Err("a replica's name is 1 to 32 ASCII letters, digits or `-`".to_owned())
    }
}

fn serve_web(
    ctx: Context,
    listen: Option<std::net::SocketAddr>,
    replica: Option<String>,
) -> Result<ExitCode, String> {
    let addr = listen
        .unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], ctx.config.http_port)));
    let token = crate::listen::token_for(&ctx.home, addr).map_err(|e| e.to_string())?;
    let gateway = ctx.into_gateway().map_err(|e| e.to_string())?;
    let life = Lifecycle::new(gateway).map_err(|e| format!("cannot start: {e}"))?;
    life.block_on(life.gateway().open_store())
        .map_err(|e| format!("cannot start: {e}"))?;
    let config = &life.gateway().config;
    let resource = config
        .web_auth
        .clone()
        .map(|auth| std::sync::Arc::new(crate::access::resource::Resource::new(auth)));
    if let Some(team) = &resource {
        life.gateway().pipeline().set_team(team.clone());
    }
    let options = crate::listen::Options {
        addr,
        token,
        mcp: true,
        ui: config.enable_web_ui,
        hosts: config.web_allowed_hosts.clone(),
        resource,
        replica,
    };
    let ui = config.enable_web_ui;
    let bound = life
        .block_on(crate::listen::bind(options))
        .map_err(|e| e.to_string())?;
    let origin = crate::access::origin_of(bound.addr());
    let ui = if ui {
        format!(", the web UI on {origin}/ui")
    } else {
        String::new()
    };
    // The one line a person starting a web server expects.
    let _ = writeln!(
        std::io::stderr(),
        "aai-gateway: serving MCP on {origin}/mcp{ui} (Ctrl-C stops it)"
    );
    life.serve(|gateway| crate::listen::serve(gateway, bound))
        .map(|()| ExitCode::SUCCESS)
        .map_err(|e| e.to_string())
}

/// The stdio MCP server, with the web UI on `httpPort` (or the next free port) when
/// `enableWebUI` is on.
fn serve(ctx: Context) -> Result<ExitCode, String> {
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        // Started by hand: say what this is, once, on stderr (stdout belongs to MCP).
        let _ = writeln!(
            std::io::stderr(),
            "aai-gateway is an MCP server: it speaks MCP on stdin/stdout and waits for an MCP client (Claude Code, Codex, Cursor, …) to start it; README.md › \"Use it from an MCP client\" shows how. Try `aai-gateway --scan` to see your apps; Ctrl-C stops this."
        );
    }
    let gateway = ctx.into_gateway().map_err(|e| e.to_string())?;
    let life = Lifecycle::for_one_client(gateway).map_err(|e| format!("cannot start: {e}"))?;
    life.block_on(life.gateway().open_store())
        .map_err(|e| format!("cannot start: {e}"))?;
    let gateway = life.gateway().clone();
    if gateway.config.enable_web_ui {
        // Bound before MCP starts, so that the first CONSENT_REQUIRED can link to it.
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let options = crate::listen::Options {
            addr,
            token: crate::listen::token_for(&gateway.home, addr).map_err(|e| e.to_string())?,
            mcp: false,
            ui: true,
            hosts: Vec::new(),
            resource: None,
            replica: None,
        };
        match life.block_on(crate::listen::bind_near(gateway.config.http_port, options)) {
            Ok(bound) => {
                let origin = crate::access::origin_of(bound.addr());
                gateway.pipeline().set_ui(&format!("{origin}/ui"));
                let gateway = gateway.handle();
                life.spawn(async move {
                    if let Err(e) = crate::listen::serve(gateway, bound).await {
                        tracing::warn!("the web UI stopped: {e}");
                    }
                });
            }
            Err(e) => tracing::warn!("no web UI: {e}"),
        }
    }
    life.serve(crate::mcp::stdio::serve)
        .map_err(|e| format!("MCP server stopped: {e:#}"))?;
    Ok(ExitCode::SUCCESS)
}

/// The home folder (`--home`, else `AAI_HOME` or the platform's), the config file
/// (`--config`, else `config.json` in the home) and whether it was named explicitly.
fn config_file(
    home: Option<PathBuf>,
    config: Option<PathBuf>,
) -> Result<(PathBuf, PathBuf, bool), String> {
    let env = |k: &str| std::env::var(k).ok();
    let home = match home.filter(|h| !h.as_os_str().is_empty()) {
        Some(h) => h,
        None => catalog::paths::default_home(Os::current(), &env)
            .ok_or("cannot tell the home directory; pass --home or set AAI_HOME")?,
    };
    Ok(match config {
        Some(f) => (home, f, true),
        None => {
            let file = home.join("config.json");
            (home, file, false)
        }
    })
}

fn context(
    home: Option<PathBuf>,
    config: Option<PathBuf>,
    log_to_file: bool,
    quiet_config: bool,
) -> Result<Context, String> {
    let (home, file, explicit) = config_file(home, config)?;
    let (config, warnings) = Config::load(&file, explicit).map_err(|diagnostics| {
        let lines: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
        format!("bad config:\n{}", lines.join("\n"))
    })?;
    let log_dir = log_to_file.then(|| home.join("logs"));
    let mode = if log_to_file {
        crate::logging::Mode::Server
    } else {
        crate::logging::Mode::Command
    };
    crate::logging::init(mode, &config.log_level, log_dir.as_deref());
    // `--scan` reports them in its output; everything else logs them.
    if !quiet_config {
        for w in &warnings {
            tracing::warn!("{w}");
        }
    }
    let locale = config.locale.clone().or_else(|| {
        ["LC_ALL", "LC_MESSAGES", "LANG"]
            .into_iter()
            .filter_map(|k| std::env::var(k).ok())
            .find(|v| !v.is_empty())
            .and_then(|v| aai_descriptor::locale_from_posix(&v))
    });
    Ok(Context {
        home,
        config,
        locale,
        host: Host::current(),
        config_warnings: warnings,
    })
}
