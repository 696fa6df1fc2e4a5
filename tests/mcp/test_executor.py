"""The stdio executor and the call pipeline under real conditions: concurrency, hung,
crashing and babbling adapters, one-shot adapters, progress, cancellation, a client that
goes away mid-call, descriptors appearing while the server runs, and `aai-gateway call`.

Run: python3 -m pytest tests/mcp -q
"""
import json
import os
import random
import time

import pytest

from conftest import alive

anyio = pytest.importorskip("anyio")

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio


async def wait_dead(pid: int, seconds: float = 5.0) -> bool:
    """Polls without blocking the event loop (the client must keep running meanwhile)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        await anyio.sleep(0.05)
    return False


async def exec_(s, tool, **args):
    return await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": tool, "args": args})


async def test_exec_applies_defaults_and_gives_the_adapter_an_explicit_env(gw):
    gw.add_app("com.example.echo")
    async with gw.session() as s:
        r = await exec_(s, "echo", text="hello")
        assert r.structured_content["echo"] == {"text": "hello", "n": 3}
        assert r.structured_content["env_secret"] is None, "the gateway's environment is not inherited"
        assert json.loads(r.content[0].text)["echo"]["text"] == "hello"


async def test_200_concurrent_calls_get_their_own_replies(gw):
    gw.add_app("com.example.echo")
    async with gw.session() as s:
        results = {}

        async def one(i):
            r = await exec_(s, "echo", text=f"call-{i}", delay=random.random() * 0.05)
            results[i] = r.structured_content["echo"]["text"]

        async with anyio.create_task_group() as tg:
            for i in range(200):
                tg.start_soon(one, i)
        assert results == {i: f"call-{i}" for i in range(200)}


async def test_hanging_adapter_times_out_and_leaves_no_process_behind(gw, tmp_path):
    gw.add_app("com.example.echo", timeout_ms=1500)
    pidfile = tmp_path / "pids"
    async with gw.session() as s:
        await exec_(s, "echo", text="started")  # the timeout is the call's, not the start's
        started = time.monotonic()
        with pytest.raises(MCPError) as e:
            await exec_(s, "hang", pidfile=str(pidfile))
        assert 1.4 < time.monotonic() - started < 10
        assert e.value.error.code == -32008
        assert e.value.error.data["type"] == "TIMEOUT" and e.value.error.data["retryable"] is True
        adapter, grandchild = map(int, pidfile.read_text().split())
        assert await wait_dead(adapter), "the adapter was stopped"
        assert await wait_dead(grandchild), "and everything it started"
        r = await exec_(s, "echo", text="after")
        assert r.structured_content["echo"]["text"] == "after", "a fresh adapter serves the next call"


async def test_crashing_adapter_gives_a_clear_error_and_the_next_call_works(gw):
    gw.add_app("com.example.echo")
    async with gw.session() as s:
        first = (await exec_(s, "echo", text="x")).structured_content["pid"]
        with pytest.raises(MCPError) as e:
            await exec_(s, "crash")
        detail = e.value.error.data["detail"]
        assert e.value.error.code == -32001
        assert "exited" in detail and "3" in detail, detail
        assert "boom: the adapter crashed on purpose" in detail
        r = await exec_(s, "echo", text="again")
        assert r.structured_content["echo"]["text"] == "again"
        assert r.structured_content["pid"] != first


async def test_malformed_output_is_reported_with_an_excerpt(gw):
    gw.add_app("com.example.echo")
    async with gw.session() as s:
        with pytest.raises(MCPError) as e:
            await exec_(s, "garbage")
        assert e.value.error.code == -32001
        assert "not a JSON envelope: `this is not json at all`" in e.value.error.data["detail"]


async def test_one_shot_adapters_are_restarted_on_demand(gw):
    gw.add_app("com.example.echo", args=["--oneshot"])
    async with gw.session() as s:
        pids = set()
        for i in range(4):
            r = await exec_(s, "echo", text=str(i))
            assert r.structured_content["echo"]["text"] == str(i)
            pids.add(r.structured_content["pid"])
        assert len(pids) == 4


async def test_progress_is_forwarded_when_asked_for(gw):
    gw.add_app("com.example.echo")
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    async with gw.session() as s:
        r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "progress", "args": {}},
                              progress_callback=on_progress)
        assert r.content[0].text == "done"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def test_cancelling_a_call_stops_an_otherwise_idle_adapter(gw):
    gw.add_app("com.example.echo")
    async with gw.session() as s:
        pid = (await exec_(s, "echo", text="x")).structured_content["pid"]
        with anyio.move_on_after(1.0):
            await exec_(s, "sleep", seconds=60)
        assert await wait_dead(pid), "the cancelled call's adapter was stopped"
        r = await exec_(s, "echo", text="next")
        assert r.structured_content["echo"]["text"] == "next"


async def test_session_closed_by_the_sdk_mid_call_stops_the_adapter(gw):
    gw.add_app("com.example.echo")
    async with gw.session() as s:
        pid = (await exec_(s, "echo", text="x")).structured_content["pid"]
        async def slow():
            await exec_(s, "sleep", seconds=60)

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            await anyio.sleep(0.3)
            tg.cancel_scope.cancel()
    assert await wait_dead(pid, 10), "the adapter did not outlive its client"


async def test_new_descriptor_on_disk_is_announced_and_callable(gw):
    gw.add_app("com.example.echo")
    changed = anyio.Event()

    async def on_message(message):
        if getattr(getattr(message, "root", message), "method", "") == "notifications/tools/list_changed":
            changed.set()

    async with gw.session(on_message=on_message) as s:
        assert [t.name for t in (await s.list_tools()).tools][:2] == ["app_aai", "app_com_example_echo"]
        gw.add_app("com.example.late", description="Arrived later")
        with anyio.fail_after(10):
            await changed.wait()
        names = [t.name for t in (await s.list_tools()).tools]
        assert "app_com_example_late" in names
        r = await s.call_tool("aai_exec", {"app": "com.example.late", "tool": "echo", "args": {"text": "hi"}})
        assert r.structured_content["echo"]["text"] == "hi"
        resources = [str(r.uri) for r in (await s.list_resources()).resources]
        assert "app:com.example.late" in resources


async def test_descriptors_written_during_the_first_scan_of_a_large_catalog_all_appear(gw):
    # 10,000 apps: the first scan takes long enough for the later writes to land in it,
    # and they start a rescan of their own. The scan whose apps stand must be the last
    # to start (an older scan finishing last once replaced a newer one's apps).
    doc = {"schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
           "app": {"id": "", "name": {"en": "App"}, "defaultLang": "en", "description": "One of many"},
           "execution": {"type": "stdio", "command": "true"},
           "tools": [{"name": "t", "description": "A tool", "parameters": {"type": "object"}}]}
    for i in range(10_000):
        doc["app"]["id"] = f"com.example.many{i:05d}"
        gw.put(doc["app"]["id"], doc)
    gw.config(scanInterval=0)  # no periodic rescan to hide a lost one
    log = gw.home / "logs" / "aai-gateway.log"

    def scans():
        # A rescan that finds every descriptor as the last one read it reloads nothing.
        if not log.exists():
            return 0
        text = log.read_text()
        return text.count("catalog loaded") + text.count("no descriptor changed")

    late = [f"com.example.late{i}" for i in range(8)]

    async def missing():
        gone = []
        for app in late:
            try:
                await s.call_tool("aai_guide", {"app": app})
            except MCPError as e:
                assert e.error.data["type"] == "APP_NOT_FOUND", e.error
                gone.append(app)
        return gone

    async with gw.session() as s:
        for app in late:
            gw.add_app(app)
        with anyio.fail_after(90):
            while await missing():
                await anyio.sleep(0.5)
            # Every scan has ended (none for 3 s): the apps are still all there.
            seen, quiet = scans(), 0
            while quiet < 6:
                await anyio.sleep(0.5)
                quiet, seen = (quiet + 1, seen) if scans() == seen else (0, scans())
        assert seen >= 2, "the writes started no rescan"
        assert await missing() == []
        assert "many09999" in (await s.call_tool("aai_guide", {"app": "com.example.many09999"})).content[0].text


async def test_broken_descriptor_does_not_hide_the_others(gw):
    gw.add_app("com.example.echo")
    gw.put("com.example.broken", {"schemaVersion": "1.0", "app": {"id": "com.example.broken"}})
    async with gw.session() as s:
        names = [t.name for t in (await s.list_tools()).tools]
        assert names[:2] == ["app_aai", "app_com_example_echo"] and "app_com_example_broken" not in names
    assert "com.example.broken/aai.json" in (gw.tmp / "stderr.log").read_text()


def test_call_command_runs_the_same_pipeline(gw):
    gw.add_app("com.example.echo")
    ok = gw.run("call", "com.example.echo", "echo", '{"text": "cli"}')
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["echo"] == {"text": "cli", "n": 3}
    bad = gw.run("call", "com.example.echo", "echo", '{"n": 0}')
    assert bad.returncode == 1
    error = json.loads(bad.stdout)  # the error object, whole, on stdout
    assert error["code"] == -32005 and error["data"]["type"] == "INVALID_PARAMS"
    said = [line for line in bad.stderr.splitlines() if line.startswith("aai-gateway: ")]
    assert said == ["aai-gateway: Invalid params: `/text` is a required property; "
                    "`/n`: the value is less than the minimum of 1"], bad.stderr
    missing = gw.run("call", "com.example.nope", "echo")
    assert missing.returncode == 1 and json.loads(missing.stdout)["data"]["type"] == "APP_NOT_FOUND"
    assert "App not found" in missing.stderr
    not_json = gw.run("call", "com.example.echo", "echo", "{text")
    assert not_json.returncode == 1 and "not JSON" in json.loads(not_json.stdout)["data"]["detail"]



async def test_reloads_retire_adapters_whose_binding_changed_or_vanished(gw):
    import shutil
    gw.add_app("com.example.echo", env={"AAI_TEST_MARK": "one"})

    async def echo(s, delay=0):
        r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo",
                                           "args": {"text": "x", "delay": delay}})
        return r.structured_content

    async with gw.session() as s:
        first = await echo(s)
        assert first["mark"] == "one"
        slow = {}

        async def slow_call():
            slow["r"] = await echo(s, delay=1.5)

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call)
            await anyio.sleep(0.6)  # the slow call is in flight on the old adapter
            gw.add_app("com.example.echo", env={"AAI_TEST_MARK": "two"})
            with anyio.fail_after(15):
                while (await echo(s))["mark"] != "two":
                    await anyio.sleep(0.1)
        assert slow["r"]["mark"] == "one" and slow["r"]["pid"] == first["pid"], "in-flight calls finish"
        with anyio.fail_after(10):
            while alive(first["pid"]):
                await anyio.sleep(0.05)
        second = await echo(s)
        assert second["pid"] != first["pid"]

        shutil.rmtree(gw.home / "com.example.echo")
        with anyio.fail_after(15):
            while alive(second["pid"]):
                await anyio.sleep(0.1)


async def test_a_grandchild_that_left_the_group_does_not_outlive_the_gateway(gw):
    gw.add_app("com.example.echo")
    pidfile = gw.tmp / "escaped.pid"
    async with gw.session() as s:
        r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "escape",
                                           "args": {"pidfile": str(pidfile)}})
        escaped = int(pidfile.read_text())
        assert json.loads(r.content[0].text) == escaped
        assert alive(escaped)
    with anyio.fail_after(10):
        while alive(escaped):
            await anyio.sleep(0.05)


async def test_a_thousand_concurrent_calls_through_one_adapter_during_reloads(gw):
    gw.add_app("com.example.echo")
    gw.add_app("com.example.other")
    results = {}

    async with gw.session() as s:
        async def one(i):
            r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo",
                                               "args": {"text": f"call-{i}", "n": i + 1}})
            results[i] = (r.structured_content["echo"]["text"], r.structured_content["echo"]["n"])

        stop = anyio.Event()

        async def reload():
            n = 0
            while not stop.is_set():
                gw.add_app("com.example.other", description=f"reloaded {n}")
                n += 1
                await anyio.sleep(0.05)

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(reload)
                async with anyio.create_task_group() as calls:
                    for i in range(1000):
                        calls.start_soon(one, i)
                stop.set()
        tools = [t.name for t in (await s.list_tools()).tools]
        assert "app_com_example_other" in tools
    assert results == {i: (f"call-{i}", i + 1) for i in range(1000)}, "none lost, none crossed"


async def test_faulty_adapters_fail_their_calls_and_nothing_else(gw):
    gw.add_app("com.example.echo")
    async with gw.session() as s:
        # A stdout line over the cap: the calls fail, the adapter is replaced.
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "bigline", "args": {}})
        assert "longer than" in e.value.error.data["detail"]
        r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "ok"}})
        assert r.structured_content["echo"]["text"] == "ok"
        # 100 MiB of stderr without a newline, then 20,000 lines: memory and log stay small.
        r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "spew", "args": {}})
        assert r.content[0].text == "spewed"
        gateway = max(pid for pid, cmd in _gateways(gw))
        with open(f"/proc/{gateway}/status") as f:
            peak_kib = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
        assert peak_kib < 100 * 1024, f"peak RSS {peak_kib} KiB"
        # A child that ignores SIGTERM still goes with its group.
        r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "stubborn", "args": {}})
        stubborn = int(r.content[0].text)
    log = gw.home / "logs" / "aai-gateway.log"
    assert log.stat().st_size < 2 * 1024 * 1024, f"the log grew to {log.stat().st_size} bytes"
    assert "lines a second; counting the rest" in log.read_text()
    assert await wait_dead(stubborn)


def _gateways(gw):
    from conftest import _processes_of
    return [(pid, cmd) for pid, cmd in _processes_of(gw.tmp) if "--home" in cmd]
