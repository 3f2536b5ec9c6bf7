"""`ag exec`: a command beside a running task, through the head, over real daemons."""
import os
import subprocess

from conftest import AG_BIN, pid_alive, wait_until


def running_job(c, *args):
    job_id, _ = c.submit("--no-wait", *args, "--", "sleep", "120")
    job = c.wait_state(job_id, ["RUNNING"], timeout=30)
    assert job["state"] == "RUNNING", job
    c.wait_tasks_running(job_id, timeout=20)
    return job_id


def test_exec_runs_beside_the_task_with_its_environment_and_exit_code(cluster):
    c = cluster
    job_id = running_job(c, "-n", "2")
    proc = c.ag("exec", job_id, "--task-index", "1", "--", "sh", "-c",
                'echo "$RANK $AG_JOB_ID $(pwd)"; echo to-stderr >&2; exit 7', check=False)
    assert proc.returncode == 7, proc.stderr
    rank, job, cwd = proc.stdout.split()
    assert (rank, job) == ("1", job_id)
    assert proc.stderr == "to-stderr\n"
    # The task's own directory, and the task's own user.
    task_pid = c.job(job_id)["attempts"][-1]["tasks"][1]["pid"]
    assert cwd == os.readlink(f"/proc/{task_pid}/cwd")
    uid = c.ag("exec", job_id, "--task-index", "1", "--", "id", "-u").stdout.strip()
    assert int(uid) == os.stat(f"/proc/{task_pid}").st_uid
    # Input with -i.
    piped = subprocess.run([AG_BIN, "exec", "-i", job_id, "--", "wc", "-c"], input=b"x" * 300000, env=c.env,
                           capture_output=True, timeout=60)
    assert piped.returncode == 0 and piped.stdout.strip() == b"300000", piped
    # Each is on record.
    entries = c.ag_json("audit")["entries"]
    assert any(e["action"].startswith(f"exec {job_id} task 1: sh -c") and e["outcome"] == "ok" for e in entries)


def test_exec_refuses_bad_requests_with_the_reason(cluster):
    c = cluster
    job_id = running_job(c)
    missing = c.ag("exec", job_id, "--", "no-such-command-here", check=False)
    assert missing.returncode == 127 and "no-such-command-here: command not found" in missing.stderr, missing
    outside = c.ag("exec", job_id, "--task-index", "3", "--", "true", check=False)
    assert outside.returncode != 0 and "outside job" in outside.stderr and "gang of 1" in outside.stderr
    nothing = c.ag("exec", job_id, check=False)
    assert nothing.returncode == 2 and "give the command to run after `--`" in nothing.stderr
    unknown = c.ag("exec", "job_000000000000", "--", "true", check=False)
    assert unknown.returncode != 0 and "no job with id" in unknown.stderr
    c.ag("stop-job", job_id)
    c.wait_state(job_id, ["STOPPED"], timeout=30)
    ended = c.ag("exec", job_id, "--", "true", check=False)
    assert ended.returncode != 0 and "is STOPPED" in ended.stderr, ended.stderr


def test_another_users_job_is_refused(cluster):
    c = cluster
    alice, bob = (c.ag_json("user", "add", name)["token"] for name in ("alice", "bob"))
    proc = c.ag("submit", "--no-wait", "--", "sleep", "120", env={"AG_TOKEN": alice})
    job_id = proc.stdout.strip().splitlines()[-1]
    c.job_ids.add(job_id)
    wait_until(lambda: c.job(job_id)["attempts"] and c.job(job_id)["attempts"][-1]["tasks"][0]["state"] == "RUNNING",
               30, message="the task to run")
    refused = c.ag("exec", job_id, "--", "true", check=False, env={"AG_TOKEN": bob})
    assert refused.returncode != 0 and "belongs to alice" in refused.stderr, refused.stderr
    assert c.ag("exec", job_id, "--", "true", check=False, env={"AG_TOKEN": alice}).returncode == 0
    entries = c.ag_json("audit")["entries"]
    assert any(e["actor"] == "bob" and e["action"].startswith(f"exec {job_id}") and "belongs to alice" in e["outcome"]
               for e in entries), entries


def test_a_client_that_goes_away_ends_the_command(cluster, tmp_path):
    c = cluster
    job_id = running_job(c)
    pid_file = tmp_path / "exec.pid"
    client = subprocess.Popen([AG_BIN, "exec", job_id, "--", "sh", "-c", f"echo $$ > {pid_file}; exec sleep 300"],
                              env=c.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 20, message="the command to start")
        remote = int(pid_file.read_text())
        assert pid_alive(remote)
        client.kill()
        client.wait(10)
        wait_until(lambda: not pid_alive(remote), 15, message="the command to end after its client left")
    finally:
        if client.poll() is None:
            client.kill()
