"""Shared fixtures: a temporary AAI home with apps, the built gateway binary, and MCP
client sessions through the real Python SDK.

Peers (the `mcp` SDK, the Inspector CLI) must be installed by `.ci/run`. When
AAI_TEST_REQUIRE_PEERS=1 (CI) a missing peer fails the tests; locally they are skipped
with a loud message.
"""
import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = Path(__file__).with_name("adapter.py")
REQUIRE_PEERS = os.environ.get("AAI_TEST_REQUIRE_PEERS") == "1"


def need_peer(ok: bool, what: str):
    if ok:
        return
    if REQUIRE_PEERS:
        pytest.fail(f"required test peer missing: {what} (CI installs it in .ci/run)")
    print(f"\n*** SKIPPING: test peer missing: {what} ***", file=sys.stderr)
    pytest.skip(f"test peer missing: {what}")


try:
    import mcp  # noqa: F401
    HAVE_MCP = True
except ImportError:
    HAVE_MCP = False
    if REQUIRE_PEERS:
        pytest.exit("required test peer missing: PyPI package mcp (CI installs it in .ci/run)", returncode=1)
    print("\n*** SKIPPING the MCP end-to-end tests: PyPI package mcp is not installed ***", file=sys.stderr)


@pytest.fixture(scope="session")
def binary() -> Path:
    path = os.environ.get("AAI_GATEWAY_BIN")
    if path:
        return Path(path)
    subprocess.run(["cargo", "build", "-q", "-p", "aai-gateway"], cwd=ROOT, check=True)
    return ROOT / "target" / "debug" / "aai-gateway"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (zombies count as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # gone (ENOENT), or being reaped right now (ESRCH)
        return False


def _processes_of(tmp_path, in_folder_only=False):
    """Live processes started for a test: their command line names its temporary folder
    (the gateway's --home, a bus config) or they run inside it (adapters run in their
    descriptor's folder); with `in_folder_only`, only the latter."""
    me, found = os.getpid(), []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(f"/proc/{d}/cwd")
        except OSError:
            continue
        inside = cwd.startswith(str(tmp_path))
        if state != "Z" and (inside or (str(tmp_path) in cmd and not in_folder_only)):
            found.append((int(d), cmd if in_folder_only else cmd[:160]))
    return found


def running(tmp_path, needle):
    """Pids of live processes started for a test (they run in its folder) whose command
    line names `needle`."""
    return [pid for pid, cmd in _processes_of(tmp_path, in_folder_only=True) if needle in cmd]


def deciding(answers, asked):
    """An elicitation callback: records each question and answers with the first entry of
    `answers` whose key is in the question (a consent decision)."""
    from mcp import types

    async def elicit(ctx, params):
        asked.append(params.message)
        decision = next(d for key, d in answers.items() if key in params.message)
        return types.ElicitResult(action="accept", content={"decision": decision})
    return elicit


@pytest.fixture(autouse=True)
def no_process_outlives_its_test(tmp_path):
    """After each test, nothing it started may still run (given 5 s to exit)."""
    yield
    import time
    deadline = time.monotonic() + 5
    left = _processes_of(tmp_path)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _processes_of(tmp_path)
    for pid, _ in left:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    assert not left, f"processes outlived the test: {left}"


def tool(name, properties=None, required=(), **extra):
    schema = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = list(required)
    return {"name": name, "description": extra.pop("description", f"The {name} tool"), "parameters": schema, **extra}


STANDARD_TOOLS = [
    tool("echo", {"text": {"type": "string"}, "n": {"type": "integer", "minimum": 1, "default": 3},
                  "delay": {"type": "number"}}, ["text"], returns={"type": "object"}),
    tool("sleep", {"seconds": {"type": "number"}}, ["seconds"]),
    tool("hang", {"pidfile": {"type": "string"}}, ["pidfile"]),
    tool("escape", {"pidfile": {"type": "string"}}, ["pidfile"]),
    tool("bigline"), tool("stubborn"),
    tool("spew", {"mib": {"type": "integer"}, "lines": {"type": "integer"}}),
    tool("crash"), tool("garbage"), tool("progress"),
    tool("fail", {"code": {}, "message": {"type": "string"}}),
]


class Gateway:
    """A temporary AAI home plus ways to run the gateway binary against it."""

    def __init__(self, binary: Path, tmp: Path):
        self.binary = binary
        self.tmp = tmp
        self.extra_env = {}
        self.home = tmp / "aai"
        self.home.mkdir()
        self.home.chmod(0o700)  # as the gateway creates it (it narrows a wider one, loudly)
        (tmp / "root").mkdir()
        # Most tests are about other things than consent: their calls are allowed. The
        # consent tests set `consent` themselves.
        self.config()

    def add_app(self, app_id, name=None, tools=None, description="A test app", aliases=(),
                args=(), timeout_ms=None, env=None):
        name = name or {"en": app_id.split(".")[-1].title()}
        execution = {"type": "stdio", "command": sys.executable, "args": [str(ADAPTER), *args]}
        if timeout_ms:
            execution["timeout"] = timeout_ms
        if env:
            execution["env"] = env
        doc = {
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": app_id, "name": name, "description": description, "aliases": list(aliases),
                    **({"defaultLang": next(iter(name))} if isinstance(name, dict) else {})},
            "execution": execution,
            "tools": tools if tools is not None else STANDARD_TOOLS,
        }
        self.put(app_id, doc)

    def put(self, folder, doc):
        d = self.home / folder
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "aai.json.tmp"
        tmp.write_text(json.dumps(doc, ensure_ascii=False))
        tmp.rename(d / "aai.json")

    def config(self, **settings):
        settings.setdefault("consent", {"mode": "allow"})
        (self.home / "config.json").write_text(json.dumps(settings))

    def env(self, **extra):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.tmp),
               "AAI_SYSTEM_ROOT": str(self.tmp / "root"), "AAI_LOG": "debug",
               # No session bus unless a test brings its own (see `bus`).
               "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus",
               "GATEWAY_SECRET": "s3cr3t-should-not-leak"}
        env.update(self.extra_env)
        env.update(extra)
        return env

    def params(self, **env):
        from mcp import StdioServerParameters
        return StdioServerParameters(command=str(self.binary), args=["--home", str(self.home)],
                                     env=self.env(**env))

    @contextlib.asynccontextmanager
    async def session(self, on_message=None, discover=False, elicitation=None, client_name=None, **env):
        from mcp import ClientSession, types
        from mcp.client.stdio import stdio_client
        need_peer(HAVE_MCP, "PyPI package mcp (Python MCP SDK)")
        errlog = open(self.tmp / "stderr.log", "a")
        extra = {}
        if elicitation is not None:
            extra["elicitation_callback"] = elicitation
        if client_name is not None:
            extra["client_info"] = types.Implementation(name=client_name, version="1")
        async with stdio_client(self.params(**env), errlog=errlog) as (read, write):
            async with ClientSession(read, write, message_handler=on_message, **extra) as s:
                if discover:
                    await s.discover()
                else:
                    await s.initialize()
                yield s
        errlog.close()

    def run(self, *args, check=False, timeout=60):
        return subprocess.run([str(self.binary), "--home", str(self.home), *args], env=self.env(),
                              capture_output=True, text=True, timeout=timeout, check=check)

    def run_on_tty(self, *args, timeout=60):
        """Runs the binary with its stderr on a pseudo-terminal (stdin closed, stdout a
        pipe); returns (exit status, everything the terminal got)."""
        import pty
        master, slave = pty.openpty()
        p = subprocess.run([str(self.binary), "--home", str(self.home), *args], env=self.env(),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, timeout=timeout)
        os.close(slave)
        tty = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            tty += chunk
        os.close(master)
        return p.returncode, tty


@pytest.fixture
def gw(binary, tmp_path) -> Gateway:
    need_peer(HAVE_MCP, "PyPI package mcp (Python MCP SDK)")
    return Gateway(binary, tmp_path)


def inspector() -> str | None:
    return shutil.which("mcp-inspector")


SERVICES = Path(__file__).with_name("dbus_services.py")


class Bus:
    """A private D-Bus session bus with an activation directory."""

    def __init__(self, tmp: Path):
        self.services_dir = tmp / "services"
        self.services_dir.mkdir(parents=True)
        config = tmp / "bus.conf"
        config.write_text(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={tmp}</listen>
  <servicedir>{self.services_dir}</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>""")
        out = subprocess.run(["dbus-daemon", f"--config-file={config}", "--fork", "--print-address=1",
                              "--print-pid=1", "--nopidfile"], capture_output=True, text=True, check=True, timeout=30)
        self.address, pid = out.stdout.split()[:2]
        self.pid = int(pid)
        self.procs = []

    def env(self):
        return {"DBUS_SESSION_BUS_ADDRESS": self.address}

    def service(self, kind: str, name: str):
        """Starts a test service and waits until it owns its name."""
        proc = subprocess.Popen([sys.executable, str(SERVICES), kind, name], stdout=subprocess.PIPE,
                                env={**os.environ, **self.env()}, text=True)
        line = proc.stdout.readline()
        assert line.strip() == "ready", f"service {name} did not start: {line!r}"
        self.procs.append(proc)
        return proc

    def activatable(self, kind: str, name: str):
        (self.services_dir / f"{name}.service").write_text(
            f"[D-BUS Service]\nName={name}\nExec={sys.executable} {SERVICES} {kind} {name}\n")
        subprocess.run(["dbus-send", f"--bus={self.address}", "--type=method_call", "--dest=org.freedesktop.DBus",
                        "/org/freedesktop/DBus", "org.freedesktop.DBus.ReloadConfig"], check=True, timeout=10)

    def call(self, *args):
        out = subprocess.run(["busctl", f"--address={self.address}", "--json=short", *args],
                             capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout) if out.stdout.strip() else None

    def stop(self):
        for p in self.procs:
            p.kill()
        try:
            os.kill(self.pid, 15)
        except ProcessLookupError:
            pass


try:
    import dbus_fast  # noqa: F401
    HAVE_DBUS_FAST = True
except ImportError:
    HAVE_DBUS_FAST = False


@pytest.fixture
def bus(tmp_path):
    need_peer(shutil.which("dbus-daemon") is not None, "dbus-daemon (Debian package dbus)")
    need_peer(HAVE_DBUS_FAST, "PyPI package dbus-fast")
    b = Bus(tmp_path / "bus")
    yield b
    b.stop()
