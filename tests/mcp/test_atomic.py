"""Atomic runs and batches: a tool names its undo in the descriptor (`undo`), and when a
later step fails the completed steps are undone, newest first, each undo a call through
the pipeline. Checked in the peers' own state: a ledger kept by a stdio adapter, and
dunst (org.freedesktop.Notifications) through the built-in app. The calls of a run or a
batch carry its id in history, and its first consent question shows the script.

Run: python3 -m pytest tests/mcp -q -k atomic
"""
import json
import time

import pytest

from conftest import STANDARD_TOOLS, deciding, tool
from test_desktop import desktop, until  # noqa: F401  (desktop is a fixture)
from test_history import calls, wait_for

anyio = pytest.importorskip("anyio")
MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

LEDGER_TOOLS = [
    tool("add", {"text": {"type": "string"}}, ["text"],
         undo={"tool": "remove", "args": {"id": "/result/id"}}),
    tool("remove", {"id": {"type": "integer"}}, ["id"]),
    tool("entries", readOnly=True),
    *[t for t in STANDARD_TOOLS if t["name"] in ("echo", "fail")],
]


def ledger(gw, tmp_path, app_id="com.example.ledger"):
    path = tmp_path / f"{app_id}.json"
    gw.add_app(app_id, tools=LEDGER_TOOLS, env={"AAI_LEDGER": str(path)})
    return lambda: json.loads(path.read_text()) if path.exists() else []


async def test_an_atomic_run_whose_third_step_fails_undoes_the_first_two(gw, desktop, tmp_path):
    desktop.start(["dunst"], "org.freedesktop.Notifications")
    entries = ledger(gw, tmp_path)
    script = """
    const entry = await call("com.example.ledger", "add", {text: "groceries"});
    const id = await call("org.freedesktop.Notifications", "notify", {summary: "Added " + entry.text});
    console.log("notification", id);
    await call("com.example.ledger", "entries", {});
    await call("com.example.ledger", "fail", {message: "the third step broke"});
    return "not reached";
    """
    async with gw.session(client_name="atomic-runner") as s:
        # The same script, not atomic: its steps stay done.
        r = await s.call_tool("aai_run", {"script": script})
        out = r.structured_content
        assert r.is_error and "the third step broke" in out["error"]["message"], out
        assert "undone" not in out
        assert [e["text"] for e in entries()] == ["groceries"]
        await until(lambda: desktop.run("dunstctl", "count", "displayed") == "1")
        desktop.run("dunstctl", "close-all")
        await until(lambda: desktop.run("dunstctl", "count", "displayed") == "0")
        (tmp_path / "com.example.ledger.json").unlink()

        r = await s.call_tool("aai_run", {"script": script, "atomic": True})
        out = r.structured_content
    assert r.is_error and "the third step broke" in out["error"]["message"], out
    assert [(c["tool"], c["status"]) for c in out["calls"]] == [
        ("add", "ok"), ("notify", "ok"), ("entries", "ok"), ("fail", "error")]
    # Newest first; the read-only step needs no undo and is not listed.
    assert [(u["index"], u["tool"], u["status"], u.get("undo")) for u in out["undone"]] == [
        (1, "notify", "undone", "close"), (0, "add", "undone", "remove")], out["undone"]
    # Checked in the peers' own state.
    assert entries() == []
    await until(lambda: desktop.run("dunstctl", "count", "displayed") == "0")
    # The run's calls and its undos are recorded under its id.
    run_id = out["run"]
    assert run_id.startswith("run-")
    rows = wait_for(gw, 6, "--run", run_id)
    assert [(h["tool"], h["status"]) for h in reversed(rows)] == [
        ("add", "ok"), ("notify", "ok"), ("entries", "ok"), ("fail", "error"), ("close", "ok"), ("remove", "ok")]
    assert all(h["run"] == run_id and h["caller"] == "atomic-runner@stdio" for h in rows)
    assert len(calls(gw)) == 6 + 4, "the first run's calls carry another id"


async def test_an_atomic_batch_undoes_what_it_can_and_names_what_it_cannot(gw, tmp_path):
    entries = ledger(gw, tmp_path)
    gw.config(consent={"mode": "prompt"})
    asked = []
    elicit = deciding({"": "tool"}, asked)
    batch = {"atomic": True, "calls": [
        {"app": "com.example.ledger", "tool": "add", "args": {"text": "a"}},
        {"app": "com.example.ledger", "tool": "echo", "args": {"text": "said"}},
        {"app": "com.example.ledger", "tool": "add", "args": {"text": "b"}},
        {"app": "com.example.ledger", "tool": "fail", "args": {}},
        {"app": "com.example.ledger", "tool": "add", "args": {"text": "never"}},
    ]}
    async with gw.session(elicitation=elicit) as s:
        r = await s.call_tool("aai_batch", batch)
        out = r.structured_content
        assert [x["status"] for x in out["results"]] == ["ok", "ok", "ok", "error", "skipped"]
        assert [(u["index"], u["tool"], u["status"]) for u in out["undone"]] == [
            (2, "add", "undone"), (1, "echo", "not undoable"), (0, "add", "undone")], out["undone"]
        assert out["undone"][1]["error"] == "the tool names no undo"
        assert "Atomic, and not every call succeeded" in r.content[0].text
        assert entries() == []
        # Before anything ran, the first question named the steps that cannot be undone.
        assert "steps of this atomic batch that cannot be undone: com.example.ledger echo, " \
               "com.example.ledger fail" in asked[0], asked[0]
        assert "part of batch batch-" in asked[0]
        assert "this tool has no undo" in next(q for q in asked if "`echo`" in q)

        # An atomic batch runs in sequence: asking for parallel is refused before anything runs.
        with pytest.raises(MCPError, match="runs in sequence"):
            await s.call_tool("aai_batch", {**batch, "mode": "parallel"})
        # All succeed: nothing is undone.
        r = await s.call_tool("aai_batch", {"atomic": True, "calls": batch["calls"][:3]})
        assert "undone" not in r.structured_content and r.structured_content["ok"] == 3
    assert [e["text"] for e in entries()] == ["a", "b"]


async def test_an_undo_that_fails_is_reported_and_the_others_still_run(gw, tmp_path):
    entries = ledger(gw, tmp_path)
    script = """
    await call("com.example.ledger", "add", {text: "kept"});
    const b = await call("com.example.ledger", "add", {text: "gone"});
    await call("com.example.ledger", "remove", {id: b.id});
    throw new Error("stop here");
    """
    async with gw.session() as s:
        r = await s.call_tool("aai_run", {"script": script, "atomic": True})
    out = r.structured_content
    assert out["error"]["message"].endswith("stop here")
    # `remove` names no undo; undoing the second `add` fails (its entry is gone); the first is undone.
    assert [(u["tool"], u["status"]) for u in out["undone"]] == [
        ("remove", "not undoable"), ("add", "failed"), ("add", "undone")], out["undone"]
    assert "no entry 2" in out["undone"][1]["error"]["message"]
    assert entries() == []


async def test_the_first_question_of_a_run_shows_its_script_and_the_others_refer_to_it(gw, tmp_path):
    ledger(gw, tmp_path)
    gw.config(consent={"mode": "prompt"})
    asked = []
    elicit = deciding({"": "once"}, asked)
    script = """
    // MARKER-7f3a: the script as the user sees it
    await call("com.example.ledger", "add", {text: "x"});
    await call("com.example.ledger", "echo", {text: "y"});
    return "done";
    """
    async with gw.session(client_name="scripter", elicitation=elicit) as s:
        r = await s.call_tool("aai_run", {"script": script})
    assert not r.is_error, r.structured_content
    assert len(asked) == 2, asked
    assert "scripter" in asked[0] and "MARKER-7f3a" in asked[0] and "part of script run run-" in asked[0]
    assert "MARKER-7f3a" not in asked[1] and "its script was shown with its first question" in asked[1]
    run_id = r.structured_content["run"]
    assert run_id in asked[0] and run_id in asked[1]


def test_a_client_gone_without_a_cancel_still_gets_its_rollback(gw, tmp_path):
    """The client's input ends mid-run without `notifications/cancelled` (a client killed,
    a pipe closed): the run is cancelled when its request goes, its completed calls are
    undone, and the process exits only after that, with the undos in history."""
    import subprocess
    entries = ledger(gw, tmp_path)
    p = subprocess.Popen([str(gw.binary), "--home", str(gw.home)], env=gw.env(), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def send(message):
        p.stdin.write((json.dumps(message) + "\n").encode())
        p.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "gone", "version": "1"}}})
    assert json.loads(p.stdout.readline())["id"] == 1
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    script = """
    for (const t of ["a", "b", "c"]) await call("com.example.ledger", "add", {text: t});
    await call("com.example.ledger", "echo", {text: "slow", delay: 30});
    """
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": "aai_run", "arguments": {"script": script, "atomic": True}}})
    deadline = time.monotonic() + 15
    while len(entries()) < 3:
        assert time.monotonic() < deadline, entries()
        time.sleep(0.05)
    p.stdin.close()
    assert p.wait(timeout=40) == 0
    assert entries() == [], "the three adds were undone before the process ended"
    rows = calls(gw)
    undos = [h for h in rows if h["tool"] == "remove"]
    assert len(undos) == 3 and all(h["status"] == "ok" and h["run"].startswith("run-") for h in undos), rows


async def test_a_rollback_has_its_own_bound_and_the_undos_past_it_are_reported(gw, tmp_path):
    """Undos that hang cannot hold a run forever: together they get `undo.timeoutMs`; the one
    running then is cancelled, and the rest are reported as not undone, with the limit."""
    hanging = [
        tool("add", {"text": {"type": "string"}}, ["text"],
             undo={"tool": "sleep", "args": {"seconds": {"value": 20}}}),
        *[t for t in STANDARD_TOOLS if t["name"] in ("sleep",)],
    ]
    gw.add_app("com.example.ledger", tools=hanging, env={"AAI_LEDGER": str(tmp_path / "l.json")})
    gw.config(undo={"timeoutMs": 1000})
    script = """
    for (const t of ["a", "b", "c"]) await call("com.example.ledger", "add", {text: t});
    throw new Error("stop here");
    """
    async with gw.session() as s:
        started = time.monotonic()
        r = await s.call_tool("aai_run", {"script": script, "atomic": True})
        took = time.monotonic() - started
    out = r.structured_content
    assert took < 12, f"the rollback took {took:.1f} s"
    assert [(u["index"], u["status"], u["error"]["code"]) for u in out["undone"]] == [
        (2, "failed", "TIMEOUT"), (1, "failed", "TIMEOUT"), (0, "failed", "TIMEOUT")], out["undone"]
    assert "undo.timeoutMs" in out["undone"][2]["error"]["message"]


async def test_the_call_a_run_was_stopped_in_is_reported_and_nothing_to_undo_says_so(gw, tmp_path):
    entries = ledger(gw, tmp_path)
    gw.config(run={"timeoutMs": 1500})
    script = """
    await call("com.example.ledger", "add", {text: "a"});
    await call("com.example.ledger", "echo", {text: "slow", delay: 20});
    """
    async with gw.session() as s:
        r = await s.call_tool("aai_run", {"script": script, "atomic": True})
        out = r.structured_content
        assert out["error"]["code"] == "TIMEOUT", out
        assert [(u["index"], u["tool"], u["status"]) for u in out["undone"]] == [
            (1, "echo", "not undoable"), (0, "add", "undone")], out["undone"]
        assert "stopped mid-call" in out["undone"][0]["error"]
        assert entries() == []
        # A run that fails before any call changes something has nothing to undo, and says so.
        r = await s.call_tool("aai_run", {"script": "throw new Error('at once')", "atomic": True})
        assert r.structured_content["undone"] == []
        assert "Atomic: nothing to undo" in r.content[0].text, r.content[0].text


async def test_an_undo_is_asked_about_as_an_undo(gw, tmp_path):
    entries = ledger(gw, tmp_path)
    gw.config(consent={"mode": "prompt"})
    asked = []
    elicit = deciding({"": "once"}, asked)
    script = """
    await call("com.example.ledger", "add", {text: "x"});
    throw new Error("undo it");
    """
    async with gw.session(elicitation=elicit) as s:
        r = await s.call_tool("aai_run", {"script": script, "atomic": True})
    assert r.structured_content["undone"][0]["status"] == "undone"
    assert len(asked) == 2, asked
    assert "an undo: script run " + r.structured_content["run"] in asked[1], asked[1]
    assert "if you deny it, that step stays done" in asked[1] and "undo it" not in asked[1]
    assert entries() == []


async def test_an_atomic_batch_with_an_unreadable_call_runs_nothing(gw, tmp_path):
    entries = ledger(gw, tmp_path)
    async with gw.session() as s:
        with pytest.raises(MCPError, match="call 1 cannot be read, so this atomic batch runs none"):
            await s.call_tool("aai_batch", {"atomic": True, "calls": [
                {"app": "com.example.ledger", "tool": "add", "args": {"text": "a"}},
                {"app": 5, "tool": "add"},
            ]})
    assert entries() == []
