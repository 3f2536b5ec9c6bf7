"""Queues and preemption (issue 14): a queue's jobs run on its nodes with its priority
and per-user limits; a queue that preempts stops lower-priority jobs to start its own,
which go back to the queue with their retries unspent; every refusal says what to do."""
import os
import signal

from conftest import WORKER_IPS, pid_alive, wait_until
from test_metrics import parse as parse_metrics
from test_metrics import value as metric


def _add_user(c, name, *args):
    return c.ag_json("user", "add", name, *args)["token"]


def _submit_as(c, token, *args):
    proc = c.ag("submit", "--no-wait", *args, env={"AG_TOKEN": token})
    job_id = proc.stdout.strip().splitlines()[-1]
    c.job_ids.add(job_id)
    return job_id


def _events(c, job_id):
    return [e["message"] for e in c.api("GET", f"/api/jobs/{job_id}/events")[1]["events"]]


def _queue_rows(c):
    lines = c.ag("queue", "list").stdout.splitlines()
    header = lines[0].split("  ")
    assert lines[0].startswith("QUEUE"), lines
    return {line.split()[0]: line for line in lines[1:]}, header


def test_a_queue_runs_its_jobs_on_its_nodes_with_its_priority_and_per_user_limits(cluster_factory):
    c = cluster_factory("queues", workers=())
    c.start_worker(WORKER_IPS[0], options=("--label", "pool=fast"))
    c.start_worker(WORKER_IPS[1], options=("--label", "pool=slow"))
    wait_until(lambda: len(c.api("GET", "/api/nodes")[1]["nodes"]) == 2, 20, message="both workers")
    fast_node = next(n["node_id"] for n in c.api("GET", "/api/nodes")[1]["nodes"] if n["labels"].get("pool") == "fast")
    out = c.ag("queue", "create", "fast", "--nodes-with", "pool=fast", "--priority", "high",
               "--max-cpus-per-user", 1).stdout
    assert out == "Queue fast created. Submit to it with `ag submit --queue fast ...`.\n", out
    alice = _add_user(c, "alice")

    first = _submit_as(c, alice, "--queue", "fast", "--num-cpus", 1, "--", "sleep 3")
    second = _submit_as(c, alice, "--queue", "fast", "--num-cpus", 1, "--", "true")
    own_priority = _submit_as(c, alice, "--queue", "fast", "--priority", "low", "--num-cpus", 1, "--", "true")
    assert c.wait_state(first, ("RUNNING", "SUCCEEDED", "FAILED"), timeout=20)["state"] == "RUNNING"
    job = c.job(first)
    assert job["queue"] == "fast" and job["spec"]["priority"] == 100, job  # the queue's priority
    assert {t["node_id"] for t in job["attempts"][0]["tasks"]} == {fast_node}, job
    assert c.job(own_priority)["spec"]["priority"] == -100  # chosen, kept
    # One CPU each in this queue: the second waits, saying why, with CPUs free elsewhere.
    wait_until(lambda: c.job(second).get("pending_kind") == "quota", 20, message="alice's second job to wait")
    assert c.job(second)["message"] == "user alice in queue fast holds 1 of the 1 CPUs its quota allows; this job needs 1"

    rows, _ = _queue_rows(c)
    assert rows["fast"].split()[1:8] == ["pool=fast", "1", "100", "no", "2", "1", "0"], rows
    assert rows["fast"].rstrip().endswith("1 CPUs"), rows
    listed = {line.split()[0]: line.split() for line in c.ag("list-jobs").stdout.splitlines()[1:]}
    assert listed[second][3] == "fast", listed[second]
    _, _, text = c.api_full("GET", "/metrics", port=c.dashboard_port)
    samples = parse_metrics(text)
    assert metric(samples, "ag_queue_pending_jobs", queue="fast") == 2, samples
    assert metric(samples, "ag_queue_running_jobs", queue="fast") == 1
    assert metric(samples, "ag_queue_cpus_held", queue="fast") == 1

    for job_id in (first, second, own_priority):
        assert c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=60)["state"] == "SUCCEEDED"
        assert {t["node_id"] for t in c.job(job_id)["attempts"][0]["tasks"]} == {fast_node}

    # Queues survive a head restart; a queue no job uses can be removed.
    head = c.head_pid()
    os.kill(head, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head), 10, message="the head to die")
    c.start_head()
    queues = c.api("GET", "/api/queues")[1]["queues"]
    assert [(q["name"], q["nodes_with"], q["priority"], q["max_cpu_millis_per_user"]) for q in queues] == [
        ("fast", {"pool": "fast"}, 100, 1000)], queues
    # (A job's end the head had not stored when it was killed comes again from its worker.)
    for job_id in (first, second, own_priority):
        assert c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=60)["state"] == "SUCCEEDED"
    assert c.ag("queue", "remove", "fast").stdout == "Queue fast removed.\n"
    assert "No queues" in c.ag("queue", "list").stdout


# A task that saves its work on SIGTERM: it writes what it was told into its job's folder
# and exits, as a training script checkpointing within AG_PREEMPT_GRACE_S would.
CHECKPOINTING = ("trap 'echo \"attempt $AG_ATTEMPT got SIGTERM, grace $AG_PREEMPT_GRACE_S\" >> {log}; exit 143' TERM; "
                 "echo \"attempt $AG_ATTEMPT started\" >> {log}; sleep 60 & wait")


def test_a_queue_that_preempts_stops_a_lower_priority_job_which_is_requeued_with_its_retries(cluster_factory, tmp_path):
    c = cluster_factory("preempt", workers=(WORKER_IPS[0],), head_options=("--preempt-grace", "2"))
    c.ag("queue", "create", "urgent", "--priority", "urgent", "--preempt")
    log = tmp_path / "low.log"
    low, _ = c.submit("--no-wait", "--num-cpus", 2, "--max-retries", 0, "--", CHECKPOINTING.format(log=log))
    wait_until(lambda: log.exists() and "attempt 0 started" in log.read_text(), 20, message="the low job to start")

    urgent, _ = c.submit("--no-wait", "--queue", "urgent", "--num-cpus", 2, "--", "echo urgent done")
    assert c.wait_state(urgent, ("SUCCEEDED", "FAILED"), timeout=40)["state"] == "SUCCEEDED"
    assert "attempt 0 got SIGTERM, grace 2" in log.read_text(), log.read_text()
    # The victim went back to the queue and starts again once the room is free: not
    # FAILED, though it had no retries.
    wait_until(lambda: "attempt 1 started" in log.read_text(), 30, message="the preempted job to start again")
    job = c.job(low)
    assert job["state"] == "RUNNING" and job["attempts"][0]["preempted"] is True, job
    events = _events(c, low)
    assert any(e.startswith(f"preempted by job {urgent} (priority 1000, queue urgent, admin), which needs what it holds;")
               for e in events), events
    assert any("the job is back in the queue (preempted; its retries are not spent)" in e for e in events), events
    assert any(e.startswith(f"preempting {low} (lower priority)") for e in _events(c, urgent)), _events(c, urgent)
    c.ag("stop-job", low)
    assert c.wait_state(low, ("STOPPED", "FAILED"), timeout=30)["state"] == "STOPPED"


def test_no_preempt_is_for_those_an_admin_allows_and_keeps_the_job_running(cluster_factory, tmp_path):
    c = cluster_factory("nopreempt", workers=(WORKER_IPS[0],), head_options=("--preempt-grace", "1"))
    c.ag("queue", "create", "urgent", "--priority", "urgent", "--preempt")
    alice = _add_user(c, "alice")
    proc = c.ag("submit", "--no-wait", "--no-preempt", "--", "true", env={"AG_TOKEN": alice}, check=False)
    assert proc.returncode != 0
    assert ("--no-preempt (no_preempt): user alice may not keep jobs from being preempted; an admin allows it with "
            "`ag quota set --user alice --allow-no-preempt`") in proc.stderr, proc.stderr
    status, body = c.api("POST", "/api/jobs", {"entrypoint": "true", "no_preempt": True}, token=alice)
    assert status == 403 and "may not keep jobs from being preempted" in body["error"], body
    assert c.api("GET", "/api/jobs", token=alice)[1]["jobs"] == []

    c.ag("quota", "set", "--user", "alice", "--allow-no-preempt")
    kept = _submit_as(c, alice, "--no-preempt", "--num-cpus", 2, "--", "sleep 4")
    assert c.wait_state(kept, ("RUNNING", "SUCCEEDED", "FAILED"), timeout=20)["state"] == "RUNNING"
    urgent, _ = c.submit("--no-wait", "--queue", "urgent", "--num-cpus", 2, "--", "true")
    wait_until(lambda: c.job(urgent).get("pending_kind") == "waiting_for_resources", 20,
               message="the urgent job to wait")
    assert c.job(kept)["state"] == "RUNNING"
    assert c.wait_state(kept, ("SUCCEEDED", "FAILED"), timeout=30)["state"] == "SUCCEEDED"
    assert not c.job(kept)["attempts"][0]["preempted"]
    assert c.wait_state(urgent, ("SUCCEEDED", "FAILED"), timeout=30)["state"] == "SUCCEEDED"


def test_bad_queue_input_is_refused_with_what_to_do(cluster_factory):
    c = cluster_factory("badqueues", workers=(WORKER_IPS[0],))
    alice = _add_user(c, "alice")
    # No such queue, at submit (CLI and REST): nothing is made.
    proc = c.ag("submit", "--no-wait", "--queue", "gpu", "--", "true", check=False)
    assert proc.returncode != 0
    assert "unknown queue 'gpu'; this cluster has no queues (an admin makes them with `ag queue create`)" in proc.stderr
    c.ag("queue", "create", "cpu", "--nodes-with", "kind=cpu")
    status, body = c.api("POST", "/api/jobs", {"entrypoint": "true", "queue": "gpu"})
    assert status == 400 and "unknown queue 'gpu'; the queues are cpu (`ag queue list`)" in body["error"], body
    status, body = c.api("POST", "/api/jobs", {"entrypoint": "true", "queue": "GPU!"})
    assert status == 400 and "'GPU!' is not a queue name" in body["error"], body
    # A constraint its nodes could never meet.
    proc = c.ag("submit", "--no-wait", "--queue", "cpu", "--constraint", "kind=gpu", "--", "true", check=False)
    assert proc.returncode != 0
    assert "constraint kind=gpu conflicts with queue cpu, whose nodes have kind=cpu" in proc.stderr, proc.stderr
    assert c.jobs() == []

    # Managing queues is for admins; bad definitions change nothing.
    proc = c.ag("queue", "create", "mine", env={"AG_TOKEN": alice}, check=False)
    assert proc.returncode != 0 and "managing queues: only an admin can do this" in proc.stderr, proc.stderr
    for args, complaint in ((("queue", "create", "x", "--nodes-with", "nolabel"), "--nodes-with takes KEY=VALUE"),
                            (("queue", "create", "Bad Name"), "'Bad Name' is not a queue name"),
                            (("queue", "create", "x", "--priority", "soon"), "field 'priority' must be low, normal"),
                            (("queue", "create", "x", "--max-gpus-per-user", -1), "--max-gpus-per-user"),
                            (("queue", "remove", "nosuch"), "no queue 'nosuch'")):
        proc = c.ag(*args, check=False)
        assert proc.returncode != 0 and complaint in proc.stderr, (args, proc.stderr)
    status, body = c.api("PUT", "/api/queues/x", {"nodes_with": {"a": "b"}, "max_gpus": 8})
    assert status == 400 and "unknown field 'max_gpus'; a queue takes nodes_with" in body["error"], body
    status, body = c.api("PUT", "/api/queues/x", {"preempt": "yes"})
    assert status == 400 and "field 'preempt' must be true or false" in body["error"], body
    assert [q["name"] for q in c.api("GET", "/api/queues")[1]["queues"]] == ["cpu"]

    # A queue with a job waiting in it stays.
    job_id, _ = c.submit("--no-wait", "--queue", "cpu", "--allow-unschedulable", "--", "true")
    proc = c.ag("queue", "remove", "cpu", check=False)
    assert proc.returncode != 0
    assert "queue cpu still has 1 pending or running job(s); stop them or let them end" in proc.stderr, proc.stderr
    assert c.job(job_id)["state"] == "PENDING"
    c.ag("stop-job", job_id)
    assert c.ag("queue", "remove", "cpu").stdout == "Queue cpu removed.\n"


def test_the_sdk_submits_to_a_queue_and_shares_follow_the_weights_an_admin_sets(cluster_factory):
    import sys
    from conftest import REPO
    if str(REPO / "python") not in sys.path:
        sys.path.insert(0, str(REPO / "python"))
    import aethergrid as ag

    c = cluster_factory("sdkqueues", workers=(WORKER_IPS[0],))
    c.ag("queue", "create", "batch", "--priority", "low")
    client = ag.Client(c.address, token=c.token)
    job = client.submit_job("true", queue="batch")
    c.job_ids.add(job.job_id)
    assert c.wait_state(job.job_id, ("SUCCEEDED", "FAILED"), timeout=30)["state"] == "SUCCEEDED"
    assert c.job(job.job_id)["queue"] == "batch" and c.job(job.job_id)["spec"]["priority"] == -100
    try:
        client.submit_job("true", queue="nosuch")
        raise AssertionError("an unknown queue was accepted")
    except ag.AGValidationError as e:
        assert "unknown queue 'nosuch'; the queues are batch" in str(e), e

    # Weights: alice 3, bob 1. Both have used the cluster; their shares are 3/4 and 1/4.
    alice = _add_user(c, "alice")
    bob = _add_user(c, "bob")
    for token in (alice, bob):
        job_id = _submit_as(c, token, "--", "sleep 0.5")
        assert c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=30)["state"] == "SUCCEEDED"
    assert c.ag("quota", "set", "--user", "alice", "--share", 3).stdout == "Quota of user alice set.\n"
    shares = {u["user"]: u["share"] for u in c.api("GET", "/api/share")[1]["users"]}
    assert abs(shares["alice"] / shares["bob"] - 3) < 1e-9, shares
    for args, complaint in ((("--user", "alice", "--share", 0), "--share"),
                            (("--group", "g", "--share", 2), "field 'share' is a user's fair-share weight")):
        proc = c.ag("quota", "set", *args, check=False)
        assert proc.returncode != 0 and complaint in proc.stderr, (args, proc.stderr)
    status, body = c.api("PUT", "/api/quotas/users/bob", {"share": -1})
    assert status == 400 and "field 'share' must be a number above 0" in body["error"], body
