"""Protocol hygiene (issue 27): the fields of a protocol revision appear only in sessions
that negotiated it. One raw stdio session per revision before 2026-07-28 runs `aai_batch`
with progress (and, from 2025-06-18, a consent question by elicitation); every message the
gateway sends is checked against that revision's JSON Schema (`schemas/`, the
specification's own), and strictly: a key the revision does not define is a failure
(`_meta` and free-form values such as `structuredContent` excepted). A raw 2026-07-28
session (discover, `subscriptions/listen`, an input-required round with progress) is
checked the same way against the wire models the Python SDK generates from that
revision's schema.

Run: python3 -m pytest tests/mcp -q -k revisions
"""
import json
from pathlib import Path

import jsonschema  # a dependency of the `mcp` package the tests install: never skipped
import pytest

from test_raw_protocol import Raw

SCHEMAS = Path(__file__).with_name("schemas")
REVISIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]


class Revision:
    def __init__(self, rev):
        self.rev = rev
        self.root = json.loads((SCHEMAS / rev / "schema.json").read_text())
        self.defs = self.root.get("definitions") or self.root.get("$defs")
        cls = jsonschema.validators.validator_for(self.root)
        self.cls = cls

    def resolve(self, s):
        while isinstance(s, dict) and "$ref" in s:
            s = self.defs[s["$ref"].rsplit("/", 1)[1]]
        return s

    def valid(self, schema, value):
        v = self.cls({**schema, ("definitions" if "definitions" in self.root else "$defs"): self.defs})
        return not list(v.iter_errors(value))

    def check(self, name, value):
        """Problems of `value` as the definition `name`: schema errors, then keys the
        revision does not define."""
        schema = self.defs[name]
        v = self.cls({**schema, ("definitions" if "definitions" in self.root else "$defs"): self.defs})
        problems = [f"{name}: {e.message} at {list(e.absolute_path)}" for e in v.iter_errors(value)]
        self.strict(schema, value, name, problems)
        return problems

    def strict(self, schema, value, path, problems):
        s = self.resolve(schema)
        if not isinstance(s, dict):
            return
        for key in ("anyOf", "oneOf"):
            if key in s:
                branches = [b for b in s[key] if self.valid(self.resolve(b), value)]
                if branches:
                    self.strict(branches[0], value, path, problems)
                return
        if isinstance(value, dict) and "properties" in s:
            props = s["properties"]
            extra = s.get("additionalProperties")
            for k, v in value.items():
                if k == "_meta":
                    continue
                if k in props:
                    self.strict(props[k], v, f"{path}.{k}", problems)
                elif isinstance(extra, dict) or extra is True:
                    continue  # free-form
                else:
                    problems.append(f"{path}.{k} is not a field of {self.rev}")
        elif isinstance(value, list) and isinstance(s.get("items"), dict):
            for i, item in enumerate(value):
                self.strict(s["items"], item, f"{path}[{i}]", problems)


@pytest.mark.parametrize("rev", REVISIONS)
def test_each_sessions_messages_follow_its_revision(gw, rev):
    spec = Revision(rev)
    elicits = rev >= "2025-06-18"
    gw.add_app("com.example.echo")
    gw.config(consent={"mode": "prompt" if elicits else "allow"})
    raw = Raw(gw)
    problems = []
    try:
        i = raw.send("initialize", {"protocolVersion": rev,
                                    "capabilities": {"elicitation": {}} if elicits else {},
                                    "clientInfo": {"name": "revision-test", "version": "1"}})
        init = raw.reply(i)
        assert init["result"]["protocolVersion"] == rev
        problems += spec.check("InitializeResult", init["result"])
        raw.send("notifications/initialized", notify=True)
        calls = [{"app": "com.example.echo", "tool": "echo", "args": {"text": str(n)}} for n in range(2)]
        b = raw.send("tools/call", {"name": "aai_batch", "arguments": {"calls": calls},
                                    "_meta": {"progressToken": "p1"}})
        seen = {"progress": 0, "elicit": 0}
        import time
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = raw.lines.get(timeout=30)
            assert line is not None, "the server closed stdout"
            msg = json.loads(line)
            if msg.get("method") == "notifications/progress":
                seen["progress"] += 1
                props = spec.resolve(spec.defs["ProgressNotification"]).get("properties", {})
                problems += spec.check("ProgressNotification", {k: v for k, v in msg.items() if k in props})
            elif msg.get("method") == "elicitation/create":
                seen["elicit"] += 1
                props = spec.resolve(spec.defs["ElicitRequest"]).get("properties", {})
                problems += spec.check("ElicitRequest", {k: v for k, v in msg.items() if k in props})
                raw.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
                    "action": "accept", "content": {"decision": "always"}}}) + "\n")
                raw.proc.stdin.flush()
            elif msg.get("id") == b:
                assert "result" in msg, msg
                problems += spec.check("CallToolResult", msg["result"])
                assert msg["result"]["structuredContent" if "structuredContent" in msg["result"] else "content"]
                break
        else:
            raise TimeoutError("no batch answer")
        assert seen["progress"] >= 1, seen
        assert (seen["elicit"] >= 1) == elicits, seen
    finally:
        raw.proc.kill()
    assert not problems, "\n".join(problems)


class Modern(Revision):
    """2026-07-28, from the wire models the Python SDK generates from that revision's
    schema (`mcp_types._v2026_07_28`, installed with the tests' `mcp`): the same checks."""

    NAMES = ["DiscoverResult", "SubscriptionsAcknowledgedNotification", "ToolListChangedNotification",
             "ResourceListChangedNotification", "ListToolsResult", "ListResourcesResult",
             "InputRequiredResult", "CallToolResult", "ProgressNotification"]

    def __init__(self):
        from mcp_types import _v2026_07_28 as wire
        self.rev = "2026-07-28"
        defs = {}
        for name in self.NAMES:
            schema = getattr(wire, name).model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
            defs.update(schema.pop("$defs", {}))
            defs[name] = schema
        self.root = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": defs}
        self.defs = defs
        self.cls = jsonschema.validators.validator_for(self.root)


def test_a_2026_sessions_messages_follow_its_revision(gw):
    """A raw stdio session of 2026-07-28: discover, a subscription that hears of a new app,
    the lists, and a call asked about in a round trip with progress; every message checked."""
    import time
    spec = Modern()
    gw.add_app("com.example.echo")
    gw.config(consent={"mode": "prompt"})
    raw = Raw(gw)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "modern-raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    problems = []

    def request(method, params=None, timeout=30):
        return raw.reply(raw.send(method, {**(params or {}), "_meta": {**meta, **(params or {}).get("_meta", {})}}),
                         timeout=timeout)
    try:
        d = request("server/discover")
        problems += spec.check("DiscoverResult", d["result"])
        assert "2026-07-28" in d["result"]["supportedVersions"]
        problems += spec.check("ListToolsResult", request("tools/list")["result"])
        problems += spec.check("ListResourcesResult", request("resources/list")["result"])
        listen = raw.send("subscriptions/listen", {"_meta": meta, "notifications": {
            "toolsListChanged": True, "resourcesListChanged": True}})
        seen = {}
        deadline = time.monotonic() + 30
        added = False
        while len(seen) < 3 and time.monotonic() < deadline:
            line = raw.lines.get(timeout=30)
            assert line is not None, "the server closed stdout"
            msg = json.loads(line)
            method = msg.get("method", "")
            name = {"notifications/subscriptions/acknowledged": "SubscriptionsAcknowledgedNotification",
                    "notifications/tools/list_changed": "ToolListChangedNotification",
                    "notifications/resources/list_changed": "ResourceListChangedNotification"}.get(method)
            assert name, msg
            assert msg["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == listen, msg
            problems += spec.check(name, msg)
            seen[name] = True
            if not added:
                gw.add_app("com.example.notes")
                added = True
        assert len(seen) == 3, seen
        echo = {"name": "aai_exec", "arguments": {"app": "com.example.echo", "tool": "echo",
                                                   "args": {"text": "hi"}}}
        first = request("tools/call", echo)["result"]
        problems += spec.check("InputRequiredResult", first)
        answer = {"consent": {"action": "accept", "content": {"decision": "once"}}}
        done = request("tools/call", {**echo, "inputResponses": answer, "requestState": first["requestState"],
                                      "_meta": {"progressToken": "p1"}})["result"]
        problems += spec.check("CallToolResult", done)
        assert done["resultType"] == "complete" and "hi" in done["content"][0]["text"], done
    finally:
        raw.proc.kill()
    assert not problems, "\n".join(problems)
