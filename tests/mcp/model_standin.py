"""A loopback stand-in for a model provider, for the real agent clients to talk to in the
tests (tests/mcp/test_client_*.py). One server speaks four provider APIs with one script:

* Anthropic Messages: `POST /v1/messages` (streamed as server-sent events or not) and
  `POST /v1/messages/count_tokens`;
* OpenAI Chat Completions: `POST /v1/chat/completions` (streamed or not), `GET /v1/models`;
* OpenAI Responses: `POST /v1/responses` (streamed or not; Codex);
* Gemini: `POST /v1beta/models/{model}:generateContent`, `:streamGenerateContent?alt=sse`,
  `:countTokens`.

Any path prefix before `/v1/...` or `/v1beta/...` is accepted (`/api/v1/messages` works).

The script is a JSON list of replies, each one of
    {"tool": NAME, "arguments": {...}}   the model calls the tool NAME (exactly as the
                                          client names it: `mcp__aai__aai_search`, ...)
    {"text": "..."}                       the model answers with text
    {"tool": NAME, "namespace": NS, ...}  (Responses API) a call of tool NAME of the
                                          namespace tool NS (Codex: `mcp__aai`)
and optionally, on either:
    "wait_for": "FILE"   hold the answer until FILE (relative to the standin's folder)
                         exists, at most 300 s: lets a test change the world between two
                         turns of one client run (see `Standin.reached`, `Standin.release`);
    "delay": SECONDS     wait that long before answering;
    "stream": false      answer with one JSON document even when a stream was asked for;
    "status": CODE       fail with that HTTP status, "text" as the error message.
A conversation request gets the reply numbered by how many tool results it already holds
(so the first turn calls a tool, the turn after its result gets the second reply); past
the end the last reply repeats. Requests that are not a turn of the conversation (a
session title, a topic check, Gemini's next-speaker check, a quota probe: they offer no
tools) are "side" requests: they get a short text (or, when they ask for JSON with a
schema, a minimal document of that schema: `next_speaker` is "user").

Every request is appended to a JSON-lines log as
    {"api": "anthropic"|"chat"|"responses"|"gemini"|None, "method", "path", "side": bool,
     "index": reply number or None, "body": the JSON body, "auth": the credential header}

    python3 model_standin.py SCRIPT.json LOG.jsonl PORTFILE [LIFETIME_SECONDS]

It listens on 127.0.0.1 on a free port, writes the port to PORTFILE when ready, and stops
by itself after LIFETIME (default 600 s) or when its standard input closes.

From a test:

    with standin(tmp_path / "model", script) as model:
        model.url                   # http://127.0.0.1:PORT (no trailing slash)
        model.requests()            # every logged request (dicts as above)
        model.turns()               # the conversation requests only (not side, not GET)
        model.tool_results()        # what the client sent back as tool results, in the
                                    # last turn: [{"id", "name", "text", "error"}], any API
        model.tools_offered()       # the tool names the last turn offered the model
        model.reached(i)            # whether a turn asking for reply i arrived
        model.release("FILE")       # lets a "wait_for": "FILE" reply go
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
from urllib.parse import urlsplit

MODEL = "standin-model"
LIFETIME = 600
WAIT_LIMIT = 300


# ---------------------------------------------------------------- reading requests, per API

def api_of(method, path):
    """Which provider API a request is for (None: an unknown or auxiliary path)."""
    p = urlsplit(path).path.rstrip("/")
    if method != "POST":
        return None
    if p.endswith("/v1/messages"):
        return "anthropic"
    if p.endswith("/chat/completions"):
        return "chat"
    if p.endswith("/responses"):
        return "responses"
    if "/models/" in p and (p.endswith(":generateContent") or p.endswith(":streamGenerateContent")):
        return "gemini"
    return None


def _text_of(content):
    """The text of a tool result's content in any of the APIs' shapes."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(c) for c in content)
    if isinstance(content, dict):
        for key in ("text", "output", "content", "response", "result"):
            if key in content:
                return _text_of(content[key])
        return json.dumps(content)
    return json.dumps(content)


def tool_results(api, body):
    """The tool results a request's conversation holds, oldest first:
    [{"id", "name", "text", "error"}] (`name` when the API carries it, else None)."""
    out = []
    if api == "anthropic":
        for m in body.get("messages", []):
            if m.get("role") == "user" and isinstance(m.get("content"), list):
                for b in m["content"]:
                    if isinstance(b, dict) and b.get("type") == "tool_result":
                        out.append({"id": b.get("tool_use_id"), "name": None,
                                    "text": _text_of(b.get("content")), "error": bool(b.get("is_error"))})
    elif api == "chat":
        for m in body.get("messages", []):
            if m.get("role") == "tool":
                out.append({"id": m.get("tool_call_id"), "name": m.get("name"),
                            "text": _text_of(m.get("content")), "error": False})
    elif api == "responses":
        items = body.get("input")
        for it in items if isinstance(items, list) else []:
            if isinstance(it, dict) and it.get("type") in ("function_call_output", "custom_tool_call_output",
                                                             "mcp_tool_call_output"):
                out.append({"id": it.get("call_id"), "name": None, "text": _text_of(it.get("output")),
                            "error": False})
    elif api == "gemini":
        for c in body.get("contents", []):
            for part in c.get("parts", []) or []:
                fr = part.get("functionResponse") if isinstance(part, dict) else None
                if fr is not None:
                    resp = fr.get("response")
                    out.append({"id": fr.get("id"), "name": fr.get("name"), "text": _text_of(resp),
                                "error": isinstance(resp, dict) and "error" in resp})
    return out


def tools_offered(api, body):
    """The names of the tools a request offers the model."""
    names = []
    for t in body.get("tools", []) or []:
        if not isinstance(t, dict):
            continue
        if api == "gemini":
            names += [d.get("name") for d in t.get("functionDeclarations", []) or []]
        elif api == "chat":
            names.append((t.get("function") or {}).get("name") or t.get("name"))
        else:  # anthropic, responses
            names.append(t.get("name"))
    return [n for n in names if n]


def is_side(api, body):
    """A request the client makes for itself (a title, a topic or next-speaker check, a
    quota probe) rather than a turn of the conversation: it offers no tools."""
    if api == "gemini":
        return not any((t.get("functionDeclarations") if isinstance(t, dict) else None)
                       for t in body.get("tools", []) or [])
    if not body.get("tools"):
        return True
    if api == "chat":
        system = " ".join(str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system")
        return "title generator" in system.lower()
    return False


def _from_schema(schema, name=""):
    """A minimal document of a JSON schema (OpenAPI or Gemini's upper-case types)."""
    if not isinstance(schema, dict):
        return None
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema and schema["enum"]:
        return "user" if "user" in schema["enum"] else schema["enum"][0]
    if kind == "object":
        props = schema.get("properties", {}) or {}
        keys = schema.get("required") or list(props)
        return {k: _from_schema(props.get(k, {}), k) for k in keys}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return "user" if name == "next_speaker" else "ok"


def side_reply(api, body):
    if api == "gemini":
        cfg = body.get("generationConfig") or {}
        schema = cfg.get("responseJsonSchema") or cfg.get("responseSchema")
        if cfg.get("responseMimeType") == "application/json":
            return {"text": json.dumps(_from_schema(schema) if schema else {})}
    return {"text": "Standin session"}


# ---------------------------------------------------------------- the server

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

    def auth(self):
        for h in ("Authorization", "x-api-key", "x-goog-api-key"):
            if self.headers.get(h):
                return self.headers.get(h)
        return None

    def do_HEAD(self):
        self.record({"api": None, "method": "HEAD", "path": self.path, "side": True, "index": None})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.record({"api": None, "method": "GET", "path": self.path, "side": True, "index": None,
                     "auth": self.auth()})
        p = urlsplit(self.path).path.rstrip("/")
        if p.endswith("/models"):
            if "/v1beta" in p:
                return self.send_json(200, {"models": [{"name": f"models/{MODEL}", "displayName": MODEL,
                                                        "supportedGenerationMethods": ["generateContent"]}]})
            return self.send_json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 0, "owned_by": "standin"}]})
        self.send_json(404, {"error": {"message": f"no such path {self.path}"}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self.record({"api": None, "method": "POST", "path": self.path, "side": True, "index": None,
                         "raw": raw[:2000].decode("utf-8", "replace")})
            return self.send_json(400, {"error": {"message": "not JSON"}})
        api = api_of("POST", self.path)
        p = urlsplit(self.path).path.rstrip("/")
        side = api is None or is_side(api, body)
        index = None if side else min(len(tool_results(api, body)), len(self.script) - 1)
        self.record({"api": api, "method": "POST", "path": self.path, "side": side, "index": index,
                     "body": body, "auth": self.auth()})
        if api is None:
            if p.endswith("/count_tokens") or p.endswith(":countTokens"):
                return self.send_json(200, {"input_tokens": 10, "totalTokens": 10})
            return self.send_json(404, {"error": {"type": "not_found_error", "message": f"no such path {self.path}"}})
        reply = side_reply(api, body) if side else self.script[index]
        if reply.get("wait_for"):
            target = Path(reply["wait_for"])
            deadline = time.monotonic() + WAIT_LIMIT
            while not target.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        if reply.get("delay"):
            time.sleep(float(reply["delay"]))
        with self.lock:
            Handler.calls += 1
            call_id = f"call_{Handler.calls}"
        if "status" in reply:
            return self.send_json(reply["status"], {"type": "error", "error": {
                "message": reply.get("text", "error"), "type": "invalid_request_error",
                "code": reply["status"], "status": "INVALID_ARGUMENT"}})
        streamed = (body.get("stream") or p.endswith(":streamGenerateContent")) and reply.get("stream", True)
        getattr(self, f"{api}_{'stream' if streamed else 'whole'}")(reply, call_id, body)

    # -- SSE helpers
    def sse_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def event(self, doc, name=None):
        head = f"event: {name}\n" if name else ""
        self.wfile.write(f"{head}data: {json.dumps(doc)}\n\n".encode())
        self.wfile.flush()

    @staticmethod
    def words(text):
        parts = text.split(" ")
        return [w if i == 0 else " " + w for i, w in enumerate(parts)]

    # -- Anthropic Messages
    def anthropic_whole(self, reply, call_id, body):
        if "tool" in reply:
            content = [{"type": "tool_use", "id": f"toolu_{call_id}", "name": reply["tool"],
                        "input": reply.get("arguments", {})}]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": reply["text"]}], "end_turn"
        self.send_json(200, {"id": f"msg_{call_id}", "type": "message", "role": "assistant",
                             "model": body.get("model", MODEL), "content": content, "stop_reason": stop,
                             "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}})

    def anthropic_stream(self, reply, call_id, body):
        self.sse_start()
        self.event({"type": "message_start", "message": {
            "id": f"msg_{call_id}", "type": "message", "role": "assistant", "model": body.get("model", MODEL),
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}, "message_start")
        if "tool" in reply:
            self.event({"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": f"toolu_{call_id}", "name": reply["tool"], "input": {}}},
                "content_block_start")
            args = json.dumps(reply.get("arguments", {}))
            half = len(args) // 2
            for part in (args[:half], args[half:]):
                self.event({"type": "content_block_delta", "index": 0,
                            "delta": {"type": "input_json_delta", "partial_json": part}}, "content_block_delta")
            stop = "tool_use"
        else:
            self.event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                       "content_block_start")
            for w in self.words(reply["text"]):
                self.event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}},
                           "content_block_delta")
            stop = "end_turn"
        self.event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        self.event({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5}}, "message_delta")
        self.event({"type": "message_stop"}, "message_stop")

    # -- OpenAI Chat Completions
    def chat_whole(self, reply, call_id, body):
        if "tool" in reply:
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": call_id, "type": "function",
                "function": {"name": reply["tool"], "arguments": json.dumps(reply.get("arguments", {}))}}]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": reply["text"]}, "stop"
        self.send_json(200, {"id": f"chatcmpl-{call_id}", "object": "chat.completion", "created": int(time.time()),
                             "model": MODEL, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})

    def chat_stream(self, reply, call_id, body):
        self.sse_start()
        base = {"id": f"chatcmpl-{call_id}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": MODEL}

        def chunk(delta, finish=None):
            self.event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

        chunk({"role": "assistant", "content": ""})
        if "tool" in reply:
            args = json.dumps(reply.get("arguments", {}))
            chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                   "function": {"name": reply["tool"], "arguments": ""}}]})
            half = len(args) // 2
            for part in (args[:half], args[half:]):
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
            chunk({}, "tool_calls")
        else:
            for w in self.words(reply["text"]):
                chunk({"content": w})
            chunk({}, "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            self.event({**base, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                                         "total_tokens": 15}})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    # -- OpenAI Responses
    @staticmethod
    def responses_item(reply, call_id):
        if "tool" in reply:
            # Codex offers an MCP server's tools as one `namespace` tool: a call names both.
            namespace = {"namespace": reply["namespace"]} if "namespace" in reply else {}
            return {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": reply["tool"],
                    **namespace, "arguments": json.dumps(reply.get("arguments", {})), "status": "completed"}
        return {"type": "message", "id": f"msg_{call_id}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": reply["text"], "annotations": []}]}

    @staticmethod
    def responses_doc(call_id, output):
        return {"id": f"resp_{call_id}", "object": "response", "created_at": int(time.time()),
                "status": "completed", "model": MODEL, "output": output,
                "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                          "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}}

    def responses_whole(self, reply, call_id, body):
        self.send_json(200, self.responses_doc(call_id, [self.responses_item(reply, call_id)]))

    def responses_stream(self, reply, call_id, body):
        self.sse_start()
        item = self.responses_item(reply, call_id)
        created = {**self.responses_doc(call_id, []), "status": "in_progress", "usage": None}
        self.event({"type": "response.created", "response": created}, "response.created")
        self.event({"type": "response.in_progress", "response": created}, "response.in_progress")
        if item["type"] == "function_call":
            self.event({"type": "response.output_item.added", "output_index": 0,
                        "item": {**item, "arguments": "", "status": "in_progress"}}, "response.output_item.added")
            self.event({"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": 0,
                        "delta": item["arguments"]}, "response.function_call_arguments.delta")
            self.event({"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": 0,
                        "arguments": item["arguments"]}, "response.function_call_arguments.done")
        else:
            self.event({"type": "response.output_item.added", "output_index": 0,
                        "item": {**item, "content": [], "status": "in_progress"}}, "response.output_item.added")
            self.event({"type": "response.content_part.added", "item_id": item["id"], "output_index": 0,
                        "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}},
                       "response.content_part.added")
            for w in self.words(reply["text"]):
                self.event({"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
                            "content_index": 0, "delta": w}, "response.output_text.delta")
            self.event({"type": "response.output_text.done", "item_id": item["id"], "output_index": 0,
                        "content_index": 0, "text": reply["text"]}, "response.output_text.done")
            self.event({"type": "response.content_part.done", "item_id": item["id"], "output_index": 0,
                        "content_index": 0, "part": item["content"][0]}, "response.content_part.done")
        self.event({"type": "response.output_item.done", "output_index": 0, "item": item},
                   "response.output_item.done")
        self.event({"type": "response.completed", "response": self.responses_doc(call_id, [item])},
                   "response.completed")

    # -- Gemini
    @staticmethod
    def gemini_doc(parts, finish="STOP"):
        return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
                "modelVersion": MODEL}

    def gemini_parts(self, reply, call_id):
        if "tool" in reply:
            return [[{"functionCall": {"id": call_id, "name": reply["tool"], "args": reply.get("arguments", {})}}]]
        return [[{"text": w}] for w in self.words(reply["text"])]

    def gemini_whole(self, reply, call_id, body):
        parts = [p for chunk in self.gemini_parts(reply, call_id) for p in chunk]
        if "text" in reply and "tool" not in reply:
            parts = [{"text": reply["text"]}]
        self.send_json(200, self.gemini_doc(parts))

    def gemini_stream(self, reply, call_id, body):
        self.sse_start()
        chunks = self.gemini_parts(reply, call_id)
        for i, parts in enumerate(chunks):
            doc = self.gemini_doc(parts, "STOP" if i == len(chunks) - 1 else None)
            if doc["candidates"][0]["finishReason"] is None:
                del doc["candidates"][0]["finishReason"]
            self.event(doc)


# ---------------------------------------------------------------- the test side

class Standin:
    """A running standin (see the module's text)."""

    def __init__(self, folder: Path, url: str, log: Path):
        self.folder, self.url, self.log = folder, url, log

    def requests(self):
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            with contextlib.suppress(ValueError):  # a line being written
                out.append(json.loads(line))
        return out

    def turns(self):
        return [r for r in self.requests() if r.get("api") and not r.get("side")]

    def tool_results(self, turn=None):
        turn = turn if turn is not None else (self.turns() or [None])[-1]
        return tool_results(turn["api"], turn["body"]) if turn else []

    def tools_offered(self, turn=None):
        turn = turn if turn is not None else (self.turns() or [None])[-1]
        return tools_offered(turn["api"], turn["body"]) if turn else []

    def reached(self, index):
        return any(t.get("index") == index for t in self.turns())

    def release(self, name):
        (self.folder / name).write_text("go")


@contextlib.contextmanager
def standin(folder: Path, script: list, lifetime: int = LIFETIME):
    """Runs this module as a server in `folder` with `script`; yields a `Standin`. It stops
    (by PID) when the block ends."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.json").write_text(json.dumps(script))
    log, portfile = folder / "requests.jsonl", folder / "port"
    proc = subprocess.Popen([sys.executable, str(Path(__file__)), "script.json", str(log), str(portfile),
                             str(lifetime)], stdin=subprocess.PIPE, cwd=folder)
    try:
        deadline = time.monotonic() + 20
        while not portfile.exists():
            assert proc.poll() is None, "the model standin exited"
            assert time.monotonic() < deadline, "the model standin did not start"
            time.sleep(0.05)
        yield Standin(folder, f"http://127.0.0.1:{portfile.read_text()}", log)
    finally:
        proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    script_path, log_path, port_path = sys.argv[1:4]
    lifetime = int(sys.argv[4]) if len(sys.argv) > 4 else LIFETIME
    Handler.script = json.load(open(script_path))
    assert Handler.script, "the script is empty"
    Handler.log = log_path
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tmp = port_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, port_path)
    stopper = threading.Thread(target=sys.stdin.read, daemon=True)
    stopper.start()
    stopper.join(lifetime)
    server.shutdown()


if __name__ == "__main__":
    main()
