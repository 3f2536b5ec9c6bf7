"""Idle GPUs (issue 29 item 3) over real daemons with the fake NVML: a running job whose
GPUs all stay under 5% busy for its --idle-gpu-timeout gets a job.idle event, and with
--on-idle stop is stopped for "GPUs idle for D"; a job whose GPU is busy is left alone;
bad values are refused."""
import json
import time

from conftest import start_gpu_worker, wait_until

A = "127.0.0.2"


def gpu_of(cluster, job_id):
    return cluster.job(job_id)["attempts"][-1]["tasks"][0]["gpu_ids"][0]


def test_idle_gpus_are_reported_and_stopped_when_asked_and_busy_ones_are_not(cluster_factory, fake_nvml):
    lib, state = fake_nvml
    cluster = cluster_factory("idle", workers=())
    start_gpu_worker(cluster, A, lib, state)

    busy, _ = cluster.submit("--no-wait", "--num-gpus", "1", "--idle-gpu-timeout", "2s", "--on-idle", "stop", "--",
                             "sleep 300")
    cluster.wait_tasks_running(busy)
    state.write_text(f"gpus 2\nutil {gpu_of(cluster, busy)} 60\n")

    idle, _ = cluster.submit("--no-wait", "--num-gpus", "1", "--idle-gpu-timeout", "2s", "--on-idle", "stop", "--",
                             "sleep 300")
    cluster.wait_tasks_running(idle)
    job = cluster.wait_state(idle, "STOPPED", timeout=30)
    assert "GPUs idle for 2s" in job["message"], job["message"]
    events = [json.loads(line) for line in cluster.ag("-o", "json", "events", "--job", idle).stdout.splitlines()]
    assert [e for e in events if e["type"] == "job.idle" and "all 1 under 5% busy" in e["message"]]
    assert cluster.job(busy)["state"] == "RUNNING"

    # Without --on-idle stop: an event, and the job runs on.
    told, _ = cluster.submit("--no-wait", "--num-gpus", "1", "--idle-gpu-timeout", "2s", "--", "sleep 300")
    cluster.wait_tasks_running(told)
    wait_until(lambda: "job.idle" in cluster.ag("events", "--job", told, "--type", "job.idle").stdout, 30,
               message="the job.idle event")
    time.sleep(2)
    assert cluster.job(told)["state"] == "RUNNING"
    assert cluster.job(busy)["state"] == "RUNNING"
    assert "job.idle" not in cluster.ag("events", "--job", busy).stdout


def test_bad_idle_settings_are_refused(head_only):
    proc = head_only.ag("submit", "--idle-gpu-timeout", "soon", "--", "true", check=False)
    assert proc.returncode == 2 and "--idle-gpu-timeout" in proc.stderr
    proc = head_only.ag("submit", "--on-idle", "explode", "--", "true", check=False)
    assert proc.returncode == 2 and "--on-idle" in proc.stderr
    status, body = head_only.api("POST", "/api/jobs", {"entrypoint": "true", "on_idle": "nap"})
    assert status == 400 and "on_idle" in body["error"] and '"stop"' in body["error"]
    status, body = head_only.api("POST", "/api/jobs", {"entrypoint": "true", "idle_gpu_timeout": 0})
    assert status == 400 and "idle_gpu_timeout" in body["error"]


def test_a_queue_gives_its_jobs_an_idle_gpu_timeout(cluster_factory, fake_nvml):
    lib, state = fake_nvml
    cluster = cluster_factory("idlequeue", workers=())
    start_gpu_worker(cluster, A, lib, state)
    cluster.ag("queue", "create", "gpus", "--idle-gpu-timeout", "2s")
    assert cluster.ag_json("queue", "list")["queues"][0]["idle_gpu_timeout"] == 2
    job, _ = cluster.submit("--no-wait", "--queue", "gpus", "--num-gpus", "1", "--", "sleep 300")
    cluster.wait_tasks_running(job)
    wait_until(lambda: "job.idle" in cluster.ag("events", "--job", job, "--type", "job.idle").stdout, 30,
               message="the job.idle event from the queue's timeout")
    proc = cluster.ag("queue", "create", "bad", "--idle-gpu-timeout", "never", check=False)
    assert proc.returncode == 2 and "--idle-gpu-timeout" in proc.stderr
