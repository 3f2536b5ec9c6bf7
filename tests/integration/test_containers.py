"""Jobs in container images: `runtime_env.image`, mounts, limits and lifecycle, over
real daemons and the real engine (Debian's podman with runc; images built from Debian
packages by images.py, no registry).

The workers get `--allow-mount` for a data folder of the test; each task's container is
`ag-JOB-ATTEMPT-TASK`, and every test checks that none is left behind.
"""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, WORKER_IPS, free_ports, job_cgroups, pid_alive, wait_until
from images import ensure_image


@pytest.fixture(scope="module")
def python_image():
    return ensure_image("python")


@pytest.fixture(scope="module")
def torch_image():
    return ensure_image("torch")


def containers_of(job_id):
    """Names of the engine's containers (running or not) for `job_id`'s tasks."""
    out = subprocess.run(["podman", "ps", "--all", "--format", "{{.Names}}"], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    return [name for name in out if name.startswith(f"ag-{job_id}-")]


@pytest.fixture
def data_dir(tmp_path):
    d = tmp_path / "shared-data"
    d.mkdir()
    (d / "sample.txt").write_text("rows=42\n")
    return d


@pytest.fixture
def ccluster(cluster_factory, data_dir):
    """Two workers that run containers and allow mounting `data_dir`; containers of its
    jobs are removed after the test whatever happened."""
    c = cluster_factory("containers", workers=())
    for ip in WORKER_IPS:
        c.start_worker(ip, options=("--allow-mount", str(data_dir)))
    wait_until(lambda: len(c.nodes()) == 2, 20, message="both workers to join")
    yield c
    for job_id in c.job_ids:
        for name in containers_of(job_id):
            subprocess.run(["podman", "rm", "--force", name], capture_output=True, timeout=60)


def cgroups_of(job_id):
    """Control groups left for `job_id`'s tasks in any hierarchy (the task's own, and
    those its engine made below it)."""
    hierarchies = [entry.path for entry in os.scandir("/sys/fs/cgroup") if entry.is_dir()]
    return job_cgroups(hierarchies, job_id)


def no_containers_left(job_id):
    wait_until(lambda: not containers_of(job_id), 20, message=f"the containers of {job_id} to be removed")
    wait_until(lambda: not cgroups_of(job_id), 20, message=f"the control groups of {job_id} to be removed")


def test_nodes_report_their_engine_and_what_they_allow_to_mount(ccluster, data_dir):
    for node in ccluster.nodes():
        assert node["container_engine"].startswith("podman "), node
        assert node["allowed_mounts"] == [str(data_dir)], node
    table = ccluster.ag("list-nodes").stdout
    assert "CONTAINERS" in table.splitlines()[0] and table.count("podman ") == 2, table


def test_a_job_runs_in_its_image_with_the_whole_task_environment(ccluster, python_image):
    job_id, proc = ccluster.submit(
        "--image", python_image, "--env", "PATH=/opt/tools/bin:$PATH", "--env", "GREETING=hi",
        "--", "test -f /run/.containerenv && echo in-container; echo PATH=$PATH; "
              "echo RANK=$RANK WORLD_SIZE=$WORLD_SIZE MASTER=$MASTER_ADDR:$MASTER_PORT; echo GREETING=$GREETING; "
              "echo CWD=$(pwd); env | grep -c -E '^AG_(TOKEN|JOIN)' || true")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "in-container" in out
    # $PATH expands against the image's environment, not the node's.
    assert "PATH=/opt/tools/bin:/usr/local/bin:/usr/bin:/bin\n" in out, out
    assert "RANK=0 WORLD_SIZE=1 MASTER=127.0.0.2:" in out or "RANK=0 WORLD_SIZE=1 MASTER=127.0.0.3:" in out, out
    assert "GREETING=hi" in out
    assert f"CWD={ccluster.worker_data_dir('127.0.0.2')}" in out or f"CWD={ccluster.worker_data_dir('127.0.0.3')}" in out
    assert out.rstrip().endswith("0"), "no cluster credential in the container's environment"
    no_containers_left(job_id)


def test_image_working_dir_env_vars_and_mounts_together_through_the_sdk(ccluster, python_image, data_dir, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(
        "import os\n"
        "print('data', open('/data/sample.txt').read().strip())\n"
        "print('mode', os.environ['MODE'])\n"
        "try:\n    open('/data/new.txt', 'w')\nexcept OSError as e:\n    print('read-only', e.errno)\n"
        "open('/scratch/out.txt', 'w').write('written from rank ' + os.environ['RANK'])\n")
    scratch = data_dir / "scratch"
    scratch.mkdir()
    scratch.chmod(0o777)  # the container runs as the job owner's account, which writes here
    script = f"""
import sys
sys.path.insert(0, {str(REPO / 'python')!r})
from aethergrid import Client
c = Client({ccluster.address!r}, token={ccluster.token!r})
job = c.submit_job("python3 job.py", runtime_env={{
    "image": {python_image!r}, "working_dir": {str(code)!r}, "env_vars": {{"MODE": "eval"}},
    "mounts": [{{"source": {str(data_dir)!r}, "target": "/data", "read_only": True}},
               "{scratch}:/scratch"]}})
print(job.job_id)
print(job.wait(timeout=60))
print(job.get_logs())
"""
    proc = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True, timeout=120,
                          env=ccluster.env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = proc.stdout.split()[0]
    ccluster.job_ids.add(job_id)
    assert "SUCCEEDED" in proc.stdout, proc.stdout
    assert "data rows=42" in proc.stdout and "mode eval" in proc.stdout and "read-only 30" in proc.stdout, proc.stdout
    assert (scratch / "out.txt").read_text() == "written from rank 0"
    spec = ccluster.job(job_id)["spec"]["runtime_env"]
    assert spec["mounts"] == [{"source": str(data_dir), "target": "/data", "read_only": True},
                              {"source": str(scratch), "target": "/scratch", "read_only": False}], spec
    no_containers_left(job_id)


def test_the_ddp_example_runs_in_containers_on_two_workers(ccluster, torch_image):
    job_id, proc = ccluster.submit("-n", 2, "--placement", "spread", "--image", torch_image, "--working-dir",
                                   str(REPO / "examples"), "--all-ranks", "--env", "EPOCHS=2",
                                   "--", "python3 train.py", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = ccluster.job(job_id)
    nodes = {t["node_address"] for t in job["attempts"][0]["tasks"]}
    assert nodes == set(WORKER_IPS), job  # one rank on each node, talking over gloo
    assert "[rank 1]" in proc.stdout and "[rank 0]" in proc.stdout, proc.stdout
    assert "[rank 0] Epoch 1, Loss" in proc.stdout, proc.stdout
    assert "[rank 1] [Rank 1] Training finished" in proc.stdout, proc.stdout
    no_containers_left(job_id)


def test_a_job_for_an_image_waits_for_a_node_that_runs_containers(cluster_factory, python_image):
    c = cluster_factory("no-engine", workers=())
    c.start_worker(WORKER_IPS[0], options=("--container-engine", "none"))
    wait_until(lambda: len(c.nodes()) == 1, 20, message="the worker to join")
    assert c.nodes()[0]["container_engine"] == ""
    job_id, _ = c.submit("--no-wait", "--image", python_image, "--", "echo from-the-image")
    wait_until(lambda: "can run containers" in c.job(job_id).get("message", ""), 20,
               message="the pending reason")
    job = c.job(job_id)
    assert job["state"] == "PENDING", job
    assert "no alive node can run containers; install podman (or docker) on the workers" in job["message"], job
    assert "can run containers" in c.ag("status", job_id).stdout
    # A node with an engine joins: the job runs there.
    c.start_worker(WORKER_IPS[1])
    job = c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=60)
    assert job["state"] == "SUCCEEDED", job
    assert job["attempts"][0]["tasks"][0]["node_address"] == WORKER_IPS[1]
    no_containers_left(job_id)


def test_an_image_no_node_has_fails_with_the_node_the_image_and_the_engines_words(ccluster):
    job_id, proc = ccluster.submit("--image", "localhost/aethergrid-no-such-image:1", "--", "echo never")
    assert proc.returncode != 0
    job = ccluster.wait_state(job_id, ("FAILED",))
    message = job["message"]
    assert "cannot run image localhost/aethergrid-no-such-image:1: podman could not pull" in message, message
    assert "node node_" in message, message
    assert "could not start" in message, message
    events = " ".join(e["message"] for e in ccluster.api("GET", f"/api/jobs/{job_id}/events")[1]["events"])
    assert "pulling localhost/aethergrid-no-such-image:1 with podman" in events, events
    assert "never" not in ccluster.ag("logs", job_id).stdout
    no_containers_left(job_id)


@pytest.mark.parametrize("image, complaint", [
    ("Ubuntu:22.04", "malformed name part 'Ubuntu'"),
    ("debian:bad tag", "holds a space"),
    ("registry.example/x@sha256:zz", "malformed digest"),
    ("-rm", "starts with '-'"),
])
def test_malformed_image_references_are_refused_at_submit(ccluster, image, complaint):
    proc = ccluster.ag("submit", "--image", image, "--", "true", check=False)
    assert proc.returncode != 0
    assert "--image (runtime_env.image)" in proc.stderr and complaint in proc.stderr, proc.stderr
    assert "e.g. docker.io/library/python:3.11" in proc.stderr, proc.stderr
    assert ccluster.jobs() == []


def test_mounts_are_checked_at_submit_with_what_to_do(ccluster, python_image, data_dir):
    cases = [
        ("/etc:/host-etc:ro", "allows mounting /etc; start the workers with `--allow-mount /etc`"),
        ("data:/data", "'data' is not an absolute path"),
        (f"{data_dir}/../x:/x", "has a '..' part"),
        (f"{data_dir}:/", "target '/' would hide the whole image"),
        (f"{data_dir}:/data:rx", "--mount takes SOURCE:TARGET or SOURCE:TARGET:ro"),
    ]
    for mount, complaint in cases:
        proc = ccluster.ag("submit", "--image", python_image, "--mount", mount, "--", "true", check=False)
        assert proc.returncode != 0, mount
        assert complaint in proc.stderr, (mount, proc.stderr)
    # A host task cannot take mounts: it already sees the node's paths.
    status, body = ccluster.api("POST", "/api/jobs", {
        "entrypoint": "true", "runtime_env": {"mounts": [{"source": str(data_dir), "target": "/data"}]}})
    assert status == 400 and "needs runtime_env.image" in body["error"], body
    assert ccluster.jobs() == []


def test_a_mount_source_missing_on_the_node_fails_the_attempt_naming_path_and_node(ccluster, python_image, data_dir):
    job_id, _ = ccluster.submit("--image", python_image, "--mount", f"{data_dir}/not-there:/data", "--", "true")
    job = ccluster.wait_state(job_id, ("FAILED",))
    assert f"mount source {data_dir}/not-there does not exist on node node_" in job["message"], job
    no_containers_left(job_id)


def test_a_container_that_exits_at_once_fails_with_its_code_and_output(ccluster, python_image):
    job_id, proc = ccluster.submit("--image", python_image, "--", "echo 'config missing' >&2; exit 3")
    assert proc.returncode != 0
    job = ccluster.wait_state(job_id, ("FAILED",))
    assert job["message"] == "task 0 exited with code 3", job
    assert "config missing" in ccluster.ag("logs", job_id).stdout
    no_containers_left(job_id)


def test_an_interpreter_the_image_lacks_fails_clearly(ccluster, python_image):
    job_id, _ = ccluster.submit("--image", python_image, "--python", "/opt/venv/bin/python", "--",
                                "python -c 'print(1)'")
    job = ccluster.wait_state(job_id, ("FAILED",))
    assert "exited with code 127 (command not found)" in job["message"], job
    assert "/opt/venv/bin/python: not found" in ccluster.ag("logs", job_id).stdout
    no_containers_left(job_id)


def test_the_images_own_interpreter_serves_python_executable(ccluster, python_image):
    job_id, proc = ccluster.submit("--image", python_image, "--python", "/usr/bin/python3.11", "--",
                                   "python -c 'import sys; print(sys.executable)'")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "/usr/bin/python3.11" in proc.stdout


def test_a_container_over_its_memory_cap_says_out_of_memory(ccluster, python_image):
    job_id, proc = ccluster.submit("--image", python_image, "--memory", str(64 / 1024), "--",
                                   "python3 -c 'x = bytearray(300 << 20); x[::4096] = b\"x\" * (len(x) // 4096)'")
    assert proc.returncode != 0
    job = ccluster.wait_state(job_id, ("FAILED",))
    assert "was killed: out of memory (limit 64 MiB)" in job["message"], job
    no_containers_left(job_id)


def test_stop_and_timeout_end_the_container_and_remove_it(ccluster, python_image):
    job_id, _ = ccluster.submit("--no-wait", "--image", python_image, "--",
                                "trap 'echo got SIGTERM; exit 0' TERM; echo up; while true; do sleep 0.1; done")
    wait_until(lambda: containers_of(job_id) and "up" in ccluster.ag("logs", job_id).stdout, 30,
               message="the container to run")
    ccluster.ag("stop-job", job_id)
    job = ccluster.wait_state(job_id, ("STOPPED",))
    assert "got SIGTERM" in ccluster.ag("logs", job_id).stdout, "the task had its grace to finish"
    no_containers_left(job_id)

    job_id, _ = ccluster.submit("--no-wait", "--image", python_image, "--timeout", "2", "--", "sleep 60")
    job = ccluster.wait_state(job_id, ("FAILED",), timeout=30)
    assert "timed out" in job["message"], job
    no_containers_left(job_id)


def test_a_restarted_agent_adopts_a_running_container(ccluster, python_image):
    job_id, _ = ccluster.submit("--no-wait", "--image", python_image, "--",
                                "for i in 1 2 3 4 5 6; do echo tick $i; sleep 1; done")
    wait_until(lambda: "tick 1" in ccluster.ag("logs", job_id).stdout, 30, message="the container to run")
    node_ip = ccluster.job(job_id)["attempts"][0]["tasks"][0]["node_address"]
    os.kill(ccluster.worker_pid(node_ip), 9)
    ccluster.start_worker(node_ip, options=("--allow-mount", "/tmp"))
    job = ccluster.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=60)
    assert job["state"] == "SUCCEEDED", job
    assert len(job["attempts"]) == 1, "the container ran on, not a retry"
    assert "tick 6" in ccluster.ag("logs", job_id).stdout
    no_containers_left(job_id)


def test_a_container_whose_agent_never_returns_is_removed(cluster_factory, python_image):
    c = cluster_factory("orphan", workers=(), node_timeout_s=3)
    c.start_worker(WORKER_IPS[0])
    wait_until(lambda: len(c.nodes()) == 1, 20, message="the worker to join")
    job_id, _ = c.submit("--no-wait", "--image", python_image, "--", "sleep 120")
    wait_until(lambda: containers_of(job_id), 30, message="the container to run")
    os.kill(c.worker_pid(WORKER_IPS[0]), 9)
    # The supervisor ends the task once no agent has run for the node timeout, and its
    # container goes with it.
    wait_until(lambda: not containers_of(job_id), 40, message="the orphaned container to be removed")


def test_ag_pull_prepulls_on_every_node_that_runs_containers(ccluster, python_image):
    proc = ccluster.ag("pull", python_image)
    assert proc.returncode == 0, proc.stderr
    assert f"Pulling {python_image} on 2 node(s)" in proc.stdout, proc.stdout
    assert f"Pulled {python_image} on 2 node(s)" in proc.stdout, proc.stdout
    assert proc.stdout.count(": done: pulled") == 2, proc.stdout
    node = ccluster.nodes()[0]["node_id"]
    record = json.loads(ccluster.ag("-o", "json", "pull", python_image, "--nodes", node).stdout)
    assert record["finished"] and [n["node_id"] for n in record["nodes"]] == [node], record
    assert record["nodes"][0]["state"] == "done", record


def test_bad_pulls_say_what_went_wrong(cluster_factory, python_image):
    c = cluster_factory("pulls", workers=())
    c.start_worker(WORKER_IPS[0])
    c.start_worker(WORKER_IPS[1], options=("--container-engine", "none"))
    wait_until(lambda: len(c.nodes()) == 2, 20, message="both workers to join")
    bare = [n["node_id"] for n in c.nodes() if not n["container_engine"]][0]
    cases = [
        (("localhost/aethergrid-no-such-image:1",), "1 of 1 node(s) could not pull localhost/aethergrid-no-such-image:1"),
        (("Bad:1",), "malformed name part 'Bad'"),
        ((python_image, "--nodes", "node_nope"), "no node 'node_nope'; see `ag list-nodes`"),
        ((python_image, "--nodes", bare), f"node {bare} has no container engine; install podman (or docker)"),
    ]
    for args, complaint in cases:
        proc = c.ag("pull", *args, check=False)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert complaint in proc.stderr, (args, proc.stderr)
    proc = c.ag("pull", "localhost/aethergrid-no-such-image:1", check=False)
    assert "failed: podman could not pull localhost/aethergrid-no-such-image:1: Error:" in proc.stdout, proc.stdout


def test_a_container_tasks_usage_counts_the_container(ccluster, python_image):
    busy = ("python3 -c \"import time; b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096]); "
            "t = time.time()\nwhile time.time() - t < 12: pass\"")
    job_id, _ = ccluster.submit("--no-wait", "--image", python_image, "--", busy)

    def busy_sample():
        status, body = ccluster.api("GET", f"/api/jobs/{job_id}/usage")
        assert status == 200, body
        # The container's own process, not only the engine's client (idle, a few MiB), busy
        # and holding its memory. Busy is a quarter of a CPU: tests run four at a time on
        # two, and the busy loop gets its share of them.
        return next((s for s in body["samples"] if s["cpu_percent"] > 25 and s["memory_bytes"] > (60 << 20)), None)

    wait_until(busy_sample, 25, message="a usage sample with the container's process busy")
    ccluster.wait_state(job_id, ("SUCCEEDED", "FAILED", "STOPPED"), timeout=30)
    no_containers_left(job_id)


def test_a_retried_gang_gets_fresh_containers_and_leaves_none(ccluster, python_image):
    job_id, _ = ccluster.submit("-n", 2, "--image", python_image, "--max-retries", 1, "--retry-delay", 0,
                                "--", "echo attempt $AG_ATTEMPT; exit 3")
    job = ccluster.wait_state(job_id, ("FAILED",), timeout=60)
    assert len(job["attempts"]) == 2, job
    assert "task 0 exited with code 3" in job["message"] or "task 1 exited with code 3" in job["message"], job
    no_containers_left(job_id)


def test_submit_shows_the_pull_while_the_task_waits_for_its_image(ccluster):
    job_id, proc = ccluster.submit("--image", "localhost/aethergrid-no-such-image:2", "--", "echo never")
    assert proc.returncode != 0
    assert "pulling localhost/aethergrid-no-such-image:2 with podman" in proc.stderr, proc.stderr
    no_containers_left(job_id)


@pytest.fixture
def registry(tmp_path, python_image):
    """A registry on loopback (Debian's docker-registry) holding the python image with a
    57 MiB layer of random bytes on top, under a tag no node has; yields (image,
    registries.conf that lets the engine use it)."""
    port = free_ports(1)[0]
    root = tmp_path / "registry"
    root.mkdir()
    (root / "config.yml").write_text(
        f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n")
    conf = root / "registries.conf"
    conf.write_text(f'[[registry]]\nlocation = "127.0.0.1:{port}"\ninsecure = true\n')
    server = subprocess.Popen(["docker-registry", "serve", str(root / "config.yml")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    image = f"127.0.0.1:{port}/aethergrid-test/python:first-use-{os.getpid()}"
    try:
        wait_until(lambda: subprocess.run(["curl", "-sf", f"http://127.0.0.1:{port}/v2/"],
                                          capture_output=True).returncode == 0, 20, message="the registry")
        builder, local = f"ag-test-layer-{os.getpid()}", f"localhost/aethergrid-test-layer:{os.getpid()}"
        subprocess.run(["podman", "run", "--name", builder, "--ulimit", "nofile=1024:1024", "--ulimit",
                        "nproc=4096:4096", python_image, "sh", "-c", "head -c 60000000 /dev/urandom > /blob"],
                       check=True, timeout=120, capture_output=True)
        subprocess.run(["podman", "commit", "--quiet", builder, local], check=True, timeout=120, capture_output=True)
        subprocess.run(["podman", "rm", "--force", builder], capture_output=True, timeout=60)
        subprocess.run(["podman", "push", "--quiet", "--tls-verify=false", local, image], check=True,
                       timeout=300, capture_output=True)
        subprocess.run(["podman", "rmi", "--force", local], capture_output=True, timeout=60)
        yield image, conf
    finally:
        subprocess.run(["podman", "rmi", "--force", image], capture_output=True, timeout=60)
        server.kill()
        server.wait(timeout=10)


def test_first_use_of_an_image_pulls_it_once_per_node_not_once_per_task(cluster_factory, registry):
    image, conf = registry
    c = cluster_factory("registry", workers=())
    c.env["CONTAINERS_REGISTRIES_CONF"] = str(conf)  # the workers' engine may use the loopback registry
    for ip in WORKER_IPS:
        c.start_worker(ip)
    wait_until(lambda: len(c.nodes()) == 2, 20, message="both workers to join")
    subprocess.run(["podman", "rmi", "--force", image], capture_output=True, timeout=60)  # no node has it
    job_id, proc = c.submit("-n", 4, "--num-cpus", 0.5, "--placement", "spread", "--image", image, "--all-ranks",
                            "--", "echo rank $RANK in $(cat /etc/debian_version)", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(" in 12.") == 4, proc.stdout
    events = [e["message"] for e in c.api("GET", f"/api/jobs/{job_id}/events")[1]["events"]]
    engine = c.nodes()[0]["container_engine"]  # "podman 4.3.1"
    started = [e for e in events if e.endswith(f": pulling {image} with {engine}")]
    # One pull's events per node for its two tasks (ContainerImagesTest in the unit
    # tests counts the engine's calls: one pull for every task that asks meanwhile).
    assert len(started) == 2, events
    assert {e.split(":")[0] for e in started} == {f"node {n['node_id']} ({n['address']})" for n in c.nodes()}, started
    assert f"pulling {image} with podman" in proc.stderr, proc.stderr
    # The engine's byte counts: the random layer's 57 MiB (the base layers are there).
    assert sum(e.endswith(f"pulled {image} (57/57 MiB)") for e in events) == 2, events
    no_containers_left(job_id)


def test_a_container_and_its_log_survive_a_head_restart(ccluster, python_image):
    job_id, _ = ccluster.submit("--no-wait", "--image", python_image, "--",
                                "for i in 1 2 3 4 5; do echo line $i; sleep 0.6; done")
    wait_until(lambda: "line 1" in ccluster.ag("logs", job_id).stdout, 30, message="the container to run")
    head_pid = ccluster.head_pid()
    os.kill(head_pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head_pid), 10, message="the head to die")
    time.sleep(1)  # the container writes on while no head listens
    ccluster.start_head()
    job = ccluster.wait_state(job_id, ("SUCCEEDED", "FAILED", "STOPPED"), timeout=60)
    assert job["state"] == "SUCCEEDED" and len(job["attempts"]) == 1, job
    assert ccluster.ag("logs", job_id).stdout == "".join(f"line {i}\n" for i in range(1, 6))
    no_containers_left(job_id)


def test_exec_and_stack_reach_a_container_task(ccluster, python_image):
    script = ("import time\n"
              "def wait_in_container():\n"
              "    print('container up', flush=True)\n"
              "    time.sleep(300)\n"
              "wait_in_container()\n")
    job_id, _ = ccluster.submit("--no-wait", "--image", python_image, "--env", "GREETING=hi", "--",
                                "python3", "-c", script)
    wait_until(lambda: "container up" in ccluster.ag("logs", job_id).stdout, 60, message="the container to run")
    # A command in the container: its filesystem and the task's environment.
    out = ccluster.ag("exec", job_id, "--", "sh", "-c", 'echo "$GREETING $RANK"; ls /run/aethergrid').stdout
    assert out.splitlines()[0] == "hi 0", out
    # Its Python stacks, through the hook mounted into it.
    stacks = ccluster.ag("stack", job_id).stdout
    assert "in wait_in_container" in stacks, stacks
    # A terminal in the container.
    from test_exec import Terminal
    term = Terminal(ccluster.env, ["exec", "-it", job_id, "--", "sh", "-c", "stty size; tty"])
    try:
        term.read_until(b"40 100")
        term.read_until(b"/dev/pts/")
        assert term.wait(30) == 0
    finally:
        term.close()
    ccluster.ag("stop-job", job_id)
    ccluster.wait_state(job_id, ("STOPPED",))
    no_containers_left(job_id)
