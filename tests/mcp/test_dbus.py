"""The D-Bus executor against a private dbus-daemon: the JSON convention, native methods
of many signatures (every conversion both ways and its errors), properties, activation,
dead and missing apps — all through the MCP Python SDK.

Run: python3 -m pytest tests/mcp -q -k dbus
"""
import pytest

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio


def typed_descriptor(service="com.example.Typed", app_id="com.example.typed"):
    params = lambda *names, **types: {  # noqa: E731
        "type": "object", "properties": {n: types.get(n, {}) for n in names}, "required": list(names)}
    basics = ["byte", "flag", "small", "usmall", "num", "unum", "big", "ubig", "real", "text", "path", "sig"]
    tools = [
        {"name": "basics", "description": "Every basic type", "method": "Basics", "parameters": params(*basics)},
        {"name": "containers", "description": "Containers", "method": "Containers",
         "parameters": params("names", "hints", "pairs", "record", "grid")},
        {"name": "describe", "description": "A variant, matched by position", "method": "Describe",
         "parameters": params("anything")},
        {"name": "ping", "description": "No arguments", "method": "Ping", "parameters": {"type": "object"}},
        {"name": "json_text", "description": "A JSON string reply", "method": "JsonText",
         "parameters": {"type": "object"}},
        {"name": "raw_text", "description": "The same, as text", "method": "JsonText", "output_parser": "string",
         "parameters": {"type": "object"}},
        {"name": "boom", "description": "Fails", "method": "Boom", "parameters": {"type": "object"}},
        {"name": "sleep", "description": "Sleeps", "method": "Sleep", "timeout": 1,
         "parameters": params("seconds")},
        {"name": "missing", "description": "Not there", "method": "Missing", "parameters": {"type": "object"}},
        {"name": "volume", "description": "Read the volume", "property": "Volume", "parameters": {"type": "object"}},
        {"name": "set_volume", "description": "Set the volume", "property": "Volume", "access": "write",
         "parameters": params("value")},
        {"name": "status", "description": "Playback status", "property": "Status", "parameters": {"type": "object"}},
        {"name": "set_status", "description": "Read-only", "property": "Status", "access": "write",
         "parameters": params("value")},
    ]
    return {"schema_version": "1.0", "appId": app_id, "name": "Typed", "description": "A typed D-Bus service",
            "platforms": {"linux": {"automation": "dbus", "service": service, "object": "/com/example/Typed",
                                    "interface": "com.example.Typed", "tools": tools}}}


def json_descriptor(app_id="com.example.jsonsvc"):
    return {"schema_version": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": app_id, "name": "JSON service", "description": "The JSON convention"},
            "execution": {"type": "ipc"},
            "tools": [{"name": n, "description": n, "parameters": {"type": "object"}}
                      for n in ["greet", "fail", "slow", "die", "garbage"]]}


@pytest.fixture
def dgw(gw, bus):
    gw.extra_env = bus.env()
    gw.bus = bus
    return gw


async def call(s, app, tool, **args):
    return await s.call_tool("aai_exec", {"app": app, "tool": tool, "args": args})


async def test_json_convention(dgw):
    dgw.bus.service("json", "com.example.jsonsvc")
    dgw.put("com.example.jsonsvc", json_descriptor())
    dgw.config(defaultTimeout=1.5)
    async with dgw.session() as s:
        r = await call(s, "com.example.jsonsvc", "greet", name="world")
        assert r.content[0].text == '{"greeting":"hello world","version":"1.0"}'
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.jsonsvc", "fail")
        assert e.value.error.code == -32005 and e.value.error.data["detail"] == "name is not allowed"
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.jsonsvc", "garbage")
        assert "not a JSON envelope: `this is not an envelope`" in e.value.error.data["detail"]
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.jsonsvc", "slow", seconds=5)
        assert e.value.error.code == -32008
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.jsonsvc", "die")
        assert e.value.error.code == -32001, e.value.error
        assert "without replying" in e.value.error.data["detail"]
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.jsonsvc", "greet", name="again")
        assert e.value.error.code == -32009 and "no program owns `com.example.jsonsvc`" in e.value.error.data["detail"]


async def test_every_basic_type_both_ways(dgw):
    dgw.bus.service("typed", "com.example.Typed")
    dgw.put("com.example.typed", typed_descriptor())
    values = {"byte": 255, "flag": True, "small": -32768, "usmall": 65535, "num": -7, "unum": 4000000000,
              "big": -9000000000, "ubig": 18446744073709551615, "real": 2.5, "text": "héllo 世界",
              "path": "/org/example/Item", "sig": "a{sv}"}
    async with dgw.session() as s:
        r = await call(s, "com.example.typed", "basics", **values)
        assert r.structured_content is None
        import json
        assert json.loads(r.content[0].text) == list(values.values())


async def test_containers_variants_and_positional_arguments(dgw):
    import json
    dgw.bus.service("typed", "com.example.Typed")
    dgw.put("com.example.typed", typed_descriptor())
    async with dgw.session() as s:
        r = await call(s, "com.example.typed", "containers", names=["a", "b"],
                       hints={"urgency": {"$type": "y", "value": 2}, "label": "x", "n": 3, "tags": ["t"]},
                       pairs={"k": "v"}, record=[1, "two", True], grid=[[1, 2], [3]])
        assert json.loads(r.content[0].text) == [["a", "b"], {"label": "x", "n": 3, "tags": ["t"], "urgency": 2},
                                                {"k": "v"}, [1, "two", True], [[1, 2], [3]]]
        for value, expected in [(True, 'b:true'), (7, 'i:7'), (1.5, 'd:1.5'), ("s", 's:"s"'),
                                (["x"], 'as:["x"]'), ({"k": 1}, 'a{sv}:{"k": 1}'),
                                ({"$type": "t", "value": 5}, "t:5")]:
            r = await call(s, "com.example.typed", "describe", anything=value)
            assert r.content[0].text == expected, value
        assert (await call(s, "com.example.typed", "ping")).content[0].text == "pong"
        assert (await call(s, "com.example.typed", "json_text")).content[0].text == '{"answer":42}'
        assert (await call(s, "com.example.typed", "raw_text")).content[0].text == '{"answer": 42}'


async def test_conversion_errors_name_the_argument_and_type(dgw):
    dgw.bus.service("typed", "com.example.Typed")
    dgw.put("com.example.typed", typed_descriptor())
    ok = {"byte": 1, "flag": True, "small": 1, "usmall": 1, "num": 1, "unum": 1, "big": 1, "ubig": 1,
          "real": 1.0, "text": "t", "path": "/p", "sig": "s"}
    async with dgw.session() as s:
        for bad, message in [
            ({"byte": 256}, "argument `byte` is out of range for D-Bus `y` (byte) (0 to 255)"),
            ({"unum": -1}, "argument `unum` is out of range for D-Bus `u`"),
            ({"flag": "yes"}, "argument `flag` must be a D-Bus `b` (boolean), but a JSON string was given"),
            ({"path": "no-slash"}, "argument `path` must be a D-Bus object path"),
            ({"sig": "zz"}, "argument `sig` must be a D-Bus type signature"),
        ]:
            with pytest.raises(MCPError) as e:
                await call(s, "com.example.typed", "basics", **{**ok, **bad})
            assert e.value.error.code == -32005
            assert message in e.value.error.data["detail"], e.value.error.data
            assert e.value.error.data["field"] == "/" + next(iter(bad))
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.typed", "containers", names=["a", 1], hints={}, pairs={}, record=[1, "x", True], grid=[])
        assert "argument `names[1]` must be a D-Bus `s` (string), but a JSON number was given" in e.value.error.data["detail"]


async def test_dbus_errors_timeouts_and_missing_members(dgw):
    dgw.bus.service("typed", "com.example.Typed")
    dgw.put("com.example.typed", typed_descriptor())
    async with dgw.session() as s:
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.typed", "boom")
        assert e.value.error.code == -32001
        assert e.value.error.data["dbusError"] == "com.example.Error.Boom"
        assert "com.example.Error.Boom: it broke on purpose" in e.value.error.data["detail"]
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.typed", "sleep", seconds=5)
        assert e.value.error.code == -32008
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.typed", "missing")
        assert "has no method `Missing`" in e.value.error.data["detail"]
        assert "it has: Basics, Boom, Containers" in e.value.error.data["detail"]


async def test_properties_read_and_write(dgw):
    dgw.bus.service("typed", "com.example.Typed")
    dgw.put("com.example.typed", typed_descriptor())
    async with dgw.session() as s:
        assert (await call(s, "com.example.typed", "volume")).content[0].text == "0.5"
        await call(s, "com.example.typed", "set_volume", value=0.75)
        assert (await call(s, "com.example.typed", "volume")).content[0].text == "0.75"
        assert dgw.bus.call("get-property", "com.example.Typed", "/com/example/Typed",
                            "com.example.Typed", "Volume")["data"] == 0.75
        assert (await call(s, "com.example.typed", "status")).content[0].text == "Playing"
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.typed", "set_status", value="Paused")
        assert e.value.error.code == -32004 and "read-only" in e.value.error.data["detail"]
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.typed", "set_volume", value="loud")
        assert e.value.error.code == -32005


async def test_activation_and_not_running(dgw):
    dgw.bus.activatable("typed", "com.example.Activated")
    dgw.put("com.example.activated", typed_descriptor("com.example.Activated", "com.example.activated"))
    dgw.put("com.example.absent", typed_descriptor("com.example.Absent", "com.example.absent"))
    async with dgw.session() as s:
        assert (await call(s, "com.example.activated", "ping")).content[0].text == "pong"
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.absent", "ping")
        assert e.value.error.code == -32009
        assert e.value.error.data["retryable"] is True


def test_discover_generates_descriptors_that_load_and_work(dgw):
    import json
    dgw.bus.service("typed", "com.example.Typed")
    dgw.bus.service("json", "com.example.jsonsvc")
    dgw.bus.service("json", "org.mpris.MediaPlayer2.fakeplayer")  # a built-in app serves it
    dgw.bus.activatable("typed", "com.example.Sleeper")
    preview = dgw.run("--discover")
    row = next(line for line in preview.stdout.splitlines() if line.startswith("org.mpris.MediaPlayer2.fakeplayer"))
    assert "served by a built-in app" in row, preview.stdout
    assert preview.returncode == 0, preview.stderr
    assert "com.example.Typed" in preview.stdout and "new" in preview.stdout
    assert "Not running (start them and run --discover again): com.example.Sleeper" in preview.stdout
    assert "Nothing written; run again with --yes" in preview.stdout
    assert "introspecting" not in preview.stderr, "progress is only for a terminal"
    assert not (dgw.home / "com.example.Typed").exists()
    assert "org.freedesktop.DBus" not in preview.stdout, "bus plumbing is skipped"

    # On a terminal, progress shows on one overwritten stderr line.
    status, tty = dgw.run_on_tty("--discover")
    assert status == 0
    assert b"introspecting" in tty and b"com.example.Typed" in tty and b"\r" in tty, tty

    done = dgw.run("--discover", "--yes", "--json")
    report = json.loads(done.stdout)
    written = sorted(report["written"])
    assert [p.split("/")[-2] for p in written] == ["com.example.Typed", "com.example.jsonsvc"]
    check = dgw.run("validate", *written)
    assert check.returncode == 0 and "warning" not in check.stdout and "error" not in check.stdout, check.stdout

    doc = json.loads((dgw.home / "com.example.Typed" / "aai.json").read_text())
    linux = doc["platforms"]["linux"]
    assert linux["object"] == "/com/example/Typed" and linux["interface"] == "com.example.Typed"
    tools = {t["name"]: t for t in linux["tools"]}
    assert tools["basics"]["parameters"]["properties"]["byte"]["maximum"] == 255
    assert tools["set_volume"]["access"] == "write"
    ping = dgw.run("call", "com.example.Typed", "ping")
    assert ping.returncode == 0 and json.loads(ping.stdout) == "pong", ping.stderr
    echo = dgw.run("call", "com.example.Typed", "containers", json.dumps(
        {"names": ["x"], "hints": {}, "pairs": {}, "record": [1, "a", False], "grid": []}))
    assert json.loads(echo.stdout)[0] == ["x"], echo.stderr

    again = json.loads(dgw.run("--discover", "--yes", "--json").stdout)
    assert {a["app"]: a["plan"] for a in again["apps"]}["com.example.Typed"] == "unchanged"
    edited = dgw.home / "com.example.Typed" / "aai.json"
    edited.write_text(edited.read_text().replace("D-Bus service com.example.Typed", "My typed service"))
    kept = json.loads(dgw.run("--discover", "--yes", "--json").stdout)
    assert {a["app"]: a["plan"] for a in kept["apps"]}["com.example.Typed"] == "edited"
    assert "My typed service" in edited.read_text()
    forced = json.loads(dgw.run("--discover", "--yes", "--force", "--json").stdout)
    assert any(p.endswith("com.example.Typed/aai.json") for p in forced["written"])
    assert "My typed service" not in edited.read_text()
