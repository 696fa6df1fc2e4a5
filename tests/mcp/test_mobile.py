"""Android intents and iOS URL schemes through their command boundary: recording `adb`
and `xcrun` fakes on PATH (the example Mail descriptor's android and ios parts) assert the
exact argv, replay canned output, and show that hostile values stay data.

Nothing here ran against a real device or Simulator.

Run: python3 -m pytest tests/mcp -q -k mobile
"""
import json
from pathlib import Path

import pytest

from fakes import Fakes

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

def mail_part(platform):
    doc = json.loads((ROOT / "fixtures" / "valid" / "d0-mail.json").read_text())
    doc["platforms"] = {platform: doc["platforms"][platform]}
    return doc


@pytest.fixture
def fakes(gw, tmp_path):
    gw.config()
    return Fakes(tmp_path / "fakebin", "adb", "xcrun")


HOSTILE = "x'; reboot; echo '$(id)`id`\"&|;\n"


async def test_the_spec_android_intent_runs_with_quoted_extras(gw, fakes):
    gw.put("com.apple.mail", mail_part("android"))
    fakes.reply({"prefix": ["-s", "emulator-5554", "shell", "am"],
                 "stdout": "Broadcasting: Intent\nBroadcast completed: result=0\n"},
                {"prefix": ["-s", "emulator-5554", "shell", "content"],
                 "stdout": "Row: 0 id=7, status=sent, note=a, b\n"})
    async with gw.session(ANDROID_SERIAL="emulator-5554", **fakes.env) as s:
        r = await s.call_tool("aai_exec", {"app": "com.apple.mail", "tool": "send_email",
                                           "args": {"to": "bob@example.com", "subject": HOSTILE, "body": "Hi"}})
    assert json.loads(r.content[0].text) == [{"id": "7", "status": "sent", "note": "a, b"}]
    broadcast, query = fakes.calls()
    quoted = "'" + HOSTILE.replace("'", "'\\''") + "'"
    assert broadcast["argv"] == ["-s", "emulator-5554", "shell", "am", "broadcast", "-a", "'com.example.MAIL_SEND'",
                                 "-p", "'com.example.mail'", "--es", "'to'", "'bob@example.com'",
                                 "--es", "'subject'", quoted, "--es", "'body'", "'Hi'"]
    assert query["argv"] == ["-s", "emulator-5554", "shell", "content", "query", "--uri",
                             "'content://com.example.mail/results'"]


async def test_adb_without_a_device_is_app_not_running(gw, fakes):
    gw.put("com.apple.mail", mail_part("android"))
    fakes.reply({"prefix": ["shell"], "stderr": "adb: no devices/emulators found\n", "code": 1})
    async with gw.session(**fakes.env) as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.apple.mail", "tool": "send_email",
                                           "args": {"to": "a", "subject": "b", "body": "c"}})
    assert e.value.error.code == -32009
    assert fakes.calls()[0]["argv"][0] == "shell", "no -s without ANDROID_SERIAL"


async def test_the_spec_ios_url_is_percent_encoded_and_its_result_read(gw, fakes, tmp_path):
    gw.put("com.apple.mail", mail_part("ios"))
    group = tmp_path / "group"
    group.mkdir()
    (group / "aai-result.json").write_text('{"old": true}')
    fakes.reply({"prefix": ["simctl", "get_app_container"], "stdout": str(group) + "\n"},
                {"prefix": ["simctl", "openurl"]})
    import anyio

    async def app_writes_result():
        # The app answers once it was opened: by then the gateway has read what the file
        # held before (a fixed delay could come first on a slow machine).
        with anyio.fail_after(30):
            while not any(c["argv"][:2] == ["simctl", "openurl"] for c in fakes.calls()):
                await anyio.sleep(0.05)
        (group / "aai-result.json").write_text('{"sent": true}')

    async with gw.session(**fakes.env) as s:
        async with anyio.create_task_group() as tg:
            tg.start_soon(app_writes_result)
            r = await s.call_tool("aai_exec", {"app": "com.apple.mail", "tool": "send_email",
                                               "args": {"to": "bob@example.com", "subject": "a&b=c#d", "body": HOSTILE}})
    assert json.loads(r.content[0].text) == {"sent": True}
    opens = [c for c in fakes.calls() if c["argv"][:2] == ["simctl", "openurl"]]
    assert opens[0]["argv"] == ["simctl", "openurl", "booted",
                                "mailapp://send?to=bob%40example.com&subject=a%26b%3Dc%23d&body="
                                "x%27%3B%20reboot%3B%20echo%20%27%24%28id%29%60id%60%22%26%7C%3B%0A"]
    containers = [c for c in fakes.calls() if c["argv"][:2] == ["simctl", "get_app_container"]]
    assert containers[0]["argv"] == ["simctl", "get_app_container", "booted", "com.apple.mail",
                                     "group.com.example.mail"]
