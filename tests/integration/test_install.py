"""Installing and operating AetherGrid as a service (issue 15): the worker protocol
version, config files, `ag install-service` and its systemd units, the wheel with `ag`.

Here the units are tested by what systemd would do with them, with no systemd: each
test parses the installed unit file, runs its ExecStart command line (with the config
file install-service wrote) and sends the signals its KillMode=, KillSignal= and
RestartKillSignal= name to the processes KillMode= names. `systemd-analyze verify`
checks the files themselves where it is installed. test_systemd_units.py runs the same
units under a real systemd, in a container.
"""
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rootfs
from conftest import AG_BIN, REPO, free_ports, job_processes, pid_alive, proc_cmdline, processes_where, wait_until

ONE_LINE_A_FIFTH_S = "for i in $(seq 1 {n}); do echo line $i; sleep 0.2; done"


def write_private(path, text, mode=0o600):
    path.write_text(text)
    path.chmod(mode)
    return path


def unit_settings(path):
    """{key: [values]} of a systemd unit file (comments and section headers left out)."""
    return rootfs.unit_settings(Path(path).read_text())


def unit_environment(settings, session_dir):
    """The environment systemd gives ExecStart: the unit's Environment= lines, with the
    test's own session dir in place of the unit's RuntimeDirectory (/run/...)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AG_")}
    for assignment in settings.get("Environment", []):
        key, _, value = assignment.partition("=")
        env[key] = value
    env["AG_SESSION_DIR"] = str(session_dir)
    return env


class UnitProcess:
    """ExecStart of an installed unit, started as systemd would start it (its own
    session, stdout and stderr to a log, like the journal)."""

    def __init__(self, unit_path, session_dir, log_path, extra_env=None):
        self.settings = unit_settings(unit_path)
        self.argv = shlex.split(self.settings["ExecStart"][0])
        self.env = unit_environment(self.settings, session_dir)
        self.env.update(extra_env or {})
        self.log_path = log_path
        self.proc = None

    def start(self):
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def signal(self, name):
        """Sends the signal the unit names for `name` (KillSignal, RestartKillSignal) to
        the processes its KillMode= says systemd signals."""
        assert self.settings["KillMode"] == ["process"], "KillMode=process signals the main process alone"
        os.kill(self.proc.pid, getattr(signal, self.settings[name][0]))

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.argv} did not exit within {timeout}s; log:\n{self.log()}") from None

    def log(self):
        return Path(self.log_path).read_text(errors="replace")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def units():
    """Unit processes a test started; SIGKILLed (by pid) after it."""
    started = []
    yield started
    for unit in started:
        unit.kill()


def head_answers(cluster):
    try:
        return cluster.api("GET", "/api/version", timeout=5)[0] == 200
    except OSError:  # not listening yet
        return False


def install(cluster, kind, tmp_path, *settings, check=True, force=False):
    unit_dir, config_dir = tmp_path / f"{kind}-units", tmp_path / f"{kind}-etc"
    args = ["install-service", kind, "--unit-dir", unit_dir, "--config-dir", config_dir] + (["--force"] if force else [])
    for setting in settings:
        args += ["--set", setting]
    if kind == "head":
        args += ["--user", "root"]
    proc = cluster.ag(*args, check=check)
    return proc, unit_dir / f"aethergrid-{kind}.service", config_dir / f"{kind}.conf"


# ---- the worker protocol version ----------------------------------------------------------

def test_a_worker_of_another_protocol_version_is_refused_naming_both_and_gives_up(head_only, tmp_path):
    cluster = head_only
    _, info = cluster.api("GET", "/api/version")
    theirs = info["worker_protocol"] + 1
    claim = {"AG_TEST_WORKER_PROTOCOL": str(theirs)}
    ip = "127.0.0.2"

    # In the background: `ag start-worker` fails with the head's words, and nothing keeps retrying.
    proc = cluster.ag("start-worker", "--head-node", cluster.address, "--node-ip-address", ip,
                      "--data-dir", cluster.worker_data_dir(ip), check=False, env=claim, timeout=30)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"this worker speaks worker protocol version {theirs}" in proc.stderr, proc.stderr
    assert f"the head (AetherGrid {info['version']}" in proc.stderr
    assert f"speaks version {info['worker_protocol']}" in proc.stderr
    assert "upgrade the head first" in proc.stderr
    assert not processes_where(lambda env: env.get("AG_TEST_WORKER_PROTOCOL") == str(theirs))

    # In the foreground, as the systemd unit runs it: exit status 78, which the unit's
    # RestartPreventExitStatus= keeps systemd from restarting.
    _, unit_path, config = install(cluster, "worker", tmp_path, f"head-node={cluster.address}",
                                   f"node-ip-address={ip}", f"data-dir={cluster.worker_data_dir(ip)}",
                                   f"token-file={write_private(tmp_path / 'join', cluster.join_token)}")
    unit = UnitProcess(unit_path, cluster.session_dir, tmp_path / "worker.log", extra_env=claim).start()
    try:
        code = unit.wait(timeout=30)
    finally:
        unit.kill()
    assert str(code) in unit.settings["RestartPreventExitStatus"], unit.log()
    assert f"worker protocol version {theirs}" in unit.log()
    assert cluster.nodes() == []

    # The same worker speaking this head's version joins.
    worker = UnitProcess(unit_path, cluster.session_dir, tmp_path / "worker2.log").start()
    try:
        wait_until(lambda: [n for n in cluster.nodes() if n["state"] == "ALIVE"], 15, message="the worker to join")
    finally:
        worker.kill()


# ---- config files --------------------------------------------------------------------------

def test_daemons_start_from_config_files_and_flags_override_them(cluster_factory, tmp_path):
    cluster = cluster_factory("configured", workers=(), start_head=False)
    head_conf = tmp_path / "head.conf"
    head_conf.write_text(f'port = 1\ndashboard-port = {cluster.dashboard_port}\n'
                         f'data-dir = "{cluster.head_data_dir}"\nnode-timeout = 5\nkill-grace = 2\n')
    cluster.ag("start-head", "--config", head_conf, "--port", cluster.port)  # the flag over the file's port
    cluster.head_started = True
    _, info = cluster.api("GET", "/api/version")
    assert info["worker_protocol"] >= 1

    ip = "127.0.0.2"
    token_file = write_private(tmp_path / "join-token", cluster.join_token + "\n")
    worker_conf = tmp_path / "worker.conf"
    worker_conf.write_text(f'head-node = "{cluster.address}"\nnode-ip-address = {ip}\nnum-cpus = 3\n'
                           f'label = ["gpu=none", "zone=b"]\ndata-dir = "{cluster.worker_data_dir(ip)}"\n'
                           f'token-file = "{token_file}"\nno-task-limits = true\nkill-grace = 2\n')
    cluster.ag("start-worker", "--config", worker_conf, "--num-cpus", "2")
    node = wait_until(lambda: [n for n in cluster.nodes() if n["state"] == "ALIVE"], 15, message="the worker")[0]
    assert node["address"] == ip
    assert node["resources"]["num_cpus"] == 2  # the flag over the file's 3
    assert node["labels"] == {"gpu": "none", "zone": "b"}
    assert "not enforced" in node["limits"]
    job_id, proc = cluster.submit("--constraint", "zone=b", "--", "echo configured")
    assert proc.returncode == 0 and "configured" in proc.stdout, proc.stdout + proc.stderr


BAD_CONFIGS = [
    # (what is wrong, file contents, words the error must have)
    ("unknown key", 'num-cpu = 2\n', ["unknown key 'num-cpu'", "did you mean 'num-cpus'", "--help"]),
    ("wrong type", 'num-cpus = "many"\n', ["key 'num-cpus'", "'many' is not a number"]),
    ("out of range", 'kill-grace = -3\n', ["key 'kill-grace'"]),
    ("not a flag value", 'wait-for-head = "maybe"\n', ["key 'wait-for-head'", "'maybe' is not true or false"]),
    ("a list for one value", 'task-user = ["alice", "bob"]\n', ["key 'task-user'"]),
    ("a token in the file", 'token = "agj_x"\n', ["key 'token'", "token-file"]),
    ("a section", '[worker]\nnum-cpus = 2\n', ["sections ([worker]) are not used"]),
]


@pytest.mark.parametrize("what,text,words", BAD_CONFIGS, ids=[b[0] for b in BAD_CONFIGS])
def test_a_bad_config_file_names_file_and_key_and_starts_nothing(head_only, tmp_path, what, text, words):
    cluster = head_only
    conf = tmp_path / "worker.conf"
    ip = "127.0.0.2"
    conf.write_text(f'head-node = "{cluster.address}"\ndata-dir = "{cluster.worker_data_dir(ip)}"\n' + text)
    proc = cluster.ag("start-worker", "--config", conf, "--node-ip-address", ip, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"config file {conf}" in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr
    assert "Nothing was started" in proc.stderr
    assert not cluster.worker_data_dir(ip).exists()
    assert cluster.nodes() == [] and f"worker-{ip}" not in cluster.daemon_pids()


def test_an_unreadable_config_file_or_token_file_is_refused(head_only, tmp_path):
    cluster = head_only
    for missing in (tmp_path / "nowhere.conf", tmp_path):
        proc = cluster.ag("start-head", "--config", missing, "--port", free_ports(1)[0], check=False)
        assert proc.returncode == 2 and f"config file {missing}: cannot read it" in proc.stderr, proc.stderr
    ip = "127.0.0.2"
    conf = tmp_path / "worker.conf"
    readable = write_private(tmp_path / "readable-token", cluster.join_token, mode=0o644)
    for token_file, words in ((tmp_path / "no-token", "No such file"),
                              (readable, f"can be read by other users (mode 0644); run `chmod 600 {readable}`"),
                              (tmp_path, "is not a regular file")):
        conf.write_text(f'head-node = "{cluster.address}"\ntoken-file = "{token_file}"\n'
                        f'data-dir = "{cluster.worker_data_dir(ip)}"\n')
        proc = cluster.ag("start-worker", "--config", conf, "--node-ip-address", ip, check=False)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"token-file (config file {conf})" in proc.stderr and words in proc.stderr, proc.stderr
    assert cluster.nodes() == []


@pytest.mark.parametrize("kind", ["head", "worker"])
def test_the_sample_config_files_document_every_option(kind):
    sample = (REPO / "packaging" / "config" / f"{kind}.conf").read_text()
    help_text = subprocess.run([AG_BIN, f"start-{kind}", "--help"], capture_output=True, text=True,
                               timeout=30).stdout
    options = {word[2:] for line in help_text.split("Global options")[0].splitlines()
               for word in line.split()[:1] if word.startswith("--")}
    options -= {"help", "config"}
    assert options, help_text
    keys = {line.lstrip("# ").split(" = ")[0] for line in sample.splitlines()
            if " = " in line and line.lstrip("# ").split(" = ")[0].replace("-", "").isalpha()}
    assert options <= keys, f"not in the sample: {sorted(options - keys)}"
    assert keys - options <= {"insecure"}, f"no such option: {sorted(keys - options - {'insecure'})}"


# ---- install-service and the units ---------------------------------------------------------

def test_install_service_writes_the_packaged_units_and_refuses_to_overwrite(head_only, tmp_path):
    cluster = head_only
    proc, unit, config = install(cluster, "worker", tmp_path, "head-node=10.0.0.1:6379", "label=a=1", "label=b=2")
    assert f"wrote: {unit}" in proc.stdout and f"wrote: {config}" in proc.stdout
    ag = os.path.realpath(AG_BIN)
    settings = unit_settings(unit)
    assert settings["ExecStart"] == [f"{ag} start-worker --block --config {config}"]
    assert "token" not in settings["ExecStart"][0].replace("token-file", "")
    assert settings["KillMode"] == ["process"] and settings["Delegate"] == ["yes"]
    assert settings["KillSignal"] == ["SIGTERM"] and settings["RestartKillSignal"] == ["SIGUSR2"]
    packaged = (REPO / "packaging" / "systemd" / "aethergrid-worker.service").read_text()
    assert unit.read_text() == packaged.replace("/usr/bin/ag ", ag + " ").replace("/etc/aethergrid", str(config.parent))
    text = config.read_text()
    assert 'head-node = "10.0.0.1:6379"\n' in text and 'label = ["a=1", "b=2"]\n' in text
    assert f'token-file = "{config.parent}/join-token"' in text

    again, _, _ = install(cluster, "worker", tmp_path, "head-node=10.0.0.1:6379", "label=a=1", "label=b=2")
    assert f"unchanged: {unit}" in again.stdout
    config.write_text(text + "num-cpus = 4\n")
    unit.write_text(unit.read_text() + "# edited\n")
    unit_before = unit.read_text()
    refused, _, _ = install(cluster, "worker", tmp_path, "head-node=10.0.0.1:6379", check=False)
    assert refused.returncode == 1 and "exists and differs" in refused.stderr and "--force" in refused.stderr
    assert "Nothing was written" in refused.stderr
    assert config.read_text().endswith("num-cpus = 4\n") and unit.read_text() == unit_before
    forced, _, _ = install(cluster, "worker", tmp_path, "head-node=10.0.0.1:6379", force=True)
    assert f"replaced: {config}" in forced.stdout and "num-cpus = 4" not in config.read_text()
    assert f"replaced: {unit}" in forced.stdout and "# edited" not in unit.read_text()

    bad, _, _ = install(cluster, "worker", tmp_path / "other", "nmu-cpus=3", check=False)
    assert bad.returncode == 2 and "has no option --nmu-cpus" in bad.stderr
    assert not (tmp_path / "other").exists()

    head_proc, head_unit, head_config = install(cluster, "head", tmp_path, "node-ip-address=10.0.0.1")
    assert unit_settings(head_unit)["User"] == ["root"]
    assert 'node-ip-address = "10.0.0.1"' in head_config.read_text()
    if shutil.which("systemd-analyze"):
        verify = subprocess.run(["systemd-analyze", "verify", unit, head_unit], capture_output=True, text=True,
                                timeout=60)
        assert verify.returncode == 0 and not verify.stderr.strip(), verify.stderr


def test_worker_unit_restart_keeps_running_tasks_and_stop_ends_them(cluster_factory, tmp_path, units):
    cluster = cluster_factory("units", workers=(), node_timeout_s=6)
    ip = "127.0.0.2"
    data_dir = cluster.worker_data_dir(ip)
    token_file = write_private(tmp_path / "join-token", cluster.join_token)
    _, unit_path, _ = install(cluster, "worker", tmp_path, f"head-node={cluster.address}", f"node-ip-address={ip}",
                              f"data-dir={data_dir}", f"token-file={token_file}", "num-cpus=2", "kill-grace=2")
    worker = UnitProcess(unit_path, cluster.session_dir, tmp_path / "worker.log")
    units.append(worker.start())
    wait_until(lambda: [n for n in cluster.nodes() if n["state"] == "ALIVE"], 15, message="the worker to join")

    lines = 40
    job_id, _ = cluster.submit("--no-wait", "--", ONE_LINE_A_FIFTH_S.format(n=lines))
    task = wait_until(lambda: [t for a in cluster.job(job_id)["attempts"] for t in a["tasks"]
                               if t["state"] == "RUNNING" and t.get("pid")], 15, message="the task to run")[0]

    # systemctl restart: RestartKillSignal to the agent alone; it exits, the task goes on.
    worker.signal("RestartKillSignal")
    assert worker.wait(timeout=10) == 0
    assert pid_alive(task["pid"]), "the task must outlive its agent"
    restarted = UnitProcess(unit_path, cluster.session_dir, tmp_path / "worker.log")
    units.append(restarted.start())
    job = cluster.wait_state(job_id, {"SUCCEEDED", "FAILED"}, timeout=30)
    assert job["state"] == "SUCCEEDED" and job["num_attempts"] == 1, job["message"]
    assert job["attempts"][0]["tasks"][0]["pid"] == task["pid"]  # adopted, not started again
    log = cluster.ag("logs", job_id).stdout
    assert [line.split("] ", 1)[-1] for line in log.splitlines()] == [f"line {i}" for i in range(1, lines + 1)]

    # systemctl stop: KillSignal to the agent; it ends every task through their
    # supervisor, reports them, and exits; then nothing of the worker is left.
    long_id, _ = cluster.submit("--no-wait", "--", "sleep 300")
    cluster.wait_state(long_id, "RUNNING", timeout=15)
    wait_until(lambda: job_processes([long_id]), 10, message="the task's processes")
    started = time.monotonic()
    restarted.signal("KillSignal")
    assert restarted.wait(timeout=int(restarted.settings["TimeoutStopSec"][0])) == 0
    assert not job_processes([long_id])
    stopped = cluster.wait_state(long_id, {"FAILED", "STOPPED", "SUCCEEDED"}, timeout=15)
    assert "signal 15" in stopped["message"] or "SIGTERM" in stopped["message"], stopped["message"]
    assert time.monotonic() - started < 15
    wait_until(lambda: not [p for p in processes_where(lambda env: True)
                            if "__task-supervisor" in proc_cmdline(p) and str(data_dir) in proc_cmdline(p)],
               10, message="the task supervisor to leave")


def test_head_unit_restart_keeps_every_job(cluster_factory, tmp_path, units):
    cluster = cluster_factory("head-unit", workers=(), start_head=False, node_timeout_s=6)
    _, unit_path, _ = install(cluster, "head", tmp_path, f"port={cluster.port}",
                              f"dashboard-port={cluster.dashboard_port}", f"data-dir={cluster.head_data_dir}",
                              "node-timeout=6", "kill-grace=2")
    head = UnitProcess(unit_path, cluster.session_dir, tmp_path / "head.log")
    units.append(head.start())
    wait_until(lambda: (cluster.head_data_dir / "token").exists(), 15, message="the head's token")
    cluster.head_started = True
    wait_until(lambda: head_answers(cluster), 15, message="the head to answer")
    cluster.start_worker("127.0.0.2")
    wait_until(lambda: [n for n in cluster.nodes() if n["state"] == "ALIVE"], 15, message="the worker")

    done_id, _ = cluster.submit("--", "echo done")
    running_id, _ = cluster.submit("--no-wait", "--", ONE_LINE_A_FIFTH_S.format(n=30))
    waiting_id, _ = cluster.submit("--no-wait", "--num-cpus", "64", "--allow-unschedulable", "--", "true")
    cluster.wait_state(running_id, "RUNNING", timeout=15)

    # systemctl restart aethergrid-head: KillSignal to the unit (only the head runs in
    # it), then ExecStart again.
    os.kill(head.proc.pid, getattr(signal, unit_settings(unit_path)["KillSignal"][0]))
    assert head.wait(timeout=int(head.settings["TimeoutStopSec"][0])) == 0
    units.append(UnitProcess(unit_path, cluster.session_dir, tmp_path / "head.log").start())
    wait_until(lambda: head_answers(cluster), 15, message="the head to answer again")

    assert cluster.job(done_id)["state"] == "SUCCEEDED"
    job = cluster.wait_state(running_id, {"SUCCEEDED", "FAILED"}, timeout=30)
    assert job["state"] == "SUCCEEDED" and job["num_attempts"] == 1, job["message"]
    assert cluster.job(waiting_id)["state"] == "PENDING"
    assert {done_id, running_id, waiting_id} <= {j["job_id"] for j in cluster.jobs()}


# ---- the wheel -----------------------------------------------------------------------------

def test_the_wheel_brings_the_sdk_and_the_ag_command(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AG_BINARY")}
    built = subprocess.run([str(REPO / "scripts" / "build-wheel.sh"), str(tmp_path / "wheel")],
                           env={**env, "AG_BINARY": AG_BIN}, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    wheels = list((tmp_path / "wheel").glob("aethergrid-*-py3-none-linux_*.whl"))
    assert len(wheels) == 1, built.stdout
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", str(wheels[0])], env=env,
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    version = subprocess.run([str(venv / "bin" / "ag"), "--version"], env=env, capture_output=True, text=True,
                             timeout=30)
    expected = subprocess.run([AG_BIN, "--version"], capture_output=True, text=True, timeout=30).stdout
    assert version.returncode == 0 and version.stdout == expected, version.stderr
    sdk = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import aethergrid; print(aethergrid.__file__); print(aethergrid.ag_path()); "
                          "print(aethergrid.Client.__name__)"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert sdk.returncode == 0, sdk.stderr
    module, binary, client = sdk.stdout.split()
    assert module.startswith(str(venv)) and binary.startswith(str(venv)) and client == "Client"
    assert os.access(binary, os.X_OK)
    sections = subprocess.run(["readelf", "--section-headers", "--wide", binary], capture_output=True, text=True,
                              timeout=30, check=True).stdout
    assert ".debug_info" not in sections  # debug info stripped (the portable build ships without it already)
    print(f"wheel {wheels[0].name}: {wheels[0].stat().st_size} bytes; ag in it {os.path.getsize(binary)} bytes",
          file=sys.stderr)


def installed_wheel(tmp_path, binary):
    """(venv, wheel) after scripts/build-wheel.sh with `binary` and pip install of it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AG_BINARY")}
    built = subprocess.run([str(REPO / "scripts" / "build-wheel.sh"), str(tmp_path / "wheel")],
                           env={**env, "AG_BINARY": str(binary)}, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "wheel").glob("aethergrid-*.whl")
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", str(wheel)], env=env,
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv, wheel


def test_the_wheels_ag_falls_back_to_another_ag_where_its_glibc_is_too_old(tmp_path):
    venv, _ = installed_wheel(tmp_path, AG_BIN)
    (needed,) = venv.glob("lib/python3*/site-packages/aethergrid/_bin")
    # As on a system older than the binary: it asks for a glibc newer than this one.
    (needed / "ag.glibc").write_text("9.99\n")
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "ag").symlink_to(AG_BIN)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ours = os.confstr("CS_GNU_LIBC_VERSION").split()[1]
    ran = subprocess.run([str(venv / "bin" / "ag"), "--version"], capture_output=True, text=True, timeout=30,
                         env={**env, "PATH": f"{venv / 'bin'}:{other}:/usr/bin:/bin"})
    assert ran.returncode == 0 and ran.stdout.startswith("AetherGrid "), ran.stderr
    assert ran.stderr == (f"aethergrid: the ag this package carries cannot run here (it needs glibc 9.99 or newer, "
                          f"and this system has glibc {ours}); using {other / 'ag'}\n")
    # With no other ag: the reason and what to do, and nothing run.
    ran = subprocess.run([str(venv / "bin" / "ag"), "--version"], capture_output=True, text=True, timeout=30,
                         env={**env, "PATH": f"{venv / 'bin'}:/usr/bin:/bin"})
    assert ran.returncode == 127 and ran.stdout == "", ran.stdout
    assert "cannot run here: it needs glibc 9.99 or newer" in ran.stderr and "scripts/build.sh" in ran.stderr
    sdk = subprocess.run([str(venv / "bin" / "python"), "-c", "import aethergrid; aethergrid.ag_path()"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert sdk.returncode != 0 and "needs glibc 9.99" in sdk.stderr
    # A requirement it cannot read is no requirement: the bundled binary runs.
    (needed / "ag.glibc").write_text("not a version\n")
    ran = subprocess.run([str(venv / "bin" / "ag"), "--version"], capture_output=True, text=True, timeout=30,
                         env={**env, "PATH": f"{venv / 'bin'}:/usr/bin:/bin"})
    assert ran.returncode == 0 and ran.stdout.startswith("AetherGrid ") and ran.stderr == "", ran.stderr


PORTABLE_BIN = REPO / "build-portable" / "bin" / "ag"


@pytest.mark.skipif(not (PORTABLE_BIN.exists() and shutil.which("podman") and shutil.which("mmdebstrap")),
                    reason="needs the portable build (scripts/build-portable.sh), podman and mmdebstrap")
def test_the_portable_wheel_is_manylinux_2_31_and_works_in_debian_11(tmp_path):
    venv, wheel = installed_wheel(tmp_path, PORTABLE_BIN)
    assert wheel.name.endswith("-py3-none-manylinux_2_31_x86_64.whl"), wheel.name
    # For a system with an older glibc, pip finds no distribution it may install.
    def download(platform):
        return subprocess.run([str(venv / "bin" / "pip"), "download", "--no-index", "--find-links", str(wheel.parent),
                               "--platform", platform, "--only-binary=:all:", "--no-deps", "-d",
                               str(tmp_path / platform), "aethergrid"], capture_output=True, text=True, timeout=120)
    older = download("manylinux_2_28_x86_64")
    assert older.returncode != 0 and "No matching distribution found for aethergrid" in older.stderr, older.stderr
    assert download("manylinux_2_31_x86_64").returncode == 0
    with rootfs.machine("python-bullseye", volumes=[(wheel, f"/tmp/{wheel.name}")]) as m:
        assert m.sh("getconf GNU_LIBC_VERSION") == "glibc 2.31"
        # As a user would: a venv, pip install of the wheel (pip 20.3 checks the tag).
        m.sh(f"python3 -m venv /v && /v/bin/pip install --no-index /tmp/{wheel.name}", timeout=300)
        expected = subprocess.run([str(PORTABLE_BIN), "--version"], capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        assert m.sh("/v/bin/ag --version") == expected
        # The binary it carries runs a head, a worker and a job, which the SDK submits.
        m.sh("PATH=/v/bin:$PATH; ag start-head --node-ip-address 127.0.0.1 >/dev/null && "
             "ag start-worker --head-node 127.0.0.1:6379 --num-cpus 2 >/dev/null", timeout=120)
        out = m.sh("cd /tmp && /v/bin/python -c \"import aethergrid as ag; c = ag.Client(); "
                   "j = c.submit_job(entrypoint='echo from debian 11 rank=\\$RANK', num_workers=1); "
                   "print(j.wait(timeout=60)['state']); print(j.get_logs())\"", timeout=120)
        assert "SUCCEEDED" in out and "from debian 11 rank=0" in out, out
        m.sh("/v/bin/ag stop", timeout=60)


def test_pip_install_of_the_source_folder_brings_ag_too(tmp_path):
    # A copy of python/, so that the build's leftovers stay out of the checkout.
    source = tmp_path / "python"
    shutil.copytree(REPO / "python", source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index",
                                str(source)], env={**env, "AG_BINARY": AG_BIN}, capture_output=True, text=True,
                               timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    version = subprocess.run([str(venv / "bin" / "ag"), "--version"], env=env, capture_output=True, text=True,
                             timeout=30)
    assert version.returncode == 0 and version.stdout.startswith("AetherGrid "), version.stderr
    # Without a binary to carry, the build says where one comes from.
    missing = subprocess.run([str(venv / "bin" / "pip"), "wheel", "--no-build-isolation", "--no-index", "--no-deps",
                              "-w", str(tmp_path / "out"), str(source)],
                             env={**env, "AG_BINARY": str(tmp_path / "no-such-ag")}, capture_output=True, text=True,
                             timeout=300)
    assert missing.returncode != 0 and "no ag binary at" in missing.stdout + missing.stderr
