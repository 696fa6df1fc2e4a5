"""`aai-gateway clients`: the gateway's entry merged into real-shaped configuration files
of each MCP client (comments where the format allows them), shown as a diff, written only
when confirmed, with a backup; `clients remove` gives the file back; a malformed file is
refused and left alone. Also the shell completions and the man page the binary prints.

No peer: the files are made here, HOME points into the test's folder; except the last
test, which runs the real Claude Code (tests/mcp/clients) to show that the permission
`clients add` offers is the one Claude Code honours.
"""
import json
import os
import stat
import subprocess
import tomllib

import pytest

CLAUDE_CODE = """{
  "numStartups": 42,
  "theme": "dark",
  "projects": {
    "/home/u/src/app": {
      "allowedTools": [],
      "mcpServers": {}
    }
  },
  "mcpServers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret"}
    }
  },
  "userID": "abc"
}
"""

CLAUDE_DESKTOP = """{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/u/Desktop"]
    }
  },
  "globalShortcut": "Ctrl+Space"
}
"""

CURSOR = """{
  "mcpServers": {
    "linear": {"url": "https://mcp.linear.app/sse"}
  }
}
"""

VSCODE = """{
  // Copilot's MCP servers
  "inputs": [
    {"type": "promptString", "id": "token", "description": "API token", "password": true}
  ],
  "servers": {
    "time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}, // clock
  },
}
"""

WINDSURF = """{
  "mcpServers": {
    "git": {"command": "uvx", "args": ["mcp-server-git"], "disabled": false}
  }
}
"""

CODEX = """# Codex settings
model = "o3"
approval_policy = "on-request"

[mcp_servers.time]
command = "uvx" # the clock
args = ["mcp-server-time"]

[profiles.fast]
model = "o4-mini"
"""

CLINE = """{
  "mcpServers": {
    "weather": {
      "command": "node",
      "args": ["/home/u/weather/build/index.js"],
      "disabled": false,
      "autoApprove": []
    }
  }
}
"""

ZED = """// Zed settings
//
// For information on how to configure Zed, see the Zed documentation.
{
  "ui_font_size": 16,
  "buffer_font_size": 15,
  "theme": {"mode": "system", "light": "One Light", "dark": "One Dark"},
  "context_servers": {
    "postgres": {
      "source": "extension",
      "settings": {"database_url": "postgresql://localhost/db"}
    }
  }
}
"""

GEMINI = """{
  "theme": "GitHub",
  "selectedAuthType": "oauth-personal",
  "mcpServers": {
    "pythonTools": {"command": "python", "args": ["-m", "my_mcp_server"], "cwd": "./mcp"}
  }
}
"""

COPILOT = """{
  "mcpServers": {
    "context7": {
      "tools": ["*"],
      "type": "local",
      "command": "npx",
      "args": ["-y", "@upstash/context7-mcp"]
    }
  }
}
"""

OPENCODE = """{
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet-4-5",
  "mcp": {
    "jira": {"type": "remote", "url": "https://jira.example.com/mcp", "enabled": true}
  }
}
"""

QWEN = """{
  "$version": 3,
  "general": {"checkpointing": {"enabled": false}},
  "security": {"auth": {"selectedType": "openai"}},
  "mcpServers": {
    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."], "trust": false}
  }
}
"""

# id -> (path under HOME, text, key of the servers, the format's parser)
CLIENTS = {
    "claude-code": (".claude.json", CLAUDE_CODE, "mcpServers"),
    "claude-desktop": (".config/Claude/claude_desktop_config.json", CLAUDE_DESKTOP, "mcpServers"),
    "cursor": (".cursor/mcp.json", CURSOR, "mcpServers"),
    "vscode": (".config/Code/User/mcp.json", VSCODE, "servers"),
    "windsurf": (".codeium/windsurf/mcp_config.json", WINDSURF, "mcpServers"),
    "codex": (".codex/config.toml", CODEX, "mcp_servers"),
    "continue": (".continue/mcpServers/aai-gateway.json", None, "mcpServers"),
    "cline": (".config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
              CLINE, "mcpServers"),
    "zed": (".config/zed/settings.json", ZED, "context_servers"),
    "gemini": (".gemini/settings.json", GEMINI, "mcpServers"),
    "copilot": (".copilot/mcp-config.json", COPILOT, "mcpServers"),
    "opencode": (".config/opencode/opencode.json", OPENCODE, "mcp"),
    "qwen": (".qwen/settings.json", QWEN, "mcpServers"),
}


def jsonc(text):
    """JSONC → value: drop // comments outside strings and trailing commas."""
    out, i, in_str = [], 0, False
    while i < len(text):
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                break
            continue
        else:
            out.append(c)
        i += 1
    import re
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", "".join(out)))


def parse(client, text):
    return tomllib.loads(text) if client == "codex" else jsonc(text)


def run(binary, home, *args, stdin=subprocess.DEVNULL):
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "XDG_CONFIG_HOME": str(home / ".config")}
    return subprocess.run([str(binary), *args], env=env, stdin=stdin, capture_output=True, text=True,
                          timeout=30)


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    for client, (rel, text, _) in CLIENTS.items():
        if text is not None:
            path = home / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            path.chmod(0o600)
    return home


@pytest.mark.parametrize("client", list(CLIENTS))
def test_add_then_remove_gives_the_file_back(binary, home, client):
    rel, original, key = CLIENTS[client]
    path = home / rel
    listed = json.loads(run(binary, home, "clients", "--json").stdout)["clients"]
    state = {c["client"]: c["state"] for c in listed}[client]
    assert state == ("no config" if original is None else "not set up")

    # Without --yes and without a terminal: the diff, nothing written, exit 1.
    dry = run(binary, home, "clients", "add", client, "--via", "npx")
    assert dry.returncode == 1, dry
    assert "+" in dry.stdout and "aai-gateway" in dry.stdout and "--yes" in dry.stderr
    assert (path.read_text() if original is not None else None) == original
    assert not path.exists() or original is not None

    added = run(binary, home, "clients", "add", client, "--via", "npx", "--yes")
    assert added.returncode == 0, added
    text = path.read_text()
    value = parse(client, text)
    entry = value[key]["aai"]
    if client == "opencode":
        assert entry == {"type": "local", "command": ["npx", "-y", "aai-gateway"], "enabled": True}, entry
    else:
        assert entry["command"] == "npx" and entry["args"] == ["-y", "aai-gateway"], entry
    if original is not None:
        # Everything else is still there, and comments survive where the format has them.
        before = parse(client, original)
        for k, v in before.items():
            if k != key:
                assert value[k] == v, k
        for name in before.get(key, {}):
            assert value[key][name] == before[key][name]
        for line in original.splitlines():
            if line.strip().startswith(("//", "#")):
                assert line in text, line
        backups = list(path.parent.glob(path.name + ".*.aai-bak"))
        assert len(backups) == 1 and backups[0].read_text() == original
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(backups[0].stat().st_mode) == 0o600
    listed = json.loads(run(binary, home, "clients", "--json").stdout)["clients"]
    assert {c["client"]: c["state"] for c in listed}[client] == "set up"

    # Again: nothing to change, nothing written.
    again = run(binary, home, "clients", "add", client, "--via", "npx", "--yes")
    assert again.returncode == 0 and "nothing to change" in again.stdout
    assert path.read_text() == text

    removed = run(binary, home, "clients", "remove", client, "--yes")
    assert removed.returncode == 0, removed
    if original is None:
        assert not path.exists(), "the gateway's own file goes with its entry"
    else:
        assert path.read_text() == original
    assert "nothing to change" in run(binary, home, "clients", "remove", client, "--yes").stdout


def test_the_entry_runs_this_binary_by_default_with_the_home(binary, home, tmp_path):
    out = run(binary, home, "--home", str(tmp_path / "aai"), "clients", "add", "cursor", "--yes")
    assert out.returncode == 0, out
    entry = json.loads((home / ".cursor/mcp.json").read_text())["mcpServers"]["aai"]
    assert entry["command"] == str(binary.resolve())
    assert entry["args"] == ["--home", str(tmp_path / "aai")]
    # The entry starts a working gateway: initialize through exactly that command line.
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    reply = subprocess.run([entry["command"], *entry["args"]], input=json.dumps(init) + "\n",
                           capture_output=True, text=True, timeout=30)
    assert json.loads(reply.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "aai-gateway"


def test_an_entry_under_another_name_is_recognised(binary, home):
    path = home / ".cursor/mcp.json"
    path.write_text('{"mcpServers": {"gw": {"command": "npx", "args": ["-y", "aai-gateway@0.1.0"]}}}')
    listed = json.loads(run(binary, home, "clients", "--json").stdout)["clients"]
    cursor = [c for c in listed if c["client"] == "cursor"][0]
    assert (cursor["state"], cursor["entry"]) == ("set up", "gw")


@pytest.mark.parametrize("client,text", [
    ("cursor", '{"mcpServers": {"x": {"command": "a",}'),
    ("vscode", '{"servers": [1, 2]}'),
    ("codex", '[mcp_servers.time\ncommand = "uvx"\n'),
    ("zed", '"just a string"'),
])
def test_a_malformed_config_is_refused_and_left_alone(binary, home, client, text):
    path = home / CLIENTS[client][0]
    path.write_text(text)
    out = run(binary, home, "clients", "add", client, "--yes")
    assert out.returncode == 1
    assert str(path) in out.stderr and "left as it is" in out.stderr, out.stderr
    assert path.read_text() == text
    assert not list(path.parent.glob("*.aai-bak"))
    listed = json.loads(run(binary, home, "clients", "--json").stdout)["clients"]
    assert {c["client"]: c["state"] for c in listed}[client].startswith("malformed")


def test_a_symlinked_config_stays_a_symlink(binary, home, tmp_path):
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text(CURSOR)
    link = home / ".cursor/mcp.json"
    link.unlink()
    link.symlink_to(real)
    assert run(binary, home, "clients", "add", "cursor", "--yes").returncode == 0
    assert link.is_symlink()
    assert "aai" in json.loads(real.read_text())["mcpServers"]


def test_unknown_client(binary, home):
    out = run(binary, home, "clients", "add", "notepad", "--yes")
    assert out.returncode == 1 and "known: claude-code" in out.stderr


def test_completions_load_in_bash_and_the_man_page_renders(binary, tmp_path):
    script = tmp_path / "aai-gateway.bash"
    script.write_text(subprocess.run([str(binary), "completions", "bash"], capture_output=True,
                                     text=True, check=True).stdout)
    probe = (f"source {script}; complete -p aai-gateway >/dev/null || exit 3; "
             "COMP_WORDS=(aai-gateway cl); COMP_CWORD=1; COMP_LINE='aai-gateway cl'; COMP_POINT=14; "
             "_aai__gateway aai-gateway cl aai-gateway; printf '%s\\n' \"${COMPREPLY[@]}\"")
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "clients" in out.stdout.split(), out.stdout
    for shell in ["zsh", "fish", "powershell"]:
        text = subprocess.run([str(binary), "completions", shell], capture_output=True, text=True,
                              check=True).stdout
        assert "aai-gateway" in text and "clients" in text
    man = subprocess.run([str(binary), "manpage"], capture_output=True, text=True, check=True).stdout
    assert man.startswith(".ie") or ".TH aai-gateway 1" in man
    assert ".TH aai-gateway 1" in man and "clients" in man


CLAUDE_SETTINGS = """{
  "model": "opus",
  "permissions": {
    "allow": [
      "Bash(npm run test:*)"
    ],
    "deny": []
  }
}
"""


def test_claude_codes_own_question_is_offered_away_and_comes_back(binary, home):
    """`clients add claude-code` offers `mcp__aai` in Claude Code's permissions.allow (its
    settings.json), shown and explained; --no-allow-tools declines; `remove` takes it out."""
    settings = home / ".claude/settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(CLAUDE_SETTINGS)

    dry = run(binary, home, "clients", "add", "claude-code", "--via", "npx")
    assert dry.returncode == 1
    assert '+      "mcp__aai"' in dry.stdout.replace("\r", ""), dry.stdout
    assert "asks per app and tool itself" in dry.stdout and "--no-allow-tools" in dry.stdout
    assert settings.read_text() == CLAUDE_SETTINGS

    declined = run(binary, home, "clients", "add", "claude-code", "--via", "npx", "--no-allow-tools", "--yes")
    assert declined.returncode == 0, declined
    assert "mcp__aai" not in declined.stdout and settings.read_text() == CLAUDE_SETTINGS
    assert json.loads((home / ".claude.json").read_text())["mcpServers"]["aai"]["command"] == "npx"

    # The entry is there already: only the permission is left to add, with its backup.
    allowed = run(binary, home, "clients", "add", "claude-code", "--via", "npx", "--yes")
    assert allowed.returncode == 0, allowed
    assert json.loads(settings.read_text())["permissions"] == {
        "allow": ["Bash(npm run test:*)", "mcp__aai"], "deny": []}
    assert [b.read_text() for b in settings.parent.glob("settings.json.*.aai-bak")] == [CLAUDE_SETTINGS]
    assert "nothing to change" in run(binary, home, "clients", "add", "claude-code", "--via", "npx",
                                      "--yes").stdout

    removed = run(binary, home, "clients", "remove", "claude-code", "--yes")
    assert removed.returncode == 0, removed
    assert settings.read_text() == CLAUDE_SETTINGS
    assert "aai" not in json.loads((home / ".claude.json").read_text())["mcpServers"]


def test_claude_code_without_settings_gets_them_made(binary, home):
    settings = home / ".claude/settings.json"
    assert run(binary, home, "clients", "add", "claude-code", "--yes").returncode == 0
    assert json.loads(settings.read_text()) == {"permissions": {"allow": ["mcp__aai"]}}
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert run(binary, home, "clients", "remove", "claude-code", "--yes").returncode == 0
    assert json.loads(settings.read_text()) == {}


@pytest.mark.parametrize("client", ["gemini", "qwen"])
def test_trust_on_the_entry_is_offered(binary, home, client):
    rel, original, key = CLIENTS[client]
    path = home / rel
    out = run(binary, home, "clients", "add", client, "--no-allow-tools", "--yes")
    assert out.returncode == 0, out
    assert "trust" not in json.loads(path.read_text())[key]["aai"]
    out = run(binary, home, "clients", "add", client, "--yes")
    assert out.returncode == 0, out
    value = json.loads(path.read_text())
    assert value[key]["aai"]["trust"] is True
    assert value[key]["fs" if client == "qwen" else "pythonTools"] == json.loads(original)[key][
        "fs" if client == "qwen" else "pythonTools"], "another server's trust is not touched"
    assert run(binary, home, "clients", "remove", client, "--yes").returncode == 0
    assert path.read_text() == original


def test_a_fresh_gemini_entry_is_trusted_in_one_write(binary, home):
    path = home / CLIENTS["gemini"][0]
    path.unlink()
    out = run(binary, home, "clients", "add", "gemini", "--yes")
    assert out.returncode == 0, out
    assert json.loads(path.read_text())["mcpServers"]["aai"]["trust"] is True
    assert out.stdout.count("wrote") == 1 and not list(path.parent.glob("*.aai-bak"))


def test_opencode_jsonc_is_edited_when_it_is_the_file(binary, home):
    json_path = home / CLIENTS["opencode"][0]
    json_path.unlink()
    jsonc_path = json_path.with_suffix(".jsonc")
    text = "{\n  // mine\n  \"mcp\": {\n  },\n}\n"
    jsonc_path.write_text(text)
    out = run(binary, home, "clients", "add", "opencode", "--via", "npx", "--yes")
    assert out.returncode == 0, out
    assert not json_path.exists()
    assert "// mine" in jsonc_path.read_text()
    assert jsonc(jsonc_path.read_text())["mcp"]["aai"]["command"] == ["npx", "-y", "aai-gateway"]
    listed = json.loads(run(binary, home, "clients", "--json").stdout)["clients"]
    assert {c["client"]: c["state"] for c in listed}["opencode"] == "set up"


@pytest.mark.parametrize("allow", [True, False])
def test_real_claude_code_runs_the_gateways_tools_without_its_own_question(gw, tmp_path, allow):
    """Against the real Claude Code (tests/mcp/clients): the `mcp__aai` rule `clients add`
    writes is what lets a headless `claude -p` (no --allowedTools) run the gateway's tools;
    with --no-allow-tools Claude Code refuses them itself."""
    from agent_clients import AgentClient
    from model_standin import standin
    gw.add_app("com.example.echo")
    agent = AgentClient(gw, tmp_path, "claude")
    agent.add_gateway("claude-code", *([] if allow else ["--no-allow-tools"]))
    script = [{"tool": "mcp__aai__aai_exec",
               "arguments": {"app": "com.example.echo", "tool": "echo", "args": {"text": "one question"}}},
              {"text": "Done."}]
    with standin(tmp_path / "model", script) as model:
        env = agent.env(ANTHROPIC_API_KEY="sk-ant-standin", ANTHROPIC_BASE_URL=model.url,
                        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1",
                        DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1", ENABLE_TOOL_SEARCH="false")
        out = agent.run(["-p", "Echo something.", "--output-format", "json"], env=env, timeout=240)
        assert out.code == 0, out
        (result,) = model.tool_results()
    if allow:
        assert not result["error"] and json.loads(result["text"])["echo"]["text"] == "one question", result
    else:
        assert result["error"] and "requested permissions to use mcp__aai__aai_exec" in result["text"], result
