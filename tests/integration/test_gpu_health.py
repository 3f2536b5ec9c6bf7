"""GPU health from NVML with no configuration (issue 29 item 2), over real daemons with a
fake NVML the worker loads instead of the driver's (fake_nvml.c, built here): critical
XID events, uncorrectable ECC errors, pending retired pages, row remaps and a GPU that
vanished each make the node UNHEALTHY naming the GPU, its UUID and the error, until an
admin resumes it; XIDs an application causes do not."""
import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import start_gpu_worker, wait_until

A = "127.0.0.2"


def add(state, line):
    with open(state, "a") as f:
        f.write(line + "\n")


def wait_unhealthy(cluster):
    return wait_until(lambda: cluster.nodes()[0]["unhealthy"], 15, message="node unhealthy")


def test_each_gpu_fault_marks_the_node_until_an_admin_resumes_it(cluster_factory, fake_nvml):
    lib, state = fake_nvml
    cluster = cluster_factory("gpus", workers=())
    node = start_gpu_worker(cluster, A, lib, state)
    assert node["resources"]["num_gpus"] == 2 and node["unhealthy"] is None
    node_id = node["node_id"]

    # An application's own XID (13: a bad memory access) is no fault of the node; a
    # GPU that fell off the bus is.
    add(state, "xid 0 13")
    add(state, "xid 1 79")
    health = wait_unhealthy(cluster)
    assert health["reason"] == "GPU 1 (GPU-fa4e0000-0000-0000-0000-000000000001): XID 79 (fell off the bus)"
    assert health["sticky"] and health["gpu_kind"] == "xid" and health["gpu_index"] == 1
    time.sleep(3)  # sticky: no pass of anything clears it
    assert cluster.nodes()[0]["unhealthy"]["reason"] == health["reason"]
    job, _ = cluster.submit("--no-wait", "--num-gpus", "1", "--", "true")
    wait_until(lambda: "UNHEALTHY" in cluster.job(job)["message"], 10, message="the pending reason to name it")
    cluster.ag("resume", node_id)
    cluster.wait_state(job, "SUCCEEDED", timeout=20)

    expected = [
        ("ecc 0 2", "GPU 0 (GPU-fa4e0000-0000-0000-0000-000000000000): 2 uncorrectable ECC error(s)", "ecc"),
        ("retired_pending 1", "GPU 1 (GPU-fa4e0000-0000-0000-0000-000000000001): memory pages wait to be retired",
         "retired_pages"),
        ("remap_failed 0", "GPU 0 (GPU-fa4e0000-0000-0000-0000-000000000000): a memory row remap failed", "row_remap"),
        ("hidden 1", "GPU 1 (GPU-fa4e0000-0000-0000-0000-000000000001): vanished", "vanished"),
    ]
    for line, reason, kind in expected:
        add(state, line)
        health = wait_unhealthy(cluster)
        assert health["reason"].startswith(reason), (line, health["reason"])
        assert health["gpu_kind"] == kind
        cluster.ag("resume", node_id)
        wait_until(lambda: cluster.nodes()[0]["unhealthy"] is None, 10, message="resumed")

    status, metrics = cluster.api("GET", "/metrics")
    assert status == 200
    assert f'ag_gpu_errors_total{{node="{node_id}",gpu="1",kind="xid"}} 1' in metrics
    assert f'ag_gpu_errors_total{{node="{node_id}",gpu="0",kind="ecc"}} 1' in metrics
    events = cluster.ag("events", "--node", node_id, "--type", "node.unhealthy").stdout
    assert events.count("node.unhealthy") == 5 and "XID 79" in events and "XID 13" not in events


def test_a_fault_present_at_start_is_known_at_once_and_after_a_head_restart(cluster_factory, fake_nvml):
    lib, state = fake_nvml
    add(state, "remap_pending 0")
    cluster = cluster_factory("atstart", workers=())
    start_gpu_worker(cluster, A, lib, state)
    assert "a memory row remap is pending" in wait_unhealthy(cluster)["reason"]
    # The head keeps health in memory: a restarted head learns it from the registration.
    head = cluster.head_pid()
    os.kill(head, signal.SIGKILL)
    wait_until(lambda: not Path(f"/proc/{head}").exists(), 5, message="head gone")
    cluster.start_head()
    wait_until(lambda: cluster.nodes() and cluster.nodes()[0]["state"] == "ALIVE", 20, message="worker back")
    assert "a memory row remap is pending" in wait_unhealthy(cluster)["reason"]
    # Resumed by an admin, it stays healthy through the next restart: the worker forgot it.
    cluster.ag("resume", cluster.nodes()[0]["node_id"])
    wait_until(lambda: cluster.nodes()[0]["unhealthy"] is None, 10, message="resumed")
    head = cluster.head_pid()
    os.kill(head, signal.SIGKILL)
    wait_until(lambda: not Path(f"/proc/{head}").exists(), 5, message="head gone")
    cluster.start_head()
    wait_until(lambda: cluster.nodes() and cluster.nodes()[0]["state"] == "ALIVE", 20, message="worker back")
    time.sleep(3)
    assert cluster.nodes()[0]["unhealthy"] is None
