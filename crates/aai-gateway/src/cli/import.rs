//! `import mcp <file> [--yes] [--force] [--json]`: one descriptor per MCP server of a
//! client's configuration (`catalog::mcp_import`), shown, then written into the home
//! directory on `--yes` or a TTY confirmation. A server's credential goes to the
//! credential store as its descriptor is written.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use super::Context;
use super::drafts::{self, Found};
use crate::auth::store::{Credential, Store};
use crate::catalog::drafts::{Plan, plan};

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
    let servers = match crate::catalog::mcp_import::servers(&text, &name, platform, &env) {
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
            Found {
                id: s.id,
                text,
                summary,
                plan,
                notes: s.notes,
                secret: s.secret,
            }
        })
        .collect();
    let store = Store::new(ctx.config.credentials, &ctx.home);
    let runtime = match super::runtime() {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    drafts::present(ctx, opts, &found, &[], &mut |f| {
        let Some(secret) = &f.secret else {
            return Ok(());
        };
        let credential = Credential::parse(aai_descriptor::AuthKind::ApiKey, secret)?;
        runtime
            .block_on(store.set(&f.id, credential))
            .map_err(|e| format!("its credential could not be stored: {}", e.detail))
    })
}

fn read(file: &Path) -> Result<String, String> {
    let meta =
        std::fs::metadata(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", file.display()));
    }
    if meta.len() > MAX_FILE {
        return Err(format!(
            "{} is {} bytes; a client configuration is at most {MAX_FILE}",
            file.display(),
            meta.len()
        ));
    }
    std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "aai-gateway: {message}");
    ExitCode::from(2)
}
