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
