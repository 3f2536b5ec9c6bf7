"""Heads sharing one PostgreSQL store (README, High availability): one leads, the other
stands by and takes over when the leader dies, stops, or loses the store; workers, the
CLI and the SDK follow the leader; nothing acknowledged is lost.

Two heads on 127.0.0.1 and 127.0.0.4 (same ports), one shared dir, a real PostgreSQL the
tests start themselves (pg_server.py), two workers given both heads' addresses. The
lease is 3 s so that takeovers are quick.
"""
import hashlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import (AG_BIN, PYTHON, REPO, WORKER_IPS, Cluster, free_ports, job_processes, pid_alive,
                      proc_cmdline, proc_ppid, wait_until)
from pg_server import PostgresServer

LEASE_S = 3
HEAD_IPS = ("127.0.0.1", "127.0.0.4")

pytestmark = pytest.mark.skipif(PostgresServer.unavailable() is not None,
                                reason=PostgresServer.unavailable() or "")


@pytest.fixture(scope="module")
def pg():
    # Not under pytest's tmp dirs: the server's account must be able to reach its files.
    root = tempfile.mkdtemp(prefix="ag-pg-")
    server = PostgresServer(root, free_ports(1)[0])
    try:
        server.init().start()
        yield server
    finally:
        server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


class HaCluster(Cluster):
    """Two heads sharing `store_url` and a shared dir under `root`; the CLI (self.ag)
    talks to both through AG_ADDRESS, with the admin token from the shared dir."""

    def __init__(self, root, store_url, password_file, lease_s=LEASE_S, node_timeout_s=None, store_urls=None):
        super().__init__(root, node_timeout_s=node_timeout_s)
        self.store_url = store_url
        self.store_urls = store_urls or {}  # head ip -> its own URL (e.g. through a proxy)
        self.password_file = password_file
        self.lease_s = lease_s
        self.shared_dir = self.root / "shared"
        self.head_envs = {}
        for ip in HEAD_IPS:
            env = dict(self.env)
            env["AG_SESSION_DIR"] = str(self.root / f"session-{ip}")
            self.head_envs[ip] = env
        self.env["AG_ADDRESS"] = self.addresses
        self.env["AG_TOKEN_FILE"] = str(self.shared_dir / "token")
        self.env["AG_SESSION_DIR"] = str(self.root / "client-session")

    @property
    def addresses(self):
        return ",".join(f"{ip}:{self.port}" for ip in HEAD_IPS)

    @property
    def token(self):
        return (self.shared_dir / "token").read_text().strip()

    def head_command(self, ip, *extra):
        return ["start-head", "--node-ip-address", ip, "--port", self.port, "--dashboard-port", self.dashboard_port,
                "--data-dir", self.root / f"head-{ip}", "--store", self.store_urls.get(ip, self.store_url),
                "--store-password-file", self.password_file, "--shared-dir", self.shared_dir,
                "--leader-lease", f"{self.lease_s}s", "--kill-grace", self.kill_grace_s,
                *(["--node-timeout", self.node_timeout_s] if self.node_timeout_s else []), *extra]

    def start_head_at(self, ip, check=True, *extra):
        proc = self.ag(*self.head_command(ip, *extra), check=check, env=self.head_envs[ip])
        if proc.returncode == 0:
            self.head_started = True
        return proc

    def head_pid_at(self, ip):
        pidfile = Path(self.head_envs[ip]["AG_SESSION_DIR"]) / "daemons" / "head.pid"
        try:
            return int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def version_at(self, ip):
        """GET /api/version of the head at `ip` (a standby answers it too), or None."""
        status, body = self.api_at(ip, "GET", "/api/version", timeout=3)
        return body if status == 200 and isinstance(body, dict) else None

    def api_at(self, ip, method, path, body=None, timeout=10):
        import json as _json
        import urllib.error
        import urllib.request
        data = _json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://{ip}:{self.port}{path}", data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, text = resp.status, resp.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        except OSError:
            return None, None
        try:
            return status, _json.loads(text)
        except ValueError:
            return status, text

    def leader_ip(self):
        for ip in HEAD_IPS:
            v = self.version_at(ip)
            if v and v.get("role") == "leader":
                return ip
        return None

    def api(self, method, path, body=None, token=None, raw=None, timeout=30, port=None):
        ip = self.leader_ip() or HEAD_IPS[0]
        return self.api_at(ip, method, path, body=body, timeout=timeout)

    def start_ha(self, workers=WORKER_IPS):
        self.start_head_at(HEAD_IPS[0])
        wait_until(lambda: self.leader_ip() == HEAD_IPS[0], 15, message="the first head to lead")
        self.start_head_at(HEAD_IPS[1])
        for ip in workers:
            self.start_worker(ip, head=self.addresses, token=(self.shared_dir / "join-token").read_text().strip())
        wait_until(lambda: sum(n["state"] == "ALIVE" for n in self.nodes()) >= len(workers), 20,
                   message="workers to be ALIVE")
        return self

    def teardown(self):
        for ip in HEAD_IPS:
            pid = self.head_pid_at(ip)
            if pid:
                self._known_pids.add(pid)
            subprocess.run([AG_BIN, "stop", "--timeout", "5"], env=self.head_envs[ip], capture_output=True,
                           timeout=40)
        super().teardown()


_databases = itertools.count(1)  # one database per cluster, on the module's server


@pytest.fixture
def ha_factory(tmp_path, pg):
    made = []

    def make(start=True, **kwargs):
        n = next(_databases)
        url = pg.create_database(f"ha{n}")
        c = HaCluster(tmp_path / f"ha{n}", url, pg.password_file, **kwargs)
        made.append(c)
        if start:
            c.start_ha()
        return c

    yield make
    for c in reversed(made):
        c.teardown()


def task_pid(job_id):
    """The task's own process: the one of the job's processes whose parent is not one of
    them (not the lowest pid, which a child has once pids wrap around on a busy machine).
    A child that exits between the listing and the read of its parent is no root."""
    pids = set(job_processes([job_id]))
    parents = {pid: proc_ppid(pid) for pid in pids}
    roots = [pid for pid, parent in parents.items() if parent is not None and parent not in pids]
    return min(roots) if roots else None


# A task whose output spans the takeover: 400 numbered lines over ~8 s.
SLOW_OUTPUT = "for i in $(seq 1 400); do echo line-$i-$(printf '%060d' $i); sleep 0.02; done"
SLOW_OUTPUT_BYTES = "".join(f"line-{i}-{i:060d}\n" for i in range(1, 401)).encode()


def test_kill_9_of_the_leader_under_load_loses_nothing_and_the_standby_leads(ha_factory):
    c = ha_factory()
    running, _ = c.submit("--no-wait", "--", "bash", "-c", SLOW_OUTPUT)
    wait_until(lambda: task_pid(running) is not None, 20, message="the long task to start")
    pid_before = task_pid(running)

    sys.path.insert(0, str(REPO / "python"))
    import aethergrid
    client = aethergrid.Client(c.addresses, token=c.token)
    acknowledged, lock = [], threading.Lock()
    leader_pid = c.head_pid_at(HEAD_IPS[0])

    def cli_submit(i):
        proc = c.ag("submit", "--no-wait", "--", "true", check=False, timeout=90)
        if proc.returncode == 0:
            with lock:
                acknowledged.append(proc.stdout.strip().splitlines()[-1])

    def sdk_submit(i):
        try:
            job_id = client.submit_job(entrypoint="true").job_id
        except Exception:  # not acknowledged: it may or may not exist, never twice
            return
        with lock:
            acknowledged.append(job_id)

    killed_at = []

    def kill_leader_midway():
        wait_until(lambda: len(acknowledged) >= 40, 60, message="submissions before the kill")
        os.kill(leader_pid, signal.SIGKILL)
        killed_at.append(time.monotonic())

    with ThreadPoolExecutor(max_workers=9) as pool:
        killer = pool.submit(kill_leader_midway)
        futures = [pool.submit(cli_submit if i % 2 else sdk_submit, i) for i in range(200)]
        for f in futures:
            f.result()
        killer.result()

    wait_until(lambda: c.leader_ip() == HEAD_IPS[1], LEASE_S + 5, message="the standby to lead")
    jobs = c.jobs()
    ids = [j["job_id"] for j in jobs]
    assert len(ids) == len(set(ids))
    missing = set(acknowledged) - set(ids)
    assert not missing, f"acknowledged jobs lost: {sorted(missing)[:5]}"
    assert len(acknowledged) >= 190, f"only {len(acknowledged)} of 200 submissions were acknowledged"
    # Each submission made one job: 200 submitted at most, plus the long one.
    assert len(ids) <= 201
    # The running task kept its process and its whole log.
    assert task_pid(running) == pid_before
    c.wait_state(running, ["SUCCEEDED"], timeout=60)
    log = c.ag("logs", running, timeout=30).stdout.encode()
    assert hashlib.sha256(log).hexdigest() == hashlib.sha256(SLOW_OUTPUT_BYTES).hexdigest()
    # New jobs start under the new leader.
    new_job, _ = c.submit("--no-wait", "--", "echo", "after")
    c.wait_state(new_job, ["SUCCEEDED"], timeout=30)
    version = c.version_at(HEAD_IPS[1])
    assert version["epoch"] == 2 and version["leader"] == f"{HEAD_IPS[1]}:{c.port}"


def test_a_stopped_leader_finds_its_lease_gone_and_stands_by(ha_factory):
    c = ha_factory()
    old = c.head_pid_at(HEAD_IPS[0])
    os.kill(old, signal.SIGSTOP)
    try:
        wait_until(lambda: (c.version_at(HEAD_IPS[1]) or {}).get("role") == "leader", LEASE_S + 5,
                   message="the standby to take over")
        time.sleep(LEASE_S)  # 2 x TTL in all
        during, _ = c.submit("--no-wait", "--", "echo", "during")
    finally:
        os.kill(old, signal.SIGCONT)
    wait_until(lambda: (c.version_at(HEAD_IPS[0]) or {}).get("role") == "standby", 15,
               message="the old leader to stand by")
    assert c.head_pid_at(HEAD_IPS[0]) == old and pid_alive(old), "it restarted in place, as a standby"
    standby = c.version_at(HEAD_IPS[0])
    assert standby["leader"] == f"{HEAD_IPS[1]}:{c.port}" and standby["epoch"] == 2
    log = (c.root / f"head-{HEAD_IPS[0]}" / "head.log").read_text()
    assert "stops leading" in log
    c.wait_state(during, ["SUCCEEDED"], timeout=30)
    # Its API refuses to act, naming the leader.
    status, body = c.api_at(HEAD_IPS[0], "POST", "/api/jobs", {"entrypoint": "true"})
    assert status == 503 and body["standby"] and body["leader"] == f"{HEAD_IPS[1]}:{c.port}"
    # The CLI, given both heads, finds the leader and says so.
    shown = c.ag("status").stdout
    assert f"Head: {HEAD_IPS[1]}:{c.port} (leads, epoch 2" in shown, shown
    metrics = c.api_at(HEAD_IPS[1], "GET", "/metrics")[1]
    assert "ag_head_leader 1" in metrics and "ag_head_epoch 2" in metrics
    assert "ag_store_write_seconds_count" in metrics


def test_a_leader_stopped_on_purpose_hands_over_at_once(ha_factory):
    c = ha_factory(lease_s=30)
    c.ag("stop", env=c.head_envs[HEAD_IPS[0]])
    # Well before the 30 s lease would run out: the leader gave it up as it stopped.
    wait_until(lambda: (c.version_at(HEAD_IPS[1]) or {}).get("role") == "leader", 5,
               message="the standby to lead")
    job, _ = c.submit("--no-wait", "--", "echo", "handed over")
    c.wait_state(job, ["SUCCEEDED"], timeout=30)


class BlackholeProxy:
    """A TCP proxy to the database that can be cut: once cut, it stops moving bytes but
    keeps every connection open (a partition, not a refusal)."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.cut = threading.Event()
        self.stopped = threading.Event()
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if self.cut.is_set():
                self.conns.append(client)  # held open, never answered
                continue
            server = socket.create_connection(("127.0.0.1", self.target_port))
            self.conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src, dst):
        while not self.stopped.is_set():
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                return
            while self.cut.is_set() and not self.stopped.is_set():
                time.sleep(0.05)  # swallowed: the partition holds it
            try:
                dst.sendall(data)
            except OSError:
                return

    def close(self):
        self.stopped.set()
        self.sock.close()
        for s in self.conns:
            try:
                s.close()
            except OSError:
                pass


def test_a_leader_cut_off_from_the_store_stops_acting_and_the_other_head_leads(ha_factory, pg):
    proxy = BlackholeProxy(pg.port)
    try:
        c = ha_factory(start=False)
        c.store_urls[HEAD_IPS[0]] = c.store_url.replace(f":{pg.port}/", f":{proxy.port}/")
        c.start_ha()
        running, _ = c.submit("--no-wait", "--", "bash", "-c", SLOW_OUTPUT)
        wait_until(lambda: task_pid(running) is not None, 20, message="the long task to start")
        pid_before = task_pid(running)
        proxy.cut.set()
        cut_at = time.monotonic()
        wait_until(lambda: "stops leading" in (c.root / f"head-{HEAD_IPS[0]}" / "head.log").read_text(),
                   LEASE_S + 3, message="the cut-off leader to stop acting")
        stopped_after = time.monotonic() - cut_at
        assert stopped_after <= LEASE_S + 1.5, f"it acted {stopped_after:.1f} s after losing the store"
        wait_until(lambda: (c.version_at(HEAD_IPS[1]) or {}).get("role") == "leader", LEASE_S + 5,
                   message="the other head to lead")
        assert task_pid(running) == pid_before
        c.wait_state(running, ["SUCCEEDED"], timeout=60)
        log = c.ag("logs", running, timeout=30).stdout.encode()
        assert log == SLOW_OUTPUT_BYTES
    finally:
        proxy.close()


def test_with_the_store_stopped_submits_say_so_tasks_go_on_and_it_all_comes_back(ha_factory, pg):
    c = ha_factory(node_timeout_s=60)
    running, _ = c.submit("--no-wait", "--", "bash", "-c", "sleep 6; echo done")
    wait_until(lambda: task_pid(running) is not None, 20, message="the task to start")
    pid_before = task_pid(running)
    pg.stop("fast")
    try:
        def store_named():
            for ip in HEAD_IPS:
                status, body = c.api_at(ip, "POST", "/api/jobs", {"entrypoint": "true"}, timeout=5)
                if status == 503 and "store" in str(body):
                    return body
            return None
        wait_until(store_named, LEASE_S + 10, message="a 503 naming the store")
        assert pid_alive(pid_before), "the task goes on while the store is away"
    finally:
        pg.start()
        pg.wait_ready()
    wait_until(lambda: c.leader_ip() is not None, 30, message="a head to lead again")
    c.wait_state(running, ["SUCCEEDED"], timeout=60)
    assert c.ag("logs", running).stdout == "done\n"
    after, _ = c.submit("--no-wait", "--", "echo", "back")
    c.wait_state(after, ["SUCCEEDED"], timeout=30)


def test_bad_store_options_are_refused_and_change_nothing(ha_factory, pg, tmp_path):
    c = ha_factory(start=False)

    def refused(*extra, url=None, password_file=None, expect=""):
        args = c.head_command(HEAD_IPS[0])
        if url is not None:
            args[args.index("--store") + 1] = url
        if password_file is not None:
            args[args.index("--store-password-file") + 1] = password_file
        proc = c.ag(*args, *extra, check=False, env=c.head_envs[HEAD_IPS[0]], timeout=60)
        assert proc.returncode != 0, proc.stdout
        assert expect in proc.stderr, proc.stderr
        assert c.head_pid_at(HEAD_IPS[0]) is None or not pid_alive(c.head_pid_at(HEAD_IPS[0]))
        return proc.stderr

    dead_port = free_ports(1)[0]
    refused(url=f"postgresql://ag@127.0.0.1:{dead_port}/x", expect="cannot reach the store")
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-it\n")
    wrong.chmod(0o600)
    refused(password_file=wrong, expect="password authentication failed")
    refused(url=f"postgresql://ag:{pg.PASSWORD}@127.0.0.1:{pg.port}/x", expect="--store-password-file")
    refused(url=f"postgresql://ag@127.0.0.1:{pg.port}/x?password=abc", expect="--store-password-file")
    refused(url="mysql://ag@127.0.0.1/x", expect="postgresql://")
    refused("--node-timeout", "5s", expect="shorter than a takeover")
    # --shared-dir is needed with --store; --store-password-file without --store is wrong.
    proc = c.ag("start-head", "--store", c.store_url, "--data-dir", c.root / "x", check=False)
    assert proc.returncode == 2 and "--shared-dir" in proc.stderr
    proc = c.ag("start-head", "--store-password-file", c.password_file, "--data-dir", c.root / "x", check=False)
    assert proc.returncode == 2 and "give --store" in proc.stderr

    # A database of another layout version: refused, and left as it was.
    c.start_head_at(HEAD_IPS[0])
    wait_until(lambda: c.leader_ip() == HEAD_IPS[0], 15, message="the head to lead")
    c.ag("stop", env=c.head_envs[HEAD_IPS[0]])
    refused_db = c.store_url.rsplit("/", 1)[1]
    assert pg.psql("UPDATE ag_schema SET version = 99", database=refused_db).returncode == 0
    refused(expect="layout version 99")
    assert pg.psql("SELECT version FROM ag_schema", database=refused_db).stdout.strip() == "99"
    assert pg.psql("UPDATE ag_schema SET version = 1", database=refused_db).returncode == 0

    # Two clusters pointed at one database: the second (another shared dir) is refused.
    other = HaCluster(c.root / "other", c.store_url, c.password_file)
    try:
        proc = other.ag(*other.head_command(HEAD_IPS[0]), check=False, env=other.head_envs[HEAD_IPS[0]])
        assert proc.returncode != 0 and "belongs to another cluster" in proc.stderr, proc.stderr
    finally:
        other.teardown()
    ours = (c.shared_dir / "cluster-id").read_text().strip()
    stored = pg.psql("SELECT convert_from(value, 'UTF8') FROM ag_records WHERE tbl = 'meta' AND key = 'cluster_id'",
                     database=refused_db).stdout.strip()
    assert stored == ours


def test_copy_store_moves_a_lone_heads_cluster_to_standby_heads(ha_factory, cluster_factory, pg):
    lone = cluster_factory("lone", workers=(WORKER_IPS[0],))
    done, _ = lone.submit("--no-wait", "--", "echo", "from the lone head")
    lone.wait_state(done, ["SUCCEEDED"], timeout=30)
    lone.ag("user", "add", "alice")
    admin_token = lone.token
    data_dir = lone.head_data_dir
    c = ha_factory(start=False)
    copy = ["admin", "copy-store", "--from", data_dir, "--to", c.store_url, "--store-password-file",
            c.password_file, "--shared-dir", c.shared_dir]
    # A running head is not copied.
    running = lone.ag(*copy, check=False)
    assert running.returncode != 0 and "a head is running" in running.stderr
    lone.ag("stop")
    out = lone.ag(*copy).stdout
    assert "jobs: 1 record(s)" in out and "users: 2 record(s)" in out, out
    # A second run refuses to overwrite what the store holds, unless --force.
    again = lone.ag(*copy, check=False)
    assert again.returncode != 0 and "--force" in again.stderr
    lone.ag(*copy, "--force")

    c.start_head_at(HEAD_IPS[0])
    wait_until(lambda: c.leader_ip() == HEAD_IPS[0], 15, message="the head to lead")
    assert c.token == admin_token, "the admin token moved with the cluster"
    job = c.job(done)
    assert job["state"] == "SUCCEEDED"
    assert c.ag("logs", done).stdout == "from the lone head\n"
    users = c.ag_json("user", "list")
    assert "alice" in [u["name"] for u in (users["users"] if isinstance(users, dict) else users)]
    # The CA moved too: what workers pinned still trusts the new heads.
    assert (c.shared_dir / "tls" / "ca.crt").read_text() == (data_dir / "tls" / "ca.crt").read_text()
