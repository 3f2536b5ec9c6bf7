"""Tests of aethergrid.JobSubmissionClient, Ray Jobs' client on AetherGrid, over real
daemons (the cluster fixtures of conftest.py).

The SDK is imported in-process from <repo>/python; the Ray-style script runs as a
subprocess with PYTHONPATH pointing there. Every wait has a deadline.
"""
import asyncio
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import PYTHON, REPO, wait_until

SDK_PATH = str(REPO / "python")
if SDK_PATH not in sys.path:
    sys.path.insert(0, SDK_PATH)

import aethergrid as ag  # noqa: E402
from aethergrid import JobStatus, JobSubmissionClient  # noqa: E402
from aethergrid.ray_compat import (JobConflictError, JobDetails, JobNotFoundError,  # noqa: E402
                                   JobSubmissionValueError)

TERMINAL = {JobStatus.SUCCEEDED, JobStatus.STOPPED, JobStatus.FAILED}


def ray_client(cluster, **kwargs):
    """A JobSubmissionClient on the cluster's dashboard port, as Ray users address it."""
    return JobSubmissionClient(f"http://127.0.0.1:{cluster.dashboard_port}", token=cluster.token, **kwargs)


def wait_status(client, job_id, statuses=TERMINAL, timeout=60):
    return wait_until(lambda: (s := client.get_job_status(job_id)) in statuses and s, timeout,
                      message=f"job {job_id} to reach {statuses}")


def python_on_path(cluster_factory, tmp_path):
    """A cluster whose tasks find `python` on PATH (as on a machine with python-is-python3),
    so that a Ray script's "python script.py" runs unchanged."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(PYTHON, bin_dir / "python")
    c = cluster_factory("ray", start_head=False)
    c.env["PATH"] = f"{bin_dir}{os.pathsep}{c.env.get('PATH', '')}"
    return c.start()


# ---- a Ray Jobs script, unchanged but for its import line --------------------------------

RAY_SCRIPT = '''\
from ray.job_submission import JobSubmissionClient, JobStatus
import time

# If using a remote cluster, replace 127.0.0.1 with the head node's IP address.
client = JobSubmissionClient("http://127.0.0.1:8265")
job_id = client.submit_job(
    # Entrypoint shell command to execute
    entrypoint="python script.py",
    # Path to the local directory that contains the script.py file
    runtime_env={"working_dir": "./", "env_vars": {"GREETING": "hello world"}},
)
print(job_id)


def wait_until_status(job_id, status_to_wait_for, timeout_seconds=60):
    start = time.time()
    while time.time() - start <= timeout_seconds:
        status = client.get_job_status(job_id)
        print(f"status: {status}")
        if status in status_to_wait_for:
            break
        time.sleep(1)


wait_until_status(job_id, {JobStatus.SUCCEEDED, JobStatus.STOPPED, JobStatus.FAILED})
logs = client.get_job_logs(job_id)
print(logs)
'''

TASK_SCRIPT = '''\
import os
print(os.environ["GREETING"], "from", os.path.basename(os.getcwd()) != "", flush=True)
print("data:", open("data.txt").read().strip())
'''


def test_ray_quickstart_script_runs_with_only_the_import_changed(cluster_factory, tmp_path):
    cluster = python_on_path(cluster_factory, tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (project / "script.py").write_text(TASK_SCRIPT)
    (project / "data.txt").write_text("shipped with working_dir\n")
    original = "from ray.job_submission import JobSubmissionClient, JobStatus\n"
    assert RAY_SCRIPT.startswith(original)
    script = RAY_SCRIPT.replace(original, "from aethergrid import JobSubmissionClient, JobStatus\n", 1)
    # The one other difference: this test's head listens on a free port, not on 8265.
    script = script.replace("127.0.0.1:8265", f"127.0.0.1:{cluster.dashboard_port}")
    assert script.count("\n") == RAY_SCRIPT.count("\n")
    (project / "submit.py").write_text(script)

    env = dict(cluster.env)  # the session of this cluster: its token, as on the head machine
    env["PYTHONPATH"] = SDK_PATH
    proc = subprocess.run([PYTHON, "submit.py"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    lines = proc.stdout.splitlines()
    submission_id = lines[0]
    assert re.fullmatch(r"raysubmit_[A-Za-z0-9]{16}", submission_id), proc.stdout
    statuses = [line for line in lines if line.startswith("status: ")]
    assert statuses and statuses[-1] == "status: SUCCEEDED", proc.stdout
    assert "hello world from True" in proc.stdout
    assert "data: shipped with working_dir" in proc.stdout

    # The head knows it as an AetherGrid job under that submission id.
    (job,) = cluster.jobs()
    info = cluster.job(job["job_id"])
    assert info["state"] == "SUCCEEDED"
    assert info["spec"]["submission_id"] == submission_id
    assert info["spec"]["runtime_env"]["working_dir"].startswith("sha256:")


# ---- each method ------------------------------------------------------------------------

def test_submit_maps_resources_metadata_and_runtime_env(cluster):
    client = ray_client(cluster, metadata={"team": "vision", "owner_note": "default"})
    before_ms = int(time.time() * 1000)
    returned = client.submit_job(
        entrypoint="sh -c 'echo cpus=$CPUS_SEEN; echo $GREETING'",
        submission_id="my-run-1",
        runtime_env={"env_vars": {"GREETING": "hi there", "CPUS_SEEN": "yes"}},
        entrypoint_num_cpus=0.5,
        entrypoint_memory=64 << 20,
        metadata={"owner_note": "mine", "job_name": "nightly"},
    )
    assert returned == "my-run-1"
    wait_status(client, returned)
    details = client.get_job_info(returned)
    assert isinstance(details, JobDetails)
    assert details.type == "SUBMISSION"
    assert details.submission_id == "my-run-1"
    assert details.job_id.startswith("job_") and details.job_id != "my-run-1"
    assert details.status == JobStatus.SUCCEEDED and details.status == "SUCCEEDED"
    assert details.entrypoint == "sh -c 'echo cpus=$CPUS_SEEN; echo $GREETING'"
    assert details.message == "Job finished successfully."
    assert details.error_type is None
    assert details.driver_info is None
    assert details.driver_exit_code == 0
    assert details.driver_node_id
    assert before_ms <= details.start_time <= details.end_time <= int(time.time() * 1000)
    # The client's metadata, then the job's (which wins).
    assert details.metadata == {"team": "vision", "owner_note": "mine", "job_name": "nightly"}
    assert details.runtime_env["env_vars"] == {"GREETING": "hi there", "CPUS_SEEN": "yes"}
    assert (details.entrypoint_num_cpus, details.entrypoint_num_gpus, details.entrypoint_memory) == \
        (0.5, 0, 64 << 20)
    assert details.num_workers == 1 and details.name == "nightly" and details.owner == "admin"

    # The same job through the REST API: per-task resources, labels, name.
    info = cluster.job(details.job_id)
    assert info["spec"]["task_options"]["num_cpus"] == 0.5
    assert info["spec"]["task_options"]["memory"] == 64 << 20
    assert info["labels"]["team"] == "vision" and info["name"] == "nightly"
    # Both ids work everywhere.
    assert client.get_job_logs("my-run-1") == client.get_job_logs(details.job_id) == "cpus=yes\nhi there\n"
    assert client.get_job_status(details.job_id) == JobStatus.SUCCEEDED


def test_submission_ids_fresh_idempotent_and_conflicting(cluster):
    client = ray_client(cluster)
    first = client.submit_job(entrypoint="true")
    second = client.submit_job(entrypoint="true")
    assert re.fullmatch(r"raysubmit_[A-Za-z0-9]{16}", first) and first != second
    # A repeated submit with the same id and arguments is the same job (Ray would refuse).
    again = client.submit_job(entrypoint="echo same", submission_id="fixed-id")
    assert client.submit_job(entrypoint="echo same", submission_id="fixed-id") == again == "fixed-id"
    assert len(cluster.jobs()) == 3
    # The same id for another job: refused, as a RuntimeError like Ray's.
    with pytest.raises(JobConflictError) as info:
        client.submit_job(entrypoint="echo other", submission_id="fixed-id")
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ag.AGConflictError)
    assert "fixed-id" in str(info.value)
    assert len(cluster.jobs()) == 3
    # job_id= is Ray's old name for submission_id.
    assert client.submit_job(entrypoint="true", job_id="old-style") == "old-style"
    assert client.get_job_info("old-style").submission_id == "old-style"
    for sid in (first, second, "fixed-id", "old-style"):
        assert wait_status(client, sid) == JobStatus.SUCCEEDED


def test_unknown_job_raises_not_found_that_is_a_runtime_error(cluster):
    client = ray_client(cluster)
    calls = (client.get_job_status, client.get_job_info, client.get_job_logs, client.stop_job,
             client.delete_job)
    for call in calls:
        with pytest.raises(JobNotFoundError) as info:
            call("raysubmit_doesnotexist")
        assert isinstance(info.value, RuntimeError) and isinstance(info.value, ag.AGNotFoundError)
        assert info.value.status == 404
        assert "Job raysubmit_doesnotexist does not exist" in str(info.value)

    async def tail():
        return [chunk async for chunk in client.tail_job_logs("job_doesnotexist0")]

    with pytest.raises(JobNotFoundError, match="job_doesnotexist0"):
        asyncio.run(tail())


def test_failed_job_says_why(cluster):
    client = ray_client(cluster)
    sid = client.submit_job(entrypoint="sh -c 'echo about to fail; exit 3'")
    assert wait_status(client, sid) == JobStatus.FAILED
    details = client.get_job_info(sid)
    assert details.status == JobStatus.FAILED
    assert details.error_type == "JOB_ENTRYPOINT_COMMAND_ERROR"
    assert details.driver_exit_code == 3
    assert "3" in details.message and "about to fail" in details.message
    assert details.end_time >= details.start_time
    assert client.get_job_logs(sid) == "about to fail\n"


def test_list_jobs_gives_details_of_every_job(cluster):
    client = ray_client(cluster)
    assert client.list_jobs() == []
    ids = [client.submit_job(entrypoint=f"echo {i}", metadata={"i": str(i)}) for i in range(3)]
    for sid in ids:
        wait_status(client, sid)
    jobs = client.list_jobs()
    assert all(isinstance(j, JobDetails) and j.type == "SUBMISSION" for j in jobs)
    assert sorted(j.submission_id for j in jobs) == sorted(ids)
    by_sid = {j.submission_id: j for j in jobs}
    for i, sid in enumerate(ids):
        assert by_sid[sid].status == JobStatus.SUCCEEDED
        assert by_sid[sid].metadata == {"i": str(i)}
        assert by_sid[sid].entrypoint == f"echo {i}"
        assert by_sid[sid].runtime_env == {}
    assert jobs[0].dict()["status"] == "SUCCEEDED"


def test_list_jobs_follows_the_heads_pages(head_only):
    # The head answers GET /api/jobs 1,000 jobs at a time; every job is listed.
    client = ag.Client(head_only.address, token=head_only.token)
    specs = [{"entrypoint": "true", "hold": True, "allow_unschedulable": True} for _ in range(1005)]
    submitted = client.submit_jobs(specs)
    assert len(submitted) == 1005
    listed = client.list_jobs()
    assert len(listed) == 1005
    assert {j["job_id"] for j in listed} == {j.job_id for j in submitted}
    assert len(client.list_jobs(state="PENDING")) == 1005


def test_stop_and_delete(cluster):
    client = ray_client(cluster)
    sid = client.submit_job(entrypoint="sleep 300")
    wait_status(client, sid, {JobStatus.RUNNING}, timeout=30)
    # A running job cannot be deleted: Ray raises, so does this, saying what to do.
    with pytest.raises(JobConflictError) as info:
        client.delete_job(sid)
    assert isinstance(info.value, RuntimeError)
    assert "RUNNING" in str(info.value) and "stop_job()" in str(info.value)
    assert client.stop_job(sid) is True
    assert wait_status(client, sid, timeout=30) == JobStatus.STOPPED
    details = client.get_job_info(sid)
    assert details.error_type is None and details.end_time is not None
    # Already ended: nothing to stop.
    assert client.stop_job(sid) is False
    assert client.delete_job(sid) is True
    with pytest.raises(JobNotFoundError):
        client.get_job_status(sid)
    assert cluster.jobs() == []

    # A pending job is stopped too.
    pending = client.submit_job(entrypoint="true", entrypoint_num_cpus=64, allow_unschedulable=True)
    assert client.get_job_status(pending) == JobStatus.PENDING
    assert client.get_job_info(pending).message  # the head says why it waits
    assert client.stop_job(pending) is True
    assert wait_status(client, pending, timeout=10) == JobStatus.STOPPED


@pytest.mark.parametrize("how", ["metadata", "keyword"])
def test_gang_from_metadata_or_keyword(cluster, how):
    client = ray_client(cluster)
    command = "sh -c 'echo rank $RANK of $WORLD_SIZE'"
    if how == "metadata":
        sid = client.submit_job(entrypoint=command, metadata={"num_workers": "2"})
    else:
        sid = client.submit_job(entrypoint=command, num_workers=2)
    assert wait_status(client, sid) == JobStatus.SUCCEEDED
    details = client.get_job_info(sid)
    assert details.num_workers == 2
    assert cluster.job(details.job_id)["num_workers"] == 2
    logs = client.get_job_logs(sid)
    assert sorted(logs.splitlines()) == ["[rank 0] rank 0 of 2", "[rank 1] rank 1 of 2"]


def test_gang_size_disagreement_and_bad_values_are_refused(head_only):
    client = ray_client(head_only)
    with pytest.raises(JobSubmissionValueError, match="disagree"):
        client.submit_job(entrypoint="true", num_workers=2, metadata={"num_workers": "3"})
    with pytest.raises(ValueError, match="whole number"):
        client.submit_job(entrypoint="true", metadata={"num_workers": "two"})
    with pytest.raises(ValueError, match="whole GPUs"):
        client.submit_job(entrypoint="true", entrypoint_num_gpus=0.5)
    with pytest.raises(ValueError, match="strings"):
        client.submit_job(entrypoint="true", metadata={"n": 3})
    with pytest.raises(TypeError, match="unexpected keyword"):
        client.submit_job(entrypoint="true", num_cpus=2)
    assert head_only.jobs() == []


def test_tail_job_logs_with_asyncio(cluster):
    client = ray_client(cluster)
    script = "import time\nfor i in range(6):\n    print('line', i, flush=True)\n    time.sleep(0.4)\n"
    sid = client.submit_job(entrypoint=f"{PYTHON} -c \"{script}\"")

    async def follow():
        chunks = []
        async for lines in client.tail_job_logs(sid):
            chunks.append((time.monotonic(), lines))
        return chunks

    started = time.monotonic()
    chunks = asyncio.run(asyncio.wait_for(follow(), 60))
    assert "".join(c for _, c in chunks) == "".join(f"line {i}\n" for i in range(6))
    # Output came while the job ran, not all at its end, and the iterator ended with it.
    assert len(chunks) >= 3, chunks
    assert chunks[-1][0] - chunks[0][0] >= 1.0
    assert client.get_job_status(sid) == JobStatus.SUCCEEDED
    assert time.monotonic() - started < 30


def test_tail_job_logs_of_a_gang_interleaves_ranks(cluster):
    client = ray_client(cluster)
    command = "sh -c 'for i in 1 2 3; do echo r$RANK-$i; sleep 0.3; done'"
    sid = client.submit_job(entrypoint=command, num_workers=2)

    async def follow():
        return [lines async for lines in client.tail_job_logs(sid)]

    chunks = asyncio.run(asyncio.wait_for(follow(), 60))
    lines = "".join(chunks).splitlines()
    assert sorted(lines) == sorted(f"[rank {r}] r{r}-{i}" for r in (0, 1) for i in (1, 2, 3))
    for r in (0, 1):
        mine = [line for line in lines if line.startswith(f"[rank {r}]")]
        assert mine == [f"[rank {r}] r{r}-{i}" for i in (1, 2, 3)]
    assert len(chunks) >= 2, chunks
    assert client.get_job_status(sid) == JobStatus.SUCCEEDED


def test_leaving_tail_job_logs_early_does_not_hold_up_the_loop(cluster):
    client = ray_client(cluster)
    sid = client.submit_job(entrypoint="sh -c 'echo first; sleep 300'")

    async def first_chunk():
        async for lines in client.tail_job_logs(sid):
            return lines

    started = time.monotonic()
    assert asyncio.run(asyncio.wait_for(first_chunk(), 30)) == "first\n"
    # The thread left in its long poll does not keep asyncio.run from returning.
    assert time.monotonic() - started < 10
    assert client.get_job_status(sid) == JobStatus.RUNNING
    assert client.stop_job(sid) is True


@pytest.mark.parametrize("key, value, alternatives", [
    ("pip", ["requests==2.26.0"], ["{'python': {'executable': '/path/venv/bin/python'}}", "--python",
                                   "image_uri", "--image"]),
    ("uv", ["requests"], ["{'python': {'executable': '/path/venv/bin/python'}}", "--image"]),
    ("conda", {"dependencies": ["numpy"]}, ["{'python': {'executable': '/path/venv/bin/python'}}",
                                            "--python", "--image"]),
    ("py_modules", ["./mylib"], ["working_dir", "PYTHONPATH"]),
    ("container", {"image": "rayproject/ray:2.9.0"}, ["image_uri", "--image"]),
    ("config", {"setup_timeout_seconds": 60}, ["leave 'config' out"]),
    ("nsight", "default", ["working_dir", "env_vars", "py_executable", "image_uri"]),
])
def test_unsupported_runtime_env_keys_are_refused_naming_the_alternative(head_only, key, value, alternatives):
    client = ray_client(head_only)
    with pytest.raises(JobSubmissionValueError) as info:
        client.submit_job(entrypoint="python script.py",
                          runtime_env={"working_dir": "/nonexistent", key: value})
    error = info.value
    assert isinstance(error, ValueError) and isinstance(error, ag.AGValidationError)
    assert error.field == f"runtime_env.{key}"
    message = str(error)
    assert f"runtime_env[{key!r}] is not supported by AetherGrid" in message
    for alternative in alternatives:
        assert alternative in message, message
    assert head_only.jobs() == []


def test_other_refusals_name_the_alternative(head_only):
    client = ray_client(head_only)
    with pytest.raises(JobSubmissionValueError) as info:
        client.submit_job(entrypoint="true", entrypoint_resources={"accelerator_type:A100": 1})
    assert "--constraint" in str(info.value) and "--label" in str(info.value)
    assert "entrypoint_label_selector" in str(info.value)
    with pytest.raises(ValueError, match="remote URI"):
        client.submit_job(entrypoint="true", runtime_env={"working_dir": "s3://bucket/code.zip"})
    with pytest.raises(ValueError, match="max_retries"):
        client.submit_job(entrypoint="true", retry_policy={"max_retries": 2})
    with pytest.raises(ValueError, match="equal value"):
        client.submit_job(entrypoint="true", entrypoint_label_selector={"zone": "!a"})
    assert head_only.jobs() == []


def test_ray_names_map_to_aethergrid_fields(cluster):
    client = ray_client(cluster)
    sid = client.submit_job(entrypoint="python -c 'import sys; print(sys.executable)'",
                            runtime_env={"py_executable": PYTHON, "excludes": ["*.tmp"]},
                            entrypoint_label_selector={"zone": "a"}, allow_unschedulable=True)
    info = cluster.job(client.get_job_info(sid).job_id)
    assert info["spec"]["runtime_env"]["python"] == {"executable": PYTHON}
    assert info["spec"]["constraints"] == {"zone": "a"}
    assert info["state"] == "PENDING"  # no node has the label zone=a
    assert client.stop_job(sid) is True

    sid = client.submit_job(entrypoint="python -c 'import sys; print(sys.executable)'",
                            runtime_env={"py_executable": PYTHON})
    assert wait_status(client, sid) == JobStatus.SUCCEEDED
    assert client.get_job_logs(sid).strip() in (PYTHON, os.path.realpath(PYTHON))

    sid = client.submit_job(entrypoint="true", runtime_env={"image_uri": "docker.io/library/busybox:1"},
                            allow_unschedulable=True)
    info = cluster.job(client.get_job_info(sid).job_id)
    assert info["spec"]["runtime_env"]["image"] == "docker.io/library/busybox:1"
    client.stop_job(sid)


def test_addresses_and_credentials(cluster, monkeypatch):
    for address in (f"http://127.0.0.1:{cluster.dashboard_port}", f"127.0.0.1:{cluster.dashboard_port}",
                    f"http://127.0.0.1:{cluster.port}", cluster.address):
        assert JobSubmissionClient(address, token=cluster.token).list_jobs() == []
    # Ray's way to pass a token: an Authorization header.
    headers = {"Authorization": f"Bearer {cluster.token}"}
    client = JobSubmissionClient(f"http://127.0.0.1:{cluster.dashboard_port}", headers=headers)
    assert client.client.address == f"127.0.0.1:{cluster.dashboard_port}"
    assert client.list_jobs() == []
    with pytest.raises(ag.AGAuthError):
        JobSubmissionClient(cluster.address, headers={"Authorization": "Bearer wrong"}).list_jobs()
    # No address: RAY_ADDRESS when it is an HTTP address, as Ray reads it.
    monkeypatch.setenv("RAY_ADDRESS", f"http://127.0.0.1:{cluster.dashboard_port}")
    monkeypatch.setenv("AG_TOKEN", cluster.token)
    assert JobSubmissionClient().client.address == f"127.0.0.1:{cluster.dashboard_port}"
    with pytest.raises(ValueError, match="Ray Client or auto address"):
        JobSubmissionClient("ray://127.0.0.1:10001")
    with pytest.raises(ValueError, match="cookies"):
        JobSubmissionClient(cluster.address, cookies={"session": "x"})
    with pytest.raises(ValueError, match="only 'Authorization: Bearer TOKEN'"):
        JobSubmissionClient(cluster.address, headers={"X-Custom": "1"})
    # An existing ag.Client can be wrapped.
    wrapped = JobSubmissionClient(client=ag.Client(cluster.address, token=cluster.token))
    sid = wrapped.submit_job(entrypoint="echo wrapped")
    assert wait_status(wrapped, sid) == JobStatus.SUCCEEDED
    assert client.get_job_logs(sid) == "wrapped\n"


def test_job_status_is_rays_str_enum():
    assert JobStatus.SUCCEEDED == "SUCCEEDED" and "FAILED" == JobStatus.FAILED
    assert str(JobStatus.RUNNING) == "RUNNING" and f"{JobStatus.STOPPED}" == "STOPPED"
    assert JobStatus("PENDING") is JobStatus.PENDING
    assert [s.value for s in JobStatus] == ["PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"]
    assert {s for s in JobStatus if s.is_terminal()} == TERMINAL
    assert JobStatus.SUCCEEDED in {"SUCCEEDED"}
