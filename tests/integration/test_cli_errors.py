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
