"""`ag port-forward`: a local port carried through the head to a port on a task's node,
over real daemons."""
import socket
import subprocess
import threading
import urllib.request

from conftest import AG_BIN, free_ports, wait_until


def serving_job(c, tmp_path, port):
    """A job whose rank 0 serves tmp_path/www over HTTP on 127.0.0.1:port of its node."""
    www = tmp_path / "www"
    www.mkdir(mode=0o755, exist_ok=True)
    (www / "data.bin").write_bytes(bytes(range(256)) * 8192)  # 2 MiB
    (www / "data.bin").chmod(0o644)
    job_id, _ = c.submit("--no-wait", "--", "python3", "-m", "http.server", str(port), "--bind", "127.0.0.1",
                         "--directory", str(www))
    c.wait_tasks_running(job_id)
    wait_until(lambda: c.ag("exec", job_id, "--", "python3", "-c",
                            f"import socket; socket.create_connection(('127.0.0.1', {port}), 1)",
                            check=False).returncode == 0, 20, message="the job's server to listen")
    return job_id, (www / "data.bin").read_bytes()


class Forwarder:
    def __init__(self, c, *args):
        self.proc = subprocess.Popen([AG_BIN, "port-forward", *args], env=c.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.line = self.proc.stdout.readline()
        assert self.line.startswith("Forwarding http://127.0.0.1:"), (self.line, self.proc.stderr.read()
                                                                      if self.proc.poll() is not None else "")
        self.port = int(self.line.split("http://127.0.0.1:")[1].split()[0])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        return self.proc.stderr.read()


def test_port_forward_reaches_a_server_on_the_tasks_node(cluster, tmp_path):
    c = cluster
    remote = free_ports(1)[0]
    job_id, data = serving_job(c, tmp_path, remote)
    fwd = Forwarder(c, job_id, f"0:{remote}")
    try:
        assert f"to port {remote} of job {job_id}" in fwd.line
        url = f"http://127.0.0.1:{fwd.port}/data.bin"
        # Several connections at once, each whole.
        results = []

        def fetch():
            with urllib.request.urlopen(url, timeout=30) as r:
                results.append(r.read())
        threads = [threading.Thread(target=fetch) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 6 and all(r == data for r in results)
    finally:
        fwd.stop()
    assert fwd.proc.returncode == 0
    entries = c.ag_json("audit")["entries"]
    assert any(e["action"] == f"port-forward {job_id} task 0: port {remote}" and e["outcome"] == "ok"
               for e in entries), entries


def test_port_forward_says_what_is_wrong(cluster, tmp_path):
    c = cluster
    remote = free_ports(1)[0]
    job_id, _ = serving_job(c, tmp_path, remote)
    for spec in ("70000", "0", "a:80", "80:", "1:2:3"):
        proc = c.ag("port-forward", job_id, spec, check=False)
        assert proc.returncode == 2 and "is not [LOCAL:]REMOTE" in proc.stderr, (spec, proc.stderr)
    outside = c.ag("port-forward", job_id, "--task-index", "4", str(remote), check=False)
    assert outside.returncode != 0 and "outside job" in outside.stderr, outside.stderr
    # A local port already taken here.
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        busy = c.ag("port-forward", job_id, f"{taken.getsockname()[1]}:{remote}", check=False)
        assert busy.returncode != 0 and "is in use on this machine" in busy.stderr, busy.stderr
    finally:
        taken.close()
    # Nothing listens on the remote port: each connection is closed and said why.
    fwd = Forwarder(c, job_id, f"0:{free_ports(1)[0]}")
    try:
        with socket.create_connection(("127.0.0.1", fwd.port), timeout=20) as s:
            s.settimeout(20)
            assert s.recv(10) == b""
    finally:
        err = fwd.stop()
    assert "nothing listens on that port there" in err, err
    # Another user's job.
    bob = c.ag_json("user", "add", "bob-pf")["token"]
    refused = c.ag("port-forward", job_id, str(remote), check=False, env={"AG_TOKEN": bob})
    assert refused.returncode != 0 and "refused (HTTP 403)" in refused.stderr, refused.stderr
    # A job that has ended: refused before anything listens.
    c.ag("stop-job", job_id)
    c.wait_state(job_id, ["STOPPED"], timeout=30)
    ended = c.ag("port-forward", job_id, str(remote), check=False)
    assert ended.returncode != 0 and "is STOPPED" in ended.stderr, ended.stderr


# Reads a connection to its end, then answers the SHA-256 of what it read.
HASHER = """
import hashlib, socket
server = socket.create_server(("127.0.0.1", PORT))
print("hashing", flush=True)
while True:
    conn, _ = server.accept()
    digest = hashlib.sha256()
    while True:
        data = conn.recv(1 << 16)
        if not data:
            break
        digest.update(data)
    conn.sendall(digest.hexdigest().encode())
    conn.close()
"""


def test_a_large_upload_through_a_forward_arrives_whole_and_in_order(cluster):
    import hashlib
    import os
    c = cluster
    remote = free_ports(1)[0]
    job_id, _ = c.submit("--no-wait", "--", "python3", "-c", HASHER.replace("PORT", str(remote)))
    wait_until(lambda: "hashing" in c.ag("logs", job_id).stdout, 30, message="the job's server to listen")
    fwd = Forwarder(c, job_id, f"0:{remote}")
    try:
        payload = os.urandom(8 << 20)  # far past what a hop queues before it stops reading
        with socket.create_connection(("127.0.0.1", fwd.port), timeout=60) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)  # the end reaches the program; its answer still comes back
            answer = b""
            while True:
                part = s.recv(4096)
                if not part:
                    break
                answer += part
        assert answer.decode() == hashlib.sha256(payload).hexdigest()
    finally:
        fwd.stop()
