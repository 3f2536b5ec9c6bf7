"""The worker's log stream (api/log_stream.h): task output goes from the task's file to
the head on a connection of its own, opened with the node's own credential. Every
refusal names its reason, a stream that breaks the rules is closed without touching
any log, and a broken stream loses nothing: the worker reconnects and sends the rest."""
import hashlib
import os
import signal
import subprocess
import time

from conftest import wait_until
from ws_peer import LogStreamPeer, WsPeer, register_message

# Two tasks, each writing ~5 MiB of numbered lines with a pause in the middle, so that
# the bytes travel while the task runs and after.
WRITER = "seq 1 400000; sleep 0.5; seq 400001 800000"


def expected_output(command):
    out = subprocess.run(["sh", "-c", command], capture_output=True, check=True).stdout
    return hashlib.sha256(out).hexdigest(), len(out)


def head_log(cluster, job_id, task=0, attempt=0):
    return cluster.head_data_dir / "logs" / job_id / f"{attempt}.{task}.log"


def sha256_of(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def head_says(cluster, text):
    return (cluster.head_data_dir / "head.log").read_text(errors="replace").count(text)


def run_writers(cluster):
    job_id, _ = cluster.submit("--no-wait", "--num-workers", "2", "--placement", "spread", "--", WRITER)
    assert cluster.wait_state(job_id, "SUCCEEDED", timeout=60)
    sha, size = expected_output(WRITER)
    for task in range(2):
        wait_until(lambda: head_log(cluster, job_id, task).stat().st_size == size, 20,
                   message=f"task {task}'s whole log at the head")
        assert sha256_of(head_log(cluster, job_id, task)) == sha
    return job_id


def rogue(cluster, node_id="node_rogue"):
    """A hand-made worker registered with the join token: its channel and credential."""
    peer = WsPeer("127.0.0.1", cluster.port, token=cluster.join_token)
    assert peer.status == 101
    peer.send_json(register_message(node_id))
    registered = peer.recv_until("registered")
    assert registered and registered["node_credential"]
    return peer, registered["node_credential"]


def test_task_output_travels_on_the_log_stream_and_arrives_whole(cluster):
    wait_until(lambda: head_says(cluster, "opened its log stream") == 2, 10, message="both workers' log streams")
    run_writers(cluster)
    for ip in ("127.0.0.2", "127.0.0.3"):
        log = (cluster.worker_data_dir(ip) / "worker.log").read_text(errors="replace")
        assert "frames" not in log and "lost the log stream" not in log, log[-2000:]


def test_with_the_stream_off_output_goes_in_frames_and_arrives_whole(cluster_factory):
    c = cluster_factory("frames", workers=())
    c.env["AG_WORKER_LOG_STREAM"] = "off"
    for ip in ("127.0.0.2", "127.0.0.3"):
        c.start_worker(ip)
    run_writers(c)
    assert head_says(c, "opened its log stream") == 0


def test_the_log_stream_takes_only_a_connected_nodes_own_credential(head_only):
    c = head_only
    cases = [
        (None, 401, "the head refused the token"),
        ("not-a-token", 401, "the head refused the token"),
        (c.join_token, 403, "a log stream is opened with a node's own credential"),
        (c.token, 403, "a log stream is opened with a node's own credential"),
    ]
    for token, status, message in cases:
        peer = LogStreamPeer("127.0.0.1", c.port, token=token)
        try:
            assert peer.status == status, (token, peer.status, peer.body)
            assert message in peer.error()
        finally:
            peer.close()
    # Not at another path, nor as a WebSocket, nor the channel's path as a log stream.
    for protocol in ("aethergrid-logs/1", "AETHERGRID-LOGS/1"):
        peer = LogStreamPeer("127.0.0.1", c.port, token=c.join_token, path="/api/workers/connect", protocol=protocol)
        assert peer.status == 404 and "no aethergrid-logs/1 endpoint" in peer.error()
        peer.close()
    ws = WsPeer("127.0.0.1", c.port, path="/api/workers/logs", token=c.join_token)
    assert ws.status == 404
    ws.close()
    # A node's credential opens it while the node is connected, and no longer after.
    channel, credential = rogue(c)
    peer = LogStreamPeer("127.0.0.1", c.port, token=credential)
    assert peer.status == 101
    peer.close()
    channel.close()
    wait_until(lambda: head_says(c, "node node_rogue disconnected") == 1, 10, message="the rogue's channel gone")
    peer = LogStreamPeer("127.0.0.1", c.port, token=credential)
    try:
        assert peer.status == 409
        assert peer.error() == ("node node_rogue has no channel to the head; register it (/api/workers/connect) "
                                "before opening its log stream")
    finally:
        peer.close()
    assert c.api("GET", "/api/healthz")[0] == 200


def test_a_node_cannot_write_another_nodes_task_output_on_its_stream(cluster):
    job_id, _ = cluster.submit("--no-wait", "--", "sleep 2; echo done")
    wait_until(lambda: cluster.job(job_id)["state"] == "RUNNING", 15, message="the job runs")
    channel, credential = rogue(cluster)
    stream = LogStreamPeer("127.0.0.1", cluster.port, token=credential)
    try:
        assert stream.status == 101
        # Large enough to go through the head's pipe in several pieces: every piece is
        # dropped, and the record after it is read where it begins.
        stream.send_output(job_id, 0, 0, 0, b"forged output\n" * 300000)
        refusal = channel.recv_until("error")
        assert refusal["message"].startswith("the head refused a message: ")
        assert "node_rogue" in refusal["message"] and job_id in refusal["message"]
        stream.send_message({"type": "reboot"})
        assert channel.recv_until("error")["message"] == \
            "the head could not accept a message: unknown message type 'reboot' from a worker"
        assert not stream.closed_by_head(timeout=0.5)
    finally:
        stream.close()
        channel.close()
    assert cluster.wait_state(job_id, "SUCCEEDED", timeout=30)
    wait_until(lambda: head_log(cluster, job_id).exists() and head_log(cluster, job_id).read_bytes() == b"done\n", 10,
               message="the job's own log, untouched")


def test_a_malformed_record_closes_only_that_stream(cluster):
    job_id, _ = cluster.submit("--no-wait", "--", "sleep 1; echo done")
    channel, credential = rogue(cluster)
    big = b'{"job_id":"' + b"j" * 5000 + b'"}'
    bad_records = [
        (b"X", b"", b"abc"),                      # an unknown kind
        (b"L", big, b""),                         # meta over its 4 KiB limit
        (b"L", b"{not json", b"abc"),             # meta that is not a log header
        (b"L", b'{"job_id":"../x","attempt":0,"task_index":0,"offset":0}', b"abc"),
        (b"M", b"meta", b"{}"),                   # a message with meta
    ]
    try:
        for kind, meta, payload in bad_records:
            stream = LogStreamPeer("127.0.0.1", cluster.port, token=credential)
            assert stream.status == 101
            stream.send_record(kind, meta, payload)
            assert stream.closed_by_head(), (kind, meta[:40])
            stream.close()
        # Output over the 64 MiB a record may carry: closed before any of it is taken.
        stream = LogStreamPeer("127.0.0.1", cluster.port, token=credential)
        meta = b'{"job_id":"%s","attempt":0,"task_index":0,"offset":0}' % job_id.encode()
        stream.send_record(b"L", meta, b"x" * 1000, payload_length=(64 << 20) + 1)
        assert stream.closed_by_head()
        stream.close()
        # A message the head does not know is answered on the channel; the stream stays.
        stream = LogStreamPeer("127.0.0.1", cluster.port, token=credential)
        stream.send_message({"type": "reboot"})
        reply = channel.recv_until("error")
        assert reply["message"] == "the head could not accept a message: unknown message type 'reboot' from a worker"
        assert not stream.closed_by_head(timeout=0.5)
        stream.close()
    finally:
        channel.close()
    assert cluster.wait_state(job_id, "SUCCEEDED", timeout=30)
    wait_until(lambda: head_log(cluster, job_id).exists() and head_log(cluster, job_id).read_bytes() == b"done\n", 10,
               message="the job's log, untouched")


def test_a_broken_stream_makes_the_worker_reconnect_and_loses_nothing(cluster_factory):
    c = cluster_factory("broken", workers=("127.0.0.2",))
    wait_until(lambda: head_says(c, "opened its log stream") == 1, 10, message="the worker's log stream")
    command = "for i in $(seq 1 30); do seq $((i*10000)) $((i*10000+9999)); sleep 0.1; done"
    sha, size = expected_output(command)
    job_id, _ = c.submit("--no-wait", "--", command)
    wait_until(lambda: head_log(c, job_id).exists() and head_log(c, job_id).stat().st_size > 0, 15,
               message="output arriving")
    # Someone holding the node's credential opens a stream of its own: the head closes
    # the worker's (one stream per node), and the worker starts over with a new channel.
    credential = (c.worker_data_dir("127.0.0.2") / "node-credential").read_text().strip()
    intruder = LogStreamPeer("127.0.0.1", c.port, token=credential)
    assert intruder.status == 101
    wait_until(lambda: "lost the log stream" in (c.worker_data_dir("127.0.0.2") / "worker.log").read_text(), 10,
               message="the worker to notice")
    # The intruder's stream belonged to the channel the worker dropped: closed with it.
    assert intruder.closed_by_head()
    wait_until(lambda: head_says(c, "opened its log stream") == 3, 15, message="the worker's new stream")
    intruder.close()
    assert c.wait_state(job_id, "SUCCEEDED", timeout=60)
    wait_until(lambda: head_log(c, job_id).stat().st_size == size, 20, message="the whole log")
    assert sha256_of(head_log(c, job_id)) == sha


def test_a_task_that_cuts_its_own_output_short_does_not_break_the_stream(cluster_factory):
    # The worker reads the file's size, then sends that many bytes; a task that
    # truncates its file in between leaves the record short of bytes, which go as zeros.
    # The head is frozen while the task writes and then cuts its file, so that the cut
    # falls inside a record the worker could not finish sending.
    c = cluster_factory("truncating", workers=("127.0.0.2",), node_timeout_s=30)
    # (Through the descriptor: the file itself is the worker's, not the task's.)
    command = ("sleep 2; head -c 30000000 /dev/zero | tr '\\0' x; sleep 0.5; "
               "/usr/bin/python3 -c 'import os; os.ftruncate(1, 0)'; sleep 0.5; echo done")
    job_id, _ = c.submit("--no-wait", "--", command)
    wait_until(lambda: c.job(job_id)["state"] == "RUNNING", 15, message="the job runs")
    output = c.worker_data_dir("127.0.0.2") / "tasks" / f"{job_id}.0.0" / "output.log"
    wait_until(output.exists, 10, message="the task's output file")
    head = c.head_pid()
    os.kill(head, signal.SIGSTOP)
    try:
        assert output.stat().st_size == 0, "the task wrote before the head was frozen"
        wait_until(lambda: output.stat().st_size >= 30000000, 20, message="the task's output")
        wait_until(lambda: output.stat().st_size < 30000000, 20, message="the task to cut its file")
    finally:
        os.kill(head, signal.SIGCONT)
    assert c.wait_state(job_id, "SUCCEEDED", timeout=60)
    worker_log = c.worker_data_dir("127.0.0.2") / "worker.log"
    task_dir = c.worker_data_dir("127.0.0.2") / "tasks" / f"{job_id}.0.0"
    # The exit is acknowledged (the head holds as many bytes as the worker sent) ...
    wait_until(lambda: not task_dir.exists(), 15, message="the worker to let go of the task")
    log = worker_log.read_text(errors="replace")
    assert "output file shrank while it was being sent" in log, "the cut did not fall inside a record"
    # ... and the channel and its stream stayed up all along.
    assert "lost the log stream" not in log and "lost the channel" not in log, log[-2000:]
    assert head_says(c, "opened its log stream") == 1
