"""A PostgreSQL server for the tests of heads sharing a store: Debian's initdb and pg_ctl
in a temp dir, on 127.0.0.1 at a free port, password logins only (scram-sha-256),
fsync off unless asked. As root the server runs as `nobody` (PostgreSQL refuses root). Where no
server can be made, `PostgresServer.unavailable()` says why and the tests skip.

Every process it starts is stopped by `stop()` (pg_ctl, then SIGKILL by the pid in
postmaster.pid), so a test cleans up whatever happened.
"""
import glob
import os
import signal
import subprocess
import time
from pathlib import Path

NOBODY = 65534


def _bin_dir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return str(Path(found[-1]).parent) if found else None


class PostgresServer:
    USER = "ag"
    PASSWORD = "s3cret-for-tests"

    @staticmethod
    def unavailable():
        """Why no server can be started here, or None."""
        if _bin_dir() is None:
            return "no PostgreSQL server here (/usr/lib/postgresql/*/bin/initdb; scripts/install-deps.sh installs it)"
        if not glob.glob("/usr/lib/x86_64-linux-gnu/libpq.so.5*") and not glob.glob("/usr/lib/*/libpq.so.5*"):
            return "no libpq.so.5 here (apt-get install libpq5)"
        return None

    def __init__(self, root, port):
        self.root = Path(root)
        self.port = port
        self.bin = _bin_dir()
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.password_file = self.root / "store-password"
        self._as = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
        self.fsync = False  # the tests check logic, not the disk; benchmarks turn it on

    def _run(self, *args, timeout=60):
        return subprocess.run(self._as + list(args), capture_output=True, text=True, timeout=timeout)

    def init(self):
        self.root.mkdir(parents=True, exist_ok=True)
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.PASSWORD + "\n")
        if os.geteuid() == 0:
            os.chown(self.root, NOBODY, NOBODY)
            os.chown(pwfile, NOBODY, NOBODY)
        made = self._run(f"{self.bin}/initdb", "-D", str(self.data), "-U", self.USER, "--pwfile", str(pwfile),
                         "-A", "scram-sha-256", "--no-sync", "--no-locale", "-E", "UTF8")
        assert made.returncode == 0, made.stdout + made.stderr
        # The heads' password file: theirs (root's), mode 0600.
        self.password_file.write_text(self.PASSWORD + "\n")
        if os.geteuid() == 0:
            os.chown(self.password_file, 0, 0)
        os.chmod(self.password_file, 0o600)
        return self

    def start(self):
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root}"
        if not self.fsync:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        started = self._run(f"{self.bin}/pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "30",
                            "-o", opts, "start")
        assert started.returncode == 0, started.stdout + started.stderr + self.log.read_text()
        return self

    def stop(self, mode="fast"):
        """Stops the server (fast: disconnects clients; immediate: like a crash)."""
        if not self.data.exists():
            return
        self._run(f"{self.bin}/pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop")
        self._kill_leftover()

    def _kill_leftover(self):
        pidfile = self.data / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def url(self, database="postgres", user=USER):
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def psql(self, sql, database="postgres"):
        env = dict(os.environ, PGPASSWORD=self.PASSWORD)
        return subprocess.run([f"{self.bin}/psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.USER,
                               "-d", database, "-tA", "-c", sql], capture_output=True, text=True, timeout=60,
                              env=env)

    def create_database(self, name):
        made = self.psql(f"CREATE DATABASE {name}")
        assert made.returncode == 0, made.stderr
        return self.url(name)

    def wait_ready(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.psql("SELECT 1").returncode == 0:
                return
            time.sleep(0.2)
        raise AssertionError("PostgreSQL did not come back: " + self.log.read_text()[-2000:])
