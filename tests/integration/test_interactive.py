"""Interactive work over real daemons: `ag alloc` / `ag release-alloc`, and `ag submit -it`."""
import signal
import subprocess
import time

from conftest import AG_BIN, wait_until
from test_exec import Terminal


def pending(c, kind):
    """The id of a PENDING job whose spec has `kind` (allocation, interactive), or None."""
    for j in c.api("GET", "/api/jobs?state=PENDING")[1]["jobs"]:
        if c.job(j["job_id"])["spec"].get(kind):
            return j["job_id"]
    return None


def test_an_allocation_holds_its_gang_until_released(cluster):
    c = cluster
    proc = c.ag("alloc", "-n", "2", "--placement", "spread", "--num-cpus", "1", timeout=60)
    job_id = proc.stdout.strip()
    c.job_ids.add(job_id)
    assert f"Release it: ag release-alloc {job_id}" in proc.stderr, proc.stderr
    job = c.job(job_id)
    assert job["state"] == "RUNNING" and job["spec"]["allocation"] is True, job
    assert job["owner"] == "admin" and job["name"] == "alloc"
    assert all(t["state"] == "RUNNING" for t in job["attempts"][-1]["tasks"])
    # Commands run inside its tasks, with their environments.
    out = c.ag("exec", job_id, "--task-index", "1", "--", "sh", "-c", 'echo "$RANK $WORLD_SIZE"').stdout
    assert out.strip() == "1 2"
    # It is a job in every list.
    assert job_id in c.ag("list-jobs").stdout
    # A job that is not an allocation is not released by release-alloc.
    other, _ = c.submit("--no-wait", "--", "sleep", "300")
    refused = c.ag("release-alloc", other, check=False)
    assert refused.returncode != 0 and "is not an allocation" in refused.stderr, refused.stderr
    c.ag("release-alloc", job_id)
    assert c.wait_state(job_id, ["STOPPED"], timeout=30)["state"] == "STOPPED"
    again = c.ag("release-alloc", job_id, check=False)
    assert again.returncode != 0 and "has ended already (STOPPED)" in again.stderr, again.stderr


def test_an_allocation_ends_at_its_time_and_refuses_a_command(cluster):
    c = cluster
    job_id = c.ag("alloc", "--time", "3s", timeout=60).stdout.strip()
    c.job_ids.add(job_id)
    job = c.wait_state(job_id, ["FAILED"], timeout=30)
    assert "timed out after 3s" in job["message"], job["message"]
    status, body = c.api("POST", "/api/jobs", {"allocation": True, "entrypoint": "python train.py"})
    assert status == 400 and "an allocation runs no command" in body["error"], body
    bad = c.ag("alloc", "--time", "soon", check=False)
    assert bad.returncode == 2 and "--time" in bad.stderr, bad.stderr


def test_an_allocation_waits_for_room_and_ctrl_c_gives_it_up(cluster):
    c = cluster
    # One that can never be placed is refused at once, as a submit is.
    never = c.ag("alloc", "--num-gpus", "8", check=False)
    assert never.returncode != 0 and "GPU" in never.stderr, never.stderr
    # The cluster full: the next one waits, says why, and Ctrl-C gives it up.
    full = c.ag("alloc", "-n", "2", "--placement", "spread", "--num-cpus", "2", timeout=60).stdout.strip()
    c.job_ids.add(full)
    proc = subprocess.Popen([AG_BIN, "alloc", "--num-cpus", "1"], env=c.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        waiting = wait_until(lambda: pending(c, "allocation"), 20, message="the second allocation to wait")
        c.job_ids.add(waiting)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 130
        err = proc.stderr.read()
        assert "Waiting: " in err and f"Allocation {waiting} given up before it was ready" in err, err
        assert c.wait_state(waiting, ["STOPPED"], timeout=30)["state"] == "STOPPED"
    finally:
        if proc.poll() is None:
            proc.kill()
    c.ag("release-alloc", full)


def test_submit_it_runs_task_0_on_this_terminal_and_leaving_ends_the_job(cluster, tmp_path):
    c = cluster
    term = Terminal(c.env, ["submit", "-it", "-n", "2", "--placement", "spread", "--", 'echo "rank=$RANK"; '
                            'if [ "$RANK" = 0 ]; then stty size; read line; echo "got $line"; exit 3; fi; sleep 300'])
    try:
        term.read_until(b"rank=0")
        term.read_until(b"40 100")
        term.send(b"hello\r")
        term.read_until(b"got hello")
        assert term.wait(60) == 3
    finally:
        term.close()
    seen = term.seen.decode(errors="replace")
    job_id = seen.split("Job ")[1].split()[0]
    c.job_ids.add(job_id)
    assert "stopped: its interactive session ended" in seen, seen
    job = c.wait_state(job_id, ["STOPPED"], timeout=30)
    # The other rank ran the command as usual, without a terminal.
    assert "rank=1" in c.ag("logs", job_id, "--task-index", "1").stdout


def test_ctrl_c_before_the_session_stops_the_job(cluster):
    c = cluster
    proc = subprocess.Popen([AG_BIN, "submit", "-i", "--num-cpus", "64", "--allow-unschedulable", "--", "cat"],
                            env=c.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        job_id = wait_until(lambda: pending(c, "interactive"), 20, message="the job to wait for a node")
        c.job_ids.add(job_id)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 130
        assert "stopped before its session began" in proc.stderr.read()
        assert c.wait_state(job_id, ["STOPPED"], timeout=30)["state"] == "STOPPED"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_submit_i_pipes_input_to_task_0_and_bad_combinations_are_refused(cluster):
    c = cluster
    proc = subprocess.run([AG_BIN, "submit", "-i", "--", "wc -c"], input=b"x" * 1000, env=c.env,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == b"1000", proc
    for flags, said in ((["-it"], "-t needs a terminal here"), (["-i", "--no-wait"], "drop --no-wait"),
                        (["-i", "--all-ranks"], "drop --no-wait and --all-ranks")):
        bad = c.ag("submit", *flags, "--", "bash", check=False)
        assert bad.returncode == 2 and said in bad.stderr, (flags, bad.stderr)


def test_hold_on_failure_keeps_the_other_ranks_for_a_look_then_ends_the_job(cluster):
    c = cluster
    job_id, _ = c.submit("--no-wait", "-n", "2", "--hold-on-failure", "6s", "--",
                         'if [ "$RANK" = 1 ]; then sleep 1; exit 3; fi; echo rank-0-up; sleep 300')
    wait_until(lambda: c.job(job_id)["attempts"] and c.job(job_id)["attempts"][-1]["tasks"][1]["state"] == "FAILED",
               30, message="rank 1 to fail")
    job = c.job(job_id)
    assert job["state"] == "RUNNING", job
    assert "its running tasks (0) are kept until " in job["message"], job["message"]
    assert "kept until" in c.ag("status", job_id).stdout
    # A look inside the rank still running; the failed one is said to be over.
    assert c.ag("exec", job_id, "--task-index", "0", "--", "sh", "-c", "echo $RANK").stdout.strip() == "0"
    gone = c.ag("exec", job_id, "--task-index", "1", "--", "true", check=False)
    assert gone.returncode != 0 and "is FAILED, not running" in gone.stderr, gone.stderr
    # Then the gang is torn down, and the job fails for the first failure.
    job = c.wait_state(job_id, ["FAILED"], timeout=30)
    assert job["message"] == "task 1 exited with code 3", job["message"]
    events = [e["message"] for e in c.api("GET", f"/api/jobs/{job_id}/events")[1]["events"]]
    assert any("the hold of attempt 0 is over; stopping its 1 running task(s)" in e for e in events), events
    bad = c.ag("submit", "--hold-on-failure", "forever", "--", "true", check=False)
    assert bad.returncode == 2 and "--hold-on-failure" in bad.stderr, bad.stderr
