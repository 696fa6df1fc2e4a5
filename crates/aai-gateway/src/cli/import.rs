//! `import mcp <file>`: one descriptor per MCP server of a client's configuration
//! (`aai_author::mcp_config`); a server's credential goes to the credential store as its
//! descriptor is written.
//!
//! `import openapi <file|url>`: one web descriptor from an OpenAPI document
//! (`aai_author::openapi`), into the home directory or `-o FILE`.
//!
//! `import typelib <file>`: one COM descriptor per creatable coclass of a type library
//! (`aai_author::typelib` reads it, `aai_author::com` drafts), also what `--discover`
//! uses on Windows ([`typelib_drafts`]).
//!
//! All show what they would write, then write on `--yes` or a TTY confirmation.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use super::Context;
use super::drafts::{self, Found};
use super::drafts::{Plan, plan, plan_valid};
use crate::auth::store::Credential;
use crate::error::GatewayError;
use aai_author::openapi;

/// Largest configuration file read (they are a few KiB).
const MAX_FILE: u64 = 4 * 1024 * 1024;

pub(super) fn mcp(ctx: &Context, file: &Path, opts: drafts::Options) -> ExitCode {
    let text = match read(file) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let name = file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let platform = ctx.host.os().as_str();
    let env = |k: &str| std::env::var(k).ok();
    let servers = match aai_author::mcp_config::servers(&text, &name, platform, &env) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    if servers.is_empty() {
        return fail(&format!("{name} lists no MCP servers"));
    }
    let found: Vec<Found> = servers
        .into_iter()
        .map(|s| {
            let (text, plan, summary) = match &s.descriptor {
                Ok(doc) => {
                    let text = format!("{}\n", serde_json::to_string_pretty(doc).expect("JSON"));
                    let plan = plan(&ctx.home.join(&s.id), &text);
                    (Some(text), plan, s.summary.clone())
                }
                Err(why) => (None, Plan::Skipped, format!("`{}`: {why}", s.name)),
            };
            let secrets = crate::manage::import::store_entries(&s.id, s.secret, s.secrets);
            Found {
                id: s.id,
                text,
                summary,
                plan,
                notes: s.notes,
                secrets,
                file: None,
            }
        })
        .collect();
    let runtime = match super::runtime() {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let store = match super::credential_store(ctx, &runtime) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    drafts::present(ctx, opts, &found, &[], &mut |f| {
        for (key, value) in &f.secrets {
            let credential = Credential::parse(aai_descriptor::AuthKind::ApiKey, value)
                .map_err(|e| e.to_string())?;
            runtime.block_on(store.set(key, credential)).map_err(|e| {
                format!(
                    "its credential could not be stored: {}",
                    GatewayError::from(e).explain()
                )
            })?;
        }
        Ok(())
    })
}

/// Largest type library file read (Office's `.olb` files are a few MiB; an `.exe` that
/// carries its library as a resource can be tens of MiB).
pub(super) const MAX_TYPELIB: u64 = 256 * 1024 * 1024;

pub(super) fn typelib(
    ctx: &Context,
    file: &Path,
    prog_id: Option<&str>,
    opts: drafts::Options,
) -> ExitCode {
    let options = aai_author::com::Options {
        prog_id,
        clsid: None,
    };
    let found = match typelib_drafts(ctx, file, None, options) {
        Ok(f) => f,
        Err(e) => return fail(&e),
    };
    drafts::present(ctx, opts, &found, &[], &mut |_| Ok(()))
}

/// The drafts of the type library in `file` (its `TYPELIB` resource `resource` when it is
/// a PE file), one row per coclass.
pub(super) fn typelib_drafts(
    ctx: &Context,
    file: &Path,
    resource: Option<u16>,
    options: aai_author::com::Options<'_>,
) -> Result<Vec<Found>, String> {
    let bytes = read_bytes(file, MAX_TYPELIB, "a type library")?;
    let lib = aai_author::typelib::read_resource(&bytes, resource)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    drop(bytes);
    let source = file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let drafted = match aai_author::com::drafts(&lib, options) {
        Ok(d) => d,
        // `--discover` asks for one registered class: one that cannot be created or called
        // through IDispatch is a row with nothing to write, not a failure.
        Err(aai_author::com::Error::NoCoclass) if options.clsid.is_some() => {
            return Ok(vec![Found {
                id: options.prog_id.unwrap_or_default().to_owned(),
                text: None,
                summary: format!("{source}: no creatable class with a dispatch interface"),
                plan: Plan::Empty,
                notes: Vec::new(),
                secrets: Vec::new(),
                file: None,
            }]);
        }
        Err(e) => return Err(format!("{}: {e}", file.display())),
    };
    Ok(drafted
        .into_iter()
        .map(|d| {
            let summary = format!(
                "{} from {} ({}, {} left out)",
                crate::text::count(d.tools, "tool", "tools"),
                source,
                d.prog_id,
                crate::text::count(d.notes.len(), "member", "members"),
            );
            let (text, plan) = if d.tools == 0 {
                (None, Plan::Empty)
            } else {
                let text = format!(
                    "{}\n",
                    serde_json::to_string_pretty(&d.descriptor).expect("JSON")
                );
                let plan = plan(&ctx.home.join(&d.id), &text);
                (Some(text), plan)
            };
            Found {
                id: d.id,
                text,
                summary,
                plan,
                notes: d.notes,
                secrets: Vec::new(),
                file: None,
            }
        })
        .collect())
}

/// What `import openapi` reads and where it writes.
#[derive(Debug)]
pub(super) struct OpenApi {
    /// A file or an https (loopback http) URL.
    pub source: String,
    /// Only these tags or operationIds.
    pub only: Vec<String>,
    /// The API's base URL instead of the document's servers.
    pub base_url: Option<String>,
    /// The app id instead of one made from the base URL.
    pub id: Option<String>,
    /// Write here instead of `$AAI_HOME/<appId>/aai.json`.
    pub output: Option<PathBuf>,
}

pub(super) fn openapi(ctx: &Context, args: &OpenApi, opts: drafts::Options) -> ExitCode {
    let started = Instant::now();
    if let Some(id) = &args.id
        && let Err(e) = check_id(id)
    {
        return fail(&e);
    }
    if let Some(file) = &args.output
        && let Err(e) = check_output(file)
    {
        return fail(&e);
    }
    let is_url = args.source.starts_with("https://") || args.source.starts_with("http://");
    let text = if is_url {
        fetch(&args.source)
    } else {
        read_capped(
            Path::new(&args.source),
            openapi::MAX_DOCUMENT as u64,
            "an OpenAPI document",
        )
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let doc = match openapi::parse(&text) {
        Ok(d) => d,
        Err(e) => return fail(&format!("{}: {e}", args.source)),
    };
    drop(text);
    let import = openapi::import(
        &doc,
        openapi::Options {
            only: &args.only,
            base_url: args.base_url.as_deref(),
            source_url: is_url.then_some(args.source.as_str()),
            id: args.id.as_deref(),
        },
    );
    let import = match import {
        Ok(i) => i,
        Err(e) => return fail(&format!("{}: {e}", args.source)),
    };
    let text = format!(
        "{}\n",
        serde_json::to_string_pretty(&import.descriptor).expect("JSON")
    );
    let mut notes = import.notes;
    let parsed = aai_descriptor::parse(&text, "imported");
    notes.extend(parsed.diagnostics.iter().filter(|d| d.is_error()).take(5).map(|d| {
        format!("the descriptor would not validate (a bug of the importer; please report it): {d}")
    }));
    let plan = match (&parsed.app, &args.output) {
        (None, _) => Plan::Invalid,
        (Some(_), Some(file)) => plan_file(file, &text),
        (Some(_), None) => plan_valid(&ctx.home.join(&import.id), &text),
    };
    tracing::info!(
        tools = import.tools,
        bytes = text.len(),
        "imported {} in {:.0?}",
        args.source,
        started.elapsed()
    );
    let title = import.descriptor["app"]["name"].as_str().unwrap_or("");
    let summary = format!(
        "{title}: {}{}",
        crate::text::count(import.tools, "tool", "tools"),
        import
            .auth
            .map(|a| format!(", auth {a}"))
            .unwrap_or_default()
    );
    let found = [Found {
        id: import.id,
        text: Some(text),
        summary,
        plan,
        notes,
        secrets: Vec::new(),
        file: args.output.clone(),
    }];
    let invalid = found[0].plan == Plan::Invalid;
    let code = drafts::present(ctx, opts, &found, &[], &mut |_| Ok(()));
    if invalid {
        return fail("the imported descriptor does not validate (see the notes); nothing written");
    }
    code
}

/// An app id given with `--id`: the descriptor rules (it names a folder of the home).
fn check_id(id: &str) -> Result<(), String> {
    let fits = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        && !id.starts_with('.')
        && !id.ends_with('.')
        && !id.contains("..");
    if fits {
        Ok(())
    } else {
        Err(format!(
            "--id `{}`: an app id is 1-128 letters, digits, `.`, `-` and `_`, in reverse-DNS form (e.g. `com.example.api`)",
            super::table::printable(id)
        ))
    }
}

/// `-o FILE` must be a regular file, or not exist yet in an existing folder.
fn check_output(file: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(file) {
        Ok(meta) if meta.file_type().is_symlink() => Err(format!(
            "-o {}: is a symbolic link; name the file itself",
            file.display()
        )),
        Ok(meta) if !meta.is_file() => Err(format!("-o {}: is not a regular file", file.display())),
        Ok(_) => Ok(()),
        Err(_) => {
            let parent = file.parent().filter(|p| !p.as_os_str().is_empty());
            match parent {
                Some(dir) if !dir.is_dir() => Err(format!(
                    "-o {}: the folder {} does not exist",
                    file.display(),
                    dir.display()
                )),
                _ => Ok(()),
            }
        }
    }
}

/// What writing `text` (validated) to a file of the user's choosing would do: new,
/// unchanged, or kept unless `--force`. (`check_output` made sure it is a regular file or
/// absent.)
fn plan_file(file: &Path, text: &str) -> Plan {
    match std::fs::metadata(file) {
        Err(_) => Plan::New,
        Ok(meta) if meta.len() != text.len() as u64 => Plan::Exists,
        Ok(_) => match std::fs::read_to_string(file) {
            Ok(current) if current == text => Plan::Unchanged,
            _ => Plan::Exists,
        },
    }
}

/// An OpenAPI document from an https (or loopback http) URL.
fn fetch(source: &str) -> Result<String, String> {
    super::runtime()?
        .block_on(crate::manage::import::fetch(source, openapi::MAX_DOCUMENT))
        .map_err(|e| e.to_string())
}

fn read(file: &Path) -> Result<String, String> {
    read_capped(file, MAX_FILE, "a client configuration")
}

/// The bytes of `file`, at most `max`.
fn read_bytes(file: &Path, max: u64, what: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let meta =
        std::fs::metadata(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", file.display()));
    }
    if meta.len() > max {
        return Err(format!(
            "{} is {} bytes; {what} is at most {max}",
            file.display(),
            meta.len()
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(max + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    if bytes.len() as u64 > max {
        return Err(format!(
            "{} is larger than {max} bytes ({what})",
            file.display()
        ));
    }
    Ok(bytes)
}

fn read_capped(file: &Path, max: u64, what: &str) -> Result<String, String> {
    String::from_utf8(read_bytes(file, max, what)?).map_err(|_| {
        format!(
            "cannot read {}: stream did not contain valid UTF-8",
            file.display()
        )
    })
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "aai-gateway: {message}");
    ExitCode::from(2)
}
