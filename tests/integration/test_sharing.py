"""Sharing the cluster (issue 14), as far as it is built: priorities order the queue;
dependencies, holds and begin times keep jobs out of it until they may run."""
import datetime
import http.client
import json
import os
import re
import signal
import sys
import threading
import time

import pytest

from conftest import REPO, WORKER_IPS, pid_alive, wait_until
from test_metrics import parse as parse_metrics

SDK_PATH = str(REPO / "python")
if SDK_PATH not in sys.path:
    sys.path.insert(0, SDK_PATH)

import aethergrid as ag  # noqa: E402


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
    assert rows[high][4:7] == ["PENDING", "#1", "100"], rows[high]
    assert rows[normal][4:7] == ["PENDING", "#2", "0"], rows[normal]
    assert rows[low][4:7] == ["PENDING", "#3", "-100"], rows[low]
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


# ---- dependencies, holds and begin times ------------------------------------------------

def _row(c, job_id):
    """`ag list-jobs`'s row for the job, split on whitespace."""
    for line in c.ag("list-jobs").stdout.splitlines()[1:]:
        if line.split()[0] == job_id:
            return line.split()
    raise AssertionError(f"{job_id} is not in ag list-jobs")


def test_a_pipeline_runs_in_order_and_a_failed_step_fails_what_needs_it(cluster_factory):
    c = cluster_factory("pipeline", workers=(WORKER_IPS[0],))
    train, _ = c.submit("--no-wait", "--", "sleep 1.5")
    evaluate, _ = c.submit("--no-wait", "--after", train, "--", "true")
    on_failure, _ = c.submit("--no-wait", "--after-failed", train, "--", "true")
    report, _ = c.submit("--no-wait", "--after-any", f"{train},{evaluate}", "--", "true")
    # Free room, yet each waits, out of the queue, saying for what.
    job = c.job(evaluate)
    assert job["state"] == "PENDING" and job["pending_kind"] == "dependency", job
    assert job["message"] == f"waiting for {train} to succeed (--after)", job["message"]
    assert "queue_position" not in job
    assert _row(c, evaluate)[4:6] == ["PENDING", "(after)"]
    assert f"waiting for {train} to succeed (--after)" in c.ag("status", evaluate).stdout

    assert c.wait_state(evaluate, ("SUCCEEDED", "FAILED"), timeout=60)["state"] == "SUCCEEDED"
    assert c.wait_state(report, ("SUCCEEDED", "FAILED"), timeout=60)["state"] == "SUCCEEDED"
    assert c.job(evaluate)["started_ms"] >= c.job(train)["finished_ms"]
    assert c.job(report)["started_ms"] >= c.job(evaluate)["finished_ms"]
    # The step for a failure can never run now: it fails, saying why, at once.
    failed = c.wait_state(on_failure, ("SUCCEEDED", "FAILED"), timeout=10)
    assert failed["state"] == "FAILED" and failed["attempts"] == [], failed
    assert failed["message"] == (f"dependency {train} ended SUCCEEDED; --after-failed waits for it to fail or be "
                                 "stopped, so this job can never start"), failed["message"]

    # A chain whose first step fails fails down the chain.
    broken, _ = c.submit("--no-wait", "--", "sleep 0.5; exit 3")
    second, _ = c.submit("--no-wait", "--after", broken, "--", "true")
    third, _ = c.submit("--no-wait", "--after", second, "--", "true")
    assert c.wait_state(third, ("SUCCEEDED", "FAILED"), timeout=30)["state"] == "FAILED"
    assert f"dependency {second} ended FAILED" in c.job(third)["message"]
    assert f"dependency {broken} ended FAILED" in c.job(second)["message"]


def test_held_and_dependent_jobs_wait_across_a_head_restart_and_run_when_released(cluster_factory):
    c = cluster_factory("holds", workers=(WORKER_IPS[0],))
    first, _ = c.submit("--no-wait", "--", "sleep 2")
    after_first, _ = c.submit("--no-wait", "--after", first, "--", "true")
    held, _ = c.submit("--no-wait", "--hold", "--", "true")
    queued, _ = c.submit("--no-wait", "--allow-unschedulable", "--num-cpus", 64, "--", "true")
    assert c.job(held)["pending_kind"] == "held" and c.job(held)["held_by"] == "admin", c.job(held)
    assert _row(c, held)[4:6] == ["PENDING", "(held)"]
    # ag hold takes a queued job out of the queue.
    out = c.ag("hold", queued).stdout
    assert out.startswith(f"Held job {queued}: held by admin; `ag release {queued}` lets it run"), out

    head = c.head_pid()
    os.kill(head, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head), 10, message="the head to die")
    c.start_head()
    for job_id in (held, queued):
        assert c.job(job_id)["pending_kind"] == "held", c.job(job_id)
    assert c.wait_state(after_first, ("SUCCEEDED", "FAILED"), timeout=60)["state"] == "SUCCEEDED"
    time.sleep(1)
    assert c.job(held)["state"] == "PENDING"  # room, and still held

    out = c.ag("release", held).stdout
    assert out.startswith(f"Released job {held}: "), out
    assert c.wait_state(held, ("SUCCEEDED", "FAILED"), timeout=30)["state"] == "SUCCEEDED"
    events = [e["message"] for e in c.api("GET", f"/api/jobs/{held}/events")[1]["events"]]
    assert "released by admin" in events, events
    c.ag("stop-job", queued)


def test_begin_time_holds_a_job_until_it_comes(cluster_factory):
    c = cluster_factory("begin", workers=(WORKER_IPS[0],))
    before = time.time()
    job_id, _ = c.submit("--no-wait", "--begin", "3s", "--", "true")
    job = c.job(job_id)
    assert job["pending_kind"] == "begin_time" and "starts no earlier than" in job["message"], job
    assert _row(c, job_id)[4:6] == ["PENDING", "(begin)"]
    done = c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=30)
    assert done["state"] == "SUCCEEDED" and done["started_ms"] >= job["spec"]["begin_ms"], done
    assert job["spec"]["begin_ms"] >= int(before * 1000) + 2900


def test_bad_dependencies_holds_and_begin_times_are_refused_and_change_nothing(cluster_factory):
    c = cluster_factory("gates-bad", workers=(WORKER_IPS[0],))
    done, _ = c.submit("--no-wait", "--", "exit 1")
    assert c.wait_state(done, ("SUCCEEDED", "FAILED"), timeout=30)["state"] == "FAILED"
    running, _ = c.submit("--no-wait", "--", "sleep 30")
    wait_until(lambda: c.job(running)["state"] == "RUNNING", 20, message="the job to run")
    for args, complaint in (
            (("--after", "train-job"), "--after (after): 'train-job' is not a job id"),
            (("--after", "job_0123456789ab"), "--after names job job_0123456789ab, which does not exist"),
            (("--after", done), f"dependency {done} ended FAILED; --after waits for it to succeed"),
            (("--after", running, "--after-any", running), f"names {running} twice"),
            (("--begin", "soon"), "--begin takes a time from now like 90s, 10m, 2h or 1d"),
            (("--begin", "25:00"), "--begin takes a time from now")):
        proc = c.ag("submit", "--no-wait", *args, "--", "true", check=False)
        assert proc.returncode != 0 and complaint in proc.stderr, (args, proc.stderr)
    for body, complaint in (({"hold": "yes"}, "field 'hold': must be true or false"),
                            ({"begin_ms": "tomorrow"}, "field 'begin_ms'"),
                            ({"after": "job_0123456789ab"}, "field 'after': must be a list of job ids")):
        status, answer = c.api("POST", "/api/jobs", {"entrypoint": "true", **body})
        assert status == 400 and complaint in answer["error"], (body, answer)
    assert {j["job_id"] for j in c.jobs()} == {done, running}  # nothing was created

    proc = c.ag("hold", running, check=False)
    assert proc.returncode == 1 and (f"job {running} is RUNNING; only a pending job can be held "
                                     f"(stop it with `ag stop-job {running}`)") in proc.stderr, proc.stderr
    proc = c.ag("release", done, check=False)
    assert proc.returncode == 1 and f"job {done} is FAILED; only a pending job can be released" in proc.stderr
    proc = c.ag("release", "job_0123456789ab", check=False)
    assert proc.returncode == 1 and "no job with id 'job_0123456789ab'" in proc.stderr, proc.stderr
    assert c.job(running)["state"] == "RUNNING" and "held_by" in c.job(running) and c.job(running)["held_by"] is None
    # A finished job that a held job still depends on is kept.
    held, _ = c.submit("--no-wait", "--hold", "--after-failed", done, "--", "true")
    status, answer = c.api("DELETE", f"/api/jobs/{done}")
    assert status == 409 and f"is a dependency of pending job {held}" in answer["error"], answer
    c.ag("stop-job", held)
    c.ag("stop-job", running)


def test_the_sdk_chains_holds_and_releases_jobs(cluster_factory):
    c = cluster_factory("gates-sdk", workers=(WORKER_IPS[0],))
    client = ag.Client(c.address, token=c.token)
    first = client.submit_job("sleep 1")
    second = client.submit_job("true", after=first, hold=True)
    c.job_ids.update({first.job_id, second.job_id})
    assert second.info()["pending_kind"] == "held"
    assert second.release()["state"] == "PENDING"
    assert second.info()["pending_kind"] == "dependency"
    assert second.wait(timeout=60)["state"] == "SUCCEEDED"
    later = client.submit_job("true", begin=datetime.timedelta(seconds=2))
    c.job_ids.add(later.job_id)
    assert later.info()["pending_kind"] == "begin_time"
    with pytest.raises(ag.AGValidationError) as raised:
        client.submit_job("true", after=3)
    assert "after takes a job, a job id or a list of them" in str(raised.value)
    with pytest.raises(ag.AGConflictError):
        first.hold()
    assert later.wait(timeout=30)["started_ms"] >= later.info()["spec"]["begin_ms"]


# ---- arrays -------------------------------------------------------------------------------

def test_an_array_larger_than_one_scheduling_pass_starts_whole_when_it_fits(cluster_factory):
    # 100 one-CPU elements on 120 CPUs: all run at once, although one scheduling pass
    # weighs 64 queued jobs and nothing ends meanwhile to bring on another pass (before
    # the head chained its passes, 36 waited until a task ended).
    c = cluster_factory("wide", workers=())
    for ip in WORKER_IPS[:2]:
        c.start_worker(ip, num_cpus=60)
    wait_until(lambda: sum(n["state"] == "ALIVE" for n in c.nodes()) == 2, 15, message="both workers")
    proc = c.ag("submit", "--array", "0-99", "--num-cpus", 1, "--", "sleep 120")
    array_id = proc.stdout.strip()
    c.job_ids.update(f"{array_id}_{i}" for i in range(100))

    def running():
        return sum(e["state"] == "RUNNING" for e in c.api("GET", f"/api/jobs/{array_id}")[1]["elements"])

    wait_until(lambda: running() == 100, 60, interval=0.5, message="all 100 elements to run")
    c.ag("stop-job", array_id)
    wait_until(lambda: c.api("GET", f"/api/jobs/{array_id}")[1]["state"] == "STOPPED", 60, interval=0.5,
               message="the array to stop")


def test_an_array_runs_each_index_under_its_limit_and_is_seen_stopped_and_logged_whole(cluster_factory, tmp_path):
    c = cluster_factory("array", workers=WORKER_IPS[:2])
    running = tmp_path / "running"
    running.mkdir(mode=0o777)
    running.chmod(0o777)  # (past the umask) the tasks' account writes here
    # Each element marks itself running while it runs, so the test sees how many overlap.
    cmd = (f"touch {running}/$AG_ARRAY_INDEX; ls {running} | wc -l >> {tmp_path}/overlap; "
           f"echo index=$AG_ARRAY_INDEX of $AG_ARRAY_SIZE in $AG_ARRAY_ID; sleep 0.4; rm {running}/$AG_ARRAY_INDEX")
    proc = c.ag("submit", "--array", "0-5%2", "--num-cpus", 0.5, "--", cmd)
    array_id = proc.stdout.strip()
    assert f"Array {array_id} submitted: 6 jobs, {array_id}_0 to {array_id}_5, at most 2 at once" in proc.stderr
    c.job_ids.update(f"{array_id}_{i}" for i in range(6))
    status, array = c.api("GET", f"/api/jobs/{array_id}")
    assert status == 200 and array["size"] == 6 and array["max_running"] == 2, array
    waiting = [e for e in array["elements"] if e["pending_kind"] == "array_limit"]
    assert waiting and "runs at most 2 elements at once" in waiting[0]["message"], array["elements"]

    wait_until(lambda: c.api("GET", f"/api/jobs/{array_id}")[1]["state"] == "SUCCEEDED", 60,
               message="every element to succeed")
    overlap = [int(n) for n in (tmp_path / "overlap").read_text().split()]
    assert len(overlap) == 6 and max(overlap) <= 2, overlap
    out = c.ag("status", array_id).stdout
    assert out.startswith(f"Array {array_id}: SUCCEEDED\n  6 jobs, at most 2 at once: 6 SUCCEEDED"), out
    logs = c.ag("logs", array_id).stdout
    for i in range(6):
        assert f"==> {array_id}_{i} (index {i}, SUCCEEDED) <==\nindex={i} of 6 in {array_id}\n" in logs, logs
    assert c.ag("logs", f"{array_id}_4").stdout == f"index=4 of 6 in {array_id}\n"
    assert c.job(f"{array_id}_4")["array_index"] == 4

    # Stopping the whole array stops what runs and what waits.
    proc = c.ag("submit", "--array", "0-9%3", "--", "sleep 30")
    second = proc.stdout.strip()
    c.job_ids.update(f"{second}_{i}" for i in range(10))
    wait_until(lambda: c.api("GET", f"/api/jobs/{second}")[1]["counts"].get("RUNNING") == 3, 30,
               message="three elements to run")
    assert c.ag("stop-job", second).stdout == f"Stop requested for 10 unfinished job(s) of array {second}\n"
    wait_until(lambda: c.api("GET", f"/api/jobs/{second}")[1]["counts"] == {"STOPPED": 10}, 30,
               message="every element to stop")
    assert c.ag("delete-job", second).stdout == f"Deleted 10 job(s) of array {second}\n"
    assert c.api("GET", f"/api/jobs/{second}")[0] == 404


def test_bad_arrays_are_refused_and_change_nothing(head_only):
    for value, complaint in (("5-1", "--array: the range 5-1 runs backwards"),
                             ("0-99%0", "--array: '0' after % is not a positive whole number"),
                             ("0-20000", "--array: an array has at most 10000 elements"),
                             ("x", "--array: 'x' is not an index or a range; give indices like 0-99")):
        proc = head_only.ag("submit", "--array", value, "--", "true", check=False)
        assert proc.returncode != 0 and complaint in proc.stderr, (value, proc.stderr)
    status, body = head_only.api("POST", "/api/jobs", {"entrypoint": "true", "array": [0, 1]})
    assert status == 400 and "field 'array': must be a string like" in body["error"], body
    status, body = head_only.api("POST", "/api/jobs/batch", {"jobs": [{"entrypoint": "true", "array": "0-9999"},
                                                                      {"entrypoint": "true"}]})
    assert status == 400 and "this submit would make 10001 jobs; one submit makes at most 10000" in body["error"], body
    assert head_only.jobs() == []


def test_the_sdk_submits_waits_for_and_stops_an_array(cluster_factory):
    c = cluster_factory("array-sdk", workers=(WORKER_IPS[0],))
    client = ag.Client(c.address, token=c.token)
    array = client.submit_array("test $AG_ARRAY_INDEX != 2", range(4), max_running=2)
    c.job_ids.update(j.job_id for j in array.jobs())
    assert [j.job_id for j in array.jobs()] == [f"{array.array_id}_{i}" for i in range(4)]
    with pytest.raises(ag.AGJobFailedError) as raised:
        array.wait(timeout=60)
    assert f"1 of 4 jobs of array {array.array_id} did not succeed: {array.array_id}_2 FAILED" in str(raised.value)
    assert raised.value.info["counts"] == {"SUCCEEDED": 3, "FAILED": 1}
    held = client.submit_array("true", "0-2", hold=True)
    c.job_ids.update(j.job_id for j in held.jobs())
    assert held.info()["counts"] == {"PENDING": 3}
    assert held.release()["jobs"] == 3
    assert held.wait(timeout=60)["state"] == "SUCCEEDED"
    with pytest.raises(ag.AGValidationError):
        client.submit_array("true", "0-3%2", max_running=2)


# ---- quotas -------------------------------------------------------------------------------

def _add_user(c, name, *args):
    out = c.ag_json("user", "add", name, *args)
    return out["token"]


def _submit_as(c, token, *args):
    proc = c.ag("submit", "--no-wait", *args, env={"AG_TOKEN": token})
    job_id = proc.stdout.strip().splitlines()[-1]
    c.job_ids.add(job_id)
    return job_id


def test_a_quota_keeps_a_user_to_her_share_and_her_next_job_starts_when_she_has_room(cluster_factory):
    c = cluster_factory("quotas", workers=WORKER_IPS[:2])  # 2 CPUs each
    alice = _add_user(c, "alice", "--group", "vision")
    bob = _add_user(c, "bob", "--group", "vision")
    carol = _add_user(c, "carol")
    assert c.ag("quota", "set", "--user", "alice", "--max-cpus", 2).stdout == "Quota of user alice set.\n"
    c.ag("quota", "set", "--group", "vision", "--max-running-jobs", 2)
    first = _submit_as(c, alice, "--num-cpus", 1, "--", "sleep 3")
    second = _submit_as(c, alice, "--num-cpus", 1, "--", "sleep 3")
    third = _submit_as(c, alice, "--num-cpus", 1, "--", "true")
    wait_until(lambda: c.job(third).get("pending_kind") == "quota", 20, message="alice's third job to wait for quota")
    assert c.job(third)["message"] == "user alice holds 2 of the 2 CPUs its quota allows; this job needs 1"
    # Nobody else is held back: carol's job behind it runs on the free CPUs. Bob is in
    # alice's group, which runs 2 jobs already.
    other = _submit_as(c, carol, "--num-cpus", 1, "--", "true")
    assert c.wait_state(other, ("SUCCEEDED", "FAILED"), timeout=30)["state"] == "SUCCEEDED"
    grouped = _submit_as(c, bob, "--num-cpus", 1, "--", "true")
    wait_until(lambda: c.job(grouped).get("pending_kind") == "quota", 20, message="bob's job to wait for his group")
    assert c.job(grouped)["message"] == "group vision (of user bob) runs 2 of the 2 jobs its quota allows"

    listed = c.ag("quota", "list").stdout
    rows = {tuple(re.split(r"\s{2,}", line.strip())[:2]): re.split(r"\s{2,}", line.strip())[2:]
            for line in listed.splitlines()[1:]}
    assert rows[("user", "alice")] == ["0", "2/2", "0 B", "2", "-", "-"], listed
    assert rows[("group", "vision")] == ["0", "2", "0 B", "2/2", "-", "-"], listed
    status, quotas = c.api("GET", "/api/quotas", token=carol)  # anyone may read them
    assert status == 200 and quotas["users"]["alice"]["max_cpu_millis"] == 2000, quotas

    # Her first jobs end: the third starts by itself, and bob's too.
    for job_id in (first, second, third, grouped):
        assert c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=60)["state"] == "SUCCEEDED"
    assert c.job(third)["started_ms"] >= min(c.job(first)["finished_ms"], c.job(second)["finished_ms"])

    # A quota survives a head restart; removing it lets her use the whole cluster.
    head = c.head_pid()
    os.kill(head, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head), 10, message="the head to die")
    c.start_head()
    assert c.api("GET", "/api/quotas")[1]["users"]["alice"]["max_cpu_millis"] == 2000
    c.ag("quota", "remove", "--group", "vision")
    assert c.ag("quota", "remove", "--user", "alice").stdout == "Quota of user alice removed.\n"
    assert "No quotas" in c.ag("quota", "list").stdout


def test_an_admin_caps_the_priority_a_user_may_ask_for(cluster_factory):
    c = cluster_factory("priority-cap", workers=(WORKER_IPS[0],))
    alice = _add_user(c, "alice", "--group", "interns")
    c.ag("quota", "set", "--group", "interns", "--max-priority", 0)
    proc = c.ag("submit", "--no-wait", "--priority", "high", "--", "true", env={"AG_TOKEN": alice}, check=False)
    assert proc.returncode != 0, proc.stdout
    assert ("priority 100 is over the highest an admin allows group interns (0); submit with --priority 0 or lower"
            in proc.stderr), proc.stderr
    status, body = c.api("POST", "/api/jobs/batch", {"jobs": [{"entrypoint": "true"},
                                                              {"entrypoint": "true", "priority": 5}]}, token=alice)
    assert status == 403 and body["error"].startswith("jobs[1]: priority 5 is over"), body
    assert c.jobs() == []
    ok = _submit_as(c, alice, "--priority", "low", "--", "true")
    assert c.wait_state(ok, ("SUCCEEDED", "FAILED"), timeout=30)["state"] == "SUCCEEDED"
    # Users outside the group are not held to it, and the cap shows in the list.
    assert c.submit("--no-wait", "--priority", "urgent", "--", "true")[0]
    assert "MAX PRIORITY" in c.ag("quota", "list").stdout.splitlines()[0]
    status, body = c.api("PUT", "/api/quotas/users/alice", {"max_priority": 5000})
    assert status == 400 and "field 'max_priority' must be a whole number from -1000 to 1000" in body["error"], body


def test_a_user_taken_out_of_a_full_group_starts_her_waiting_job(cluster_factory):
    c = cluster_factory("quota-group-change", workers=(WORKER_IPS[0],))
    alice = _add_user(c, "alice", "--group", "vision")
    bob = _add_user(c, "bob", "--group", "vision")
    c.ag("quota", "set", "--group", "vision", "--max-running-jobs", 1)
    busy = _submit_as(c, alice, "--num-cpus", 1, "--", "sleep 60")
    wait_until(lambda: c.job(busy)["state"] == "RUNNING", 20, message="alice's job to run")
    waiting = _submit_as(c, bob, "--num-cpus", 1, "--", "true")
    wait_until(lambda: c.job(waiting).get("pending_kind") == "quota", 20, message="bob's job to wait for his group")
    # Nothing else happens in the cluster: the change itself lets his job start.
    c.ag("user", "set", "bob", "--remove-group", "vision")
    assert c.wait_state(waiting, ("SUCCEEDED", "FAILED"), timeout=20)["state"] == "SUCCEEDED"
    c.ag("stop-job", busy)


def test_bad_quotas_are_refused_and_only_an_admin_sets_one(cluster_factory):
    c = cluster_factory("quotas-bad", workers=(WORKER_IPS[0],))
    alice = _add_user(c, "alice")
    for args, complaint in ((("--max-gpus", 2), "give --user NAME or --group NAME"),
                            (("--user", "alice", "--group", "g", "--max-gpus", 2), "give --user NAME or --group NAME"),
                            (("--user", "alice"), "give at least one of --max-gpus"),
                            (("--user", "Alice!", "--max-gpus", 1), "user name"),
                            (("--user", "alice", "--max-gpus", -1), "--max-gpus")):
        proc = c.ag("quota", "set", *args, check=False)
        assert proc.returncode != 0 and complaint in proc.stderr, (args, proc.stderr)
    for body, complaint in (({"max_gpu": 1}, "unknown field 'max_gpu'"),
                            ({"max_gpus": "8"}, "field 'max_gpus' must be a whole number"),
                            ({"max_cpus": -2}, "field 'max_cpus' must be a number of CPUs")):
        status, answer = c.api("PUT", "/api/quotas/users/alice", body)
        assert status == 400 and complaint in answer["error"], (body, answer)
    proc = c.ag("quota", "set", "--user", "alice", "--max-gpus", 100, env={"AG_TOKEN": alice}, check=False)
    assert proc.returncode != 0 and "setting quotas: only an admin can do this" in proc.stderr, proc.stderr
    assert c.api("GET", "/api/quotas")[1] == {"users": {}, "groups": {}}


def test_policy_changes_sent_at_once_are_all_kept(cluster_factory):
    """Quotas, queues and drains sent together, each on its own connection, released at
    the same moment: every one answered 200 is in force and still there after a restart."""
    c = cluster_factory("policy-at-once", workers=WORKER_IPS[:2])
    nodes = sorted(n["node_id"] for n in c.nodes())
    assert len(nodes) == 2, nodes
    users = [f"user{i}" for i in range(6)]
    requests = ([("PUT", f"/api/quotas/users/{u}", {"max_gpus": 1}) for u in users] +
                [("PUT", f"/api/queues/q{i}", {}) for i in range(2)] +
                [("POST", f"/api/nodes/{n}/drain", None) for n in nodes])
    conns = []
    for _ in requests:
        conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=30)
        conn.connect()
        conns.append(conn)
    start = threading.Barrier(len(requests))
    answers = [None] * len(requests)

    def send(i):
        method, path, body = requests[i]
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {c.token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        start.wait(10)
        conns[i].request(method, path, body=data, headers=headers)
        resp = conns[i].getresponse()
        answers[i] = (resp.status, resp.read().decode(errors="replace"))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for conn in conns:
        conn.close()
    assert all(a is not None and a[0] == 200 for a in answers), answers

    def in_force():
        quotas = c.api("GET", "/api/quotas")[1]["users"]
        queues = c.api("GET", "/api/queues")[1]
        drained = sorted(n["node_id"] for n in c.nodes() if n["draining"])
        return sorted(quotas), sorted(q["name"] for q in queues["queues"]), drained

    assert in_force() == (users, ["q0", "q1"], nodes)
    head_pid = c.head_pid()
    os.kill(head_pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head_pid), 10, message="the head to die")
    c.start_head()
    wait_until(lambda: len(c.nodes()) == 2, 20, message="the workers back")
    assert in_force() == (users, ["q0", "q1"], nodes)


# ---- fair share -------------------------------------------------------------------------

def test_the_user_who_used_the_cluster_least_goes_first_and_ag_share_shows_why(cluster_factory):
    c = cluster_factory("fairshare", workers=(WORKER_IPS[0],))  # 2 CPUs
    alice = _add_user(c, "alice")
    bob = _add_user(c, "bob")
    busy = _submit_as(c, alice, "--num-cpus", 2, "--", "sleep 3")
    wait_until(lambda: c.job(busy)["state"] == "RUNNING", 20, message="alice's first job to run")
    # Until her running job shows as usage (charged from its placement on).
    wait_until(lambda: any(u["user"] == "alice" and u["usage"] > 0 for u in c.api("GET", "/api/share")[1]["users"]),
               20, message="alice's usage")
    hers = _submit_as(c, alice, "--num-cpus", 2, "--", "true")
    his = _submit_as(c, bob, "--num-cpus", 2, "--", "true")
    # Same priority, bob submitted last, but alice has used the node: bob is next.
    assert c.job(his)["queue_position"] == 1 and c.job(hers)["queue_position"] == 2
    for job_id in (his, hers):
        assert c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=60)["state"] == "SUCCEEDED"
    assert c.job(his)["started_ms"] <= c.job(hers)["started_ms"]

    shares = c.api("GET", "/api/share")[1]["users"]
    assert [u["user"] for u in shares][0] == "alice", shares
    assert shares[0]["usage"] >= 3 * 2 / 16 * 0.9 and shares[0]["fair_share"] < 0.5, shares
    lines = c.ag("share").stdout.splitlines()
    assert lines[0].split()[:2] == ["USER", "USAGE"] and lines[1].split()[0] == "alice", lines
    # /metrics carries the same, by user, and what each user's running jobs hold.
    slow = _submit_as(c, bob, "--num-cpus", 2, "--", "sleep 3")
    wait_until(lambda: c.job(slow)["state"] == "RUNNING", 20, message="bob's job to run")
    _, _, text = c.api_full("GET", "/metrics", port=c.dashboard_port)
    samples = parse_metrics(text)
    assert samples[("ag_user_usage_gpu_seconds", frozenset({("user", "alice")}))] >= 3 * 2 / 16 * 0.9, text
    assert samples[("ag_user_cpus_held", frozenset({("user", "bob")}))] == 2, text
    c.ag("stop-job", slow)


def test_an_exclusive_job_has_its_nodes_to_itself(cluster_factory):
    c = cluster_factory("exclusive", workers=WORKER_IPS[:2])  # 2 CPUs each
    shared, _ = c.submit("--no-wait", "--num-cpus", 1, "--", "sleep 4")
    wait_until(lambda: c.job(shared)["state"] == "RUNNING", 20, message="the first job to run")
    busy_node = c.job(shared)["attempts"][0]["tasks"][0]["node_id"]
    alone, _ = c.submit("--no-wait", "--exclusive", "--num-cpus", 1, "--", "sleep 3")
    wait_until(lambda: c.job(alone)["state"] == "RUNNING", 20, message="the exclusive job to run")
    alone_node = c.job(alone)["attempts"][0]["tasks"][0]["node_id"]
    assert alone_node != busy_node and c.job(alone)["spec"]["exclusive"] is True
    # One free CPU is left on each node; the next one-CPU job may only use the shared one.
    later, _ = c.submit("--no-wait", "--num-cpus", 1, "--", "true")
    assert c.wait_state(later, ("SUCCEEDED", "FAILED"), timeout=30)["state"] == "SUCCEEDED"
    assert c.job(later)["attempts"][0]["tasks"][0]["node_id"] == busy_node
    # Both nodes busy: a second exclusive job waits for an idle one, saying so.
    second, _ = c.submit("--no-wait", "--exclusive", "--", "true")
    wait_until(lambda: "on nodes of its own (--exclusive)" in c.job(second)["message"], 20,
               message="the second exclusive job to say why it waits")
    assert c.wait_state(second, ("SUCCEEDED", "FAILED"), timeout=60)["state"] == "SUCCEEDED"
    status, body = c.api("POST", "/api/jobs", {"entrypoint": "true", "exclusive": "yes"})
    assert status == 400 and "field 'exclusive': must be true or false" in body["error"], body
