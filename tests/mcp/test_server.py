"""The stdio MCP server driven through the real Python MCP SDK: handshake, listing in
each exposure mode, guides, search, resources, the error model, and the colon spellings.

Run: python3 -m pytest tests/mcp -q
"""
import json

import pytest

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

META = ["aai_search", "aai_guide", "web_discover", "aai_exec", "aai_batch", "aai_run"]


def text(result):
    return result.content[0].text


async def test_initialize_negotiates_and_names_the_server(gw):
    gw.add_app("com.example.echo")
    async with gw.session() as s:
        init = s.initialize_result
        assert init.server_info.name == "aai-gateway"
        assert init.protocol_version == "2025-11-25"
        assert init.capabilities.tools.list_changed is True
        assert init.capabilities.resources is not None
        assert "aai_search" in (init.instructions or "")


async def test_stateless_2026_revision_through_discover(gw):
    gw.add_app("com.example.echo")
    async with gw.session(discover=True) as s:
        tools = await s.list_tools()
        assert [t.name for t in tools.tools] == ["app_aai", "app_com_example_echo", *META]
        result = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "2026"}})
        assert result.structured_content["echo"]["text"] == "2026"


async def test_progressive_listing_is_small_and_client_safe(gw):
    gw.add_app("com.example.echo", name={"en": "Echo", "zh-CN": "回声"}, aliases=["repeat", "复读"],
               description="Echoes text")
    gw.add_app("org.other-app.x")
    async with gw.session() as s:
        tools = (await s.list_tools()).tools
        names = [t.name for t in tools]
        assert names == ["app_aai", "app_com_example_echo", "app_org_other-app_x", *META]
        for name in names:
            assert len(name) <= 64 and all(c.isalnum() or c in "_-" for c in name), name
        echo = tools[1]
        assert echo.description == "【Echo|回声】Echoes text. Aliases: repeat, 复读. Call to get guide."
        assert echo.input_schema == {"type": "object"}


async def test_search_mode_lists_only_meta_tools_and_auto_switches(gw):
    for i in range(3):
        gw.add_app(f"com.example.app{i}")
    gw.config(exposure="search")
    async with gw.session() as s:
        assert [t.name for t in (await s.list_tools()).tools] == META
    gw.config(maxListedApps=2)
    async with gw.session() as s:
        assert [t.name for t in (await s.list_tools()).tools] == META, "3 apps > maxListedApps"
        guide = await s.call_tool("aai_guide", {"app": "com.example.app1"})
        assert "### `echo`" in text(guide)


async def test_flat_mode_lists_every_tool_with_its_schema_and_calls_it(gw):
    gw.add_app("com.example.echo")
    gw.config(exposure="flat")
    async with gw.session() as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        echo = tools["com_example_echo__echo"]
        assert echo.input_schema["required"] == ["text"]
        assert echo.input_schema["properties"]["n"]["default"] == 3
        result = await s.call_tool("com_example_echo__echo", {"text": "flat"})
        assert result.structured_content["echo"] == {"text": "flat", "n": 3}


async def test_guide_has_parameters_and_a_ready_example(gw):
    nested = [{
        "name": "create", "description": "Create an item",
        "parameters": {"type": "object", "required": ["title", "options"], "properties": {
            "title": {"type": "string", "description": "Item title"},
            "priority": {"type": "string", "enum": ["low", "high"], "default": "low"},
            "options": {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
        }},
    }]
    gw.add_app("com.example.items", tools=nested, name={"en": "Items", "de": "Dinge"}, aliases=["todo"])
    async with gw.session() as s:
        guide = text(await s.call_tool("app_com_example_items", {}))
        assert guide.startswith("# Items (`com.example.items`)")
        assert "- Names: Items / Dinge" in guide and "- Aliases: todo" in guide
        assert "- `title` (string, required): Item title" in guide
        assert '- `priority` (one of "low", "high", default "low")' in guide
        assert "  - `tags` (array of string)" in guide
        example = guide.split("```json\n")[1].split("\n```")[0]
        assert json.loads(example) == {"app": "com.example.items", "tool": "create",
                                       "args": {"title": "…", "options": {}}}
        assert text(await s.call_tool("aai_guide", {"app": "Dinge"})) == guide, "found by any name"


async def test_search_ranks_latin_and_chinese_queries(gw):
    gw.add_app("com.apple.mail", name={"en": "Mail", "zh-CN": "邮件"}, description="Send and read email",
               aliases=["email", "邮箱"], tools=[{"name": "send_email", "description": "Send a new email",
                                                 "parameters": {"type": "object"}}])
    gw.add_app("com.example.reminders", name={"en": "Reminders", "zh-CN": "提醒事项"},
               description="Task and reminder management", aliases=["todo", "待办"])
    async with gw.session() as s:
        r = await s.call_tool("aai_search", {"query": "send email"})
        assert r.structured_content["results"][0]["app"] == "com.apple.mail"
        assert r.structured_content["results"][0]["tools"] == ["send_email"]
        r = await s.call_tool("aai_search", {"query": "发邮件"})
        assert [x["app"] for x in r.structured_content["results"]] == ["com.apple.mail"]
        r = await s.call_tool("aai_search", {"query": "提醒"})
        assert r.structured_content["results"][0]["app"] == "com.example.reminders"
        r = await s.call_tool("aai_search", {"query": "待办", "limit": 1})
        assert [x["app"] for x in r.structured_content["results"]] == ["com.example.reminders"]
        r = await s.call_tool("aai_search", {"query": "xyzzy"})
        assert r.structured_content["results"] == []


async def test_resources_list_and_read(gw):
    gw.add_app("com.example.echo", description="Echoes text")
    async with gw.session() as s:
        resources = (await s.list_resources()).resources
        assert [(str(r.uri), r.name, r.mime_type) for r in resources] == [
            ("app:aai", "AAI Gateway", "application/aai+json"),
            ("app:com.example.echo", "Echo", "application/aai+json")]
        # The gateway's own app is served as its compiled-in descriptor.
        own = json.loads((await s.read_resource("app:aai")).contents[0].text)
        assert own["execution"] == {"type": "gateway"} and own["platform"] == "linux"
        # The descriptor as written: the file's own text.
        read = await s.read_resource("app:com.example.echo")
        written = (gw.home / "com.example.echo" / "aai.json").read_text()
        assert read.contents[0].text == written
        assert json.loads(read.contents[0].text)["app"]["id"] == "com.example.echo"
        # The normalized model has a URI of its own.
        model = json.loads((await s.read_resource("app:com.example.echo/model")).contents[0].text)
        assert model["id"] == "com.example.echo"
        assert [b["executor"]["type"] for b in model["bindings"]] == ["stdio"]
        guide = await s.read_resource("app:com.example.echo/guide")
        assert guide.contents[0].mime_type == "text/markdown"
        assert guide.contents[0].text.startswith("# Echo")
        templates = (await s.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == [
            "app:{appId}/guide", "app:{appId}/model", "app:{appId}/events/{event}",
            "app:{appId}/resources/{+uri}"]
        with pytest.raises(MCPError) as e:
            await s.read_resource("app:com.example.nope")
        assert "no resource" in e.value.error.message


async def test_a_seed_example_and_a_built_in_are_served_as_written(gw, tmp_path):
    """Seed 004's agent reads an app's `aai.json` itself: `resources/read app:<id>` of the
    seeds' D1 web example returns that file's text, and a built-in's (the OpenCode agent,
    offered when `opencode` is on PATH) is its JSON as the gateway wrote it."""
    from pathlib import Path
    seed = Path(__file__).parents[2] / "fixtures" / "valid" / "d1-example-api-web.json"
    text = seed.read_text()
    app_id = json.loads(text)["app"]["id"]
    (gw.home / "seed").mkdir()
    (gw.home / "seed" / "aai.json").write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "opencode").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "opencode").chmod(0o755)
    gw.extra_env["PATH"] = f"{bin_dir}:{gw.env()['PATH']}"
    async with gw.session() as s:
        read = (await s.read_resource(f"app:{app_id}")).contents[0]
        assert read.text == text and read.mime_type == "application/json"
        model = json.loads((await s.read_resource(f"app:{app_id}/model")).contents[0].text)
        assert model["id"] == app_id and "bindings" in model
        agent = json.loads((await s.read_resource("app:ai.opencode")).contents[0].text)
        assert agent["app"]["id"] == "ai.opencode"
        assert agent["execution"] == {"type": "acp", "start": {"command": "opencode", "args": ["acp"]}}


async def test_errors_follow_the_documented_shape(gw):
    gw.add_app("com.example.echo")
    async with gw.session() as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo",
                                           "args": {"text": 7, "n": "hunter2"}})
        err = e.value.error
        assert err.code == -32005 and err.message.startswith("Invalid params: `/text`")
        assert err.data["type"] == "INVALID_PARAMS" and err.data["field"] == "/text"
        assert "`/text`" in err.data["detail"] and "`/n`" in err.data["detail"]
        assert "hunter2" not in err.data["detail"]
        assert err.data["appId"] == "com.example.echo" and err.data["tool"] == "echo"
        assert err.data["retryable"] is False

        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.ehco", "tool": "echo", "args": {}})
        assert e.value.error.code == -32002
        assert "did you mean `com.example.echo`" in e.value.error.data["detail"]

        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "nope", "args": {}})
        assert e.value.error.code == -32003
        assert "its tools are: echo, sleep" in e.value.error.data["detail"]

        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "fail",
                                           "args": {"code": "RATE_LIMITED", "message": "slow down"}})
        assert e.value.error.code == -32015 and e.value.error.data["detail"] == "slow down"
        assert e.value.error.data["retryable"] is True

        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.echo"})
        assert e.value.error.code == -32005 and e.value.error.data["field"] == "/tool"


async def test_errors_as_results_when_configured(gw):
    gw.add_app("com.example.echo")
    gw.config(errors="result")
    async with gw.session() as s:
        r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "nope"})
        assert r.is_error is True
        assert r.structured_content["code"] == -32003
        assert json.loads(text(r))["data"]["type"] == "TOOL_NOT_FOUND"


async def test_colon_spellings_are_accepted(gw):
    gw.add_app("com.example.echo")
    async with gw.session() as s:
        r = await s.call_tool("aai:exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "a"}})
        assert r.structured_content["echo"]["text"] == "a"
        r = await s.call_tool("com.example.echo:echo", {"text": "direct"})
        assert r.structured_content["echo"]["text"] == "direct"
        r = await s.call_tool("app:com.example.echo", {})
        assert text(r).startswith("# Echo")
        names = [t.name for t in (await s.list_tools()).tools]
        assert not any(":" in n for n in names), "colon spellings are accepted, never listed"


async def test_stdout_carries_only_protocol_and_logs_go_to_files(gw):
    gw.add_app("com.example.echo")
    async with gw.session() as s:
        await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "x"}})
    log = (gw.home / "logs" / "aai-gateway.log").read_text()
    assert "call succeeded" in log
    assert "s3cr3t" not in log
    assert "catalog loaded" in (gw.tmp / "stderr.log").read_text()


async def test_stderr_shows_only_warnings_and_the_log_file_the_rest(gw):
    gw.add_app("com.example.echo")
    async with gw.session(AAI_LOG="") as s:  # the defaults a user gets
        await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "x"}})
        with pytest.raises(MCPError):
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": 7}})
    err = (gw.tmp / "stderr.log").read_text()
    assert err == "", f"a quiet session writes nothing to stderr: {err}"
    log = (gw.home / "logs" / "aai-gateway.log").read_text()
    assert "call succeeded" in log and "INVALID_PARAMS" in log
    assert "peer_info" not in log and "InitializeRequestParams" not in log, "no protocol struct dumps"
    assert "response error" not in log and "WARN" not in log, "a client's bad arguments are not a gateway warning"


def test_started_by_hand_it_says_what_it_is(gw):
    import os
    import pty
    import subprocess
    master, slave = pty.openpty()
    p = subprocess.Popen([str(gw.binary), "--home", str(gw.home)], stdin=slave, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=gw.env(AAI_LOG=""))
    os.close(slave)
    try:
        line = p.stderr.readline().decode()
        assert "MCP server" in line and "README" in line and "--scan" in line, line
    finally:
        os.close(master)  # the terminal goes away: stdin ends
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            raise
    assert p.stdout.read() == b"", "stdout carries only MCP"
