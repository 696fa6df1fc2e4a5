"""`aai-gateway --generate`: a language model drafts a descriptor from what the gateway
learns about an app, `validate` checks it, and the problems go back for repair. The model
is `fake_llm.py`, a loopback OpenAI-compatible chat-completions server with canned
answers (streamed and not); the app is a real D-Bus service on a private bus.

Run: python3 -m pytest tests/mcp/test_generate.py -q
"""
import base64
import json
import subprocess

import pytest

from fake_llm import fake_llm

pytestmark = pytest.mark.anyio

KEY = "sk-test-4c1d-SECRET"
SERVICE = "com.example.Typed"


def draft(**changes):
    doc = {
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
        "app": {"id": SERVICE, "name": {"en": "Typed"}, "defaultLang": "en",
                "description": "A typed D-Bus service"},
        "execution": {"type": "dbus", "service": SERVICE, "objectPath": "/com/example/Typed",
                      "interface": "com.example.Typed"},
        "tools": [
            {"name": "ping", "description": "Answer pong", "method": "Ping",
             "parameters": {"type": "object", "properties": {}}},
            {"name": "volume", "description": "Read the volume", "property": "Volume",
             "parameters": {"type": "object", "properties": {}}},
        ],
    }
    doc.update(changes)
    return doc


def fenced(doc):
    return f"Here is the descriptor:\n```json\n{json.dumps(doc, indent=2)}\n```"


def use_model(gw, url, **extra):
    gw.config(generate={"baseUrl": f"{url}/v1", "model": "fake-model", **extra},
              credentials={"store": "file"})


@pytest.fixture
def dgw(gw, bus):
    bus.service("typed", SERVICE)
    gw.extra_env = {**bus.env(), "OPENAI_API_KEY": KEY}
    return gw


def user_text(request):
    return "\n".join(m["content"] for m in request["body"]["messages"] if m["role"] == "user")


async def test_generate_from_dbus_repairs_once_then_writes_a_descriptor_that_works(dgw, tmp_path):
    # The first answer (not streamed) has a bad version and the wrong id; the repair
    # (streamed) is valid.
    script = [{"text": fenced(draft(version="one", app={**draft()["app"], "id": "com.wrong"})), "stream": False},
              {"text": fenced(draft())}]
    with fake_llm(tmp_path / "llm", script) as (url, requests):
        use_model(dgw, url)
        preview = dgw.run("--generate", SERVICE)
        assert preview.returncode == 0, preview.stderr
        assert "round 1: 2 problems" in preview.stderr, preview.stderr
        assert "round 2: the descriptor is valid" in preview.stderr
        assert SERVICE in preview.stdout and "new" in preview.stdout
        assert "Nothing written; run again with --yes" in preview.stdout
        assert not (dgw.home / SERVICE).exists()

        asked = [r for r in requests() if r["method"] == "POST"]
        assert len(asked) == 2
        first, repair = asked
        assert first["body"]["model"] == "fake-model" and first["body"]["stream"] is True
        assert first["authorization"] == f"Bearer {KEY}"
        # The model read the live introspection XML and the app id to use.
        assert '<interface name="com.example.Typed">' in user_text(first)
        assert '<method name="Ping">' in user_text(first) and f"`{SERVICE}`" in user_text(first)
        assert "`aai.json` descriptors" in first["body"]["messages"][0]["content"]
        # The repair round carries its own last answer and validate's diagnostics.
        messages = repair["body"]["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
        assert "/version" in messages[3]["content"]
        assert "the id must be `com.example.Typed`, not `com.wrong`" in messages[3]["content"]

        written = dgw.run("--generate", SERVICE, "--yes", "--json")
        assert written.returncode == 0, written.stderr
        report = json.loads(written.stdout)
        assert report["written"] == [str(dgw.home / SERVICE / "aai.json")]
    for out in (preview, written):
        assert KEY not in out.stdout + out.stderr

    check = dgw.run("validate", str(dgw.home / SERVICE / "aai.json"))
    assert check.returncode == 0, check.stdout
    async with dgw.session() as s:
        r = await s.call_tool("aai_exec", {"app": SERVICE, "tool": "ping", "args": {}})
        assert not r.is_error and r.content[0].text == "pong", r
    log = (dgw.home / "logs").glob("*") if (dgw.home / "logs").exists() else []
    for f in log:
        assert KEY not in f.read_text(errors="replace")


def test_generate_gives_up_after_its_rounds_and_writes_nothing(dgw, tmp_path):
    script = [{"text": "I cannot do that."}, {"text": fenced(draft(tools=[]))}]
    with fake_llm(tmp_path / "llm", script) as (url, requests):
        use_model(dgw, url, rounds=2)
        # The key from the credential store wins over OPENAI_API_KEY.
        stored = subprocess.run([str(dgw.binary), "--home", str(dgw.home), "auth", "set",
                                 "aai-gateway.generate", "--stdin"], input="sk-stored-77", text=True,
                                capture_output=True, env=dgw.env(), timeout=30)
        assert stored.returncode == 0, stored.stderr
        r = dgw.run("--generate", SERVICE, "--yes")
        assert r.returncode == 1, r.stderr
        assert "round 1: 1 problem: the answer has no JSON object" in r.stderr
        assert "no valid descriptor after 2 rounds; nothing written" in r.stderr
        assert "/tools: the descriptor has no tools" in r.stderr
        asked = [x for x in requests() if x["method"] == "POST"]
        assert len(asked) == 2 and all(x["authorization"] == "Bearer sk-stored-77" for x in asked)
    assert not (dgw.home / SERVICE).exists()
    assert "sk-stored-77" not in r.stdout + r.stderr


def test_generate_failures_are_clear_and_keep_the_key_out(dgw, tmp_path):
    # The service refuses the key and echoes it, as real services do.
    script = [{"text": f"Incorrect API key provided: {KEY}", "status": 401}]
    with fake_llm(tmp_path / "llm", script) as (url, _):
        use_model(dgw, url)
        r = dgw.run("--generate", SERVICE)
        assert r.returncode == 2
        assert "401" in r.stderr and "Incorrect API key provided: ***" in r.stderr, r.stderr
        assert KEY not in r.stdout + r.stderr
    # The same key base64-encoded (as in a Basic header a service echoes) is scrubbed too.
    encoded = base64.b64encode(KEY.encode()).decode()
    with fake_llm(tmp_path / "llm2", [{"text": f"bad credentials {encoded}", "status": 401}]) as (url, _):
        use_model(dgw, url)
        r = dgw.run("--generate", SERVICE)
        assert r.returncode == 2 and "bad credentials ***" in r.stderr, r.stderr
        assert encoded not in r.stdout + r.stderr
        # Neither a bus name nor a command.
        r = dgw.run("--generate", "com.example.Nowhere")
        assert r.returncode == 2
        assert "neither a name on the session bus nor a command" in r.stderr and "--from" in r.stderr

    # Nothing listens: the error says so and names only the origin.
    use_model(dgw, "http://127.0.0.1:9")
    r = dgw.run("--generate", SERVICE)
    assert r.returncode == 2 and "cannot reach the model service" in r.stderr, r.stderr
    # A plain-http service elsewhere is refused by the config reader.
    dgw.config(generate={"baseUrl": "http://models.example.com/v1"})
    r = dgw.run("--generate", SERVICE)
    assert r.returncode == 2 and "/generate/baseUrl" in r.stderr and "not an https URL" in r.stderr, r.stderr


def test_generate_from_a_file_streams_progress_on_a_terminal(dgw, tmp_path):
    help_text = tmp_path / "notes-help.txt"
    help_text.write_text("Usage: notes [COMMAND]\n\nCommands:\n  add TEXT   add a note\n  list       list notes\n")
    doc = draft(execution={"type": "stdio", "command": "notes", "args": []},
                app={**draft()["app"], "id": "local.notes", "name": {"en": "Notes"}},
                tools=[{"name": "add", "description": "Add a note",
                        "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                                       "required": ["text"]}}])
    with fake_llm(tmp_path / "llm", [{"text": fenced(doc)}]) as (url, requests):
        use_model(dgw, url)
        status, tty = dgw.run_on_tty("--generate", "local.notes", "--from", str(help_text), "--yes")
        assert status == 0, tty
        assert b"receiving" in tty and b"characters" in tty and b"\r" in tty, tty
        first = [r for r in requests() if r["method"] == "POST"][0]
        assert "command's --help text" in user_text(first) and "add TEXT" in user_text(first)
    assert json.loads((dgw.home / "local.notes" / "aai.json").read_text())["app"]["id"] == "local.notes"
