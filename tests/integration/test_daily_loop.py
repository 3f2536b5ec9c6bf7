"""The daily loop as a new user meets it, over real daemons: GPUs mapped the way
torchrun scripts expect (fake GPUs: `ag start-worker --num-gpus N` on a machine without
any), and each bad input refused with a message that names it.

Each test is bounded: CLI calls have subprocess timeouts, waits have deadlines.
"""
import pytest


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
