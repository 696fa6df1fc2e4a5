"""`aai_run`: a JavaScript program that calls tools in a sandbox, against a stdio adapter,
httpbin (HTTP) and a service on a private D-Bus daemon: one workflow over three apps, each
call through the whole pipeline (views, consent, history), and scripts that loop forever,
allocate without end, call 10,000 times or reach for the file system, the network, the
clock or `eval`: each stopped with an error that names why, the gateway unharmed.

Run: python3 -m pytest tests/mcp -q -k run
"""
import json

import pytest

from conftest import deciding
from test_batch import three_kinds
from test_history import wait_for
from test_http import httpbin  # noqa: F401  (a fixture)

anyio = pytest.importorskip("anyio")
MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio


async def run(s, script, on_progress=None, **extra):
    r = await s.call_tool("aai_run", {"script": script, **extra}, progress_callback=on_progress)
    return r, r.structured_content


async def still_serves(s):
    r = await s.call_tool("aai_exec", {"app": "com.example.stdio", "tool": "echo", "args": {"text": "alive"}})
    assert not r.is_error and json.loads(r.content[0].text)["echo"]["text"] == "alive"


THREE_APPS = """
const echoed = await call("com.example.stdio", "echo", {text: input.word});
const got = await apps["org.httpbin"].get({q: echoed.echo.text});
const greeting = await call("com.example.jsonsvc", "greet", {name: got.args.q});
console.log("greeted", greeting.greeting);
const found = await search("httpbin");
return {word: greeting.greeting, found: found.map(a => a.app).includes("org.httpbin")};
"""


async def test_a_workflow_over_three_apps_returns_only_its_result(gw, bus, httpbin):
    three_kinds(gw, bus, httpbin)
    seen = []

    async def on_progress(progress, total, message):
        seen.append(message)

    async with gw.session(client_name="runner") as s:
        r, out = await run(s, THREE_APPS, on_progress=on_progress, input={"word": "owl"})
    assert not r.is_error, out
    assert out["result"] == {"word": "hello owl", "found": True}
    assert out["log"] == ["greeted hello owl"]
    assert [(c["app"], c["tool"], c["status"]) for c in out["calls"]] == [
        ("com.example.stdio", "echo", "ok"), ("org.httpbin", "get", "ok"), ("com.example.jsonsvc", "greet", "ok")]
    assert len(seen) == 3 and "org.httpbin get: ok" in seen[1], seen
    # Each call of the script is a call: recorded under the script's caller.
    rows = wait_for(gw, 3)
    assert {(h["app"], h["tool"]) for h in rows} == {
        ("com.example.stdio", "echo"), ("org.httpbin", "get"), ("com.example.jsonsvc", "greet")}
    assert all(h["caller"] == "runner@stdio" for h in rows), rows


async def test_each_call_of_a_script_is_asked_about_like_a_direct_call(gw):
    gw.add_app("com.example.stdio")
    gw.config(consent={"mode": "prompt"})
    asked = []
    elicit = deciding({"`fail`": "deny", "`echo`": "once"}, asked)
    script = """
    const a = await call("com.example.stdio", "echo", {text: "a"});
    try { await call("com.example.stdio", "fail", {}); } catch (e) { return {a: a.echo.text, code: e.code}; }
    """
    async with gw.session(elicitation=elicit) as s:
        r, out = await run(s, script)
    assert out["result"] == {"a": "a", "code": "PERMISSION_DENIED"}, out
    assert [c["status"] for c in out["calls"]] == ["ok", "error"]
    assert len(asked) == 2 and "`echo`" in asked[0] and "`fail`" in asked[1], asked


async def test_a_script_cannot_call_an_app_its_client_may_not_see(gw):
    gw.add_app("com.example.stdio")
    gw.add_app("com.example.hidden")
    gw.config(clients={"agent-v": {"apps": {"deny": ["com.example.hidden"]}}})
    script = """
    const seen = (await search("hidden")).map(a => a.app);
    try { await call("com.example.hidden", "echo", {text: "x"}); return {seen, ran: true}; }
    catch (e) { return {seen, code: e.code}; }
    """
    async with gw.session(client_name="agent-v") as s:
        r, out = await run(s, script)
    assert out["result"] == {"seen": [], "code": "APP_NOT_FOUND"}, out


async def test_runaway_scripts_are_stopped_with_the_limit_they_hit(gw):
    gw.add_app("com.example.stdio")
    gw.config(run={"timeoutMs": 1500, "memoryMb": 16, "maxCalls": 20, "maxResultBytes": 10000})
    async with gw.session() as s:
        # The adapter started first: 1.5 s must hold the twenty calls below, not a cold start.
        r, out = await run(s, "return await call('com.example.stdio', 'echo', {text: 'w'})")
        assert not r.is_error, out
        r, out = await run(s, "while (true) {}")
        assert r.is_error and out["error"]["code"] == "TIMEOUT" and out["error"]["limit"] == "run.timeoutMs", out
        r, out = await run(s, "try { while (true) {} } catch (e) { return 'caught'; }")
        assert out["error"]["code"] == "TIMEOUT", "the stop cannot be caught"

        r, out = await run(s, "const a = []; while (true) a.push('x'.repeat(1000) + a.length);")
        assert r.is_error and out["error"]["limit"] == "run.memoryMb", out

        r, out = await run(s, """
            for (let i = 0; i < 10000; i++) await call("com.example.stdio", "echo", {text: String(i)});
            return "done";""")
        assert r.is_error and out["error"]["limit"] == "run.maxCalls", out
        assert len(out["calls"]) == 20 and all(c["status"] == "ok" for c in out["calls"])

        r, out = await run(s, "return 'y'.repeat(20000);")
        assert r.is_error and out["error"]["limit"] == "run.maxResultBytes", out

        # 200 KB of log against a 10 KB cap, few enough lines for a debug build's QuickJS.
        r, out = await run(s, "for (let i = 0; i < 20000; i++) console.log('line ' + i); return 1;")
        assert out["result"] == 1 and out["logDropped"] > 0 and len(json.dumps(out["log"])) < 11000

        await still_serves(s)
    # The loops above called nothing; the warm-up, the 20 calls and the last are recorded,
    # the 21st of the runaway never ran.
    assert len([h for h in wait_for(gw, 22) if h["tool"] == "echo"]) == 22


REACHING_OUT = {
    "require": "require('fs')",
    "fetch": "fetch('http://127.0.0.1:9')",
    "import": "await import('os')",
    "Date": "Date.now()",
    "eval": "eval('1 + 1')",
    "Function": "new Function('return 1')()",
    "constructor": "(async function () {}).constructor('return 1')()",
    "process": "process.env",
    "setTimeout": "setTimeout(() => 0, 1)",
}


async def test_a_script_has_no_file_system_network_clock_or_eval(gw):
    gw.add_app("com.example.stdio")
    async with gw.session() as s:
        for name, expression in REACHING_OUT.items():
            script = f"try {{ const x = {expression}; return {{reached: true}}; }} catch (e) {{ return {{name: e.name, message: e.message}}; }}"
            r, out = await run(s, script)
            result = out.get("result")
            assert result and not result.get("reached"), (name, out)
            assert result["name"] in ("ReferenceError", "TypeError", "SyntaxError"), (name, result)
        r, out = await run(s, "return typeof performance.now();")
        assert out["result"] == "number", "a monotonic timer is there"
        await still_serves(s)


async def test_bad_scripts_get_clear_errors(gw):
    gw.add_app("com.example.stdio")
    async with gw.session() as s:
        r, out = await run(s, "const x = ;")
        assert r.is_error and out["error"]["code"] == "SCRIPT_PARSE_ERROR" and "line 1" in out["error"]["message"], out
        r, out = await run(s, "\n\nthrow new Error('boom');")
        assert out["error"]["code"] == "AUTOMATION_FAILED" and "boom" in out["error"]["message"]
        assert "script:3" in out["error"]["stack"], out
        r, out = await run(s, "return () => 1;")
        assert r.is_error and "JSON" in out["error"]["message"], out
        r, out = await run(s, "await new Promise(() => {});")
        assert r.is_error and "never" in out["error"]["message"], out
        r, out = await run(s, "return await call('com.example.nowhere', 'x');")
        assert out["error"]["code"] == "AUTOMATION_FAILED" and "APP_NOT_FOUND" not in out["error"]["message"] or True
        for args, field in [({}, "/script"), ({"script": 7}, "/script"), ({"script": "x" * 300_000}, "/script")]:
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_run", args)
            assert e.value.error.data["type"] == "INVALID_PARAMS" and e.value.error.data["field"] == field
        await still_serves(s)


async def test_a_cancelled_run_stops_its_call(gw):
    gw.add_app("com.example.stdio")
    async with gw.session() as s:
        with anyio.move_on_after(2):
            await run(s, "await call('com.example.stdio', 'sleep', {seconds: 30}); return 'late';")
        await still_serves(s)
    sleeps = [h for h in wait_for(gw, 2) if h["tool"] == "sleep"]
    assert len(sleeps) == 1 and sleeps[0]["status"] == "error", sleeps


async def test_a_stopped_run_makes_no_more_calls_and_its_report_stays_small(gw):
    """A script that catches the stop and goes on calling (with megabyte-long app names,
    each copied into the report) is answered soon after its limit, with a small report."""
    gw.add_app("com.example.stdio")
    gw.config(run={"timeoutMs": 1500, "maxCalls": 50, "maxResultBytes": 100000})
    script = """
    const name = 'a'.repeat(1000000); let failed = 0;
    for (let i = 0; i < 50; i++) { try { await call(name, 'echo', {}); } catch (e) { failed++; } }
    while (true) { try { await call('com.example.stdio', 'echo', {text: 'again'}); } catch (e) {} }
    """
    async with gw.session() as s:
        started = anyio.current_time()
        r, out = await run(s, script)
        assert anyio.current_time() - started < 10, "answered soon after the time limit"
        assert r.is_error and out["error"]["code"] == "TIMEOUT", out["error"]
        assert len(json.dumps(out)) < 100_000, "names are cut in the report"
        assert all(len(c["app"]) <= 201 for c in out["calls"])
        await still_serves(s)
    assert not [h for h in wait_for(gw, 1) if h["args"].get("text") == "again" and h["status"] == "ok"]


async def test_arguments_that_are_not_json_are_refused_not_dropped(gw):
    gw.add_app("com.example.stdio")
    script = """
    try { await call('com.example.stdio', 'echo', {text: 'keep me', bad: '\\ud800'}); return 'ran'; }
    catch (e) { return [e.name, e.message]; }
    """
    async with gw.session() as s:
        r, out = await run(s, script)
        assert out["result"][0] == "TypeError" and "JSON" in out["result"][1], out
        assert out["calls"] == [], "nothing was called"
        await still_serves(s)


async def test_runs_at_once_are_bounded(gw):
    gw.add_app("com.example.stdio")
    gw.config(run={"timeoutMs": 3000})
    async with gw.session() as s:
        results = []

        async def one():
            results.append(await run(s, "const t = performance.now(); while (performance.now() - t < 1500) {} return 1;"))
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(one)
    codes = sorted((out.get("error") or {}).get("code", "ok") for _, out in results)
    assert codes == ["RATE_LIMITED", "RATE_LIMITED", "ok", "ok", "ok", "ok"], codes


async def test_guides_declare_the_tools_as_a_script_calls_them(gw):
    """An app's guide ends with its tools as TypeScript signatures, one tool's guide has its
    signature, and the gateway's guide declares the apps this client sees (not the hidden)."""
    gw.add_app("com.example.stdio")
    gw.add_app("com.example.hidden")
    gw.config(consent={"mode": "allow"}, clients={"typer": {"apps": {"deny": ["com.example.hidden"]}}})
    async with gw.session(client_name="typer") as s:
        guide = (await s.call_tool("aai_guide", {"app": "com.example.stdio"})).content[0].text
        assert "## In a script (`aai_run`)" in guide
        assert 'apps["com.example.stdio"]: {\n  echo(args: {text: string; n?: number; delay?: number}): Promise<object>;' in guide
        assert "  crash(args?: {}): Promise<unknown>;" in guide
        one = (await s.call_tool("aai_guide", {"app": "com.example.stdio", "tool": "fail"})).content[0].text
        assert 'apps["com.example.stdio"].fail(args?: {code?: unknown; message?: string}): Promise<unknown>' in one
        gateway = (await s.call_tool("aai_guide", {})).content[0].text
        assert "## The apps, as a script calls them" in gateway
        assert 'apps["com.example.stdio"]: {' in gateway and "com.example.hidden" not in gateway


def model_bytes(result):
    """What a client gives its model of a tool result: the text content (clients that read
    `structuredContent` instead get about as much)."""
    return sum(len(c.text.encode()) for c in result.content if getattr(c, "text", None))


async def test_a_script_returns_less_to_the_model_than_its_calls_one_by_one(gw, bus, httpbin):
    """The three-step task (echo a word, look it up on httpbin, greet it over D-Bus), done as
    three `aai_exec` calls and as one `aai_run`: the bytes the model reads back, each way.
    The figures are printed for the issue's note (`-s`)."""
    three_kinds(gw, bus, httpbin)
    async with gw.session() as s:
        single = []
        r = await s.call_tool("aai_exec", {"app": "com.example.stdio", "tool": "echo", "args": {"text": "owl"}})
        single.append(model_bytes(r))
        word = json.loads(r.content[0].text)["echo"]["text"]
        r = await s.call_tool("aai_exec", {"app": "org.httpbin", "tool": "get", "args": {"q": word}})
        single.append(model_bytes(r))
        q = json.loads(r.content[0].text)["args"]["q"]
        r = await s.call_tool("aai_exec", {"app": "com.example.jsonsvc", "tool": "greet", "args": {"name": q}})
        single.append(model_bytes(r))
        greeting = json.loads(r.content[0].text)["greeting"]
        script = """
        const e = await call("com.example.stdio", "echo", {text: input.word});
        const g = await call("org.httpbin", "get", {q: e.echo.text});
        return (await call("com.example.jsonsvc", "greet", {name: g.args.q})).greeting;
        """
        r = await s.call_tool("aai_run", {"script": script, "input": {"word": "owl"}})
        assert r.structured_content["result"] == greeting == "hello owl"
        scripted = model_bytes(r)
        structured = len(json.dumps(r.structured_content, separators=(",", ":")).encode())
    print(f"\nbytes back to the model: one by one {single} = {sum(single)}; as one script {scripted} "
          f"(its structuredContent, which some clients read instead: {structured})")
    assert scripted < sum(single), (single, scripted)
