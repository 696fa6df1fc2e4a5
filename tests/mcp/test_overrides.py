"""Tool overrides (config `apps.<id>.tools.<tool>`, docs/config.md "Tool overrides"): a
tool renamed, redescribed, an argument fixed and hidden, another given a default, for a
D-Bus tool (a real dbus-daemon), an HTTP tool (httpbin) and a downstream MCP server's tool
(server-everything). What `tools/list`, the guide, consent and the call each use.

Run: python3 -m pytest tests/mcp -q -k overrides
"""
import json

import pytest

from conftest import deciding
from test_dbus import typed_descriptor
from test_downstream import everything
from test_http import httpbin, tool as http_tool, web_app  # noqa: F401 (a fixture)
from test_http_transport import web
from test_ui import get, ui_of

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

BASICS = {"byte": 255, "flag": True, "small": -32768, "usmall": 65535, "num": -7, "unum": 4000000000,
          "big": -9000000000, "ubig": 18446744073709551615, "real": 2.5, "text": "héllo",
          "path": "/org/example/Item", "sig": "a{sv}"}


async def exec_(s, app, tool, **args):
    return await s.call_tool("aai_exec", {"app": app, "tool": tool, "args": args})


async def test_a_dbus_tool_renamed_with_its_arguments_fixed_and_defaulted(gw, bus):
    """The D-Bus method gets every argument in its place: the fixed ones the agent never
    sees, the one with a new default, and the one it sends."""
    gw.extra_env = bus.env()
    bus.service("typed", "com.example.Typed")
    gw.put("com.example.typed", typed_descriptor())
    fixed = {k: v for k, v in BASICS.items() if k not in ("text", "sig")}
    gw.config(apps={"com.example.typed": {"tools": {"basics": {
        "name": "stamp", "description": "Stamp a text", "fixed": fixed, "defaults": {"sig": "s"}}}}})
    async with gw.session() as s:
        guide = (await s.call_tool("aai_guide", {"app": "com.example.typed"})).content[0].text
        assert "### `stamp`" in guide and "Stamp a text" in guide and "### `basics`" not in guide
        section = guide.split("### `stamp`")[1].split("###")[0]
        assert "`text`" in section and "`ubig`" not in section, "fixed arguments are not shown"
        assert "4000000000" not in guide, "nor their values"

        r = await exec_(s, "com.example.typed", "stamp", text="héllo")
        assert json.loads(r.content[0].text) == [
            {"text": "héllo", "sig": "s"}.get(k, v) for k, v in BASICS.items()], "in the method's order"

        with pytest.raises(MCPError) as e:
            await exec_(s, "com.example.typed", "stamp", text="x", byte=1)
        assert e.value.error.data["type"] == "INVALID_PARAMS"
        with pytest.raises(MCPError) as e:
            await exec_(s, "com.example.typed", "basics", **BASICS)
        assert e.value.error.data["type"] == "TOOL_NOT_FOUND", "the app's own name is not served"

        model = json.loads((await s.read_resource("app:com.example.typed")).contents[0].text)
        names = [t["name"] for t in model["bindings"][0]["tools"]]
        assert "stamp" in names and "basics" not in names, "the resource shows what agents call"

    gw.config(exposure="flat", apps={"com.example.typed": {"tools": {"basics": {
        "name": "stamp", "fixed": fixed, "defaults": {"sig": "s"}}}}})
    async with gw.session() as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        stamp = tools["com_example_typed__stamp"]
        assert set(stamp.input_schema["properties"]) == {"text", "sig"}
        assert stamp.annotations is None, "not read-only"
        assert stamp.input_schema["properties"]["sig"]["default"] == "s"
        assert "com_example_typed__basics" not in tools
        r = await s.call_tool("com_example_typed__stamp", {"text": "flat"})
        assert json.loads(r.content[0].text)[9] == "flat"


async def test_an_http_tool_with_a_fixed_path_argument_asks_about_what_it_sends(gw, httpbin):  # noqa: F811
    s_ = {"type": "string"}
    gw.put("org.httpbin", web_app("org.httpbin", httpbin, [
        http_tool("anything", "GET", "/anything/{name}", {"name": s_, "extra": s_}, ["name"])]))
    gw.config(consent={"mode": "prompt"}, apps={"org.httpbin": {"tools": {"anything": {
        "name": "fetch_report", "fixed": {"name": "reports"}, "defaults": {"extra": "weekly"},
        "readOnly": True}}}})
    asked = []
    async with gw.session(elicitation=deciding({"": "once"}, asked), client_name="agent-a") as s:
        r = json.loads((await exec_(s, "org.httpbin", "fetch_report")).content[0].text)
        assert r["url"].endswith("/anything/reports?extra=weekly"), r["url"]
        r = json.loads((await exec_(s, "org.httpbin", "fetch_report", extra="daily")).content[0].text)
        assert r["url"].endswith("/anything/reports?extra=daily"), r["url"]
    assert len(asked) == 2, asked
    # The question names the tool as agents call it and every argument it sends.
    assert "fetch_report" in asked[0] and "reports" in asked[0] and "weekly" in asked[0], asked[0]


async def test_a_downstream_servers_tool_renamed_with_a_default(gw):
    everything(gw)
    gw.config(apps={"dev.mcp.everything": {"tools": {
        "echo": {"name": "say", "description": "Say something back", "defaults": {"message": "hi"}},
        "get-sum": {"name": "add_to_forty", "fixed": {"b": 40}}}}})
    async with gw.session() as s:
        guide = (await s.call_tool("aai_guide", {"app": "dev.mcp.everything"})).content[0].text
        assert "### `say`" in guide and "Say something back" in guide and "### `echo`" not in guide
        assert "### `add_to_forty`" in guide
        r = await exec_(s, "dev.mcp.everything", "say")
        assert r.content[0].text == "Echo: hi"
        r = await exec_(s, "dev.mcp.everything", "add_to_forty", a=2)
        assert "42" in r.content[0].text
        with pytest.raises(MCPError) as e:
            await exec_(s, "dev.mcp.everything", "echo", message="x")
        assert e.value.error.data["type"] == "TOOL_NOT_FOUND"
    gw.config(exposure="flat", apps={"dev.mcp.everything": {"tools": {
        "echo": {"name": "say", "defaults": {"message": "hi"}, "readOnly": False}}}})
    async with gw.session() as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert "dev_mcp_everything__say" in tools and "dev_mcp_everything__echo" not in tools
        assert tools["dev_mcp_everything__say"].annotations is None, "the user says it writes"
        assert tools["dev_mcp_everything__get-structured-content"].annotations.read_only_hint is True, \
            "the server's own annotation"
        r = await s.call_tool("dev_mcp_everything__say", {})
        assert r.content[0].text == "Echo: hi"


async def test_an_override_that_cannot_apply_is_an_error_and_the_tool_stays(gw):
    gw.add_app("com.example.echo")
    gw.config(apps={"com.example.echo": {"tools": {
        "echo": {"fixed": {"n": "three"}},
        "sleep": {"name": "nap", "fixed": {"seconds": 0}},
        "nothing": {"name": "x"}}}})
    async with gw.session() as s:
        # Served as defined, `echo` would run without what the user fixed: it waits.
        with pytest.raises(MCPError) as e:
            await exec_(s, "com.example.echo", "echo", text="not served")
        assert e.value.error.data["type"] == "TOOL_NOT_FOUND"
        guide = (await s.call_tool("aai_guide", {"app": "com.example.echo"})).content[0].text
        assert "### `nap`" in guide and "### `echo`" not in guide
    log = (gw.tmp / "stderr.log").read_text()
    assert "/apps/com.example.echo/tools/echo" in log and "does not fit its schema" in log, log[-2000:]
    assert "not served until this is fixed" in log
    assert "has no tool `nothing`" in log
    assert "three" not in log.split("does not fit its schema")[1].split("\n")[0], "the value is not shown"

    out = gw.run("validate", str(gw.home / "com.example.echo" / "aai.json"))
    assert out.returncode == 1, out.stdout
    assert "`nap` as config.json changes it: the app names it `sleep`; fixed: `seconds` = 0" in out.stdout, out.stdout
    assert "config.json: /apps/com.example.echo/tools/echo: error" in out.stdout, out.stdout

    # The app's page shows the changed tool next to the app's own definition, and the
    # override that could not apply.
    with web(gw) as (url, _):
        page = get(ui_of(url) + "/apps/com.example.echo").text
    assert "Changed by your configuration" in page and "the app names it `sleep`" in page, page
    assert "/apps/com.example.echo/tools/echo" in page, "the error is on the app's page"


async def test_a_renamed_tool_keeps_its_interactive_view(gw):
    """MCP Apps: the server knows its tool by its own name; agents and hosts see the view on
    the name they call."""
    from test_mcp_apps import apps
    apps(gw)
    gw.config(apps={"dev.mcp.clock": {"tools": {"get-time": {"name": "clock"}}}})
    async with gw.session() as s:
        guide = (await s.call_tool("aai_guide", {"app": "dev.mcp.clock"})).content[0].text
        assert "- `clock`: `ui://dev.mcp.clock/get-time/mcp-app.html`" in guide, guide
        r = await exec_(s, "dev.mcp.clock", "clock")
        assert r.meta["ui"]["resourceUri"] == "ui://dev.mcp.clock/get-time/mcp-app.html"
    gw.config(exposure="flat", apps={"dev.mcp.clock": {"tools": {"get-time": {"name": "clock"}}}})
    async with gw.session() as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert tools["dev_mcp_clock__clock"].meta["ui"]["resourceUri"] == "ui://dev.mcp.clock/get-time/mcp-app.html"


async def test_a_rule_hiding_a_tool_by_its_own_name_hides_it_renamed(gw):
    gw.add_app("com.example.echo")
    gw.config(clients={"*": {"tools": {"deny": ["com.example.echo:echo"]}}},
              apps={"com.example.echo": {"tools": {"echo": {"name": "say"}, "sleep": {"name": "nap"}}}})
    async with gw.session() as s:
        guide = (await s.call_tool("aai_guide", {"app": "com.example.echo"})).content[0].text
        assert "### `say`" not in guide and "### `nap`" in guide
        with pytest.raises(MCPError) as e:
            await exec_(s, "com.example.echo", "say", text="hidden")
        assert e.value.error.data["type"] == "TOOL_NOT_FOUND"


async def test_an_atomic_batch_undoes_a_renamed_tool_with_its_defaulted_argument(gw, tmp_path):
    """The undo reads the arguments the app got, a default the user set among them, and
    names the undoing tool by its new name."""
    from conftest import tool
    path = tmp_path / "ledger.json"
    gw.add_app("com.example.ledger", env={"AAI_LEDGER": str(path)}, tools=[
        tool("add", {"text": {"type": "string"}}, ["text"],
             undo={"tool": "remove", "args": {"id": "/result/id", "note": "/args/text"}}),
        tool("remove", {"id": {"type": "integer"}, "note": {"type": "string"}}, ["id"]),
        tool("fail", {"message": {"type": "string"}})])
    gw.config(apps={"com.example.ledger": {"tools": {
        "add": {"name": "jot", "defaults": {"text": "milk"}}, "remove": {"name": "erase"}}}})
    entries = lambda: json.loads(path.read_text()) if path.exists() else []  # noqa: E731
    async with gw.session() as s:
        r = await s.call_tool("aai_batch", {"atomic": True, "calls": [
            {"app": "com.example.ledger", "tool": "jot", "args": {}},
            {"app": "com.example.ledger", "tool": "fail", "args": {"message": "no"}}]})
        out = r.structured_content
        assert [(u["tool"], u["status"], u.get("undo")) for u in out["undone"]] == [
            ("jot", "undone", "erase")], out
    assert entries() == [], "the entry was removed again"


async def test_a_renamed_tool_of_the_gateways_own_app_is_asked_about_by_its_new_name(gw, tmp_path):
    import sys
    source = {"mcpServers": {"quiet": {"command": sys.executable, "args": ["-c", "pass"]}}}
    gw.config(consent={"mode": "prompt"}, apps={"aai": {"tools": {"import": {"name": "bring_in"}}}})
    asked = []
    async with gw.session(elicitation=deciding({"": "deny"}, asked), client_name="agent-a") as s:
        names = [t.name for t in (await s.list_tools()).tools]
        with pytest.raises(Exception):
            await s.call_tool("aai_exec", {"app": "aai", "tool": "bring_in",
                                           "args": {"source": source, "confirm": True}})
    assert len(asked) == 1, (names, asked)
    assert "bring_in" in asked[0] and "`import`" not in asked[0], asked[0]
