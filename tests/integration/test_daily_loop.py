"""The daily loop as a new user meets it, over real daemons: GPUs mapped the way
torchrun scripts expect (fake GPUs: `ag start-worker --num-gpus N` on a machine without
any), and each bad input refused with a message that names it.

Each test is bounded: CLI calls have subprocess timeouts, waits have deadlines.
"""
import json
import subprocess
import sys
import threading

import pytest

from conftest import AG_BIN, REPO, wait_until

SDK_PATH = str(REPO / "python")
if SDK_PATH not in sys.path:
    sys.path.insert(0, SDK_PATH)

import aethergrid as ag  # noqa: E402


def task_log(cluster, job_id, task_index):
    return cluster.ag("logs", job_id, "--task-index", task_index, timeout=30).stdout


@pytest.fixture
def gpu_cluster(cluster_factory):
    """A head and two workers with 4 CPUs and 4 (fake) GPUs each."""
    c = cluster_factory("gpus", workers=())
    for ip in ("127.0.0.2", "127.0.0.3"):
        c.start_worker(ip, num_cpus=4, options=["--num-gpus", 4])
    return c


GPU_REPORT = "sh -c 'echo \"$LOCAL_RANK|$CUDA_VISIBLE_DEVICES|$AG_GPU_IDS|$AG_NODE_ID\"'"


def gpu_views(cluster, job_id, tasks):
    """{task index: (local rank, visible ids, own ids, node)} as each task printed them."""
    views = {}
    for t in range(tasks):
        local_rank, visible, own, node = task_log(cluster, job_id, t).strip().split("|")
        views[t] = (int(local_rank), visible.split(","), own.split(","), node)
    return views


@pytest.mark.parametrize("gpus_per_task", [1, 2])
def test_local_rank_indexes_the_tasks_own_gpu_among_those_it_sees(gpu_cluster, gpus_per_task):
    tasks = 8 // gpus_per_task  # every GPU of both nodes, packed: 4 or 2 tasks per node
    job_id, _ = gpu_cluster.submit("-n", tasks, "--num-gpus", gpus_per_task, "--num-cpus", 0.5,
                                   "--no-wait", "--", GPU_REPORT)
    job = gpu_cluster.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=60)
    assert job["state"] == "SUCCEEDED", job
    views = gpu_views(gpu_cluster, job_id, tasks)
    by_node = {}
    for t, (local_rank, visible, own, node) in views.items():
        by_node.setdefault(node, []).append((local_rank, visible, own))
        # torch.cuda.set_device(LOCAL_RANK * num_gpus) is the task's own first GPU.
        start = local_rank * gpus_per_task
        assert visible[start:start + gpus_per_task] == own, (t, views[t])
    assert len(by_node) == 2, views
    for node, seen in by_node.items():
        # Every task on a node sees the same list: all the node's GPUs, none twice, and
        # the local ranks are 0..n-1.
        assert sorted(lr for lr, _, _ in seen) == list(range(4 // gpus_per_task)), seen
        assert all(visible == seen[0][1] for _, visible, _ in seen), seen
        assert sorted(seen[0][1]) == ["0", "1", "2", "3"], seen


def test_gpu_isolation_shows_each_task_only_its_own_gpus(gpu_cluster):
    job_id, _ = gpu_cluster.submit("-n", 4, "--num-gpus", 2, "--num-cpus", 0.5, "--gpu-isolation",
                                   "--no-wait", "--", GPU_REPORT)
    job = gpu_cluster.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=60)
    assert job["state"] == "SUCCEEDED", job
    assert job["spec"]["task_options"]["gpu_isolation"] is True, job
    views = gpu_views(gpu_cluster, job_id, 4)
    owned = set()
    for t, (_, visible, own, node) in views.items():
        assert visible == own and len(own) == 2, (t, views[t])
        owned.add((node, tuple(own)))
    assert len(owned) == 4, views  # two tasks per node, each with GPUs of its own


def test_cpu_tasks_see_no_gpu(gpu_cluster):
    job_id, _ = gpu_cluster.submit("--no-wait", "--", GPU_REPORT)
    assert gpu_cluster.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=60)["state"] == "SUCCEEDED"
    local_rank, visible, own, _ = task_log(gpu_cluster, job_id, 0).strip().split("|")
    assert (local_rank, visible, own) == ("0", "", "")


@pytest.mark.parametrize("value", ["yes", 1])
def test_gpu_isolation_that_is_not_a_boolean_is_refused(head_only, value):
    before = head_only.jobs()
    status, body = head_only.api("POST", "/api/jobs", {"entrypoint": "true",
                                                       "task_options": {"gpu_isolation": value}})
    assert status == 400, body
    assert "task_options.gpu_isolation" in body["error"] and "true or false" in body["error"], body
    assert head_only.jobs() == before


# ---- failures explain themselves ----------------------------------------------------------

# Rank 1 prints 80 numbered lines (with a terminal escape in one) and fails; rank 0 is
# stopped because of it and must not be the one shown.
FAILING = ("if [ \"$RANK\" = 1 ]; then seq 1 80 | sed 's/^/err line /'; printf 'bad \\033[2J escape\\n'; "
           "echo 'ValueError: bad shape'; exit 3; fi; echo 'rank 0 fine'; sleep 60")


def assert_last_fifty(text):
    assert "ValueError: bad shape" in text, text
    assert "err line 33" in text and "err line 80" in text, text
    assert "err line 32\n" not in text + "\n" and "rank 0 fine" not in text, text


def test_a_failed_job_carries_the_failing_tasks_last_lines_everywhere(cluster):
    job_id, proc = cluster.submit("-n", 2, "--", FAILING, timeout=60)
    assert proc.returncode == 1, proc.stderr
    # ag submit's final words: the reason, then the failing rank's last lines (escaped).
    assert "task 1 exited with code 3" in proc.stderr, proc.stderr
    assert "Last lines of task 1 (attempt 0" in proc.stderr, proc.stderr
    assert_last_fifty(proc.stderr)
    assert "\x1b" not in proc.stderr and "bad \\x1b[2J escape" in proc.stderr, proc.stderr

    status, job = cluster.api("GET", f"/api/jobs/{job_id}")
    assert status == 200 and job["state"] == "FAILED", job
    assert job["message"] == "task 1 exited with code 3", job  # one line, for lists
    failure = job["failure"]
    assert failure["task_index"] == 1 and failure["attempt"] == 0, failure
    assert failure["reason"] == "exited with code 3", failure
    lines = failure["last_lines"].splitlines()
    assert len(lines) == 50 and lines[-1] == "ValueError: bad shape", lines
    assert lines[0] == "err line 33", lines
    assert_last_fifty(failure["last_lines"])

    out = cluster.ag("status", job_id).stdout
    assert "Last lines of task 1" in out, out
    # Under the reason, before the rest of the record (which shows the entrypoint).
    assert_last_fifty(out.split("Last lines of task 1", 1)[1].split("  Owner:", 1)[0])

    client = ag.Client(cluster.address, token=cluster.token)
    handle = client.get_job(job_id)
    message = handle.get_error_message()
    assert message.startswith("task 1 exited with code 3\n"), message
    assert_last_fifty(message)
    with pytest.raises(ag.AGJobFailedError) as raised:
        handle.wait(timeout=30)
    assert_last_fifty(str(raised.value))
    assert raised.value.info["failure"]["task_index"] == 1


def test_a_job_that_succeeds_or_is_stopped_has_no_failure(cluster):
    ok, _ = cluster.submit("--no-wait", "--", "echo fine")
    assert cluster.wait_state(ok, "SUCCEEDED")["failure"] is None
    stopped, _ = cluster.submit("--no-wait", "--", "echo started; sleep 60")
    cluster.wait_state(stopped, "RUNNING")
    cluster.ag("stop-job", stopped)
    job = cluster.wait_state(stopped, "STOPPED")
    assert job["failure"] is None and "Last lines" not in cluster.ag("status", stopped).stdout


def test_a_viewer_sees_why_a_job_failed_but_not_its_output(cluster):
    job_id, proc = cluster.submit("-n", 2, "--", FAILING, timeout=60)
    assert proc.returncode == 1
    viewer = cluster.ag_json("user", "add", "vera", "--role", "viewer")["token"]
    status, job = cluster.api("GET", f"/api/jobs/{job_id}", token=viewer)
    assert status == 200 and job["failure"]["task_index"] == 1, job
    assert "last_lines" not in job["failure"], job
    assert all("last_lines" not in a for a in job["attempts"]), job
    assert "err line 80" not in str(job)


# ---- what a job waits for, and jobs that could never run ----------------------------------

def job_count(cluster):
    return len(cluster.jobs())


def test_a_job_no_node_could_ever_run_is_refused_at_submit_with_the_reason(cluster):
    before = job_count(cluster)
    proc = cluster.ag("submit", "--num-gpus", 2, "--", "true", check=False)
    assert proc.returncode != 0, proc
    assert "no node of this cluster could ever run this job: needs 2 GPUs per task; largest node has 0" in proc.stderr
    assert "--allow-unschedulable" in proc.stderr, proc.stderr
    # Two workers of 2 CPUs hold at most two 2-CPU tasks at once.
    proc = cluster.ag("submit", "-n", 3, "--num-cpus", 2, "--", "true", check=False)
    assert proc.returncode != 0 and "the cluster can hold at most 2 such tasks" in proc.stderr, proc.stderr
    status, body = cluster.api("POST", "/api/jobs", {"entrypoint": "true", "task_options": {"memory": 1 << 50}})
    assert status == 400 and "memory per task; largest node has" in body["error"], body
    # A batch is all or none, and says which job could not run.
    status, body = cluster.api("POST", "/api/jobs/batch", {"jobs": [{"entrypoint": "true"},
                                                                     {"entrypoint": "true", "num_workers": 9,
                                                                      "task_options": {"num_cpus": 2}}]})
    assert status == 400 and body["error"].startswith("jobs[1]: no node") and "no job was submitted" in body["error"]
    client = ag.Client(cluster.address, token=cluster.token)
    with pytest.raises(ag.AGValidationError, match="could ever run"):
        client.submit_job("true", task_options={"num_gpus": 1})
    assert job_count(cluster) == before  # nothing was kept

    # Asked to queue it anyway (nodes still to join): PENDING with the reason.
    job_id, _ = cluster.submit("--num-gpus", 2, "--allow-unschedulable", "--no-wait", "--", "true")
    job = cluster.job(job_id)
    assert job["state"] == "PENDING" and job["pending_kind"] == "infeasible", job
    assert "needs 2 GPUs per task" in job["message"], job
    queued = client.submit_job("true", task_options={"num_gpus": 1}, allow_unschedulable=True)
    assert queued.status() == "PENDING"
    cluster.ag("stop-job", job_id)
    cluster.ag("stop-job", queued.job_id)


class StderrLines:
    """A process's stderr lines as they come, read on a thread of its own."""

    def __init__(self, proc):
        self.lines = []
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc):
        for line in proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def matching(self, text):
        return [line for line in self.lines if text in line]


def test_ag_submit_says_why_a_job_waits_and_again_when_the_reason_changes(cluster):
    # One worker's CPUs taken, and a gang queued that needs both workers: the other
    # worker's CPUs are kept for it, so a 1-CPU job waits behind it.
    holder, _ = cluster.submit("--num-cpus", 2, "--no-wait", "--", "sleep 60")
    cluster.wait_state(holder, "RUNNING")
    ahead, _ = cluster.submit("-n", 2, "--num-cpus", 2, "--placement", "spread", "--no-wait", "--", "sleep 60")
    proc = subprocess.Popen([AG_BIN, "submit", "--", "echo placed at last"], env=cluster.env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        err = StderrLines(proc)
        wait_until(lambda: err.matching("Pending: waiting behind job " + ahead), 15,
                   message=f"the reason it waits behind {ahead}")
        # The gang ahead runs once the holder is gone: now nothing is free at all.
        cluster.ag("stop-job", holder)
        cluster.wait_state(ahead, "RUNNING")
        wait_until(lambda: err.matching("Pending: waiting for resources"), 15, message="the new reason")
        cluster.ag("stop-job", ahead)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err.thread.join(timeout=5)
    assert proc.returncode == 0, err.lines
    assert "placed at last" in out
    # Each reason once, in the order they came.
    pending = [line for line in err.lines if line.startswith("Pending: ")]
    assert len(pending) == 2 and "waiting behind" in pending[0] and "waiting for resources" in pending[1], err.lines


def test_a_job_placed_at_once_prints_no_pending_line(cluster):
    job_id, proc = cluster.submit("--", "echo quick")
    assert proc.returncode == 0 and "quick" in proc.stdout
    assert "Pending:" not in proc.stderr, proc.stderr


# ---- submission ids -------------------------------------------------------------------------

def test_a_submission_id_names_one_spec_and_works_as_the_jobs_id(cluster):
    status, first = cluster.api("POST", "/api/jobs", {"entrypoint": "echo one", "submission_id": "nightly-42"})
    assert status == 201, first
    job_id = first["job_id"]
    cluster.job_ids.add(job_id)
    status, again = cluster.api("POST", "/api/jobs", {"entrypoint": "echo one", "submission_id": "nightly-42"})
    assert status == 201 and again["job_id"] == job_id, again
    before = job_count(cluster)
    status, body = cluster.api("POST", "/api/jobs", {"entrypoint": "echo two", "submission_id": "nightly-42"})
    assert status == 409, body
    assert f'submission_id "nightly-42" was already used for job {job_id}' in body["error"], body
    assert job_count(cluster) == before

    # The id is an alias wherever a job id goes.
    assert cluster.wait_state("nightly-42", "SUCCEEDED")["job_id"] == job_id
    assert job_id in cluster.ag("status", "nightly-42").stdout
    assert cluster.ag("logs", "nightly-42", "--task-index", 0).stdout == "one\n"
    client = ag.Client(cluster.address, token=cluster.token)
    assert client.get_job("nightly-42").job_id == job_id
    with pytest.raises(ag.AGConflictError, match=job_id):
        client.submit_job("echo three", submission_id="nightly-42")
    # Only for the user who chose it: another user's alias is not theirs to find.
    other = cluster.ag_json("user", "add", "omar")["token"]
    status, body = cluster.api("GET", "/api/jobs/nightly-42", token=other)
    assert status == 404, body


# ---- retry policy -----------------------------------------------------------------------------

def test_retries_wait_a_growing_delay_and_say_when_the_next_attempt_starts(cluster):
    job_id, _ = cluster.submit("--max-retries", 2, "--retry-delay", 1, "--no-wait", "--",
                               "echo attempt $AG_ATTEMPT; exit 3")
    waiting = wait_until(lambda: (lambda j: j if j["state"] == "PENDING" and j["num_attempts"] == 1 else None)(
        cluster.job(job_id)), 15, message="the first retry's wait")
    assert "retrying after: task 0 exited with code 3; attempt 1 of 3 starts in 1s" == waiting["message"], waiting
    job = cluster.wait_state(job_id, "FAILED", timeout=30)
    assert job["num_attempts"] == 3 and job["message"] == "task 0 exited with code 3 (after 3 attempts)", job
    # Attempt 1 started no sooner than 1 s after attempt 0 ended, attempt 2 no sooner
    # than 2 s after attempt 1 (the head's own times).
    attempts = job["attempts"]
    assert attempts[1]["started_ms"] - attempts[0]["finished_ms"] >= 1000, attempts
    assert attempts[2]["started_ms"] - attempts[1]["finished_ms"] >= 2000, attempts


def test_retry_on_chooses_which_failures_are_retried(cluster):
    not_lost, _ = cluster.submit("--max-retries", 2, "--retry-on", "node-lost", "--no-wait", "--", "exit 3")
    listed, _ = cluster.submit("--max-retries", 1, "--retry-delay", 0, "--retry-on", "3,137", "--no-wait", "--",
                               "exit 3")
    unlisted, _ = cluster.submit("--max-retries", 1, "--retry-delay", 0, "--retry-on", "3,137", "--no-wait", "--",
                                 "exit 1")
    job = cluster.wait_state(not_lost, "FAILED")
    assert job["num_attempts"] == 1, job
    assert job["message"] == "task 0 exited with code 3 (not retried: retry_on is node_lost and no node was lost)"
    assert cluster.wait_state(listed, "FAILED")["num_attempts"] == 2
    job = cluster.wait_state(unlisted, "FAILED")
    assert job["num_attempts"] == 1 and "not retried: retry_on lists exit codes 3, 137" in job["message"], job
    assert job["spec"]["retry_on"] == [3, 137] and job["spec"]["retry_delay"] == 0
    # The SDK takes the same policy.
    client = ag.Client(cluster.address, token=cluster.token)
    sdk_job = client.submit_job("exit 3", max_retries=1, retry_delay=0, retry_on=[3])
    with pytest.raises(ag.AGJobFailedError, match="after 2 attempts"):
        sdk_job.wait(timeout=30)


@pytest.mark.parametrize("flags, expected", [
    (["--retry-on", "sometimes"], "--retry-on takes any, node-lost or exit codes like 3,137; got 'sometimes'"),
    (["--retry-on", "3,x"], "--retry-on takes any, node-lost or exit codes like 3,137"),
    (["--retry-on", "0"], "retry_on[0]"),
    (["--retry-delay", "-1"], "--retry-delay"),
    (["--retry-delay", "700"], "--retry-delay"),
])
def test_a_bad_retry_policy_is_refused_by_the_cli(head_only, flags, expected):
    before = head_only.jobs()
    proc = head_only.ag("submit", *flags, "--", "true", check=False)
    assert proc.returncode != 0 and expected in proc.stderr, proc.stderr
    assert head_only.jobs() == before


@pytest.mark.parametrize("body, expected", [
    ({"retry_on": "often"}, 'must be "any", "node_lost" or a list of exit codes'),
    ({"retry_on": [300]}, "retry_on[0]"),
    ({"retry_on": []}, "must hold 1 to 64"),
    ({"retry_delay": -1}, "retry_delay"),
    ({"retry_delay": "3s"}, "retry_delay"),
])
def test_a_bad_retry_policy_is_refused_by_the_api(head_only, body, expected):
    before = head_only.jobs()
    status, answer = head_only.api("POST", "/api/jobs", dict(body, entrypoint="true"))
    assert status == 400 and expected in answer["error"], answer
    assert head_only.jobs() == before


# ---- logs as lines: all ranks, tail, since, timestamps ----------------------------------------

# Each rank prints three lines a second apart: the head receives them in rounds.
ROUNDS = 'for i in 1 2 3; do echo "line $i from $RANK"; sleep 1; done'


def test_ag_logs_interleaves_every_rank_as_received_with_rank_prefixes(cluster):
    job_id, _ = cluster.submit("-n", 2, "--placement", "spread", "--no-wait", "--", ROUNDS)
    assert cluster.wait_state(job_id, "SUCCEEDED", timeout=30)
    lines = cluster.ag("logs", job_id).stdout.splitlines()
    assert sorted(lines) == sorted(f"[rank {r}] line {i} from {r}" for r in (0, 1) for i in (1, 2, 3)), lines
    # Each rank's lines keep their order within the merge.
    for r in (0, 1):
        assert [line for line in lines if line.startswith(f"[rank {r}]")] == [
            f"[rank {r}] line {i} from {r}" for i in (1, 2, 3)], lines

    assert sorted(cluster.ag("logs", job_id, "--tail", 2).stdout.splitlines()) == [
        "[rank 0] line 3 from 0", "[rank 1] line 3 from 1"]
    # One rank: no prefix; with --tail its last lines only.
    assert cluster.ag("logs", job_id, "--task-index", 1, "--tail", 1).stdout == "line 3 from 1\n"
    stamped = cluster.ag("logs", job_id, "--timestamps").stdout.splitlines()
    stamps = [line.split(" ", 1)[0] for line in stamped]
    assert len(stamps) == 6 and all(s.endswith("Z") and "T" in s for s in stamps), stamped
    assert stamps == sorted(stamps), stamped  # merged in the order the head received them
    assert [line.split(" ", 1)[1] for line in stamped] == lines
    assert len(cluster.ag("logs", job_id, "--since", "1h").stdout.splitlines()) == 6
    assert cluster.ag("logs", job_id, "--since", "2099-01-01T00:00:00", check=False).returncode == 2  # the future
    # From the second the last line arrived: a tail of the listing that holds it.
    last_second = stamped[-1].split(" ", 1)[0].rstrip("Z").split(".")[0]
    since = cluster.ag("logs", job_id, "--since", last_second).stdout.splitlines()
    assert since and since == lines[len(lines) - len(since):], (since, lines)


def test_a_single_task_job_prints_its_lines_without_a_prefix(cluster):
    job_id, _ = cluster.submit("--no-wait", "--", "printf 'a\\nb'")
    cluster.wait_state(job_id, "SUCCEEDED")
    assert cluster.ag("logs", job_id).stdout == "a\nb\n"
    assert cluster.ag("logs", job_id, "--task-index", 0).stdout == "a\nb"  # the bytes as written


def test_ag_submit_all_ranks_streams_every_rank(cluster):
    job_id, proc = cluster.submit("-n", 2, "--all-ranks", "--", "echo hello from $RANK")
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == ["[rank 0] hello from 0", "[rank 1] hello from 1"], proc.stdout


def test_sdk_get_logs_reads_every_rank_or_a_tail(cluster):
    client = ag.Client(cluster.address, token=cluster.token)
    job = client.submit_job(ROUNDS, num_workers=2, placement="spread")
    job.wait(timeout=30)
    every = job.get_logs().splitlines()
    assert len(every) == 6 and all(line.startswith("[rank ") for line in every), every
    assert job.get_logs(task_index=0) == "line 1 from 0\nline 2 from 0\nline 3 from 0\n"
    assert sorted(job.get_logs(tail=2).splitlines()) == ["[rank 0] line 3 from 0", "[rank 1] line 3 from 1"]
    assert job.get_logs(task_index=1, tail=1) == "line 3 from 1\n"
    assert job.get_logs(since=4102444800) == ""  # 2100-01-01
    stamped = job.get_logs(task_index=0, timestamps=True).splitlines()
    assert len(stamped) == 3 and stamped[0].endswith("Z line 1 from 0"), stamped


def test_bad_log_line_requests_are_refused(cluster):
    job_id, _ = cluster.submit("-n", 2, "--no-wait", "--", "echo x")
    cluster.wait_state(job_id, "SUCCEEDED")
    for query, expected in [("from=1", "'from' must list one byte offset per task (2)"),
                            ("from=1,x", "'from' must list one byte offset per task"),
                            ("tail=0", "'tail' must be a whole number between 1 and 1000000"),
                            ("since_ms=-5", "'since_ms'"),
                            ("task_index=2", "'task_index'")]:
        status, body = cluster.api("GET", f"/api/jobs/{job_id}/lines?{query}")
        assert status == 400 and expected in body["error"], (query, body)
    proc = cluster.ag("logs", job_id, "--since", "yesterday", check=False)
    assert proc.returncode == 2 and "--since takes a time ago like 90s" in proc.stderr, proc.stderr
    # With -o json every usage error is JSON on stdout too.
    proc = cluster.ag("-o", "json", "logs", job_id, "--since", "yesterday", check=False)
    assert proc.returncode == 2 and "--since takes a time ago like 90s" in json.loads(proc.stdout)["error"]
    proc = cluster.ag("-o", "json", "logs", check=False)
    assert proc.returncode == 2 and json.loads(proc.stdout) == {"error": "give a job id (ag logs JOB_ID) or --head"}
    proc = cluster.ag("logs", job_id, "--tail", 0, check=False)
    assert proc.returncode != 0 and "--tail" in proc.stderr, proc.stderr


# ---- deleting finished jobs, and retention ------------------------------------------------------

def package_exists(cluster, job):
    hash_ = job["spec"]["runtime_env"]["working_dir"].split(":")[-1]
    status, _ = cluster.api("HEAD", f"/api/packages/{hash_}")
    return status == 200


def test_delete_job_removes_a_finished_job_for_good(cluster, tmp_path):
    import os
    import signal
    from conftest import pid_alive
    code = tmp_path / "code"
    code.mkdir()
    (code / "main.sh").write_text("echo from the package\n")
    gone, _ = cluster.submit("--working-dir", code, "--no-wait", "--", "sh main.sh")
    job = cluster.wait_state(gone, "SUCCEEDED")
    # A second folder, and two jobs sharing a third: deleting one keeps their package.
    shared_dir = tmp_path / "shared"
    shared_dir.mkdir()
    (shared_dir / "x.sh").write_text("echo shared\n")
    first, _ = cluster.submit("--working-dir", shared_dir, "--no-wait", "--", "sh x.sh")
    second, _ = cluster.submit("--working-dir", shared_dir, "--no-wait", "--", "sh x.sh")
    running, _ = cluster.submit("--no-wait", "--", "echo busy; sleep 60")
    cluster.wait_state(first, "SUCCEEDED")
    shared = cluster.wait_state(second, "SUCCEEDED")
    cluster.wait_state(running, "RUNNING")
    assert package_exists(cluster, job) and (cluster.head_data_dir / "logs" / gone).is_dir()

    out = cluster.ag("delete-job", gone).stdout
    assert f"Deleted job {gone} and its working_dir package" in out, out
    status, body = cluster.api("GET", f"/api/jobs/{gone}")
    assert status == 404, body
    assert gone not in {j["job_id"] for j in cluster.jobs()}
    assert not package_exists(cluster, job)
    wait_until(lambda: not (cluster.head_data_dir / "logs" / gone).exists(), 10, message="its logs removed")
    status, body = cluster.api("DELETE", f"/api/jobs/{first}")
    assert status == 200 and body["package_removed"] is False, body
    assert package_exists(cluster, shared)  # the second job still has it

    # A running job is refused and keeps everything.
    proc = cluster.ag("delete-job", running, check=False)
    assert proc.returncode == 1 and "is RUNNING; only a finished job can be deleted: stop it first" in proc.stderr
    assert cluster.job(running)["state"] == "RUNNING"
    assert "busy" in cluster.ag("logs", running, "--task-index", 0).stdout
    # Unknown ids, and another user's job.
    assert cluster.ag("delete-job", "job_000000000000", check=False).returncode == 1
    other = cluster.ag_json("user", "add", "dora")["token"]
    status, body = cluster.api("DELETE", f"/api/jobs/{second}", token=other)
    assert status == 403 and "delete it" in body["error"], body

    # Durable: a head killed and started again does not bring it back.
    head_pid = cluster.head_pid()
    os.kill(head_pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head_pid), 10, message="the head to die")
    cluster.start_head()
    listed = {j["job_id"] for j in cluster.jobs()}
    assert gone not in listed and first not in listed and {second, running} <= listed
    cluster.ag("stop-job", running)


def test_sdk_delete(cluster):
    client = ag.Client(cluster.address, token=cluster.token)
    live = client.submit_job("sleep 60")
    with pytest.raises(ag.AGConflictError, match="stop it first"):
        live.delete()
    live.stop()
    with pytest.raises(ag.AGJobFailedError):
        live.wait(timeout=30)
    assert live.delete()["deleted"] is True
    with pytest.raises(ag.AGNotFoundError):
        client.get_job(live.job_id)


def test_finished_jobs_past_the_retention_are_deleted(cluster_factory):
    c = cluster_factory("kept", head_options=["--job-retention", "2s"])
    done, _ = c.submit("--no-wait", "--", "echo short-lived")
    live, _ = c.submit("--no-wait", "--", "sleep 30")
    c.wait_state(done, "SUCCEEDED")
    wait_until(lambda: done not in {j["job_id"] for j in c.jobs()}, 20, message="the finished job deleted")
    assert c.job(live)["state"] == "RUNNING"  # running jobs are never deleted
    c.ag("stop-job", live)


def test_a_bad_retention_is_refused_at_start(tmp_path):
    from conftest import Cluster
    c = Cluster(tmp_path / "bad", head_options=["--job-retention", "soon"])
    proc = c.start_head(check=False)
    assert proc.returncode == 2 and "--job-retention: 'soon' is not a duration" in proc.stderr, proc.stderr
    assert not c.head_started


def test_a_log_past_the_cap_keeps_its_newest_part_and_says_what_was_dropped(cluster_factory):
    c = cluster_factory("capped", head_options=["--max-task-log-mb", "1"])
    # About 3.4 MiB of numbered lines.
    job_id, _ = c.submit("--no-wait", "--", "seq 1 500000")
    c.wait_state(job_id, "SUCCEEDED", timeout=60)
    status, headers, _ = c.api_full("GET", f"/api/jobs/{job_id}/logs?task_index=0&max_bytes=1")
    size = int(headers["X-AG-Log-Size"])
    assert size == sum(len(f"{i}\n") for i in range(1, 500001))  # every byte was received
    log_file = c.head_data_dir / "logs" / job_id / "0.0.log"
    assert log_file.stat().st_blocks * 512 <= (1 << 20) + (256 << 10), log_file.stat()  # only the kept part on disk
    out = c.ag("logs", job_id, "--task-index", 0).stdout
    first, rest = out.split("\n", 1)
    assert first.startswith("[... ") and "bytes of this task's output were dropped" in first, first
    assert "--max-task-log-mb" in first and rest.endswith("499999\n500000\n")
    assert len(rest) <= 1 << 20
    lines = c.ag("logs", job_id).stdout.splitlines()
    assert "were dropped" in lines[0] and lines[1].isdigit() and lines[-1] == "500000", lines[:3]
    assert c.ag("logs", job_id, "--tail", 2).stdout == "499999\n500000\n"


# ---- draining nodes -----------------------------------------------------------------------------

def node_id_at(cluster, address):
    return [n["node_id"] for n in cluster.nodes() if n["address"] == address][0]


def test_a_drained_node_takes_no_new_tasks_keeps_its_running_ones_and_resumes(cluster):
    import os
    import signal
    from conftest import pid_alive
    a = node_id_at(cluster, "127.0.0.2")
    # A task already running on the node to be drained.
    running, _ = cluster.submit("-n", 2, "--placement", "spread", "--num-cpus", 1, "--no-wait", "--", "sleep 60")
    cluster.wait_state(running, "RUNNING")
    out = cluster.ag("drain", a).stdout
    assert f"Node {a} is draining" in out, out
    assert [n for n in cluster.nodes() if n["node_id"] == a][0]["draining"] is True
    assert f"{a}" in cluster.ag("list-nodes").stdout and "ALIVE, draining" in cluster.ag("list-nodes").stdout
    # One task goes to the other node; a gang that needs both nodes waits, saying why.
    single, _ = cluster.submit("--num-cpus", 1, "--no-wait", "--", "echo one")
    waiting, _ = cluster.submit("-n", 2, "--placement", "spread", "--num-cpus", 1, "--no-wait", "--", "echo both")
    job = wait_until(lambda: (lambda j: j if "draining" in j["message"] else None)(cluster.job(waiting)), 10,
                     message="a reason naming the drained node")
    assert job["state"] == "PENDING" and "1 node(s) draining take no new tasks (`ag resume NODE`)" in job["message"]
    single_job = cluster.wait_state(single, "SUCCEEDED")
    assert single_job["attempts"][0]["tasks"][0]["node_address"] == "127.0.0.3"
    assert cluster.job(running)["state"] == "RUNNING"  # the drained node's task goes on

    # Drained across a head restart.
    head_pid = cluster.head_pid()
    os.kill(head_pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head_pid), 10, message="the head to die")
    cluster.start_head()
    wait_until(lambda: any(n["node_id"] == a and n["state"] == "ALIVE" for n in cluster.nodes()), 20,
               message="the worker back")
    assert [n for n in cluster.nodes() if n["node_id"] == a][0]["draining"] is True
    assert cluster.job(waiting)["state"] == "PENDING"

    cluster.ag("stop-job", running)
    assert "takes new tasks again" in cluster.ag("resume", a).stdout
    assert cluster.wait_state(waiting, "SUCCEEDED", timeout=20)


def test_draining_is_for_admins_and_known_nodes(cluster):
    a = node_id_at(cluster, "127.0.0.2")
    user = cluster.ag_json("user", "add", "nils")["token"]
    status, body = cluster.api("POST", f"/api/nodes/{a}/drain", token=user)
    assert status == 403 and "admin" in body["error"], body
    proc = cluster.ag("drain", "node_000000000000", check=False)
    assert proc.returncode == 1 and "no node with id 'node_000000000000'" in proc.stderr, proc.stderr
    status, body = cluster.api("GET", f"/api/nodes/{a}/drain")
    assert status == 405, body
    assert all(n["draining"] is False for n in cluster.nodes())


# ---- node labels and job constraints ------------------------------------------------------------

def test_jobs_constrained_to_labels_run_only_on_nodes_that_have_them(cluster_factory):
    c = cluster_factory("labels", workers=())
    c.start_worker("127.0.0.2", options=["--label", "gpu=a100", "--label", "zone=b"])
    c.start_worker("127.0.0.3", options=["--label", "gpu=h100"])
    nodes = {n["address"]: n for n in c.nodes()}
    assert nodes["127.0.0.2"]["labels"] == {"gpu": "a100", "zone": "b"}, nodes
    assert "gpu=a100,zone=b" in c.ag("list-nodes").stdout
    job_id, _ = c.submit("-n", 2, "--num-cpus", 1, "--constraint", "gpu=a100", "--no-wait", "--", "echo $AG_NODE_IP")
    job = c.wait_state(job_id, "SUCCEEDED")
    assert {t["node_address"] for t in job["attempts"][0]["tasks"]} == {"127.0.0.2"}, job
    assert job["spec"]["constraints"] == {"gpu": "a100"}
    # No node has it: refused at once, or queued with the reason when asked.
    proc = c.ag("submit", "--constraint", "gpu=b200", "--", "true", check=False)
    assert proc.returncode == 1 and "no alive node has the label(s) gpu=b200" in proc.stderr, proc.stderr
    queued, _ = c.submit("--constraint", "gpu=b200", "--allow-unschedulable", "--no-wait", "--", "true")
    pending = c.job(queued)
    assert pending["state"] == "PENDING" and "gpu=b200" in pending["message"], pending
    c.ag("stop-job", queued)
    client = ag.Client(c.address, token=c.token)
    sdk_job = client.submit_job("echo sdk", constraints={"gpu": "h100"})
    sdk_job.wait(timeout=30)
    assert sdk_job.info()["attempts"][0]["tasks"][0]["node_address"] == "127.0.0.3"


@pytest.mark.parametrize("label, expected", [
    ("gpu", "--label gpu: it must be KEY=VALUE"),
    ("=a100", "the key must be 1 to 63 letters"),
    ("gpu=a 100", "the value must be up to 63 letters"),
])
def test_a_bad_node_label_is_refused_at_start(cluster_factory, label, expected):
    c = cluster_factory("badlabel", workers=())
    proc = c.start_worker("127.0.0.2", options=["--label", label], check=False)
    assert proc.returncode == 2 and expected in proc.stderr, proc.stderr
    assert c.nodes() == []


def test_bad_constraints_are_refused(head_only):
    before = head_only.jobs()
    proc = head_only.ag("submit", "--constraint", "gpu", "--", "true", check=False)
    assert proc.returncode == 2 and "--constraint takes KEY=VALUE, got 'gpu'" in proc.stderr, proc.stderr
    for constraints, expected in [({"gpu": 1}, "constraints"), ({"bad key": "x"}, "the key must be"),
                                  ("a100", "constraints")]:
        status, body = head_only.api("POST", "/api/jobs", {"entrypoint": "true", "constraints": constraints})
        assert status == 400 and expected in body["error"], body
    assert head_only.jobs() == before


# ---- CLI: hints and JSON ------------------------------------------------------------------------

@pytest.mark.parametrize("args, expected", [
    (["sumbit", "--", "true"], "unknown command 'sumbit': did you mean `ag submit`?"),
    (["list-jobz"], "did you mean `ag list-jobs`?"),
    (["submit", "--num-worker", "2", "--", "true"], "unknown option '--num-worker': did you mean `--num-workers`?"),
    (["submit", "-n", "2", "python", "train.py", "--epochs", "3"], "the task's command goes after `--`"),
])
def test_a_mistyped_command_line_gets_a_hint(head_only, args, expected):
    before = head_only.jobs()
    proc = head_only.ag(*args, check=False)
    assert proc.returncode == 2 and expected in proc.stderr, proc.stderr
    assert head_only.jobs() == before


def test_json_output_is_json_on_stdout_errors_included(cluster):
    import json
    proc = cluster.ag("-o", "json", "status", "job_000000000000", check=False)
    assert proc.returncode == 1
    assert "no job with id" in json.loads(proc.stdout)["error"]
    proc = cluster.ag("-o", "json", "sumbit", check=False)
    assert proc.returncode == 2 and "did you mean `ag submit`" in json.loads(proc.stdout)["error"]
    # A submit that waits streams the task's output to stderr, the job's JSON to stdout.
    proc = cluster.ag("-o", "json", "submit", "--", "echo streamed", check=False)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)
    assert job["state"] == "SUCCEEDED" and "streamed" in proc.stderr
    cluster.job_ids.add(job["job_id"])


# ---- versions, and servers that are not a head -------------------------------------------------

def test_version_is_the_same_from_the_cli_the_api_and_status(cluster):
    line = cluster.ag("--version").stdout.strip()
    assert line.startswith("AetherGrid ") and "(commit " in line, line
    status, info = cluster.api("GET", "/api/version")
    assert status == 200 and line == (f"AetherGrid {info['version']} (commit {info['commit']}, {info['build_type']}, "
                                      f"worker protocol {info['worker_protocol']})")
    assert 1 <= info["oldest_worker_protocol"] <= info["worker_protocol"]
    assert line in cluster.ag("status").stdout


def test_a_server_that_is_not_a_head_is_named_not_printed(head_only):
    import http.server
    import threading

    class Foreign(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html><body><h1>Not Found</h1></body></html>")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Foreign)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        proc = head_only.ag("--address", f"127.0.0.1:{port}", "--token", "x", "list-jobs", check=False)
        assert proc.returncode == 1, proc
        assert f"127.0.0.1:{port} answered but is not an AetherGrid head (HTTP 404)" in proc.stderr, proc.stderr
        assert "<html>" not in proc.stderr + proc.stdout
    finally:
        server.shutdown()
        thread.join(timeout=5)


def test_a_second_agent_for_the_same_data_dir_is_refused_naming_the_first(cluster):
    first_pid = cluster.worker_pid("127.0.0.2")
    proc = cluster.ag("start-worker", "--head-node", cluster.address, "--node-ip-address", "127.0.0.4",
                      "--data-dir", cluster.worker_data_dir("127.0.0.2"), check=False)
    assert proc.returncode != 0, proc
    assert f"another worker agent (pid {first_pid}) already runs with data dir" in proc.stderr, proc.stderr
    # The first goes on, and nothing joined as 127.0.0.4.
    assert {n["address"] for n in cluster.nodes()} == {"127.0.0.2", "127.0.0.3"}
    job_id, _ = cluster.submit("--no-wait", "--", "true")
    assert cluster.wait_state(job_id, "SUCCEEDED")


def test_ag_stop_reports_only_what_it_stopped(cluster_factory):
    import os
    import signal
    from conftest import pid_alive
    c = cluster_factory("stopping")
    dead = c.worker_pid("127.0.0.3")
    os.kill(dead, signal.SIGKILL)
    wait_until(lambda: not pid_alive(dead), 10, message="the worker to die")
    out = c.ag("stop").stdout
    assert f"worker-127.0.0.3 (pid {dead}) was not running; its record is removed" in out, out
    assert f"stopped worker-127.0.0.3" not in out, out
    assert "stopped head" in out and "stopped worker-127.0.0.2" in out, out
    assert "no AetherGrid daemons started from this machine were running" in c.ag("stop").stdout


def test_start_worker_fails_with_the_reason_when_no_head_answers(cluster_factory):
    from conftest import free_ports
    lonely = cluster_factory("nohead", start_head=False)
    (closed_port,) = free_ports(1)
    proc = lonely.start_worker("127.0.0.9", num_cpus=1, check=False, token="some-token",
                               head=f"127.0.0.1:{closed_port}")
    assert proc.returncode == 1, proc
    assert "cannot reach head at" in proc.stderr and "--wait-for-head" in proc.stderr, proc.stderr
    assert lonely.worker_pid("127.0.0.9") is None, lonely.daemon_pids()  # nothing left running


def test_a_loopback_worker_joining_a_head_elsewhere_is_warned(cluster_factory):
    import subprocess as sp
    addresses = [a for a in sp.run(["hostname", "-I"], capture_output=True, text=True, timeout=5).stdout.split()
                 if "." in a and not a.startswith("127.")]
    if not addresses:
        pytest.skip("this machine has no non-loopback IPv4 address to stand for another machine")
    from conftest import free_ports
    lonely = cluster_factory("elsewhere", start_head=False)
    (port,) = free_ports(1)  # nothing listens there: the worker then fails, after the warning
    proc = lonely.start_worker("127.0.0.9", check=False, token="some-token", head=f"{addresses[0]}:{port}",
                               options=["--insecure"])
    assert "WARNING: --node-ip-address 127.0.0.9 is a loopback address" in proc.stderr, proc.stderr
    assert "Pass this machine's address" in proc.stderr
    # A cluster on this machine gets no such warning.
    local = cluster_factory("local-only")
    assert "WARNING: --node-ip-address" not in local.start_worker("127.0.0.4", check=False).stderr


def _outgoing_ipv4():
    """The address the head should name when it listens on every interface (the same
    choice as net::outgoing_address: the default route's source, else an interface)."""
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            return s.getsockname()[0]
        except OSError:
            return None


def test_a_head_on_every_interface_names_its_advertised_address_in_the_join_line(cluster_factory):
    c = cluster_factory("bind-advertise", workers=(), start_head=False,
                        head_options=["--bind", "0.0.0.0", "--advertise-address", "127.0.0.9"])
    out = c.start_head().stdout
    assert f"ag start-worker --head-node 127.0.0.9:{c.port} " in out, out
    assert f"Dashboard and REST API: https://127.0.0.9:{c.dashboard_port}" in out, out
    assert "0.0.0.0" not in out, out
    # It listens on every interface: a worker joins through the advertised address, and
    # the CLI on this machine still finds the head by itself.
    c.start_worker("127.0.0.2", head=f"127.0.0.9:{c.port}")
    wait_until(lambda: len(c.ag_json("list-nodes")["nodes"]) == 1, 15, message="the worker to join")
    job_id, proc = c.submit("--", "echo joined-through-the-advertised-address")
    assert proc.returncode == 0 and "joined-through-the-advertised-address" in proc.stdout, proc


def test_a_head_bound_to_every_interface_without_an_advertised_address_names_the_outgoing_one(cluster_factory):
    import socket
    c = cluster_factory("bind-outgoing", workers=(), start_head=False, head_options=["--bind", "0.0.0.0"])
    out = c.start_head().stdout
    line = next(l for l in out.splitlines() if "ag start-worker --head-node" in l)
    host = line.split("--head-node ")[1].split()[0].rsplit(":", 1)[0]
    assert host not in ("0.0.0.0", "127.0.0.1"), line
    expected = _outgoing_ipv4()
    if expected:
        assert host == expected, (host, expected)
    with socket.create_connection((host, c.port), timeout=5):
        pass  # the head answers there
    assert c.ag_json("list-nodes")["nodes"] == []  # and on loopback, for this machine's CLI


@pytest.mark.parametrize("bind, expected", [
    ("nonsense", "'nonsense' is not an IP address; give one of this machine's addresses, or 0.0.0.0"),
    ("10.255.255.254", "it is not an address of this machine"),
])
def test_a_bind_address_the_head_cannot_listen_on_is_refused_with_what_to_do(cluster_factory, bind, expected):
    c = cluster_factory("bad-bind", workers=(), start_head=False, head_options=["--bind", bind])
    proc = c.start_head(check=False)
    assert proc.returncode != 0, proc
    assert expected in proc.stderr, proc.stderr
    from conftest import pid_alive
    pid = c.head_pid()
    assert pid is None or not pid_alive(pid), "no head may be left running"


def test_a_tasks_whole_log_downloads_as_a_file_past_the_page_size(cluster):
    # 6 MiB of numbered lines: more than one page of /logs (4 MiB) holds.
    job_id, proc = cluster.submit("--", "seq 1 800000")
    assert proc.returncode == 0, proc.stderr
    status, headers, text = cluster.api_full("GET", f"/api/jobs/{job_id}/logs?task_index=0&download=1", timeout=60)
    assert status == 200, text
    assert headers["Content-Disposition"] == f'attachment; filename="{job_id}-attempt0-rank0.log"'
    numbers = text.split()
    assert len(numbers) == 800000 and numbers[0] == "1" and numbers[-1] == "800000"
    assert headers["X-AG-Dropped-Bytes"] == "0"
    # Bad input: a rank the job does not have.
    status, _, body = cluster.api_full("GET", f"/api/jobs/{job_id}/logs?task_index=3&download=1")
    assert status == 400 and "task_index" in body["error"], body


@pytest.mark.parametrize("flags, expected", [
    (["-n", "abc"], "--num-workers: 'abc' is not a whole number; give one from 1 to 4096"),
    (["-n", "0"], "--num-workers: 0 is out of range; give a whole number from 1 to 4096"),
    (["--num-cpus", "lots"], "--num-cpus: 'lots' is not a number; give one from 0 to 1024"),
])
def test_a_bad_number_says_what_is_wrong_and_submits_nothing(head_only, flags, expected):
    before = head_only.api("GET", "/api/jobs")[1]["total"]
    proc = head_only.ag("submit", *flags, "--", "true", check=False)
    assert proc.returncode == 2, proc
    assert f"error: {expected}" in proc.stderr, proc.stderr
    assert "goes after `--`" not in proc.stderr  # the command is after `--` already
    as_json = head_only.ag("-o", "json", "submit", *flags, "--", "true", check=False)
    assert json.loads(as_json.stdout) == {"error": expected}
    assert head_only.api("GET", "/api/jobs")[1]["total"] == before


def test_a_script_left_behind_gets_the_hint_to_send_the_folder(cluster, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('trained')\n")

    def submit(*args):
        return subprocess.run([AG_BIN, "submit", *args], cwd=project, env=cluster.env, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)

    failed = submit("--", "python3 train.py")
    assert failed.returncode == 1, failed
    assert ("hint: train.py is in this folder but not on the workers: add `--working-dir .` to send this "
            "folder with the job") in failed.stderr, failed.stderr
    sent = submit("--working-dir", ".", "--", "python3 train.py")
    assert sent.returncode == 0 and "trained" in sent.stdout, sent
    assert "hint:" not in sent.stderr


def _complete(line):
    """What bash completes for the last word of `line` with ag's completion loaded."""
    words = line.split(" ")
    script = (f'source <("{AG_BIN}" completion bash)\n'
              f'COMP_WORDS=({" ".join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n'
              '_ag; printf "%s\\n" "${COMPREPLY[@]}"\n')
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_shell_completion_knows_the_commands_and_each_ones_flags():
    assert "submit" in _complete("ag sub") and "status" in _complete("ag st")
    assert {"--num-workers", "--num-cpus", "--num-gpus"} <= set(_complete("ag submit --num"))
    assert "--address" in _complete("ag submit --addr")  # global flags too
    assert {"add", "list"} <= set(_complete("ag user "))
    assert _complete("ag submit -- pyth") == []  # the task's command: left to file names
    zsh = subprocess.run([AG_BIN, "completion", "zsh"], capture_output=True, text=True, timeout=30)
    assert zsh.returncode == 0 and "bashcompinit" in zsh.stdout and "complete -o default -F _ag ag" in zsh.stdout
    bad = subprocess.run([AG_BIN, "completion", "fish"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "no completion for shell 'fish'; use bash or zsh" in bad.stderr


def test_every_subcommands_help_lists_the_global_options():
    for command in ("submit", "logs", "list-jobs"):
        out = subprocess.run([AG_BIN, command, "--help"], capture_output=True, text=True, timeout=30).stdout
        assert "Global options (before or after the command):" in out and "--token-file FILE" in out, out


def test_a_running_jobs_cpu_and_memory_are_charted_from_its_tasks(cluster):
    # Two ranks, each busy on a core and holding ~64 MiB, for a few seconds.
    busy = ("python3 -c \"import time; b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096]); "
            "t = time.time()\nwhile time.time() - t < 12: pass\"")
    job_id, _ = cluster.submit("--no-wait", "-n", "2", "--", busy)

    def busy_sample():
        status, body = cluster.api("GET", f"/api/jobs/{job_id}/usage")
        assert status == 200, body
        assert body["interval_ms"] == 5000
        return next((s for s in body["samples"] if s["tasks"] == 2 and s["cpu_percent"] > 50
                     and s["memory_bytes"] > 2 * (60 << 20)), None)

    wait_until(busy_sample, 20, message="a usage sample with both ranks busy")
    cluster.wait_state(job_id, ("SUCCEEDED", "FAILED", "STOPPED"), timeout=30)
    # Bad input: another method, a job that does not exist.
    status, body = cluster.api("POST", f"/api/jobs/{job_id}/usage")
    assert status == 405 and "use GET" in body["error"]
    status, body = cluster.api("GET", "/api/jobs/job_nope/usage")
    assert status == 404


@pytest.mark.parametrize("args, expected", [
    (["config", "--ca-fingerprint", "sha256:" + "0" * 64], "give the head's --address HOST:PORT with --ca-fingerprint"),
    (["config", "--address", "host:notaport", "--ca-fingerprint", "sha256:" + "0" * 64], "--address: "),
    (["config", "--address", "127.0.0.1:1", "--ca-fingerprint", "nonsense"], "--ca-fingerprint: "),
])
def test_config_usage_errors_are_json_with_o_json(cluster_factory, args, expected):
    c = cluster_factory("config-errors", start_head=False)
    env = {"AG_CONFIG": str(c.root / "config.json")}
    proc = c.ag("-o", "json", *args, check=False, env=env)
    assert proc.returncode == 2, proc
    assert json.loads(proc.stdout)["error"].startswith(expected), proc.stdout
    assert not (c.root / "config.json").exists()  # nothing was saved
