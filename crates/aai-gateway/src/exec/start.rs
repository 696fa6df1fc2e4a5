//! What starting an app means, described for the user who approves it: the program a
//! stdio adapter, a downstream MCP server or an ACP agent runs (or the server an MCP app
//! connects to), and a digest of everything that decides what runs. Consent asks about it before anything
//! starts, and ties an "always" answer to the digest, so a changed command asks again
//! (`docs/consent.md`, "Starting servers and agents").
//!
//! Pure: nothing here runs, resolves or reads anything.

use std::path::Path;

use aai_descriptor::{Executor, McpServer, Process};
use sha2::{Digest, Sha256};

/// Starting an app's program, or reaching its server, as the user approves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// What runs, as a command line the user can read (words quoted for a POSIX shell,
    /// environment variables by name only), or the server it connects to.
    pub shown: String,
    /// The command fetches a package from a registry before it runs (`npx`, `uvx`, …).
    pub downloads: bool,
    /// A digest of the command, arguments, environment and folder (or the URL and
    /// headers): what an "always" answer is tied to.
    pub pin: String,
    /// It may start in this run already (allowed once, or with an import): a question
    /// names it, so that an "always" answer covers it, without saying it will start.
    pub allowed: bool,
}

impl Start {
    /// What a question about a call says of it: what it will start first, or, when it may
    /// start in this run already, what it runs.
    pub fn in_question(&self) -> String {
        if !self.allowed {
            return format!("this will first {}", self.describe());
        }
        match self.shown.strip_prefix("connect to ") {
            Some(server) => format!("it connects to {server}"),
            None => format!("it runs `{}`", self.shown),
        }
    }

    /// The sentence a question ends with.
    pub fn describe(&self) -> String {
        if self.shown.starts_with("connect to ") {
            return self.shown.clone();
        }
        let downloads = if self.downloads {
            " (downloads a package and runs it)"
        } else {
            ""
        };
        format!("start `{}`{downloads}", self.shown)
    }
}

/// What must start before `executor` can serve a call, when that is a process the gateway
/// keeps running or a server it connects to (stdio adapters, downstream MCP servers, ACP
/// agents). Other executors start nothing ahead of an approved call.
pub fn start_of(executor: &Executor, base_dir: &Path) -> Option<Start> {
    match executor {
        Executor::Mcp(McpServer::Stdio(p)) | Executor::Acp(p) | Executor::Stdio(p) => {
            Some(process(p, base_dir))
        }
        Executor::Mcp(McpServer::Http { url, headers, .. }) => {
            let mut digest = Sha256::new();
            feed(&mut digest, &["http", url]);
            for (name, value) in headers {
                feed(&mut digest, &[name, value]);
            }
            Some(Start {
                // The path may carry a key: only the origin is shown.
                shown: format!("connect to {}", crate::net::shown(url)),
                downloads: false,
                pin: hex(&digest.finalize()),
                allowed: false,
            })
        }
        _ => None,
    }
}

fn process(p: &Process, base_dir: &Path) -> Start {
    let mut digest = Sha256::new();
    feed(&mut digest, &["process", &p.command]);
    feed(
        &mut digest,
        &p.args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for (name, value) in &p.env {
        feed(&mut digest, &[name, value]);
    }
    feed(&mut digest, &[&base_dir.to_string_lossy()]);
    // Every word is shown (a long line is long: nothing that runs is left out), with what
    // it carries of secrets masked as history masks it; the pin covers the real values.
    let mut shown = std::iter::once(crate::text::sh_quote(&p.command))
        .chain(
            masked_args(&p.args)
                .iter()
                .map(|w| crate::text::sh_quote(w)),
        )
        .collect::<Vec<_>>()
        .join(" ");
    if !p.env.is_empty() {
        // A value that decides what runs (`NODE_OPTIONS`, `LD_PRELOAD`, a proxy, TLS
        // checks off) is shown whatever its name; one that looks secret (by its name or
        // its shape) or is a placeholder is named only.
        let shown_env: Vec<String> = p
            .env
            .iter()
            .map(|(name, value)| {
                let secret = aai_descriptor::looks_secret(name)
                    || aai_descriptor::looks_secret_value(value)
                    || value.contains("${");
                if secret && !run_changing(name) {
                    name.clone()
                } else {
                    format!(
                        "{name}={}",
                        crate::text::sh_quote(&crate::text::mask_secrets(value))
                    )
                }
            })
            .collect();
        shown.push_str(&format!(" (with {} set)", shown_env.join(", ")));
    }
    Start {
        shown,
        downloads: downloads(&p.command, &p.args),
        pin: hex(&digest.finalize()),
        allowed: false,
    }
}

/// Environment variables that change what a command runs, where it downloads from, which
/// configuration it reads or whether it checks TLS (a name ending in `_` is a prefix):
/// their values are always shown, and an MCP Registry entry that sets one is not installed.
pub const RUN_CHANGING: [&str; 38] = [
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "DYLD_",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_TLS_REJECT_UNAUTHORIZED",
    "NODE_EXTRA_CA_CERTS",
    "NPM_CONFIG_",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONINSPECT",
    "PYTHONUSERBASE",
    "PIP_",
    "UV_",
    "PATH",
    "BASH_ENV",
    "ENV",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "DOCKER_",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_CONFIG_",
    "GIT_EXEC_PATH",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PERL5OPT",
    "RUBYOPT",
    "JAVA_TOOL_OPTIONS",
];

/// Whether the environment variable `name` is one of [`RUN_CHANGING`] (in any case:
/// `https_proxy` is read too).
pub fn run_changing(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    RUN_CHANGING
        .iter()
        .any(|r| upper == *r || (r.ends_with('_') && upper.starts_with(r)))
}

/// A command's arguments as a question shows them: the value after a secret-looking flag
/// (`--api-key …`, `--token …`) masked, `--token=…` and `TOKEN=…` (`docker -e`) masked in
/// place, a header's credential (`Authorization: Bearer …`, `X-Api-Key: …`), URL passwords
/// and secret query parameters masked, and a word shaped like a token masked whole.
pub fn masked_args(args: &[String]) -> Vec<String> {
    let mut after_flag = false;
    args.iter()
        .map(|word| {
            let shown = if after_flag {
                "***".to_owned()
            } else {
                mask_word(word)
            };
            after_flag =
                word.starts_with('-') && !word.contains('=') && aai_descriptor::looks_secret(word);
            shown
        })
        .collect()
}

fn mask_word(word: &str) -> String {
    let named = |name: &str| {
        !name.is_empty()
            && !name.contains(char::is_whitespace)
            && !name.contains("://")
            && aai_descriptor::looks_secret(name)
    };
    if let Some((name, _)) = word.split_once('=')
        && named(name)
    {
        return format!("{name}=***");
    }
    if let Some((name, value)) = word.split_once(':')
        && named(name.trim())
        && !value.trim().is_empty()
    {
        // `Authorization: Bearer x` keeps its scheme; `X-Api-Key: x` shows none.
        let value = value.trim();
        return match value.split_once(' ') {
            Some((scheme, _))
                if matches!(
                    scheme.to_ascii_lowercase().as_str(),
                    "bearer" | "basic" | "token"
                ) =>
            {
                format!("{name}: {scheme} ***")
            }
            _ => format!("{name}: ***"),
        };
    }
    let masked = crate::text::mask_secrets(word);
    if masked == word && aai_descriptor::looks_secret_value(word) {
        "***".to_owned()
    } else {
        masked
    }
}

/// Each word with its length first, so that no two different lists feed the same bytes.
fn feed(digest: &mut Sha256, words: &[&str]) {
    digest.update((words.len() as u64).to_le_bytes());
    for w in words {
        digest.update((w.len() as u64).to_le_bytes());
        digest.update(w.as_bytes());
    }
}

/// The first 16 bytes as hex: enough to tell commands apart.
fn hex(bytes: &[u8]) -> String {
    crate::text::hex(&bytes[..16])
}

/// Whether `command args` fetches a package before running it: the package runners of
/// npm, pnpm, Yarn, Bun, uv and pipx, and container runs (which pull their image).
fn downloads(command: &str, args: &[String]) -> bool {
    // Windows paths too, on every OS (descriptors are shared).
    let program = command
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let program = program
        .strip_suffix(".cmd")
        .or_else(|| program.strip_suffix(".exe"))
        .unwrap_or(&program);
    let verb = args
        .iter()
        .find(|a| !a.starts_with('-'))
        .map(String::as_str);
    match program {
        "npx" | "pnpx" | "bunx" | "uvx" => true,
        "npm" => matches!(verb, Some("exec" | "x")),
        "pnpm" | "yarn" => verb == Some("dlx"),
        "bun" => verb == Some("x"),
        "pipx" => verb == Some("run"),
        "uv" => verb == Some("tool") || args.iter().any(|a| a == "--with"),
        "docker" | "podman" => verb == Some("run"),
        "deno" => args
            .iter()
            .any(|a| a.contains("://") || a.starts_with("npm:")),
        _ => false,
    }
}

#[cfg(test)]
#[path = "start_tests.rs"]
mod tests;
