"""`/metrics` on the `--web` listener (Prometheus text format, behind the bearer token)
and rate limits (RATE_LIMITED with `retryAfterSecs`), through the Python MCP SDK over
Streamable HTTP; the scrape is read with `prometheus_client`'s own parser.

Run: python3 -m pytest tests/mcp -q -k metrics
"""
import json

import anyio
import pytest

from conftest import need_peer
from test_http_transport import web

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

TOKEN = "m3trics-t0ken-long-enough-to-pass"
SECRET_ARG = "arg-value-that-must-never-show-9f1c"


def parser():
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        need_peer(False, "PyPI package prometheus-client (its parser)")
    return text_string_to_metric_families


def scrape(url, token=TOKEN):
    import httpx2
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx2.get(url.replace("/mcp", "/metrics"), headers=headers, timeout=10)


def samples(text):
    """Every sample of a scrape as {(name, frozenset(labels)): value}, parsed by
    prometheus_client."""
    out = {}
    for family in parser()(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(found, name, **labels):
    return found.get((name, frozenset(labels.items())))


def client(url):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
    return streamable_http_client(url, http_client=http)


async def test_metrics_count_calls_by_catalog_names_behind_the_token(gw):
    from mcp import ClientSession
    parser()
    gw.extra_env["AAI_CONSENT_DIALOG"] = "none"
    gw.config(consent={"mode": "allow", "waitSeconds": 0},
              apps={"com.example.guarded": {"consent": "prompt"}})
    gw.add_app("com.example.echo")
    gw.add_app("com.example.guarded")
    with web(gw, token=TOKEN) as (url, _):
        # Without the token: 401, like every route.
        refused = scrape(url, token=None)
        assert refused.status_code == 401
        assert "aai_" not in refused.text
        assert scrape(url, token="wrong-token-of-some-length").status_code == 401
        async with client(url) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                for _ in range(2):
                    r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo",
                                                       "args": {"text": SECRET_ARG}})
                    assert r.structured_content["echo"]["text"] == SECRET_ARG
                # An app's own error, by its wire name.
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "fail",
                                                   "args": {"code": "TIMEOUT", "message": SECRET_ARG}})
                assert e.value.error.data["type"] == "TIMEOUT"
                # Made-up names share one series.
                for i in range(5):
                    with pytest.raises(MCPError) as e:
                        await s.call_tool("aai_exec", {"app": f"com.evil.made-up-{i}", "tool": f"t{i}",
                                                       "args": {"x": SECRET_ARG}})
                    assert e.value.error.data["type"] == "APP_NOT_FOUND"
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "made-up-tool",
                                                   "args": {}})
                assert e.value.error.data["type"] == "TOOL_NOT_FOUND"
                # Consent nobody can give here: refused, and counted as asked and unanswered.
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", {"app": "com.example.guarded", "tool": "echo",
                                                   "args": {"text": SECRET_ARG}})
                assert e.value.error.data["type"] == "CONSENT_REQUIRED"
                # Scraped while the session is open.
                during = scrape(url)
        after = scrape(url)
    assert during.status_code == 200, during.text
    assert during.headers["content-type"].startswith("text/plain; version=0.0.4"), during.headers
    found = samples(during.text)
    calls = "aai_calls_total"
    assert value(found, calls, app="com.example.echo", tool="echo", status="ok") == 2, during.text
    assert value(found, calls, app="com.example.echo", tool="fail", status="TIMEOUT") == 1
    assert value(found, calls, app="_unknown", tool="_unknown", status="APP_NOT_FOUND") == 5
    assert value(found, calls, app="com.example.echo", tool="_unknown", status="TOOL_NOT_FOUND") == 1
    assert value(found, calls, app="com.example.guarded", tool="echo", status="CONSENT_REQUIRED") == 1
    assert value(found, "aai_call_duration_seconds_count", app="com.example.echo", tool="echo") == 2
    assert value(found, "aai_call_duration_seconds_bucket", app="com.example.echo", tool="echo",
                  le="+Inf") == 2
    decisions = "aai_consent_decisions_total"
    assert value(found, decisions, app="com.example.guarded", decision="asked") == 1
    assert value(found, decisions, app="com.example.guarded", decision="unanswered") == 1
    assert value(found, decisions, app="com.example.echo", decision="mode_allow") == 3
    assert value(found, "aai_calls_in_flight") == 0
    assert value(found, "aai_mcp_sessions") >= 1, during.text
    # No argument value, no made-up name, no token, no caller.
    for never in [SECRET_ARG, "made-up", "com.evil", TOKEN, "@http"]:
        assert never not in during.text, never
    # The session ended (DELETE): the gauge follows.
    assert value(samples(after.text), "aai_mcp_sessions") == 0, after.text


async def test_rate_limits_refuse_with_retry_after_then_let_calls_through(gw):
    from mcp import ClientSession
    parser()
    gw.config(consent={"mode": "allow"},
              rateLimits={"perPerson": {"perMinute": 60, "burst": 3},
                          "perApp": {"com.example.slow": {"perMinute": 60, "burst": 1}}})
    gw.add_app("com.example.echo")
    gw.add_app("com.example.slow")
    echo = {"app": "com.example.echo", "tool": "echo", "args": {"text": "hi"}}
    with web(gw, token=TOKEN) as (url, _):
        async with client(url) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                # Both adapters started first, then the buckets left to fill again: the four
                # calls below must come faster than a token a second, and a cold start of an
                # adapter on a loaded machine is not.
                await s.call_tool("aai_exec", echo)
                await s.call_tool("aai_exec", {"app": "com.example.slow", "tool": "echo", "args": {"text": "w"}})
                await anyio.sleep(3.1)
                for _ in range(3):
                    await s.call_tool("aai_exec", echo)
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", echo)
                data = e.value.error.data
                assert data["type"] == "RATE_LIMITED" and e.value.error.code == -32015, data
                assert data["retryable"] is True
                assert data["scope"] == "person"
                assert isinstance(data["retryAfterSecs"], int) and data["retryAfterSecs"] >= 1, data
                assert "retry in" in data["detail"]
                # After the wait it says, a call goes through.
                await anyio.sleep(data["retryAfterSecs"] + 0.05)
                r = await s.call_tool("aai_exec", echo)
                assert r.structured_content["echo"]["text"] == "hi"
                # An app's own limit: all callers together.
                await anyio.sleep(2.1)
                await s.call_tool("aai_exec", {"app": "com.example.slow", "tool": "echo",
                                               "args": {"text": "1"}})
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", {"app": "com.example.slow", "tool": "echo",
                                                   "args": {"text": "2"}})
                data = e.value.error.data
                assert (data["type"], data["scope"], data["app"]) == ("RATE_LIMITED", "app", "com.example.slow")
                # A batch counts each call: two fit in the person bucket refilled since.
                await anyio.sleep(2.1)
                batch = await s.call_tool("aai_batch", {"calls": [echo, echo, echo, echo], "mode": "sequence"})
                text = json.dumps(batch.model_dump())
                assert "RATE_LIMITED" in text and "retryAfterSecs" in text, text
        found = samples(scrape(url).text)
    limited = "aai_rate_limited_calls_total"
    assert value(found, limited, app="com.example.echo", scope="person") >= 2, found
    assert value(found, limited, app="com.example.slow", scope="app") == 1
    assert value(found, "aai_calls_total", app="com.example.echo", tool="echo",
                 status="RATE_LIMITED") >= 2
    # The user's own call (`call` runs in its own process, with its own buckets) is not
    # limited by the server's.
    out = gw.run("call", "com.example.echo", "echo", '{"text": "mine"}')
    assert out.returncode == 0, out.stderr


async def test_downstream_server_states_are_read_at_each_scrape(gw):
    import sys
    from mcp import ClientSession
    from test_downstream import GROWING, mcp_app
    parser()
    mcp_app(gw, "dev.mcp.growing", {"command": sys.executable, "args": [str(GROWING)]})
    mcp_app(gw, "dev.mcp.broken", {"command": str(gw.tmp / "no-such-server")},
            tools=[{"name": "t", "description": "never runs",
                    "parameters": {"type": "object", "properties": {}}}])
    with web(gw, token=TOKEN) as (url, _):
        before = samples(scrape(url).text)
        assert not [k for k in before if k[0] == "aai_mcp_server_state"], "none used yet"
        async with client(url) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                r = await s.call_tool("aai_exec", {"app": "dev.mcp.growing", "tool": "grow",
                                                   "args": {"name": "x"}})
                assert not r.is_error, r
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", {"app": "dev.mcp.broken", "tool": "t", "args": {}})
                assert e.value.error.data["type"] == "SERVICE_UNAVAILABLE"
                found = samples(scrape(url).text)
    state = "aai_mcp_server_state"
    assert value(found, state, app="dev.mcp.growing", state="connected") == 1, found
    assert value(found, state, app="dev.mcp.growing", state="failing") == 0
    assert value(found, state, app="dev.mcp.broken", state="failing") == 1
    assert value(found, state, app="dev.mcp.broken", state="connected") == 0
