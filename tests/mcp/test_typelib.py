"""COM type libraries → descriptors, end to end: `import typelib` drafts apps from the
widl-compiled libraries in fixtures/typelib (a `.tlb` and the same library as a DLL's
TYPELIB resource), and the drafted tools run through the recording `powershell.exe`
fake with AAI_HOST_OS=windows, every value as data on stdin. `--discover` on Windows asks
PowerShell for the registered automation servers (the fake answers with the fixtures)
and keeps descriptors the user edited unless --force.

Nothing here ran on real Windows (docs/windows.md).

Run: python3 -m pytest tests/mcp/test_typelib.py -q
"""
import base64
import json
from pathlib import Path

import pytest

from fakes import Fakes

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TYPELIBS = ROOT / "fixtures" / "typelib"
HOSTILE = "'; Remove-Item -Recurse -Force ~; '$(calc)` \"@'\n"
ARGS = ["-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-EncodedCommand"]


@pytest.fixture
def win(gw, tmp_path):
    fakes = Fakes(tmp_path / "fakebin", "powershell.exe")
    gw.extra_env = {"AAI_HOST_OS": "windows", **fakes.env}
    return fakes


def script_of(call) -> str:
    assert call["program"] == "powershell.exe"
    assert call["argv"][:5] == ARGS and len(call["argv"]) == 6, call["argv"]
    return base64.b64decode(call["argv"][5]).decode("utf-16-le")


def import_typelib(gw, *args):
    r = gw.run("import", "typelib", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


async def test_an_imported_library_runs_its_methods_with_values_as_data(gw, win):
    out = import_typelib(gw, str(TYPELIBS / "outlook.tlb"), "--progid", "Acme.Application", "--yes")
    [app] = out["apps"]
    assert app["app"] == "local.acme.application" and app["plan"] == "new", app
    assert any("`CreateItem` returns an object" in n for n in app["notes"]), app["notes"]
    assert out["written"] == [str(gw.home / "local.acme.application" / "aai.json")]
    assert win.calls() == [], "importing runs nothing"

    # `call` on the command line: the method with the values, defaults filled in.
    win.reply({"stdout": "true"})
    args = {"To": "bob@example.com", "Subject": HOSTILE, "Body": "Hi"}
    r = gw.run("call", "local.acme.application", "SendMail", json.dumps(args))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) is True
    [call] = win.calls()
    script = script_of(call)
    assert "$v['app'] = New-Object -ComObject 'Acme.Application'\n" in script
    assert ("$last = $v['app'].SendMail($in.values[0], $in.values[1], $in.values[2], "
            "$in.values[3], $in.values[4])\n") in script
    assert "bob@example.com" not in script and "Remove-Item" not in script
    # Cc (an optional VARIANT) left out is null; Importance takes its [defaultvalue].
    assert json.loads(call["stdin"])["values"] == ["bob@example.com", HOSTILE, "Hi", None, 0]

    # Through MCP: a property getter and a method with a DATE and a default string.
    win.reply({"stdout": '"9.6.0"'})
    async with gw.session() as s:
        r = await s.call_tool("aai_exec", {"app": "local.acme.application", "tool": "getVersion"})
        assert r.content[0].text == "9.6.0"
        [call] = win.calls()
        assert "$last = $v['app'].Version\n" in script_of(call)
        win.reply({"stdout": "true"})
        meeting = {"Subject": "Plan", "Start": "2025-05-01T10:00:00Z", "Hours": 1.5}
        await s.call_tool("aai_exec", {"app": "local.acme.application", "tool": "ScheduleMeeting",
                                       "args": meeting})
        [call] = win.calls()
        assert "$v['app'].ScheduleMeeting($in.values[0], $in.values[1], $in.values[2], $in.values[3])" \
            in script_of(call)
        assert json.loads(call["stdin"])["values"] == ["Plan", "2025-05-01T10:00:00Z", 1.5, "Room 1"]


def test_a_dll_with_a_typelib_resource_drafts_the_same_app(gw, tmp_path):
    first = import_typelib(gw, str(TYPELIBS / "outlook.tlb"), "--yes")
    written = (gw.home / "local.acme.application" / "aai.json").read_text()
    again = import_typelib(gw, str(TYPELIBS / "outlook.dll"))
    assert again["apps"][0]["plan"] == "unchanged", again
    assert first["apps"][0]["summary"].replace("outlook.tlb", "outlook.dll") == again["apps"][0]["summary"]
    assert (gw.home / "local.acme.application" / "aai.json").read_text() == written


def test_bad_files_are_clear_errors(gw, tmp_path):
    text = tmp_path / "notes.tlb"
    text.write_text("hello")
    r = gw.run("import", "typelib", str(text))
    assert r.returncode == 2 and "not a type library" in r.stderr, r.stderr
    broken = tmp_path / "broken.tlb"
    broken.write_bytes((TYPELIBS / "outlook.tlb").read_bytes()[:300])
    r = gw.run("import", "typelib", str(broken))
    assert r.returncode == 2 and "broken type library" in r.stderr, r.stderr
    r = gw.run("import", "typelib", str(TYPELIBS / "excel.tlb"), "--progid", "Acme.Nothing")
    assert r.returncode == 2 and "Application, Chart" in r.stderr, r.stderr
    r = gw.run("import", "typelib", str(TYPELIBS / "excel.tlb"), "--progid", "x; calc")
    assert r.returncode == 2 and "is not a ProgID" in r.stderr, r.stderr
    assert not any(gw.home.glob("local.*")), "nothing written"


def test_windows_discover_drafts_the_registered_servers_and_keeps_edits(gw, win):
    listing = [
        {"progId": "AcmeSheets.Application.1", "clsid": "{5A1B0000-0000-4000-8000-00000000B003}",
         "typeLib": str(TYPELIBS / "excel.tlb")},
        {"progId": "AcmeSheets.Application", "clsid": "{5a1b0000-0000-4000-8000-00000000b003}",
         "typeLib": str(TYPELIBS / "excel.tlb")},
        {"progId": "Acme.Application", "clsid": "{5A1B0000-0000-4000-8000-00000000A003}",
         "typeLib": str(TYPELIBS / "outlook.dll") + "/1"},
        {"progId": "Acme.MailItem", "clsid": "{5A1B0000-0000-4000-8000-00000000A004}",
         "typeLib": str(TYPELIBS / "outlook.tlb")},
        {"progId": "Gone.App", "clsid": "{00000000-0000-0000-0000-0000000000AA}",
         "typeLib": str(TYPELIBS / "missing.tlb")},
    ]
    win.reply({"stdout": json.dumps(listing)})
    r = gw.run("--discover", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    plans = {a["app"]: a["plan"] for a in out["apps"]}
    # MailItem is noncreatable: nothing to write; a library that is not there: invalid.
    assert plans == {"local.acme.application": "new", "local.acmesheets.application": "new",
                     "Acme.MailItem": "empty", "Gone.App": "invalid"}, out
    [call] = win.calls()
    script = script_of(call)
    assert call["stdin"] == ""
    assert "[Microsoft.Win32.Registry]::ClassesRoot" in script
    assert "OpenSubKey('LocalServer32')" in script and "OpenSubKey('TypeLib')" in script
    sheets = gw.home / "local.acmesheets.application" / "aai.json"
    doc = json.loads(sheets.read_text())
    assert doc["platforms"]["windows"]["progid"] == "AcmeSheets.Application"
    assert [t["name"] for t in doc["platforms"]["windows"]["tools"]][:3] == \
        ["getVersion", "getVisible", "getBudget"]

    # An edited descriptor is kept unless --force.
    edited = sheets.read_text().replace("The application's version", "Which version runs")
    sheets.write_text(edited)
    win.reply({"stdout": json.dumps(listing)})
    out = json.loads(gw.run("--discover", "--yes", "--json").stdout)
    plans = {a["app"]: a["plan"] for a in out["apps"]}
    assert plans["local.acmesheets.application"] == "edited"
    assert plans["local.acme.application"] == "unchanged"
    assert sheets.read_text() == edited
    win.reply({"stdout": json.dumps(listing)})
    out = json.loads(gw.run("--discover", "--yes", "--force", "--json").stdout)
    assert str(sheets) in out["written"]
    assert "The application's version" in sheets.read_text()


def test_windows_discover_says_when_powershell_fails(gw, win):
    win.reply({"stderr": "Access denied", "code": 1})
    r = gw.run("--discover")
    assert r.returncode == 2 and "could not list the automation servers: Access denied" in r.stderr, r.stderr
