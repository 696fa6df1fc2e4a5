"""The official MCP Inspector CLI against the gateway binary: list, read, guide, exec.

Run: python3 -m pytest tests/mcp -q
"""
import json
import subprocess

from conftest import inspector, need_peer


def run(gw, *args):
    exe = inspector()
    need_peer(exe is not None, "npm package @modelcontextprotocol/inspector (mcp-inspector)")
    env_args = []
    for k, v in gw.env().items():
        env_args += ["-e", f"{k}={v}"]
    cmd = [exe, "--cli", str(gw.binary), *env_args, *args, "--", "--home", str(gw.home)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr + out.stdout
    return json.loads(out.stdout)


def test_inspector_lists_and_calls(gw):
    gw.add_app("com.example.echo", name={"en": "Echo", "zh-CN": "回声"})
    tools = run(gw, "--method", "tools/list")["tools"]
    assert [t["name"] for t in tools] == ["app_aai", "app_com_example_echo", "aai_search", "aai_guide", "web_discover",
                                          "aai_exec", "aai_batch", "aai_run"]
    result = run(gw, "--method", "tools/call", "--tool-name", "aai_exec",
                 "--tool-arg", "app=com.example.echo", "--tool-arg", "tool=echo",
                 "--tool-arg", 'args={"text": "inspected"}')
    assert result["isError"] is False
    assert result["structuredContent"]["echo"] == {"text": "inspected", "n": 3}
    guide = run(gw, "--method", "tools/call", "--tool-name", "app_com_example_echo")
    assert guide["content"][0]["text"].startswith("# Echo (`com.example.echo`)")
    search = run(gw, "--method", "tools/call", "--tool-name", "aai_search", "--tool-arg", "query=回声")
    assert search["structuredContent"]["results"][0]["app"] == "com.example.echo"
    resources = run(gw, "--method", "resources/list")["resources"]
    assert [r["uri"] for r in resources] == ["app:aai", "app:com.example.echo"]
