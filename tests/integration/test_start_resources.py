"""What the head and the worker take from the machine when they start (descriptors,
ports, control groups, processes): each shortage is a clear error that names the limit
and how to raise it, or a fallback that works and says so in the daemon's log."""
import os
import shutil
import subprocess
import uuid

import pytest

from conftest import AG_BIN, DEFAULT_CLI_TIMEOUT_S, free_ports, pid_alive, wait_until


def ag_under(cluster, prefix, *args, env=None):
    """`ag ARGS...` in the cluster's session, started through `prefix` (prlimit,
    unshare, setpriv...)."""
    run_env = dict(cluster.env, **(env or {}))
    proc = subprocess.run([*prefix, AG_BIN, *[str(a) for a in args]], env=run_env, capture_output=True,
                          text=True, timeout=DEFAULT_CLI_TIMEOUT_S, stdin=subprocess.DEVNULL)
    cluster._remember_daemons()
    return proc


def worker_args(cluster, ip):
    return ["start-worker", "--head-node", cluster.address, "--node-ip-address", ip, "--num-cpus", 1,
            "--data-dir", cluster.worker_data_dir(ip), "--container-engine", "none"]


def listening(port):
    with open("/proc/net/tcp") as f:
        return any(line.split()[1].endswith(f":{port:04X}") and line.split()[3] == "0A" for line in f.readlines()[1:])


def test_a_head_with_too_few_descriptors_names_the_limit_and_its_fix(cluster_factory):
    c = cluster_factory("fewfds", workers=(), start_head=False)
    proc = ag_under(c, ["prlimit", "--nofile=64:64"], *c.head_args())
    assert proc.returncode != 0, proc.stdout
    assert "the head may open only 64 files" in proc.stderr and "needs at least 256" in proc.stderr, proc.stderr
    assert "ulimit -n" in proc.stderr and "LimitNOFILE=" in proc.stderr, proc.stderr
    assert c.head_pid() is None or not pid_alive(c.head_pid())
    assert not listening(c.port), "nothing was left listening"


def test_a_head_with_few_descriptors_starts_and_says_how_many_workers_fit(cluster_factory):
    c = cluster_factory("somefds", workers=(), start_head=False)
    proc = ag_under(c, ["prlimit", "--nofile=1000:1000"], *c.head_args())
    assert proc.returncode == 0, proc.stderr
    c.head_started = True
    log = (c.head_data_dir / "head.log").read_text()
    assert "the head may open only 1000 files" in log and "room for about 436 workers" in log, log[-2000:]
    # It works: a worker joins and runs a job.
    c.start_worker("127.0.0.2")
    job_id, _ = c.submit("--no-wait", "--", "echo", "ran")
    assert c.wait_state(job_id, ["SUCCEEDED"])["state"] == "SUCCEEDED"


def test_a_worker_with_too_few_descriptors_names_the_limit_and_its_fix(cluster_factory):
    c = cluster_factory("workerfds", workers=())
    proc = ag_under(c, ["prlimit", "--nofile=40:40"], *worker_args(c, "127.0.0.2"))
    assert proc.returncode != 0, proc.stdout
    assert "the worker may open only 40 files" in proc.stderr and "needs at least 128" in proc.stderr, proc.stderr
    assert "ulimit -n" in proc.stderr, proc.stderr
    assert c.nodes() == [], "the worker did not join"
    pid = c.worker_pid("127.0.0.2")
    assert pid is None or not pid_alive(pid)


def test_a_head_on_a_privileged_port_says_which_ports_need_root(cluster_factory, tmp_path):
    if not os.access(AG_BIN, os.X_OK) or os.geteuid() != 0:
        pytest.skip("needs root to start the head as another user")
    start = int(open("/proc/sys/net/ipv4/ip_unprivileged_port_start").read())
    if start == 0:
        pytest.skip("every port is open to every user on this machine (ip_unprivileged_port_start = 0)")
    c = cluster_factory("lowport", workers=(), start_head=False)
    session = tmp_path / "nobody-session"
    session.mkdir()
    shutil.chown(session, "nobody", "nogroup")
    args = ["start-head", "--port", start - 1, "--dashboard-port", free_ports(1)[0], "--node-ip-address",
            "127.0.0.1"]
    proc = ag_under(c, ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"], *args,
                    env={"AG_SESSION_DIR": str(session), "HOME": str(session)})
    assert proc.returncode != 0, proc.stdout
    assert f"cannot listen on 127.0.0.1:{start - 1}: Permission denied" in proc.stderr, proc.stderr
    assert f"ports below {start} need root or CAP_NET_BIND_SERVICE" in proc.stderr, proc.stderr


def test_a_worker_without_control_groups_says_why_and_runs_jobs(cluster_factory):
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root to hide the control groups from one worker")
    c = cluster_factory("nocgroups", workers=())
    # The worker sees an empty /sys/fs/cgroup in a mount namespace of its own.
    script = 'mount -t tmpfs none /sys/fs/cgroup && exec "$@"'
    proc = ag_under(c, ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"],
                    *worker_args(c, "127.0.0.2"))
    assert proc.returncode == 0, proc.stderr
    log = (c.worker_data_dir("127.0.0.2") / "worker.log").read_text()
    assert "task control groups: not available here (no cgroup v2 hierarchy" in log, log[-2000:]
    assert "process group and task marker instead" in log, log[-2000:]
    job_id, _ = c.submit("--no-wait", "--", "bash", "-c", "sleep 1; echo done")
    assert c.wait_state(job_id, ["SUCCEEDED"], timeout=30)["state"] == "SUCCEEDED"
    assert c.ag("logs", job_id).stdout == "done\n"


def pids_hierarchy():
    """Where a new control group with a pids.max goes, or None."""
    if os.path.exists("/sys/fs/cgroup/pids/cgroup.procs"):
        return "/sys/fs/cgroup/pids"
    controllers = "/sys/fs/cgroup/cgroup.subtree_control"
    if os.path.exists(controllers) and "pids" in open(controllers).read().split():
        return "/sys/fs/cgroup"
    return None


def test_a_start_that_cannot_make_a_process_names_the_limits(cluster_factory):
    root = pids_hierarchy()
    if root is None or os.geteuid() != 0:
        pytest.skip("needs root and a pids control group hierarchy")
    c = cluster_factory("nofork", workers=())
    group = os.path.join(root, f"ag-test-{uuid.uuid4().hex[:8]}")
    os.mkdir(group)
    try:
        with open(os.path.join(group, "pids.max"), "w") as f:
            f.write("1")
        # The CLI alone in a group that holds one process: it cannot fork the daemon.
        script = f'echo $$ > {group}/cgroup.procs && exec "$@"'
        proc = ag_under(c, ["sh", "-c", script, "sh"], *worker_args(c, "127.0.0.2"))
    finally:
        wait_until(lambda: not open(os.path.join(group, "cgroup.procs")).read().strip(), 10,
                   message="the test's control group to empty")
        os.rmdir(group)
    assert proc.returncode != 0, proc.stdout
    assert "cannot start a process: Resource temporarily unavailable" in proc.stderr, proc.stderr
    assert "ulimit -u" in proc.stderr and "pids.max" in proc.stderr, proc.stderr
    assert c.nodes() == []
