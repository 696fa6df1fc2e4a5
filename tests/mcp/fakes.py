"""Recording stand-ins for programs the gateway runs but this machine lacks (osascript,
powershell.exe, adb, xcrun, a dialog): each records its argv, standard input and AAI_*
environment to `calls.jsonl`, then answers with the next reply that matches its argv.

    fakes = Fakes(tmp_path / "bin", "osascript")
    fakes.reply({"stdout": "ok\\n"})                       # every call
    fakes.reply({"stderr": "busy", "code": 1}, {"stdout": "done"})  # 1st call, then 2nd and later
    fakes.reply({"prefix": ["shell", "am"], "stdout": "…"})  # calls whose argv starts so
    async with gw.session(**fakes.env) as s: …
    fakes.calls()  # [{"program", "argv", "stdin", "env"}, …]

Among the replies whose `prefix` matches, the n-th call of that kind gets the n-th reply
(the last one repeats). No match: exit 0, no output.
"""
import json
import os
import sys
from pathlib import Path

SCRIPT = """#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
argv = sys.argv[1:]
record = {{"program": os.path.basename(sys.argv[0]), "argv": argv, "stdin": sys.stdin.read(),
          "env": {{k: v for k, v in os.environ.items() if k.startswith("AAI_")}}}}
calls = os.path.join(here, "calls.jsonl")
earlier = [json.loads(l) for l in open(calls)] if os.path.exists(calls) else []
with open(calls, "a") as f:
    f.write(json.dumps(record) + "\\n")
replies = json.load(open(os.path.join(here, "replies.json")))
matching = [r for r in replies if argv[:len(r.get("prefix", []))] == r.get("prefix", [])]
if matching:
    prefix = matching[0].get("prefix", [])
    n = sum(1 for c in earlier if c["argv"][:len(prefix)] == prefix)
    reply = matching[min(n, len(matching) - 1)]
    sys.stdout.write(reply.get("stdout", ""))
    sys.stderr.write(reply.get("stderr", ""))
    sys.exit(reply.get("code", 0))
"""


class Fakes:
    """Recording fakes of `programs` in `bindir`, first on the gateway's PATH."""

    def __init__(self, bindir: Path, *programs: str):
        self.bindir = bindir
        bindir.mkdir(parents=True, exist_ok=True)
        for program in programs:
            path = bindir / program
            path.write_text(SCRIPT.format(python=sys.executable))
            path.chmod(0o755)
        self.reply()

    @property
    def env(self) -> dict:
        return {"PATH": f"{self.bindir}:{os.environ['PATH']}"}

    def reply(self, *replies: dict):
        """Sets the answers and forgets earlier calls."""
        (self.bindir / "replies.json").write_text(json.dumps(list(replies)))
        (self.bindir / "calls.jsonl").unlink(missing_ok=True)

    def calls(self) -> list:
        path = self.bindir / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "valid"


def install(gw, fixture: str, app_id: str):
    """Puts fixtures/valid/<fixture> in the gateway's home as <app_id>/aai.json."""
    folder = gw.home / app_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "aai.json").write_text((FIXTURES / fixture).read_text())
