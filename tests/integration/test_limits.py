"""Enforced task limits: task_options.memory and num_cpus are caps, not bookkeeping.

The workers cap each task through control groups (cgroup v1 memory + cpu here, v2
where the node has it). A task the OOM killer ends says so, with its limit; a node that
cannot (or is told not to) cap says so in `ag list-nodes`, and jobs still run there.
"""
import json
import os
from pathlib import Path

import pytest

from conftest import PYTHON, WORKER_IPS, job_cgroups, wait_until

# Allocates (and touches) MiB of memory in steps, printing as it goes.
GROW = (PYTHON + " -c \"import sys\nblocks=[]\nfor i in range(int(sys.argv[1])):\n"
        "    blocks.append(bytearray(1 << 20))\n    blocks[-1][::4096] = b'x' * 256\n"
        "    if i % 32 == 0: print('MiB', i, flush=True)\nprint('held', len(blocks), 'MiB')\" ")

# Two busy processes for 1.5 s of wall time, then what they used against the wall
# time, the task's CPU quota and how often it was throttled (from its cpu cgroup).
SPIN = PYTHON + r""" -c "
import os, time, multiprocessing as mp
def spin():
    end = time.time() + 1.5
    while time.time() < end: pass
start = time.time()
ps = [mp.Process(target=spin) for _ in range(2)]
[p.start() for p in ps]; [p.join() for p in ps]
wall = time.time() - start
t = os.times()
group = [l.split(':', 2)[2].strip() for l in open('/proc/self/cgroup') if l.split(':')[1] in ('cpu', 'cpu,cpuacct', '')][0]
base = '/sys/fs/cgroup/cpu' + group if os.path.exists('/sys/fs/cgroup/cpu' + group) else '/sys/fs/cgroup' + group
stat = dict(l.split() for l in open(base + '/cpu.stat'))
quota = open(base + '/cpu.cfs_quota_us').read().strip() if os.path.exists(base + '/cpu.cfs_quota_us') else open(base + '/cpu.max').read().split()[0]
print('RESULT', (t.children_user + t.children_system) / wall, stat.get('nr_throttled'), quota)
"
"""


def own_memory_cgroup():
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory" + path)
    return None


def task_groups(job_id):
    """The memory groups the workers made for tasks of `job_id` (they nest under this
    test's own memory group, as the workers are its children)."""
    root = own_memory_cgroup()
    if root is None:
        return []
    return job_cgroups([str(root)], job_id)


def test_nodes_say_which_caps_they_enforce(cluster):
    nodes = cluster.nodes()
    assert len(nodes) == 2
    for node in nodes:
        assert node["limits"].startswith("memory, cpu (cgroup v"), node
    table = cluster.ag("list-nodes").stdout
    assert "LIMITS" in table.splitlines()[0], table
    assert table.count("memory,cpu") == 2, table


def test_a_task_over_its_memory_cap_is_killed_and_says_so(cluster):
    job_id, proc = cluster.submit("--memory", str(64 / 1024), "--", GROW + "400")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    job = cluster.wait_state(job_id, ("FAILED",))
    reason = job["message"]
    assert "task 0 on node" in reason and "was killed: out of memory (limit 64 MiB)" in reason, reason
    # What it wrote before it was killed is kept, and `ag status` shows the same reason.
    assert "MiB 32" in cluster.ag("logs", job_id).stdout
    assert "out of memory (limit 64 MiB)" in cluster.ag("status", job_id).stdout
    assert "out of memory" in proc.stdout + proc.stderr
    # Its groups went with it.
    wait_until(lambda: not task_groups(job_id), 10, message="the task's memory group to be removed")


def test_a_task_within_its_memory_cap_runs_to_the_end(cluster):
    job_id, proc = cluster.submit("--memory", str(256 / 1024), "--", GROW + "64")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "held 64 MiB" in proc.stdout


def test_an_out_of_memory_task_is_retried_like_any_failure(cluster):
    job_id, _ = cluster.submit("--memory", str(48 / 1024), "--max-retries", "1", "--retry-delay", "0",
                               "--", GROW + "300")
    job = cluster.wait_state(job_id, ("FAILED",))
    assert len(job["attempts"]) == 2, job
    for attempt in job["attempts"]:
        assert "out of memory (limit 48 MiB)" in attempt["failure_reason"], attempt


@pytest.mark.serial  # the cap shows only when the task could use more than it: an idle machine
def test_num_cpus_caps_the_tasks_cpu_time(cluster):
    job_id, proc = cluster.submit("--num-cpus", "0.5", "--", SPIN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")][0]
    _, ratio, throttled, quota = line.split()
    # Half a CPU: a 50 ms quota every 100 ms period, and the two busy processes were
    # held to it (uncapped they would use up to 2 CPUs on this 2-CPU node).
    assert quota == "50000", line
    assert int(throttled) > 0, line
    assert float(ratio) < 0.8, line


def test_a_worker_without_limits_says_so_and_still_runs_jobs(cluster_factory):
    c = cluster_factory(workers=())
    c.start_worker(WORKER_IPS[0], options=("--no-task-limits",))
    wait_until(lambda: len(c.nodes()) == 1, 20, message="the worker to join")
    node = c.nodes()[0]
    assert node["limits"] == "not enforced: the worker runs with --no-task-limits", node
    assert "none" in c.ag("list-nodes").stdout.splitlines()[1]
    # The request still counts for placement, but nothing caps the task.
    job_id, proc = c.submit("--memory", str(48 / 1024), "--", GROW + "128")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "held 128 MiB" in proc.stdout
    assert not task_groups(job_id)


def test_limits_survive_an_agent_restart(cluster):
    """An adopted task keeps its cap, and its out-of-memory end is still reported with
    the limit by the new agent."""
    job_id, _ = cluster.submit("--memory", str(64 / 1024), "--no-wait", "--",
                               "sleep 3; " + GROW + "400")
    wait_until(lambda: cluster.job(job_id)["state"] == "RUNNING", 20, message="the job to run")
    node_ip = cluster.job(job_id)["attempts"][0]["tasks"][0]["node_address"]
    os.kill(cluster.worker_pid(node_ip), 9)
    cluster.start_worker(node_ip)
    job = cluster.wait_state(job_id, ("FAILED", "SUCCEEDED"), timeout=60)
    assert job["state"] == "FAILED", job
    assert "was killed: out of memory (limit 64 MiB)" in job["message"], job
