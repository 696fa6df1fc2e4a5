"""The Windows COM executor through its command boundary: with AAI_HOST_OS=windows and a
recording `powershell.exe` on PATH, the example Outlook action list becomes one PowerShell
script that holds no argument value (values arrive as JSON on stdin), HRESULTs map to the
codes of docs/design.md, Errors, and a busy app is retried.

Nothing here ran on real Windows (docs/windows.md).

Run: python3 -m pytest tests/mcp -q -k windows
"""
import base64
import json
from pathlib import Path

import pytest

from fakes import Fakes, install

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

@pytest.fixture
def win(gw, tmp_path):
    fakes = Fakes(tmp_path / "fakebin", "powershell.exe")
    install(gw, "d0-mail.json", "com.apple.mail")
    gw.config()

    class Win:
        env = {"AAI_HOST_OS": "windows", **fakes.env}
        calls = staticmethod(fakes.calls)
        replies = staticmethod(fakes.reply)

    return Win


SEND = {"app": "com.apple.mail", "tool": "send_email"}
HOSTILE = "'; Remove-Item -Recurse -Force ~; '$(calc)` \"@'\n"


async def test_the_spec_outlook_action_list_runs_with_values_as_data(gw, win):
    win.replies({"stdout": '"{\\"success\\":true, \\"message_id\\":\\"generated\\"}"'})
    args = {"to": "bob@example.com", "subject": HOSTILE, "body": "Hi"}
    async with gw.session(**win.env) as s:
        r = await s.call_tool("aai_exec", {**SEND, "args": args})
    assert json.loads(r.content[0].text) == {"success": True, "message_id": "generated"}
    [call] = win.calls()
    argv = call["argv"]
    assert argv[:5] == ["-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-EncodedCommand"]
    script = base64.b64decode(argv[5]).decode("utf-16-le")
    assert "$v['app'] = New-Object -ComObject 'Outlook.Application'" in script
    assert "$v['mail'].Subject = $in.values[2]" in script
    assert "Remove-Item" not in script and "bob@example.com" not in script
    values = json.loads(call["stdin"])["values"]
    assert values[:4] == [0, "bob@example.com", HOSTILE, "Hi"]


async def test_hresults_map_to_the_documented_codes(gw, win):
    cases = [
        ("HRESULT 0x80040154: Class not registered", -32006),
        ("HRESULT 0x800401E3: Operation unavailable", -32009),
        ("HRESULT 0x80070005: Access is denied.", -32004),
        ("HRESULT 0x80020009: Exception occurred.", -32001),
    ]
    async with gw.session(**win.env) as s:
        for stderr, code in cases:
            win.replies({"stderr": stderr, "code": 1})
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_exec", {**SEND, "args": {"to": "a", "subject": "b", "body": "c"}})
            assert e.value.error.code == code, (stderr, e.value.error)
            assert len(win.calls()) == 1, "not retried"


async def test_a_busy_app_is_retried_with_backoff(gw, win):
    busy = {"stderr": "HRESULT 0x8001010A: The message filter indicated that the application is busy.", "code": 1}
    async with gw.session(**win.env) as s:
        win.replies(busy, busy, {"stdout": '"sent"'})
        r = await s.call_tool("aai_exec", {**SEND, "args": {"to": "a", "subject": "b", "body": "c"}})
        assert r.content[0].text == "sent"
        assert len(win.calls()) == 3
        win.replies(busy)
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {**SEND, "args": {"to": "a", "subject": "b", "body": "c"}})
        assert e.value.error.code == -32016
        assert len(win.calls()) == 4, "four attempts, then the busy error"


async def test_bad_com_names_refuse_the_descriptor(gw, tmp_path):
    doc = json.loads((ROOT / "fixtures" / "valid" / "d0-mail.json").read_text())
    doc["platforms"]["windows"]["tools"][0]["script"][3]["property"] = "Subject; Remove-Item ~"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    p = gw.run("validate", str(path))
    assert p.returncode == 1
    assert "is not a valid COM name" in p.stdout + p.stderr


async def test_the_d2_com_example_calls_execute_with_the_envelope(gw, tmp_path):
    install(gw, "d2-example-com.json", "com.example.app")
    gw.config()
    fakes = Fakes(tmp_path / "bin2", "powershell.exe")
    fakes.reply({"stdout": json.dumps(json.dumps({"status": "success", "result": {"items": ["a"]}}))})
    async with gw.session(AAI_HOST_OS="windows", **fakes.env) as s:
        r = await s.call_tool("aai_exec", {"app": "com.example.app", "tool": "search",
                                           "args": {"query": HOSTILE}})
    assert json.loads(r.content[0].text) == {"items": ["a"]}
    [call] = fakes.calls()
    script = base64.b64decode(call["argv"][5]).decode("utf-16-le")
    assert "New-Object -ComObject 'Example.Application'" in script and "Remove-Item" not in script
    envelope = json.loads(json.loads(call["stdin"])["envelope"])
    assert envelope["tool"] == "search" and envelope["params"] == {"query": HOSTILE, "limit": 10}
