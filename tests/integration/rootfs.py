"""Machines for the tests of what gets installed: containers (podman, runc) made from the
tests' Debian root file systems (images.py), either booted with systemd as PID 1 or
plain (PID 1 only waits). `machine()` starts one and removes it, with every process in
it, when its `with` block ends; `Machine.sh` runs a script inside.

runc, not crun (crun cannot start containers on these hosts), and limits no higher than
the host's hard ones, which runc refuses (docs/DEVELOPMENT.md, "Containers").
"""
import contextlib
import json
import os
import subprocess
import time

import pytest

from conftest import wait_until

PODMAN_RUN = ["podman", "run", "-d", "--runtime", "runc",
              "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=30000:30000"]
# The CLI as the head's first admin, from inside a machine (the token is copied there).
ADMIN = "ag --address 127.0.0.1:6379 --token-file /root/admin-token"


def unit_settings(text):
    """{key: [values]} of a systemd unit file's text (comments and section headers left out)."""
    settings = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        settings.setdefault(key.strip(), []).append(value.strip())
    return settings


class Machine:
    """One running container; `sh` runs a script in it as root (or `user`)."""

    def __init__(self, name):
        self.name = name

    def sh(self, script, timeout=60, check=True, user=None):
        command = ["podman", "exec"] + (["--user", user] if user else []) + [self.name, "sh", "-c",
                                                                           "PATH=/usr/sbin:/usr/bin:/sbin:/bin; " + script]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"`{script}` exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
                                 f"stderr:\n{proc.stderr}\n{self.diagnostics()}")
        return proc.stdout.strip()

    def start(self, script, user=None, env=None):
        """Runs `script` in the background (podman exec -d); it lives as long as the machine."""
        command = ["podman", "exec", "-d"] + (["--user", user] if user else [])
        for key, value in (env or {}).items():
            command += ["--env", f"{key}={value}"]
        subprocess.run(command + [self.name, "sh", "-c", "PATH=/usr/sbin:/usr/bin:/sbin:/bin; " + script],
                       check=True, capture_output=True, timeout=60)

    def copy_in(self, host_path, path):
        subprocess.run(["podman", "cp", str(host_path), f"{self.name}:{path}"], check=True, capture_output=True,
                       timeout=120)

    def diagnostics(self):
        """The units' journal where systemd runs, else the daemons' stderr files the tests write."""
        proc = subprocess.run(["podman", "exec", self.name, "sh", "-c",
                               "journalctl --no-pager -n 60 -u aethergrid-head -u aethergrid-worker 2>/dev/null"
                               " || tail -n 30 /tmp/*.err 2>/dev/null"],
                              capture_output=True, text=True, timeout=30)
        return "machine's logs:\n" + proc.stdout

    def show(self, unit, prop):
        return self.sh(f"systemctl show -p {prop} --value {unit}")

    def job(self, job_id):
        return json.loads(self.sh(f"{ADMIN} -o json status {job_id}"))

    def submit(self, command, options=""):
        """Submits `command` without waiting; the job id."""
        return self.sh(f"{ADMIN} submit --no-wait {options} -- '{command}'").splitlines()[-1]

    def wait_job(self, job_id, states, timeout=40):
        last = {}

        def reached():
            last["job"] = self.job(job_id)
            return last["job"]["state"] in states
        try:
            wait_until(reached, timeout, interval=0.5, message=f"job {job_id} to reach {states}")
        except AssertionError as e:
            raise AssertionError(f"{e}; last: {last.get('job')}\n{self.diagnostics()}") from None
        return last["job"]

    def running_task_pid(self, job_id):
        def pid():
            tasks = [t for a in self.job(job_id)["attempts"] for t in a["tasks"]]
            return tasks and tasks[0]["state"] == "RUNNING" and tasks[0].get("pid")
        return wait_until(pid, 20, interval=0.5, message=f"job {job_id}'s task to run")

    def wait_for_file(self, path, timeout=20):
        self.sh(f"for i in $(seq {timeout * 5}); do [ -s {path} ] && exit 0; sleep 0.2; done; exit 1",
                timeout=timeout + 10)


@contextlib.contextmanager
def machine(recipe, systemd=False, volumes=()):
    """A running container of images.py's `recipe`, with `volumes` ((host path, path),
    read-only) mounted. With systemd=True its PID 1 is systemd and the machine is
    yielded once it has booted; the test is skipped, with the reason, where systemd
    cannot run in a container here."""
    from images import ensure_image
    image = ensure_image(recipe)
    name = f"ag-rootfs-test-{os.getpid()}-{time.monotonic_ns()}"
    mounts = []
    for host_path, path in volumes:
        mounts += ["-v", f"{os.path.realpath(host_path)}:{path}:ro"]
    if systemd:
        command = PODMAN_RUN + ["--name", name, "--systemd=always"] + mounts + [image, "/lib/systemd/systemd"]
    else:
        # Nothing but loopback: the machine's daemons talk over 127.0.0.1 only.
        command = PODMAN_RUN + ["--name", name, "--init", "--network", "none"] + mounts + [image, "sleep", "infinity"]
    started = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if started.returncode != 0:
        if systemd:
            pytest.skip(f"systemd cannot run in a container here: {started.stderr.strip()}")
        raise AssertionError(f"podman run failed: {started.stderr}")
    m = Machine(name)
    try:
        if systemd:
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
