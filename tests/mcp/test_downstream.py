"""Downstream MCP servers as apps (`execution.type: "mcp"`), driven through `aai_exec` by
the Python SDK client: the reference `server-everything` over stdio and streamable HTTP,
`server-filesystem`, PyPI `mcp-server-time`, and a small SDK server of our own
(`growing_server.py`) for list changes, crashes and cancellation.

Run: python3 -m pytest tests/mcp -q
"""
import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, need_peer, running
from test_http import free_port, wait_port

anyio = pytest.importorskip("anyio")
MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

NODE_MODULES = ROOT / "tests" / "mcp" / "peers" / "node_modules"
EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
FILESYSTEM = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
GROWING = Path(__file__).with_name("growing_server.py")
META = ["aai_search", "aai_guide", "web_discover", "aai_exec", "aai_batch", "aai_run"]


def need_npm_peer(path: Path):
    need_peer(path.exists(), f"{path.relative_to(ROOT)} (npm ci --prefix tests/mcp/peers)")


def mcp_app(gw, app_id, execution, description="A downstream MCP server", **extra):
    gw.put(app_id, {
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
        "app": {"id": app_id, "name": {"en": app_id.split(".")[-1].title()}, "defaultLang": "en",
                "description": description},
        "execution": {"type": "mcp", **execution}, **extra,
    })


def everything(gw, app_id="dev.mcp.everything"):
    need_npm_peer(EVERYTHING)
    mcp_app(gw, app_id, {"command": "node", "args": [str(EVERYTHING), "stdio"]},
            description="The MCP reference test server: echo, sums, images, long operations")


def growing(gw, app_id="dev.mcp.growing"):
    mcp_app(gw, app_id, {"command": sys.executable, "args": [str(GROWING)]},
            description="A server whose tool list grows")


async def exec_(s, app, tool, **args):
    return await s.call_tool("aai_exec", {"app": app, "tool": tool, "args": args})


async def test_a_server_is_one_app_whose_tools_cost_nothing_until_asked_for(gw, tmp_path):
    everything(gw)
    async with gw.session() as s:
        listed = [t.name for t in (await s.list_tools()).tools]
        assert listed == ["app_aai", "app_dev_mcp_everything", *META], "one tool for the whole server"
        assert not running(tmp_path, "server-everything"), "not started before first use"

        found = await s.call_tool("aai_search", {"query": "reference test server"})
        assert "dev.mcp.everything" in found.content[0].text

        guide = (await s.call_tool("aai_guide", {"app": "dev.mcp.everything"})).content[0].text
        for name in ("echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"):
            assert f"### `{name}`" in guide
        assert "`message` (string, required)" in guide, "the server's schema is disclosed"
        assert len(running(tmp_path, "server-everything")) == 1

        listed_again = [t.name for t in (await s.list_tools()).tools]
        assert listed_again == listed, "its tools still cost the client's tool list nothing"


async def test_results_pass_through_intact(gw):
    everything(gw)
    async with gw.session() as s:
        r = await exec_(s, "dev.mcp.everything", "echo", message="hello ✓")
        assert [c.type for c in r.content] == ["text"] and r.content[0].text == "Echo: hello ✓"

        r = await exec_(s, "dev.mcp.everything", "get-tiny-image")
        images = [c for c in r.content if c.type == "image"]
        assert images and images[0].mime_type == "image/png" and len(images[0].data) > 100

        r = await exec_(s, "dev.mcp.everything", "get-structured-content", location="New York")
        assert set(r.structured_content) == {"temperature", "conditions", "humidity"}

        r = await exec_(s, "dev.mcp.everything", "get-resource-reference", resourceId=2)
        embedded = [c for c in r.content if c.type == "resource"]
        assert embedded and str(embedded[0].resource.uri).endswith("/2")

        r = await exec_(s, "dev.mcp.everything", "get-sum", a=2, b=40)
        assert "42" in r.content[0].text


async def test_arguments_are_checked_against_the_servers_schema(gw):
    everything(gw)
    async with gw.session() as s:
        with pytest.raises(MCPError) as e:
            await exec_(s, "dev.mcp.everything", "get-sum", a="two", b=40)
        assert e.value.error.data["type"] == "INVALID_PARAMS" and e.value.error.data["field"] == "/a"
        with pytest.raises(MCPError) as e:
            await exec_(s, "dev.mcp.everything", "no-such-tool")
        assert e.value.error.code == -32003 and "get-sum" in e.value.error.data["detail"]


async def test_progress_passes_through(gw):
    everything(gw)
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total))

    async with gw.session() as s:
        r = await s.call_tool("aai_exec", {"app": "dev.mcp.everything", "tool": "trigger-long-running-operation",
                                           "args": {"duration": 1, "steps": 4}}, progress_callback=on_progress)
        assert "completed" in r.content[0].text.lower()
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


async def test_cancellation_reaches_the_server_and_the_next_call_works(gw, tmp_path):
    growing(gw)
    marker = tmp_path / "cancelled"
    async with gw.session() as s:
        pid = json.loads((await exec_(s, "dev.mcp.growing", "pid")).content[0].text)
        with anyio.move_on_after(1):
            await exec_(s, "dev.mcp.growing", "slow", seconds=60, marker=str(marker))
        with anyio.fail_after(10):
            while not marker.exists():
                await anyio.sleep(0.05)
        r = await exec_(s, "dev.mcp.growing", "pid")
        assert json.loads(r.content[0].text) == pid, "the connection survives a cancelled call"


async def test_a_call_over_its_timeout_is_cancelled_downstream(gw, tmp_path):
    # The timeout also bounds starting the server and the handshake (0.6 s on an idle
    # machine, several on a loaded one): it starts with a quick call first.
    mcp_app(gw, "dev.mcp.growing", {"command": sys.executable, "args": [str(GROWING)], "timeout": 8000})
    marker = tmp_path / "cancelled"
    async with gw.session() as s:
        await exec_(s, "dev.mcp.growing", "pid")
        with pytest.raises(MCPError) as e:
            await exec_(s, "dev.mcp.growing", "slow", seconds=60, marker=str(marker))
        assert e.value.error.data["type"] == "TIMEOUT"
        with anyio.fail_after(10):
            while not marker.exists():
                await anyio.sleep(0.05)


async def test_a_changed_tool_list_is_fetched_again_and_announced(gw):
    growing(gw)
    announced = []

    async def on_message(m):
        method = getattr(getattr(m, "root", m), "method", None)
        if method == "notifications/tools/list_changed":
            announced.append(time.monotonic())

    async with gw.session(on_message=on_message) as s:
        guide = (await s.call_tool("aai_guide", {"app": "dev.mcp.growing"})).content[0].text
        assert "### `grow`" in guide and "fresh" not in guide
        announced.clear()
        r = await exec_(s, "dev.mcp.growing", "grow", name="fresh")
        assert r.content[0].text == "added fresh"
        with anyio.fail_after(10):
            while not announced:
                await anyio.sleep(0.05)
        guide = (await s.call_tool("aai_guide", {"app": "dev.mcp.growing"})).content[0].text
        assert "### `fresh`" in guide and "Added at run time: fresh" in guide
        r = await exec_(s, "dev.mcp.growing", "fresh")
        assert r.content[0].text == "I am fresh"


async def test_a_storm_of_list_changes_is_coalesced_and_keeps_the_tools(gw):
    growing(gw)
    async with gw.session() as s:
        started = time.monotonic()
        await exec_(s, "dev.mcp.growing", "storm", n=2000)
        for _ in range(20):
            r = await exec_(s, "dev.mcp.growing", "pid")
            assert not r.is_error, "the last list stays in use while it is fetched again"
            await anyio.sleep(0.05)
        await anyio.sleep(1)
    # At most one listing per 250 ms while the storm lasts (on an idle machine, 3 in 1.1 s).
    most = 2 + int((time.monotonic() - started) / 0.25)
    log = (gw.home / "logs" / "aai-gateway.log").read_text()
    relisted = log.count("listing them again")
    assert 1 <= relisted <= most, f"{relisted} relistings for 2,000 notifications (at most {most})"


async def test_a_server_that_is_down_fails_only_its_own_app(gw, tmp_path):
    everything(gw)
    mcp_app(gw, "dev.mcp.missing", {"command": str(tmp_path / "no-such-server")})
    mcp_app(gw, "dev.mcp.quitter", {"command": sys.executable, "args": ["-c", "import sys; sys.exit(4)"]})
    mcp_app(gw, "dev.mcp.nobody", {"url": f"http://127.0.0.1:{free_port()}/mcp?key=hunter2-in-url"})
    async with gw.session() as s:
        for app in ("dev.mcp.missing", "dev.mcp.quitter", "dev.mcp.nobody"):
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_guide", {"app": app})
            assert e.value.error.data["type"] == "SERVICE_UNAVAILABLE", app
            assert app in e.value.error.data["detail"]
            with pytest.raises(MCPError) as e:
                await exec_(s, app, "anything")
            assert e.value.error.data["type"] == "SERVICE_UNAVAILABLE", app
            assert "hunter2" not in json.dumps(e.value.error.data) + e.value.error.message
        r = await exec_(s, "dev.mcp.everything", "echo", message="still here")
        assert r.content[0].text == "Echo: still here"
        found = await s.call_tool("aai_search", {"query": "reference test server"})
        assert "dev.mcp.everything" in found.content[0].text
    for log in (gw.home / "logs").iterdir():
        assert "hunter2" not in log.read_text()
    assert "hunter2" not in (tmp_path / "stderr.log").read_text()


async def test_a_server_that_crashes_mid_call_fails_that_call_and_is_started_again(gw, tmp_path):
    growing(gw)
    async with gw.session() as s:
        first = json.loads((await exec_(s, "dev.mcp.growing", "pid")).content[0].text)
        with pytest.raises(MCPError) as e:
            await exec_(s, "dev.mcp.growing", "crash")
        assert e.value.error.data["type"] == "SERVICE_UNAVAILABLE"
        second = json.loads((await exec_(s, "dev.mcp.growing", "pid")).content[0].text)
        assert second != first
    assert not running(tmp_path, "growing_server"), "the server stops with the gateway"


async def test_flat_exposure_lists_and_calls_the_servers_tools(gw):
    everything(gw)
    gw.config(exposure="flat")
    async with gw.session() as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert "dev_mcp_everything__echo" in tools
        assert tools["dev_mcp_everything__echo"].input_schema["required"] == ["message"]
        r = await s.call_tool("dev_mcp_everything__echo", {"message": "flat"})
        assert r.content[0].text == "Echo: flat"


async def test_a_kept_tool_list_serves_flat_calls_at_once_and_outlives_a_moved_home(gw, tmp_path):
    """A server's list, kept on disk from an earlier run, names its flat tools before the
    session's first `tools/list`; and it is filed by the home's own folders, not their
    absolute path, so a moved home lists the server without starting it."""
    marker = tmp_path / "starts"
    mcp_app(gw, "dev.mcp.marker", {"command": sys.executable,
                                   "args": [str(Path(__file__).with_name("marker_server.py")), str(marker)]})
    gw.config(exposure="flat")
    starts = lambda: marker.read_text().count("started") if marker.exists() else 0
    async with gw.session() as s:
        assert "dev_mcp_marker__hello" in [t.name for t in (await s.list_tools()).tools]
    assert starts() == 1
    async with gw.session() as s:
        r = await s.call_tool("dev_mcp_marker__hello", {"name": "first"})
        assert not r.is_error and r.content[0].text == "hello first", r
    assert starts() == 2
    moved = tmp_path / "moved"
    gw.home.rename(moved)
    gw.home = moved
    async with gw.session() as s:
        assert "dev_mcp_marker__hello" in [t.name for t in (await s.list_tools()).tools]
    assert starts() == 2, "the kept list was used: nothing started for the list"


def start_everything(tmp_path, transport):
    """server-everything over HTTP (`streamableHttp` or `sse`) on a free port."""
    need_npm_peer(EVERYTHING)
    port = free_port()
    server = subprocess.Popen(["node", str(EVERYTHING), transport], cwd=tmp_path,
                              env={**os.environ, "PORT": str(port)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    wait_port(port, server)
    return server, port


async def test_streamable_http_server(gw, tmp_path):
    server, port = start_everything(tmp_path, "streamableHttp")
    try:
        mcp_app(gw, "dev.mcp.remote", {"url": f"http://127.0.0.1:{port}/mcp"},
                description="The reference server over streamable HTTP")
        seen = []

        async def on_progress(progress, total, message):
            seen.append(progress)

        async with gw.session() as s:
            r = await exec_(s, "dev.mcp.remote", "echo", message="over http")
            assert r.content[0].text == "Echo: over http"
            r = await exec_(s, "dev.mcp.remote", "get-tiny-image")
            assert any(c.type == "image" for c in r.content)
            r = await s.call_tool("aai_exec", {"app": "dev.mcp.remote", "tool": "trigger-long-running-operation",
                                               "args": {"duration": 1, "steps": 3}}, progress_callback=on_progress)
            assert seen == [1, 2, 3]
            with anyio.move_on_after(1):
                await s.call_tool("aai_exec", {"app": "dev.mcp.remote", "tool": "trigger-long-running-operation",
                                               "args": {"duration": 30, "steps": 3}})
            r = await exec_(s, "dev.mcp.remote", "echo", message="after cancel")
            assert r.content[0].text == "Echo: after cancel"

            # The server goes away: its app fails, and comes back with the server.
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
            with pytest.raises(MCPError) as e:
                await exec_(s, "dev.mcp.remote", "echo", message="gone")
            assert e.value.error.data["type"] == "SERVICE_UNAVAILABLE"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


async def test_legacy_sse_server_by_transport_and_by_detection(gw, tmp_path):
    """The 2024-11-05 HTTP+SSE transport: `transport: "sse"`, and a URL with no transport
    (the streamable handshake fails, the URL answers as an event stream)."""
    server, port = start_everything(tmp_path, "sse")
    try:
        url = f"http://127.0.0.1:{port}/sse"
        mcp_app(gw, "dev.mcp.sse", {"url": url, "transport": "sse"},
                description="The reference server over HTTP+SSE")
        mcp_app(gw, "dev.mcp.detected", {"url": url},
                description="The same, transport not said")
        mcp_app(gw, "dev.mcp.strict", {"url": url, "transport": "streamable-http"},
                description="The same, streamable HTTP only")
        seen = []

        async def on_progress(progress, total, message):
            seen.append(progress)

        async with gw.session() as s:
            for app in ("dev.mcp.sse", "dev.mcp.detected"):
                r = await exec_(s, app, "echo", message=f"over sse to {app}")
                assert r.content[0].text == f"Echo: over sse to {app}"
            r = await s.call_tool("aai_exec", {"app": "dev.mcp.sse", "tool": "trigger-long-running-operation",
                                               "args": {"duration": 1, "steps": 3}}, progress_callback=on_progress)
            assert seen == [1, 2, 3]
            guide = await s.call_tool("aai_guide", {"app": "dev.mcp.sse"})
            assert "get-tiny-image" in guide.content[0].text
            with pytest.raises(MCPError) as e:
                await exec_(s, "dev.mcp.strict", "echo", message="no fallback")
            assert e.value.error.data["type"] == "SERVICE_UNAVAILABLE"
            assert "handshake failed" in e.value.error.data["detail"]
    finally:
        stop(server)


async def test_python_sdk_sse_server_announces_list_changes_and_gets_the_stored_key(gw, tmp_path):
    port = free_port()
    server = subprocess.Popen([sys.executable, str(GROWING), "--sse", str(port)], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_port(port, server)
        gw.config(credentials={"store": "file"})
        mcp_app(gw, "dev.mcp.sse-growing", {"url": f"http://127.0.0.1:{port}/sse", "transport": "sse"},
                auth={"type": "apiKey", "apiKey": {"location": "header", "name": "Authorization",
                                                    "prefix": "Bearer", "obtainUrl": f"http://127.0.0.1:{port}/"}})
        stored = subprocess.run([str(gw.binary), "--home", str(gw.home), "auth", "set", "dev.mcp.sse-growing",
                                 "--stdin"], input="tok-SSE-777\n", env=gw.env(), capture_output=True, text=True,
                                timeout=60)
        assert stored.returncode == 0, stored.stderr
        async with gw.session() as s:
            r = await exec_(s, "dev.mcp.sse-growing", "authorization")
            assert r.content[0].text == "Bearer tok-SSE-777"
            r = await exec_(s, "dev.mcp.sse-growing", "grow", name="sprout")
            assert r.content[0].text == "added sprout"
            for _ in range(100):
                guide = await s.call_tool("aai_guide", {"app": "dev.mcp.sse-growing"})
                if "sprout" in guide.content[0].text:
                    break
                await anyio.sleep(0.05)
            assert "sprout" in guide.content[0].text, "the list change came over the event stream"
            r = await exec_(s, "dev.mcp.sse-growing", "sprout")
            assert r.content[0].text == "I am sprout"
        for log in (gw.home / "logs").iterdir():
            assert "tok-SSE" not in log.read_text()
    finally:
        stop(server)


SSE_ELSEWHERE = r"""
import http.server, sys
port, other = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(f"event: endpoint\ndata: http://127.0.0.1:{other}/message\n\n".encode())
        self.wfile.flush()
        import time; time.sleep(30)
    def do_POST(self):
        self.send_response(404); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""

RECORDER = r"""
import http.server, sys
port, marks = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        open(marks, "a").write("request\n")
        self.send_response(202); self.end_headers()
    do_GET = do_POST
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""


async def test_an_sse_server_cannot_send_its_messages_and_key_to_another_origin(gw, tmp_path):
    port, other = free_port(), free_port()
    marks = tmp_path / "hits"
    servers = [
        subprocess.Popen([sys.executable, "-c", SSE_ELSEWHERE, str(port), str(other)],
                         start_new_session=True, stderr=subprocess.DEVNULL),
        subprocess.Popen([sys.executable, "-c", RECORDER, str(other), str(marks)],
                         start_new_session=True, stderr=subprocess.DEVNULL),
    ]
    try:
        wait_port(port, servers[0])
        wait_port(other, servers[1])
        mcp_app(gw, "dev.mcp.elsewhere",
                {"url": f"http://127.0.0.1:{port}/sse", "transport": "sse",
                 "headers": {"X-Api-Key": "key-SECRET-42"}})
        async with gw.session() as s:
            with pytest.raises(MCPError) as e:
                await exec_(s, "dev.mcp.elsewhere", "anything")
        data = e.value.error.data
        assert data["type"] == "SERVICE_UNAVAILABLE", data
        assert "another origin" in data["detail"], data
        assert not marks.exists(), "nothing was sent to the other origin"
        assert "key-SECRET" not in json.dumps(data)
    finally:
        for server in servers:
            stop(server)


async def test_filesystem_server(gw, tmp_path):
    need_npm_peer(FILESYSTEM)
    root = tmp_path / "files"
    root.mkdir()
    (root / "note.txt").write_text("first line\n")
    mcp_app(gw, "dev.mcp.files", {"command": "node", "args": [str(FILESYSTEM), str(root)]},
            description="Files under one folder")
    async with gw.session() as s:
        r = await exec_(s, "dev.mcp.files", "read_text_file", path=str(root / "note.txt"))
        assert r.content[0].text == "first line\n"
        await exec_(s, "dev.mcp.files", "write_file", path=str(root / "new.txt"), content="written ✓")
        assert (root / "new.txt").read_text() == "written ✓"
        r = await exec_(s, "dev.mcp.files", "list_directory", path=str(root))
        assert "[FILE] new.txt" in r.content[0].text and "[FILE] note.txt" in r.content[0].text
        r = await exec_(s, "dev.mcp.files", "read_text_file", path="/etc/hostname")
        refusal = r.content[0].text.lower()
        assert r.is_error and ("outside allowed directories" in refusal or "denied" in refusal)
        # In a batch, a downstream result marked isError counts as a failed call.
        r = await s.call_tool("aai_batch", {"calls": [
            {"app": "dev.mcp.files", "tool": "read_text_file", "args": {"path": "/etc/hostname"}},
            {"app": "dev.mcp.files", "tool": "read_text_file", "args": {"path": str(root / "note.txt")}}]})
        assert [x["status"] for x in r.structured_content["results"]] == ["error", "ok"]
        assert r.structured_content["results"][0]["result"]["isError"] is True


async def test_time_server_from_pypi(gw):
    server = Path(sys.executable).with_name("mcp-server-time")
    need_peer(server.exists(), "PyPI package mcp-server-time")
    mcp_app(gw, "dev.mcp.time", {"command": str(server), "args": ["--local-timezone", "UTC"]},
            description="Current time and time zone conversion")
    async with gw.session() as s:
        r = await exec_(s, "dev.mcp.time", "get_current_time", timezone="Asia/Tokyo")
        now = json.loads(r.content[0].text)
        assert now["timezone"] == "Asia/Tokyo" and now["datetime"].endswith("+09:00")
        r = await exec_(s, "dev.mcp.time", "convert_time", source_timezone="UTC", time="12:00",
                        target_timezone="Europe/Berlin")
        assert json.loads(r.content[0].text)["target"]["timezone"] == "Europe/Berlin"


def start_http_growing(tmp_path):
    port = free_port()
    server = subprocess.Popen([sys.executable, str(GROWING), "--http", str(port)], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_port(port, server)
    return server, port


def stop(server):
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


async def test_import_mcp_makes_apps_of_a_claude_config_and_keeps_the_key_out_of_files(gw, tmp_path):
    need_npm_peer(EVERYTHING)
    server, port = start_http_growing(tmp_path)
    try:
        gw.config(credentials={"store": "file"})
        config = tmp_path / "claude_desktop_config.json"
        config.write_text(json.dumps({"mcpServers": {
            "everything": {"command": "node", "args": [str(EVERYTHING), "stdio"]},
            "Team Tools": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp",
                           "headers": {"Authorization": "Bearer tok-SECRET-123"}},
            "legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
        }}))
        shown = gw.run("import", "mcp", str(config))
        assert shown.returncode == 0, shown.stderr
        assert "mcp.everything" in shown.stdout and "mcp.team-tools" in shown.stdout
        assert "SSE: http://127.0.0.1:9/sse" in shown.stdout and "run again with --yes" in shown.stdout
        assert not (gw.home / "mcp.everything").exists(), "nothing written without --yes or a TTY"
        assert "tok-SECRET" not in shown.stdout + shown.stderr

        done = gw.run("import", "mcp", str(config), "--yes", "--json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert len(report["written"]) == 3
        legacy = json.loads((gw.home / "mcp.legacy" / "aai.json").read_text())
        assert legacy["execution"] == {"type": "mcp", "url": "http://127.0.0.1:9/sse", "transport": "sse"}
        assert "tok-SECRET" not in (gw.home / "mcp.team-tools" / "aai.json").read_text()

        async with gw.session() as s:
            r = await exec_(s, "mcp.everything", "echo", message="imported")
            assert r.content[0].text == "Echo: imported"
            r = await exec_(s, "mcp.team-tools", "authorization")
            assert r.content[0].text == "Bearer tok-SECRET-123", "the stored key is sent as configured"
        for log in (gw.home / "logs").iterdir():
            assert "tok-SECRET" not in log.read_text()
        assert "tok-SECRET" not in (tmp_path / "stderr.log").read_text()

        again = gw.run("import", "mcp", str(config), "--json")
        plans = {a["app"]: a["plan"] for a in json.loads(again.stdout)["apps"]}
        assert plans == {"mcp.everything": "unchanged", "mcp.team-tools": "unchanged", "mcp.legacy": "unchanged"}
    finally:
        stop(server)


async def test_import_mcp_reads_codex_toml(gw, tmp_path):
    server = Path(sys.executable).with_name("mcp-server-time")
    need_peer(server.exists(), "PyPI package mcp-server-time")
    config = tmp_path / "config.toml"
    config.write_text(f'model = "o3"\n\n[mcp_servers.time]\ncommand = "{server}"\n'
                      f'args = ["--local-timezone", "UTC"]\ntool_timeout_sec = 20\n')
    done = gw.run("import", "mcp", str(config), "--yes")
    assert done.returncode == 0 and "wrote" in done.stdout, done.stderr
    assert json.loads((gw.home / "mcp.time" / "aai.json").read_text())["execution"]["timeout"] == 20000
    async with gw.session() as s:
        r = await exec_(s, "mcp.time", "get_current_time", timezone="UTC")
        assert json.loads(r.content[0].text)["timezone"] == "UTC"


def test_import_mcp_refuses_what_it_cannot_read(gw, tmp_path):
    for name, text, says in [("a.json", "{", "not valid JSON"), ("b.json", "{}", "mcpServers"),
                             ("c.toml", "x = [", "TOML")]:
        (tmp_path / name).write_text(text)
        r = gw.run("import", "mcp", str(tmp_path / name))
        assert r.returncode == 2 and says in r.stderr, r.stderr
    r = gw.run("import", "mcp", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "cannot read" in r.stderr


HOSTILE = Path(__file__).with_name("hostile_mcp_server.py")


def hostile(gw, app_id, *args, **extra):
    mcp_app(gw, app_id, {"command": sys.executable, "args": [str(HOSTILE), *map(str, args)], **extra})


async def test_a_tool_list_with_broken_entries_keeps_every_usable_tool(gw):
    hostile(gw, "dev.mcp.broken", "broken-list")
    async with gw.session() as s:
        guide = (await s.call_tool("aai_guide", {"app": "dev.mcp.broken"})).content[0].text
        listed = [line[5:-1] for line in guide.splitlines() if line.startswith("### `")]
        assert listed == ["notobj", "arr", "typestr", "noschema", "dup", "echo"], listed
        assert "second dup" not in guide
        # A tool without a usable schema takes any object; the server still gets it.
        r = await exec_(s, "dev.mcp.broken", "notobj", anything=1)
        assert r.content[0].text == 'notobj: {"anything": 1}'
        r = await exec_(s, "dev.mcp.broken", "echo", text="still here")
        assert r.content[0].text == 'echo: {"text": "still here"}'
    log = (gw.home / "logs" / "aai-gateway.log").read_text()
    assert "listed twice" in log and "is not a tool name" in log


async def test_a_server_with_thousands_of_tools_gets_a_short_guide_and_short_errors(gw):
    hostile(gw, "dev.mcp.many", "many", 3000)
    async with gw.session() as s:
        guide = (await s.call_tool("aai_guide", {"app": "dev.mcp.many"})).content[0].text
        assert "## Tools (1000)" in guide, "at most 1000 tools are kept"
        assert "- `tool_00999`: Tool number 999\n" in guide, "one line per tool"
        assert "Second line" not in guide and "Parameters" not in guide
        one = (await s.call_tool("aai_guide", {"app": "dev.mcp.many", "tool": "tool_00042"})).content[0].text
        assert "### `tool_00042`" in one and "`a` (string)" in one and "tool_00043" not in one
        with pytest.raises(MCPError) as e:
            await exec_(s, "dev.mcp.many", "tool_0004")
        detail = e.value.error.data["detail"]
        assert e.value.error.data["type"] == "TOOL_NOT_FOUND"
        assert "close names: tool_00040, tool_00041" in detail and len(detail) < 1000, detail
        r = await exec_(s, "dev.mcp.many", "tool_00999", a="x")
        assert r.content[0].text == 'tool_00999: {"a": "x"}'


async def test_a_result_too_large_to_pass_on_fails_at_once_and_the_server_is_reached_again(gw):
    hostile(gw, "dev.mcp.big", "big", timeout=120000)
    async with gw.session() as s:
        r = await exec_(s, "dev.mcp.big", "big", mb=15)
        assert len(r.content[0].text) == 15 * 1024 * 1024
        # Well inside the 120 s timeout: the call does not wait for it.
        with anyio.fail_after(60):
            with pytest.raises(MCPError) as e:
                await exec_(s, "dev.mcp.big", "big", mb=17)
        assert e.value.error.data["type"] == "SERVICE_UNAVAILABLE"
        assert "over 16 MiB" in e.value.error.data["detail"]
        r = await exec_(s, "dev.mcp.big", "echo", text="after")
        assert r.content[0].text == 'echo: {"text": "after"}'


async def test_a_server_that_misreads_server_discover_is_started_again_with_initialize(gw, tmp_path):
    """An empty result for `server/discover` (not an error) leaves rmcp no fallback on that
    connection: the gateway starts the server again and speaks 2025-11-25 to it."""
    log = tmp_path / "log.txt"
    hostile(gw, "dev.mcp.odd", "odd-discover", log)
    async with gw.session() as s:
        r = await exec_(s, "dev.mcp.odd", "echo", text="x")
        assert r.content[0].text == 'echo: {"text": "x"}'
    assert log.read_text().split() == ["started", "discover", "started"]


async def test_a_server_that_never_answers_server_discover_is_asked_once_per_run(gw, tmp_path):
    """rmcp waits 10 s for an answer, then speaks `initialize` on the same connection; the
    revision is remembered, so the server, started again, is not asked again."""
    log = tmp_path / "log.txt"
    hostile(gw, "dev.mcp.deaf", "deaf-discover", log, timeout=30000)
    async with gw.session() as s:
        r = await exec_(s, "dev.mcp.deaf", "echo", text="x")
        assert r.content[0].text == 'echo: {"text": "x"}'
        with pytest.raises(MCPError):
            await exec_(s, "dev.mcp.deaf", "quit")
        r = await exec_(s, "dev.mcp.deaf", "echo", text="again")
        assert r.content[0].text == 'echo: {"text": "again"}'
    assert log.read_text().split() == ["started", "discover", "started"]


async def test_a_server_that_never_finishes_its_handshake_is_bounded_by_the_calls_timeout(gw, tmp_path):
    starts = tmp_path / "starts.txt"
    hostile(gw, "dev.mcp.silent", "silent", starts, timeout=1500)
    mcp_app(gw, "dev.mcp.fine", {"command": sys.executable, "args": [str(HOSTILE), "big"]})
    errors = []

    async def one(s):
        try:
            await exec_(s, "dev.mcp.silent", "echo", text="x")
        except MCPError as e:
            errors.append(e.error)

    async with gw.session() as s:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(one, s)
        r = await exec_(s, "dev.mcp.fine", "echo", text="unaffected")
        assert r.content[0].text == 'echo: {"text": "unaffected"}'
    assert len(errors) == 3, errors
    assert all(e.data["type"] == "SERVICE_UNAVAILABLE" and "within 1 s" in e.data["detail"] for e in errors), errors
    assert starts.read_text().count("started") == 1, "the waiting calls took the first attempt's failure"


async def test_keys_in_headers_and_the_url_never_reach_errors_logs_or_history(gw, tmp_path):
    port = free_port()
    server = subprocess.Popen([sys.executable, str(HOSTILE), "echo-http", str(port)], start_new_session=True)
    try:
        wait_port(port, server)
        secrets = ["HDR-SEKRIT-1234", "KEY-SEKRIT-5678", "PATH-SEKRIT-9012", "QUERY-SEKRIT-3456"]
        mcp_app(gw, "dev.mcp.echoer", {
            "url": f"http://127.0.0.1:{port}/mcp/{secrets[2]}?key={secrets[3]}",
            "headers": {"Authorization": f"Bearer {secrets[0]}", "X-Api-Key": secrets[1],
                        "X-Team": "blue-team-7"}},
            tools=[{"name": "echo", "description": "Says it back",
                    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}])
        seen = ""
        async with gw.session() as s:
            for call in (exec_(s, "dev.mcp.echoer", "echo", text="x"),
                         s.call_tool("aai_guide", {"app": "dev.mcp.echoer"})):
                try:
                    r = await call
                    seen += json.dumps(r.model_dump(), default=str)
                except MCPError as e:
                    seen += json.dumps(e.error.model_dump(), default=str)
        assert "SERVICE_UNAVAILABLE" in seen and "refused" in seen, seen
        assert "blue-team-7" in seen, "a header that is not a secret stays readable"
        history = gw.run("history", "--json").stdout
        logs = (gw.home / "logs" / "aai-gateway.log").read_text() + (tmp_path / "stderr.log").read_text()
        for secret in secrets:
            for where, text in (("the answers", seen), ("history", history), ("the logs", logs)):
                assert secret not in text, f"{secret} in {where}"
    finally:
        stop(server)


async def test_a_progress_flood_is_coalesced_and_all_of_it_comes_before_the_result(gw, tmp_path):
    from conftest import _processes_of
    # 300,000 notifications take a debug build 20-25 s on an idle machine: the call gets
    # room beyond the default 30 s, since this is about order and memory, not speed.
    hostile(gw, "dev.mcp.flood", "flood", timeout=120000)
    seen, after = [], []
    done = False

    async def on_progress(progress, total, message):
        (after if done else seen).append(progress)

    async with gw.session() as s:
        r = await s.call_tool("aai_exec", {"app": "dev.mcp.flood", "tool": "flood", "args": {"n": 300000}},
                              progress_callback=on_progress)
        done = True
        assert "flood" in r.content[0].text
        await anyio.sleep(1.0)
        gateway = [pid for pid, cmd in _processes_of(tmp_path) if "aai-gateway" in cmd]
        peak_kib = max(int(line.split()[1]) for pid in gateway
                       for line in open(f"/proc/{pid}/status") if line.startswith("VmHWM:"))
    assert seen, "progress passes through"
    assert len(seen) < 300000, "coalesced, not queued"
    assert after == [], f"{len(after)} progress notifications came after the result"
    assert peak_kib < 150 * 1024, f"peak RSS {peak_kib} KiB"


async def test_a_tool_too_deep_to_parse_is_left_out_and_the_rest_listed(gw):
    hostile(gw, "dev.mcp.deep", "deep", timeout=5000)
    async with gw.session() as s:
        import time
        started = time.monotonic()
        guide = (await s.call_tool("aai_guide", {"app": "dev.mcp.deep"})).content[0].text
        assert time.monotonic() - started < 5, "within the app's timeout"
        assert "### `echo`" in guide and "### `deep`" not in guide, guide
        r = await s.call_tool("aai_exec", {"app": "dev.mcp.deep", "tool": "echo", "args": {"text": "hi"}})
        assert "hi" in r.content[0].text


async def test_resources_and_prompts_of_a_server_are_read_through_its_app(gw):
    """server-everything's resources and prompts: listed in the app's guide only (two
    tools of the gateway's, `mcp.resources.read` and `mcp.prompts.get`), read and got
    through aai_exec like any tool."""
    everything(gw)
    async with gw.session() as s:
        listed = [t.name for t in (await s.list_tools()).tools]
        assert listed == ["app_aai", "app_dev_mcp_everything", *META], "nothing more in the tool list"
        guide = (await s.call_tool("aai_guide", {"app": "dev.mcp.everything"})).content[0].text
        assert "### `mcp.resources.read`" in guide and "### `mcp.prompts.get`" in guide, guide
        uri = re.search(r"- `(demo://resource/static/document/[^`]+)`", guide).group(1)
        read = await s.call_tool("aai_exec", {"app": "dev.mcp.everything", "tool": "mcp.resources.read",
                                              "args": {"uri": uri}})
        assert not read.is_error, read
        contents = read.structured_content["contents"]
        assert contents[0]["uri"] == uri and contents[0].get("text"), contents
        assert read.content[0].type == "resource"
        prompts = guide.split("### `mcp.prompts.get`", 1)[1]
        found_prompt = re.search(r"- `([^`]+)`(?!\s*\()", prompts)
        assert found_prompt, prompts[:2000]
        prompt = found_prompt.group(1)
        got = await s.call_tool("aai_exec", {"app": "dev.mcp.everything", "tool": "mcp.prompts.get",
                                             "args": {"name": prompt}})
        assert got.structured_content["messages"][0]["role"] == "user", got
        # A URI the server did not list is refused before anything is sent.
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "dev.mcp.everything", "tool": "mcp.resources.read",
                                           "args": {"uri": "file:///etc/passwd"}})
        assert e.value.error.code == -32005
        # Its resource templates are listed too, and a URI one makes is read.
        template = re.search(r"- `(demo://resource/dynamic/text/\{resourceId\})` \(a template", guide)
        assert template, guide
        read = await s.call_tool("aai_exec", {"app": "dev.mcp.everything", "tool": "mcp.resources.read",
                                              "args": {"uri": "demo://resource/dynamic/text/7"}})
        assert not read.is_error and read.structured_content["contents"][0]["uri"].endswith("/7"), read
        # A URI no template makes (another segment) is still refused.
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "dev.mcp.everything", "tool": "mcp.resources.read",
                                           "args": {"uri": "demo://resource/dynamic/text/7/../../x"}})
        assert e.value.error.code == -32005


async def passing_session(gw, **callbacks):
    """An MCP client with the given callbacks (elicitation, sampling, roots) over stdio."""
    import contextlib
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    @contextlib.asynccontextmanager
    async def opened():
        errlog = open(gw.tmp / "stderr.log", "a")
        async with stdio_client(gw.params(), errlog=errlog) as (read, write):
            async with ClientSession(read, write, **callbacks) as s:
                await s.initialize()
                yield s
        errlog.close()
    return opened()


async def test_a_servers_requests_reach_the_calling_client_labelled_with_the_app(gw):
    """Elicitation, sampling and roots of server-everything pass through to the client
    whose call is running: each labelled with the app (`_meta`, and the elicitation's
    message); sampling asks consent first (here `allow`)."""
    from mcp import types
    everything(gw)
    seen = {}

    async def elicit(context, params):
        seen["elicit"] = params
        return types.ElicitResult(action="accept", content={"name": "Ada", "check": True, "integer": 7})

    async def sample(context, params):
        seen["sample"] = params
        return types.CreateMessageResult(role="assistant", model="test-model",
                                         content=types.TextContent(type="text", text="forty-two"))

    async def roots(context):
        seen["roots"] = True
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])

    async with await passing_session(gw, elicitation_callback=elicit, sampling_callback=sample,
                                     list_roots_callback=roots) as s:
        r = await exec_(s, "dev.mcp.everything", "trigger-elicitation-request")
        text = "\n".join(c.text for c in r.content if c.type == "text")
        assert "Ada" in text and not r.is_error, text
        assert seen["elicit"].message.startswith("dev.mcp.everything: ")
        r = await exec_(s, "dev.mcp.everything", "trigger-sampling-request", prompt="the answer?")
        text = "\n".join(c.text for c in r.content if c.type == "text")
        assert "forty-two" in text and not r.is_error, text
        assert seen["sample"].messages[-1].content.text.endswith("the answer?")
        meta = seen["sample"].meta or {}
        assert (meta.get("io.github.aai-gateway/app") if isinstance(meta, dict) else getattr(meta, "io.github.aai-gateway/app", None)) == "dev.mcp.everything"
        r = await exec_(s, "dev.mcp.everything", "get-roots-list")
        assert "file:///work/project" in r.content[0].text, r.content[0].text


async def test_a_client_that_cannot_answer_gets_the_server_an_error_not_a_hang(gw):
    """The client declares neither sampling nor elicitation: the server's request fails at
    once (the call ends well inside its timeout), and the call reports it."""
    everything(gw)
    async with await passing_session(gw) as s:
        started = time.monotonic()
        r = await exec_(s, "dev.mcp.everything", "trigger-sampling-request", prompt="hello")
        text = "\n".join(c.text for c in r.content if c.type == "text")
        assert r.is_error or "does not support sampling" in text or "error" in text.lower(), text
        assert time.monotonic() - started < 20


async def test_sampling_needs_the_users_yes(gw):
    """Consent `prompt`: the user is asked (by elicitation) before the server may use the
    client's model; a no reaches the server as an error and the model is never asked."""
    from mcp import types
    everything(gw)
    gw.config(consent={"mode": "prompt"})
    asked, sampled = [], []

    async def elicit(context, params):
        asked.append(params.message)
        # Allow the call itself; refuse the sampling.
        return types.ElicitResult(action="accept", content={"decision": "deny" if "your client's model" in params.message else "once"})

    async def sample(context, params):
        sampled.append(params)
        return types.CreateMessageResult(role="assistant", model="m",
                                         content=types.TextContent(type="text", text="never"))

    async with await passing_session(gw, elicitation_callback=elicit, sampling_callback=sample) as s:
        r = await exec_(s, "dev.mcp.everything", "trigger-sampling-request", prompt="secret plans")
    text = "\n".join(c.text for c in r.content if c.type == "text")
    assert not sampled, "the model was asked despite the user's no"
    assert any("your client's model" in m and "secret plans" in m for m in asked), asked
    assert "never" not in text
