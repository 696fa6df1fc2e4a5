"""An ACP agent that is not signed in, the way real agents answer before their login:
`initialize` advertises `authMethods`, and `session/new` fails with ACP's
auth-required error (-32000). The reference agents cannot be put in that state.

Run: python3 acp_login_agent.py  (ACP over stdio, newline-delimited JSON-RPC)
"""
import json
import sys


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if rid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": 1, "agentCapabilities": {},
            "authMethods": [{"id": "example-login", "name": "Log in with Example",
                             "description": "Run `example login` in a terminal"}]}})
    elif method in ("session/new", "session/load", "session/prompt"):
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": "Authentication required"}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})
