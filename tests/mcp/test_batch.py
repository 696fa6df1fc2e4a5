"""`aai_batch`: many tool calls in one request, each through the whole pipeline, against a
stdio adapter, httpbin (HTTP) and a service on a private D-Bus daemon; failures mixed in,
order, stopOnError, limits, consent per call, history, progress and cancellation.

Run: python3 -m pytest tests/mcp -q -k batch
"""
import json

import pytest

from conftest import deciding
from test_dbus import json_descriptor
from test_history import wait_for
from test_http import httpbin, httpbin_app  # noqa: F401  (httpbin is a fixture)

anyio = pytest.importorskip("anyio")
MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio


async def batch(s, calls, on_progress=None, **options):
    return await s.call_tool("aai_batch", {"calls": calls, **options}, progress_callback=on_progress)


def three_kinds(gw, bus, httpbin):
    gw.extra_env = bus.env()
    bus.service("json", "com.example.jsonsvc")
    gw.put("com.example.jsonsvc", json_descriptor())
    gw.put("org.httpbin", httpbin_app(httpbin))
    gw.add_app("com.example.stdio")


def fifty_calls():
    """50 calls over the three apps; every fifth fails, each in its own way."""
    calls, failing = [], {}
    for i in range(50):
        kind = i % 3
        if i % 5 == 4:
            call, code = [
                ({"app": "com.example.stdio", "tool": "fail", "args": {"message": f"no {i}"}}, "AUTOMATION_FAILED"),
                ({"app": "org.httpbin", "tool": "status", "args": {"code": 500}}, None),
                ({"app": "com.example.jsonsvc", "tool": "fail", "args": {}}, "INVALID_PARAMS"),
            ][kind]
            if i == 49:
                call, code = {"app": "com.example.nowhere", "tool": "x"}, "APP_NOT_FOUND"
            failing[i] = code
        else:
            call = [
                {"app": "com.example.stdio", "tool": "echo", "args": {"text": f"t{i}"}},
                {"app": "org.httpbin", "tool": "get", "args": {"q": f"h{i}"}},
                {"app": "com.example.jsonsvc", "tool": "greet", "args": {"name": f"d{i}"}},
            ][kind]
        calls.append(call)
    return calls, failing


async def test_fifty_calls_over_stdio_http_and_dbus_each_report_their_result(gw, bus, httpbin):
    three_kinds(gw, bus, httpbin)
    calls, failing = fifty_calls()
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total))

    async with gw.session() as s:
        r = await batch(s, calls, on_progress=on_progress)
    out = r.structured_content
    assert not r.is_error
    assert len(out["results"]) == 50 and [x["index"] for x in out["results"]] == list(range(50))
    assert out["failed"] == len(failing) and out["ok"] == 50 - len(failing) and out["skipped"] == 0
    for i, item in enumerate(out["results"]):
        assert (item["app"], item["tool"]) == (calls[i]["app"], calls[i]["tool"])
        if i in failing:
            assert item["status"] == "error", item
            if failing[i]:
                error = item["error"]
                assert error["data"]["type"] == failing[i], item
                assert set(error) == {"code", "message", "data"} and "retryable" in error["data"]
            continue
        assert item["status"] == "ok", item
        # Data inside structuredContent: no field of a protocol revision (2026-07-28's
        # `resultType`) that the session may not speak.
        assert "resultType" not in item["result"], item
        text = item["result"]["content"][0]["text"]
        if calls[i]["app"] == "com.example.stdio":
            assert json.loads(text)["echo"]["text"] == f"t{i}"
        elif calls[i]["app"] == "org.httpbin":
            assert json.loads(text)["args"]["q"] == f"h{i}"
        else:
            assert json.loads(text)["greeting"] == f"hello d{i}"
    assert "50 calls: 40 ok, 10 failed, 0 skipped" in r.content[0].text
    assert seen[-1] == (50, 50) and len(seen) == 50, "progress after each call"
    # Every call went through the pipeline: each is in the history.
    wait_for(gw, 49, "--limit", "100")


async def test_a_sequence_runs_in_order_and_stops_at_the_first_failure(gw, tmp_path):
    gw.add_app("com.example.stdio")
    calls = [{"app": "com.example.stdio", "tool": "echo", "args": {"text": "one", "delay": 0.3}},
             {"app": "com.example.stdio", "tool": "echo", "args": {"text": "two"}},
             {"app": "com.example.stdio", "tool": "fail", "args": {"message": "stop here"}},
             {"app": "com.example.stdio", "tool": "echo", "args": {"text": "never"}}]
    async with gw.session() as s:
        r = await batch(s, calls, mode="sequence", stopOnError=True)
        statuses = [x["status"] for x in r.structured_content["results"]]
        assert statuses == ["ok", "ok", "error", "skipped"]
        assert "stopOnError" in r.structured_content["results"][3]["reason"]
        # Without stopOnError every call runs.
        r = await batch(s, calls, mode="sequence")
        assert [x["status"] for x in r.structured_content["results"]] == ["ok", "ok", "error", "ok"]
    # Started one after the other, in order: each call began after the one before it ended
    # (history has the end time and the duration, in whole milliseconds).
    # History lists the newest first; reversed, equal start times keep the order of writing.
    rows = list(reversed(wait_for(gw, 7)))
    first = sorted(rows, key=lambda h: h["at_ms"] - h["duration_ms"])[:3]
    shown = [(h["at_ms"], h["duration_ms"], h["args"].get("text") or h["tool"]) for h in rows]
    assert [h["args"].get("text") or h["tool"] for h in first] == ["one", "two", "fail"], shown
    for before, after in zip(first, first[1:]):
        assert after["at_ms"] - after["duration_ms"] >= before["at_ms"] - 2, (before, after)


async def test_bad_batches_are_refused_and_bad_calls_fail_alone(gw):
    gw.add_app("com.example.stdio")
    gw.config(batch={"maxCalls": 5})
    ok = {"app": "com.example.stdio", "tool": "echo", "args": {"text": "x"}}
    async with gw.session() as s:
        for args, field in [({"calls": []}, "/calls"), ({"calls": [ok] * 6}, "/calls"),
                            ({"calls": "nope"}, "/calls"), ({}, "/calls"),
                            ({"calls": [ok], "mode": "sideways"}, "/mode")]:
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_batch", args)
            assert e.value.error.data["type"] == "INVALID_PARAMS", args
            assert e.value.error.data["field"] == field, args
        assert "at most 5" in (await _detail(s, {"calls": [ok] * 6}))
        r = await batch(s, [ok, {"app": "com.example.stdio"}, 7, {"app": "com.example.stdio", "tool": "echo",
                                                                     "args": [1]},
                            {"app": "com.example.stdio", "tool": "echo", "args": {"text": 5}}])
        items = r.structured_content["results"]
        assert [x["status"] for x in items] == ["ok", "error", "error", "error", "error"]
        assert [x["error"]["data"].get("field") for x in items[1:4]] == ["/calls/1/tool", "/calls/2", "/calls/3/args"]
        assert items[4]["error"]["data"]["type"] == "INVALID_PARAMS", "each call's arguments are validated"


async def _detail(s, args):
    with pytest.raises(MCPError) as e:
        await s.call_tool("aai_batch", args)
    return e.value.error.data["detail"]


async def test_each_call_asks_for_consent_on_its_own(gw):
    gw.add_app("com.example.stdio")
    gw.config(consent={"mode": "prompt"})
    asked = []
    elicit = deciding({"`fail`": "deny", "`echo`": "once"}, asked)
    calls = [{"app": "com.example.stdio", "tool": "echo", "args": {"text": "a"}},
             {"app": "com.example.stdio", "tool": "fail", "args": {}}]
    async with gw.session(elicitation=elicit) as s:
        r = await batch(s, calls, mode="sequence")
    items = r.structured_content["results"]
    assert items[0]["status"] == "ok"
    assert items[1]["error"]["data"]["type"] == "PERMISSION_DENIED"
    assert len(asked) == 2


async def test_a_cancelled_batch_stops_its_unfinished_calls(gw, tmp_path):
    gw.add_app("com.example.stdio")
    calls = [{"app": "com.example.stdio", "tool": "sleep", "args": {"seconds": 30}}] * 12
    async with gw.session() as s:
        with anyio.move_on_after(2):
            await batch(s, calls)
        # The gateway is still responsive, and the sleeping adapters are gone.
        r = await batch(s, [{"app": "com.example.stdio", "tool": "echo", "args": {"text": "after"}}])
        assert r.structured_content["ok"] == 1, r.structured_content
    sleeps = [h for h in wait_for(gw, 9) if h["tool"] == "sleep"]
    assert len(sleeps) == 8, "the first 8 (batch.concurrency) started; the rest never did"
    assert all(h["status"] == "error" for h in sleeps)


async def test_a_batchs_results_are_capped_in_all(gw):
    from conftest import tool
    gw.add_app("com.example.big", tools=[tool("big", {"mib": {"type": "integer"}})])
    async with gw.session() as s:
        calls = [{"app": "com.example.big", "tool": "big", "args": {"mib": 6}} for _ in range(5)]
        r = await batch(s, calls, mode="sequence")
    results = r.structured_content["results"]
    assert [x["status"] for x in results] == ["ok"] * 5, "every call ran"
    assert [bool(x.get("cut")) for x in results] == [False, False, True, True, True]
    assert "result" not in results[2] and "16 MiB" in results[2]["reason"]
    assert len(json.dumps(r.structured_content)) < 17 * 1024 * 1024
