"""Fault tolerance over real daemons (issue 4): gang retries, timeouts, head restart,
and worker loss. Each scenario asserts the end state; every process is cleaned up by
the cluster fixture."""
import os
import signal
import subprocess
import time

import pytest

from conftest import AG_BIN, job_processes, pid_alive, wait_until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(REPO, "examples", "train.py")


def submit_no_wait(cluster, *args):
    proc = cluster.ag("submit", "--no-wait", *args)
    job_id = proc.stdout.strip().splitlines()[-1]
    cluster.job_ids.add(job_id)
    return job_id


def test_failed_rank_retries_the_whole_gang_on_a_new_master_port(cluster):
    # Rank 1 of the first attempt dies mid-run; the retry trains to the end.
    script = (f'if [ "$AG_ATTEMPT" = 0 ] && [ "$RANK" = 1 ]; then sleep 1; exit 1; fi; '
              f'exec /usr/bin/python3 {TRAIN} --epochs 2')
    job_id = submit_no_wait(cluster, "-n", "2", "--placement", "spread", "--max-retries", "2", "--", script)

    job = cluster.wait_state(job_id, {"SUCCEEDED", "FAILED"}, timeout=120)

    assert job["state"] == "SUCCEEDED", job["message"]
    assert job["num_attempts"] == 2
    first, second = job["attempts"]
    assert first["tasks"][1]["state"] == "FAILED" and first["tasks"][1]["exit_code"] == 1
    assert first["tasks"][0]["state"] == "STOPPED"
    assert first["master_port"] != second["master_port"]
    assert all(t["state"] == "SUCCEEDED" for t in second["tasks"])
    log0 = cluster.ag("logs", job_id, "--attempt", "1").stdout
    assert "Epoch 1, Loss:" in log0
    events = " ".join(e["message"] for e in cluster.api("GET", f"/api/jobs/{job_id}/events")[1]["events"])
    assert "retrying as attempt 1" in events


def test_timeout_fails_the_job_and_kills_every_process(cluster):
    job_id = submit_no_wait(cluster, "--timeout", "2", "--", "sleep 300 & sleep 300")
    started = time.time()

    job = cluster.wait_state(job_id, {"FAILED", "SUCCEEDED", "STOPPED"}, timeout=2 + cluster.kill_grace_s + 10)

    assert job["state"] == "FAILED"
    assert "timed out after 2s" in job["message"]
    assert time.time() - started < 2 + cluster.kill_grace_s + 5
    wait_until(lambda: not job_processes([job_id]), 10, message="no process of the job left")


def test_head_killed_mid_job_keeps_the_job_and_its_whole_log(cluster):
    lines = 25
    job_id = submit_no_wait(cluster, "-n", "2", "--placement", "spread", "--",
                            f"for i in $(seq 1 {lines}); do echo line $i; sleep 0.15; done")
    cluster.wait_state(job_id, "RUNNING", timeout=10)
    time.sleep(1.0)
    head_pid = cluster.head_pid()
    os.kill(head_pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head_pid), 5, message="head to die")
    time.sleep(1.0)  # the tasks keep running and printing while the head is away
    cluster.start_head()

    job = cluster.wait_state(job_id, {"SUCCEEDED", "FAILED"}, timeout=30)

    assert job["state"] == "SUCCEEDED", job["message"]
    assert job["num_attempts"] == 1
    for task in (0, 1):
        log = cluster.ag("logs", job_id, "--task-index", str(task)).stdout
        assert log.splitlines() == [f"line {i}" for i in range(1, lines + 1)]


def test_worker_killed_fails_its_tasks_and_the_gang_is_retried_elsewhere(cluster_factory):
    cluster = cluster_factory("faulty", node_timeout_s=2)
    job_id = submit_no_wait(cluster, "-n", "2", "--placement", "spread", "--max-retries", "1", "--",
                            'if [ "$AG_ATTEMPT" = 0 ]; then sleep 300; fi; echo done $RANK')
    job = cluster.wait_state(job_id, "RUNNING", timeout=10)
    cluster.wait_tasks_running(job_id, timeout=10)
    victim_ip = job["attempts"][0]["tasks"][1]["node_address"]
    os.kill(cluster.worker_pid(victim_ip), signal.SIGKILL)

    job = cluster.wait_state(job_id, {"SUCCEEDED", "FAILED"}, timeout=30)

    assert job["state"] == "SUCCEEDED", job["message"]
    assert job["num_attempts"] == 2
    lost = job["attempts"][0]["tasks"][1]
    assert lost["state"] == "FAILED" and "stopped responding" in lost["reason"]
    assert all(t["node_address"] != victim_ip for t in job["attempts"][1]["tasks"])
    states = {n["address"]: n["state"] for n in cluster.nodes()}
    assert states[victim_ip] == "DEAD"


def test_stopped_worker_resumes_and_its_given_up_task_is_killed_not_reported(cluster_factory):
    cluster = cluster_factory("frozen", node_timeout_s=2)
    job_id = submit_no_wait(cluster, "-n", "2", "--placement", "spread", "--max-retries", "1", "--",
                            'if [ "$AG_ATTEMPT" = 0 ]; then sleep 300; fi; echo done')
    cluster.wait_tasks_running(job_id, timeout=15)
    task1 = cluster.job(job_id)["attempts"][0]["tasks"][1]
    frozen_pid = cluster.worker_pid(task1["node_address"])
    os.kill(frozen_pid, signal.SIGSTOP)
    try:
        job = cluster.wait_state(job_id, {"SUCCEEDED", "FAILED"}, timeout=30)
    finally:
        os.kill(frozen_pid, signal.SIGCONT)

    assert job["state"] == "SUCCEEDED", job["message"]
    # On resume the worker re-registers, is told its attempt-0 task was given up, and
    # kills it; that task never becomes the job's result.
    wait_until(lambda: not pid_alive(task1["pid"]), 20, message="the given-up task to be killed")
    job = cluster.job(job_id)
    assert job["attempts"][0]["tasks"][1]["state"] == "FAILED"
    assert job["state"] == "SUCCEEDED" and job["num_attempts"] == 2


def test_submits_across_a_head_restart_create_each_job_exactly_once(cluster):
    import sys
    import threading
    sys.path.insert(0, os.path.join(REPO, "python"))
    import aethergrid as ag

    client = ag.Client(cluster.address, token=cluster.token)
    ids, errors = [], []

    def submit_all():
        try:
            for _ in range(200):
                ids.append(client.submit_job(entrypoint="true", task_options={"num_cpus": 0.25}).job_id)
        except Exception as e:  # reported by the assertion below
            errors.append(e)

    submitter = threading.Thread(target=submit_all)
    submitter.start()
    wait_until(lambda: len(ids) >= 100, 60, message="100 submits")
    head_pid = cluster.head_pid()
    os.kill(head_pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head_pid), 5, message="head to die")
    cluster.start_head()
    submitter.join(timeout=120)

    assert not errors, errors
    assert len(ids) == 200 and len(set(ids)) == 200
    for job_id in ids:
        cluster.job_ids.add(job_id)
        job = cluster.wait_state(job_id, {"SUCCEEDED", "FAILED"}, timeout=60)
        assert job["state"] == "SUCCEEDED" and job["num_attempts"] == 1, job
    assert len(cluster.jobs()) == 200


def test_a_submit_the_head_never_stored_is_not_acknowledged_and_its_retry_runs_once(cluster_factory, held_writes,
                                                                                   tmp_path):
    # The same promise without a race: while the head's store does not answer, a submit
    # gets no answer and its job is nowhere; the head is killed -9, and the CLI's retry
    # (its submission id makes it safe) creates the job once the head is back.
    ran = tmp_path / "ran"
    cluster = held_writes.cluster(cluster_factory, worker_ips=("127.0.0.2",))
    held_writes.hold()
    submit = subprocess.Popen([AG_BIN, "submit", "--no-wait", "--", f"echo $AG_JOB_ID >> {ran}"], env=cluster.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        assert submit.poll() is None, "the submit was answered before its job was stored"
        assert cluster.jobs() == [], "a job was shown before it was stored"
        held_writes.kill_head_and_start_again(cluster)
        out, err = submit.communicate(timeout=60)
        assert submit.returncode == 0, err
        job_id = out.strip().splitlines()[-1]
        cluster.job_ids.add(job_id)
        job = cluster.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=30)
        assert job["state"] == "SUCCEEDED" and job["num_attempts"] == 1, job
        assert [j["job_id"] for j in cluster.jobs()] == [job_id]
        assert ran.read_text().split() == [job_id]
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.wait(timeout=10)


def assert_alive(pid, why):
    assert pid_alive(pid), why


def test_a_stop_the_head_never_stored_is_not_acted_on_and_the_cli_asks_again(cluster_factory, held_writes):
    # A stop is written ahead too: while the head's store does not answer, `ag stop-job`
    # gets no answer and the task runs on. The head killed then has no stop after its
    # restart; the CLI, which cannot know whether the head stored it, asks again once
    # the head is back, and that stop ends the job.
    cluster = held_writes.cluster(cluster_factory, worker_ips=("127.0.0.2",))
    job_id = submit_no_wait(cluster, "--", "sleep 300")
    cluster.wait_tasks_running(job_id)
    pid = cluster.job(job_id)["attempts"][0]["tasks"][0]["pid"]
    held_writes.hold()
    stop = subprocess.Popen([AG_BIN, "stop-job", job_id], env=cluster.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        assert stop.poll() is None, "the stop was answered before it was stored"
        assert cluster.job(job_id)["state"] == "RUNNING" and pid_alive(pid)
        held_writes.kill_head_and_start_again(
            cluster, while_dead=lambda: assert_alive(pid, "the stop was acted on though never stored"))
        out, err = stop.communicate(timeout=60)
        assert stop.returncode == 0, err
        assert f"Stop requested for job {job_id}" in out, out
        cluster.wait_state(job_id, "STOPPED", timeout=cluster.kill_grace_s + 10)
        wait_until(lambda: not pid_alive(pid), 10, message="the task to end with its job")
    finally:
        if stop.poll() is None:
            stop.kill()
            stop.wait(timeout=10)


def test_worker_killed_and_not_restarted_leaves_no_task_behind(cluster_factory):
    cluster = cluster_factory("abandoned", node_timeout_s=2)
    job_id = submit_no_wait(cluster, "-n", "2", "--placement", "spread", "--", "sleep 300")
    cluster.wait_tasks_running(job_id, timeout=15)
    task1 = cluster.job(job_id)["attempts"][0]["tasks"][1]
    os.kill(cluster.worker_pid(task1["node_address"]), signal.SIGKILL)

    # Its task's supervisor ends it once no agent has run for the node timeout; the
    # head has failed the job by then and stopped the other rank.
    wait_until(lambda: not job_processes([job_id]), 2 + 1 + cluster.kill_grace_s + 5,
               message="no process of the job left anywhere")
    assert cluster.job(job_id)["state"] == "FAILED"


def test_worker_restarted_quickly_keeps_its_running_task(cluster_factory):
    cluster = cluster_factory("restarted", node_timeout_s=10)
    lines = 30
    job_id = submit_no_wait(cluster, "-n", "2", "--placement", "spread", "--",
                            f"for i in $(seq 1 {lines}); do echo line $i; sleep 0.2; done")
    cluster.wait_tasks_running(job_id, timeout=15)
    task1 = cluster.job(job_id)["attempts"][0]["tasks"][1]
    ip = task1["node_address"]
    os.kill(cluster.worker_pid(ip), signal.SIGKILL)
    time.sleep(2.0)
    assert pid_alive(task1["pid"]), "the task must outlive its agent"
    cluster.start_worker(ip)

    job = cluster.wait_state(job_id, {"SUCCEEDED", "FAILED"}, timeout=30)

    assert job["state"] == "SUCCEEDED", job["message"]
    assert job["num_attempts"] == 1
    assert job["attempts"][0]["tasks"][1]["pid"] == task1["pid"]
    log = cluster.ag("logs", job_id, "--task-index", "1").stdout
    assert log.splitlines() == [f"line {i}" for i in range(1, lines + 1)]


def cgroups_available():
    return (os.path.exists("/sys/fs/cgroup/cgroup.controllers") or
            os.path.exists("/sys/fs/cgroup/pids/cgroup.procs") or
            os.path.exists("/sys/fs/cgroup/freezer/cgroup.procs"))


def test_stop_finds_a_grandchild_that_left_its_session_and_environment(cluster):
    import pytest
    from conftest import all_pids, proc_cmdline
    if not cgroups_available():
        pytest.skip("this machine has no cgroup hierarchy a worker can use (v2, or v1 pids/freezer)")
    # setsid leaves the process group, env -i drops the task marker: only the task's
    # control group still holds it.
    job_id = submit_no_wait(cluster, "--", "env -i setsid sleep 313.37 & sleep 300")
    cluster.wait_state(job_id, "RUNNING", timeout=10)

    def escaped():
        return [p for p in all_pids() if proc_cmdline(p).strip() == "sleep 313.37"]

    wait_until(lambda: escaped(), 10, message="the escaping grandchild to start")
    with open(f"/proc/{escaped()[0]}/cgroup") as f:
        assert "/aethergrid/" in f.read()
    cluster.ag("stop-job", job_id)

    cluster.wait_state(job_id, "STOPPED", timeout=cluster.kill_grace_s + 10)
    wait_until(lambda: not escaped(), 10, message="the escaped grandchild to be killed")


def test_on_a_root_worker_a_task_is_not_root_and_cannot_leave_its_control_group(cluster):
    import shlex
    from conftest import all_pids, proc_cmdline
    if not cgroups_available():
        pytest.skip("this machine has no cgroup hierarchy a worker can use (v2, or v1 pids/freezer)")
    if os.geteuid() != 0:
        pytest.skip("a worker not running as root runs tasks as itself")
    # A worker running as root runs its users' tasks as accounts of their own: a
    # grandchild can leave its session and drop the task marker, but not its control
    # group (the root of each hierarchy is root's), so it dies with its job.
    escape = ("echo uid $(id -u); for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs; do "
              "if (echo $$ > $f) 2>/dev/null; then echo ESCAPED to $f; fi; done; echo tried; exec sleep 313.72")
    job_id = submit_no_wait(cluster, "--", f"env -i setsid sh -c {shlex.quote(escape)} & sleep 300")
    cluster.wait_state(job_id, "RUNNING", timeout=10)

    def escaped():
        return [p for p in all_pids() if proc_cmdline(p).strip() == "sleep 313.72"]

    wait_until(lambda: escaped(), 10, message="the escaping grandchild to start")
    log = cluster.ag("logs", job_id).stdout
    assert "tried" in log and "ESCAPED" not in log and "uid 0" not in log, log
    with open(f"/proc/{escaped()[0]}/cgroup") as f:
        assert "/aethergrid/" in f.read(), "the grandchild left its group"
    cluster.ag("stop-job", job_id)
    cluster.wait_state(job_id, "STOPPED", timeout=cluster.kill_grace_s + 10)
    wait_until(lambda: not escaped(), 10, message="the grandchild to be killed with its job")


import contextlib


def test_full_disk_refuses_submits_clearly_and_loses_nothing(small_disk, cluster_factory):
    cluster = cluster_factory("full", start_head=False)
    disk = small_disk(cluster.head_data_dir)
    cluster.start()
    kept = submit_no_wait(cluster, "--", "true")
    cluster.wait_state(kept, "SUCCEEDED", timeout=15)
    filler = disk / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as f:
        while True:
            f.write(b"\0" * 65536)
            f.flush()

    status, _, body = cluster.api_full("POST", "/api/jobs", body={"entrypoint": "echo " + "x" * 20000})

    assert status == 507, (status, body)
    assert "disk is full" in body["error"]
    assert [j["job_id"] for j in cluster.jobs()] == [kept]
    filler.unlink()
    again = submit_no_wait(cluster, "--", "true")
    assert cluster.wait_state(again, "SUCCEEDED", timeout=15)
    assert {j["job_id"] for j in cluster.jobs()} == {kept, again}


def test_timeout_covers_all_attempts_unless_per_attempt(cluster):
    # Each attempt fails after 1.5 s; the job may retry 3 times.
    script = 'sleep 1.5; exit 1'
    whole = submit_no_wait(cluster, "--timeout", "2.5", "--max-retries", "3", "--retry-delay", "0", "--", script)
    per_attempt = submit_no_wait(cluster, "--timeout", "2.5", "--timeout-per-attempt", "--max-retries", "1",
                                 "--retry-delay", "0", "--", script)
    # The whole run's clock also runs while a retry waits out its delay.
    waiting = submit_no_wait(cluster, "--timeout", "2.5", "--max-retries", "3", "--retry-delay", "5", "--", script)

    whole_job = cluster.wait_state(whole, {"FAILED", "SUCCEEDED"}, timeout=30)
    per_job = cluster.wait_state(per_attempt, {"FAILED", "SUCCEEDED"}, timeout=30)
    waiting_job = cluster.wait_state(waiting, {"FAILED", "SUCCEEDED"}, timeout=30)
    assert "timed out after 2.5s" in waiting_job["message"] and waiting_job["num_attempts"] == 1, waiting_job

    # The whole-run timeout ends the second attempt; per attempt, no attempt reaches it
    # and the job fails on its exit codes after its retries.
    assert "timed out after 2.5s" in whole_job["message"] and whole_job["num_attempts"] == 2
    assert "timed out" not in per_job["message"] and per_job["num_attempts"] == 2
    assert "exited with code 1" in per_job["message"]


def test_killed_task_supervisor_ends_its_task_as_lost_and_the_worker_goes_on(cluster):
    import json
    first = submit_no_wait(cluster, "--", "sleep 300")
    second = submit_no_wait(cluster, "--", "sleep 300")
    wait_until(lambda: all(cluster.job(j)["state"] == "RUNNING" and cluster.job(j)["attempts"][0]["tasks"][0]["pid"]
                           for j in (first, second)), 15, message="both jobs running")
    states = {}
    for job_id in (first, second):
        task = cluster.job(job_id)["attempts"][0]["tasks"][0]
        path = cluster.worker_data_dir(task["node_address"]) / "tasks" / f"{job_id}.0.0" / "task.json"
        states[job_id] = (task["node_address"], json.loads(path.read_text()))
    node, state = states[first]
    supervisor = state["supervisor_pid"]
    # One supervisor per worker, in its own session, not the task itself.
    assert supervisor not in (state["pid"], cluster.worker_pid(node))
    assert os.getsid(supervisor) == supervisor
    if states[second][0] == node:
        assert states[second][1]["supervisor_pid"] == supervisor

    os.kill(supervisor, signal.SIGKILL)

    wait_until(lambda: cluster.job(first)["state"] == "FAILED", 15, message="the job of the lost task failed")
    assert "supervisor" in cluster.job(first)["message"]
    wait_until(lambda: not job_processes([first]), 10, message="the lost task's processes are gone")
    # The worker starts the next task with a new supervisor.
    proc = cluster.ag("submit", "--", "echo after the supervisor died")
    assert "after the supervisor died" in proc.stdout
    cluster.ag("stop-job", second, check=False)


def test_upload_onto_a_full_disk_gets_the_heads_answer_not_a_reset(small_disk, cluster_factory, tmp_path):
    cluster = cluster_factory("fullpkg", start_head=False)
    small_disk(cluster.head_data_dir)
    cluster.start()
    code = tmp_path / "code"
    code.mkdir()
    (code / "weights.bin").write_bytes(os.urandom(64 << 20))  # far more than the head's disk and socket buffers

    proc = cluster.ag("submit", "--no-wait", "--working-dir", str(code), "--", "true", check=False)

    assert proc.returncode != 0
    assert "No space left on device" in proc.stderr, proc.stderr
    assert "cannot reach" not in proc.stderr
    assert [p.name for p in (cluster.head_data_dir / "packages").iterdir()] == []
    assert cluster.jobs() == []
    kept = submit_no_wait(cluster, "--", "true")  # the head serves on
    assert cluster.wait_state(kept, "SUCCEEDED", timeout=15)


def test_a_worker_cut_off_from_the_head_stops_its_tasks_before_the_retry_runs(cluster_factory):
    # The head frozen (SIGSTOP) is a partition as the worker sees it: nothing arrives.
    c = cluster_factory("fence", workers=("127.0.0.2", "127.0.0.3"), node_timeout_s=2)
    job_id = submit_no_wait(c, "--max-retries", "1", "--", "sleep 300")
    job = c.wait_state(job_id, "RUNNING")
    first_node = job["attempts"][0]["tasks"][0]["node_address"]
    wait_until(lambda: job_processes([job_id]), 10, message="the task runs")
    old = job_processes([job_id])
    head = c.head_pid()
    os.kill(head, signal.SIGSTOP)
    try:
        # Within the node timeout (2 s), a heartbeat period and the stop grace, the
        # cut-off worker ends the task by itself, while the head cannot tell it to.
        wait_until(lambda: not any(pid_alive(p) for p in old), 15,
                   message="the cut-off worker stops its task by itself")
    finally:
        os.kill(head, signal.SIGCONT)
    log = (c.worker_data_dir(first_node) / "worker.log").read_text()
    assert "nothing from the head for" in log and "stopping this node's tasks" in log, log[-2000:]
    # The head, back, retries the gang; only ever one copy of the rank ran at a time.
    wait_until(lambda: len(c.job(job_id)["attempts"]) == 2 and c.job(job_id)["state"] == "RUNNING", 30,
               message="the retry runs")
    c.ag("stop-job", job_id)


def test_a_stop_on_a_full_disk_is_refused_and_changes_nothing(small_disk, cluster_factory):
    cluster = cluster_factory("fullstop", start_head=False)
    disk = small_disk(cluster.head_data_dir)
    cluster.start()
    job_id = submit_no_wait(cluster, "--", "sleep 300")
    cluster.wait_state(job_id, "RUNNING")
    wait_until(lambda: cluster.job(job_id)["attempts"][0]["tasks"][0]["pid"] > 0, 10, message="the task started")
    filler = disk / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as f:
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    status, _, body = cluster.api_full("POST", f"/api/jobs/{job_id}/stop")
    assert status == 507, (status, body)
    assert "the stop could not be stored" in body["error"] and "stop the job again" in body["error"]
    job = cluster.job(job_id)
    assert job["state"] == "RUNNING" and not job["stop_requested"]
    assert pid_alive(job["attempts"][0]["tasks"][0]["pid"]), "the task still runs: nothing was carried out"
    filler.unlink()
    # With space again the stop is stored, carried out, and survives a head restart.
    status, _, body = cluster.api_full("POST", f"/api/jobs/{job_id}/stop")
    assert status == 200, body
    assert cluster.wait_state(job_id, "STOPPED", timeout=30)["state"] == "STOPPED"
    head = cluster.head_pid()
    os.kill(head, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head), 10, message="the head is gone")
    cluster.start_head()
    # The stop itself was stored; the tasks' ends are stored within milliseconds, or
    # else reported again by the worker (it keeps an end until the head has stored it).
    job = cluster.job(job_id)
    assert job["stop_requested"], job
    assert cluster.wait_state(job_id, "STOPPED", timeout=30)["state"] == "STOPPED"


@pytest.mark.serial  # uses up this user's inotify instances: a worker of a test beside it exiting frees some
def test_a_worker_without_inotify_instances_joins_and_runs_jobs_by_polling(cluster_factory):
    c = cluster_factory("noinotify", workers=())
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    held = []
    try:
        # Use up this user's inotify instances, as IDEs and other agents do on real machines.
        while len(held) < 100000:
            fd = libc.inotify_init1(0o2000000)  # IN_CLOEXEC
            if fd < 0:
                break
            held.append(fd)
        if ctypes.get_errno() not in (24, 23):  # EMFILE, ENFILE
            pytest.skip("this user's inotify instances could not be used up")
        c.start_worker("127.0.0.2")
    finally:
        for fd in held:
            os.close(fd)
    wait_until(lambda: any(n["state"] == "ALIVE" for n in c.nodes()), 15, message="the worker to join")
    log = (c.worker_data_dir("127.0.0.2") / "worker.log").read_text()
    assert "polling every 100 ms" in log and "max_user_instances" in log, log[-2000:]
    job_id, _ = c.submit("--no-wait", "--", "bash", "-c", "echo one; sleep 0.5; echo two; exit 3")
    job = c.wait_state(job_id, ["FAILED"], timeout=30)
    assert "exited with code 3" in job["message"]
    assert c.ag("logs", job_id).stdout == "one\ntwo\n"
