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
import shutil
import time

import pytest

import rootfs
from conftest import AG_BIN, wait_until
from rootfs import ADMIN

pytestmark = pytest.mark.skipif(not (shutil.which("podman") and shutil.which("mmdebstrap")),
                                reason="needs podman and mmdebstrap")

LINES = 40
SLOW_JOB = f"for i in $(seq 1 {LINES}); do echo line $i; sleep 0.2; done"


@pytest.fixture
def machine():
    with rootfs.machine("systemd", systemd=True, volumes=[(AG_BIN, "/usr/bin/ag")]) as m:
        yield m


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
    assert "worker protocol version 999" in m.sh("journalctl --no-pager -o cat -u aethergrid-worker")
