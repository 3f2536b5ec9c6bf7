"""One clear line per mistake (issue 32): an unknown command says which one was meant
(what users of other schedulers type, or the nearest spelling) or lists the commands;
a job id given to `ag stop` points to `ag stop-job` and stops nothing. Each exits 2
with `error:` and, with -o json, is JSON on stdout."""
import json


def test_unknown_commands_name_the_command_meant(head_only):
    for typed, meant in (("cancel", "stop-job"), ("squeue", "list-jobs"), ("sumbit", "submit"), ("sbatch", "submit")):
        proc = head_only.ag(typed, "x", check=False)
        assert proc.returncode == 2, proc
        assert proc.stderr == f"error: unknown command '{typed}': did you mean `ag {meant}`?\n", proc.stderr


def test_an_unknown_command_far_from_any_lists_them(head_only):
    proc = head_only.ag("frobnicate", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: unknown command 'frobnicate'; the commands are: "), proc.stderr
    assert "submit" in proc.stderr and "stop-job" in proc.stderr and "doctor" in proc.stderr
    as_json = head_only.ag("-o", "json", "frobnicate", check=False)
    assert json.loads(as_json.stdout)["error"].startswith("unknown command 'frobnicate'")


def test_a_job_id_given_to_ag_stop_points_to_stop_job_and_stops_nothing(cluster):
    job_id, _ = cluster.submit("--no-wait", "--", "sleep 30")
    proc = cluster.ag("stop", job_id, check=False)
    assert proc.returncode == 2, proc
    assert proc.stderr == (f"error: `ag stop` stops the daemons started on this machine and takes no job; "
                           f"to stop a job: ag stop-job {job_id}\n"), proc.stderr
    assert cluster.head_pid() is not None and {n["state"] for n in cluster.nodes()} == {"ALIVE"}
    cluster.wait_state(job_id, "RUNNING")


def test_durations_and_sizes_take_units_and_a_bad_one_is_one_line(head_only):
    # Units wherever a duration or a size is typed; a number alone keeps the flag's unit.
    job_id, _ = head_only.submit("--timeout", "2h", "--retry-delay", "1.5s", "--memory", "512Mi",
                                 "--allow-unschedulable", "--no-wait", "--", "true")
    spec = head_only.job(job_id)["spec"]
    assert spec["timeout"] == 7200 and spec["retry_delay"] == 1.5, spec
    assert spec["task_options"]["memory"] == 512 << 20, spec
    head_only.ag("stop-job", job_id)
    before = head_only.api("GET", "/api/jobs")[1]["total"]
    for flags, said in (
            (["--timeout", "2x"], "--timeout: '2x' is not a duration: use 90s, 15m, 2h or 1d (a number alone is "
                                  "seconds)"),
            (["--timeout", "0"], "--timeout: 0 is too short: give from 1s to 90d (leave --timeout out for no limit)"),
            (["--retry-delay", "1h"], "--retry-delay: 1h is too long: give from 0s to 10m"),
            (["--memory", "4x"], "--memory: '4x' is not a size: use bytes or a number with K, M, G or T (1048576, "
                                 "512K, 100M, 1.5G; powers of 1024)")):
        proc = head_only.ag("submit", *flags, "--", "true", check=False)
        assert proc.returncode == 2, proc
        assert proc.stderr == f"error: {said}\n", proc.stderr
    assert head_only.api("GET", "/api/jobs")[1]["total"] == before, "nothing was submitted"
    proc = head_only.ag("token", "create", "--join", "--ttl", "3x", check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --ttl: '3x' is not a duration"), proc.stderr


def test_ag_stop_says_it_stops_this_machines_daemons_and_their_tasks(cluster_factory):
    c = cluster_factory("stop-warns")
    job_id, _ = c.submit("--no-wait", "--", "sleep 60")
    c.wait_tasks_running(job_id)
    proc = c.ag("stop", "--timeout", "10")
    assert proc.stderr.startswith("stopping the 3 AetherGrid daemon(s) started from this machine ("), proc.stderr
    assert "; their 1 running task(s) are stopped with them; to stop one job instead: ag stop-job JOB_ID" \
        in proc.stderr, proc.stderr
    assert "stopped head" in proc.stdout


def test_a_rest_parameter_error_is_said_in_the_flags_terms(cluster):
    job_id, _ = cluster.submit("-n", "2", "--", "echo hi")
    proc = cluster.ag("logs", job_id, "--task-index", "5", check=False)
    assert proc.returncode == 1, proc
    assert proc.stderr == "error: --task-index: the job has tasks 0-1 (got 5)\n", proc.stderr
