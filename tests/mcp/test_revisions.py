"""Protocol hygiene (issue 27): the fields of a protocol revision appear only in sessions
that negotiated it. One raw stdio session per revision before 2026-07-28 runs `aai_batch`
with progress (and, from 2025-06-18, a consent question by elicitation); every message the
gateway sends is checked against that revision's JSON Schema (`schemas/`, the
specification's own), and strictly: a key the revision does not define is a failure
(`_meta` and free-form values such as `structuredContent` excepted).

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
