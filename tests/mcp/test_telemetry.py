"""OpenTelemetry traces (docs/telemetry.md) end to end: the gateway sends OTLP/HTTP
protobuf to a loopback collector that decodes every request with the official
`opentelemetry-proto` package. One `aai.call` span per call with its consent,
credentials and executor children; the caller's `traceparent` honoured; the context
passed on to a web app (httpbin echoes the headers it got) and to a downstream MCP server
(`_meta`); nothing of the arguments or secrets in what is sent. Hostile: a collector that
is down, one that hangs, malformed `traceparent`s.

Run: python3 -m pytest tests/mcp/test_telemetry.py -q
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import need_peer
from test_http import free_port, httpbin, wait_port, tool as web_tool, web_app  # noqa: F401  (httpbin is a fixture)

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

META_SERVER = Path(__file__).with_name("meta_server.py")
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TP = f"00-{TRACE}-{PARENT}-01"
SECRET_ARG = "SECRET-ARG-VALUE-9f3a"
OTLP_TOKEN = "otlp-t0ken-must-not-leak"


def _proto():
    try:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
        return ExportTraceServiceRequest
    except ImportError:
        need_peer(False, "PyPI package opentelemetry-proto")


class Collector:
    """A loopback OTLP/HTTP receiver: records each POST (path, headers, raw body);
    `hang` makes it never answer."""

    def __init__(self, hang=False):
        self.Request = _proto()
        self.posts = []
        self.hang = hang
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with collector.lock:
                    collector.posts.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if collector.hang:
                    time.sleep(120)
                    return
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def requests(self):
        with self.lock:
            posts = list(self.posts)
        out = []
        for path, headers, body in posts:
            assert path == "/v1/traces", path
            assert headers.get("content-type") == "application/x-protobuf", headers
            r = self.Request()
            r.ParseFromString(body)
            out.append(r)
        return out

    def spans(self):
        return [s for r in self.requests() for rs in r.resource_spans
                for ss in rs.scope_spans for s in ss.spans]

    def raw(self):
        with self.lock:
            return b"".join(b for _, _, b in self.posts)

    def wait(self, calls, seconds=10):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if len([s for s in self.spans() if s.name == "aai.call"]) >= calls:
                return
            time.sleep(0.05)
        raise AssertionError(f"fewer than {calls} call spans arrived: {[s.name for s in self.spans()]}")


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


def attrs(span):
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = getattr(v, v.WhichOneof("value"))
    return out


def telemetry(gw, endpoint, **more):
    otlp = {"endpoint": endpoint, "serviceName": "gw-under-test", "batchDelayMs": 20,
            "headers": {"Authorization": f"Bearer {OTLP_TOKEN}"}, **more}
    return {"otlp": otlp}


class Answers:
    def __init__(self, *answers):
        self.answers = list(answers)

    async def __call__(self, context, params):
        from mcp import types
        answer = self.answers.pop(0)
        if answer == "decline":
            return types.ElicitResult(action=answer)
        return types.ElicitResult(action="accept", content={"decision": answer})


async def test_one_span_per_call_with_its_children_and_nothing_secret(gw, collector):
    gw.config(consent={"mode": "prompt"}, telemetry=telemetry(gw, collector.url))
    gw.add_app("com.example.echo")
    echo = {"app": "com.example.echo", "tool": "echo", "args": {"text": SECRET_ARG}}
    async with gw.session(elicitation=Answers("once", "once", "decline"), client_name="agent-t") as s:
        # ok, under the caller's trace (with a tracestate)
        r = await s.call_tool("aai_exec", echo, meta={"traceparent": TP, "tracestate": "vendor=abc"})
        assert r.structured_content["echo"]["text"] == SECRET_ARG
        # the tool fails
        with pytest.raises(MCPError):
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "fail",
                                           "args": {"code": "BOOM", "message": SECRET_ARG}})
        # consent refused
        with pytest.raises(MCPError):
            await s.call_tool("aai_exec", echo)
        # no such tool, with a malformed traceparent (ignored: a new trace)
        with pytest.raises(MCPError):
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "nope", "args": {}},
                              meta={"traceparent": f"00-{TRACE.upper()}-{PARENT}-01"})
    # The session ended: the gateway sent what was queued before it exited.
    collector.wait(4, seconds=5)
    spans = collector.spans()
    calls = [s for s in spans if s.name == "aai.call"]
    assert len(calls) == 4, [attrs(c) for c in calls]
    by_id = {s.span_id: s for s in spans}
    children = {c.span_id: [s for s in spans if s.parent_span_id == c.span_id] for c in calls}
    for s in spans:
        if s.name != "aai.call":
            parent = by_id[s.parent_span_id]
            assert parent.name == "aai.call" and parent.trace_id == s.trace_id, s
            assert parent.start_time_unix_nano <= s.start_time_unix_nano <= s.end_time_unix_nano
            assert s.end_time_unix_nano <= parent.end_time_unix_nano + 1_000_000
    ok, failed, refused, missing = calls
    # ok: under the caller's trace, its parent the caller's span (a remote parent)
    assert ok.trace_id.hex() == TRACE and ok.parent_span_id.hex() == PARENT
    assert ok.trace_state == "vendor=abc"
    assert ok.flags & 0x300 == 0x300, hex(ok.flags)
    assert ok.kind == ok.SPAN_KIND_SERVER
    a = attrs(ok)
    assert a["aai.app.id"] == "com.example.echo" and a["aai.tool.name"] == "echo"
    assert a["aai.call.status"] == "ok" and "aai.error.code" not in a
    assert a["aai.client.name"] == "agent-t" and a["aai.transport"] == "stdio"
    assert a["aai.duration_ms"] >= 0
    assert ok.status.code == ok.status.STATUS_CODE_OK
    names = sorted(s.name for s in children[ok.span_id])
    assert names == ["aai.consent", "aai.credentials", "aai.execute"], names
    execute = next(s for s in children[ok.span_id] if s.name == "aai.execute")
    assert attrs(execute)["aai.executor"] == "stdio" and execute.kind == execute.SPAN_KIND_CLIENT
    consent = next(s for s in children[ok.span_id] if s.name == "aai.consent")
    assert attrs(consent)["aai.consent.outcome"] == "allowed"
    assert attrs(consent)["aai.consent.mode"] == "prompt"
    credentials = next(s for s in children[ok.span_id] if s.name == "aai.credentials")
    assert attrs(credentials)["aai.credentials.kind"] == "none"
    # a failing tool: an error with its code, and the executor's span says so too
    a = attrs(failed)
    assert a["aai.call.status"] == "error" and a["aai.error.code"]
    assert failed.status.code == failed.status.STATUS_CODE_ERROR
    assert failed.status.message == a["aai.error.code"]
    assert not failed.parent_span_id, "no caller context: a root span"
    execute = next(s for s in children[failed.span_id] if s.name == "aai.execute")
    assert execute.status.code == execute.status.STATUS_CODE_ERROR
    # consent refused: the consent span fails, nothing ran
    assert attrs(refused)["aai.error.code"] == "PERMISSION_DENIED", attrs(refused)
    names = [s.name for s in children[refused.span_id]]
    assert names == ["aai.consent"], names
    assert attrs(children[refused.span_id][0])["aai.consent.outcome"] == "refused"
    # no such tool: no children; the malformed traceparent was ignored
    assert attrs(missing)["aai.error.code"] == "TOOL_NOT_FOUND"
    assert children[missing.span_id] == []
    assert missing.trace_id.hex() != TRACE and not missing.parent_span_id
    # every call its own trace unless the caller said otherwise
    assert len({c.trace_id for c in calls}) == 4
    # The resource names the service.
    r = collector.requests()[0].resource_spans[0].resource
    res = {kv.key: kv.value.string_value for kv in r.attributes}
    assert res["service.name"] == "gw-under-test"
    # The collector got the configured header; the exported bytes carry no argument value
    # and no secret, and neither does any log.
    assert all(h.get("authorization") == f"Bearer {OTLP_TOKEN}" for _, h, _ in collector.posts)
    raw = collector.raw()
    for secret in (SECRET_ARG, "s3cr3t-should-not-leak", OTLP_TOKEN):
        assert secret.encode() not in raw, secret
    logs = (gw.tmp / "stderr.log").read_text()
    for f in (gw.home / "logs").glob("*"):
        logs += f.read_text(errors="replace")
    assert OTLP_TOKEN not in logs


async def test_context_reaches_web_apps_and_downstream_mcp_servers(gw, collector, httpbin):
    gw.config(consent={"mode": "allow"}, telemetry=telemetry(gw, collector.url))
    gw.put("org.httpbin", web_app("org.httpbin", httpbin, [web_tool("headers", "GET", "/headers")]))
    gw.put("dev.mcp.meta", {
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
        "app": {"id": "dev.mcp.meta", "name": {"en": "Meta"}, "defaultLang": "en",
                "description": "records _meta"},
        "execution": {"type": "mcp", "command": sys.executable, "args": [str(META_SERVER)]}})
    async with gw.session(client_name="agent-p") as s:
        r = await s.call_tool("aai_exec", {"app": "org.httpbin", "tool": "headers", "args": {}},
                              meta={"traceparent": TP, "tracestate": "vendor=abc"})
        web_headers = json.loads(r.content[0].text)["headers"]
        r = await s.call_tool("aai_exec", {"app": "dev.mcp.meta", "tool": "meta", "args": {"note": SECRET_ARG}},
                              meta={"traceparent": TP})
        meta = json.loads(r.content[0].text)
        collector.wait(2)
    spans = collector.spans()
    executes = {attrs(s)["aai.executor"]: s for s in spans if s.name == "aai.execute"}
    web = executes["http"]
    assert web.trace_id.hex() == TRACE
    assert web_headers["Traceparent"] == f"00-{TRACE}-{web.span_id.hex()}-01", web_headers
    assert web_headers["Tracestate"] == "vendor=abc"
    mcp = executes["mcp"]
    assert mcp.trace_id.hex() == TRACE
    assert meta["traceparent"] == f"00-{TRACE}-{mcp.span_id.hex()}-01", meta
    assert "tracestate" not in meta
    assert SECRET_ARG.encode() not in collector.raw()


async def test_without_telemetry_the_callers_context_passes_through(gw, httpbin):
    gw.put("org.httpbin", web_app("org.httpbin", httpbin, [web_tool("headers", "GET", "/headers")]))
    async with gw.session() as s:
        args = {"app": "org.httpbin", "tool": "headers", "args": {}}
        r = await s.call_tool("aai_exec", args, meta={"traceparent": TP})
        assert json.loads(r.content[0].text)["headers"]["Traceparent"] == TP
        r = await s.call_tool("aai_exec", args)
        assert "Traceparent" not in json.loads(r.content[0].text)["headers"]
        r = await s.call_tool("aai_exec", args, meta={"traceparent": "00-zz-00f067aa0ba902b7-01"})
        assert "Traceparent" not in json.loads(r.content[0].text)["headers"]


async def test_a_collector_that_is_down_never_slows_calls(gw):
    _proto()
    down = f"http://127.0.0.1:{free_port()}"
    gw.config(telemetry=telemetry(gw, down, timeoutSeconds=30))
    gw.add_app("com.example.echo")
    started = time.monotonic()
    async with gw.session() as s:
        for i in range(20):
            r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo",
                                               "args": {"text": f"t{i}"}})
            assert r.structured_content["echo"]["text"] == f"t{i}"
    assert time.monotonic() - started < 15
    log = (gw.tmp / "stderr.log").read_text()
    assert "trace spans" in log and "failed" in log, log[-2000:]
    assert OTLP_TOKEN not in log


def test_a_collector_that_hangs_does_not_hold_the_exit(gw):
    hanging = Collector(hang=True)
    try:
        # Nothing is sent before the exit (a long batch delay): the last export hangs.
        gw.config(telemetry=telemetry(gw, hanging.url, timeoutSeconds=60, shutdownSeconds=1,
                                      batchDelayMs=60000))
        gw.add_app("com.example.echo")
        started = time.monotonic()
        done = gw.run("call", "com.example.echo", "echo", '{"text": "x"}', timeout=30)
        took = time.monotonic() - started
        assert done.returncode == 0, done.stderr
        assert hanging.posts, "the exporter tried to send at exit"
        assert took < 6, f"the exit waited {took:.1f} s for a hanging collector"
        assert "did not take the last spans" in done.stderr, done.stderr
    finally:
        hanging.close()


def test_bad_telemetry_config_is_refused_by_name(gw):
    gw.config(telemetry={"otlp": {"endpoint": "http://collector.example:4318",
                                  "headers": {"Authorization": "Bearer hunter2-otlp"}}})
    done = gw.run("call", "com.example.echo", "echo", "{}")
    assert done.returncode != 0
    assert "/telemetry/otlp/endpoint" in done.stderr and "only over https" in done.stderr, done.stderr
    assert "hunter2-otlp" not in done.stderr


def test_over_http_the_traceparent_header_is_the_parent(gw, collector):
    from test_http_transport import INIT, post, web
    gw.config(telemetry=telemetry(gw, collector.url))
    gw.add_app("com.example.echo")
    other = "00-11112222333344445555666677778888-1111222233334444-01"

    def answer(r):
        text = r.text
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            text = [line[5:] for line in text.splitlines() if line.startswith("data:") and line[5:].strip()][-1]
        return json.loads(text)

    with web(gw) as (url, _):
        r = post(url, INIT)
        session = {"mcp-session-id": r.headers["mcp-session-id"]}
        post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)

        def call(n, headers, meta=None):
            params = {"name": "aai_exec", "arguments": {"app": "com.example.echo", "tool": "echo",
                                                        "args": {"text": SECRET_ARG}}}
            if meta:
                params["_meta"] = meta
            body = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
            got = answer(post(url, body, {**session, **headers}))
            assert got["result"]["structuredContent"]["echo"]["text"] == SECRET_ARG, got

        call(2, {"traceparent": TP, "tracestate": "vendor=abc"})
        call(3, {"traceparent": TP}, meta={"traceparent": other})  # _meta wins
        call(4, {"traceparent": TP.replace("-01", "-1")})  # malformed: ignored
        collector.wait(3)
    calls = [s for s in collector.spans() if s.name == "aai.call"]
    assert len(calls) == 3
    header, meta, malformed = calls
    assert header.trace_id.hex() == TRACE and header.parent_span_id.hex() == PARENT
    assert header.trace_state == "vendor=abc"
    assert attrs(header)["aai.transport"] == "http" and attrs(header)["aai.client.name"] == "raw"
    assert meta.trace_id.hex() == other.split("-")[1] and meta.parent_span_id.hex() == other.split("-")[2]
    assert malformed.trace_id.hex() != TRACE and not malformed.parent_span_id
    assert SECRET_ARG.encode() not in collector.raw()


async def test_streamable_http_servers_get_the_header_too(gw, collector):
    import subprocess
    port = free_port()
    server = subprocess.Popen([sys.executable, str(META_SERVER), "http", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, server)
        gw.config(consent={"mode": "allow"}, telemetry=telemetry(gw, collector.url))
        gw.put("dev.mcp.meta", {
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": "dev.mcp.meta", "name": {"en": "Meta"}, "defaultLang": "en",
                    "description": "records _meta and trace headers"},
            "execution": {"type": "mcp", "url": f"http://127.0.0.1:{port}/mcp"}})
        async with gw.session() as s:
            r = await s.call_tool("aai_exec", {"app": "dev.mcp.meta", "tool": "meta", "args": {}},
                                  meta={"traceparent": TP, "tracestate": "vendor=abc"})
            seen = json.loads(r.content[0].text)
            collector.wait(1)
    finally:
        server.kill()
        server.wait()
    execute = next(s for s in collector.spans() if s.name == "aai.execute")
    expected = f"00-{TRACE}-{execute.span_id.hex()}-01"
    assert seen["traceparent"] == expected and seen["header:traceparent"] == expected, seen
    assert seen["tracestate"] == "vendor=abc" and seen["header:tracestate"] == "vendor=abc", seen


async def test_a_script_run_is_one_span_with_a_child_per_call(gw, collector):
    """`aai_run`: one `aai.run` span under the caller's trace, and each call the script
    makes an `aai.call` span under it (a local parent); the same for a batch."""
    gw.config(consent={"mode": "allow"}, telemetry=telemetry(gw, collector.url))
    gw.add_app("com.example.echo")
    script = """
    await call("com.example.echo", "echo", {text: "one"});
    await call("com.example.echo", "echo", {text: "two"});
    return 2;
    """
    async with gw.session() as s:
        r = await s.call_tool("aai_run", {"script": script}, meta={"traceparent": TP})
        assert not r.is_error, r.structured_content
        run_id = r.structured_content["run"]
        b = await s.call_tool("aai_batch", {"calls": [
            {"app": "com.example.echo", "tool": "echo", "args": {"text": "three"}}]})
        batch_id = b.structured_content["batch"]
    collector.wait(3, seconds=5)
    spans = collector.spans()
    run = next(s for s in spans if s.name == "aai.run")
    batch = next(s for s in spans if s.name == "aai.batch")
    assert run.trace_id.hex() == TRACE and run.parent_span_id.hex() == PARENT
    assert attrs(run)["aai.run.id"] == run_id and attrs(run)["aai.run.calls"] == 2
    assert run.status.code == run.status.STATUS_CODE_OK
    calls = [s for s in spans if s.name == "aai.call"]
    under_run = [c for c in calls if c.parent_span_id == run.span_id]
    assert len(under_run) == 2 and all(c.trace_id == run.trace_id for c in under_run)
    # A local parent: not flagged as remote (bit 9 of the flags).
    assert all(c.flags & 0x300 == 0x100 for c in under_run), [hex(c.flags) for c in under_run]
    assert all(run.start_time_unix_nano <= c.start_time_unix_nano
               and c.end_time_unix_nano <= run.end_time_unix_nano for c in under_run)
    assert attrs(batch)["aai.batch.id"] == batch_id
    assert [c for c in calls if c.parent_span_id == batch.span_id], "the batch's call is under it"
