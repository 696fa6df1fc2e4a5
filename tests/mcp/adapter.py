"""A stdio adapter for tests: speaks the AAI envelope protocol on stdin/stdout.

Requests are handled in threads, so replies can come back in a different order than
requests were sent (the gateway must match them by request_id). Behaviour by tool:
echo, sleep, hang (records its pid and a grandchild's pid, then never replies),
crash (exits with status 3), garbage (prints a non-JSON line), progress, fail; add,
remove and entries keep a ledger (a JSON list in the file `$AAI_LEDGER`).
With --oneshot the adapter serves a single request and exits.
"""
import json
import os
import subprocess
import sys
import threading
import time

lock = threading.Lock()
oneshot = "--oneshot" in sys.argv


def send(obj):
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def reply(req, result):
    send({"version": "1.0", "request_id": req["request_id"], "status": "success", "result": result})


def handle(req):
    tool, p = req["tool"], req.get("params", {})
    if tool == "echo":
        time.sleep(p.get("delay", 0))
        reply(req, {"echo": p, "pid": os.getpid(), "env_secret": os.environ.get("GATEWAY_SECRET"),
                    "mark": os.environ.get("AAI_TEST_MARK")})
    elif tool == "sleep":
        time.sleep(p["seconds"])
        reply(req, "slept")
    elif tool == "hang":
        child = subprocess.Popen(["sleep", "300"])
        with open(p["pidfile"], "w") as f:
            f.write(f"{os.getpid()} {child.pid}")
        time.sleep(3600)
    elif tool == "escape":
        # A grandchild that leaves the adapter's process group and session.
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        with open(p["pidfile"], "w") as f:
            f.write(str(child.pid))
        reply(req, child.pid)
    elif tool == "bigline":
        # One stdout line longer than the gateway accepts.
        with lock:
            sys.stdout.write("x" * (17 * 1024 * 1024) + "\n")
            sys.stdout.flush()
    elif tool == "big":
        # A result of `mib` MiB.
        reply(req, "x" * (p.get("mib", 1) << 20))
    elif tool == "spew":
        # A huge stderr line without a newline, then many short ones, then an answer.
        chunk = "e" * (1 << 20)
        for _ in range(p.get("mib", 100)):
            sys.stderr.write(chunk)
        sys.stderr.write("\n")
        for i in range(p.get("lines", 20000)):
            sys.stderr.write(f"noise {i}\n")
        sys.stderr.flush()
        reply(req, "spewed")
    elif tool == "stubborn":
        # A child in the adapter's group that ignores SIGTERM.
        child = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 300 & wait"])
        reply(req, child.pid)
    elif tool == "crash":
        sys.stderr.write("boom: the adapter crashed on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    elif tool == "garbage":
        with lock:
            sys.stdout.write("this is not json at all\n")
            sys.stdout.flush()
    elif tool == "progress":
        for i in range(3):
            send({"request_id": req["request_id"], "status": "progress", "progress": i + 1, "total": 3, "message": f"step {i + 1}"})
            time.sleep(0.05)
        reply(req, "done")
    elif tool in ("add", "remove", "entries"):
        ledger(req, tool, p)
    elif tool == "fail":
        send({"version": "1.0", "request_id": req["request_id"], "status": "error",
              "error": {"code": p.get("code", -32001), "message": p.get("message", "it failed")}})
    else:
        send({"version": "1.0", "request_id": req["request_id"], "status": "error",
              "error": {"code": "TOOL_NOT_FOUND", "message": f"unknown tool {tool}"}})


def ledger(req, tool, p):
    path = os.environ["AAI_LEDGER"]
    with lock:
        try:
            with open(path) as f:
                entries = json.load(f)
        except FileNotFoundError:
            entries = []
        error = None
        if tool == "add":
            result = {"id": max([e["id"] for e in entries], default=0) + 1, "text": p["text"]}
            entries.append(result)
        elif tool == "remove":
            if all(e["id"] != p["id"] for e in entries):
                error = f"no entry {p['id']}"
            entries = [e for e in entries if e["id"] != p["id"]]
            result = {"removed": p["id"]}
        else:
            result = {"entries": entries}
        with open(path, "w") as f:
            json.dump(entries, f)
    if error:
        send({"version": "1.0", "request_id": req["request_id"], "status": "error",
              "error": {"code": -32001, "message": error}})
    else:
        reply(req, result)


for line in sys.stdin:
    req = json.loads(line)
    if oneshot:
        handle(req)
        break
    threading.Thread(target=handle, args=(req,), daemon=True).start()
if not oneshot:
    # stdin closed: let running handlers finish briefly, then exit.
    time.sleep(0.2)
