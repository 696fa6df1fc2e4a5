"""The native consent dialog: with a display and no elicitation, the gateway shows a real
zenity dialog (under Xvfb) that xdotool answers.

Run: python3 -m pytest tests/mcp -q -k dialog
"""
import os
import shutil
import subprocess
import time

import pytest

from conftest import need_peer

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

ECHO = {"app": "com.example.echo", "tool": "echo", "args": {"text": "hi"}}


@pytest.fixture
def display():
    for tool in ["Xvfb", "zenity", "xdotool"]:
        need_peer(shutil.which(tool) is not None, f"{tool} (Debian packages xvfb zenity xdotool)")
    number = next(n for n in range(600 + os.getpid() % 300, 1200)
                  if not os.path.exists(f"/tmp/.X{n}-lock") and not os.path.exists(f"/tmp/.X11-unix/X{n}"))
    xvfb = subprocess.Popen(["Xvfb", f":{number}", "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while not os.path.exists(f"/tmp/.X11-unix/X{number}"):
        assert xvfb.poll() is None and time.monotonic() < deadline, "Xvfb did not start"
        time.sleep(0.05)
    yield f":{number}"
    xvfb.kill()
    xvfb.wait()


def answer(display, *keys):
    """Waits for the dialog, then types `keys` into it."""
    env = {**os.environ, "DISPLAY": display}
    deadline = time.monotonic() + 30
    while True:
        found = subprocess.run(["xdotool", "search", "--name", "aai-gateway: allow this call"],
                               capture_output=True, text=True, env=env)
        if found.stdout.strip():
            window = found.stdout.split()[0]
            break
        assert time.monotonic() < deadline, "no dialog appeared"
        time.sleep(0.1)
    time.sleep(1.0)  # let it map and take input
    # There is no window manager under Xvfb: focus the dialog directly, then type (XTEST).
    subprocess.run(["xdotool", "windowfocus", "--sync", window], env=env, timeout=10)
    for key in keys:
        subprocess.run(["xdotool", "key", key], env=env, check=True, timeout=10)
        time.sleep(0.2)


async def test_a_real_dialog_asks_when_the_client_cannot(gw, display):
    import anyio
    gw.config(consent={"mode": "prompt"})
    gw.add_app("com.example.echo")
    async with gw.session(client_name="no-elicitation", DISPLAY=display) as s:
        # The first choice (allow once) is selected; two Tabs reach OK.
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, answer, display, "Tab", "Tab", "Return")
            r = await s.call_tool("aai_exec", ECHO)
        assert r.structured_content["echo"]["text"] == "hi"
        # Escape closes the dialog: no answer, the call is refused, nothing remembered.
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, answer, display, "Escape")
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_exec", ECHO)
        assert e.value.error.code == -32004
    import json
    assert json.loads(gw.run("consent", "list", "--json").stdout)["grants"] == []


FAKE = """#!{python}
# A recording stand-in for {program}: writes its argv and the question variable, answers
# with the text of the file `answer` beside it.
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "record.jsonl"), "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "question": os.environ.get("AAI_CONSENT_QUESTION")}}) + "\\n")
sys.stdout.write(open(os.path.join(here, "answer")).read())
"""


@pytest.mark.parametrize("dialog,program", [("osascript", "osascript"), ("powershell", "powershell.exe")])
async def test_macos_and_windows_dialogs_get_the_question_as_data(gw, tmp_path, dialog, program):
    """The macOS and Windows dialogs through their command boundary: a recording fake on
    PATH, a hostile client name, the exact argv (and, for PowerShell, environment)."""
    import base64
    import json
    import sys
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    fake = bindir / program
    fake.write_text(FAKE.format(python=sys.executable, program=program))
    fake.chmod(0o755)
    answer = bindir / "answer"
    record = bindir / "record.jsonl"
    gw.config(consent={"mode": "prompt"})
    gw.add_app("com.example.echo")
    hostile = "-e \"$(touch /tmp/pwned)\" <b>`x`</b> ' \\"
    # The arguments as the gateway will run them (defaults filled in), masked like history.
    # The adapter's command comes last: the question names what its yes starts.
    from conftest import ADAPTER
    question = (f"{hostile} wants to run `echo` of Echo (com.example.echo): The echo tool"
                ' — with {"text":"hi","n":3}'
                f" — this will first start `{sys.executable} {ADAPTER}`")
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "AAI_CONSENT_DIALOG": dialog}
    async with gw.session(client_name=hostile, **env) as s:
        # Dismissed (no output): refused, nothing remembered.
        answer.write_text("")
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", ECHO)
        assert e.value.error.code == -32004
        # Something that is not a choice: no answer either.
        answer.write_text("yes please")
        with pytest.raises(MCPError):
            await s.call_tool("aai_exec", ECHO)
        # Always this tool: runs, and the next call does not ask.
        answer.write_text("tool")
        r = await s.call_tool("aai_exec", ECHO)
        assert r.structured_content["echo"]["text"] == "hi"
        await s.call_tool("aai_exec", ECHO)
    records = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(records) == 3, "asked three times, then remembered"
    assert records[0] == records[2]
    argv = records[0]["argv"]
    if dialog == "osascript":
        assert records[0]["question"] is None
        assert argv[-2:] == ["--", question], "the question is the last argument, after --"
        script = argv[:-2]
        assert script[0::2] == ["-e"] * (len(script) // 2)
        assert not any("pwned" in line for line in script), "never part of the script"
        assert script[1] == "on run argv" and script[-1] == "end run"
    else:
        assert records[0]["question"] == question, "the question travels in the environment"
        assert argv[:5] == ["-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-EncodedCommand"]
        assert len(argv) == 6
        script = base64.b64decode(argv[5]).decode("utf-16-le")
        assert "pwned" not in script and "$env:AAI_CONSENT_QUESTION" in script
        assert "ShowDialog()" in script
    assert not os.path.exists("/tmp/pwned")
    grants = json.loads(gw.run("consent", "list", "--json").stdout)["grants"]
    assert [(g["app"], g["tool"]) for g in grants] == [("com.example.echo", "@start"), ("com.example.echo", "echo")]
