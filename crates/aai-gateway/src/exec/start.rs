//! What starting an app means, described for the user who approves it: the program a
//! downstream MCP server or an ACP agent runs (or the server an MCP app connects to), and a
//! digest of everything that decides what runs. Consent asks about it before anything
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
}

impl Start {
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
/// keeps running or a server it connects to (downstream MCP servers, ACP agents). Other
/// executors start nothing ahead of an approved call.
pub fn start_of(executor: &Executor, base_dir: &Path) -> Option<Start> {
    match executor {
        Executor::Mcp(McpServer::Stdio(p)) | Executor::Acp(p) => Some(process(p, base_dir)),
        Executor::Mcp(McpServer::Http { url, headers, .. }) => {
            let mut digest = Sha256::new();
            feed(&mut digest, &["http", url]);
            for (name, value) in headers {
                feed(&mut digest, &[name, value]);
            }
            Some(Start {
                // The path may carry a key: only the origin is shown.
                shown: format!(
                    "connect to {}",
                    reqwest::Url::parse(url)
                        .map_or_else(|_| "an invalid URL".to_owned(), |u| crate::net::redact(&u))
                ),
                downloads: false,
                pin: hex(&digest.finalize()),
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
    let mut shown = std::iter::once(&p.command)
        .chain(&p.args)
        .map(|w| crate::text::sh_quote(w))
        .collect::<Vec<_>>()
        .join(" ");
    if !p.env.is_empty() {
        // A value that decides what runs (`NODE_OPTIONS`, `LD_PRELOAD`, a registry URL) is
        // shown; one that looks secret (by its name or its shape) or is a placeholder is
        // named only.
        let shown_env: Vec<String> = p
            .env
            .iter()
            .map(|(name, value)| {
                if aai_descriptor::looks_secret(name)
                    || aai_descriptor::looks_secret_value(value)
                    || value.contains("${")
                {
                    name.clone()
                } else {
                    format!(
                        "{name}={}",
                        crate::text::sh_quote(&crate::text::excerpt(value, 120))
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
mod tests {
    use super::*;

    fn stdio(command: &str, args: &[&str], env: &[(&str, &str)]) -> Executor {
        Executor::Mcp(McpServer::Stdio(Process {
            command: command.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }))
    }

    #[test]
    fn the_command_line_is_shown_quoted_with_secret_env_names_only() {
        let s = start_of(
            &stdio(
                "npx",
                &["-y", "@modelcontextprotocol/server-everything", "a b"],
                &[("GITHUB_TOKEN", "ghp_secret")],
            ),
            Path::new("/srv"),
        )
        .unwrap();
        assert_eq!(
            s.shown,
            "npx -y @modelcontextprotocol/server-everything 'a b' (with GITHUB_TOKEN set)"
        );
        assert!(s.downloads);
        assert!(!s.describe().contains("ghp_secret"));
        assert!(s.describe().ends_with("(downloads a package and runs it)"));
        // A value that changes what runs is shown; one shaped like a secret is not.
        let s = start_of(
            &stdio(
                "npx",
                &["x"],
                &[
                    ("NODE_OPTIONS", "--require /tmp/evil.js"),
                    ("DB", "postgres://u:pw@h/db"),
                    ("PAT", "ghp_0123456789abcdefghij"),
                ],
            ),
            Path::new("/srv"),
        )
        .unwrap();
        assert_eq!(
            s.shown,
            "npx x (with NODE_OPTIONS='--require /tmp/evil.js', DB, PAT set)"
        );
    }

    #[test]
    fn anything_that_decides_what_runs_changes_the_pin() {
        let base = |e: &Executor, dir: &str| start_of(e, Path::new(dir)).unwrap().pin;
        let one = base(&stdio("srv", &["a"], &[("K", "v")]), "/d");
        assert_eq!(one, base(&stdio("srv", &["a"], &[("K", "v")]), "/d"));
        for other in [
            base(&stdio("srv2", &["a"], &[("K", "v")]), "/d"),
            base(&stdio("srv", &["b"], &[("K", "v")]), "/d"),
            base(&stdio("srv", &["a"], &[("K", "w")]), "/d"),
            base(&stdio("srv", &["a"], &[("K", "v")]), "/e"),
            base(&stdio("srv", &["a", ""], &[("K", "v")]), "/d"),
        ] {
            assert_ne!(one, other);
        }
    }

    #[test]
    fn package_runners_are_told_from_plain_programs() {
        let d = |c: &str, a: &[&str]| {
            downloads(c, &a.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>())
        };
        assert!(d("npx", &["-y", "pkg"]));
        assert!(d("/usr/bin/uvx", &["mcp-server-time"]));
        assert!(d("C:\\node\\npx.cmd", &["pkg"]));
        assert!(d("pipx", &["run", "pkg"]));
        assert!(d("pnpm", &["dlx", "pkg"]));
        assert!(d("docker", &["run", "-i", "--rm", "img"]));
        assert!(!d("node", &["server.js"]));
        assert!(!d("python3", &["-m", "server"]));
        assert!(!d("npm", &["start"]));
        assert!(!d("uv", &["run", "server.py"]));
    }

    #[test]
    fn http_servers_are_connected_to_and_other_executors_start_nothing() {
        let http = Executor::Mcp(McpServer::Http {
            url: "https://mcp.example.com/mcp".into(),
            headers: vec![],
            mode: aai_descriptor::HttpMode::Detect,
        });
        let s = start_of(&http, Path::new("/")).unwrap();
        assert_eq!(s.describe(), "connect to https://mcp.example.com/…");
        assert!(start_of(&Executor::Applescript, Path::new("/")).is_none());
    }
}
