"""A downstream MCP server of the 2025-11-25 revision, in plain JSON lines, whose resource
subscriptions the tests can see and break: `resources/subscribe`/`unsubscribe` keep a set
(the `subs` tool shows it), `fire {uri}` announces a change, `crash` exits. With
`REFUSE=1` it refuses every subscription, naming `$SERVER_TOKEN` in its error (a server
that echoes a secret).

Run: python3 subscribing_server.py  (stdio)
"""
import json
import os
import sys

subscribed = set()
TOOLS = [{"name": n, "description": d, "inputSchema": {"type": "object", "properties": p}} for n, d, p in [
    ("fire", "Announces that `uri` changed", {"uri": {"type": "string"}}),
    ("subs", "The resources subscribed to", {}),
    ("crash", "Exits at once", {}),
]]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(message):
    method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
    if rid is None:
        return
    ok = lambda result: send({"jsonrpc": "2.0", "id": rid, "result": result})  # noqa: E731
    error = lambda text: send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": text}})  # noqa: E731
    if method == "initialize":
        return ok({"protocolVersion": "2025-11-25", "serverInfo": {"name": "subscribing", "version": "1"},
                   "capabilities": {"tools": {}, "resources": {"subscribe": True}}})
    if method == "tools/list":
        return ok({"tools": TOOLS})
    if method == "resources/list":
        return ok({"resources": [{"uri": "note://a", "name": "a"}, {"uri": "note://x/events/today", "name": "today"}]})
    if method == "resources/read":
        return ok({"contents": [{"uri": params.get("uri"), "text": "content of " + str(params.get("uri"))}]})
    if method == "resources/subscribe":
        if os.environ.get("REFUSE"):
            return error("denied " + os.environ.get("SERVER_TOKEN", ""))
        subscribed.add(params.get("uri"))
        return ok({})
    if method == "resources/unsubscribe":
        subscribed.discard(params.get("uri"))
        return ok({})
    if method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "fire":
            send({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": args.get("uri")}})
            return ok({"content": [{"type": "text", "text": "fired"}]})
        if name == "subs":
            return ok({"content": [{"type": "text", "text": json.dumps(sorted(subscribed))}]})
        if name == "crash":
            os._exit(1)
    if method == "ping":
        return ok({})
    send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


for line in sys.stdin:
    if line.strip():
        answer(json.loads(line))
