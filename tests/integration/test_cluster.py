"""End-to-end tests of AetherGrid over real daemons: the `ag` CLI, the REST API, real
task processes and real PyTorch DDP (gloo on CPU).

Each test is bounded: CLI calls have subprocess timeouts, waits have deadlines.
"""
import json
import os
import signal
import time

import pytest

from conftest import (PYTHON, REPO, all_pids, free_ports, job_processes, pid_alive, proc_cmdline,
                      proc_ppid, processes_where, submitted_job_id, wait_until, zombie_children)


def parse_env_dump(text):
    """KEY=VALUE lines of `env` output as a dict."""
    env = {}
    for line in text.splitlines():
        if "=" in line:
            k, _, v = line.partition("=")
            env[k] = v
    return env


def task_log(cluster, job_id, task_index):
    return cluster.ag("logs", job_id, "--task-index", task_index, timeout=30).stdout


def first_attempt(job):
    assert job["attempts"], f"job has no attempts: {job}"
    return job["attempts"][0]


# ---- jobs that run ----------------------------------------------------------------------

def test_ddp_example_trains_across_two_nodes(cluster):
    train = REPO / "examples" / "train.py"
    job_id, proc = cluster.submit("-n", 2, "--placement", "spread", "--", PYTHON, train, timeout=120)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"

    # `ag submit` streams task 0 (rank 0) to stdout.
    out = proc.stdout
    assert "[Rank 0] Starting training" in out
    for epoch in range(5):
        assert f"Epoch {epoch}, Loss:" in out, out
    assert "[Rank 0] Training finished." in out

    log1 = task_log(cluster, job_id, 1)
    assert "[Rank 1] Starting training" in log1
    assert "[Rank 1] Training finished." in log1
    assert "Epoch" not in log1  # only rank 0 prints the loss

    job = cluster.job(job_id)
    assert job["state"] == "SUCCEEDED"
    attempt = first_attempt(job)
    tasks = sorted(attempt["tasks"], key=lambda t: t["task_index"])
    assert [t["state"] for t in tasks] == ["SUCCEEDED", "SUCCEEDED"]
    assert [t["exit_code"] for t in tasks] == [0, 0]
    # AG_MASTER_ADDR is task 0's node, as the job says and as the task itself saw it.
    assert attempt["master_addr"] == tasks[0]["node_address"]
    assert f"master tcp://{tasks[0]['node_address']}:{attempt['master_port']})" in out
    # spread: one task per node.
    assert tasks[0]["node_id"] != tasks[1]["node_id"]
    assert {t["node_address"] for t in tasks} == {"127.0.0.2", "127.0.0.3"}


def test_task_environment_is_consistent(cluster):
    job_id, _ = cluster.submit("-n", 2, "--no-wait", "--", "env")
    job = cluster.wait_state(job_id, ("SUCCEEDED", "FAILED", "STOPPED"), timeout=30)
    assert job["state"] == "SUCCEEDED", job
    attempt = first_attempt(job)
    tasks = {t["task_index"]: t for t in attempt["tasks"]}

    envs = {i: parse_env_dump(task_log(cluster, job_id, i)) for i in (0, 1)}
    for i, env in envs.items():
        assert env.get("AG_JOB_ID") == job_id
        assert env.get("AG_ATTEMPT") == "0"
        assert env.get("AG_TASK_INDEX") == str(i)
        assert env.get("RANK") == env.get("AG_TASK_INDEX")
        assert env.get("AG_WORKER_NUM") == "2"
        assert env.get("WORLD_SIZE") == "2"
        assert env.get("AG_MASTER_ADDR") == attempt["master_addr"] == tasks[0]["node_address"]
        assert env.get("MASTER_ADDR") == env.get("AG_MASTER_ADDR")
        assert env.get("AG_MASTER_PORT") == str(attempt["master_port"])
        assert env.get("MASTER_PORT") == env.get("AG_MASTER_PORT")
        assert "CUDA_VISIBLE_DEVICES" in env and env["CUDA_VISIBLE_DEVICES"] == ""
        assert env.get("AG_TASK_MARKER")
        # LOCAL_* follow the placement: tasks sharing this task's node.
        same_node = sorted(t["task_index"] for t in attempt["tasks"] if t["node_id"] == tasks[i]["node_id"])
        assert env.get("LOCAL_WORLD_SIZE") == str(len(same_node))
        assert env.get("LOCAL_RANK") == str(same_node.index(i))
    assert envs[0]["AG_TASK_MARKER"] != envs[1]["AG_TASK_MARKER"]


def threads_of(pid):
    return [int(t) for t in os.listdir(f"/proc/{pid}/task")]


def children_named(parent, name):
    def comm(pid):
        try:
            with open(f"/proc/{pid}/comm") as f:
                return f.read().strip()
        except OSError:
            return None
    return [pid for pid in all_pids() if proc_ppid(pid) == parent and comm(pid) == name]


def test_daemons_yield_to_tasks_and_what_runs_for_users_does_not(cluster):
    """The head, agents and supervisors run SCHED_BATCH (a wake-up of theirs does not
    preempt a task); tasks, their children and `ag exec` commands run SCHED_OTHER."""
    c = cluster
    job_id, _ = c.submit("-n", 2, "--placement", "spread", "--no-wait", "--", "sh", "-c", "sleep 120 & wait")
    c.wait_tasks_running(job_id, timeout=30)
    daemons = [c.head_pid()] + [c.worker_pid(ip) for ip in ("127.0.0.2", "127.0.0.3")]
    supervisors = [s for ip in ("127.0.0.2", "127.0.0.3") for s in children_named(c.worker_pid(ip), "ag-supervisor")]
    assert len(supervisors) == 2, supervisors
    for pid in daemons + supervisors:
        assert {os.sched_getscheduler(t) for t in threads_of(pid)} == {os.SCHED_BATCH}, proc_cmdline(pid)
    tasks = [t["pid"] for t in c.job(job_id)["attempts"][-1]["tasks"]]
    for pid in tasks + job_processes([job_id]):
        assert os.sched_getscheduler(pid) == os.SCHED_OTHER, proc_cmdline(pid)
    policy = c.ag("exec", job_id, "--task-index", "1", "--", "cut", "-d", " ", "-f41", "/proc/self/stat")
    assert policy.stdout.strip() == str(os.SCHED_OTHER)
    c.ag("stop-job", job_id)


def test_env_option_sets_and_expands_variables(cluster):
    job_id, _ = cluster.submit("-n", 2, "--env", "MYPATH=/x:$HOME", "--env", "FOO=bar",
                               "--env", "RANKCOPY=r${RANK}", "--no-wait", "--", "env")
    job = cluster.wait_state(job_id, ("SUCCEEDED", "FAILED", "STOPPED"), timeout=20)
    assert job["state"] == "SUCCEEDED", job
    for i in (0, 1):
        env = parse_env_dump(task_log(cluster, job_id, i))
        assert env.get("FOO") == "bar"
        assert env.get("HOME"), "the task should see a HOME to expand against"
        assert env.get("MYPATH") == "/x:" + env["HOME"]
        assert env.get("RANKCOPY") == f"r{i}"


# ---- jobs that fail ---------------------------------------------------------------------

def test_failing_task_fails_the_job_and_says_which(cluster):
    job_id, proc = cluster.submit("-n", 2, "--", "exit $((RANK*3))", timeout=60)
    assert proc.returncode != 0
    job = cluster.wait_state(job_id, ("SUCCEEDED", "FAILED", "STOPPED"), timeout=20)
    assert job["state"] == "FAILED"
    assert "task 1" in job["message"], job["message"]
    assert "code 3" in job["message"], job["message"]
    task1 = [t for t in first_attempt(job)["tasks"] if t["task_index"] == 1][0]
    assert task1["exit_code"] == 3


def test_nonexistent_command_fails_with_127(cluster):
    job_id, proc = cluster.submit("--", "no_such_command_ag_test_xyz", timeout=60)
    assert proc.returncode != 0
    job = cluster.wait_state(job_id, ("SUCCEEDED", "FAILED", "STOPPED"), timeout=20)
    assert job["state"] == "FAILED"
    task0 = first_attempt(job)["tasks"][0]
    assert task0["exit_code"] == 127
    assert "command not found" in job["message"], job["message"]


# ---- stopping -----------------------------------------------------------------------------

def test_stop_job_kills_the_whole_process_tree(cluster):
    # A child, a grandchild in the task's group, a grandchild that starts its own session
    # and one that setsid's and is orphaned (reparented away from the task) at once.
    script = ("sleep 301 & "
              "(sleep 302 & wait) & "
              "(setsid sleep 303 & wait) & "
              "(setsid sleep 304 &) ; "
              "wait")
    job_id, _ = cluster.submit("--no-wait", "--", script)
    cluster.wait_state(job_id, "RUNNING", timeout=20)

    def sleeps():
        return {proc_cmdline(p) for p in job_processes([job_id])} >= \
            {"sleep 301", "sleep 302", "sleep 303", "sleep 304"}
    wait_until(sleeps, 15, message="all four sleeps of the task to start")

    cluster.ag("stop-job", job_id, timeout=30)
    try:
        wait_until(lambda: not job_processes([job_id]), 15, message="every process of the job to die")
    except AssertionError:
        alive = {p: proc_cmdline(p) for p in job_processes([job_id])}
        raise AssertionError(f"processes of {job_id} still alive after stop-job: {alive}") from None
    job = cluster.wait_state(job_id, "STOPPED", timeout=15)
    assert first_attempt(job)["tasks"][0]["state"] == "STOPPED"
    # No zombies left under the workers.
    for ip in ("127.0.0.2", "127.0.0.3"):
        pid = cluster.worker_pid(ip)
        wait_until(lambda: not zombie_children(pid), 5, message=f"worker {ip} to reap its children")


def test_concurrent_jobs_get_distinct_master_ports(cluster):
    # Three 2-task jobs, one task per node each: two masters must share a node, and two
    # jobs on one node must not share a master port.
    job_ids = [cluster.submit("-n", 2, "--num-cpus", "0.5", "--placement", "spread", "--no-wait",
                              "--", "sleep 2")[0] for _ in range(3)]
    masters = {}
    for job_id in job_ids:
        job = cluster.wait_state(job_id, ("RUNNING", "SUCCEEDED"), timeout=20)
        attempt = first_attempt(job)
        masters[job_id] = (attempt["master_addr"], attempt["master_port"])
    assert len(set(masters.values())) == len(job_ids), masters
    addrs = [a for a, _ in masters.values()]
    assert len(set(addrs)) < len(addrs), f"expected two masters on one node: {masters}"
    for job_id in job_ids:
        assert cluster.wait_state(job_id, ("SUCCEEDED", "FAILED", "STOPPED"), timeout=30)["state"] == "SUCCEEDED"


def test_jobs_survive_a_head_restart(cluster):
    job_ids = [cluster.submit("--no-wait", "--", "sleep 1")[0] for _ in range(4)]
    head_pid = cluster.head_pid()
    assert head_pid and pid_alive(head_pid)
    os.kill(head_pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head_pid), 10, message="the head to die")

    cluster.start_head()
    listed = {j["job_id"] for j in cluster.ag_json("list-jobs")["jobs"]}
    assert set(job_ids) <= listed, f"lost jobs: {set(job_ids) - listed}"
    # Nothing lost: the workers reconnect and every job still finishes.
    for job_id in job_ids:
        job = cluster.wait_state(job_id, ("SUCCEEDED", "FAILED", "STOPPED"), timeout=30)
        assert job["state"] == "SUCCEEDED", (job.get("message"), job.get("failure"), job["attempts"])


def test_a_head_killed_right_after_placing_runs_each_job_exactly_once(cluster, tmp_path):
    # The head stores a placement before the launch goes out: killed at any moment
    # after it, the restarted head knows the attempt its workers run (or will be told to
    # run), so no job is placed again under the same task id, run twice or failed.
    ran = tmp_path / "ran"
    job_ids = []
    for round_ in range(3):
        ids = [cluster.submit("--no-wait", "--", f"echo $AG_JOB_ID >> {ran}; sleep 0.3")[0]
               for _ in range(3)]
        job_ids += ids
        head_pid = cluster.head_pid()
        os.kill(head_pid, signal.SIGKILL)
        wait_until(lambda: not pid_alive(head_pid), 10, message="the head to die")
        cluster.start_head()
    for job_id in job_ids:
        job = cluster.wait_state(job_id, ("SUCCEEDED", "FAILED", "STOPPED"), timeout=30)
        assert job["state"] == "SUCCEEDED", (job.get("message"), job.get("failure"), job["attempts"])
        assert len(job["attempts"]) == 1, job["attempts"]
    runs = ran.read_text().split()
    assert sorted(runs) == sorted(job_ids), "each job must run exactly once"


def test_a_placement_the_head_never_stored_launches_nothing(cluster_factory, held_writes, tmp_path):
    # The same promise without a race: a queued job is placed while the head's store does
    # not answer. Its launch waits for the placement's write, so nothing runs; the head
    # killed then knows nothing of the placement after its restart, places the job again
    # and it runs once, in one attempt.
    ran = tmp_path / "ran"
    cluster = held_writes.cluster(cluster_factory, worker_ips=("127.0.0.2",))
    first = cluster.submit("--no-wait", "--num-cpus", 2, "--", "sleep 2")[0]
    cluster.wait_tasks_running(first)
    queued = cluster.submit("--no-wait", "--num-cpus", 2, "--", f"echo $AG_JOB_ID >> {ran}")[0]
    assert cluster.job(queued)["state"] == "PENDING"
    held_writes.hold()
    # Placed once the first job ended (SUCCEEDED only if its launch went out at once).
    cluster.wait_state(queued, ("RUNNING", "SUCCEEDED"), timeout=15)
    time.sleep(1)
    assert not ran.exists(), "a launch went out before its placement was stored"
    held_writes.kill_head_and_start_again(cluster)
    for job_id in (first, queued):
        job = cluster.wait_state(job_id, ("SUCCEEDED", "FAILED", "STOPPED"), timeout=30)
        assert job["state"] == "SUCCEEDED" and len(job["attempts"]) == 1, (job.get("message"), job["attempts"])
    assert ran.read_text().split() == [queued]


def test_pending_job_says_why_and_can_be_stopped(cluster):
    job_id, _ = cluster.submit("--num-gpus", 4, "--allow-unschedulable", "--no-wait", "--", "true")
    # A scheduling pass has weighed it once its message is the scheduler's reason.
    wait_until(lambda: "needs 4 GPUs" in cluster.job(job_id)["message"], 10, message="the pass's reason")
    assert cluster.job(job_id)["state"] == "PENDING"
    out = cluster.ag("status", job_id, "-v").stdout
    assert "PENDING" in out
    assert "GPU" in out and "4" in out, out
    assert "needs 4 GPUs per task; largest node has 0" in out, out
    cluster.ag("stop-job", job_id)
    assert cluster.wait_state(job_id, "STOPPED", timeout=10)["state"] == "STOPPED"


# ---- bad input --------------------------------------------------------------------------

def test_bad_rest_requests_get_4xx_and_change_nothing(head_only):
    c = head_only
    status, body = c.api("POST", "/api/jobs", {"entrypoint": "true", "num_workers": 1})
    assert status in (200, 201), body
    before = c.jobs()

    def error_text(body):
        return body.get("error") or body.get("message") if isinstance(body, dict) else body

    status, body = c.api("POST", "/api/jobs", raw="{not json")
    assert status == 400 and error_text(body), body

    status, body = c.api("POST", "/api/jobs", {"entrypoint": "true", "bogus_field": 1})
    assert status == 400 and "bogus_field" in error_text(body), body

    status, body = c.api("POST", "/api/jobs", {"num_workers": 1})
    assert status == 400 and "entrypoint" in error_text(body), body

    for n in (0, 100000):
        status, body = c.api("POST", "/api/jobs", {"entrypoint": "true", "num_workers": n})
        assert status == 400 and "num_workers" in error_text(body), (n, body)

    for cpus in (-1, "x"):
        status, body = c.api("POST", "/api/jobs", {"entrypoint": "true", "task_options": {"num_cpus": cpus}})
        assert status == 400 and "num_cpus" in error_text(body), (cpus, body)

    status, body = c.api("GET", "/api/jobs/job_000000000000")
    assert status == 404, body
    status, body = c.api("POST", "/api/jobs/job_000000000000/stop")
    assert status == 404, body

    for token in (None, "wrong-token"):
        status, body = c.api("GET", "/api/jobs", token=token)
        assert status == 401, (token, body)
        status, body = c.api("POST", "/api/jobs", {"entrypoint": "true"}, token=token)
        assert status == 401, (token, body)
    status, body = c.api("GET", "/api/healthz", token=None)
    assert status == 200, body

    after = c.jobs()
    assert [(j["job_id"], j["state"]) for j in after] == [(j["job_id"], j["state"]) for j in before]


def test_bad_cli_input(head_only):
    c = head_only
    for args in (("--token", "wrong", "list-jobs"), ("list-jobs", "--token", "wrong")):
        proc = c.ag(*args, check=False)
        assert proc.returncode != 0
        text = (proc.stdout + proc.stderr).lower()
        assert "401" in text or "token" in text, text

    proc = c.ag("submit", check=False)
    assert proc.returncode == 2, proc
    proc = c.ag("submit", "--", check=False)
    assert proc.returncode == 2, proc

    proc = c.ag("status", "job_000000000000", check=False)
    assert proc.returncode > 0, proc
    text = (proc.stdout + proc.stderr).lower()
    assert "not found" in text or "no job" in text, text
    assert c.jobs() == []


def test_worker_with_wrong_token_is_refused(head_only):
    c = head_only
    ip = "127.0.0.9"
    proc = c.start_worker(ip, num_cpus=1, check=False, token="wrong-token")
    assert proc.returncode != 0
    text = (proc.stdout + proc.stderr).lower()
    assert "token" in text and ("401" in text or "refused" in text), text

    def no_worker():
        return not [p for p in processes_where(lambda env: env.get("AG_SESSION_DIR") == str(c.session_dir))
                    if f"--node-ip-address {ip}" in proc_cmdline(p)]
    wait_until(no_worker, 5, message="the refused worker process to exit")
    assert c.nodes() == []


def test_worker_keeps_retrying_a_closed_port(cluster_factory):
    lonely = cluster_factory("lonely", start_head=False)
    (closed_port,) = free_ports(1)
    proc = lonely.start_worker("127.0.0.8", num_cpus=1, check=False, token="some-token",
                               head=f"127.0.0.1:{closed_port}", options=["--wait-for-head"])
    assert proc.returncode >= 0, proc  # not killed by a signal
    assert "cannot reach head at" in proc.stdout + proc.stderr, proc
    pid = lonely.worker_pid("127.0.0.8")
    assert pid, f"no pid file for the worker: {lonely.daemon_pids()}"
    time.sleep(1.5)
    assert pid_alive(pid), "the worker daemon should keep retrying"
    log = (lonely.worker_data_dir("127.0.0.8") / "worker.log").read_text()
    assert "cannot reach head at" in log

    # The CLI has no head here: it says so instead of crashing.
    for args in (("list-nodes",), ("status",)):
        p = lonely.ag(*args, check=False)
        assert 0 < p.returncode < 128, p
        assert "terminate called" not in p.stderr

    lonely.ag("stop", "--timeout", "5", timeout=30)
    wait_until(lambda: not pid_alive(pid), 10, message="`ag stop` to stop the retrying worker")


def test_second_head_on_a_busy_port_fails_clearly(cluster_factory):
    first = cluster_factory("first", workers=())
    second = cluster_factory("second", start_head=False)
    second.port = first.port
    proc = second.start_head(check=False)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert str(first.port) in text and "in use" in text.lower(), text
    status, _ = first.api("GET", "/api/healthz", token=None)
    assert status == 200


# ---- nodes --------------------------------------------------------------------------------

def test_nodes_alive_then_dead_after_sigkill(cluster_factory):
    node_timeout_s = 2
    c = cluster_factory("nodes", node_timeout_s=node_timeout_s)
    nodes = c.ag_json("list-nodes")["nodes"]
    assert sorted((n["address"], n["state"]) for n in nodes) == [("127.0.0.2", "ALIVE"), ("127.0.0.3", "ALIVE")]
    table = c.ag("list-nodes").stdout
    for ip in ("127.0.0.2", "127.0.0.3"):
        line = [ln for ln in table.splitlines() if ip in ln]
        assert line and "ALIVE" in line[0], table

    victim = c.worker_pid("127.0.0.2")
    os.kill(victim, signal.SIGKILL)

    def state_of(ip):
        return {n["address"]: n["state"] for n in c.nodes()}.get(ip)
    wait_until(lambda: state_of("127.0.0.2") == "DEAD", node_timeout_s + 4,
               message="the killed worker's node to be DEAD")
    assert state_of("127.0.0.3") == "ALIVE"
    table = c.ag("list-nodes").stdout
    assert "DEAD" in [ln for ln in table.splitlines() if "127.0.0.2" in ln][0], table


def test_master_port_is_never_one_already_held_on_the_node(cluster):
    """Ports of the master range that something on the node listens on are reported
    by its worker and skipped by the head."""
    import socket
    proc = cluster.ag("submit", "--", "echo port=$AG_MASTER_PORT")
    last = int(proc.stdout.split("port=")[1].split()[0])
    held, sockets = set(), []
    try:
        for port in range(last + 1, last + 21):
            s = socket.socket()
            try:
                s.bind(("0.0.0.0", port))
                s.listen()
            except OSError:
                s.close()
                continue
            sockets.append(s)
            held.add(port)
        assert len(held) >= 10

        def reported():  # with the workers' next heartbeats
            return all(held <= set(n["busy_master_ports"]) for n in cluster.nodes() if n["state"] == "ALIVE")
        wait_until(reported, 10, message="the workers to report the held ports")
        proc = cluster.ag("submit", "--", "echo port=$AG_MASTER_PORT")
        port = int(proc.stdout.split("port=")[1].split()[0])
        assert port not in held and last < port
    finally:
        for s in sockets:
            s.close()
