"""Usage-ranked discovery: `aai_search` ranks apps of equal relevance by this client's own
use, and an app's guide lists the tools it uses most first. Another client keeps the
plain order, and the ranking outlives the process (it is read back from the history).

Run: python3 -m pytest tests/mcp -q -k usage
"""
import pytest

from conftest import STANDARD_TOOLS, tool

anyio = pytest.importorskip("anyio")

pytestmark = pytest.mark.anyio

TOOLS = [tool("alpha"), tool("beta"), *[t for t in STANDARD_TOOLS if t["name"] in ("progress", "echo")]]


def tools_in_guide(text):
    return [line[5:-1] for line in text.splitlines() if line.startswith("### `")]


async def search(s, query):
    r = await s.call_tool("aai_search", {"query": query})
    return [hit["app"] for hit in r.structured_content["results"]]


async def test_search_and_guides_follow_this_clients_own_use(gw):
    for app in ("com.example.first", "com.example.second"):
        gw.add_app(app, name={"en": "Ledger"}, description="Keeps a ledger", tools=TOOLS)
    async with gw.session(client_name="user-a") as s:
        # Equal relevance: by id.
        assert await search(s, "ledger") == ["com.example.first", "com.example.second"]
        guide = (await s.call_tool("aai_guide", {"app": "com.example.second"})).content[0].text
        assert tools_in_guide(guide) == ["alpha", "beta", "echo", "progress"]
        assert "uses most come first" not in guide
        for _ in range(3):
            await s.call_tool("aai_exec", {"app": "com.example.second", "tool": "echo", "args": {"text": "x"}})
        await s.call_tool("aai_exec", {"app": "com.example.second", "tool": "progress", "args": {}})
        # Used since: the second comes first, and its guide starts with what was used.
        assert await search(s, "ledger") == ["com.example.second", "com.example.first"]
        guide = (await s.call_tool("aai_guide", {"app": "com.example.second"})).content[0].text
        assert tools_in_guide(guide) == ["echo", "progress", "alpha", "beta"]
        assert "The tools this client uses most come first." in guide
        # A script's search ranks the same way.
        r = await s.call_tool("aai_run", {"script": "return (await search('ledger')).map(a => a.app);"})
        assert r.structured_content["result"] == ["com.example.second", "com.example.first"]
        # Relevance still comes first: a better match is not pushed down by use.
        assert (await search(s, "com.example.first"))[0] == "com.example.first"

    # Another client has its own use (none).
    async with gw.session(client_name="user-b") as s:
        assert await search(s, "ledger") == ["com.example.first", "com.example.second"]
        guide = (await s.call_tool("aai_guide", {"app": "com.example.second"})).content[0].text
        assert tools_in_guide(guide) == ["alpha", "beta", "echo", "progress"]

    # A new process reads the first client's use back from the history.
    async with gw.session(client_name="user-a") as s:
        assert await search(s, "ledger") == ["com.example.second", "com.example.first"]
        guide = (await s.call_tool("app_com_example_second", {})).content[0].text
        assert tools_in_guide(guide)[:2] == ["echo", "progress"]
