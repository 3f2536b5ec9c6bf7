"""`ag stack`: the Python stacks of a running job's ranks, over real daemons."""
import sys
import time

import pytest

from conftest import PYTHON, REPO, wait_until

if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

import aethergrid as ag  # noqa: E402

# Rank 0 waits in a collective that rank 1, asleep, never joins.
HANG = """
import os, time
import torch
import torch.distributed as dist

def idle_rank():
    print("rank 1 idles", flush=True)
    time.sleep(300)

def wait_in_collective():
    print("rank 0 waits in all_reduce", flush=True)
    dist.all_reduce(torch.ones(4))

dist.init_process_group("gloo")
if dist.get_rank() == 0:
    wait_in_collective()
else:
    idle_rank()
"""

THREADS = """
import threading, time

def background_loop():
    while True:
        time.sleep(0.05)

threading.Thread(target=background_loop, name="loader", daemon=True).start()

def main_loop():
    print("both threads run", flush=True)
    time.sleep(300)

main_loop()
"""


def log_has(c, job_id, text):
    proc = c.ag("logs", job_id, check=False)
    return text in proc.stdout


@pytest.mark.serial  # two torch ranks on a 2-CPU machine: not beside other tests
def test_stack_finds_the_rank_waiting_in_a_collective(cluster, tmp_path):
    c = cluster
    (tmp_path / "hang.py").write_text(HANG)
    (tmp_path / "hang.py").chmod(0o644)
    job_id, _ = c.submit("--no-wait", "-n", "2", "--placement", "spread", "--", PYTHON, str(tmp_path / "hang.py"))
    c.wait_tasks_running(job_id)
    wait_until(lambda: log_has(c, job_id, "rank 0 waits in all_reduce") and log_has(c, job_id, "rank 1 idles"), 90,
               message="rank 0 to wait in all_reduce and rank 1 to idle")
    time.sleep(0.5)  # into the call itself
    proc = c.ag("stack", job_id, timeout=60)
    out = proc.stdout
    rank0, rank1 = out.split("=== rank 1 (node ")
    assert rank0.startswith("=== rank 0 (node ") and "Python stacks" not in rank0.splitlines()[0], out
    assert "in wait_in_collective" in rank0 and "all_reduce" in rank0, out
    assert "in idle_rank" in rank1 and "in wait_in_collective" not in rank1, out
    # The stacks are in the job's events too.
    events = [e["message"] for e in c.api("GET", f"/api/jobs/{job_id}/events")[1]["events"]]
    assert any(e.startswith("stacks of task 0 (taken by ") and "wait_in_collective" in e for e in events), events
    # One rank alone; the JSON form.
    one = c.ag_json("stack", job_id, "--task-index", "1")
    assert [t["task_index"] for t in one["tasks"]] == [1] and one["tasks"][0]["python"] is True
    assert "idle_rank" in one["tasks"][0]["stacks"]


def test_stack_shows_every_thread_and_says_when_a_rank_is_not_python(cluster, tmp_path):
    c = cluster
    (tmp_path / "threads.py").write_text(THREADS)
    (tmp_path / "threads.py").chmod(0o644)
    # `python` as the job's --python makes it: the hook holds for that interpreter too.
    job_id, _ = c.submit("--no-wait", "--python", PYTHON, "--", "python", str(tmp_path / "threads.py"))
    c.wait_tasks_running(job_id)
    wait_until(lambda: log_has(c, job_id, "both threads run"), 30, message="the script to start its threads")
    out = c.ag("stack", job_id).stdout
    assert "in main_loop" in out and "in background_loop" in out, out
    assert out.count("(most recent call first)") >= 2, out
    # Nothing is left in the task's output: the stacks went to the worker only.
    assert "most recent call first" not in c.ag("logs", job_id).stdout
    # A shell running sleep: no Python, its process tree instead.
    sh_job, _ = c.submit("--no-wait", "--", "sleep 300 & wait")
    c.wait_tasks_running(sh_job)
    wait_until(lambda: "sleep 300" in c.ag("stack", sh_job).stdout, 15, message="the sleep to show")
    plain = c.ag("stack", sh_job).stdout
    assert "no Python stacks" in plain and "No Python process of this task answered" in plain, plain
    assert "Its processes:" in plain and "sleep 300" in plain, plain
    # Python started isolated (-I) skips the hook, and says so.
    iso_job, _ = c.submit("--no-wait", "--", "python3", "-I", "-c", "import time; print('isolated', flush=True); "
                          "time.sleep(300)")
    c.wait_tasks_running(iso_job)
    wait_until(lambda: log_has(c, iso_job, "isolated"), 30, message="the isolated python to start")
    iso = c.ag("stack", iso_job).stdout
    assert "no Python stacks" in iso and "-I, -E or -S" in iso, iso


def test_stack_refuses_bad_requests_with_the_reason(cluster):
    c = cluster
    job_id, _ = c.submit("--no-wait", "--", "sleep", "300")
    c.wait_tasks_running(job_id)
    outside = c.ag("stack", job_id, "--task-index", "3", check=False)
    assert outside.returncode != 0 and "outside job" in outside.stderr, outside.stderr
    bob = c.ag_json("user", "add", "bob-stack")["token"]
    refused = c.ag("stack", job_id, check=False, env={"AG_TOKEN": bob})
    assert refused.returncode != 0 and "refused (HTTP 403)" in refused.stderr, refused.stderr
    unknown = c.ag("stack", "job_000000000000", check=False)
    assert unknown.returncode != 0 and "no job" in unknown.stderr, unknown.stderr
    c.ag("stop-job", job_id)
    c.wait_state(job_id, ["STOPPED"], timeout=30)
    ended = c.ag("stack", job_id, check=False)
    assert ended.returncode != 0 and "is STOPPED" in ended.stderr, ended.stderr
    entries = c.ag_json("audit")["entries"]
    assert any(e["action"] == f"POST /api/jobs/{job_id}/stacks" for e in entries), entries


def test_the_sdk_takes_stacks_too(cluster, tmp_path):
    c = cluster
    (tmp_path / "threads.py").write_text(THREADS)
    (tmp_path / "threads.py").chmod(0o644)
    client = ag.Client(c.address, token=c.token, timeout=30)
    job = client.submit_job(f"python3 {tmp_path / 'threads.py'}", num_workers=2)
    c.job_ids.add(job.job_id)
    c.wait_tasks_running(job.job_id)
    wait_until(lambda: c.ag("logs", job.job_id).stdout.count("both threads run") == 2, 30,
               message="both ranks to start their threads")
    tasks = job.stacks()
    assert [t["task_index"] for t in tasks] == [0, 1]
    assert all(t["python"] and t["error"] is None and "in background_loop" in t["stacks"] for t in tasks), tasks
    assert [t["task_index"] for t in job.stacks(task_index=1)] == [1]
    with pytest.raises(ag.AGValidationError, match="outside job"):
        job.stacks(task_index=7)
    job.stop()
    c.wait_state(job.job_id, ["STOPPED"], timeout=30)
    with pytest.raises(ag.AGConflictError, match="is STOPPED"):
        job.stacks()


def test_a_hang_is_recorded_with_the_stacks_and_fails_the_attempt(cluster, tmp_path):
    c = cluster
    (tmp_path / "hang.py").write_text(HANG)
    (tmp_path / "hang.py").chmod(0o644)
    job_id, _ = c.submit("--no-wait", "-n", "2", "--placement", "spread", "--hang-timeout", "4s", "--on-hang", "fail",
                         "--", PYTHON, str(tmp_path / "hang.py"))
    job = c.wait_state(job_id, ["FAILED"], timeout=120)
    assert job["message"] == "no progress for 4s", job["message"]
    events = [e["message"] for e in c.api("GET", f"/api/jobs/{job_id}/events")[1]["events"]]
    assert any(e.startswith("hung: no progress for 4s (ranks 0-1 wrote no output") for e in events), events
    stacks = [e for e in events if e.startswith("stacks of task 0 (taken by the hang watch)")]
    assert stacks and "wait_in_collective" in stacks[0], events


def test_a_job_that_writes_output_is_not_hung_and_the_heads_default_applies(cluster_factory):
    c = cluster_factory("hang-default", workers=["127.0.0.2"], head_options=["--hang-timeout", "3s"])
    busy, _ = c.submit("--no-wait", "--", "for i in $(seq 1 8); do echo tick $i; sleep 1; done")
    idle, _ = c.submit("--no-wait", "--", "sleep 300")
    c.wait_state(busy, ["SUCCEEDED"], timeout=60)
    assert not any(e["message"].startswith("hung:") for e in c.api("GET", f"/api/jobs/{busy}/events")[1]["events"])
    wait_until(lambda: any(e["message"].startswith("hung: no progress for 3s (rank 0")
                           for e in c.api("GET", f"/api/jobs/{idle}/events")[1]["events"]), 30,
               message="the idle job to be reported hung by the head's default")
    assert c.job(idle)["state"] == "RUNNING", "only reported: on_hang defaults to stacks"


def test_bad_hang_options_are_refused(cluster):
    c = cluster
    for flags, said in ((["--hang-timeout", "0s"], "--hang-timeout"), (["--on-hang", "kill"], "--on-hang")):
        proc = c.ag("submit", *flags, "--", "true", check=False)
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    status, body = c.api("POST", "/api/jobs", {"entrypoint": "true", "on_hang": "restart"})
    assert status == 400 and "on_hang" in body["error"], body
    status, body = c.api("POST", "/api/jobs", {"entrypoint": "true", "hang_timeout": -1})
    assert status == 400 and "hang_timeout" in body["error"], body
