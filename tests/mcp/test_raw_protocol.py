"""The server spoken to byte by byte: version negotiation, nothing but JSON-RPC on
stdout, and a client that vanishes (stdin closed, no cancel) in the middle of a call.

Run: python3 -m pytest tests/mcp -q
"""
import json
import os
import queue
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import alive


class Raw:
    def __init__(self, gw, stderr=subprocess.DEVNULL):
        self.proc = subprocess.Popen([str(gw.binary), "--home", str(gw.home)], env=gw.env(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, text=True, bufsize=1)
        self.lines = queue.Queue()
        self.raw_lines = []
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0

    def _read(self):
        for line in self.proc.stdout:
            self.raw_lines.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def send(self, method, params=None, notify=False):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if not notify:
            self.next_id += 1
            msg["id"] = self.next_id
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        return msg.get("id")

    def reply(self, id, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert line is not None, "the server closed stdout"
            msg = json.loads(line)
            if msg.get("id") == id:
                return msg
        raise TimeoutError(id)

    def initialize(self, version):
        i = self.send("initialize", {"protocolVersion": version, "capabilities": {},
                                     "clientInfo": {"name": "raw-test", "version": "1"}})
        r = self.reply(i)
        self.send("notifications/initialized", notify=True)
        return r


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_initialize_negotiates_the_clients_version(gw, version):
    gw.add_app("com.example.echo")
    raw = Raw(gw)
    try:
        r = raw.initialize(version)
        assert r["result"]["protocolVersion"] == version
        listed = raw.reply(raw.send("tools/list"))
        assert [t["name"] for t in listed["result"]["tools"]][:2] == ["app_aai", "app_com_example_echo"]
    finally:
        raw.proc.kill()


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "aai_exec", "arguments": {
    "app": "com.example.echo", "tool": "echo", "args": {"text": "over the event loop"}}}}


def read_line(fd, timeout=15):
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        assert time.monotonic() < deadline, f"no whole line from the gateway: {data!r}"
        chunk = os.read(fd, 65536)
        assert chunk, f"the gateway closed its stdout after {data!r}"
        data += chunk
    return json.loads(data)


@pytest.mark.parametrize("kind", ["pipe", "socket", "one socket"])
def test_stdio_pipes_and_sockets_are_non_blocking_during_the_session_and_blocking_after(gw, kind):
    """A pipe or a socket on stdin/stdout is driven by the runtime's event loop (no
    blocking thread per message: docs/performance.md), so it is non-blocking while the
    session runs; the mode belongs to the open pipe, which the process that started the
    gateway shares, so it is put back when the session ends."""
    gw.add_app("com.example.echo")
    if kind == "pipe":
        child_in, ours_in = os.pipe()
        ours_out, child_out = os.pipe()
    elif kind == "socket":
        a, b = socket.socketpair()
        c, d = socket.socketpair()
        ours_in, child_in, ours_out, child_out = a.detach(), b.detach(), c.detach(), d.detach()
    else:  # one socket both ways (socat, inetd): its mode must still end as it began
        a, b = socket.socketpair()
        ours_in = ours_out = a.detach()
        child_in = child_out = b.detach()
    proc = subprocess.Popen([str(gw.binary), "--home", str(gw.home)], env=gw.env(),
                            stdin=child_in, stdout=child_out, stderr=subprocess.DEVNULL)
    try:
        os.write(ours_in, (json.dumps(INIT) + "\n").encode())
        assert read_line(ours_out)["result"]["protocolVersion"] == "2025-11-25"
        assert not os.get_blocking(child_in) and not os.get_blocking(child_out)
        os.write(ours_in, (json.dumps(CALL) + "\n").encode())
        echo = read_line(ours_out)
        assert echo["id"] == 2 and "over the event loop" in json.dumps(echo["result"])
        if kind == "one socket":
            socket.socket(fileno=os.dup(ours_in)).shutdown(socket.SHUT_WR)  # the client leaves
        else:
            os.close(ours_in)  # the client leaves
        assert proc.wait(timeout=15) == 0
        assert os.get_blocking(child_in) and os.get_blocking(child_out)
    finally:
        proc.kill()
        for fd in {child_in, child_out, ours_out}:
            os.close(fd)


def test_stdout_stays_blocking_when_stderr_shares_its_pipe(gw):
    """With `2>&1`, a non-blocking stdout would make the gateway's own stderr writes fail
    with EAGAIN whenever the client is slow, and log lines would be lost."""
    gw.add_app("com.example.echo")
    child_in, ours_in = os.pipe()
    ours_out, child_out = os.pipe()
    proc = subprocess.Popen([str(gw.binary), "--home", str(gw.home)], env=gw.env(),
                            stdin=child_in, stdout=child_out, stderr=child_out)
    try:
        os.write(ours_in, (json.dumps(INIT) + "\n").encode())
        data, deadline = b"", time.monotonic() + 15
        while b'"protocolVersion"' not in data or not data.endswith(b"\n"):
            assert time.monotonic() < deadline, data
            data += os.read(ours_out, 65536)  # log lines may come first: stderr is here too
        assert any(line.startswith(b'{"jsonrpc"') for line in data.splitlines())
        assert os.get_blocking(child_out), "stdout was made non-blocking with stderr on it"
        assert not os.get_blocking(child_in)
        os.close(ours_in)
        assert proc.wait(timeout=15) == 0
        assert os.get_blocking(child_in)
    finally:
        proc.kill()
        for fd in (child_in, child_out, ours_out):
            os.close(fd)


def test_stdio_from_a_file_to_a_file_answers_every_line(gw, tmp_path):
    """A regular file is not a pipe: it keeps tokio's blocking stdio, and the session
    still answers every request before it ends at the end of the file."""
    gw.add_app("com.example.echo")
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps(INIT) + "\n" + json.dumps(CALL) + "\n")
    answers = tmp_path / "answers.jsonl"
    with open(requests, "rb") as stdin, open(answers, "wb") as stdout:
        proc = subprocess.run([str(gw.binary), "--home", str(gw.home)], env=gw.env(),
                              stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL, timeout=30)
    assert proc.returncode == 0
    replies = [json.loads(line) for line in answers.read_text().splitlines()]
    assert [r["id"] for r in replies] == [1, 2]
    assert "over the event loop" in json.dumps(replies[1]["result"])


def started_adapter(gw):
    """A raw session whose app's adapter is running; returns the session and its pid."""
    gw.add_app("com.example.echo")
    raw = Raw(gw)
    raw.initialize("2025-11-25")
    echo = raw.reply(raw.send("tools/call", {"name": "aai_exec", "arguments": {
        "app": "com.example.echo", "tool": "echo", "args": {"text": "x"}}}))
    return raw, echo["result"]["structuredContent"]["pid"]


def test_client_vanishing_mid_call_stops_the_adapter_and_the_gateway(gw):
    raw, pid = started_adapter(gw)
    raw.send("tools/call", {"name": "aai_exec", "arguments": {
        "app": "com.example.echo", "tool": "sleep", "args": {"seconds": 60}}})
    time.sleep(0.3)
    assert alive(pid)
    raw.proc.stdin.close()  # the client is gone: no cancel, no signal
    raw.proc.wait(timeout=15)
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "the adapter outlived the gateway"
    for line in raw.raw_lines:
        assert json.loads(line)["jsonrpc"] == "2.0", f"non-protocol output on stdout: {line!r}"


def test_a_cancelled_call_gets_no_answer_and_frees_its_id(gw):
    """MCP: a request the client cancelled is not answered. Its id may be used again at
    once, and the cancelled call ending later does not answer the newer one in its place."""
    raw, pid = started_adapter(gw)
    try:
        slow = raw.send("tools/call", {"name": "aai_exec", "arguments": {
            "app": "com.example.echo", "tool": "sleep", "args": {"seconds": 60}}})
        time.sleep(0.3)
        raw.send("notifications/cancelled", {"requestId": slow, "reason": "test"}, notify=True)
        # The same id again at once, for a call that ends after the cancelled one does.
        again = {"jsonrpc": "2.0", "id": slow, "method": "tools/call", "params": {
            "name": "aai_exec", "arguments": {
                "app": "com.example.echo", "tool": "sleep", "args": {"seconds": 1}}}}
        raw.proc.stdin.write(json.dumps(again) + "\n")
        raw.proc.stdin.flush()
        answer = raw.reply(slow, timeout=20)
        assert answer["result"]["content"][0]["text"] == "slept", answer
        time.sleep(0.5)
        answers = [json.loads(l) for l in raw.raw_lines]
        assert [a for a in answers if a.get("id") == slow] == [answer]
    finally:
        raw.proc.kill()


def test_sigterm_stops_adapters_in_their_own_process_groups(gw):
    raw, pid = started_adapter(gw)
    raw.proc.terminate()
    assert raw.proc.wait(timeout=10) == 0
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def catches_sigterm(pid):
    """Whether the process has a handler for SIGTERM (before it has one, SIGTERM's default
    action ends it, which a test of the handler must not mistake for it)."""
    with open(f"/proc/{pid}/status") as f:
        caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def test_sigterm_before_initialize_ends_the_gateway(gw):
    raw = Raw(gw)
    deadline = time.monotonic() + 30
    while not catches_sigterm(raw.proc.pid):
        assert time.monotonic() < deadline, "the gateway never handled SIGTERM"
        time.sleep(0.02)
    raw.proc.terminate()
    assert raw.proc.wait(timeout=10) == 0, "a stop asked for before `initialize` ends the wait"
    assert raw.raw_lines == []


def test_a_client_that_leaves_before_initialize_ends_the_gateway_normally(gw):
    r = subprocess.run([str(gw.binary), "--home", str(gw.home)], env=gw.env(), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout) == (0, ""), r.stderr
    assert " ERROR " not in r.stderr and " WARN " not in r.stderr, r.stderr
    assert "the client left before it initialized the session" in r.stderr


# Hostile lines, each with the id its answer must carry (None: JSON-RPC's null id) and
# the error code it must get.
HOSTILE = [
    ('{"jsonrpc":"2.0","id":101,"method":"tools/list"', 101, -32700),
    ('{"id": "s-102", "jsonrpc": "2.0", "method": ', "s-102", -32700),
    ("this is not json at all", None, -32700),
    ("{" * 5000, None, -32600),  # refused for its depth before it is parsed
    ('[{"jsonrpc":"2.0","id":103,"method":"ping"}]', None, -32600),
    ('"just a string"', None, -32600),
    ('{"jsonrpc":"1.0","id":104,"method":"ping"}', 104, -32600),
    ('{"jsonrpc":"2.0","id":105}', 105, -32600),
    ('{"jsonrpc":"2.0","id":106,"method":42}', 106, -32600),
    ('{"jsonrpc":"2.0","id":107,"method":"tools/call","params":"aai_exec"}', 107, -32602),
    ('{"jsonrpc":"2.0","id":108,"method":"tools/call","params":{"name":["x"]}}', 108, -32602),
    ('{"jsonrpc":"2.0","id":109,"method":"tools/call","params":{"name":"aai_search","arguments":[1]}}', 109, -32602),
    ('{"jsonrpc":"2.0","id":110,"method":"resources/read","params":{"uri":5}}', 110, -32602),
    ('{"jsonrpc":"2.0","id":111,"method":"no/such/method"}', 111, -32601),
    ('{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', None, -32600),
    # MCP's `_meta` must be an object (rmcp answered these with no id at all).
    ('{"jsonrpc":"2.0","id":115,"method":"ping","params":{"_meta":5}}', 115, -32602),
    ('{"jsonrpc":"2.0","id":"s-116","method":"tools/list","params":{"_meta":[]}}', "s-116", -32602),
    # JSON has no leading zeros: not id 1, a parse error with the null id.
    ('{"jsonrpc":"2.0","id":01,"method":"ping"}', None, -32700),
]


def test_hostile_lines_are_answered_with_their_id_and_the_server_keeps_serving(gw):
    gw.add_app("com.example.echo")
    raw = Raw(gw)
    try:
        raw.initialize("2025-11-25")
        for line, id, code in HOSTILE:
            raw.proc.stdin.write(line + "\n")
            raw.proc.stdin.flush()
            deadline = time.monotonic() + 10
            while True:
                msg = json.loads(raw.lines.get(timeout=max(0.01, deadline - time.monotonic())))
                if "error" in msg and msg.get("id") == id:
                    break
            assert msg["error"]["code"] == code, (line[:80], msg)
        # Invalid UTF-8 and a line over the 16 MiB limit.
        raw.proc.stdin.buffer.write(b'{"jsonrpc":"2.0","id":112,"method":"ping","x":"\xff\xfe"}\n')
        raw.proc.stdin.buffer.write(b'{"jsonrpc":"2.0","id":113,"method":"ping","x":"' + b"a" * (17 << 20) + b'"}\n')
        raw.proc.stdin.flush()
        seen = []
        while len(seen) < 2:
            msg = json.loads(raw.lines.get(timeout=30))
            if "error" in msg:
                seen.append((msg["id"], msg["error"]["code"]))
        assert seen == [(112, -32700), (113, -32700)], "each answer carries its request's id"
        # Ids the gateway cannot pass on unchanged, and an `id` deeper in the message.
        raw.proc.stdin.write('{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping","params":{"_meta":5}}\n')
        raw.proc.stdin.write('{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"id":666}},"id":114,\n')
        raw.proc.stdin.flush()
        first = raw.lines.get(timeout=10)
        assert first.startswith('{"jsonrpc":"2.0","id":18446744073709551616,"error"'), first
        assert json.loads(raw.lines.get(timeout=10))["id"] == 114
        # A request whose id is still in flight is refused, the first one still answered.
        call = {"jsonrpc": "2.0", "id": 200, "method": "tools/call", "params": {
            "name": "aai_exec", "arguments": {"app": "com.example.echo", "tool": "sleep", "args": {"seconds": 1}}}}
        raw.proc.stdin.write(json.dumps(call) + "\n" + json.dumps(call) + "\n")
        raw.proc.stdin.flush()
        first = raw.reply(200)
        assert first["error"]["code"] == -32600 and "in progress" in first["error"]["message"]
        second = raw.reply(200)
        assert second["result"]["content"][0]["text"] == "slept"
        # A notification with a broken `_meta` is not answered; a top-level `_meta` is
        # JSON-RPC's business, not MCP's: the request is answered as usual.
        raw.proc.stdin.write('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"_meta":5,"requestId":3}}\n')
        raw.proc.stdin.write('{"jsonrpc":"2.0","id":117,"method":"ping","_meta":5}\n')
        raw.proc.stdin.flush()
        assert json.loads(raw.lines.get(timeout=10)) == {"jsonrpc": "2.0", "id": 117, "result": {}}
        # Still serving, and stdout was JSON-RPC only.
        assert raw.reply(raw.send("ping"))["result"] == {}
        for out in raw.raw_lines:
            assert json.loads(out)["jsonrpc"] == "2.0"
    finally:
        raw.proc.kill()


def test_backtracking_validation_never_stalls_the_server(gw):
    gw.add_app("com.example.regex", tools=[{
        "name": "keys", "description": "A map with a backtracking key pattern",
        "parameters": {"type": "object", "properties": {"map": {"type": "object",
                       "patternProperties": {"^(a|aa)+\\1$": {"type": "string"}}}}}}])
    raw = Raw(gw)
    try:
        raw.initialize("2025-11-25")
        keys = {("a" * 40) + f"b{i}": "x" for i in range(1000)}
        slow = raw.send("tools/call", {"name": "aai_exec", "arguments": {
            "app": "com.example.regex", "tool": "keys", "args": {"map": keys}}})
        started = time.monotonic()
        assert raw.reply(raw.send("ping"))["result"] == {}
        assert time.monotonic() - started < 5, "ping is answered while the arguments are validated"
        raw.reply(slow, timeout=30)  # answered (valid, invalid or too slow): never stuck
    finally:
        raw.proc.kill()


def test_a_request_of_many_small_values_is_refused_before_it_is_parsed(gw):
    gw.add_app("com.example.echo")
    raw = Raw(gw)
    try:
        raw.initialize("2025-11-25")
        values = ",".join(["0"] * 2_000_000)  # 4 MiB of values: ~1 GB once parsed
        raw.proc.stdin.write('{"jsonrpc":"2.0","id":900,"method":"tools/call","params":{"name":"aai_exec",'
                             '"arguments":{"app":"com.example.echo","tool":"echo","args":{"text":"x","n":[' + values + ']}}}}\n')
        raw.proc.stdin.flush()
        answer = raw.reply(900, timeout=30)
        assert answer["error"]["code"] == -32600 and "JSON values" in answer["error"]["message"]
        peak = [line for line in open(f"/proc/{raw.proc.pid}/status") if line.startswith("VmHWM:")]
        assert int(peak[0].split()[1]) < 150 * 1024, peak
        assert raw.reply(raw.send("ping"))["result"] == {}
    finally:
        raw.proc.stdin.close()
        raw.proc.wait(timeout=15)


def test_a_client_that_never_reads_stderr_never_stalls_the_server(gw):
    """A client pipes the gateway's stderr and never reads it. With every debug line on
    stderr the pipe fills within a few hundred calls; the gateway leaves out the lines it
    cannot write at once (the log file has them) and says so once stderr is read again."""
    gw.add_app("com.example.echo")
    raw = Raw(gw, stderr=subprocess.PIPE)  # AAI_LOG=debug: every request logs on stderr
    try:
        raw.initialize("2025-11-25")
        echo = {"name": "aai_exec", "arguments": {"app": "com.example.echo", "tool": "echo", "args": {"text": "x"}}}
        for _ in range(1_500):
            assert "result" in raw.reply(raw.send("tools/call", echo), timeout=30)
        log = (gw.home / "logs" / "aai-gateway.log").stat().st_size
        assert log > 256 * 1024, f"{log} bytes of log: enough to fill a pipe"
        # Read at last: the next line written says what was left out.
        err = []
        threading.Thread(target=lambda: err.extend(raw.proc.stderr), daemon=True).start()
        assert "result" in raw.reply(raw.send("tools/call", echo))
    finally:
        raw.proc.stdin.close()
        try:
            raw.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            raw.proc.kill()  # stalled on its stderr
            raise
    text = "".join(err)
    assert "log line(s) left out here while stderr was full; the log file has them" in text, text[-2000:]
