"""Fixtures for AetherGrid's integration tests: real daemons, real sockets, real processes.

Every test gets its own session dir (AG_SESSION_DIR), its own free ports and its own data
dirs under tmp_path, so tests are isolated from each other and from any other cluster
running on the machine. Teardown runs `ag stop`, then SIGKILLs by pid whatever this
cluster left behind: its daemons, and every process whose environment says it belongs to
this cluster (a job id of this cluster in AG_JOB_ID next to AG_TASK_MARKER, or this
session's AG_SESSION_DIR, which the workers pass on to their tasks).

pytest-timeout is not installed: every subprocess call has a timeout and every wait has
a deadline, so no test can hang.
"""
import glob
import hashlib
import json
import ssl
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

AG_BIN = os.environ.get("AG_BIN", "/work/main/build/bin/ag")
REPO = Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3"  # Debian's python: the one with torch.

# Seconds one CLI call may take unless a test says otherwise.
DEFAULT_CLI_TIMEOUT_S = 60
# Worker addresses of the standard two-worker cluster.
WORKER_IPS = ("127.0.0.2", "127.0.0.3")

_DEFAULT_TOKEN = object()
_SUBMITTED_RE = re.compile(r"\b(job_[0-9a-zA-Z]+) submitted")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "serial: measures CPU time, needs the machine's CPUs or uses up a per-user "
        "limit: scripts/test.sh runs these "
        "one at a time, before the others run side by side (-m serial / -m 'not serial')")


# Tests run in parallel (pytest-xdist, scripts/test.sh): each worker process (gw0, gw1,
# ...) hands out ports from a block of its own, below the kernel's ephemeral range (where
# outgoing connections' ports come from), so that two tests running at once never pick
# the same port between this check and their daemon's bind.
_PORT_BLOCK = 1000
_PORT_BASE = 20000
_port_worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").lstrip("gw") or 0) % 12
_port_next = [0]


def free_ports(count, host="127.0.0.1"):
    """`count` ports nothing listens on now, on any address (`host` is kept for callers),
    from this test process's own block, taken in turn."""
    ports = []
    for _ in range(_PORT_BLOCK):
        port = _PORT_BASE + _port_worker * _PORT_BLOCK + _port_next[0] % _PORT_BLOCK
        _port_next[0] += 1
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            continue
        finally:
            s.close()
        ports.append(port)
        if len(ports) == count:
            return ports
    raise RuntimeError(f"no {count} free ports left in {_PORT_BASE + _port_worker * _PORT_BLOCK}+{_PORT_BLOCK}")


def read_environ(pid):
    """The environment of process `pid` as a dict, or None if it cannot be read (gone,
    a zombie, or not ours)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            k, _, v = item.partition(b"=")
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def all_pids():
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def processes_where(predicate):
    """Pids (other than this process) whose environment satisfies predicate(env)."""
    me = os.getpid()
    found = []
    for pid in all_pids():
        if pid == me:
            continue
        env = read_environ(pid)
        if env and predicate(env):
            found.append(pid)
    return found


def job_processes(job_ids):
    """Live task processes (and their descendants) of the given jobs."""
    job_ids = set(job_ids)
    return processes_where(lambda env: env.get("AG_JOB_ID") in job_ids)


def proc_state(pid):
    """The one-letter state of `pid` from /proc/PID/stat, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def proc_ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def proc_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def rss_kib(pid):
    """The process's resident memory in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pid_alive(pid):
    """True while `pid` exists and is not a zombie."""
    state = proc_state(pid)
    return state is not None and state not in ("Z", "X")


def zombie_children(parent_pid):
    return [p for p in all_pids() if proc_ppid(p) == parent_pid and proc_state(p) == "Z"]


def job_cgroups(hierarchies, job_id):
    """The control groups workers made for `job_id`'s tasks under each of `hierarchies`
    (<hierarchy>/aethergrid/<node>/<job>.*). Workers of tests running beside this one
    remove their node's folders at any time: a folder gone while it is read is empty."""
    found = []
    for hierarchy in hierarchies:
        try:
            nodes = [entry.path for entry in os.scandir(os.path.join(hierarchy, "aethergrid")) if entry.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            continue
        for node in nodes:
            try:
                found += [entry.path for entry in os.scandir(node) if entry.name.startswith(job_id + ".")]
            except (FileNotFoundError, NotADirectoryError):
                pass
    return sorted(found)


def wait_until(predicate, timeout, interval=0.1, message="condition"):
    """Poll predicate() until it returns a truthy value; return that value. Fails the
    test with `message` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def wait_for_job_state(read_job, job_id, states, timeout, interval=0.1):
    """Wait until `read_job(job_id)` (a job's JSON) is in one of `states`; return it. The
    failure shows the job as last seen."""
    if isinstance(states, str):
        states = (states,)
    last = {}

    def reached():
        last["job"] = read_job(job_id)
        return last["job"]["state"] in states

    try:
        wait_until(reached, timeout, interval=interval, message=f"job {job_id} to reach {states}")
    except AssertionError as e:
        raise AssertionError(f"{e}; last seen: {json.dumps(last.get('job'), indent=1)[:4000]}") from None
    return last["job"]


def submitted_job_id(proc):
    """The job id from a (waiting) `ag submit`'s output."""
    m = _SUBMITTED_RE.search(proc.stderr + proc.stdout)
    assert m, f"no job id in submit output:\nstdout={proc.stdout!r}\nstderr={proc.stderr!r}"
    return m.group(1)


def remove_node_cgroups(worker_data_dirs):
    """The control groups of the workers with these data dirs (a worker removes its own
    when it stops, not when it is killed). Left behind, they pile up over runs on one
    machine, and every cgroup v1 `cpu` group makes each later CPU limit costlier to set."""
    node_ids = []
    for data_dir in worker_data_dirs:
        try:
            node_ids.append((Path(data_dir) / "node_id").read_text().strip())
        except OSError:
            pass
    groups = []
    for node_id in filter(None, node_ids):
        for pattern in (f"/sys/fs/cgroup/aethergrid/{node_id}", f"/sys/fs/cgroup/*/aethergrid/{node_id}",
                        f"/sys/fs/cgroup/*/*/aethergrid/{node_id}"):
            groups += glob.glob(pattern)
    deadline = time.time() + 5  # killed tasks leave their groups within moments
    for group in groups:
        while os.path.isdir(group):
            for here, _, _ in os.walk(group, topdown=False):
                try:
                    os.rmdir(here)
                except OSError:
                    pass
            if not os.path.isdir(group) or time.time() > deadline:
                break
            time.sleep(0.05)


class Cluster:
    """One test's AetherGrid session: a head on 127.0.0.1 and workers on 127.0.0.x, all
    with their own data dirs under `root`. Owned by one test; not thread-safe."""

    def __init__(self, root, node_timeout_s=None, kill_grace_s=3.0, head_options=()):
        self.root = Path(root)
        self.head_options = [str(o) for o in head_options]  # more `ag start-head` options
        self.root.mkdir(parents=True, exist_ok=True)
        self.session_dir = self.root / "session"
        self.session_dir.mkdir(exist_ok=True)
        self.node_timeout_s = node_timeout_s
        self.kill_grace_s = kill_grace_s
        self.port, self.dashboard_port = free_ports(2)
        self.env = dict(os.environ)
        for key in ("AG_ADDRESS", "AG_TOKEN"):
            self.env.pop(key, None)
        self.env["AG_SESSION_DIR"] = str(self.session_dir)
        self.job_ids = set()
        self._known_pids = set()
        self.head_started = False

    # ---- addresses and files --------------------------------------------------------
    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    @property
    def head_data_dir(self):
        return self.session_dir / "head"

    @property
    def token(self):
        """The first admin's token (the head makes it at its first start)."""
        return (self.head_data_dir / "token").read_text().strip()

    @property
    def join_token(self):
        """The join token `ag start-head` prints: it can only register nodes."""
        return (self.head_data_dir / "join-token").read_text().strip()

    @property
    def ca_fingerprint(self):
        """The cluster CA's fingerprint, as `ag start-head` prints it in the join line."""
        pem = (self.head_data_dir / "tls" / "ca.crt").read_text()
        return "sha256:" + hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()

    def worker_data_dir(self, ip):
        return self.root / f"worker-{ip}"

    # ---- the CLI --------------------------------------------------------------------
    def ag(self, *args, check=True, timeout=DEFAULT_CLI_TIMEOUT_S, env=None):
        """Run `ag ARGS...` in this session; return the CompletedProcess (text)."""
        run_env = dict(self.env)
        if env:
            run_env.update(env)
        cmd = [AG_BIN, *[str(a) for a in args]]
        try:
            proc = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"`{' '.join(cmd)}` did not finish within {timeout}s; "
                                 f"stdout={e.stdout!r} stderr={e.stderr!r}") from None
        if check and proc.returncode != 0:
            raise AssertionError(f"`{' '.join(cmd)}` exited {proc.returncode}\n"
                                 f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        self._remember_daemons()
        return proc

    def submit(self, *args, check=False, timeout=DEFAULT_CLI_TIMEOUT_S):
        """`ag submit ARGS...`; returns (job_id, proc) and remembers the job id for
        teardown. The id is stdout with --no-wait, else parsed from the status lines."""
        proc = self.ag("submit", *args, check=check, timeout=timeout)
        if "--no-wait" in args:
            assert proc.returncode == 0, f"submit failed: {proc.stderr}"
            job_id = proc.stdout.strip().splitlines()[-1].strip()
        else:
            job_id = submitted_job_id(proc)
        self.job_ids.add(job_id)
        return job_id, proc

    def ag_json(self, *args, timeout=DEFAULT_CLI_TIMEOUT_S, env=None):
        proc = self.ag("-o", "json", *args, timeout=timeout, env=env)
        return json.loads(proc.stdout)

    # ---- daemons --------------------------------------------------------------------
    def head_args(self):
        args = ["start-head", "--port", self.port, "--dashboard-port", self.dashboard_port,
                "--node-ip-address", "127.0.0.1", "--data-dir", self.head_data_dir,
                "--kill-grace", self.kill_grace_s]
        if self.node_timeout_s is not None:
            args += ["--node-timeout", self.node_timeout_s]
        return args + self.head_options

    def start_head(self, check=True, timeout=30, env=None):
        proc = self.ag(*self.head_args(), check=check, timeout=timeout, env=env)
        if proc.returncode == 0:
            self.head_started = True
        return proc

    def start_worker(self, ip, num_cpus=2, check=True, timeout=30, head=None, token=None, options=()):
        """`options`: more `ag start-worker` flags (e.g. ["--num-gpus", 4] for fake GPUs)."""
        args = ["start-worker", "--head-node", head or self.address, "--node-ip-address", ip,
                "--num-cpus", num_cpus, "--data-dir", self.worker_data_dir(ip),
                "--kill-grace", self.kill_grace_s, *options]
        if token is not None:
            args += ["--token", token]
        return self.ag(*args, check=check, timeout=timeout)

    def daemon_pids(self):
        """{daemon name: pid} from $AG_SESSION_DIR/daemons/*.pid."""
        pids = {}
        d = self.session_dir / "daemons"
        if d.is_dir():
            for f in d.glob("*.pid"):
                try:
                    pids[f.stem] = int(f.read_text().split()[0])
                except (ValueError, IndexError, OSError):
                    pass
        return pids

    def head_pid(self):
        return self.daemon_pids().get("head")

    def worker_pid(self, ip):
        return self.daemon_pids().get(f"worker-{ip}")

    def _remember_daemons(self):
        self._known_pids.update(self.daemon_pids().values())

    # ---- REST -----------------------------------------------------------------------
    def api(self, method, path, body=None, token=_DEFAULT_TOKEN, raw=None, timeout=30, port=None):
        """One REST call. `body` is sent as JSON; `raw` (bytes/str) is sent as is.
        Returns (status, parsed JSON or text)."""
        status, _headers, payload = self.api_full(method, path, body=body, token=token, raw=raw,
                                                  timeout=timeout, port=port)
        return status, payload

    def api_full(self, method, path, body=None, token=_DEFAULT_TOKEN, raw=None, timeout=30, port=None):
        url = f"http://127.0.0.1:{port or self.port}{path}"
        data = None
        if raw is not None:
            data = raw.encode() if isinstance(raw, str) else raw
        elif body is not None:
            data = json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token is _DEFAULT_TOKEN:
            token = self.token
        if token is not None:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, headers, text = resp.status, dict(resp.headers), resp.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            status, headers, text = e.code, dict(e.headers), e.read().decode(errors="replace")
        try:
            payload = json.loads(text)
        except ValueError:
            payload = text
        return status, headers, payload

    def job(self, job_id):
        status, body = self.api("GET", f"/api/jobs/{job_id}")
        assert status == 200, f"GET /api/jobs/{job_id} -> {status}: {body}"
        return body

    def jobs(self):
        status, body = self.api("GET", "/api/jobs")
        assert status == 200, f"GET /api/jobs -> {status}: {body}"
        return body["jobs"] if isinstance(body, dict) else body

    def nodes(self):
        status, body = self.api("GET", "/api/nodes")
        assert status == 200, f"GET /api/nodes -> {status}: {body}"
        return body["nodes"] if isinstance(body, dict) else body

    def wait_state(self, job_id, states, timeout=30):
        """Wait until the job is in one of `states`; return its JSON."""
        return wait_for_job_state(self.job, job_id, states, timeout)

    def wait_tasks_running(self, job_id, timeout=30):
        """Wait until every task of the job's latest attempt runs on its worker (a job is
        RUNNING from the moment it is placed, before its workers have started anything)."""
        def running():
            attempts = self.job(job_id)["attempts"]
            return bool(attempts) and all(t["state"] == "RUNNING" for t in attempts[-1]["tasks"])
        wait_until(running, timeout, message=f"every task of {job_id} to run")

    # ---- cluster-wide ---------------------------------------------------------------
    def start(self, worker_ips=WORKER_IPS, num_cpus=2, head_env=None):
        self.start_head(env=head_env)
        for ip in worker_ips:
            self.start_worker(ip, num_cpus=num_cpus)
        wait_until(lambda: sum(n["state"] == "ALIVE" for n in self.nodes()) >= len(worker_ips), 15,
                   message="workers to be ALIVE")
        return self

    def _belongs_to_us(self, env):
        if env.get("AG_SESSION_DIR") == str(self.session_dir):
            return True
        return "AG_TASK_MARKER" in env and env.get("AG_JOB_ID") in self.job_ids

    def teardown(self):
        """`ag stop`, then SIGKILL by pid whatever of this cluster is still alive."""
        self._remember_daemons()
        if self.head_started:
            try:
                status, body = self.api("GET", "/api/jobs", timeout=5)
                if status == 200:
                    self.job_ids.update(j["job_id"] for j in body["jobs"])
            except Exception:  # the head may be dead; the pids below still get cleaned
                pass
        try:
            self.ag("stop", "--timeout", "5", check=False, timeout=40)
        except AssertionError:
            pass
        leftovers = [p for p in self._known_pids if pid_alive(p) and AG_BIN in proc_cmdline(p)]
        leftovers += processes_where(self._belongs_to_us)
        for pid in set(leftovers):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self._remove_node_cgroups()

    def _remove_node_cgroups(self):
        remove_node_cgroups(self.root.glob("worker-*"))


@pytest.fixture(autouse=True)
def _tmp_path_open_to_tasks(request):
    """A worker running as root runs tasks as their users' own accounts: files a test
    shares with its tasks go in tmp_path, which those accounts may enter and write to
    (as a shared file system would be set up for them)."""
    if "tmp_path" in request.fixturenames and os.geteuid() == 0:
        path = request.getfixturevalue("tmp_path")
        path.chmod(0o1777)
        for parent in path.parents:
            if str(parent) in ("/", "/tmp"):
                break
            parent.chmod(parent.stat().st_mode & 0o7777 | 0o001)  # pass through, never list
    yield


@pytest.fixture
def cluster_factory(tmp_path):
    """make(name, workers=WORKER_IPS, start_head=True, **Cluster kwargs) -> Cluster.
    Everything it made is torn down after the test."""
    made = []

    def make(name="c", workers=WORKER_IPS, start_head=True, **kwargs):
        c = Cluster(tmp_path / name, **kwargs)
        made.append(c)
        if start_head:
            if workers:
                c.start(worker_ips=workers)
            else:
                c.start_head()
        return c

    yield make
    for c in reversed(made):
        c.teardown()


@pytest.fixture
def small_disk():
    """mount(path, size="2m"): a small tmpfs at `path`, unmounted after everything using it."""
    mounted = []

    def mount(path, size="2m"):
        path.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]).returncode != 0:
            pytest.fail("cannot mount a tmpfs for the disk-full test (needs root)")
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)])


def fill_disk(path):
    """Writes `path` until its file system is full; returns the file."""
    with open(path, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return path


@pytest.fixture
def cluster(cluster_factory):
    """A head on 127.0.0.1 and two workers (127.0.0.2, 127.0.0.3) with 2 CPUs each."""
    return cluster_factory("cluster")


@pytest.fixture
def head_only(cluster_factory):
    """A head with no workers, for bad-input tests: a valid job stays PENDING."""
    return cluster_factory("head", workers=())


def start_head_alone(root, **kwargs):
    """Start a head with no workers in its own session under `root`; the caller tears it
    down with .teardown(). (The head_only fixture does this with teardown included.)"""
    c = Cluster(root, **kwargs)
    c.start_head()
    return c


@pytest.fixture
def netns_network(tmp_path):
    """A private subnet of hosts made from network namespaces (tests/integration/netns.py):
    net.add_host(role) -> Host. Skips the test where namespaces cannot be made; after the
    test every process in its hosts is killed and every namespace, veth and file removed."""
    import netns  # only tests that use it need root and iproute2
    net = netns.Network.create(tmp_path / "hosts")
    yield net
    net.teardown()


@pytest.fixture
def host_cluster(netns_network):
    """make(workers=2, node_timeout_s=None, ...) -> netns.HostCluster, started: a head, the
    workers and a client on their own hosts, joined as the README says."""
    import netns

    def make(**kwargs):
        return netns.HostCluster(netns_network, **kwargs).start()

    return make


class HeldWrites:
    """hold_wal.c, built here: a head started with `.env` waits in each write to its SQLite
    log while `.hold()` is on (a store that does not answer), in a sleep kill -9 ends, so
    that a head killed then has never written what it was writing."""

    def __init__(self, tmp_path):
        lib = tmp_path / "hold_wal.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(Path(__file__).parent / "hold_wal.c"),
                        "-ldl"], check=True, timeout=60)
        self.flag = tmp_path / "hold-wal"
        self.env = {"LD_PRELOAD": str(lib), "AG_TEST_HOLD_WAL": str(self.flag)}

    def hold(self):
        self.flag.touch()

    def release(self):
        self.flag.unlink(missing_ok=True)

    def cluster(self, cluster_factory, worker_ips=WORKER_IPS):
        """A cluster whose head loads the shim, its workers ALIVE."""
        return cluster_factory("held", start_head=False).start(worker_ips=worker_ips, head_env=self.env)

    def kill_head_and_start_again(self, cluster, while_dead=None):
        """kill -9 the head (waiting in a held write, or not), run `while_dead` if given,
        lift the hold, start the head again."""
        head = cluster.head_pid()
        os.kill(head, signal.SIGKILL)
        wait_until(lambda: not pid_alive(head), 5, message="the head to die")
        if while_dead:
            while_dead()
        self.release()
        cluster.start_head()


@pytest.fixture
def held_writes(tmp_path):
    held = HeldWrites(tmp_path)
    yield held
    held.release()  # before the clusters' teardown, which needs the head's writes


@pytest.fixture
def fake_nvml(tmp_path):
    """(library, state file): a fake NVML (fake_nvml.c, built here) that a worker loads
    through AG_NVML_LIBRARY, reporting what the state file says (2 GPUs to begin with)."""
    lib = tmp_path / "libfake_nvml.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(Path(__file__).parent / "fake_nvml.c")],
                   check=True, timeout=60)
    state = tmp_path / "nvml-state"
    state.write_text("gpus 2\n")
    return lib, state


def start_gpu_worker(cluster, ip, lib, state):
    """Starts a worker on `ip` whose GPUs are the fake NVML's; returns its node."""
    cluster.ag("start-worker", "--head-node", cluster.address, "--node-ip-address", ip, "--num-cpus", 2,
               "--data-dir", cluster.worker_data_dir(ip), "--kill-grace", cluster.kill_grace_s,
               env={"AG_NVML_LIBRARY": str(lib), "FAKE_NVML_STATE": str(state)})
    wait_until(lambda: [n for n in cluster.nodes() if n["address"] == ip and n["state"] == "ALIVE"], 15,
               message=f"the worker on {ip}")
    return next(n for n in cluster.nodes() if n["address"] == ip)
