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
    /// continue, cline, zed, gemini, copilot, opencode or qwen.
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
    /// Do not allow the gateway's tools in the client's own permissions (Claude Code's
    /// `permissions.allow`, Gemini CLI's and Qwen Code's `trust`, Codex's
    /// `default_tools_approval_mode`): the client then asks before each call as well as
    /// the gateway.
    #[arg(long)]
    no_allow_tools: bool,
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// `clients` / `clients list`: every known client, its file, and whether the gateway is
/// set up in it.
pub(super) fn list(json: bool) -> ExitCode {
    let mut rows = Vec::new();
    for client in clients::ALL {
        let path = usual_path(client);
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

/// `clients add <client>`: the entry, then (offered, unless `--no-allow-tools`) the
/// client's own permission for the gateway's tools.
pub(super) fn add(args: &Add, home: Option<&Path>) -> ExitCode {
    let launch = match launch(args.via, home) {
        Ok(l) => l,
        Err(message) => return fail(&message),
    };
    let name = &args.change.name;
    let (client, path, old) = match target(&args.change) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let current = old.as_deref().unwrap_or("");
    let entry = match client.add(current, name, &launch) {
        Ok(new) => new,
        Err(e) => return malformed(&path, &e),
    };
    let mut edits = Vec::new();
    let after_entry = entry.clone().unwrap_or_else(|| current.to_owned());
    if let Some(new) = entry {
        edits.push(Edit::required(&client, &path, old.clone(), new));
    }
    if !args.no_allow_tools {
        let permission = client.tool_permission(Os::current(), &env);
        let (where_, before) = match permission {
            None => (None, None),
            Some(clients::ToolPermission::Entry) => {
                (Some(path.clone()), Some(Some(after_entry.clone())))
            }
            Some(clients::ToolPermission::File(settings)) => match read(&settings) {
                Ok(text) => (Some(settings), Some(text)),
                Err(code) => return code,
            },
        };
        if let (Some(where_), Some(before)) = (where_, before) {
            let text = before.as_deref().unwrap_or("");
            match client.allow_tools(text, name) {
                Ok(Some(new)) => edits.push(Edit {
                    intro: Some(format!(
                        "\n{0} also asks before each tool of `{name}`, and the gateway asks per \
                         app and tool itself (docs/consent.md): allowing the gateway's tools in \
                         {0} leaves one question. Decline with --no-allow-tools.",
                        client.name
                    )),
                    question: format!("Allow the gateway's tools in {}?", client.name),
                    required: false,
                    ..Edit::required(&client, &where_, before, new)
                }),
                Ok(None) => {}
                Err(e) => return malformed(&where_, &e),
            }
        }
    }
    apply(&client, edits, args.change.yes, &path)
}

/// `clients remove <client>`: the entry, and the client's permission `add` gave it.
pub(super) fn remove(args: &Change) -> ExitCode {
    let (client, path, old) = match target(args) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let mut edits = Vec::new();
    match client.remove(old.as_deref().unwrap_or(""), &args.name) {
        Ok(Some(new)) => edits.push(Edit::required(&client, &path, old.clone(), new)),
        Ok(None) => {}
        Err(e) => return malformed(&path, &e),
    }
    // `trust` went with the entry; a rule in another file is taken out here.
    if let Some(clients::ToolPermission::File(settings)) =
        client.tool_permission(Os::current(), &env)
    {
        let before = match read(&settings) {
            Ok(text) => text,
            Err(code) => return code,
        };
        if let Some(text) = before.as_deref() {
            match client.disallow_tools(text, &args.name) {
                Ok(Some(new)) => edits.push(Edit::required(&client, &settings, before, new)),
                Ok(None) => {}
                Err(e) => return malformed(&settings, &e),
            }
        }
    }
    apply(&client, edits, args.yes, &path)
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "aai-gateway: {message}");
    ExitCode::FAILURE
}

fn malformed(path: &Path, e: &clients::Malformed) -> ExitCode {
    fail(&format!(
        "{} is not valid ({e}); it was left as it is. Fix it, or pass another file with --file.",
        path.display()
    ))
}

/// A file's text; `None` when it does not exist.
fn read(path: &Path) -> Result<Option<String>, ExitCode> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(fail(&format!("cannot read {}: {e}", path.display()))),
    }
}

/// The client, its file (`--file`, the usual one, or the name the client also reads
/// when only that one exists) and the file's text.
fn target(args: &Change) -> Result<(Client, PathBuf, Option<String>), ExitCode> {
    let Some(client) = clients::find(&args.client) else {
        let known: Vec<&str> = clients::ALL.iter().map(|c| c.id).collect();
        return Err(fail(&format!(
            "no client called `{}`; known: {}",
            args.client,
            known.join(", ")
        )));
    };
    let path = match &args.file {
        Some(file) => file.clone(),
        None => match usual_path(&client) {
            Some(path) => path,
            None => {
                return Err(fail(&format!(
                    "cannot tell where {} keeps its configuration; pass --file",
                    client.name
                )));
            }
        },
    };
    let old = read(&path)?;
    Ok((client, path, old))
}

/// The client's user-level file here: the usual one, or the other name the client
/// reads when only that one exists.
fn usual_path(client: &Client) -> Option<PathBuf> {
    let usual = client.config_path(Os::current(), &env)?;
    Some(match client.alternate_path(&usual) {
        Some(other) if !usual.exists() && other.exists() => other,
        _ => usual,
    })
}

/// One file's change, shown as a diff and confirmed before anything is written.
#[derive(Debug)]
struct Edit {
    path: PathBuf,
    /// The text before (`None`: no file yet).
    old: Option<String>,
    new: String,
    /// The file is the gateway's own and holds nothing any more: it goes.
    delete: bool,
    /// Said before the diff.
    intro: Option<String>,
    question: String,
    /// Declining a required edit writes nothing; declining another skips it alone.
    required: bool,
}

impl Edit {
    fn required(client: &Client, path: &Path, old: Option<String>, new: String) -> Self {
        let delete = old.is_some() && client.own_file() && client.only_empty_servers(&new);
        Edit {
            path: path.to_owned(),
            old,
            new,
            delete,
            intro: None,
            question: format!("Write {}?", path.display()),
            required: true,
        }
    }
}

/// Shows each edit's diff and asks (unless `yes`), then backs up and writes the files:
/// one backup and one write per file, however many edits it has.
fn apply(client: &Client, edits: Vec<Edit>, yes: bool, main: &Path) -> ExitCode {
    if edits.is_empty() {
        let _ = writeln!(
            std::io::stdout(),
            "{}: nothing to change in {}",
            client.name,
            main.display()
        );
        return ExitCode::SUCCESS;
    }
    let mut accepted: Vec<Edit> = Vec::new();
    let mut unasked: Vec<PathBuf> = Vec::new();
    for edit in edits {
        let mut out = std::io::stdout().lock();
        if let Some(intro) = &edit.intro {
            let _ = writeln!(out, "{intro}");
        }
        let label = edit.path.display().to_string();
        let shown_new = if edit.delete { "" } else { edit.new.as_str() };
        let diff = similar::TextDiff::from_lines(edit.old.as_deref().unwrap_or(""), shown_new);
        let _ = write!(
            out,
            "{}",
            diff.unified_diff().context_radius(3).header(
                if edit.old.is_some() {
                    &label
                } else {
                    "/dev/null"
                },
                &label
            )
        );
        let _ = out.flush();
        drop(out);
        if yes {
            accepted.push(edit);
        } else if !terminal() {
            // Nothing can be asked: every change is shown, none is written.
            unasked.push(edit.path);
        } else if confirm(&edit.question) {
            accepted.push(edit);
        } else if edit.required {
            let _ = writeln!(
                std::io::stderr(),
                "aai-gateway: not written; run again with --yes to write {}",
                edit.path.display()
            );
            return ExitCode::FAILURE;
        } else {
            let _ = writeln!(
                std::io::stdout(),
                "{} will ask before each of the gateway's tools as well.",
                client.name
            );
        }
    }
    if !unasked.is_empty() {
        unasked.dedup();
        let files: Vec<String> = unasked.iter().map(|p| p.display().to_string()).collect();
        let _ = writeln!(
            std::io::stderr(),
            "aai-gateway: not written; run again with --yes to write {}",
            files.join(" and ")
        );
        return ExitCode::FAILURE;
    }
    // Per file: the text before the first edit, after the last one.
    let mut files: Vec<Edit> = Vec::new();
    for edit in accepted {
        match files.iter_mut().find(|f| f.path == edit.path) {
            Some(file) => {
                file.new = edit.new;
                file.delete = edit.delete;
            }
            None => files.push(edit),
        }
    }
    for file in &files {
        // The gateway's own file needs no copy: the diff above showed all of it.
        let keep_copy = file.old.is_some() && !file.delete;
        let backup = match keep_copy.then(|| backup(&file.path)).transpose() {
            Ok(b) => b,
            Err(e) => {
                return fail(&format!(
                    "cannot back up {}: {e}; it was not written",
                    file.path.display()
                ));
            }
        };
        let written = if file.delete {
            std::fs::remove_file(&file.path)
        } else {
            write(&file.path, file.new.as_bytes())
        };
        if let Err(e) = written {
            return fail(&format!("cannot write {}: {e}", file.path.display()));
        }
        let mut done = format!(
            "{}: {} {}",
            client.name,
            if file.delete { "removed" } else { "wrote" },
            file.path.display()
        );
        if let Some(b) = backup {
            done.push_str(&format!(" (backup: {})", b.display()));
        }
        let _ = writeln!(std::io::stdout(), "{done}.");
    }
    let _ = writeln!(std::io::stdout(), "Restart {} to use it.", client.name);
    ExitCode::SUCCESS
}

/// Whether a question can be asked: stdin and stderr are a terminal.
fn terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// "y" at the terminal; no terminal, no write.
fn confirm(question: &str) -> bool {
    if !terminal() {
        return false;
    }
    let _ = write!(std::io::stderr(), "{question} [y/N] ");
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
