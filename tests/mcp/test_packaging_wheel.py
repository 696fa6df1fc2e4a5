"""The PyPI wheel and the release archive built by packaging/dist (target/dist/): the wheel
installed offline into a fresh virtual environment and run by `uvx --from`, serving MCP
with nothing else on stdout; the archive's layout, its checksums, and its completions and
man page in use.

The artifacts come from `AAI_DIST_DIR` (default target/dist); CI builds them first.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import ROOT, need_peer

DIST = Path(os.environ.get("AAI_DIST_DIR", ROOT / "target" / "dist"))
VERSION = next(line.split('"')[1] for line in (ROOT / "Cargo.toml").read_text().splitlines()
               if line.startswith("version = "))
TARGET = "x86_64-unknown-linux-gnu"
EXCHANGE = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "w", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def artifact(pattern):
    found = sorted(DIST.glob(pattern))
    need_peer(len(found) == 1, f"{pattern} in {DIST} (packaging/dist builds it)")
    return found[0]


def uv():
    exe = shutil.which("uv")
    need_peer(exe is not None, "PyPI package uv (tests/install-peers)")
    return exe


def mcp_exchange(cmd, env, tmp_path):
    """Initialize + tools/list over stdin/stdout; every stdout line, parsed."""
    stdin = "".join(json.dumps(m) + "\n" for m in EXCHANGE)
    out = subprocess.run([*cmd, "--home", str(tmp_path / "aai")], input=stdin, capture_output=True, text=True,
                         env=env, timeout=120)
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_the_wheel_installs_the_binary_man_page_and_completions(tmp_path):
    wheel = artifact("aai_gateway-*.whl")
    assert f"aai_gateway-{VERSION}-py3-none-manylinux_" in wheel.name, wheel.name
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", "--disable-pip-version-check",
                          str(wheel)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    out = subprocess.run([str(venv / "bin" / "aai-gateway"), "--version"], capture_output=True, text=True)
    assert out.stdout.startswith(f"aai-gateway {VERSION} ("), out
    assert (venv / "share" / "man" / "man1" / "aai-gateway.1").read_text().count(".TH aai-gateway 1") == 1
    for rel in ["bash-completion/completions/aai-gateway", "zsh/site-functions/_aai-gateway",
                "fish/vendor_completions.d/aai-gateway.fish"]:
        assert "clients" in (venv / "share" / rel).read_text(), rel


def test_uvx_runs_the_wheel_offline_and_serves_mcp(tmp_path):
    wheel = artifact("aai_gateway-*.whl")
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_OFFLINE": "1",
           "UV_NO_CONFIG": "1", "UV_TOOL_DIR": str(tmp_path / "uv-tools"), "HOME": str(tmp_path)}
    cmd = [uv(), "tool", "run", "--offline", "--from", str(wheel), "aai-gateway"]
    out = subprocess.run([*cmd, "--version"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.startswith(f"aai-gateway {VERSION} ("), out
    # By name, as `uvx aai-gateway` finds it on an index (here the dist folder as a flat one).
    by_name = subprocess.run([uv(), "tool", "run", "--offline", "--no-index", "--find-links", str(DIST),
                              "aai-gateway", "--version"], capture_output=True, text=True, env=env, timeout=300)
    assert by_name.returncode == 0 and by_name.stdout.startswith(f"aai-gateway {VERSION} ("), by_name
    replies = mcp_exchange(cmd, env, tmp_path)
    assert [r.get("id") for r in replies] == [1, 2], "nothing but MCP on stdout"
    assert replies[0]["result"]["serverInfo"]["name"] == "aai-gateway"
    assert "aai_exec" in [t["name"] for t in replies[1]["result"]["tools"]]


def test_the_archive_and_its_checksums(tmp_path):
    archive = artifact(f"aai-gateway-{VERSION}-{TARGET}.tar.gz")
    # Every artifact is in SHA256SUMS, and every sum is right.
    sums = {}
    for line in (DIST / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name] = digest
    for name, digest in sums.items():
        assert hashlib.sha256((DIST / name).read_bytes()).hexdigest() == digest, name
    assert archive.name in sums and any(n.endswith(".whl") for n in sums)
    assert {f"crates/{c}-{VERSION}.crate" for c in ["aai-descriptor", "aai-author", "aai-gateway"]} <= set(sums)
    assert {f"npm/aai-gateway-{VERSION}.tgz", f"npm/aai-gateway-linux-x64-{VERSION}.tgz"} <= set(sums)
    with tarfile.open(archive) as t:
        t.extractall(tmp_path, filter="data")
        names = sorted(m.name for m in t.getmembers() if m.isfile())
    top = f"aai-gateway-{VERSION}-{TARGET}"
    assert names == sorted(f"{top}/{n}" for n in [
        "aai-gateway", "README.md", "LICENSE", "completions/aai-gateway.bash", "completions/_aai-gateway",
        "completions/aai-gateway.fish", "completions/_aai-gateway.ps1", "man/aai-gateway.1"])
    root = tmp_path / top
    out = subprocess.run([str(root / "aai-gateway"), "--version"], capture_output=True, text=True)
    assert out.stdout.startswith(f"aai-gateway {VERSION} (")
    # The bash completion loads and completes subcommands.
    probe = (f"source {root / 'completions' / 'aai-gateway.bash'}; complete -p aai-gateway >/dev/null || exit 3; "
             "COMP_WORDS=(aai-gateway com); COMP_CWORD=1; COMP_LINE='aai-gateway com'; COMP_POINT=15; "
             "_aai__gateway aai-gateway com aai-gateway; printf '%s\\n' \"${COMPREPLY[@]}\"")
    completed = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert completed.returncode == 0 and "completions" in completed.stdout.split(), completed
    # The man page renders (man, else groff; else at least it is roff).
    page = root / "man" / "aai-gateway.1"
    if shutil.which("man"):
        shown = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True,
                               env={**os.environ, "MANPAGER": "cat", "PAGER": "cat"}, timeout=30)
        assert shown.returncode == 0 and "clients" in shown.stdout, shown.stderr
    else:
        assert page.read_text().startswith(".ie") and ".SH NAME" in page.read_text()


def test_packaging_dist_says_up_front_that_it_needs_maturin(tmp_path):
    """The README names packaging/dist as the way to build the packages: without maturin
    it says what to install before building anything."""
    root = Path(__file__).resolve().parents[2]
    path = ":".join(p for p in os.environ.get("PATH", "").split(":")
                    if p and not (Path(p) / "maturin").exists())
    env = {**os.environ, "PATH": path}
    env.pop("MATURIN", None)
    assert shutil.which("maturin", path=path) is None
    p = subprocess.run([str(root / "packaging" / "dist")], cwd=root, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p
    assert "packaging/dist: not installed, so nothing was built:" in p.stderr, p.stderr
    assert "maturin (the PyPI wheel, which is built with maturin)" in p.stderr, p.stderr
    assert "pip install maturin==" in p.stderr and "--binary" in p.stderr, p.stderr
    assert "Compiling" not in p.stderr and "Finished" not in p.stderr, "nothing was built"


def test_packaging_dist_names_everything_it_misses_at_once(tmp_path):
    """On a machine with only Rust (no Python, Node or maturin on PATH), packaging/dist says
    every missing tool and how to get it in one go, before building anything."""
    root = Path(__file__).resolve().parents[2]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Only what the script runs before its check: bash, dirname, rustc (for the host
    # triple), sed, head.
    for tool in ("bash", "dirname", "rustc", "sed", "head"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    env = {k: v for k, v in os.environ.items() if k != "MATURIN"}
    env["PATH"] = str(bin_dir)
    p = subprocess.run([shutil.which("bash"), str(root / "packaging" / "dist")], cwd=root,
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p
    lines = p.stderr.splitlines()
    assert lines[0] == "packaging/dist: not installed, so nothing was built:", p.stderr
    for what in ("python3 (zip, checksums): apt-get install python3",
                 "node (the npm packages):", "npm (npm pack):", "maturin (the PyPI wheel"):
        assert any(l.startswith("  " + what) for l in lines), (what, p.stderr)
    # With --binary the wheel is not made, so maturin is not asked for.
    p = subprocess.run([shutil.which("bash"), str(root / "packaging" / "dist"), "--binary",
                        str(root / "target" / "debug" / "aai-gateway")], cwd=root, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "node (the npm packages)" in p.stderr, p.stderr
    assert "maturin" not in p.stderr, p.stderr
