"""ACP agents in states the reference agents cannot be put in. Usage:
`acp_scripted_agent.py MODE [ARG]` (ACP over stdio, newline-delimited JSON-RPC).

- `login`: not signed in, the way real agents answer before their login: `initialize`
  advertises `authMethods`, and `session/new` fails with ACP's auth-required error (-32000).
- `asks N`: each prompt asks permission N times (titles with control characters), then once
  with no options at all, and answers with the outcomes it got.
- `closes PIDFILE`: closes its stdout after `initialize` but keeps running (pid in PIDFILE).
- `silent`: never answers `initialize`.
- `version`: answers `initialize` with a string `protocolVersion`.
"""
import json
import os
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "login"
ARG = sys.argv[2] if len(sys.argv) > 2 else None
next_id = 1000


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def ask(session, title, options):
    """Sends a permission request and waits for its answer (the only thing that comes in
    during a prompt here)."""
    global next_id
    next_id += 1
    send({"jsonrpc": "2.0", "id": next_id, "method": "session/request_permission", "params": {
        "sessionId": session, "options": options,
        "toolCall": {"toolCallId": f"c{next_id}", "title": title, "kind": "edit"}}})
    while True:
        answer = json.loads(sys.stdin.readline())
        if answer.get("id") == next_id and "method" not in answer:
            return answer.get("result", {}).get("outcome", {})


OPTIONS = [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
           {"optionId": "no", "name": "Reject", "kind": "reject_once"}]

for line in sys.stdin:
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if rid is None:
        continue
    if method == "initialize":
        if MODE == "silent":
            continue
        info = {"protocolVersion": "1.0" if MODE == "version" else 1, "agentCapabilities": {}}
        if MODE == "login":
            info["authMethods"] = [{"id": "example-login", "name": "Log in with Example",
                                    "description": "Run `example login` in a terminal"}]
        send({"jsonrpc": "2.0", "id": rid, "result": info})
        if MODE == "closes":
            with open(ARG, "w") as f:
                f.write(str(os.getpid()))
            os.close(1)
            while True:
                time.sleep(1)
    elif MODE == "login" and method in ("session/new", "session/load", "session/prompt"):
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": "Authentication required"}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        session = request["params"]["sessionId"]
        outcomes = [ask(session, f"edit file {i}\x1b[31m\r\nInjected: yes\x07", OPTIONS)
                    for i in range(int(ARG or 1))]
        outcomes.append(ask(session, "no options", []))
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": json.dumps(outcomes)}}}})
        send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})
