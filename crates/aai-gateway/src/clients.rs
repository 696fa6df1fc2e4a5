//! The MCP clients the gateway can register itself with (`aai-gateway clients`): where
//! each keeps its user-level configuration, the shape of its server entry, and how the
//! gateway's entry is merged in or taken out while every other key, server, comment and
//! the file's formatting stay as they were (a concrete syntax tree for JSON and JSONC, a
//! format-preserving document for TOML).
//!
//! Pure: texts in, texts out. The command line reads and writes the files (docs/clients.md).

use std::path::PathBuf;

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::Value;

use crate::host::Os;

/// The entry name used unless the user picks another (`claude mcp add aai …`).
pub(crate) const DEFAULT_NAME: &str = "aai";

/// A client the gateway knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Client {
    /// What the user types: `clients add <id>`.
    pub id: &'static str,
    /// The product's name.
    pub name: &'static str,
    kind: Kind,
}

/// Where the entry goes and what it looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `mcpServers.<name> = {command, args}` (Claude Desktop, Cursor, Windsurf, Gemini
    /// CLI, and Continue's own `mcpServers/*.json` files).
    McpServers,
    /// `mcpServers.<name> = {type: "stdio", command, args, env}` in `~/.claude.json`.
    ClaudeCode,
    /// `servers.<name> = {type: "stdio", command, args}` in VS Code's user `mcp.json`.
    VsCode,
    /// `mcpServers.<name> = {command, args, disabled: false}` (Cline).
    Cline,
    /// `context_servers.<name> = {source: "custom", command, args, env}` (Zed).
    Zed,
    /// `[mcp_servers.<name>]` with `command` and `args` in Codex's `config.toml`.
    Codex,
    /// `mcpServers.<name> = {type: "local", command, args, tools: ["*"]}` in GitHub
    /// Copilot CLI's `mcp-config.json` (what `copilot mcp add` writes).
    Copilot,
    /// `mcp.<name> = {type: "local", command: [program, args…], enabled: true}` in
    /// opencode's `opencode.json`.
    Opencode,
}

/// Every client, in the order `clients` lists them.
pub(crate) const ALL: &[Client] = &[
    Client {
        id: "claude-code",
        name: "Claude Code",
        kind: Kind::ClaudeCode,
    },
    Client {
        id: "claude-desktop",
        name: "Claude Desktop",
        kind: Kind::McpServers,
    },
    Client {
        id: "cursor",
        name: "Cursor",
        kind: Kind::McpServers,
    },
    Client {
        id: "vscode",
        name: "VS Code",
        kind: Kind::VsCode,
    },
    Client {
        id: "windsurf",
        name: "Windsurf",
        kind: Kind::McpServers,
    },
    Client {
        id: "codex",
        name: "Codex",
        kind: Kind::Codex,
    },
    Client {
        id: "continue",
        name: "Continue",
        kind: Kind::McpServers,
    },
    Client {
        id: "cline",
        name: "Cline",
        kind: Kind::Cline,
    },
    Client {
        id: "zed",
        name: "Zed",
        kind: Kind::Zed,
    },
    Client {
        id: "gemini",
        name: "Gemini CLI",
        kind: Kind::McpServers,
    },
    Client {
        id: "copilot",
        name: "Copilot CLI",
        kind: Kind::Copilot,
    },
    Client {
        id: "opencode",
        name: "opencode",
        kind: Kind::Opencode,
    },
    Client {
        id: "qwen",
        name: "Qwen Code",
        kind: Kind::McpServers,
    },
];

/// The client called `id` (its id or its name, any case; `claude` is Claude Code).
pub(crate) fn find(id: &str) -> Option<Client> {
    let wanted = id.trim().to_ascii_lowercase().replace([' ', '_'], "-");
    let wanted = match wanted.as_str() {
        "claude" => "claude-code",
        "code" | "vs-code" => "vscode",
        "gemini-cli" => "gemini",
        "github-copilot" | "copilot-cli" | "github-copilot-cli" => "copilot",
        "qwen-code" => "qwen",
        other => other,
    };
    ALL.iter()
        .find(|c| c.id == wanted || c.name.to_ascii_lowercase().replace(' ', "-") == wanted)
        .copied()
}

/// How the client starts the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
}

/// The key on a server entry that lets its tools run without the client's question
/// (Gemini CLI, Qwen Code).
const TRUST: &str = "trust";

/// Codex's key on a server's table for the approval of its tools, and the value that
/// runs them without asking.
const CODEX_APPROVAL: (&str, &str) = ("default_tools_approval_mode", "approve");

/// Where a client keeps the setting that lets a server's tools run without asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolPermission {
    /// `trust: true` on the server entry itself, in the same file.
    Entry,
    /// Another file: Claude Code's `settings.json`, whose `permissions.allow` lists
    /// `mcp__<name>`.
    File(PathBuf),
}

/// Claude Code's permission rule for every tool of the server `name`.
fn claude_rule(name: &str) -> String {
    format!("mcp__{name}")
}

fn is_string(node: &jsonc_parser::cst::CstNode, wanted: &str) -> bool {
    node.as_string_lit()
        .and_then(|s| s.decoded_value().ok())
        .is_some_and(|s| s == wanted)
}

/// A client's configuration could not be read: the file is left alone.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Malformed {
    /// Not JSON (or JSONC where the client allows comments).
    #[error("{0}")]
    Json(String),
    /// Not TOML.
    #[error("{0}")]
    Toml(String),
    /// Parsed, but a key the entry goes under holds something other than an object/table.
    #[error("`{0}` is not an object")]
    NotAnObject(String),
    /// Parsed, but a key the rule goes into holds something other than a list.
    #[error("`{0}` is not a list")]
    NotAnArray(String),
}

impl Client {
    /// The user-level configuration file on `os`, from the environment (`HOME`,
    /// `XDG_CONFIG_HOME`, `APPDATA`, `USERPROFILE`, `CODEX_HOME`).
    pub(crate) fn config_path(
        &self,
        os: Os,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<PathBuf> {
        let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = match os {
            Os::Windows => var("USERPROFILE"),
            _ => var("HOME"),
        }?;
        // Where desktop apps keep their settings: ~/.config, ~/Library/Application
        // Support or %APPDATA%.
        let app_data = match os {
            Os::Windows => var("APPDATA").unwrap_or_else(|| home.join("AppData").join("Roaming")),
            Os::Macos => home.join("Library").join("Application Support"),
            _ => var("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config")),
        };
        let vscode_user = app_data.join("Code").join("User");
        Some(match self.id {
            // `CLAUDE_CONFIG_DIR` moves `~/.claude.json` into that folder.
            "claude-code" => var("CLAUDE_CONFIG_DIR")
                .map_or_else(|| home.join(".claude.json"), |d| d.join(".claude.json")),
            "claude-desktop" => app_data.join("Claude").join("claude_desktop_config.json"),
            "cursor" => home.join(".cursor").join("mcp.json"),
            "vscode" => vscode_user.join("mcp.json"),
            "windsurf" => home
                .join(".codeium")
                .join("windsurf")
                .join("mcp_config.json"),
            "codex" => var("CODEX_HOME")
                .unwrap_or_else(|| home.join(".codex"))
                .join("config.toml"),
            // Continue reads every JSON file of ~/.continue/mcpServers/: the gateway's
            // entry gets a file of its own there.
            "continue" => home
                .join(".continue")
                .join("mcpServers")
                .join("aai-gateway.json"),
            "cline" => vscode_user
                .join("globalStorage")
                .join("saoudrizwan.claude-dev")
                .join("settings")
                .join("cline_mcp_settings.json"),
            "zed" => match os {
                Os::Windows => app_data.join("Zed").join("settings.json"),
                _ => var("XDG_CONFIG_HOME")
                    .unwrap_or_else(|| home.join(".config"))
                    .join("zed")
                    .join("settings.json"),
            },
            "gemini" => home.join(".gemini").join("settings.json"),
            "copilot" => var("COPILOT_HOME")
                .unwrap_or_else(|| home.join(".copilot"))
                .join("mcp-config.json"),
            // opencode keeps `~/.config` on every OS (`XDG_CONFIG_HOME` moves it); an
            // `opencode.jsonc` there is used instead when it is the one that exists
            // (`alternate_path`).
            "opencode" => var("XDG_CONFIG_HOME")
                .unwrap_or_else(|| home.join(".config"))
                .join("opencode")
                .join("opencode.json"),
            "qwen" => var("QWEN_HOME")
                .unwrap_or_else(|| home.join(".qwen"))
                .join("settings.json"),
            _ => return None,
        })
    }

    /// Another name the client reads its file under when the usual one is missing
    /// (opencode: `opencode.jsonc` beside `opencode.json`, as `opencode mcp add` picks).
    pub(crate) fn alternate_path(&self, path: &std::path::Path) -> Option<PathBuf> {
        (self.kind == Kind::Opencode && path.extension().is_some_and(|e| e == "json"))
            .then(|| path.with_extension("jsonc"))
    }

    /// Where the client's own setting that lets a server's tools run without its own
    /// question lives, for the clients where one was verified against the client
    /// (docs/consent.md, "The client's own question").
    pub(crate) fn tool_permission(
        &self,
        os: Os,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<ToolPermission> {
        match self.id {
            "gemini" | "qwen" | "codex" => Some(ToolPermission::Entry),
            "claude-code" => {
                let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
                let home = match os {
                    Os::Windows => var("USERPROFILE"),
                    _ => var("HOME"),
                };
                let dir = var("CLAUDE_CONFIG_DIR").or_else(|| home.map(|h| h.join(".claude")))?;
                Some(ToolPermission::File(dir.join("settings.json")))
            }
            _ => None,
        }
    }

    /// `text` with the server `name`'s tools allowed without the client's own question:
    /// on the entry ([`ToolPermission::Entry`]: `trust: true`, Codex's
    /// `default_tools_approval_mode = "approve"`; `None` when the entry is missing), or
    /// `mcp__<name>` in `permissions.allow` (Claude Code's settings). `None` when already
    /// so.
    pub(crate) fn allow_tools(&self, text: &str, name: &str) -> Result<Option<String>, Malformed> {
        if self.kind == Kind::Codex {
            return codex_approval(text, name, true);
        }
        let root = parse_json(text)?;
        let object = root.object_value_or_set();
        if self.id == "claude-code" {
            let permissions = child_object(&object, "permissions")?;
            let rule = claude_rule(name);
            let allow = match permissions.get("allow") {
                None => permissions.array_value_or_set("allow"),
                Some(prop) => match prop.value().and_then(|v| v.as_array()) {
                    Some(array) => array,
                    None => return Err(Malformed::NotAnArray("permissions.allow".to_owned())),
                },
            };
            if allow.elements().iter().any(|e| is_string(e, &rule)) {
                return Ok(None);
            }
            allow.append(CstInputValue::String(rule));
        } else {
            let Some(servers) = object.object_value(self.servers_key()) else {
                return Ok(None);
            };
            let Some(entry) = servers.object_value(name) else {
                return Ok(None);
            };
            match entry.get(TRUST) {
                Some(prop)
                    if prop.value().and_then(|v| v.to_serde_value()) == Some(true.into()) =>
                {
                    return Ok(None);
                }
                Some(prop) => prop.set_value(CstInputValue::Bool(true)),
                None => {
                    entry.append(TRUST, CstInputValue::Bool(true));
                }
            }
        }
        Ok(Some(with_final_newline(root.to_string(), text)))
    }

    /// `text` without what [`Client::allow_tools`] added: the `mcp__<name>` rule (and
    /// the `allow` list and `permissions` object it leaves empty), or the entry's
    /// `trust` (Codex: its approval mode). `None` when there is none.
    pub(crate) fn disallow_tools(
        &self,
        text: &str,
        name: &str,
    ) -> Result<Option<String>, Malformed> {
        if self.kind == Kind::Codex {
            return codex_approval(text, name, false);
        }
        let root = parse_json(text)?;
        let Some(object) = root.object_value() else {
            return Ok(None);
        };
        if self.id == "claude-code" {
            let Some(permissions) = object.object_value("permissions") else {
                return Ok(None);
            };
            let Some(allow) = permissions.array_value("allow") else {
                return Ok(None);
            };
            let rule = claude_rule(name);
            let Some(element) = allow.elements().into_iter().find(|e| is_string(e, &rule)) else {
                return Ok(None);
            };
            element.remove();
            if allow.elements().is_empty() {
                if let Some(prop) = permissions.get("allow") {
                    prop.remove();
                }
                if permissions.properties().is_empty()
                    && let Some(prop) = object.get("permissions")
                {
                    prop.remove();
                }
            }
        } else {
            let Some(trust) = object
                .object_value(self.servers_key())
                .and_then(|servers| servers.object_value(name))
                .and_then(|entry| entry.get(TRUST))
            else {
                return Ok(None);
            };
            trust.remove();
        }
        Ok(Some(with_final_newline(root.to_string(), text)))
    }

    /// The key the servers live under.
    fn servers_key(&self) -> &'static str {
        match self.kind {
            Kind::VsCode => "servers",
            Kind::Zed => "context_servers",
            Kind::Codex => "mcp_servers",
            Kind::Opencode => "mcp",
            _ => "mcpServers",
        }
    }

    /// The entry for `launch`, in this client's shape.
    pub(crate) fn entry(&self, launch: &Launch) -> Value {
        let mut entry = serde_json::Map::new();
        match self.kind {
            Kind::ClaudeCode | Kind::VsCode => {
                entry.insert("type".into(), "stdio".into());
            }
            Kind::Zed => {
                entry.insert("source".into(), "custom".into());
            }
            Kind::Copilot | Kind::Opencode => {
                entry.insert("type".into(), "local".into());
            }
            _ => {}
        }
        if self.kind == Kind::Opencode {
            // One list: the program, then its arguments.
            let command: Vec<String> = std::iter::once(launch.command.clone())
                .chain(launch.args.iter().cloned())
                .collect();
            entry.insert("command".into(), command.into());
            entry.insert("enabled".into(), true.into());
            return Value::Object(entry);
        }
        entry.insert("command".into(), launch.command.clone().into());
        entry.insert("args".into(), launch.args.clone().into());
        match self.kind {
            Kind::Copilot => {
                entry.insert("tools".into(), vec!["*"].into());
            }
            Kind::ClaudeCode | Kind::Zed => {
                entry.insert("env".into(), Value::Object(serde_json::Map::new()));
            }
            Kind::Cline => {
                entry.insert("disabled".into(), false.into());
            }
            _ => {}
        }
        Value::Object(entry)
    }

    /// The name under which the gateway is set up in `text`: an entry called `name`, or
    /// any entry that starts `aai-gateway` (by path, `npx -y aai-gateway` or `uvx`).
    pub(crate) fn status(&self, text: &str, name: &str) -> Result<Option<String>, Malformed> {
        let servers = self.servers(text)?;
        if servers.iter().any(|(n, _)| n == name) {
            return Ok(Some(name.to_owned()));
        }
        Ok(servers
            .into_iter()
            .find(|(_, entry)| runs_gateway(entry))
            .map(|(n, _)| n))
    }

    /// `text` (empty when the file does not exist yet) with the gateway's entry `name`
    /// added, or replaced when it differs. `None` when it is already there as asked.
    pub(crate) fn add(
        &self,
        text: &str,
        name: &str,
        launch: &Launch,
    ) -> Result<Option<String>, Malformed> {
        let entry = self.entry(launch);
        if self.kind == Kind::Codex {
            return codex_add(text, name, &entry);
        }
        let root = parse_json(text)?;
        let object = root.object_value_or_set();
        let servers = child_object(&object, self.servers_key())?;
        match servers.get(name) {
            Some(prop) => {
                let mut current = prop.value().and_then(|v| v.to_serde_value());
                // The client's own permission (`trust`) is `allow_tools`'s: kept as it is.
                let trust = current
                    .as_mut()
                    .and_then(Value::as_object_mut)
                    .and_then(|c| c.remove(TRUST));
                if current.as_ref() == Some(&entry) {
                    return Ok(None);
                }
                let mut entry = entry;
                if let (Some(trust), Some(map)) = (trust, entry.as_object_mut()) {
                    map.insert(TRUST.to_owned(), trust);
                }
                prop.set_value(cst_value(&entry));
            }
            None => {
                servers.append(name, cst_value(&entry));
            }
        }
        Ok(Some(with_final_newline(root.to_string(), text)))
    }

    /// `text` without the entry `name`; `None` when there is no such entry.
    pub(crate) fn remove(&self, text: &str, name: &str) -> Result<Option<String>, Malformed> {
        if self.kind == Kind::Codex {
            return codex_remove(text, name);
        }
        let root = parse_json(text)?;
        let Some(object) = root.object_value() else {
            return Ok(None);
        };
        let Some(servers) = object.object_value(self.servers_key()) else {
            return Ok(None);
        };
        let Some(prop) = servers.get(name) else {
            return Ok(None);
        };
        prop.remove();
        Ok(Some(with_final_newline(root.to_string(), text)))
    }

    /// Whether `text` holds nothing but an empty server list: what `remove` leaves of a
    /// file the gateway made (Continue's `aai-gateway.json`), which can then go.
    pub(crate) fn only_empty_servers(&self, text: &str) -> bool {
        let Ok(Value::Object(map)) = json_value(text) else {
            return false;
        };
        map.len() == 1
            && map
                .get(self.servers_key())
                .and_then(Value::as_object)
                .is_some_and(serde_json::Map::is_empty)
    }

    /// Whether the gateway owns the whole file (it is not the client's main settings).
    pub(crate) fn own_file(&self) -> bool {
        self.id == "continue"
    }

    /// The servers of `text`, by name.
    fn servers(&self, text: &str) -> Result<Vec<(String, Value)>, Malformed> {
        let value = if self.kind == Kind::Codex {
            let table: toml::Table =
                toml::from_str(text).map_err(|e| Malformed::Toml(e.to_string()))?;
            serde_json::to_value(table).unwrap_or_default()
        } else {
            json_value(text)?
        };
        if !(value.is_object() || value.is_null()) {
            return Err(Malformed::NotAnObject("the file".to_owned()));
        }
        let servers = match value.get(self.servers_key()) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Object(map)) => map,
            Some(_) => return Err(Malformed::NotAnObject(self.servers_key().to_owned())),
        };
        Ok(servers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

/// Whether a server entry starts the gateway: its command, or (for `npx`/`uvx`) its
/// first package argument, is `aai-gateway`.
fn runs_gateway(entry: &Value) -> bool {
    let is_gateway = |s: &str| {
        let file = s.rsplit(['/', '\\']).next().unwrap_or(s);
        let file = file.strip_suffix(".exe").unwrap_or(file);
        file == "aai-gateway" || s.starts_with("aai-gateway@")
    };
    // Zed's older shape nests them: {"command": {"path", "args"}}; opencode's is one
    // list, the program first.
    let (command, args) = match entry.get("command") {
        Some(Value::Object(nested)) => (nested.get("path"), nested.get("args")),
        Some(list @ Value::Array(_)) => (None, Some(list)),
        command => (command, entry.get("args")),
    };
    command.and_then(Value::as_str).is_some_and(is_gateway)
        || args
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().filter_map(Value::as_str).any(is_gateway))
}

/// JSONC, as every client here accepts it on reading (comments, trailing commas);
/// nothing the gateway writes uses either.
fn options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_loose_object_property_names: false,
        allow_trailing_commas: true,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        ..ParseOptions::default()
    }
}

/// The whole of a JSONC text as a value (`null` for an empty file).
fn json_value(text: &str) -> Result<Value, Malformed> {
    let root = CstRootNode::parse(text, &options()).map_err(|e| Malformed::Json(e.to_string()))?;
    Ok(root
        .value()
        .and_then(|v| v.to_serde_value())
        .unwrap_or_default())
}

fn parse_json(text: &str) -> Result<CstRootNode, Malformed> {
    let root = CstRootNode::parse(text, &options()).map_err(|e| Malformed::Json(e.to_string()))?;
    match root.value() {
        Some(v) if v.as_object().is_none() => Err(Malformed::NotAnObject("the file".to_owned())),
        _ => Ok(root),
    }
}

/// The object under `key` of `object`, made when missing; an error when it is not one.
fn child_object(object: &CstObject, key: &str) -> Result<CstObject, Malformed> {
    match object.get(key) {
        None => Ok(object.object_value_or_set(key)),
        Some(prop) => match prop.value() {
            Some(v) if v.as_object().is_some() => Ok(object.object_value_or_set(key)),
            Some(v) if v.as_null_keyword().is_some() => Ok(object.object_value_or_set(key)),
            _ => Err(Malformed::NotAnObject(key.to_owned())),
        },
    }
}

fn cst_value(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(cst_value).collect()),
        Value::Object(map) => {
            CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), cst_value(v))).collect())
        }
    }
}

/// A new file ends with a newline; an existing one keeps whether it had one.
fn with_final_newline(mut new: String, old: &str) -> String {
    if (old.trim().is_empty() || old.ends_with('\n')) && !new.ends_with('\n') {
        new.push('\n');
    }
    new
}

fn codex_document(text: &str) -> Result<toml_edit::DocumentMut, Malformed> {
    text.parse::<toml_edit::DocumentMut>()
        .map_err(|e| Malformed::Toml(e.to_string()))
}

fn codex_add(text: &str, name: &str, entry: &Value) -> Result<Option<String>, Malformed> {
    let mut doc = codex_document(text)?;
    let servers = doc.entry("mcp_servers").or_insert_with(|| {
        let mut table = toml_edit::Table::new();
        table.set_implicit(true);
        toml_edit::Item::Table(table)
    });
    let Some(servers) = servers.as_table_like_mut() else {
        return Err(Malformed::NotAnObject("mcp_servers".to_owned()));
    };
    let mut table = toml_edit::Table::new();
    // The approval mode is `allow_tools`'s: kept as it is.
    let approval = servers
        .get(name)
        .and_then(|t| t.as_table_like())
        .and_then(|t| t.get(CODEX_APPROVAL.0))
        .cloned();
    table.insert(
        "command",
        toml_edit::value(entry["command"].as_str().unwrap_or_default()),
    );
    let mut args = toml_edit::Array::new();
    for a in entry["args"].as_array().into_iter().flatten() {
        args.push(a.as_str().unwrap_or_default());
    }
    table.insert("args", toml_edit::value(args));
    if let Some(current) = servers.get(name) {
        let same = current.as_table_like().is_some_and(|t| {
            t.len() == 2 + usize::from(approval.is_some())
                && t.get("command").and_then(|c| c.as_str()) == entry["command"].as_str()
                && t.get("args").and_then(|a| a.as_array()).is_some_and(|a| {
                    a.iter().map(|v| v.as_str()).eq(entry["args"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(Value::as_str))
                })
        });
        if same {
            return Ok(None);
        }
    }
    if let Some(approval) = approval {
        table.insert(CODEX_APPROVAL.0, approval);
    }
    servers.insert(name, toml_edit::Item::Table(table));
    Ok(Some(with_final_newline(doc.to_string(), text)))
}

/// Codex's `default_tools_approval_mode = "approve"` on the entry `name` set (`allow`)
/// or taken out; `None` when there is nothing to change or no such entry.
fn codex_approval(text: &str, name: &str, allow: bool) -> Result<Option<String>, Malformed> {
    let mut doc = codex_document(text)?;
    let Some(entry) = doc
        .get_mut("mcp_servers")
        .and_then(|s| s.as_table_like_mut())
        .and_then(|s| s.get_mut(name))
        .and_then(|e| e.as_table_like_mut())
    else {
        return Ok(None);
    };
    let (key, value) = CODEX_APPROVAL;
    let current = entry.get(key).and_then(|v| v.as_str());
    if allow {
        if current == Some(value) {
            return Ok(None);
        }
        entry.insert(key, toml_edit::value(value));
    } else if entry.remove(key).is_none() {
        return Ok(None);
    }
    Ok(Some(with_final_newline(doc.to_string(), text)))
}

fn codex_remove(text: &str, name: &str) -> Result<Option<String>, Malformed> {
    let mut doc = codex_document(text)?;
    let Some(servers) = doc
        .get_mut("mcp_servers")
        .and_then(|s| s.as_table_like_mut())
    else {
        return Ok(None);
    };
    if servers.remove(name).is_none() {
        return Ok(None);
    }
    // The `[mcp_servers]` header the gateway's entry implied goes with it.
    if servers.is_empty()
        && doc["mcp_servers"]
            .as_table()
            .is_some_and(|t| t.is_implicit())
    {
        doc.remove("mcp_servers");
    }
    Ok(Some(doc.to_string()))
}

#[cfg(test)]
#[path = "clients_tests.rs"]
mod tests;
