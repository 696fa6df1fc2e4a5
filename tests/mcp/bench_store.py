"""Calls per second over Streamable HTTP: one replica on SQLite, one on PostgreSQL, two on
PostgreSQL (clients split between them). Consent `allow`, the echo adapter; 8 clients,
each with its own session, 100 calls each. Then the history rows are counted.

Run (a figure, not a test): AAI_GATEWAY_BIN=target/debug/aai-gateway \
    target/test-venv/bin/python tests/mcp/bench_store.py
"""
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from conftest import Gateway
from pg import Postgres
from test_http_transport import web

BIN = Path(os.environ.get("AAI_GATEWAY_BIN", Path(__file__).parents[2] / "target/debug/aai-gateway"))
KEY = "6a1f0e9d8c7b6a5948372615f4e3d2c1b0a99887766554433221100ffeeddccb"
CLIENTS, CALLS = 8, 100


async def client(url, n):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    async with streamable_http_client(url) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for _ in range(n):
                await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "x"}})


async def run(urls):
    start = time.monotonic()
    await asyncio.gather(*[client(urls[i % len(urls)], CALLS) for i in range(CLIENTS)])
    return CLIENTS * CALLS / (time.monotonic() - start)


def gateway(tmp, name, pg=None):
    (tmp / name).mkdir()
    g = Gateway(BIN, tmp / name)
    if pg:
        g.config(store={"url": pg.url()})
        g.extra_env["AAI_STORE_KEY"] = KEY
    g.extra_env["AAI_LOG"] = "warn"
    g.add_app("com.example.echo")
    return g


def main():
    tmp = Path(tempfile.mkdtemp())
    pg = Postgres().init().start()
    pg.sql("CREATE DATABASE aai", db="postgres")
    try:
        with web(gateway(tmp, "sqlite")) as (u, _):
            asyncio.run(run([u]))  # warm-up
            print(f"1 replica, SQLite:     {asyncio.run(run([u])):.0f} calls/s")
        with web(gateway(tmp, "pg1", pg)) as (u, _):
            asyncio.run(run([u]))
            print(f"1 replica, PostgreSQL: {asyncio.run(run([u])):.0f} calls/s")
        a, b = gateway(tmp, "pga", pg), gateway(tmp, "pgb", pg)
        with web(a) as (ua, _), web(b) as (ub, _):
            asyncio.run(run([ua, ub]))
            print(f"2 replicas, PostgreSQL: {asyncio.run(run([ua, ub])):.0f} calls/s")
            time.sleep(2)
        print("history rows in PostgreSQL:", pg.sql("SELECT count(*) FROM aai_history")[0][0],
              f"(expected {4 * CLIENTS * CALLS})")
    finally:
        pg.remove()


main()
