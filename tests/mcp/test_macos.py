"""The macOS script executors through their command boundary: with AAI_HOST_OS=macos and a
recording `osascript` on PATH, the example Mail descriptor runs exactly the script its
template means, hostile values stay data, results and error numbers are read.

Nothing here ran on a real Mac (see docs/macos.md for the ten-minute checklist).

Run: python3 -m pytest tests/mcp -q -k macos
"""
import json
from pathlib import Path

import pytest

from fakes import Fakes, install

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

@pytest.fixture
def mac(gw, tmp_path):
    """A gateway that acts as on macOS, with the example Mail descriptor and a fake osascript."""
    fakes = Fakes(tmp_path / "fakebin", "osascript")
    install(gw, "d0-mail.json", "com.apple.mail")
    gw.config()

    class Mac:
        env = {"AAI_HOST_OS": "macos", **fakes.env}
        calls = staticmethod(fakes.calls)

        @staticmethod
        def reply(stdout="", stderr="", code=0):
            fakes.reply({"stdout": stdout, "stderr": stderr, "code": code})

    return Mac


SEND = """tell application "Mail"
  set newMessage to make new outgoing message with properties {{subject:"{subject}", content:"{body}", visible:false}}
  tell newMessage
    make new to recipient at beginning of to recipients with properties {{address:"{to}"}}
    send
  end tell
end tell
return "{{\\"success\\":true, \\"message_id\\":\\"generated\\"}}\""""


async def test_the_spec_mail_example_runs_the_script_its_template_means(gw, mac):
    mac.reply(stdout='{"success":true, "message_id":"generated"}\n')
    args = {"to": "bob@example.com", "subject": 'Q3 "final" report', "body": "Hi Bob,\nsee attached."}
    async with gw.session(**mac.env) as s:
        r = await s.call_tool("aai_exec", {"app": "com.apple.mail", "tool": "send_email", "args": args})
    assert json.loads(r.content[0].text) == {"success": True, "message_id": "generated"}
    [call] = mac.calls()
    assert call["argv"] == ["-l", "AppleScript", "-s", "h"]
    assert call["stdin"] == SEND.format(to="bob@example.com", subject='Q3 \\"final\\" report',
                                        body="Hi Bob,\nsee attached.")


async def test_hostile_values_stay_inside_their_literals(gw, mac):
    mac.reply(stdout="ok\n")
    subject = '"; do shell script "rm -rf ~'
    body = "“x” \\\" (* end *) -- «event» \u2028 nul\u0000"
    async with gw.session(**mac.env) as s:
        await s.call_tool("aai_exec", {"app": "com.apple.mail", "tool": "send_email",
                                       "args": {"to": "a@b.c", "subject": subject, "body": body}})
    [call] = mac.calls()
    script = call["stdin"]
    assert 'subject:"\\"; do shell script \\"rm -rf ~"' in script
    assert ('content:"" & (character id 8220) & "x" & (character id 8221) & " \\\\\\" (* end *) -- «event» '
            '" & (character id 8232) & " nul" & (character id 0) & ""') in script
    assert "\u0000" not in script and "\u2028" not in script


async def test_error_numbers_map_to_the_documented_codes(gw, mac):
    cases = [
        ("25:31: execution error: Not authorized to send Apple events to Mail. (-1743)", -32004),
        ("execution error: Mail got an error: Application isn’t running. (-600)", -32009),
        ("0:5: syntax error: Expected end of line but found identifier. (-2741)", -32010),
        ("execution error: Mail got an error: AppleEvent timed out. (-1712)", -32008),
        ("execution error: Something else. (-1728)", -32001),
    ]
    async with gw.session(**mac.env) as s:
        for stderr, code in cases:
            mac.reply(stderr=stderr + "\n", code=1)
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_exec", {"app": "com.apple.mail", "tool": "search_emails",
                                               "args": {"query": "x"}})
            assert e.value.error.code == code, (stderr, e.value.error)
            if code == -32004:
                assert "Privacy & Security › Automation" in e.value.error.data["detail"]


async def test_a_placeholder_in_code_refuses_the_descriptor(gw, tmp_path):
    doc = json.loads((ROOT / "fixtures" / "valid" / "d0-mail.json").read_text())
    doc["platforms"]["macos"]["tools"][1]["script"] = 'tell application "Mail" to get (messages whose subject contains ${query})'
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    p = gw.run("validate", str(path))
    assert p.returncode == 1
    assert "placeholder `${query}` is outside a string literal" in p.stdout + p.stderr


async def test_scan_on_macos_serves_mail_through_applescript(gw, mac):
    import subprocess
    out = subprocess.run([str(gw.binary), "--home", str(gw.home), "--scan", "--json"],
                         env=gw.env(**mac.env), capture_output=True, text=True, timeout=30)
    apps = {a["id"]: a for a in json.loads(out.stdout)["apps"]}
    assert "com.apple.mail" in apps, out.stdout[:500]
    assert "applescript" in json.dumps(apps["com.apple.mail"])


async def test_the_reminders_apple_event_carries_the_envelope(gw, mac):
    install(gw, "d2-reminders-macos.json", "com.example.reminders")
    mac.reply(stdout='{"version":"1.0","request_id":"x","status":"success","result":{"id":"r-1"}}\n')
    title = 'Buy milk" » end tell\ndo shell script "id'
    async with gw.session(**mac.env) as s:
        r = await s.call_tool("aai_exec", {"app": "com.example.reminders", "tool": "createReminder",
                                           "args": {"title": title, "priority": "high"}})
        assert json.loads(r.content[0].text) == {"id": "r-1"}
        call = mac.calls()[0]
        # An error envelope from the app is its error.
        mac.reply(stdout='{"status":"error","error":{"code":"INVALID_PARAMS","message":"no list"}}\n')
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.reminders", "tool": "createReminder",
                                           "args": {"title": "x"}})
        assert e.value.error.code == -32005
    assert call["argv"] == ["-l", "AppleScript", "-s", "h"]
    script = call["stdin"]
    prefix = 'tell application id "com.example.reminders" to return «event AAI call» "'
    assert script.startswith(prefix) and script.endswith('"')
    literal = script[len(prefix):-1]
    # Undo the AppleScript escaping: what arrives is exactly the JSON envelope.
    sent = json.loads(literal.replace('\\"', '"').replace("\\\\", "\\"))
    assert sent["tool"] == "createReminder" and sent["params"] == {"title": title, "priority": "high"}
    assert sent["version"] == "1.0" and sent["request_id"]
    assert '"' not in literal.replace('\\"', "")


async def test_built_in_reminders_apply_where_the_app_exists(gw, tmp_path):
    """The built-in Reminders app (AppleScript returning a record) appears only when
    Reminders.app exists, and its record result becomes JSON."""
    import subprocess
    fakes = Fakes(tmp_path / "fakebin2", "osascript")
    fakes.reply({"stdout": '{id:"x-apple-reminder://1", name:"Buy \\"milk\\""}\n'})
    gw.config()
    env = {"AAI_HOST_OS": "macos", **fakes.env}
    scan = lambda: json.loads(subprocess.run([str(gw.binary), "--home", str(gw.home), "--scan", "--json"],
                                             env=gw.env(**env), capture_output=True, text=True, timeout=30).stdout)
    assert "com.apple.reminders" not in {a["id"] for a in scan()["apps"]}
    (gw.tmp / "root" / "System" / "Applications" / "Reminders.app").mkdir(parents=True)
    assert "com.apple.reminders" in {a["id"] for a in scan()["apps"]}
    async with gw.session(**env) as s:
        r = await s.call_tool("aai_exec", {"app": "com.apple.reminders", "tool": "add_reminder",
                                           "args": {"title": 'Buy "milk"'}})
    assert json.loads(r.content[0].text) == {"id": "x-apple-reminder://1", "name": 'Buy "milk"'}
    [call] = fakes.calls()
    assert call["argv"] == ["-l", "AppleScript", "-s", "s"]
    assert 'with properties {name:"Buy \\"milk\\"", body:""}' in call["stdin"]


SDEF = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE dictionary SYSTEM "file://localhost/System/Library/DTDs/sdef.dtd">
<dictionary title="Sketchpad Terminology">
  <suite name="Standard Suite" code="????"><command name="close" code="coreclos"/></suite>
  <suite name="Sketchpad Suite" code="SKPD">
    <command name="new sketch" code="SKPDnews" description="Start a sketch">
      <parameter name="titled" code="Titl" type="text" description="Its title"/>
    </command>
    <command name="export sketch" code="SKPDexpo"><direct-parameter type="document"/></command>
  </suite>
</dictionary>
"""


def bundle(root, name, bundle_id, binary=False, sdef=SDEF, key=True):
    import plistlib
    contents = root / f"{name}.app" / "Contents"
    (contents / "Resources").mkdir(parents=True)
    info = {"CFBundleIdentifier": bundle_id, "CFBundleName": name}
    if key:
        info["OSAScriptingDefinition"] = f"{name}.sdef"
    (contents / "Info.plist").write_bytes(plistlib.dumps(info, fmt=plistlib.FMT_BINARY if binary else plistlib.FMT_XML))
    if sdef is not None:
        (contents / "Resources" / f"{name}.sdef").write_text(sdef)


async def test_discover_on_macos_drafts_scriptable_apps(gw):
    import subprocess
    apps = gw.tmp / "root" / "Applications"
    bundle(apps, "Sketchpad", "com.example.sketchpad")
    bundle(apps, "Binary", "com.example.binary", binary=True, key=False)
    bundle(apps, "Plain", "com.example.plain", sdef=None)
    bundle(apps, "Escape", "..")
    bundle(apps, "Mail", "com.apple.mail")
    bundle(gw.tmp / "Applications", "Mine", "com.example.mine")

    def discover(*extra):
        return subprocess.run([str(gw.binary), "--home", str(gw.home), "--discover", *extra],
                              env=gw.env(AAI_HOST_OS="macos"), capture_output=True, text=True, timeout=60)

    p = discover("--json")
    assert p.returncode == 0, p.stderr
    plans = {a["app"]: a["plan"] for a in json.loads(p.stdout)["apps"]}
    assert plans == {"com.example.sketchpad": "new", "com.example.binary": "new", "..": "invalid",
                     "com.apple.mail": "builtin", "com.example.mine": "new"}, plans
    p = discover("--yes")
    assert p.returncode == 0, p.stderr
    written = gw.home / "com.example.sketchpad" / "aai.json"
    doc = json.loads(written.read_text())
    [tool] = doc["platforms"]["macos"]["tools"]
    assert tool["script"] == 'tell application id "com.example.sketchpad" to new sketch titled "${titled}"'
    assert gw.run("validate", str(written)).returncode == 0
    assert not (gw.home / ".." / "aai.json").exists() and not (gw.tmp / "aai.json").exists()
    # A second run changes nothing; an edited draft is kept.
    written.write_text(written.read_text().replace("Start a sketch", "Start a sketch (mine)"))
    plans = {a["app"]: a["plan"] for a in json.loads(discover("--json").stdout)["apps"]}
    assert plans["com.example.binary"] == "unchanged" and plans["com.example.sketchpad"] == "edited"


async def test_an_apple_event_to_a_stopped_app_launches_it_once(gw, tmp_path):
    install(gw, "d2-reminders-macos.json", "com.example.reminders")
    gw.config()
    fakes = Fakes(tmp_path / "bin3", "osascript")
    not_running = {"stderr": "execution error: Reminders got an error: Application isn’t running. (-600)\n", "code": 1}
    reply = {"stdout": '{"status":"success","result":{"id":"r-2"}}\n'}
    fakes.reply(not_running, {"stdout": ""}, reply)
    env = {"AAI_HOST_OS": "macos", **fakes.env}
    async with gw.session(**env) as s:
        r = await s.call_tool("aai_exec", {"app": "com.example.reminders", "tool": "createReminder",
                                           "args": {"title": "x"}})
        assert json.loads(r.content[0].text) == {"id": "r-2"}
        sent, launch, again = fakes.calls()
        assert launch["stdin"] == 'tell application id "com.example.reminders" to launch'
        assert again["stdin"] == sent["stdin"]
        # Still not running after the launch: APP_NOT_RUNNING, and no third attempt.
        fakes.reply(not_running, {"stdout": ""}, not_running)
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.reminders", "tool": "createReminder",
                                           "args": {"title": "x"}})
        assert e.value.error.code == -32009
        assert len(fakes.calls()) == 3


async def test_the_d1_ipc_reminders_example_is_an_apple_event(gw, mac):
    install(gw, "d1-reminders-macos.json", "com.example.reminders")
    mac.reply(stdout='{"status":"success","result":[]}\n')
    async with gw.session(**mac.env) as s:
        r = await s.call_tool("aai_exec", {"app": "com.example.reminders", "tool": "list_reminders", "args": {}})
    assert json.loads(r.content[0].text) == []
    [call] = mac.calls()
    assert call["stdin"].startswith('tell application id "com.example.reminders" to return «event AAI call» "')
