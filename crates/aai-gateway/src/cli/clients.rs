//! `aai-gateway clients [list|add|remove]`: the gateway's entry in MCP clients'
//! configuration files. Shows the change as a diff and writes it only with `--yes` or a
//! "y" at the terminal, after a backup; a file it cannot parse is never written.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::clients::{self, Client, Launch};
use crate::host::Os;

/// What starts the gateway in the client's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Via {
    /// This binary's own path.
    Path,
    /// `npx -y aai-gateway` (the npm package, fetched by the client when it starts).
    Npx,
    /// `uvx aai-gateway` (the PyPI package).
    Uvx,
}

/// `clients add|remove` options.
#[derive(Debug, clap::Args)]
pub(super) struct Change {
    /// The client: claude-code, claude-desktop, cursor, vscode, windsurf, codex,
    /// continue, cline, zed or gemini.
    client: String,
    /// The entry's name in the client's configuration.
    #[arg(long, default_value = clients::DEFAULT_NAME)]
    name: String,
    /// This configuration file instead of the client's usual one (e.g. a project's
    /// `.vscode/mcp.json` or `.cursor/mcp.json`).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Write without asking.
    #[arg(long)]
    yes: bool,
}

/// `clients add` options.
#[derive(Debug, clap::Args)]
pub(super) struct Add {
    #[command(flatten)]
    change: Change,
    /// How the client starts the gateway; default: this binary's path, or `npx`/`uvx`
    /// when this binary runs from their temporary cache.
    #[arg(long, value_enum)]
    via: Option<Via>,
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// `clients` / `clients list`: every known client, its file, and whether the gateway is
/// set up in it.
pub(super) fn list(json: bool) -> ExitCode {
    let mut rows = Vec::new();
    for client in clients::ALL {
        let path = client.config_path(Os::current(), &env);
        let (state, entry) = match &path {
            None => ("unknown".to_owned(), None),
            Some(p) => match std::fs::read_to_string(p) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    ("no config".to_owned(), None)
                }
                Err(e) => (format!("unreadable: {e}"), None),
                Ok(text) => match client.status(&text, clients::DEFAULT_NAME) {
                    Ok(Some(name)) => ("set up".to_owned(), Some(name)),
                    Ok(None) => ("not set up".to_owned(), None),
                    Err(e) => (format!("malformed: {e}"), None),
                },
            },
        };
        rows.push((client, path, state, entry));
    }
    let mut out = std::io::stdout().lock();
    if json {
        let clients: Vec<_> = rows
            .iter()
            .map(|(c, path, state, entry)| {
                serde_json::json!({
                    "client": c.id, "name": c.name,
                    "config": path.as_ref().map(|p| p.display().to_string()),
                    "state": state, "entry": entry,
                })
            })
            .collect();
        let _ = writeln!(out, "{}", serde_json::json!({ "clients": clients }));
    } else {
        let mut table = super::table::Table::new(&["CLIENT", "GATEWAY", "CONFIG"]);
        for row in rows.iter().map(|(c, path, state, entry)| {
            let state = match entry {
                Some(name) if name != clients::DEFAULT_NAME => format!("{state} (as {name})"),
                _ => state.clone(),
            };
            let path = path
                .as_ref()
                .map_or("-".to_owned(), |p| p.display().to_string());
            vec![c.id.to_owned(), state, path]
        }) {
            table.row(row);
        }
        let _ = write!(out, "{}", table.render());
        let _ = writeln!(
            out,
            "\n`aai-gateway clients add <CLIENT>` sets the gateway up in one of them."
        );
    }
    ExitCode::SUCCESS
}

/// `clients add <client>`.
pub(super) fn add(args: &Add, home: Option<&Path>) -> ExitCode {
    let launch = match launch(args.via, home) {
        Ok(l) => l,
        Err(message) => return fail(&message),
    };
    change(&args.change, |client, text| {
        client.add(text, &args.change.name, &launch)
    })
}

/// `clients remove <client>`.
pub(super) fn remove(args: &Change) -> ExitCode {
    change(args, |client, text| client.remove(text, &args.name))
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "aai-gateway: {message}");
    ExitCode::FAILURE
}

/// Reads the client's file, asks `edit` for the new text, shows the diff, confirms,
/// backs up and writes.
fn change(
    args: &Change,
    edit: impl Fn(&Client, &str) -> Result<Option<String>, clients::Malformed>,
) -> ExitCode {
    let Some(client) = clients::find(&args.client) else {
        let known: Vec<&str> = clients::ALL.iter().map(|c| c.id).collect();
        return fail(&format!(
            "no client called `{}`; known: {}",
            args.client,
            known.join(", ")
        ));
    };
    let Some(path) = args
        .file
        .clone()
        .or_else(|| client.config_path(Os::current(), &env))
    else {
        return fail(&format!(
            "cannot tell where {} keeps its configuration; pass --file",
            client.name
        ));
    };
    let old = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return fail(&format!("cannot read {}: {e}", path.display())),
    };
    let current = old.as_deref().unwrap_or("");
    let new = match edit(&client, current) {
        Ok(Some(new)) => new,
        Ok(None) => {
            let _ = writeln!(
                std::io::stdout(),
                "{}: nothing to change in {}",
                client.name,
                path.display()
            );
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            return fail(&format!(
                "{} is not valid ({e}); it was left as it is. Fix it, or pass another file with --file.",
                path.display()
            ));
        }
    };
    // A file of the gateway's own that holds nothing any more is removed, not emptied.
    let delete = old.is_some() && client.own_file() && client.only_empty_servers(&new);
    let shown_new = if delete { "" } else { new.as_str() };
    let label = path.display().to_string();
    let diff = similar::TextDiff::from_lines(current, shown_new);
    let mut out = std::io::stdout().lock();
    let _ = write!(
        out,
        "{}",
        diff.unified_diff()
            .context_radius(3)
            .header(if old.is_some() { &label } else { "/dev/null" }, &label)
    );
    let _ = out.flush();
    drop(out);
    if !args.yes && !confirm(&path) {
        let _ = writeln!(
            std::io::stderr(),
            "aai-gateway: not written; run again with --yes to write {}",
            path.display()
        );
        return ExitCode::FAILURE;
    }
    // The gateway's own file needs no copy: the diff above showed all of it.
    let keep_copy = old.is_some() && !delete;
    let backup = match keep_copy.then(|| backup(&path)).transpose() {
        Ok(b) => b,
        Err(e) => {
            return fail(&format!(
                "cannot back up {}: {e}; nothing was written",
                path.display()
            ));
        }
    };
    let written = if delete {
        std::fs::remove_file(&path)
    } else {
        write(&path, new.as_bytes())
    };
    if let Err(e) = written {
        return fail(&format!("cannot write {}: {e}", path.display()));
    }
    let mut done = format!(
        "{}: {} {}",
        client.name,
        if delete { "removed" } else { "wrote" },
        path.display()
    );
    if let Some(b) = backup {
        done.push_str(&format!(" (backup: {})", b.display()));
    }
    let _ = writeln!(
        std::io::stdout(),
        "{done}. Restart {} to use it.",
        client.name
    );
    ExitCode::SUCCESS
}

/// "y" at the terminal; no terminal, no write.
fn confirm(path: &Path) -> bool {
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return false;
    }
    let _ = write!(std::io::stderr(), "Write {}? [y/N] ", path.display());
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    matches!(answer.trim(), "y" | "Y" | "yes" | "Yes")
}

/// A copy beside the file, named by the time: `<file>.<YYYYMMDD-HHMMSS>.aai-bak` (with
/// `-2`, `-3`… when that name is taken: an earlier copy is never overwritten).
fn backup(path: &Path) -> std::io::Result<PathBuf> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let stamp: String = crate::history::utc(now.as_millis() as u64)
        .chars()
        .map(|c| if c == ' ' { '-' } else { c })
        .filter(|c| c.is_ascii_digit() || *c == '-')
        .collect::<String>()
        .replacen('-', "", 2);
    let file = path.file_name().unwrap_or_default().to_string_lossy();
    for n in 1..100 {
        let suffix = if n == 1 {
            String::new()
        } else {
            format!("-{n}")
        };
        let target = path.with_file_name(format!("{file}.{stamp}{suffix}.aai-bak"));
        // create_new: two runs in the same second cannot take the same name. Owner-only
        // until it has the original's permissions (it may hold tokens).
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&target) {
            Ok(mut copy) => {
                std::io::copy(&mut std::fs::File::open(path)?, &mut copy)?;
                std::fs::set_permissions(&target, std::fs::metadata(path)?.permissions())?;
                return Ok(target);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("too many backups this second"))
}

/// Replaces the file whole (a temporary file beside it, renamed over it), keeping its
/// permissions; follows a symbolic link to the file it names. A new file is owner-only:
/// client configurations hold other servers' tokens.
fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let target = match std::fs::canonicalize(path) {
        Ok(real) => real,
        Err(_) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            path.to_owned()
        }
    };
    let permissions = std::fs::metadata(&target).ok().map(|m| m.permissions());
    crate::files::write_private(&target, bytes)?;
    if let Some(p) = permissions {
        std::fs::set_permissions(&target, p)?;
    }
    Ok(())
}

/// The command and arguments the client runs.
fn launch(via: Option<Via>, home: Option<&Path>) -> Result<Launch, String> {
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| format!("cannot tell this binary's path: {e}"))?;
    let home = home
        .map(|h| std::path::absolute(h).map_err(|e| format!("--home: {e}")))
        .transpose()?;
    Ok(launch_for(
        &exe.to_string_lossy(),
        via,
        home.as_deref().map(|h| h.to_string_lossy().into_owned()),
        cfg!(windows),
    ))
}

/// [`launch`] without the machine: `exe` is this binary's canonical path.
fn launch_for(exe: &str, via: Option<Via>, home: Option<String>, windows: bool) -> Launch {
    // A binary in npx's or uv's temporary cache is gone after the next clean.
    let via = via.unwrap_or(if exe.contains("/_npx/") || exe.contains("\\_npx\\") {
        Via::Npx
    } else if exe.contains("/uv/archive-") || exe.contains("\\uv\\cache\\archive-") {
        Via::Uvx
    } else {
        Via::Path
    });
    let (command, mut args) = match via {
        // Windows' canonical paths are verbatim (`\\?\C:\…`), which clients do not all
        // take: the plain form names the same file.
        Via::Path => (
            exe.strip_prefix(r"\\?\")
                .filter(|rest| !rest.starts_with("UNC\\"))
                .unwrap_or(exe)
                .to_owned(),
            Vec::new(),
        ),
        // On Windows `npx` is `npx.cmd`, which clients that start a program without a
        // shell cannot run: `cmd /c` runs it (uvx is an .exe).
        Via::Npx if windows => (
            "cmd".to_owned(),
            ["/c", "npx", "-y", "aai-gateway"]
                .map(str::to_owned)
                .to_vec(),
        ),
        Via::Npx => (
            "npx".to_owned(),
            vec!["-y".to_owned(), "aai-gateway".to_owned()],
        ),
        Via::Uvx => ("uvx".to_owned(), vec!["aai-gateway".to_owned()]),
    };
    if let Some(home) = home {
        args.extend(["--home".to_owned(), home]);
    }
    Launch { command, args }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(l: &Launch) -> String {
        std::iter::once(l.command.as_str())
            .chain(l.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_entry_runs_what_will_still_be_there() {
        let on = |exe: &str, via, windows| line(&launch_for(exe, via, None, windows));
        assert_eq!(
            on("/usr/bin/aai-gateway", None, false),
            "/usr/bin/aai-gateway"
        );
        assert_eq!(
            on(
                "/root/.npm/_npx/1a2b/node_modules/@aai-gateway/linux-x64/bin/aai-gateway",
                None,
                false
            ),
            "npx -y aai-gateway"
        );
        assert_eq!(
            on("/root/.cache/uv/archive-v0/x/bin/aai-gateway", None, false),
            "uvx aai-gateway"
        );
        assert_eq!(
            on(r"\\?\C:\Users\u\aai-gateway.exe", None, true),
            r"C:\Users\u\aai-gateway.exe"
        );
        assert_eq!(
            on(
                r"C:\Users\u\AppData\Local\npm-cache\_npx\1\aai-gateway.exe",
                None,
                true
            ),
            "cmd /c npx -y aai-gateway"
        );
        assert_eq!(
            on("/x/aai-gateway", Some(Via::Uvx), true),
            "uvx aai-gateway"
        );
        let homed = launch_for(
            "/x/aai-gateway",
            Some(Via::Npx),
            Some("/h/aai".into()),
            false,
        );
        assert_eq!(line(&homed), "npx -y aai-gateway --home /h/aai");
    }
}
