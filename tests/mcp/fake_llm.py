"""A loopback stand-in for an OpenAI-compatible LLM service, for a real coding agent to talk
to in the tests: `POST /v1/chat/completions` (streamed as server-sent events or not) and
`GET /v1/models`.

Its answers are a script: a JSON list of replies in a file, each one either
{"tool": NAME, "arguments": {...}} (the model calls a tool) or {"text": "..."} (the model
answers). A request gets the reply numbered by how many tool results the conversation
already holds (so the first turn calls the tool, the turn after the result answers); past
the end the last reply repeats. A conversation of the gateway's `--generate` (its system
prompt says it writes `aai.json` descriptors) is numbered by its assistant messages instead, so
each repair round gets the next reply. A reply may add "stream": false (answer with one
JSON document even when a stream was asked for, as some servers do) or "status": CODE
(fail with that HTTP status and the text as the error message). Requests that are not part of the conversation with the
user (a title for the session, a summary: no tool list, or a system prompt that asks for
a title) get a short text. Every request is appended to a JSON-lines log.

    python3 fake_llm.py SCRIPT.json LOG.jsonl PORTFILE

It listens on 127.0.0.1 on a free port, writes the port to PORTFILE when ready, and stops
by itself after 10 minutes or when its standard input closes.
"""
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL = "fake-model"
LIFETIME = 600


def tool_results(messages):
    return sum(1 for m in messages if m.get("role") == "tool")


def is_generate(body):
    """A conversation of `aai-gateway --generate`."""
    return any(m.get("role") == "system" and "`aai.json` descriptors" in str(m.get("content"))
               for m in body.get("messages", []))


def is_side_request(body):
    """A request the agent makes for itself (a session title, a summary) rather than a
    turn of the conversation: it offers no tools, or its system prompt asks for a title."""
    if not body.get("tools"):
        return True
    system = " ".join(str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system")
    return "title generator" in system.lower()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script = []
    log = None
    lock = threading.Lock()
    calls = 0

    def log_message(self, fmt, *args):  # quiet
        pass

    def record(self, entry):
        with self.lock:
            with open(self.log, "a") as f:
                f.write(json.dumps(entry) + "\n")

    def send_json(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.record({"method": "GET", "path": self.path})
        if self.path.rstrip("/").endswith("/models"):
            return self.send_json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 0, "owned_by": "fake"}]})
        self.send_json(404, {"error": {"message": f"no such path {self.path}"}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self.send_json(400, {"error": {"message": "not JSON"}})
        generate = is_generate(body)
        side = not generate and is_side_request(body)
        self.record({"method": "POST", "path": self.path, "side": side, "body": body,
                     "authorization": self.headers.get("Authorization")})
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self.send_json(404, {"error": {"message": f"no such path {self.path}"}})
        if generate:
            n = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
            reply = self.script[min(n, len(self.script) - 1)]
        elif side:
            reply = {"text": "Fake session"}
        else:
            n = tool_results(body.get("messages", []))
            reply = self.script[min(n, len(self.script) - 1)]
        with self.lock:
            Handler.calls += 1
            call_id = f"call_{Handler.calls}"
        if "status" in reply:
            self.send_json(reply["status"], {"error": {"message": reply["text"], "type": "invalid_request_error"}})
        elif body.get("stream") and reply.get("stream", True):
            self.stream(reply, call_id, body)
        else:
            self.send_json(200, self.whole(reply, call_id))

    def whole(self, reply, call_id):
        if "tool" in reply:
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": call_id, "type": "function",
                "function": {"name": reply["tool"], "arguments": json.dumps(reply["arguments"])}}]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": reply["text"]}, "stop"
        return {"id": f"chatcmpl-{call_id}", "object": "chat.completion", "created": int(time.time()),
                "model": MODEL, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}

    def stream(self, reply, call_id, body):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        base = {"id": f"chatcmpl-{call_id}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": MODEL}

        def chunk(delta, finish=None, **extra):
            doc = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
            self.wfile.write(f"data: {json.dumps(doc)}\n\n".encode())
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        if "tool" in reply:
            args = json.dumps(reply["arguments"])
            chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                   "function": {"name": reply["tool"], "arguments": ""}}]})
            half = len(args) // 2
            for part in (args[:half], args[half:]):
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
            chunk({}, "tool_calls")
        else:
            words = reply["text"].split(" ")
            for i, word in enumerate(words):
                chunk({"content": word if i == 0 else " " + word})
            chunk({}, "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            doc = {**base, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                                    "total_tokens": 15}}
            self.wfile.write(f"data: {json.dumps(doc)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


@contextlib.contextmanager
def fake_llm(folder: Path, script: list):
    """Runs fake_llm.py in `folder` with `script`; yields (base URL, a function returning
    the requests it got). It stops when its standard input closes."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.json").write_text(json.dumps(script))
    log, portfile = folder / "requests.jsonl", folder / "port"
    proc = subprocess.Popen([sys.executable, str(Path(__file__)), "script.json", str(log), str(portfile)],
                            stdin=subprocess.PIPE, cwd=folder)
    try:
        deadline = time.monotonic() + 10
        while not portfile.exists():
            assert proc.poll() is None, "the fake LLM exited"
            assert time.monotonic() < deadline, "the fake LLM did not start"
            time.sleep(0.05)

        def requests():
            return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        yield f"http://127.0.0.1:{portfile.read_text()}", requests
    finally:
        proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    script_path, log_path, port_path = sys.argv[1:4]
    Handler.script = json.load(open(script_path))
    Handler.log = log_path
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tmp = port_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, port_path)
    # Stop when the test closes our standard input (or dies), or after LIFETIME seconds.
    stopper = threading.Thread(target=sys.stdin.read, daemon=True)
    stopper.start()
    stopper.join(LIFETIME)
    server.shutdown()


if __name__ == "__main__":
    main()
