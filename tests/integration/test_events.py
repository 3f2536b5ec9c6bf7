"""The cluster's event stream (issue 29 item 5): `ag events` and GET /api/events over real
daemons: job and node events in one order, filters, a cursor that resumes after a
disconnect and across a head restart, a job's end shown once stored, server-sent events,
and bad input refused."""
import json
import os
import signal
import socket
import subprocess
import time

from conftest import AG_BIN, pid_alive, wait_until


def events_json(cluster, *args):
    proc = cluster.ag("-o", "json", "events", *args)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def submit_no_wait(cluster, *args):
    job_id, _ = cluster.submit("--no-wait", *args)
    return job_id


def test_job_and_node_events_in_one_order_with_filters(cluster):
    # One after the other, so the order of their endings is known.
    ok = submit_no_wait(cluster, "--", "true")
    cluster.wait_state(ok, "SUCCEEDED")
    bad = submit_no_wait(cluster, "--", "echo about to fail; echo the reason >&2; exit 3")
    cluster.wait_state(bad, "FAILED")

    every = events_json(cluster)
    seqs = [e["seq"] for e in every]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    types = [e["type"] for e in every]
    assert types.count("node.registered") == 2
    # The nodes registered before any job was submitted.
    assert max(i for i, t in enumerate(types) if t == "node.registered") < types.index("job.submitted")
    failed = [e for e in every if e["type"] == "job.failed"]
    assert [e["job_id"] for e in failed] == [bad]
    assert failed[0]["owner"] == "admin"
    assert "the reason" in failed[0]["last_lines"]  # the owner (an admin) may read its logs
    assert [e["job_id"] for e in every if e["type"] == "job.succeeded"] == [ok]

    of_bad = events_json(cluster, "--job", bad)
    assert {e["job_id"] for e in of_bad} == {bad}
    assert of_bad[0]["type"] == "job.submitted" and of_bad[-1]["type"] == "job.failed"

    only = events_json(cluster, "--type", "job.failed,job.succeeded")
    assert [e["job_id"] for e in only] == [ok, bad]

    node = cluster.nodes()[0]["node_id"]
    of_node = events_json(cluster, "--node", node)
    assert of_node[0]["type"] == "node.registered" and of_node[0]["node_id"] == node

    # The table view: one line per event, time, type, job or node, message.
    text = cluster.ag("events", "--job", bad).stdout
    assert f"job.failed  {bad}" in text and "| the reason" in text
    assert events_json(cluster, "--since", "1h") == every[-100:] or len(every) > 100
    assert events_json(cluster, "--limit", "2") == every[-2:]


def test_drain_and_resume_are_events(cluster):
    node = cluster.nodes()[0]["node_id"]
    cluster.ag("drain", node)
    cluster.ag("resume", node)
    types = [e["type"] for e in events_json(cluster, "--node", node)]
    assert types[-2:] == ["node.drained", "node.resumed"]


def test_a_dead_worker_is_an_event(cluster_factory):
    cluster = cluster_factory("dying", node_timeout_s=2)
    victim = cluster.nodes()[0]
    os.kill(cluster.worker_pid(victim["node_address"] if "node_address" in victim else victim["address"]),
            signal.SIGKILL)
    wait_until(lambda: any(e["type"] == "node.dead" for e in events_json(cluster, "--node", victim["node_id"])),
               15, message="node.dead event")
    dead = [e for e in events_json(cluster, "--node", victim["node_id"]) if e["type"] == "node.dead"][0]
    assert "no heartbeat for 2 s" in dead["message"]


def test_follow_resumes_from_its_cursor_across_a_head_restart(cluster):
    """`ag events -f` prints each event once, in order, though the head is killed -9 and
    started again between two jobs."""
    follower = subprocess.Popen([AG_BIN, "-o", "json", "events", "--follow", "--type", "job.succeeded"],
                                env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = submit_no_wait(cluster, "--", "true")
        cluster.wait_state(first, "SUCCEEDED")
        head = cluster.head_pid()
        os.kill(head, signal.SIGKILL)
        wait_until(lambda: not pid_alive(head), 5, message="head to die")
        time.sleep(1)
        cluster.start_head()
        second = submit_no_wait(cluster, "--", "true")
        cluster.wait_state(second, "SUCCEEDED")
        seen = []
        deadline = time.time() + 30
        while len(seen) < 2 and time.time() < deadline:
            line = follower.stdout.readline()
            if line.strip():
                seen.append(json.loads(line))
        assert [e["job_id"] for e in seen] == [first, second]
    finally:
        follower.kill()
        follower.wait(timeout=10)


def read_events(follower, count, timeout=30):
    """The next `count` events a `-o json events --follow` process prints (fewer if it
    prints no more within `timeout`: a reader thread, so that a silent one cannot hang)."""
    import threading
    seen = []
    done = threading.Event()

    def read():
        for line in follower.stdout:
            if line.strip():
                seen.append(json.loads(line))
            if len(seen) >= count:
                break
        done.set()

    threading.Thread(target=read, daemon=True).start()
    done.wait(timeout)
    return list(seen)


def test_an_end_the_head_never_stored_is_told_once_after_its_restart(cluster_factory, held_writes):
    """A job ends while the head's store does not answer; the head is killed -9 before
    it has written the end, and started again. The job ends again then, from its
    worker's report, and `ag events -f` prints its end once: the stream shows a job's
    events only once stored."""
    cluster = held_writes.cluster(cluster_factory)
    follower = subprocess.Popen([AG_BIN, "-o", "json", "events", "--follow", "--type", "job.succeeded"],
                                env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = submit_no_wait(cluster, "--", "sleep 2")
        cluster.wait_tasks_running(first)
        held_writes.hold()
        cluster.wait_state(first, "SUCCEEDED")  # in the head's memory, not on its disk
        time.sleep(0.5)  # the writer's batch with the end is waiting
        held_writes.kill_head_and_start_again(cluster)
        again = cluster.wait_state(first, "SUCCEEDED")
        assert again["num_attempts"] == 1, again
        second = submit_no_wait(cluster, "--", "true")
        cluster.wait_state(second, "SUCCEEDED")
        seen = read_events(follower, 2)
        assert [e["job_id"] for e in seen] == [first, second], seen
    finally:
        follower.kill()
        follower.wait(timeout=10)


def test_the_cursor_survives_a_restart_and_the_log_keeps_its_order(cluster):
    job = submit_no_wait(cluster, "--", "true")
    cluster.wait_state(job, "SUCCEEDED")
    before = cluster.api("GET", "/api/events?limit=10000")[1]
    cluster.ag("stop", "--timeout", "5")  # head and workers stop; the store keeps the events
    cluster.start_head()
    for ip in ("127.0.0.2", "127.0.0.3"):
        cluster.start_worker(ip)
    status, after = cluster.api("GET", f"/api/events?after={before['cursor']}&limit=10000")
    assert status == 200
    assert after["events"], "the workers' new registrations come after the old cursor"
    assert all(e["seq"] > before["cursor"] for e in after["events"])
    status, again = cluster.api("GET", "/api/events?limit=10000")
    kept = [e for e in again["events"] if e["seq"] <= before["cursor"]]
    assert [e["seq"] for e in kept] == [e["seq"] for e in before["events"]]


def sse_events(cluster, path, headers=(), count=1, timeout=20):
    """Opens `path` as server-sent events and returns the first `count` events as
    (id, type, data) tuples."""
    sock = socket.create_connection(("127.0.0.1", cluster.port), timeout=timeout)
    request = f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {cluster.token}\r\n"
    request += "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    out = []
    with sock:
        sock.sendall(request.encode())
        buf = b""
        deadline = time.time() + timeout
        while len(out) < count and time.time() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                block, buf = buf.split(b"\n\n", 1)
                fields = {}
                for line in block.decode().splitlines():
                    if ":" in line and not line.startswith(":") and not line.startswith("HTTP/"):
                        k, _, v = line.partition(":")
                        fields[k.strip().lower()] = v.strip()
                if "id" in fields and "data" in fields:
                    out.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    return out


def test_server_sent_events_resume_with_last_event_id(cluster):
    a = submit_no_wait(cluster, "--", "true")
    cluster.wait_state(a, "SUCCEEDED")
    b = submit_no_wait(cluster, "--", "true")
    cluster.wait_state(b, "SUCCEEDED")
    done = [e for e in cluster.api("GET", "/api/events?types=job.succeeded")[1]["events"]]
    assert [e["job_id"] for e in done] == [a, b]
    # A client that saw `a`'s event and reconnects gets `b`'s next, nothing twice.
    got = sse_events(cluster, "/api/events?follow=1&types=job.succeeded",
                     headers=[("Last-Event-ID", str(done[0]["seq"]))])
    assert [(seq, kind, data["job_id"]) for seq, kind, data in got] == [(done[1]["seq"], "job.succeeded", b)]
    # Accept: text/event-stream follows too; from now on unless told otherwise.
    c = submit_no_wait(cluster, "--", "sleep 1")
    got = sse_events(cluster, "/api/events?types=job.succeeded", headers=[("Accept", "text/event-stream")])
    assert got[0][2]["job_id"] == c


def test_bad_input_is_refused_with_the_reason(cluster):
    proc = cluster.ag("events", "--type", "job.exploded", check=False)
    assert proc.returncode == 1
    assert "unknown event type 'job.exploded'" in proc.stderr and "job.failed" in proc.stderr
    proc = cluster.ag("events", "--job", "job_nosuch", check=False)
    assert proc.returncode == 1 and "no job with id 'job_nosuch'" in proc.stderr
    proc = cluster.ag("events", "--node", "node_nosuch", check=False)
    assert proc.returncode == 1 and "no node with id 'node_nosuch'" in proc.stderr
    proc = cluster.ag("events", "--since", "yesterday-ish", check=False)
    assert proc.returncode == 2 and "--since" in proc.stderr
    status, body = cluster.api("GET", "/api/events?after=-5")
    assert status == 400 and "after" in body["error"]
    status, body = cluster.api("GET", "/api/events?wait_ms=1000")
    assert status == 400 and "needs 'after'" in body["error"]
    status, body = cluster.api("GET", "/api/events?limit=0")
    assert status == 400 and "limit" in body["error"]


def test_a_viewer_sees_events_but_not_another_users_log_lines(cluster):
    bad = submit_no_wait(cluster, "--", "echo secret-output; exit 1")
    cluster.wait_state(bad, "FAILED")
    token = cluster.ag_json("user", "add", "vera", "--role", "viewer")["token"]
    status, body = cluster.api("GET", f"/api/events?job={bad}", token=token)
    assert status == 200
    failed = [e for e in body["events"] if e["type"] == "job.failed"]
    assert failed and "last_lines" not in failed[0]
    status, body = cluster.api("GET", f"/api/events?job={bad}")
    assert "secret-output" in [e for e in body["events"] if e["type"] == "job.failed"][0]["last_lines"]
