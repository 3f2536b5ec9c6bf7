"""Sharing the cluster (issue 14), as far as it is built: priorities order the queue."""
from conftest import WORKER_IPS, wait_until


def test_a_higher_priority_job_starts_before_the_jobs_queued_ahead_of_it(cluster_factory):
    c = cluster_factory("priority", workers=(WORKER_IPS[0],))
    hold, _ = c.submit("--no-wait", "--num-cpus", 2, "--", "sleep 2")
    wait_until(lambda: c.job(hold)["state"] == "RUNNING", 20, message="the first job to hold the node")
    normal, _ = c.submit("--no-wait", "--num-cpus", 2, "--", "true")
    low, _ = c.submit("--no-wait", "--num-cpus", 2, "--priority", "low", "--", "true")
    high, _ = c.submit("--no-wait", "--num-cpus", 2, "--priority", "high", "--", "true")
    assert [c.job(j)["queue_position"] for j in (high, normal, low)] == [1, 2, 3]
    assert c.job(high)["spec"]["priority"] == 100 and c.job(low)["spec"]["priority"] == -100
    rows = {line.split()[0]: line.split() for line in c.ag("list-jobs").stdout.splitlines()[1:]}
    assert rows[high][3:6] == ["PENDING", "#1", "100"], rows[high]
    assert rows[normal][3:6] == ["PENDING", "#2", "0"], rows[normal]
    assert rows[low][3:6] == ["PENDING", "#3", "-100"], rows[low]
    for j in (high, normal, low):
        assert c.wait_state(j, ("SUCCEEDED", "FAILED"), timeout=60)["state"] == "SUCCEEDED"
    started = [c.job(j)["started_ms"] for j in (high, normal, low)]
    assert started == sorted(started), started


def test_bad_priorities_are_refused_with_what_to_give(head_only):
    for value, complaint in (("asap", "--priority takes low, normal, high, urgent or a whole number from -1000 to 1000"),
                             ("5000", "--priority takes low, normal, high, urgent")):
        proc = head_only.ag("submit", "--priority", value, "--", "true", check=False)
        assert proc.returncode != 0 and complaint in proc.stderr, (value, proc.stderr)
    status, body = head_only.api("POST", "/api/jobs", {"entrypoint": "true", "priority": "asap"})
    assert status == 400 and "'asap' is not a priority" in body["error"], body
    status, body = head_only.api("POST", "/api/jobs", {"entrypoint": "true", "priority": 1001})
    assert status == 400 and "priority" in body["error"], body
    assert head_only.jobs() == []
