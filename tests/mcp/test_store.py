"""The shared store: `--web` gateways on one PostgreSQL (config `store`). Consent grants,
pending consent, history and credentials live in the database; credentials are sealed
with the store key; two replicas answer each other's pending calls; PostgreSQL dying
mid-call loses no history. Hostile starts: no key, a wrong key, a database newer than the
binary, an unreachable database.

Peers: Debian's `postgresql` (initdb, postgres, psql), started here on a loopback port.
Run: python3 -m pytest tests/mcp/test_store.py -q -s
"""
import json
import re
import statistics
import subprocess
import time

import anyio
import pytest

from conftest import need_peer
from pg import PASSWORD, Postgres, bin_dir, free_port, psql
from test_auth import auth_set
from test_http import httpbin, web_app, tool  # noqa: F401  (httpbin is a fixture)
from test_ui import call_over_http, csrf_of, get, post, ui_of

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

KEY = "6a1f0e9d8c7b6a5948372615f4e3d2c1b0a99887766554433221100ffeeddccb"
OTHER_KEY = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdee"
SECRET = "sk-live-Very-Secret-Api-Key-42"


@pytest.fixture
def pg():
    need_peer(bin_dir() is not None and psql() is not None,
              "Debian package postgresql (initdb, postgres, psql)")
    cluster = Postgres().init().start()
    cluster.sql("CREATE DATABASE aai", db="postgres")
    try:
        yield cluster
    finally:
        cluster.remove()


def on_store(gw, pg, **more):
    gw.config(store={"url": pg.url(), "timeoutSeconds": 3, "connectTimeoutSeconds": 2}, **more)
    gw.extra_env["AAI_STORE_KEY"] = KEY


def web(gw):
    from test_http_transport import web as serve
    return serve(gw)


def replica(binary, tmp_path, name, pg, **more):
    """Another gateway home on the same database (a second replica)."""
    from conftest import Gateway
    (tmp_path / name).mkdir()
    other = Gateway(binary, tmp_path / name)
    on_store(other, pg, **more)
    other.add_app("com.example.echo")
    return other


def pending_on(ui, wanted=1, seconds=15):
    """The pending rows a UI's consent page lists (waits for `wanted`), and its CSRF token."""
    deadline = time.monotonic() + seconds
    while True:
        page = get(ui + "/consent").text
        ids = re.findall(r'<tr id="pending-(\d+)"', page)
        if len(ids) >= wanted or time.monotonic() > deadline:
            return ids, csrf_of(page), page
        time.sleep(0.05)


async def timed_call(url, name, done):
    """One aai_exec over HTTP; `done["at"]` is when its result arrived (before the session
    closes)."""
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, client_info=types.Implementation(name=name, version="1")) as s:
            await s.initialize()
            r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "hi"}})
            done["at"] = time.monotonic()
            return r


def no_password(gw, *texts):
    for t in texts:
        assert PASSWORD not in t
    for path in (gw.home / "logs").rglob("*"):
        assert PASSWORD not in path.read_text(errors="replace"), path


async def test_one_gateway_keeps_consent_history_and_credentials_in_postgres(gw, pg, httpbin):
    on_store(gw, pg, consent={"mode": "prompt", "waitSeconds": 30})
    gw.add_app("com.example.echo")
    app = web_app("com.example.keyed", httpbin, [tool("bearer", "GET", "/bearer")])
    app["auth"] = {"type": "apiKey", "apiKey": {"location": "header", "name": "Authorization",
                                                "prefix": "Bearer", "obtainUrl": "https://example.com/keys"}}
    gw.put("com.example.keyed", app)
    # The credential, through the CLI, sealed in the table.
    p = auth_set(gw, "com.example.keyed", SECRET)
    assert p.returncode == 0, p.stderr
    rows = pg.sql("SELECT account, encode(nonce, 'hex'), encode(sealed, 'hex'), key_id FROM aai_credentials")
    assert [r[0] for r in rows] == ["com.example.keyed"]
    assert SECRET.encode().hex() not in rows[0][2] and len(rows[0][1]) == 48
    dump = subprocess.run([str(bin_dir() / "pg_dump"), "-h", str(pg.dir),
                           "-p", str(pg.port), "-U", "aai", "aai"], capture_output=True, timeout=60)
    assert dump.returncode == 0 and SECRET.encode() not in dump.stdout
    assert pg.sql("SELECT version FROM aai_schema_migrations ORDER BY 1") == [["1"], ["2"], ["3"], ["4"]]
    with web(gw) as (url, proc):
        ui = ui_of(url)
        # A call that needs consent waits; the UI (reading PostgreSQL) approves it.
        async with anyio.create_task_group() as tg:
            result = {}

            async def call():
                result["r"] = await call_over_http(url)
            tg.start_soon(call)
            ids, csrf, page = await anyio.to_thread.run_sync(pending_on, ui)
            assert len(ids) == 1 and "ui-test@http" in page
            assert pg.sql("SELECT waiting, app FROM aai_pending") == [["t", "com.example.echo"]]
            r = await anyio.to_thread.run_sync(post, ui + "/consent/answer",
                                               {"csrf": csrf, "id": ids[0], "choice": "tool"})
            assert r.status_code == 303
        assert json.loads(result["r"].content[0].text)["echo"]["text"] == "hi"
        assert pg.sql("SELECT count(*) FROM aai_pending") == [["0"]]
        with anyio.fail_after(10):
            await call_over_http(url)  # remembered: no question
        grants = pg.sql("SELECT caller, app, tool FROM aai_grants")
        # The answer named the adapter's command: it may start in every run too.
        assert sorted(grants) == [["*", "com.example.echo", "@start"], ["ui-test@http", "com.example.echo", "echo"]]
        # The credential opens for the call (allowed in the UI first).
        await anyio.to_thread.run_sync(lambda: gw.run("consent", "grant", "com.example.keyed",
                                                      "--caller", "ui-test@http", check=True))
        deadline = time.monotonic() + 10
        while True:
            r = await call_over_http(url, "bearer", "com.example.keyed", {})
            if not isinstance(r, MCPError) or time.monotonic() > deadline:
                break
            await anyio.sleep(0.2)
        assert not isinstance(r, MCPError), r
        assert json.loads(r.content[0].text)["token"] == SECRET
        # History: in PostgreSQL, shown by the UI and the CLI.
        deadline = time.monotonic() + 10
        while int(pg.sql("SELECT count(*) FROM aai_history")[0][0]) < 3 and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        assert int(pg.sql("SELECT count(*) FROM aai_history")[0][0]) == 3
        page = get(ui + "/history").text
        assert "com.example.keyed" in page and SECRET not in page
        calls = json.loads(gw.run("history", "--json").stdout)["calls"]
        assert [c["tool"] for c in calls] == ["bearer", "echo", "echo"]
        listed = json.loads(gw.run("consent", "list", "--json").stdout)["grants"]
        assert {(g["app"], g["tool"]) for g in listed} == {("com.example.echo", "@start"), ("com.example.echo", "echo"),
                                                           ("com.example.keyed", "*")}
        # The pages say where things live, without the password.
        for path in ("/config", "/credentials"):
            text = get(ui + path).text
            assert "PostgreSQL" in text and PASSWORD not in text and "aai:***@127.0.0.1" in text, path
    assert not (gw.home / "state.db").exists() or b"ui-test@http" not in (gw.home / "state.db").read_bytes()
    # The CLI over the Unix socket (peer-less trust auth there), without a key: grants and
    # history need none.
    from urllib.parse import quote
    gw.config(store={"url": f"postgres://aai@{quote(str(pg.dir), safe='')}:{pg.port}/aai"})
    p = subprocess.run(
        [str(gw.binary), "--home", str(gw.home), "consent", "list", "--json"],
        env={k: v for k, v in gw.env().items() if k != "AAI_STORE_KEY"}, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert len(json.loads(p.stdout)["grants"]) == 3  # the two above and the adapter's start
    out = proc.stderr.read() if proc.stderr else ""
    no_password(gw, out)


async def test_an_approval_on_one_replica_releases_a_call_waiting_on_another(gw, pg, binary, tmp_path):
    on_store(gw, pg, consent={"mode": "prompt", "waitSeconds": 60})
    gw.add_app("com.example.echo")
    other = replica(binary, tmp_path, "b", pg, consent={"mode": "prompt", "waitSeconds": 60})
    latencies = {"A": [], "B": []}
    with web(gw) as (url_a, _), web(other) as (url_b, _):
        ui_a = ui_of(url_a)
        for i in range(10):
            # Answered on the other replica (A) or, for comparison, on B itself.
            where = "A" if i % 2 == 0 else "B"
            ui = ui_a if where == "A" else ui_of(url_b)
            async with anyio.create_task_group() as tg:
                done = {}

                async def call_b():
                    done["r"] = await timed_call(url_b, f"b{i}", done)
                tg.start_soon(call_b)
                ids, csrf, page = await anyio.to_thread.run_sync(pending_on, ui)
                assert len(ids) == 1 and f"b{i}@http" in page, page
                sent = time.monotonic()
                r = await anyio.to_thread.run_sync(post, ui + "/consent/answer",
                                                   {"csrf": csrf, "id": ids[0], "choice": "once"})
                assert r.status_code == 303
            assert json.loads(done["r"].content[0].text)["echo"]["text"] == "hi"
            latencies[where].append(done["at"] - sent)
        # With every listening connection cut, an answer still arrives: the owner polls
        # (and takes what waits when it listens again).
        async with anyio.create_task_group() as tg:
            done = {}

            async def call_b():
                done["r"] = await timed_call(url_b, "unheard", done)
            tg.start_soon(call_b)
            ids, csrf, _ = await anyio.to_thread.run_sync(pending_on, ui_a)
            cut = pg.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN aai_gateway'")
            assert len(cut) == 2, cut
            sent = time.monotonic()
            r = await anyio.to_thread.run_sync(post, ui_a + "/consent/answer",
                                               {"csrf": csrf, "id": ids[0], "choice": "once"})
            assert r.status_code == 303
        unheard = done["at"] - sent
        assert json.loads(done["r"].content[0].text)["echo"]["text"] == "hi"
        assert unheard < 5, unheard
        # A grant from the command line (through the database) releases a waiting call too.
        async with anyio.create_task_group() as tg:
            done = {}

            async def call_b():
                done["r"] = await call_over_http(url_b, name="cli")
                done["at"] = time.monotonic()
            tg.start_soon(call_b)
            await anyio.to_thread.run_sync(pending_on, ui_a)
            sent = time.monotonic()
            # An adapter's start is granted with its tools (the question named it).
            p = await anyio.to_thread.run_sync(lambda: gw.run("consent", "grant", "com.example.echo",
                                                              "--start", "--caller", "cli@http"))
            assert p.returncode == 0, p.stderr
        cli_latency = done["at"] - sent
        assert json.loads(done["r"].content[0].text)["echo"]["text"] == "hi"
        # A denial on B of a call waiting on A.
        async with anyio.create_task_group() as tg:
            done = {}

            async def call_a():
                done["r"] = await call_over_http(url_a, name="denied")
            tg.start_soon(call_a)
            ids, csrf, _ = await anyio.to_thread.run_sync(pending_on, ui_of(url_b))
            post(ui_of(url_b) + "/consent/answer", {"csrf": csrf, "id": ids[0], "choice": "deny"})
        assert isinstance(done["r"], MCPError) and done["r"].error.code == -32004
    cross, local = statistics.median(latencies["A"]), statistics.median(latencies["B"])
    print(f"\nrelease of a call waiting on B, from the answer's POST to the call's result: answered on A "
          f"(another replica) median {cross * 1000:.1f} ms (max {max(latencies['A']) * 1000:.1f}), answered on B "
          f"itself median {local * 1000:.1f} ms (max {max(latencies['B']) * 1000:.1f}), 5 each; "
          f"a CLI grant → release {cli_latency * 1000:.1f} ms; with the listeners cut → {unheard * 1000:.0f} ms")
    assert cross < 1.0, latencies
    assert pg.sql("SELECT count(*) FROM aai_history") == [["13"]]


async def test_postgres_dying_mid_call_loses_no_history(gw, pg):
    on_store(gw, pg, consent={"mode": "allow"}, apps={"com.example.ask": {"consent": "prompt"}})
    gw.add_app("com.example.echo")
    gw.add_app("com.example.ask")
    # The adapter may start (the user allowed its command); its tools still ask.
    assert gw.run("consent", "grant", "com.example.ask", "--start").returncode == 0
    with web(gw) as (url, proc):
        await call_over_http(url)
        async with anyio.create_task_group() as tg:
            done = {}

            async def slow():
                done["r"] = await call_over_http(url, "sleep", args={"seconds": 1.5})
            tg.start_soon(slow)
            await anyio.sleep(0.5)
            await anyio.to_thread.run_sync(pg.crash)
        assert not isinstance(done["r"], MCPError), done["r"]
        # While it is down: calls that need no store run; their history waits.
        for _ in range(5):
            r = await call_over_http(url)
            assert json.loads(r.content[0].text)["echo"]["text"] == "hi"
        # A call that needs the store (its consent question is written there) fails cleanly.
        started = time.monotonic()
        e = await call_over_http(url, app="com.example.ask")
        assert isinstance(e, MCPError) and e.error.code == -32016, e
        assert time.monotonic() - started < 10
        assert "PostgreSQL store" in e.error.message and PASSWORD not in e.error.message
        # The UI says so rather than hang; a grant given there now holds for this run.
        page = get(ui_of(url) + "/consent")
        assert page.status_code == 200
        r = post(ui_of(url) + "/consent/grant", {"csrf": csrf_of(page.text), "caller": "ui-test@http",
                                                 "app": "com.example.ask", "tool": "echo"})
        assert r.status_code == 303
        r = await call_over_http(url, app="com.example.ask")
        assert not isinstance(r, MCPError), r
        await anyio.to_thread.run_sync(pg.start)
        deadline = time.monotonic() + 30
        count = 0
        while time.monotonic() < deadline:
            try:
                count = int(pg.sql("SELECT count(*) FROM aai_history")[0][0])
            except AssertionError:
                count = -1
            if count >= 9:
                break
            await anyio.sleep(0.2)
        # 1 + the slow call + 5 + the refused one + the granted one: every record, once.
        assert count == 9, count
        assert pg.sql("SELECT count(*) FROM (SELECT replica, seq FROM aai_history GROUP BY 1, 2 HAVING count(*) > 1) d") == [["0"]]
        # The grant given during the outage still holds after the reload that followed it.
        await anyio.sleep(1.5)
        r = await call_over_http(url, app="com.example.ask")
        assert not isinstance(r, MCPError), r
        # And the store works again for calls that need it.
        e = await call_over_http(url, app="com.example.ask", name="another")
        assert isinstance(e, MCPError) and e.error.code == -32014, e
    no_password(gw, proc.stderr.read() if proc.stderr else "")


async def test_a_hanging_postgres_fails_what_needs_it_within_the_deadline(gw, pg):
    """A database that accepts nothing and answers nothing (every process stopped): a call
    that needs it fails after `store.timeoutSeconds`, calls that do not run, and history
    is written when it answers again."""
    on_store(gw, pg, consent={"mode": "allow"}, apps={"com.example.ask": {"consent": "prompt"}})
    gw.add_app("com.example.echo")
    gw.add_app("com.example.ask")
    with web(gw) as (url, _):
        await call_over_http(url)
        pg.freeze()
        try:
            with anyio.fail_after(10):
                r = await call_over_http(url)
            assert json.loads(r.content[0].text)["echo"]["text"] == "hi"
            started = time.monotonic()
            with anyio.fail_after(20):
                e = await call_over_http(url, app="com.example.ask")
            took = time.monotonic() - started
            assert isinstance(e, MCPError) and e.error.code == -32016, e
            # The connect (2 s) or statement (3 s) deadline, whichever it met.
            assert re.search(r"did not answer within [23] s", e.error.message), e.error.message
            assert 1.5 < took < 10, took
        finally:
            pg.freeze(False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and pg.sql("SELECT count(*) FROM aai_history") != [["3"]]:
            await anyio.sleep(0.2)
        assert pg.sql("SELECT count(*) FROM aai_history") == [["3"]]


def start_fails(gw, **env):
    p = subprocess.run([str(gw.binary), "--home", str(gw.home), "--web", "--listen", f"127.0.0.1:{free_port()}"],
                       env=gw.env(**env), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode != 0, p.stderr
    assert PASSWORD not in p.stderr
    return p.stderr


async def test_hostile_starts_are_refused_with_a_clear_error(gw, pg, httpbin):
    gw.add_app("com.example.echo")
    on_store(gw, pg)
    # No key.
    gw.extra_env.pop("AAI_STORE_KEY")
    err = start_fails(gw)
    assert "needs a key" in err and "AAI_STORE_KEY" in err, err
    # A key that is not one (and is never echoed).
    err = start_fails(gw, AAI_STORE_KEY="not-a-key-but-a-secret-phrase")
    assert "AAI_STORE_KEY" in err and "not-a-key-but-a-secret-phrase" not in err, err
    # A key file that does not exist.
    gw.config(store={"url": pg.url(), "keyFile": str(gw.tmp / "nokey")})
    err = start_fails(gw)
    assert "cannot read the store key file" in err, err
    # An unreachable database: refused within the connect timeout, password not shown.
    gw.config(store={"url": f"postgres://aai:{PASSWORD}@127.0.0.1:{free_port()}/aai?sslmode=disable",
                     "connectTimeoutSeconds": 2})
    started = time.monotonic()
    err = start_fails(gw, AAI_STORE_KEY=KEY)
    assert "is not usable" in err and "aai:***@127.0.0.1" in err, err
    assert time.monotonic() - started < 20
    # A bad URL in the config: a config error that does not show the password.
    gw.config(store={"url": f"mysql://aai:{PASSWORD}@127.0.0.1/aai"})
    err = start_fails(gw, AAI_STORE_KEY=KEY)
    assert "not a PostgreSQL URL" in err, err
    gw.config(store={"url": pg.url()}, credentials={"store": "file"})
    assert "cannot both be set" in start_fails(gw, AAI_STORE_KEY=KEY)
    # A wrong key: the stored credential is named, never garbage.
    app = web_app("com.example.keyed", httpbin, [tool("bearer", "GET", "/bearer")])
    app["auth"] = {"type": "apiKey", "apiKey": {"location": "header", "name": "Authorization", "prefix": "Bearer",
                                                "obtainUrl": "https://example.com/keys"}}
    gw.put("com.example.keyed", app)
    gw.put("com.example.other", dict(app, app=dict(app["app"], id="com.example.other")))
    on_store(gw, pg)
    assert auth_set(gw, "com.example.keyed", SECRET, AAI_STORE_KEY=KEY).returncode == 0
    p = gw.run("call", "com.example.keyed", "bearer", "{}")
    assert p.returncode == 0 and SECRET in p.stdout, p.stderr
    gw.extra_env["AAI_STORE_KEY"] = OTHER_KEY
    p = gw.run("call", "com.example.keyed", "bearer", "{}")
    assert p.returncode != 0 and SECRET not in p.stdout + p.stderr
    assert "encrypted with another key" in p.stdout + p.stderr, p.stdout + p.stderr
    # A row moved onto another account does not open (the account is bound to it).
    gw.extra_env["AAI_STORE_KEY"] = KEY
    assert auth_set(gw, "com.example.other", "another-value-entirely").returncode == 0
    pg.sql("DELETE FROM aai_credentials WHERE account = 'com.example.keyed'")
    pg.sql("UPDATE aai_credentials SET account = 'com.example.keyed' WHERE account = 'com.example.other'")
    p = gw.run("call", "com.example.keyed", "bearer", "{}")
    out = p.stdout + p.stderr
    assert "cannot be decrypted" in out and SECRET not in out and "another-value-entirely" not in out, out
    # A database a newer gateway migrated.
    pg.sql("INSERT INTO aai_schema_migrations (version, description) VALUES (99, 'from the future')")
    err = start_fails(gw)
    assert "schema version 99, newer than this gateway knows (4)" in err, err


async def test_replicas_starting_together_migrate_once(gw, pg):
    """Eight processes migrate a fresh database at the same moment: the advisory lock lets
    one apply the migrations; every other waits and finds nothing to do."""
    pg.sql("CREATE DATABASE race", db="postgres")
    gw.config(store={"url": pg.url(db="race")})
    env = {k: v for k, v in gw.env().items() if k != "AAI_STORE_KEY"}
    procs = [subprocess.Popen([str(gw.binary), "--home", str(gw.home), "consent", "list", "--json"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert json.loads(out) == {"grants": []}
    assert pg.sql("SELECT version, description FROM aai_schema_migrations ORDER BY 1", db="race") == [
        ["1", "grants, pending consent, history, credentials"],
        ["2", "tool definitions of grants, fingerprints in history"],
        ["3", "the script run or batch of each call in history"],
        ["4", "rate limit buckets shared by the replicas"]]
    tables = pg.sql("SELECT tablename FROM pg_tables WHERE tablename LIKE 'aai_%' ORDER BY 1", db="race")
    assert [t[0] for t in tables] == ["aai_credentials", "aai_grants", "aai_history", "aai_pending",
                                      "aai_rate_buckets", "aai_schema_migrations"]


async def test_two_replicas_share_one_rate_limit(gw, pg, binary, tmp_path):
    """An app limited to 10 calls a minute, behind two replicas on one database: of 40
    calls spread over both, at most 10 pass (plus what the bucket refills while they are
    made: 10 a minute is one every 6 s), where each replica's own buckets would pass 20."""
    limits = {"perApp": {"com.example.echo": {"perMinute": 10, "burst": 10}}}
    on_store(gw, pg, consent={"mode": "allow"}, rateLimits=limits)
    gw.add_app("com.example.echo")
    other = replica(binary, tmp_path, "second", pg, consent={"mode": "allow"}, rateLimits=limits)
    started = time.monotonic()
    with web(gw) as (url_a, _), web(other) as (url_b, _):
        results = []
        for i in range(40):
            results.append(await call_over_http(url_a if i % 2 == 0 else url_b, name=f"client-{i}"))
        took = time.monotonic() - started
        # The database gone: a replica counts in its own buckets (full: its first calls
        # pass), waiting out the store's deadline once, not on every call.
        await anyio.to_thread.run_sync(pg.crash)
        began = time.monotonic()
        for _ in range(3):
            r = await call_over_http(url_a, name="during-outage")
            assert not isinstance(r, MCPError), r
        assert time.monotonic() - began < 10
        await anyio.to_thread.run_sync(pg.start)
    passed = [r for r in results if not isinstance(r, MCPError)]
    refused = [r for r in results if isinstance(r, MCPError)]
    allowance = int(took / 6) + 1
    assert 10 <= len(passed) <= 10 + allowance, (len(passed), took)
    assert all(e.error.code == -32015 and e.error.data["scope"] == "app" for e in refused)
    # Both replicas passed some and refused some: the bucket is one.
    by_replica = [[not isinstance(r, MCPError) for r in results[k::2]] for k in (0, 1)]
    assert all(any(b) for b in by_replica) and all(not all(b) for b in by_replica), by_replica
    assert int(pg.sql("SELECT count(*) FROM aai_rate_buckets WHERE scope = 'app'")[0][0]) == 1
