"""Job.exec of the `aethergrid` SDK: a command beside a running task, over the head's
exec WebSocket, with real daemons (the `cluster` fixtures of conftest.py); and the SDK's
WebSocket end against a scripted head on a local socket, for what a real head seldom
does (pings, fragments, a close before the status, a standby that names the leader).

Every SDK call has a request timeout and an exec timeout, every wait a deadline and
every scripted head a socket timeout, so no test can hang.
"""
import base64
import hashlib
import json
import os
import socket
import struct
import sys
import threading

import pytest

from conftest import REPO, pid_alive, wait_until

SDK_PATH = str(REPO / "python")
if SDK_PATH not in sys.path:
    sys.path.insert(0, SDK_PATH)

import aethergrid as ag  # noqa: E402
from aethergrid.job import Job  # noqa: E402

# Seconds any one SDK request (and an exec's handshake) may take in these tests.
REQUEST_TIMEOUT_S = 10
# Seconds one exec may take, whole.
EXEC_TIMEOUT_S = 60
# Seconds a scripted head waits on its socket; how often it looks whether to stop.
FAKE_HEAD_TIMEOUT_S = 10
ACCEPT_POLL_S = 0.2


def client_for(cluster, token=None, **kwargs):
    return ag.Client(cluster.address, token=token or cluster.token, timeout=REQUEST_TIMEOUT_S, **kwargs)


def running_job(cluster, client, num_workers=1):
    """A job of `num_workers` tasks that sleep, once every task runs on its node."""
    job = client.submit_job("sleep 300", num_workers=num_workers)
    cluster.job_ids.add(job.job_id)
    cluster.wait_state(job.job_id, ["RUNNING"], timeout=30)
    cluster.wait_tasks_running(job.job_id, timeout=30)
    return job


def add_user(cluster, name):
    """Adds a user with the admin's CLI; returns their token."""
    return cluster.ag_json("user", "add", name)["token"]


# ---- over real daemons -------------------------------------------------------------------

def test_exit_code_stdout_and_stderr_come_back_apart(cluster):
    job = running_job(cluster, client_for(cluster))
    result = job.exec(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=EXEC_TIMEOUT_S)
    assert result == (3, b"out\n", b"err\n")
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
    # A string runs through `sh -c`, like an entrypoint.
    assert job.exec("echo $((6 * 7)) | tr 4 X", timeout=EXEC_TIMEOUT_S) == (0, b"X2\n", b"")
    # A signal is -N, as subprocess reports it.
    code, _, _ = job.exec(["sh", "-c", "kill -TERM $$"], timeout=EXEC_TIMEOUT_S)
    assert code == -15
    # Arguments travel as they are: spaces, quotes, '&', '=', '+', '%' and UTF-8.
    odd = ["a b", "'\"", "x&command=rm", "1+1=2", "100%", "héllo ✓", ""]
    code, out, _ = job.exec(["printf", "[%s]\\n", *odd], timeout=EXEC_TIMEOUT_S)
    assert code == 0 and out.decode() == "".join("[{}]\n".format(arg) for arg in odd)
    entries = cluster.ag_json("audit")["entries"]
    assert any(e["action"].startswith(f"exec {job.job_id} task 0: sh -c echo out") and e["outcome"] == "ok"
               for e in entries), entries


def test_the_command_sees_its_tasks_environment(cluster):
    job = running_job(cluster, client_for(cluster), num_workers=2)
    assert job.exec(["printenv", "RANK"], task_index=1, timeout=EXEC_TIMEOUT_S) == (0, b"1\n", b"")
    assert job.exec(["printenv", "RANK"], timeout=EXEC_TIMEOUT_S) == (0, b"0\n", b"")
    code, out, _ = job.exec("echo $AG_JOB_ID $(pwd)", task_index=1, timeout=EXEC_TIMEOUT_S)
    job_id, cwd = out.decode().split()
    task_pid = cluster.job(job.job_id)["attempts"][-1]["tasks"][1]["pid"]
    assert (code, job_id, cwd) == (0, job.job_id, os.readlink(f"/proc/{task_pid}/cwd"))


def test_stdin_reaches_the_command_then_its_end(cluster):
    job = running_job(cluster, client_for(cluster))
    data = os.urandom(3 << 20)
    assert job.exec(["cat"], stdin=data, timeout=EXEC_TIMEOUT_S) == (0, data, b"")
    assert job.exec(["cat"], stdin="héllo\n", timeout=EXEC_TIMEOUT_S) == (0, "héllo\n".encode(), b"")
    assert job.exec(["wc", "-c"], stdin=b"", timeout=EXEC_TIMEOUT_S) == (0, b"0\n", b"")
    # Without stdin the command reads an empty one at once.
    assert job.exec(["cat"], timeout=EXEC_TIMEOUT_S) == (0, b"", b"")
    # A command that reads none of its input still ends, and says so.
    assert job.exec(["true"], stdin=data, timeout=EXEC_TIMEOUT_S) == (0, b"", b"")


def test_big_output_arrives_whole_and_in_order(cluster):
    job = running_job(cluster, client_for(cluster))
    code, out, err = job.exec(["sh", "-c", "seq 1 2800000; seq 1 50000 >&2"], timeout=EXEC_TIMEOUT_S)
    assert code == 0
    expected = "".join("{}\n".format(n) for n in range(1, 2800001)).encode()
    assert len(out) > 20 << 20 and len(out) == len(expected)
    assert out == expected
    assert err == "".join("{}\n".format(n) for n in range(1, 50001)).encode()


def test_bad_requests_raise_the_matching_errors(cluster):
    client = client_for(cluster)
    job = running_job(cluster, client)
    with pytest.raises(ag.AGValidationError) as info:
        job.exec(["true"], task_index=3, timeout=EXEC_TIMEOUT_S)
    assert info.value.status == 400
    assert info.value.message == f"task index 3 is outside job {job.job_id}'s gang of 1 (0-0)"
    with pytest.raises(ag.AGValidationError) as info:
        job.exec(["true"], task_index=-1, timeout=EXEC_TIMEOUT_S)
    assert info.value.status == 400 and "task_index must be a whole number" in info.value.message
    missing = job.exec(["no-such-command-here"], timeout=EXEC_TIMEOUT_S)
    assert missing.exit_code == 127 and b"no-such-command-here: command not found" in missing.stderr, missing
    # Refused here, before anything is sent.
    for command, kwargs in (([], {}), (["echo", 1], {}), (["true"], {"task_index": "1"}),
                            (["cat"], {"stdin": 5})):
        with pytest.raises(ag.AGValidationError) as info:
            job.exec(command, timeout=EXEC_TIMEOUT_S, **kwargs)
        assert info.value.status is None
    with pytest.raises(ag.AGNotFoundError) as info:
        client.get_job("job_000000000000").exec(["true"], timeout=EXEC_TIMEOUT_S)
    assert "no job with id 'job_000000000000'" in info.value.message
    job.stop()
    cluster.wait_state(job.job_id, ["STOPPED"], timeout=30)
    with pytest.raises(ag.AGConflictError) as info:
        job.exec(["true"], timeout=EXEC_TIMEOUT_S)
    assert info.value.status == 409
    assert info.value.message == (f"job {job.job_id} is STOPPED; commands run only beside the tasks of a "
                                  f"running job")


def test_another_users_job_is_refused(cluster):
    alice = client_for(cluster, token=add_user(cluster, "alice"))
    bob = client_for(cluster, token=add_user(cluster, "bob"))
    job = running_job(cluster, alice)
    with pytest.raises(ag.AGPermissionError) as info:
        bob.get_job(job.job_id).exec(["true"], timeout=EXEC_TIMEOUT_S)
    error = info.value
    assert error.status == 403 and not isinstance(error, ag.AGAuthError)
    assert "belongs to alice" in error.message and error.message.endswith("run commands in it")
    assert str(error) == f"GET /api/jobs/{job.job_id}/exec refused (HTTP 403): {error.message}"
    assert job.exec(["true"], timeout=EXEC_TIMEOUT_S) == (0, b"", b"")
    with pytest.raises(ag.AGAuthError) as info:
        client_for(cluster, token="agu_not-a-token").get_job(job.job_id).exec(["true"], timeout=EXEC_TIMEOUT_S)
    assert info.value.status == 401


def test_a_timeout_closes_the_connection_and_ends_the_command(cluster):
    job = running_job(cluster, client_for(cluster))
    with pytest.raises(ag.AGTimeoutError) as info:
        job.exec(["sh", "-c", "echo $$; echo started >&2; exec sleep 300"], timeout=3)
    error = info.value
    assert error.timeout == 3 and error.job_id == job.job_id
    assert "did not finish within 3 s" in str(error) and "SIGHUP" in str(error)
    assert error.stderr == b"started\n"
    remote = int(error.stdout)
    wait_until(lambda: not pid_alive(remote), 15, message="the command to end after its timeout")
    assert cluster.job(job.job_id)["state"] == "RUNNING"


def test_exec_over_tls(cluster):
    client = client_for(cluster, ca_fingerprint=cluster.ca_fingerprint)
    assert client.scheme == "https"
    job = running_job(cluster, client)
    data = os.urandom(4 << 20)
    assert job.exec(["cat"], stdin=data, timeout=EXEC_TIMEOUT_S) == (0, data, b"")
    assert job.exec(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=EXEC_TIMEOUT_S) == (3, b"out\n", b"err\n")
    with pytest.raises(ag.AGValidationError) as info:
        job.exec(["true"], task_index=9, timeout=EXEC_TIMEOUT_S)
    assert "outside job" in info.value.message


def test_a_standby_head_is_followed_to_the_leader(cluster):
    with FakeHead(lambda conn, request: conn.sendall(http_answer(
            503, {"standby": True, "leader": cluster.address, "error": "this head stands by"}))) as standby:
        client = ag.Client(f"{standby.address},{cluster.address}", token=cluster.token, timeout=REQUEST_TIMEOUT_S)
        job = Job(client, running_job(cluster, client_for(cluster)).job_id)
        assert job.exec(["echo", "led"], timeout=EXEC_TIMEOUT_S) == (0, b"led\n", b"")
        assert client.address == cluster.address
        assert standby.requests and standby.requests[0].startswith(f"GET /api/jobs/{job.job_id}/exec?")


# ---- against a scripted head ---------------------------------------------------------------

def http_answer(status, body):
    data = json.dumps(body).encode()
    return (f"HTTP/1.1 {status} Refused\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            f"Connection: close\r\n\r\n").encode() + data


def server_frame(opcode, payload, fin=True):
    """A frame as a server sends it: unmasked, with the length form its size needs."""
    first = bytes([(0x80 if fin else 0) | opcode])
    size = len(payload)
    if size < 126:
        return first + bytes([size]) + payload
    if size < 1 << 16:
        return first + bytes([126]) + struct.pack("!H", size) + payload
    return first + bytes([127]) + struct.pack("!Q", size) + payload


def read_client_frame(conn, buffer):
    """(opcode, unmasked payload, was masked) of the next frame from the client; `buffer`
    (a bytearray) keeps what was read past it."""
    def need(count):
        while len(buffer) < count:
            chunk = conn.recv(65536)
            assert chunk, "the client closed its connection"
            buffer.extend(chunk)
    need(2)
    opcode, masked, size = buffer[0] & 0x0F, bool(buffer[1] & 0x80), buffer[1] & 0x7F
    at = 2
    if size == 126:
        need(4)
        size, at = struct.unpack_from("!H", buffer, 2)[0], 4
    elif size == 127:
        need(10)
        size, at = struct.unpack_from("!Q", buffer, 2)[0], 10
    need(at + 4 + size)
    key = bytes(buffer[at:at + 4]) if masked else b"\0\0\0\0"
    start = at + 4 if masked else at
    payload = bytes(b ^ key[i % 4] for i, b in enumerate(buffer[start:start + size]))
    del buffer[:start + size]
    return opcode, payload, masked


def read_request(conn):
    """The request head a client sent, as text, and the bytes read after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        assert chunk, "the client closed before its request was whole"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode(), bytearray(rest)


def accept_upgrade(conn, request, then=b""):
    """Answers the upgrade request with a 101, and `then` (frames) in the same write."""
    key = next(line.split(":", 1)[1].strip() for line in request.split("\r\n")
               if line.lower().startswith("sec-websocket-key:"))
    accept = base64.b64encode(hashlib.sha1(key.encode() + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n" + then)


class FakeHead:
    """A head on a free loopback port that answers each connection with
    `script(conn, request_head_text)` on a thread of its own. `requests` holds the request
    heads it got; `errors` what went wrong in a script (the test fails on it)."""

    def __init__(self, script):
        self._script = script
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(ACCEPT_POLL_S)
        self._stopped = threading.Event()
        self.address = "127.0.0.1:{}".format(self._listener.getsockname()[1])
        self.requests = []
        self.errors = []
        self.buffers = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stopped.set()
        self._thread.join(FAKE_HEAD_TIMEOUT_S + 5)
        self._listener.close()
        assert not self.errors, self.errors

    def _serve(self):
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(FAKE_HEAD_TIMEOUT_S)
                try:
                    request, rest = read_request(conn)
                    self.requests.append(request)
                    self.buffers.append(rest)
                    self._script(conn, request)
                except Exception as e:  # reported by __exit__
                    self.errors.append(repr(e))


def fake_client(head):
    return ag.Client(head.address, token="agu_fake", timeout=REQUEST_TIMEOUT_S)


def test_pings_fragments_and_every_length_form_are_handled():
    seen = {}
    big = os.urandom(70000)  # a 64-bit length
    medium = os.urandom(300)  # a 16-bit length

    def script(conn, request):
        accept_upgrade(conn, request)
        buffer = bytearray()
        conn.sendall(server_frame(0x9, b"are you there"))
        seen["first"] = [read_client_frame(conn, buffer) for _ in range(3)]  # stdin, its end, the pong
        # stdout in three fragments with a ping between them, then stderr and the status.
        message = b"\x01" + b"fragmented " + b"output"
        conn.sendall(server_frame(0x2, message[:4], fin=False) + server_frame(0x9, b"again")
                     + server_frame(0x0, message[4:9], fin=False) + server_frame(0x0, message[9:]))
        seen["pong2"] = read_client_frame(conn, buffer)
        conn.sendall(server_frame(0x2, b"\x01" + big) + server_frame(0x2, b"\x02" + medium)
                     + server_frame(0x1, b"a text message is ignored")
                     + server_frame(0x2, b"\x03" + json.dumps({"exit_code": 5}).encode()))
        seen["close"] = read_client_frame(conn, buffer)

    with FakeHead(script) as head:
        result = Job(fake_client(head), "job_fake").exec(["cmd", "a b"], stdin=b"in", timeout=EXEC_TIMEOUT_S)
    assert result == (5, b"fragmented output" + big, medium)
    assert head.requests[0].startswith("GET /api/jobs/job_fake/exec?task_index=0&command=cmd&command=a%20b&stdin=1 ")
    assert "\r\nAuthorization: Bearer agu_fake" in head.requests[0]
    assert [f for f in seen["first"] if f[0] == 0x2] == [(0x2, b"\x00in", True), (0x2, b"\x00", True)]
    assert [f for f in seen["first"] if f[0] == 0xA] == [(0xA, b"are you there", True)]
    assert seen["pong2"] == (0xA, b"again", True)
    assert seen["close"][0] == 0x8 and seen["close"][2]


def test_a_status_error_or_a_close_before_the_status_is_an_error():
    def status_error(conn, request):
        accept_upgrade(conn, request)
        conn.sendall(server_frame(0x2, b"\x03" + json.dumps({"error": "task 0 is not running"}).encode())
                     + server_frame(0x8, struct.pack("!H", 1000)))

    with FakeHead(status_error) as head:
        with pytest.raises(ag.AGConflictError) as info:
            Job(fake_client(head), "job_fake").exec(["true"], timeout=EXEC_TIMEOUT_S)
    assert "task 0 is not running" in str(info.value) and "job_fake" in str(info.value)

    def early_close(conn, request):
        accept_upgrade(conn, request)
        conn.sendall(server_frame(0x2, b"\x01partial") + server_frame(0x8, struct.pack("!H", 1011) + b"gone"))

    with FakeHead(early_close) as head:
        with pytest.raises(ag.AGConnectionError) as info:
            Job(fake_client(head), "job_fake").exec(["true"], timeout=EXEC_TIMEOUT_S)
    assert "closed the WebSocket (code 1011: gone) before the command ended" in str(info.value)

    def signal(conn, request):
        # The status comes with the 101, and the connection stays open until the client's close.
        accept_upgrade(conn, request, then=server_frame(0x2, b"\x03" + json.dumps({"signal": 9}).encode()))
        assert read_client_frame(conn, bytearray())[0] == 0x8

    with FakeHead(signal) as head:
        assert Job(fake_client(head), "job_fake").exec(["true"], timeout=EXEC_TIMEOUT_S) == (-9, b"", b"")


def test_a_broken_handshake_or_a_masked_server_frame_is_refused():
    def bad_accept(conn, request):
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Accept: bm90IHRoZSByaWdodCBvbmU=\r\n\r\n")

    with FakeHead(bad_accept) as head:
        with pytest.raises(ag.AGConnectionError) as info:
            Job(fake_client(head), "job_fake").exec(["true"], timeout=EXEC_TIMEOUT_S)
    assert "Sec-WebSocket-Accept" in str(info.value)

    answer = {}

    def masked(conn, request):
        accept_upgrade(conn, request)
        conn.sendall(b"\x82\x82abcd" + bytes([1 ^ ord("a"), ord("x") ^ ord("b")]))
        answer["close"] = read_client_frame(conn, bytearray())

    with FakeHead(masked) as head:
        with pytest.raises(ag.AGConnectionError) as info:
            Job(fake_client(head), "job_fake").exec(["true"], timeout=EXEC_TIMEOUT_S)
    assert "masked frame" in str(info.value)
    assert answer["close"] == (0x8, struct.pack("!H", 1002), True)  # a protocol error, said so


def test_a_head_that_goes_silent_runs_into_the_timeout():
    def silent(conn, request):
        accept_upgrade(conn, request)
        conn.sendall(server_frame(0x2, b"\x01so far"))
        try:
            conn.recv(1)  # until the client gives up and closes
        except OSError:
            pass

    with FakeHead(silent) as head:
        with pytest.raises(ag.AGTimeoutError) as info:
            Job(fake_client(head), "job_fake").exec(["sleep", "1000"], timeout=1)
    assert info.value.stdout == b"so far" and info.value.stderr == b""
