"""Node health checks (issue 29 item 1) over real daemons: `ag start-worker --health-check`
makes a node UNHEALTHY when a check fails (no new tasks, the reason in list-nodes,
status, the API and an event), requeues the gangs that asked for it without counting a
retry, turns healthy after three passes, is cleared by `ag resume`; and checks that do
not exist, hang or flood their output are handled with a clear reason, bounded."""
import json
import time

from conftest import proc_cmdline, rss_kib, wait_until

A, B = "127.0.0.2", "127.0.0.3"


def node_at(cluster, ip):
    return next(n for n in cluster.nodes() if n["address"] == ip)


def events_of(cluster, node_id):
    proc = cluster.ag("-o", "json", "events", "--node", node_id)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def test_a_failing_check_takes_the_node_out_and_requeues_the_gangs_that_asked(cluster_factory, tmp_path):
    cluster = cluster_factory("health", workers=())
    flag = tmp_path / "broken"
    cluster.start_worker(A, options=["--health-check", f"test ! -e {flag} || {{ echo GPU fell off the bus; exit 7; }}",
                                     "--health-interval", "1s"])
    cluster.start_worker(B)
    wait_until(lambda: len([n for n in cluster.nodes() if n["state"] == "ALIVE"]) == 2, 15, message="two workers")
    node_a = node_at(cluster, A)["node_id"]

    requeued, _ = cluster.submit("--no-wait", "-n", "2", "--placement", "spread", "--on-node-unhealthy", "requeue",
                                 "--", 'if [ "$AG_ATTEMPT" = 0 ]; then sleep 300; fi; echo done')
    kept, _ = cluster.submit("--no-wait", "-n", "2", "--placement", "spread", "--", "sleep 300")
    cluster.wait_tasks_running(requeued)
    cluster.wait_tasks_running(kept)

    flag.write_text("")
    wait_until(lambda: node_at(cluster, A)["unhealthy"] is not None, 15, message="node A unhealthy")
    node = node_at(cluster, A)
    assert node["state"] == "ALIVE" and node["healthy"] is False
    assert "exited 7: GPU fell off the bus" in node["unhealthy"]["reason"]
    listing = cluster.ag("list-nodes").stdout
    assert "ALIVE, UNHEALTHY" in listing and "GPU fell off the bus" in listing
    assert f"UNHEALTHY: {node_a}" in cluster.ag("status").stdout

    # The gang that asked is stopped and waits: only one healthy node is left for its
    # two spread tasks, and its reason says so.
    job = cluster.wait_state(requeued, "PENDING", timeout=20)
    assert "UNHEALTHY" in job["message"], job["message"]
    # The other one runs on.
    assert cluster.job(kept)["state"] == "RUNNING"
    assert all(t["state"] == "RUNNING" for t in cluster.job(kept)["attempts"][-1]["tasks"])

    # Three passes in a row: healthy again, and the gang runs its next attempt, with no
    # retry spent (max-retries is 0).
    flag.unlink()
    job = cluster.wait_state(requeued, "SUCCEEDED", timeout=30)
    assert job["num_attempts"] == 2
    assert node_at(cluster, A)["unhealthy"] is None
    types = [e["type"] for e in events_of(cluster, node_a)]
    assert "node.unhealthy" in types and types.index("node.unhealthy") < types.index("node.healthy")
    job_events = [json.loads(line) for line in
                  cluster.ag("-o", "json", "events", "--job", requeued).stdout.splitlines()]
    assert any("UNHEALTHY" in e["message"] and "not counted as a retry" in e["message"] for e in job_events)
    assert "job.preempted" in [e["type"] for e in job_events]


def test_an_admin_clears_it_with_resume_and_new_tasks_go_there_again(cluster_factory):
    cluster = cluster_factory("resume", workers=())
    cluster.start_worker(A, options=["--health-check", "echo disk /scratch is full; exit 1",
                                     "--health-interval", "1h"])
    wait_until(lambda: node_at(cluster, A)["unhealthy"] is not None, 15, message="node unhealthy")
    node_id = node_at(cluster, A)["node_id"]
    job, _ = cluster.submit("--no-wait", "--", "true")
    pending = cluster.wait_state(job, "PENDING", timeout=10)
    time.sleep(1)
    assert cluster.job(job)["state"] == "PENDING"
    cluster.ag("resume", node_id)
    cluster.wait_state(job, "SUCCEEDED", timeout=20)
    assert node_at(cluster, A)["unhealthy"] is None
    healthy = [e for e in events_of(cluster, node_id) if e["type"] == "node.healthy"]
    assert healthy and "resumed by an admin" in healthy[-1]["message"]
    assert pending["job_id"] == job


def test_a_hanging_check_is_killed_at_its_timeout_with_everything_it_started(cluster_factory):
    cluster = cluster_factory("hang", workers=())
    cluster.start_worker(A, options=["--health-check", "sleep 987 & sleep 988", "--health-timeout", "1s",
                                     "--health-interval", "1h"])
    wait_until(lambda: node_at(cluster, A)["unhealthy"] is not None, 15, message="node unhealthy")
    assert "timed out after 1 s (killed)" in node_at(cluster, A)["unhealthy"]["reason"]
    # Neither the check nor the sleep it left in the background lives on.
    wait_until(lambda: not processes_where_cmdline(("sleep 987", "sleep 988")), 5,
               message="the check's processes to be gone")


def processes_where_cmdline(commands):
    import os
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and proc_cmdline(int(entry)).strip() in commands:
            found.append(int(entry))
    return found


def test_a_check_that_floods_its_output_costs_bounded_memory_and_a_short_reason(cluster_factory):
    cluster = cluster_factory("flood", workers=())
    cluster.start_worker(A, options=["--health-check", "head -c 100000000 /dev/zero | tr '\\0' x; echo; echo the end; exit 2",
                                     "--health-interval", "1h", "--health-timeout", "60s"])
    wait_until(lambda: node_at(cluster, A)["unhealthy"] is not None, 60, message="node unhealthy")
    reason = node_at(cluster, A)["unhealthy"]["reason"]
    assert "exited 2" in reason and reason.endswith("the end")
    assert len(reason) < 2048
    assert rss_kib(cluster.worker_pid(A)) < 200 * 1024


def test_bad_health_check_flags_are_refused_before_the_worker_starts(cluster_factory):
    cluster = cluster_factory("badflags", workers=())
    proc = cluster.start_worker(A, options=["--health-check", "no-such-health-check --all"], check=False)
    assert proc.returncode == 2
    assert "no-such-health-check is not a program on this node's PATH" in proc.stderr
    proc = cluster.start_worker(A, options=["--health-check", "/nonexistent/check"], check=False)
    assert proc.returncode == 2 and "/nonexistent/check is not an executable file" in proc.stderr
    proc = cluster.start_worker(A, options=["--health-check", "true", "--health-interval", "0.5s"], check=False)
    assert proc.returncode != 0 and "--health-interval" in proc.stderr
    assert cluster.nodes() == []
