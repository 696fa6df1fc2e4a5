"""The npm packages built by packaging/dist (target/dist/npm/): installed offline from
their tarballs into an empty prefix and into a project, they give a working
`aai-gateway` (and `npx aai-gateway`) whose launcher passes MCP through untouched, forwards
signals, keeps the exit status, and says clearly when the platform package is missing.

The tarballs come from `AAI_DIST_DIR` (default target/dist); CI builds them first.
"""
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, alive, inspector, need_peer

DIST = Path(os.environ.get("AAI_DIST_DIR", ROOT / "target" / "dist"))
VERSION = next(line.split('"')[1] for line in (ROOT / "Cargo.toml").read_text().splitlines()
               if line.startswith("version = "))
MAIN = DIST / "npm" / f"aai-gateway-{VERSION}.tgz"
PLATFORM = DIST / "npm" / f"aai-gateway-linux-x64-{VERSION}.tgz"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "npm-test", "version": "1"}}}


def npm_env(tmp):
    return {**os.environ, "npm_config_cache": str(tmp / "npm-cache"), "npm_config_update_notifier": "false",
            "npm_config_fund": "false", "npm_config_audit": "false", "npm_config_offline": "true"}


@pytest.fixture
def packages():
    need_peer(MAIN.exists() and PLATFORM.exists(), f"npm packages in {DIST}/npm (packaging/dist builds them)")
    need_peer(shutil.which("npm") is not None, "npm")
    return PLATFORM, MAIN


@pytest.fixture
def installed(packages, tmp_path):
    """`npm install -g --prefix` of both tarballs, offline: the prefix's bin/aai-gateway."""
    prefix = tmp_path / "prefix"
    out = subprocess.run(["npm", "install", "-g", "--prefix", str(prefix), *map(str, packages)],
                         env=npm_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return prefix / "bin" / "aai-gateway"


def test_a_global_install_and_npx_run_the_binary(installed, packages, tmp_path):
    out = subprocess.run([str(installed), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith(f"aai-gateway {VERSION} ("), out
    project = tmp_path / "project"
    project.mkdir()
    env = npm_env(tmp_path)
    added = subprocess.run(["npm", "install", *map(str, packages)], cwd=project, env=env, capture_output=True,
                           text=True, timeout=300)
    assert added.returncode == 0, added.stderr
    npx = subprocess.run(["npx", "--no-install", "aai-gateway", "--version"], cwd=project, env=env,
                         capture_output=True, text=True, timeout=120)
    assert npx.returncode == 0 and npx.stdout.startswith(f"aai-gateway {VERSION} ("), npx
    # The binary is the platform package's, executable, and no install script ran.
    binary = project / "node_modules" / "@aai-gateway" / "linux-x64" / "bin" / "aai-gateway"
    assert os.access(binary, os.X_OK)
    manifest = json.loads((project / "node_modules" / "aai-gateway" / "package.json").read_text())
    assert "scripts" not in manifest or not {"install", "postinstall", "preinstall"} & set(manifest["scripts"])
    assert set(manifest["optionalDependencies"].values()) == {VERSION}


def test_the_inspector_lists_tools_through_npx(gw, packages, tmp_path):
    exe = inspector()
    need_peer(exe is not None, "npm package @modelcontextprotocol/inspector (mcp-inspector)")
    project = tmp_path / "project"
    project.mkdir()
    env = npm_env(tmp_path)
    assert subprocess.run(["npm", "install", *map(str, packages)], cwd=project, env=env,
                          capture_output=True, timeout=300).returncode == 0
    gw.add_app("com.example.echo")
    env_args = []
    for k, v in gw.env().items():
        env_args += ["-e", f"{k}={v}"]
    cmd = [exe, "--cli", "npx", *env_args, "--method", "tools/list", "--",
           "--no-install", "aai-gateway", "--home", str(gw.home)]
    out = subprocess.run(cmd, cwd=project, capture_output=True, text=True, timeout=120,
                         env={**env, "PATH": f"{project / 'node_modules' / '.bin'}:{os.environ['PATH']}"})
    assert out.returncode == 0, out.stderr + out.stdout
    names = [t["name"] for t in json.loads(out.stdout)["tools"]]
    assert names == ["app_aai", "app_com_example_echo", "aai_search", "aai_guide", "web_discover", "aai_exec",
                     "aai_batch", "aai_run"]


def test_the_launcher_passes_stdio_through_and_keeps_the_exit_status(installed, gw, binary):
    gw.add_app("com.example.echo")
    request = json.dumps(INIT) + "\n"
    args = ["--home", str(gw.home)]
    direct = subprocess.run([str(binary), *args], input=request, capture_output=True, text=True,
                            env=gw.env(), timeout=60)
    launched = subprocess.run([str(installed), *args], input=request, capture_output=True, text=True,
                              env=gw.env(), timeout=60)
    reply = json.loads(launched.stdout)
    assert reply["result"]["serverInfo"] == json.loads(direct.stdout)["result"]["serverInfo"]
    assert launched.stdout.count("\n") == 1, "nothing but the reply on stdout"
    assert launched.returncode == direct.returncode == 0
    bad = subprocess.run([str(installed), "--no-such-flag"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stdout == "" and "--no-such-flag" in bad.stderr


def descendants(pid):
    """Pids of the live processes whose parent is `pid`."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(d))
    return found


def test_sigterm_to_the_launcher_stops_the_gateway(installed, gw):
    proc = subprocess.Popen([str(installed), "--home", str(gw.home)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=gw.env())
    proc.stdin.write((json.dumps(INIT) + "\n").encode())
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    children = descendants(proc.pid)
    assert len(children) == 1, children
    gateway = children[0]
    proc.send_signal(signal.SIGTERM)
    status = proc.wait(timeout=30)
    # The gateway ends on SIGTERM by itself (exit 0): the launcher reports that status.
    assert status == 0, status
    deadline = time.monotonic() + 10
    while alive(gateway):
        assert time.monotonic() < deadline, "the gateway outlived its launcher"
        time.sleep(0.05)


def test_a_signal_death_of_the_binary_is_the_launchers_too(installed, tmp_path):
    fake = tmp_path / "dies"
    fake.write_text("#!/bin/sh\nkill -KILL $$\n")
    fake.chmod(0o755)
    out = subprocess.run([str(installed)], env={**os.environ, "AAI_GATEWAY_BINARY": str(fake)},
                         capture_output=True, timeout=60)
    assert out.returncode == -signal.SIGKILL, out


def test_the_override_and_a_missing_platform_package(packages, tmp_path, binary):
    prefix = tmp_path / "prefix"
    env = npm_env(tmp_path)
    only_main = subprocess.run(["npm", "install", "-g", "--omit=optional", "--prefix", str(prefix), str(packages[1])],
                               env=env, capture_output=True, text=True, timeout=300)
    assert only_main.returncode == 0, only_main.stderr
    launcher = prefix / "bin" / "aai-gateway"
    out = subprocess.run([str(launcher), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stdout == ""
    assert "@aai-gateway/linux-x64 is not installed" in out.stderr and "AAI_GATEWAY_BINARY" in out.stderr
    over = subprocess.run([str(launcher), "--version"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "AAI_GATEWAY_BINARY": str(binary)})
    assert over.returncode == 0 and over.stdout.startswith("aai-gateway ")


class Registry:
    """The npm registry protocol, as much as installing needs (packuments and tarballs),
    serving the built packages on loopback: what npm sees once they are published. Any
    other package is 404 — which is what npm gets for the other platforms' optional
    packages here, as it would offline."""

    def __init__(self, tarballs):
        import base64
        import hashlib
        import tarfile
        self.files, self.packuments = {}, {}
        for path in tarballs:
            data = path.read_bytes()
            with tarfile.open(path) as t:
                manifest = json.load(t.extractfile("package/package.json"))
            name, version = manifest["name"], manifest["version"]
            file = f"/-/{path.name}"
            self.files[file] = data
            manifest["dist"] = {
                "tarball": file, "shasum": hashlib.sha1(data).hexdigest(),
                "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()}
            self.packuments[name] = {"name": name, "dist-tags": {"latest": version},
                                     "versions": {version: manifest}}

    def __enter__(self):
        import http.server
        import threading
        import urllib.parse
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                path = urllib.parse.unquote(self.path.split("?")[0])
                if path in registry.files:
                    body, kind = registry.files[path], "application/octet-stream"
                elif path.lstrip("/") in registry.packuments:
                    doc = json.loads(json.dumps(registry.packuments[path.lstrip("/")]))
                    for v in doc["versions"].values():
                        v["dist"]["tarball"] = f"http://127.0.0.1:{registry.port}{v['dist']['tarball']}"
                    body, kind = json.dumps(doc).encode(), "application/json"
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.port}/"

    def __exit__(self, *exc):
        self.server.shutdown()


def test_npx_y_and_npm_install_g_from_a_registry(packages, tmp_path):
    """The way users run it: `npx -y aai-gateway` and `npm install -g aai-gateway` resolve
    the platform package from the registry through optionalDependencies, with no script."""
    with Registry(packages) as url:
        env = {**npm_env(tmp_path), "npm_config_registry": url, "npm_config_offline": "false",
               "npm_config_prefer_online": "true"}
        npx = subprocess.run(["npx", "-y", "aai-gateway", "--version"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
        assert npx.returncode == 0 and npx.stdout.startswith(f"aai-gateway {VERSION} ("), npx
        prefix = tmp_path / "prefix"
        installed = subprocess.run(["npm", "install", "-g", "--prefix", str(prefix), "aai-gateway"], env=env,
                                   capture_output=True, text=True, timeout=300)
        assert installed.returncode == 0, installed.stderr
        assert (prefix / "lib" / "node_modules" / "@aai-gateway" / "linux-x64" / "bin" / "aai-gateway").exists() or \
            (prefix / "lib" / "node_modules" / "aai-gateway" / "node_modules" / "@aai-gateway" / "linux-x64").exists()
        out = subprocess.run([str(prefix / "bin" / "aai-gateway"), "--version"], capture_output=True, text=True)
        assert out.stdout.startswith(f"aai-gateway {VERSION} ("), out
