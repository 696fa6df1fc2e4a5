#!/usr/bin/env python3
"""The MCP conformance suite's client driver: the suite runs `driver.py <server URL>` with
the scenario in $MCP_CONFORMANCE_SCENARIO (and its context in $MCP_CONFORMANCE_CONTEXT).

It makes a throw-away AAI home with one `mcp` app pointing at the URL and works through the
real binary ($AAI_GATEWAY_BIN) as a user would: for `auth/*` scenarios `aai-gateway auth
login <app> --yes` (the browser step answered by `../browser.py`, which follows the
redirects: the suite's authorization servers approve at once), then `aai-gateway call`.
When a call is refused for lack of scope the user signs in again once (the gateway
remembered the scope) and calls again. Exit status 0 when the call succeeded.

`initialize` has no tool: the call of a tool the server does not list makes the gateway
connect and list, and TOOL_NOT_FOUND is that scenario's success.

`elicitation-sep1034-client-defaults` needs a client that answers elicitation: an MCP
client (the Python SDK) starts the gateway on stdio and calls the tool through `aai_exec`;
it accepts the server's form with nothing filled in, and the gateway applies the form's
defaults before answering the server. So does `sep-2322-client-request-state`, whose
server asks its questions in `input_required` results (2026-07-28): the client calls its
four tools, two of them at once, and accepts each form.

The calls a scenario names in its context (`toolCalls`, as `http-custom-headers` does) are
made one after the other, each with its arguments as given (an argument given as `null`
is left out: the gateway's argument check refuses `null` for a boolean).
`http-invalid-tool-headers` calls its one valid tool, then asks for each invalid one: the
gateway must answer TOOL_NOT_FOUND without the server seeing the call.
"""
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

APP = "dev.conformance.server"
BROWSER = Path(__file__).resolve().parent.parent / "browser.py"
# The Client ID Metadata Document URL the suite's CIMD scenario expects (it is never
# fetched there).
CIMD = "https://conformance-test.local/client-metadata.json"
TOOLS = {"tools_call": ("add_numbers", {"a": 5, "b": 3}), "sse-retry": ("test_reconnection", {}),
         "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {})}
MRTR_TOOLS = ["test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated",
              "test_mrtr_no_result_type"]
INVALID_TOOLS = ["invalid_empty_header", "invalid_object_header", "invalid_array_header",
                 "invalid_null_header", "invalid_number_header", "invalid_duplicate_same_case",
                 "invalid_duplicate_diff_case", "invalid_space_in_name",
                 "invalid_colon_in_name", "invalid_non_ascii_name",
                 "invalid_control_char_name"]


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    binary = os.environ["AAI_GATEWAY_BIN"]
    with tempfile.TemporaryDirectory(prefix="aai-conformance-") as tmp:
        home = Path(tmp) / "aai"
        home.mkdir(mode=0o700)
        (Path(tmp) / "root").mkdir()
        (home / "config.json").write_text(json.dumps({
            "consent": {"mode": "allow"}, "credentials": {"store": "file"},
            "oauthClientMetadataUrl": CIMD}))
        (home / "conformance").mkdir()
        (home / "conformance" / "aai.json").write_text(json.dumps({
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": APP, "name": {"en": "Conformance"}, "defaultLang": "en",
                    "description": "The conformance suite's server"},
            "execution": {"type": "mcp", "url": url, "transport": "streamable-http",
                          # Generous: the suite runs a revision's scenarios in parallel.
                          "timeout": 120000}}))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp,
               "AAI_SYSTEM_ROOT": str(Path(tmp) / "root"), "AAI_LOG": "debug",
               "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus",
               "BROWSER": f"{sys.executable} {BROWSER}",
               "BROWSER_LOG": str(Path(tmp) / "browser.log")}

        def gw(*args, stdin=None):
            p = subprocess.run([binary, "--home", str(home), *args], env=env, input=stdin,
                               capture_output=True, text=True, timeout=60)
            print(f"$ aai-gateway {' '.join(args)}  → {p.returncode}\n{p.stdout}{p.stderr}",
                  file=sys.stderr)
            return p

        if "client_id" in context:
            client = {"clientId": context["client_id"]}
            if context.get("client_secret"):
                client["clientSecret"] = context["client_secret"]
            if gw("auth", "set", APP, "--stdin", stdin=json.dumps(client)).returncode:
                return 1
        if scenario.startswith("auth/") and gw("auth", "login", APP, "--yes").returncode:
            return 1
        tool, args = TOOLS.get(scenario, ("test-tool", {}))
        if scenario == "initialize":
            tool = "no-such-tool"
        if scenario == "elicitation-sep1034-client-defaults":
            return asyncio.run(through_a_client(binary, home, env, [tool]))
        if scenario == "sep-2322-client-request-state":
            return asyncio.run(through_a_client(binary, home, env, MRTR_TOOLS, together=2))
        if context.get("toolCalls"):
            failed = 0
            for call in context["toolCalls"]:
                args = {k: v for k, v in (call.get("arguments") or {}).items() if v is not None}
                failed |= gw("call", APP, call["name"], json.dumps(args)).returncode
            return failed
        if scenario == "http-invalid-tool-headers":
            if gw("call", APP, "valid_tool", json.dumps({"region": "us-west1"})).returncode:
                return 1
            codes = {name: error_code(gw("call", APP, name, "{}").stdout)
                     for name in INVALID_TOOLS}
            return 0 if set(codes.values()) == {"TOOL_NOT_FOUND"} else 1
        p = gw("call", APP, tool, json.dumps(args))
        code = error_code(p.stdout)
        if scenario.startswith("auth/") and code == "AUTH_REQUIRED":
            if gw("auth", "login", APP, "--yes").returncode:
                return 1
            p = gw("call", APP, tool, json.dumps(args))
            code = error_code(p.stdout)
        if scenario == "initialize":
            return 0 if code == "TOOL_NOT_FOUND" else 1
        return p.returncode


async def through_a_client(binary, home, env, tools, together=1):
    """Calls `tools` through `aai_exec`, the first `together` at once, accepting every
    form; 1 when any call failed."""
    from mcp import ClientSession, StdioServerParameters, types
    from mcp.client.stdio import stdio_client

    async def accept_empty(context, params):
        print(f"elicitation: {params.message}", file=sys.stderr)
        return types.ElicitResult(action="accept", content={})

    server = StdioServerParameters(command=binary, args=["--home", str(home)], env=env)
    async with stdio_client(server, errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write, elicitation_callback=accept_empty) as s:
            await s.initialize()

            async def call(tool):
                result = await s.call_tool("aai_exec", {"app": APP, "tool": tool, "args": {}})
                print(f"{tool}: {result.content[0].text if result.content else result}",
                      file=sys.stderr)
                return result.is_error

            failed = await asyncio.gather(*(call(t) for t in tools[:together]))
            for tool in tools[together:]:
                failed.append(await call(tool))
            return 1 if any(failed) else 0


def error_code(stdout: str):
    try:
        answer = json.loads(stdout)
    except ValueError:
        return None
    if not isinstance(answer, dict) or "content" in answer:
        return None
    data = answer.get("data")
    return data.get("type") if isinstance(data, dict) else None


if __name__ == "__main__":
    sys.exit(main())
