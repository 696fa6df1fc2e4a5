"""A PostgreSQL cluster of the test's own: Debian's `postgresql` binaries, `initdb` into a
temporary folder, `postgres` on a free loopback port (and a socket in that folder),
stopped by its PID at the end.

initdb and postgres refuse to run as root: as root, the cluster runs as Debian's
`postgres` user (or `nobody`), in a folder that user owns; as anyone else, as themselves.
"""
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PASSWORD = "pg-s3cret-passw0rd"


def bin_dir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return Path(found[-1]).parent if found else None


def psql():
    return shutil.which("psql")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    def __init__(self):
        self.bin = bin_dir()
        self.dir = Path(tempfile.mkdtemp(prefix="aai-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.proc = None
        self.user = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                try:
                    self.user = pwd.getpwnam(name)
                    break
                except KeyError:
                    continue
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        self.dir.chmod(0o700)

    def _as_user(self):
        if self.user is None:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    def _env(self):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        if self.user is not None:
            env["HOME"] = str(self.dir)
        return env

    def init(self):
        pwfile = self.dir / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.user is not None:
            os.chown(pwfile, self.user.pw_uid, self.user.pw_gid)
        subprocess.run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "aai", "-E", "UTF8",
                        "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}",
                        "--no-sync"], check=True, capture_output=True, cwd=self.dir,
                       env=self._env(), **self._as_user())
        return self

    def start(self):
        self.proc = subprocess.Popen(
            [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port),
             "-k", str(self.dir), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
             "-c", "max_connections=100"],
            cwd=self.dir, env=self._env(), stdout=subprocess.DEVNULL,
            stderr=open(self.dir / "postgres.log", "ab"), **self._as_user())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (self.dir / "postgres.log").read_text()
            if subprocess.run([str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                              capture_output=True).returncode == 0:
                return self
            time.sleep(0.1)
        raise AssertionError("postgres did not start: " + (self.dir / "postgres.log").read_text())

    def crash(self):
        """Immediate shutdown (SIGQUIT): as a crash, recovered at the next start."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            self.proc.wait(timeout=30)

    def processes(self):
        """The postmaster and every process it started."""
        pids = [self.proc.pid]
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if ppid == self.proc.pid:
                pids.append(int(d))
        return pids

    def freeze(self, frozen=True):
        """Stops (SIGSTOP) or resumes (SIGCONT) the whole cluster: a database that hangs."""
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGSTOP if frozen else signal.SIGCONT)
            except OSError:
                pass

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def remove(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, db="aai", password=True):
        auth = f"aai:{PASSWORD}" if password else "aai"
        return f"postgres://{auth}@127.0.0.1:{self.port}/{db}?sslmode=disable"

    def sql(self, query, db="aai"):
        """Runs `query` with psql over the socket; its rows, unaligned, `|`-separated."""
        p = subprocess.run([psql(), "-h", str(self.dir), "-p", str(self.port), "-U", "aai", "-d", db,
                            "-At", "-v", "ON_ERROR_STOP=1", "-c", query],
                           capture_output=True, text=True, timeout=30,
                           env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        assert p.returncode == 0, p.stderr
        return [line.split("|") for line in p.stdout.splitlines()]
