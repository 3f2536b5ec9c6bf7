"""The systemd units under a real systemd: a container (podman, runc) whose PID 1 is
systemd, with this build's `ag` mounted at /usr/bin/ag, the units and config files
written by `ag install-service` at their packaged places, and `systemctl` driving them.

What it shows: `systemctl restart aethergrid-worker` keeps a running task (same pid, the
whole log, one attempt); `systemctl stop aethergrid-worker` ends it; `systemctl restart
aethergrid-head` keeps finished, running and pending jobs; a worker the head refuses for
its protocol version fails with status 78 and systemd does not restart it.

The image (Debian 12 with systemd and ag's shared libraries) is built once per machine
by images.py. Where systemd cannot boot in a container here, the test is skipped with
the reason; test_install.py tests the same unit behaviour without systemd.
"""
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import AG_BIN, wait_until

pytestmark = pytest.mark.skipif(not (shutil.which("podman") and shutil.which("mmdebstrap")),
                                reason="needs podman and mmdebstrap")

ADMIN = "ag --address 127.0.0.1:6379 --token-file /root/admin-token"
LINES = 40
SLOW_JOB = f"for i in $(seq 1 {LINES}); do echo line $i; sleep 0.2; done"


class Machine:
    """A container booted with systemd as PID 1; `sh` runs a script in it."""

    def __init__(self, name):
        self.name = name

    def sh(self, script, timeout=60, check=True):
        proc = subprocess.run(["podman", "exec", self.name, "sh", "-c", "PATH=/usr/sbin:/usr/bin:/sbin:/bin; " + script],
                              capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"`{script}` exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
                                 f"stderr:\n{proc.stderr}\njournal:\n{self.journal()}")
        return proc.stdout.strip()

    def journal(self):
        proc = subprocess.run(["podman", "exec", self.name, "journalctl", "--no-pager", "-n", "60",
                               "-u", "aethergrid-head", "-u", "aethergrid-worker"],
                              capture_output=True, text=True, timeout=30)
        return proc.stdout

    def show(self, unit, prop):
        return self.sh(f"systemctl show -p {prop} --value {unit}")

    def job(self, job_id):
        return json.loads(self.sh(f"{ADMIN} -o json status {job_id}"))

    def wait_job(self, job_id, states, timeout=40):
        last = {}

        def reached():
            last["job"] = self.job(job_id)
            return last["job"]["state"] in states
        try:
            wait_until(reached, timeout, interval=0.5, message=f"job {job_id} to reach {states}")
        except AssertionError as e:
            raise AssertionError(f"{e}; last: {last.get('job')}\njournal:\n{self.journal()}") from None
        return last["job"]

    def running_task_pid(self, job_id):
        def pid():
            tasks = [t for a in self.job(job_id)["attempts"] for t in a["tasks"]]
            return tasks and tasks[0]["state"] == "RUNNING" and tasks[0].get("pid")
        return wait_until(pid, 20, interval=0.5, message=f"job {job_id}'s task to run")


@pytest.fixture
def machine(tmp_path):
    from images import ensure_image
    image = ensure_image("systemd")
    name = f"ag-systemd-test-{os.getpid()}"
    subprocess.run(["podman", "rm", "-f", name], capture_output=True, timeout=60)
    started = subprocess.run(
        ["podman", "run", "-d", "--name", name, "--runtime", "runc", "--systemd=always",
         # runc refuses limits above the host's hard ones (see docs/DEVELOPMENT.md, Containers).
         "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=30000:30000",
         "-v", f"{os.path.realpath(AG_BIN)}:/usr/bin/ag:ro", image, "/lib/systemd/systemd"],
        capture_output=True, text=True, timeout=120)
    if started.returncode != 0:
        pytest.skip(f"systemd cannot run in a container here: {started.stderr.strip()}")
    m = Machine(name)
    try:
        state = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and state not in ("running", "degraded"):
            state = m.sh("systemctl is-system-running", check=False)
            time.sleep(0.5)
        if state not in ("running", "degraded"):
            logs = subprocess.run(["podman", "logs", name], capture_output=True, text=True, timeout=30)
            pytest.skip(f"systemd did not boot in the container ({state}): {logs.stdout[-2000:]}")
        yield m
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True, timeout=120)


def test_units_keep_their_promises_under_systemd(machine):
    m = machine
    # The head, as the packaged unit has it: its own account, the packaged config.
    m.sh("useradd --system --home-dir /var/lib/aethergrid --shell /usr/sbin/nologin aethergrid-head")
    m.sh("ag install-service head && systemctl daemon-reload && systemctl start aethergrid-head")
    m.sh("for i in $(seq 100); do [ -s /var/lib/aethergrid/head/join-token ] && exit 0; sleep 0.2; done; exit 1")
    assert m.sh("stat -c %U /var/lib/aethergrid/head") == "aethergrid-head"
    m.sh("install -m 600 /var/lib/aethergrid/head/token /root/admin-token")
    # The worker reads its join token from the file the config names.
    m.sh("ag install-service worker --set head-node=127.0.0.1:6379 --set num-cpus=2 --set kill-grace=2"
         " && install -m 600 /var/lib/aethergrid/head/join-token /etc/aethergrid/join-token"
         " && systemctl daemon-reload && systemctl start aethergrid-worker")
    assert "token" not in m.show("aethergrid-worker", "ExecStart").replace("token-file", "").lower()
    wait_until(lambda: '"ALIVE"' in m.sh(f"{ADMIN} -o json list-nodes"), 30, interval=0.5, message="the worker")

    # systemctl restart aethergrid-worker: the task goes on, the new agent adopts it.
    job_id = m.sh(f"{ADMIN} submit --no-wait -- '{SLOW_JOB}'").splitlines()[-1]
    pid = m.running_task_pid(job_id)
    agent_before = m.show("aethergrid-worker", "MainPID")
    m.sh("systemctl restart aethergrid-worker")
    assert m.show("aethergrid-worker", "MainPID") != agent_before
    m.sh(f"kill -0 {pid}")  # the task outlived its agent
    job = m.wait_job(job_id, ("SUCCEEDED", "FAILED"))
    assert job["state"] == "SUCCEEDED" and len(job["attempts"]) == 1, job
    assert job["attempts"][0]["tasks"][0]["pid"] == pid
    log = m.sh(f"{ADMIN} logs {job_id} --task-index 0")
    assert log.splitlines() == [f"line {i}" for i in range(1, LINES + 1)]

    # systemctl restart aethergrid-head: every job is kept, the running one finishes.
    done_id = m.sh(f"{ADMIN} submit --no-wait -- 'echo done'").splitlines()[-1]
    m.wait_job(done_id, ("SUCCEEDED",))
    pending_id = m.sh(f"{ADMIN} submit --no-wait --num-cpus 64 --allow-unschedulable -- true").splitlines()[-1]
    running_id = m.sh(f"{ADMIN} submit --no-wait -- '{SLOW_JOB}'").splitlines()[-1]
    m.running_task_pid(running_id)
    m.sh("systemctl restart aethergrid-head")
    wait_until(lambda: m.sh(f"{ADMIN} status", check=False), 30, interval=0.5, message="the head to answer again")
    assert m.job(done_id)["state"] == "SUCCEEDED"
    assert m.job(pending_id)["state"] == "PENDING"
    job = m.wait_job(running_id, ("SUCCEEDED", "FAILED"))
    assert job["state"] == "SUCCEEDED" and len(job["attempts"]) == 1, job

    # systemctl stop aethergrid-worker: the agent ends its tasks; nothing of them is left.
    long_id = m.sh(f"{ADMIN} submit --no-wait -- 'sleep 313'").splitlines()[-1]
    m.running_task_pid(long_id)
    m.sh("systemctl stop aethergrid-worker", timeout=90)
    assert m.show("aethergrid-worker", "ActiveState") == "inactive"
    assert m.sh("pgrep -f '[s]leep 313' || true") == ""
    # The task supervisor leaves once its agent is gone and its tasks have ended.
    wait_until(lambda: m.sh("pgrep -f '[_]_task-supervisor' || true") == "", 15, interval=0.5,
               message="the task supervisor to leave")
    stopped = m.wait_job(long_id, ("FAILED", "STOPPED"))
    assert "signal 15" in stopped["message"], stopped["message"]

    # A worker of another protocol version: refused, exit 78, and systemd leaves it so.
    m.sh("mkdir -p /etc/systemd/system/aethergrid-worker.service.d && printf '[Service]\\n"
         "Environment=AG_TEST_WORKER_PROTOCOL=999\\n' > /etc/systemd/system/aethergrid-worker.service.d/test.conf"
         " && systemctl daemon-reload")
    m.sh("systemctl start aethergrid-worker", check=False)
    wait_until(lambda: m.show("aethergrid-worker", "ActiveState") == "failed", 30, interval=0.5,
               message="the refused worker to fail")
    assert m.show("aethergrid-worker", "ExecMainStatus") == "78"
    time.sleep(4)  # longer than RestartSec: a restart would have happened by now
    assert m.show("aethergrid-worker", "NRestarts") == "0"
    assert m.show("aethergrid-worker", "ActiveState") == "failed"
    assert "worker protocol version 999" in m.journal()
