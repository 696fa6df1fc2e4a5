"""Android intents and iOS URL schemes through their command boundary: recording `adb`
and `xcrun` fakes on PATH (the seed's Mail descriptor's android and ios parts) assert the
exact argv, replay canned output, and show that hostile values stay data.

Nothing here ran against a real device or Simulator.

Run: python3 -m pytest tests/mcp -q -k mobile
"""
import json
import os
import sys
from pathlib import Path

import pytest

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

FAKE = """#!{python}
# A recording stand-in for {name}: appends argv to calls.jsonl; answers from replies.json,
# a list of [argv prefix, stdout, stderr, code] (the first whose prefix matches).
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
argv = sys.argv[1:]
with open(os.path.join(here, "calls.jsonl"), "a") as f:
    f.write(json.dumps({{"program": "{name}", "argv": argv}}) + "\\n")
state = os.path.join(here, "state.json")
for prefix, out, err, code in json.load(open(os.path.join(here, "replies.json"))):
    if argv[:len(prefix)] == prefix:
        if out.startswith("@sequence:"):
            seq = json.loads(out[len("@sequence:"):])
            n = json.load(open(state)) if os.path.exists(state) else 0
            json.dump(n + 1, open(state, "w"))
            out = seq[min(n, len(seq) - 1)]
        sys.stdout.write(out); sys.stderr.write(err); sys.exit(code)
sys.exit(0)
"""


def mail_part(platform):
    doc = json.loads((ROOT / "fixtures" / "valid" / "d0-mail.json").read_text())
    doc["platforms"] = {platform: doc["platforms"][platform]}
    return doc


@pytest.fixture
def fakes(gw, tmp_path):
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    for name in ["adb", "xcrun"]:
        path = bindir / name
        path.write_text(FAKE.format(python=sys.executable, name=name))
        path.chmod(0o755)
    gw.config()

    class Fakes:
        env = {"PATH": f"{bindir}:{os.environ['PATH']}"}

        @staticmethod
        def replies(*rows):
            (bindir / "replies.json").write_text(json.dumps(list(rows)))
            (bindir / "calls.jsonl").unlink(missing_ok=True)
            (bindir / "state.json").unlink(missing_ok=True)

        @staticmethod
        def calls():
            path = bindir / "calls.jsonl"
            return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    return Fakes


HOSTILE = "x'; reboot; echo '$(id)`id`\"&|;\n"


async def test_the_seed_android_intent_runs_with_quoted_extras(gw, fakes):
    gw.put("com.apple.mail", mail_part("android"))
    fakes.replies([["-s", "emulator-5554", "shell", "am"], "Broadcasting: Intent\nBroadcast completed: result=0\n", "", 0],
                  [["-s", "emulator-5554", "shell", "content"], "Row: 0 id=7, status=sent, note=a, b\n", "", 0])
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
    fakes.replies([["shell"], "", "adb: no devices/emulators found\n", 1])
    async with gw.session(**fakes.env) as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.apple.mail", "tool": "send_email",
                                           "args": {"to": "a", "subject": "b", "body": "c"}})
    assert e.value.error.code == -32009
    assert fakes.calls()[0]["argv"][0] == "shell", "no -s without ANDROID_SERIAL"


async def test_the_seed_ios_url_is_percent_encoded_and_its_result_read(gw, fakes, tmp_path):
    gw.put("com.apple.mail", mail_part("ios"))
    group = tmp_path / "group"
    group.mkdir()
    (group / "aai-result.json").write_text('{"old": true}')
    fakes.replies([["simctl", "get_app_container"], str(group) + "\n", "", 0],
                  [["simctl", "openurl"], "", "", 0])
    import anyio

    async def app_writes_result():
        await anyio.sleep(0.5)
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
