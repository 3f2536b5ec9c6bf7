"""GET /metrics over real daemons: the Prometheus text format passes promtool's check,
needs the token, and its numbers equal what the REST API says after a known workload."""
import re
import shutil
import subprocess
import urllib.request

import pytest

from conftest import wait_until

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(cluster, token=None):
    """(status, text) of GET /metrics with a bearer token, as Prometheus sends it."""
    status, headers, text = cluster.api_full("GET", "/metrics", token=token or cluster.token, port=cluster.dashboard_port)
    return status, headers, text


def parse(text):
    """{(name, frozenset(labels)): value} of every sample line."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = frozenset(_LABEL.findall(m.group(2) or ""))
        samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def value(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


def promtool_check(text):
    assert shutil.which("promtool") or shutil.os.path.exists(PROMTOOL), (
        "promtool is missing; it comes with Debian's prometheus package: run scripts/install-deps.sh")
    return subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)


def run_known_workload(cluster):
    """3 jobs that succeed and 1 that fails, 2 tasks each; returns their ids."""
    ok = [cluster.submit("-n", "2", "--", f"echo ok-{i}-$RANK")[0] for i in range(3)]
    # Both ranks start and print before either fails, so every count below is exact.
    bad, proc = cluster.submit("-n", "2", "--", "echo failing-$RANK; sleep 1; exit 3")
    assert proc.returncode != 0
    for job_id in ok:
        assert cluster.wait_state(job_id, "SUCCEEDED")
    cluster.wait_state(bad, "FAILED")
    return ok, bad


def test_metrics_need_the_token(head_only):
    status, _, _ = scrape(head_only, token="wrong")
    assert status == 401
    status, _, text = head_only.api_full("GET", "/metrics", token=None)
    assert status == 401
    status, headers, text = scrape(head_only)
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")


def test_promtool_accepts_the_metrics(cluster):
    run_known_workload(cluster)
    cluster.api("GET", "/api/jobs/job_doesnotexist")  # a 404 in the request counter
    status, _, text = scrape(cluster)
    assert status == 200
    check = promtool_check(text)
    assert check.returncode == 0, f"promtool check metrics failed:\n{check.stdout}\n{check.stderr}\n---\n{text}"
    # promtool prints lint problems on stdout while still exiting 0 for some of them.
    assert check.stdout.strip() == "" and check.stderr.strip() == "", check.stdout + check.stderr


def test_metrics_match_the_api_after_a_known_workload(cluster):
    ok, bad = run_known_workload(cluster)
    for job_id in ok + [bad]:
        cluster.job(job_id)  # three GET /api/jobs/{id} each, counted below
        cluster.job(job_id)
        cluster.job(job_id)
    status, missing = cluster.api("GET", "/api/jobs/job_doesnotexist")
    assert status == 404

    _, cluster_summary = cluster.api("GET", "/api/cluster")
    jobs = cluster.jobs()
    _, _, text = scrape(cluster)
    m = parse(text)

    # Jobs by state, as /api/cluster and /api/jobs count them.
    for state, n in cluster_summary["jobs"].items():
        assert value(m, "ag_jobs", state=state) == n, state
        assert n == sum(j["state"] == state for j in jobs)
    assert value(m, "ag_jobs", state="SUCCEEDED") == 3
    assert value(m, "ag_jobs", state="FAILED") == 1

    # Nodes and capacity.
    assert value(m, "ag_nodes", state="ALIVE") == cluster_summary["nodes_alive"] == 2
    assert value(m, "ag_nodes", state="DEAD") == 0
    assert value(m, "ag_cpus_capacity") == cluster_summary["resources"]["num_cpus"] == 4
    assert value(m, "ag_gpus_capacity") == cluster_summary["resources"]["num_gpus"]
    assert value(m, "ag_memory_capacity_bytes") == cluster_summary["resources"]["memory_bytes"]
    assert value(m, "ag_cpus_allocated") == cluster_summary["allocated"]["num_cpus"] == 0
    assert value(m, "ag_tasks_running") == 0

    # Every job was placed once and had both tasks running once.
    assert value(m, "ag_scheduling_latency_seconds_count") == 4
    assert value(m, "ag_job_start_latency_seconds_count") == 4
    assert value(m, "ag_scheduling_latency_seconds_bucket", le="+Inf") == 4
    assert value(m, "ag_job_start_latency_seconds_sum") >= value(m, "ag_scheduling_latency_seconds_sum")

    # Requests by templated route: no job id appears as a label.
    assert value(m, "ag_api_requests_total", route="/api/jobs/{id}", method="GET", code="200") >= 12
    assert value(m, "ag_api_requests_total", route="/api/jobs/{id}", method="GET", code="404") == 1
    assert value(m, "ag_api_requests_total", route="/api/cluster", method="GET", code="200") >= 1
    assert "job_" not in "".join(line for line in text.splitlines() if line.startswith("ag_api_requests_total"))

    # Log bytes: every byte of every task's log (attempt 0, two tasks each).
    total = 0
    for job_id in ok + [bad]:
        for task in (0, 1):
            _, headers, body = cluster.api_full("GET", f"/api/jobs/{job_id}/logs?task_index={task}")
            total += int(headers["X-AG-Log-Size"])
    assert total == sum(len(f"ok-{i}-{r}\n") for i in range(3) for r in (0, 1)) + 2 * len("failing-0\n")
    assert value(m, "ag_log_ingested_bytes_total") == total

    # The workers' channels: each of the 8 tasks launched, started, ended and its end
    # acknowledged once (an end is acknowledged once it is stored, after the job shows
    # it); each worker registered once.
    def all_acknowledged():
        scraped = parse(scrape(cluster)[2])
        acks = value(scraped, "ag_worker_channel_messages_total", direction="to_worker", type="exit_ack")
        return scraped if acks >= 8 else None

    m = wait_until(all_acknowledged, 10, 0.05, "the tasks' ends to be acknowledged")
    for direction, kind in (("to_worker", "launch"), ("from_worker", "task_started"), ("from_worker", "task_exited"),
                            ("to_worker", "exit_ack")):
        assert value(m, "ag_worker_channel_messages_total", direction=direction, type=kind) == 8, kind
    assert value(m, "ag_worker_channel_messages_total", direction="from_worker", type="register") == 2
    assert value(m, "ag_worker_channel_bytes_total", direction="to_worker", type="launch") > 8 * 200


def test_running_tasks_and_allocation_match_the_api(cluster):
    job_id, _ = cluster.submit("--no-wait", "-n", "2", "--num-cpus", "1", "--", "sleep 300")
    wait_until(lambda: all(t["state"] == "RUNNING" for a in cluster.job(job_id)["attempts"] for t in a["tasks"])
               and cluster.job(job_id)["attempts"], 30, message="both tasks running")
    _, summary = cluster.api("GET", "/api/cluster")
    m = parse(scrape(cluster)[2])
    assert value(m, "ag_tasks_running") == 2
    assert value(m, "ag_cpus_allocated") == summary["allocated"]["num_cpus"] == 2
    assert value(m, "ag_jobs", state="RUNNING") == summary["jobs"]["RUNNING"] == 1
    cluster.ag("stop-job", job_id)
    cluster.wait_state(job_id, "STOPPED")
    m = parse(scrape(cluster)[2])
    assert value(m, "ag_tasks_running") == 0
    assert value(m, "ag_cpus_allocated") == 0
