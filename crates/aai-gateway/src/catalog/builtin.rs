//! Descriptors compiled into the binary for common freedesktop interfaces, active only
//! when their service is on the session bus (owned, or activatable):
//!
//! * `org.freedesktop.Notifications` — desktop notifications (GNOME, KDE, dunst, mako…);
//! * `org.mpris.MediaPlayer2.<player>` — one app per MPRIS media player on the bus, from a
//!   template (play, pause, toggle, next, previous, seek, set position, status, position,
//!   current track, volume).
//!
//! * on macOS, Apple's own apps, each only where its bundle exists: Mail (send, search,
//!   list unread), Reminders (add, list, complete), Calendar (add an event, list events in
//!   a range), Notes (create, search), Finder (reveal, selection) — AppleScript written
//!   against each app's scripting dictionary, returning records. Verified only through the
//!   command boundary (docs/macos.md), not on a Mac.
//!
//! * coding agents that speak ACP, each only when its command is on `PATH`: OpenCode
//!   (`opencode acp`), Claude Code (`claude-code-acp`), Codex (`codex-acp`) and Gemini CLI
//!   (`gemini --experimental-acp`), with one `ask` tool (docs/agents.md); Claude Code and
//!   Codex also when only `claude`/`codex` and `npx` are, through `npx -y <adapter>`.
//!
//! They have the lowest precedence: a descriptor for the same id anywhere else wins.

use std::path::PathBuf;

use aai_descriptor::App;

use crate::catalog::{Catalog, Loaded, SourceKind};

const NOTIFICATIONS: &str = include_str!("../../builtin/notifications.json");
const MPRIS: &str = include_str!("../../builtin/mpris.json");
/// The id of the gateway's own app.
pub(crate) const GATEWAY_ID: &str = "aai";
/// The gateway's own app (`aai`: import, remove, enable, disable; `manage/` runs it).
const GATEWAY: &str = include_str!("../../builtin/aai.json");
const MPRIS_PREFIX: &str = "org.mpris.MediaPlayer2.";

/// macOS built-ins: descriptor, source name, and the bundles that make it apply (under
/// the system root).
const MACOS: [(&str, &str, &[&str]); 5] = [
    (
        include_str!("../../builtin/macos/mail.json"),
        "builtin:macos/mail",
        &["System/Applications/Mail.app", "Applications/Mail.app"],
    ),
    (
        include_str!("../../builtin/macos/reminders.json"),
        "builtin:macos/reminders",
        &[
            "System/Applications/Reminders.app",
            "Applications/Reminders.app",
        ],
    ),
    (
        include_str!("../../builtin/macos/calendar.json"),
        "builtin:macos/calendar",
        &[
            "System/Applications/Calendar.app",
            "Applications/Calendar.app",
        ],
    ),
    (
        include_str!("../../builtin/macos/notes.json"),
        "builtin:macos/notes",
        &["System/Applications/Notes.app", "Applications/Notes.app"],
    ),
    (
        include_str!("../../builtin/macos/finder.json"),
        "builtin:macos/finder",
        &["System/Library/CoreServices/Finder.app"],
    ),
];

/// The ids of the macOS built-in apps.
pub(crate) fn macos_ids() -> Vec<String> {
    MACOS
        .iter()
        .map(|(text, source, _)| parse(text, source).0.id)
        .collect()
}

/// The macOS built-in apps whose bundle exists under `root`.
pub(crate) fn macos_apps(root: &std::path::Path) -> Vec<(App, PathBuf)> {
    MACOS
        .iter()
        .filter(|(_, _, bundles)| bundles.iter().any(|b| root.join(b).is_dir()))
        .map(|(text, source, _)| parse(text, source))
        .collect()
}

/// The built-in apps that apply, given the session bus's owned and activatable names.
pub(crate) fn apps(names: &[String]) -> Vec<(App, PathBuf)> {
    let mut out = Vec::new();
    if names.iter().any(|n| n == "org.freedesktop.Notifications") {
        out.push(parse(NOTIFICATIONS, "builtin:notifications"));
    }
    let mut players: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_prefix(MPRIS_PREFIX))
        .filter(|p| !p.is_empty())
        .collect();
    players.sort_unstable();
    players.dedup();
    for player in players {
        out.push(parse(
            &MPRIS.replace("PLAYER", player),
            &format!("builtin:mpris/{player}"),
        ));
    }
    out
}

/// A coding agent offered when its command is on `PATH` — or, for an agent that speaks
/// ACP through an adapter, when the agent's own CLI is (`claude`, `codex`) and `npx` can
/// fetch the adapter (`npm` names it).
struct CodingAgent {
    id: &'static str,
    name: &'static str,
    command: &'static str,
    args: &'static [&'static str],
    about: &'static str,
    /// The agent's own command, and the npm package of its ACP adapter.
    npm: Option<(&'static str, &'static str)>,
}

const CODING_AGENTS: [CodingAgent; 4] = [
    CodingAgent {
        id: "ai.opencode",
        name: "OpenCode",
        command: "opencode",
        args: &["acp"],
        about: "OpenCode, the open-source coding agent",
        npm: None,
    },
    CodingAgent {
        id: "com.anthropic.claude-code",
        name: "Claude Code",
        command: "claude-code-acp",
        args: &[],
        about: "Anthropic's Claude Code, through Zed's ACP adapter",
        npm: Some(("claude", "@zed-industries/claude-code-acp")),
    },
    CodingAgent {
        id: "com.openai.codex",
        name: "Codex",
        command: "codex-acp",
        args: &[],
        about: "OpenAI's Codex, through Zed's ACP adapter",
        npm: Some(("codex", "@zed-industries/codex-acp")),
    },
    CodingAgent {
        id: "com.google.gemini-cli",
        name: "Gemini CLI",
        command: "gemini",
        args: &["--experimental-acp"],
        about: "Google's Gemini CLI",
        npm: None,
    },
];

/// The descriptor platform of this host (a desktop one: what the gateway writes for
/// coding agents and skills).
pub(crate) fn host_platform() -> &'static str {
    match crate::host::Host::current().os() {
        crate::host::Os::Macos => "macos",
        crate::host::Os::Windows => "windows",
        _ => "linux",
    }
}

/// The gateway's own app, `aai`, whose tools manage the others (always present). The
/// format has no execution type for it, so no descriptor file can claim it: its tools
/// are read from the compiled-in descriptor with a stand-in type, then given the
/// gateway's.
/// Parsed once per process: every scan adds a copy.
pub(crate) fn gateway_app() -> (App, PathBuf) {
    static APP: std::sync::OnceLock<(App, PathBuf)> = std::sync::OnceLock::new();
    APP.get_or_init(|| {
        let text = GATEWAY.replace("PLATFORM", host_platform()).replace(
            r#""execution": {"type": "gateway"}"#,
            r#""execution": {"type": "skill"}"#,
        );
        let (mut app, source) = parse(&text, "builtin:aai");
        for binding in &mut app.bindings {
            binding.executor = aai_descriptor::Executor::Gateway;
        }
        (app, source)
    })
    .clone()
}

/// The coding agents whose command `find` locates (`host::on_path` in the gateway).
pub(crate) fn coding_agents(find: impl Fn(&str) -> bool) -> Vec<(App, PathBuf)> {
    let platform = host_platform();
    CODING_AGENTS
        .iter()
        .filter_map(|a| {
            if find(a.command) {
                return Some((
                    a,
                    a.command.to_owned(),
                    a.args.iter().map(|s| (*s).to_owned()).collect(),
                ));
            }
            // The agent is installed but its adapter is not: npx fetches the adapter on
            // the first start — which downloads code, so the start's consent says so.
            let (cli, package) = a.npm?;
            (find(cli) && find("npx")).then(|| {
                (
                    a,
                    "npx".to_owned(),
                    vec!["-y".to_owned(), package.to_owned()],
                )
            })
        })
        .map(|(a, command, args): (&CodingAgent, String, Vec<String>)| {
            let doc = agent_doc(a, platform, &command, &args);
            parse(&doc.to_string(), &format!("builtin:agents/{}", a.command))
        })
        .collect()
}

/// The text of the built-in descriptor named `source` (`builtin:…`), as the gateway loads
/// it: compiled in (an MPRIS player's with its name filled in), or written for a coding
/// agent found on `PATH` (`find`).
pub(crate) fn text_of(source: &str, find: impl Fn(&str) -> bool) -> Option<String> {
    let name = source.strip_prefix("builtin:")?;
    if name == "notifications" {
        return Some(NOTIFICATIONS.to_owned());
    }
    if name == "aai" {
        return Some(GATEWAY.replace("PLATFORM", host_platform()));
    }
    if let Some(player) = name.strip_prefix("mpris/") {
        return Some(MPRIS.replace("PLAYER", player));
    }
    if let Some((text, _, _)) = MACOS.iter().find(|(_, s, _)| *s == source) {
        return Some((*text).to_owned());
    }
    let command = name.strip_prefix("agents/")?;
    let platform = host_platform();
    CODING_AGENTS
        .iter()
        .find(|a| a.command == command)
        .map(|a| {
            let (command, args) = if find(a.command) || a.npm.is_none() {
                (
                    a.command.to_owned(),
                    a.args.iter().map(|s| (*s).to_owned()).collect(),
                )
            } else {
                let package = a.npm.map_or("", |(_, p)| p);
                ("npx".to_owned(), vec!["-y".to_owned(), package.to_owned()])
            };
            serde_json::to_string_pretty(&agent_doc(a, platform, &command, &args))
                .expect("JSON values serialize")
        })
}

/// A coding agent's descriptor.
fn agent_doc(a: &CodingAgent, platform: &str, command: &str, args: &[String]) -> serde_json::Value {
    serde_json::json!({
        "schemaVersion": "1.0",
        "version": "1.0.0",
        "platform": platform,
        "app": {
            "id": a.id,
            "name": {"en": a.name},
            "defaultLang": "en",
            "description": format!(
                "{}: a coding agent. Delegate a coding task or question in plain language; \
                 it reads and edits files and runs commands in the session's folder with \
                 its own tools and model account, and asks the user before it edits or runs \
                 anything. A task can take minutes.",
                a.about
            ),
            "aliases": ["coding agent", "code assistant", "delegate", "编程助手", a.command],
        },
        "execution": {"type": "acp", "start": {"command": command, "args": args}},
        "tools": [{
            "name": "ask",
            "description": format!(
                "Give {} a task or a question. It works in `cwd` (else the gateway's \
                 `apps.{}.cwd`, else the home folder), may ask the user for permission, and \
                 returns its answer with the tool calls it made. Pass the returned \
                 `sessionId` to continue the conversation.",
                a.name, a.id
            ),
            "parameters": {
                "type": "object",
                "properties": {"prompt": {
                    "type": "string",
                    "description": "The task or question, as you would type it to the agent",
                }},
                "required": ["prompt"],
            },
        }],
    })
}

fn parse(text: &str, source: &str) -> (App, PathBuf) {
    let parsed = aai_descriptor::parse(text, source);
    let app = parsed.app.unwrap_or_else(|| {
        panic!(
            "built-in descriptor {source} is invalid: {:?}",
            parsed.diagnostics
        )
    });
    (app, PathBuf::from(source))
}

/// Whether `id` is (or may be) the id of a built-in app, active here or not: the
/// notifications service, every MPRIS player, the coding agents, the macOS apps, the
/// Agent Skills (`skill.*`). A web app may never take such an id.
pub(crate) fn is_builtin_id(id: &str) -> bool {
    id == "org.freedesktop.Notifications"
        // The gateway's own app.
        || id == GATEWAY_ID
        // Agent Skills found on this machine (`skills.rs`).
        || id.starts_with("skill.")
        || id.starts_with(MPRIS_PREFIX)
        || CODING_AGENTS.iter().any(|a| a.id == id)
        || {
            static MACOS_IDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
            MACOS_IDS.get_or_init(macos_ids).iter().any(|m| m == id)
        }
}

/// Whether a bus name decides which built-in apps are active.
pub(crate) fn watches(name: &str) -> bool {
    name == "org.freedesktop.Notifications" || name.starts_with(MPRIS_PREFIX)
}

/// Adds built-in apps whose ids no descriptor on disk took.
pub(crate) fn add_to(catalog: &mut Catalog, apps: Vec<(App, PathBuf)>) {
    for (app, source) in apps {
        if catalog.apps.iter().any(|l| l.app.id == app.id) {
            continue;
        }
        let binding_sources = vec![std::sync::Arc::from(source); app.bindings.len()];
        catalog.apps.push(Loaded {
            app: std::sync::Arc::new(app),
            kind: SourceKind::BuiltIn,
            binding_sources,
        });
    }
    catalog.apps.sort_by(|a, b| a.app.id.cmp(&b.app.id));
}

/// The session bus's owned and activatable names; empty when there is no session bus.
/// Blocks (at most about two seconds). It runs the query on a thread and runtime of its
/// own, so it is safe from any context, a runtime worker included.
pub(crate) fn session_bus_names() -> Vec<String> {
    #[cfg(target_os = "linux")]
    {
        let query = || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                tokio::time::timeout(
                    std::time::Duration::from_secs(2),
                    crate::catalog::bus::session_names(),
                )
                .await
                .ok()
            })
        };
        std::thread::scope(|s| s.spawn(query).join().ok().flatten()).unwrap_or_default()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_follow_the_bus() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(apps(&names(&[":1.4", "org.example.Other"])).is_empty());
        let found = apps(&names(&[
            "org.freedesktop.Notifications",
            "org.mpris.MediaPlayer2.vlc",
            "org.mpris.MediaPlayer2.mpv",
            "org.mpris.MediaPlayer2.mpv",
        ]));
        let ids: Vec<&str> = found.iter().map(|(a, _)| a.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "org.freedesktop.Notifications",
                "org.mpris.MediaPlayer2.mpv",
                "org.mpris.MediaPlayer2.vlc"
            ]
        );
        let (mpv, source) = &found[1];
        assert_eq!(mpv.name.primary(), "Media player (mpv)");
        assert_eq!(source, &PathBuf::from("builtin:mpris/mpv"));
        let aai_descriptor::Executor::Dbus(d) = &mpv.bindings[0].executor else {
            panic!()
        };
        assert_eq!(d.service, "org.mpris.MediaPlayer2.mpv");
    }

    #[test]
    fn an_installed_agent_without_its_adapter_gets_it_through_npx() {
        let found = coding_agents(|c| matches!(c, "claude" | "npx" | "codex-acp"));
        let starts: Vec<(&str, String, Vec<String>)> = found
            .iter()
            .map(|(a, _)| {
                let aai_descriptor::Executor::Acp(s) = &a.bindings[0].executor else {
                    panic!("an ACP app")
                };
                (a.id.as_str(), s.command.clone(), s.args.clone())
            })
            .collect();
        assert_eq!(
            starts,
            [
                (
                    "com.anthropic.claude-code",
                    "npx".to_owned(),
                    vec![
                        "-y".to_owned(),
                        "@zed-industries/claude-code-acp".to_owned()
                    ]
                ),
                ("com.openai.codex", "codex-acp".to_owned(), vec![]),
            ]
        );
        // Without npx, or without the agent itself, nothing is offered.
        assert!(coding_agents(|c| c == "claude").is_empty());
        assert!(coding_agents(|c| c == "npx").is_empty());
    }

    #[test]
    fn coding_agents_follow_the_path() {
        assert!(coding_agents(|_| false).is_empty());
        let found = coding_agents(|c| c == "opencode" || c == "gemini");
        let ids: Vec<&str> = found.iter().map(|(a, _)| a.id.as_str()).collect();
        assert_eq!(ids, ["ai.opencode", "com.google.gemini-cli"]);
        let (gemini, source) = &found[1];
        assert_eq!(source, &PathBuf::from("builtin:agents/gemini"));
        let aai_descriptor::Executor::Acp(start) = &gemini.bindings[0].executor else {
            panic!("an ACP app")
        };
        assert_eq!(
            (start.command.as_str(), start.args.as_slice()),
            ("gemini", ["--experimental-acp".to_owned()].as_slice())
        );
        let ask = &gemini.bindings[0].tools[0];
        assert_eq!(ask.name, "ask");
        let props = ask.parameters.json()["properties"].as_object().unwrap();
        assert!(
            ["prompt", "sessionId", "cwd"]
                .iter()
                .all(|p| props.contains_key(*p))
        );
    }
}

#[cfg(test)]
mod macos_tests {
    use super::*;
    use aai_descriptor::script::Lang;
    use aai_descriptor::{Executor, ToolCall};
    use serde_json::{Value, json};

    /// Sample arguments for every parameter any built-in tool has.
    fn sample(hostile: bool) -> Value {
        let text = if hostile {
            "\"; do shell script \"id\" -- “x” \\ (* «event» |p|"
        } else {
            "Quarterly report"
        };
        json!({
            "to": if hostile { text } else { "bob@example.com" },
            "subject": text, "body": text, "query": text, "title": text, "notes": text,
            "calendar": if hostile { text } else { "Work" },
            "path": if hostile { text } else { "/Users/me/Documents/report.pdf" },
            "start": "2026-11-24T09:30", "end": "2026-11-24T10:00",
            "from": "2026-11-24T00:00",
            "limit": 5,
        })
    }

    fn scripts() -> Vec<(String, String, aai_descriptor::ScriptOutput)> {
        let root = tempfile::tempdir().unwrap();
        for (_, _, bundles) in MACOS {
            std::fs::create_dir_all(root.path().join(bundles[0])).unwrap();
        }
        let apps = macos_apps(root.path());
        assert_eq!(apps.len(), 5, "every built-in loads");
        let mut out = Vec::new();
        for (app, _) in apps {
            let binding = &app.bindings[0];
            assert!(matches!(binding.executor, Executor::Applescript));
            for tool in &binding.tools {
                let ToolCall::Script { source, output } = &tool.call else {
                    panic!("{} has no script", tool.name);
                };
                out.push((
                    format!("{}__{}", app.id, tool.name),
                    source.clone(),
                    *output,
                ));
            }
        }
        out
    }

    #[test]
    fn rendered_scripts_match_their_golden_files() {
        for (name, source, output) in scripts() {
            let mut args = sample(false);
            if name.ends_with("list_events") {
                args["to"] = json!("2026-11-30T23:59");
            }
            let rendered =
                crate::exec::script::render(Lang::AppleScript, &source, output, &args).unwrap();
            insta::assert_snapshot!(name, rendered.stdin);
        }
    }

    #[test]
    fn hostile_values_change_no_built_in_code() {
        for (name, source, output) in scripts() {
            let benign =
                crate::exec::script::render(Lang::AppleScript, &source, output, &sample(false))
                    .unwrap();
            let hostile =
                crate::exec::script::render(Lang::AppleScript, &source, output, &sample(true))
                    .unwrap();
            let code = crate::exec::script::applescript_code;
            assert_eq!(code(&hostile.stdin), code(&benign.stdin), "{name}");
        }
    }

    #[test]
    fn a_built_in_applies_only_where_its_bundle_exists() {
        let root = tempfile::tempdir().unwrap();
        assert!(macos_apps(root.path()).is_empty());
        std::fs::create_dir_all(root.path().join("System/Applications/Reminders.app")).unwrap();
        let ids: Vec<String> = macos_apps(root.path())
            .into_iter()
            .map(|(a, _)| a.id)
            .collect();
        assert_eq!(ids, ["com.apple.reminders"]);
    }
}
