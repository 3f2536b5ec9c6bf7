"""Heavy output and wide gangs (issue 11): a worker reads its tasks' output only as fast
as the head takes it, so its memory stays bounded however fast a task writes; bytes
the head cannot store are asked for again and arrive once there is room; a gang wider
than the head's descriptor limit keeps every task's log; a slow reader of a log holds
no copy of it in the head. Each test checks that nothing was lost."""
import hashlib
import os
import resource
import signal
import socket
import subprocess
import threading
import time

from conftest import fill_disk, pid_alive, rss_kib, wait_until


def sha256_of_command(command):
    out = subprocess.run(["sh", "-c", command], capture_output=True, check=True).stdout
    return hashlib.sha256(out).hexdigest(), len(out)


def sha256_of_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def head_log(cluster, job_id, task=0, attempt=0):
    return cluster.head_data_dir / "logs" / job_id / f"{attempt}.{task}.log"


def log_size(cluster, job_id, task=0):
    status, headers, _ = cluster.api_full("GET", f"/api/jobs/{job_id}/logs?task_index={task}&max_bytes=1")
    assert status == 200
    return int(headers["X-AG-Log-Size"])


class PeakRss:
    """Samples a process's resident memory every 20 ms until stopped."""

    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, rss_kib(pid), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.02):
            try:
                self.peak = max(self.peak, rss_kib(self.pid))
            except OSError:
                return

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak


def test_output_faster_than_the_head_takes_it_keeps_the_worker_small_and_arrives_whole(cluster_factory):
    # The head is frozen while a task writes ~200 MiB: the worker must keep it in the
    # task's file, not in memory, and send every byte once the head is back.
    c = cluster_factory("fast", workers=("127.0.0.2",), node_timeout_s=60)
    command = "seq 1 25000000"
    expected_sha, expected_size = sha256_of_command(command)
    worker = c.worker_pid("127.0.0.2")
    before = rss_kib(worker)
    peak = PeakRss(worker)
    head = c.head_pid()
    job_id, _ = c.submit("--no-wait", "--", command)
    wait_until(lambda: c.job(job_id)["state"] == "RUNNING", 15, message="the job runs")
    os.kill(head, signal.SIGSTOP)
    try:
        task_dir = c.worker_data_dir("127.0.0.2") / "tasks" / f"{job_id}.0.0"
        # Until the task has written it all to its file (the head takes none of it now).
        wait_until(lambda: (task_dir / "exit").exists(), 60, message="the task to finish writing")
        time.sleep(0.5)
    finally:
        os.kill(head, signal.SIGCONT)
    assert c.wait_state(job_id, "SUCCEEDED", timeout=120)
    wait_until(lambda: log_size(c, job_id) == expected_size, 120, message="the whole log at the head")
    grown_mib = (peak.stop() - before) / 1024
    assert grown_mib < 48, f"the worker grew by {grown_mib:.0f} MiB holding output for a frozen head"
    assert sha256_of_file(head_log(c, job_id)) == expected_sha
    # Once the head holds every byte, the worker lets go of its copy.
    wait_until(lambda: not task_dir.exists(), 15, message="the worker to drop its copy")


def test_log_bytes_the_head_cannot_store_arrive_once_there_is_room(small_disk, cluster_factory):
    c = cluster_factory("logfull", start_head=False)
    logs = small_disk(c.head_data_dir / "logs", size="4m")
    c.start(worker_ips=("127.0.0.2",))
    filler = fill_disk(logs / "filler")
    command = "seq 1 200000"  # ~1.3 MiB
    expected_sha, expected_size = sha256_of_command(command)
    job_id, _ = c.submit("--no-wait", "--", command)
    # The job's end is recorded; its log is not whole, and the job says why.
    c.wait_state(job_id, "SUCCEEDED", timeout=30)
    wait_until(lambda: any("could not be stored" in e["message"]
                           for e in c.api("GET", f"/api/jobs/{job_id}/events")[1]["events"]), 10,
               message="an event saying the output could not be stored")
    assert log_size(c, job_id) < expected_size
    # The worker keeps its copy: the exit is not acknowledged while the head lacks bytes.
    task_dir = c.worker_data_dir("127.0.0.2") / "tasks" / f"{job_id}.0.0"
    time.sleep(2.5)
    assert task_dir.exists(), "the worker dropped output the head does not have"
    filler.unlink()
    wait_until(lambda: log_size(c, job_id) == expected_size, 20, message="the rest of the log once there is room")
    assert sha256_of_file(head_log(c, job_id)) == expected_sha
    wait_until(lambda: not task_dir.exists(), 15, message="the worker to drop its copy once the head has it")


def test_a_gang_wider_than_the_heads_descriptor_limit_keeps_every_log(cluster_factory):
    c = cluster_factory("wide", start_head=False)
    c.start_head()
    head = c.head_pid()
    resource.prlimit(head, resource.RLIMIT_NOFILE, (1024, 1024))
    for ip in ("127.0.0.2", "127.0.0.3"):
        c.start_worker(ip, num_cpus=600)
    wait_until(lambda: sum(n["state"] == "ALIVE" for n in c.nodes()) == 2, 15, message="workers to be ALIVE")
    tasks = 1100
    job_id, _ = c.submit("--no-wait", "--num-workers", str(tasks), "--", "echo rank $RANK of $WORLD_SIZE")
    most_fds = 0
    deadline = time.time() + 240
    while time.time() < deadline:
        most_fds = max(most_fds, len(os.listdir(f"/proc/{head}/fd")))
        if c.job(job_id)["state"] not in ("PENDING", "RUNNING"):
            break
        time.sleep(0.2)
    job = c.wait_state(job_id, "SUCCEEDED", timeout=10)
    assert all(t["state"] == "SUCCEEDED" for t in job["attempts"][0]["tasks"])
    assert most_fds < 600, f"the head held {most_fds} descriptors for a {tasks}-task gang"
    missing = []
    for rank in range(tasks):
        path = head_log(c, job_id, task=rank)
        text = path.read_text() if path.exists() else ""
        if text != f"rank {rank} of {tasks}\n":
            missing.append((rank, text))
    assert not missing, f"{len(missing)} logs missing or wrong, e.g. {missing[:3]}"
    assert pid_alive(head)


def test_a_slow_reader_of_a_large_log_holds_no_copy_of_it_in_the_head(cluster):
    c = cluster
    job_id, _ = c.submit("--", "head -c 4194304 /dev/zero | tr '\\0' x")
    assert log_size(c, job_id) == 4 << 20
    head = c.head_pid()
    before = rss_kib(head)
    readers = []
    try:
        for _ in range(40):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", c.port))
            s.sendall(f"GET /api/jobs/{job_id}/logs?max_bytes=4194304 HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {c.token}\r\n\r\n".encode())
            readers.append(s)  # and never read
        time.sleep(1.0)
        grown_mib = (rss_kib(head) - before) / 1024
        # 40 readers of 4 MiB each would hold 160 MiB if the answer were copied to memory.
        assert grown_mib < 40, f"the head grew by {grown_mib:.0f} MiB for 40 stalled log readers"
        status, _ = c.api("GET", "/api/cluster")
        assert status == 200
        # A reader that does read gets every byte.
        status, headers, body = c.api_full("GET", f"/api/jobs/{job_id}/logs?max_bytes=4194304")
        assert status == 200 and len(body) == 4 << 20 and set(body) == {"x"}
        assert headers["X-AG-Next-Offset"] == str(4 << 20)
    finally:
        for s in readers:
            s.close()


def test_a_task_must_hold_some_cpu(head_only):
    c = head_only
    status, body = c.api("POST", "/api/jobs", body={"entrypoint": "true", "task_options": {"num_cpus": 0}})
    assert status == 400
    assert "task_options.num_cpus" in body["error"] and "between 0.001 and 1024" in body["error"]
    assert c.api("GET", "/api/jobs")[1]["total"] == 0
    status, body = c.api("POST", "/api/jobs", body={"entrypoint": "true", "task_options": {"num_cpus": 0.001}})
    assert status == 201, body
