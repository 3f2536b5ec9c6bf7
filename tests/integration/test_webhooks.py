"""Webhooks (issue 29 item 4) over real daemons: signed POSTs to an HTTPS receiver with
its own CA, at least once across a head kill -9 (the event stream is the outbox), retries
with backoff then given up, test deliveries, Slack's shape, and bad input refused."""
import hashlib
import hmac
import http.server
import json
import os
import signal
import socket
import ssl
import subprocess
import threading
import time

import pytest

from conftest import pid_alive, wait_until


class Receiver:
    """An HTTP(S) server on 127.0.0.1 that records every POST and answers as `mode` says:
    an int status, or "hang" (never answers)."""

    def __init__(self, tls_dir=None, mode=200):
        self.mode = mode
        self.posts = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.lock:
                    outer.posts.append((dict(self.headers), body))
                if outer.mode == "hang":
                    time.sleep(30)
                    return
                self.send_response(outer.mode)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls_dir:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls_dir / "server.crt", tls_dir / "server.key")
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.url = f"{'https' if tls_dir else 'http'}://127.0.0.1:{self.port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def bodies(self):
        with self.lock:
            return [(h, b) for h, b in self.posts]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver_ca(tmp_path):
    """A CA and a certificate for 127.0.0.1 it signed, made with openssl."""
    d = tmp_path / "receiver-tls"
    d.mkdir()

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
        "-subj", "/CN=receiver test CA", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"))
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"))
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.crt"), "-CAkey", str(d / "ca.key"),
        "-CAcreateserial", "-days", "2", "-extfile", str(d / "ext"), "-out", str(d / "server.crt"))
    return d


@pytest.fixture
def receivers():
    made = []

    def make(**kwargs):
        r = Receiver(**kwargs)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def add_webhook(cluster, *args, env=None):
    return json.loads(cluster.ag("-o", "json", "webhook", "add", *args, env=env).stdout)


def failing_job(cluster, marker):
    job, _ = cluster.submit("--no-wait", "--", f"echo {marker} went wrong; exit 3")
    return job


def test_one_signed_post_per_failed_job_across_a_head_kill(cluster, receiver_ca, receivers):
    receiver = receivers(tls_dir=receiver_ca)
    hook = add_webhook(cluster, receiver.url, "--events", "job.failed", "--ca-file", receiver_ca / "ca.crt")
    assert hook["secret"].startswith("agw_") and hook["events"] == ["job.failed"]

    first = [failing_job(cluster, f"first-{i}") for i in range(3)]
    for job in first:
        cluster.wait_state(job, "FAILED")
    wait_until(lambda: receiver.bodies(), 20, message="a first delivery")
    head = cluster.head_pid()
    os.kill(head, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head), 5, message="the head to die")
    cluster.start_head()
    then = [failing_job(cluster, f"then-{i}") for i in range(2)]
    for job in then:
        cluster.wait_state(job, "FAILED")
    failed = set(first + then)
    wait_until(lambda: {json.loads(b)["job"]["job_id"] for _, b in receiver.bodies()} >= failed, 40,
               message="a delivery for every failed job")

    by_delivery = {}
    for headers, body in receiver.bodies():
        payload = json.loads(body)
        expected = "sha256=" + hmac.new(hook["secret"].encode(), body, hashlib.sha256).hexdigest()
        assert headers["X-AetherGrid-Signature"] == expected
        assert headers["X-AetherGrid-Event"] == "job.failed" and payload["event"] == "job.failed"
        assert int(headers["X-AetherGrid-Timestamp"]) == payload["sent_ms"]
        assert abs(payload["sent_ms"] / 1000 - time.time()) < 120
        assert payload["job"]["owner"] == "admin" and payload["job"]["state"] == "FAILED"
        assert "went wrong" in payload["last_lines"]
        assert payload["dashboard_url"].endswith("/#/jobs/" + payload["job"]["job_id"])
        # At least once: a repeat is the same delivery (the same id), never another job's.
        job_id = by_delivery.setdefault(headers["X-AetherGrid-Delivery"], payload["job"]["job_id"])
        assert job_id == payload["job"]["job_id"]
    assert set(by_delivery.values()) == failed and len(by_delivery) == len(failed)

    rows = cluster.ag("webhook", "deliveries", hook["id"]).stdout
    assert "delivered (HTTP 200)" in rows
    listed = cluster.ag_json("webhook", "list")["webhooks"]
    assert [w["id"] for w in listed] == [hook["id"]] and "secret" not in listed[0]


def test_a_failure_the_head_never_stored_is_posted_once_after_its_restart(cluster_factory, held_writes, receivers):
    # The same promise without a race: a job fails while the head's writes are held. No
    # POST goes out for a failure not stored; the head is killed -9 and started again,
    # the job fails again from its worker's report, and the receiver gets one POST.
    receiver = receivers()
    cluster = held_writes.cluster(cluster_factory)
    add_webhook(cluster, receiver.url, "--events", "job.failed")
    job, _ = cluster.submit("--no-wait", "--", "sleep 2; echo it went wrong; exit 3")
    cluster.wait_tasks_running(job)
    held_writes.hold()
    cluster.wait_state(job, "FAILED")  # in the head's memory, not on its disk
    time.sleep(1.5)
    assert receiver.bodies() == [], "a failure the head had not stored was posted"
    held_writes.kill_head_and_start_again(cluster)
    assert cluster.wait_state(job, "FAILED")["num_attempts"] == 1
    wait_until(lambda: receiver.bodies(), 20, message="the delivery")
    time.sleep(1)  # a second POST would come by now
    posted = [json.loads(b) for _, b in receiver.bodies()]
    assert [p["job"]["job_id"] for p in posted] == [job], posted


def test_a_receiver_that_fails_is_retried_with_backoff_then_given_up(cluster, receivers):
    failing = receivers(mode=500)
    hook = add_webhook(cluster, failing.url, "--events", "job.failed", "--retry-for", "10s")
    healthy = receivers()
    other = add_webhook(cluster, healthy.url, "--events", "job.failed")
    job = failing_job(cluster, "retry")
    cluster.wait_state(job, "FAILED")
    # The failing receiver holds up nobody else.
    wait_until(lambda: healthy.bodies(), 20, message="the healthy receiver's delivery")
    wait_until(lambda: any(d["given_up"] for d in cluster.ag_json("webhook", "deliveries", hook["id"])["deliveries"]),
               40, message="the event to be given up")
    tries = cluster.ag_json("webhook", "deliveries", hook["id"])["deliveries"]
    assert all(d["status"] == 500 for d in tries) and len(tries) >= 3
    times = [d["time_ms"] for d in tries]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert gaps == sorted(gaps), gaps  # backing off
    assert len(failing.bodies()) == len(tries)
    assert cluster.ag_json("webhook", "deliveries", hook["id"])["pending"] == 0
    assert other["id"] != hook["id"]


def test_test_deliveries_say_what_went_wrong(cluster, receivers):
    refusing = receivers(mode=401)
    hook = add_webhook(cluster, refusing.url)
    proc = cluster.ag("webhook", "test", hook["id"], check=False)
    assert proc.returncode == 1 and "failed: HTTP 401" in proc.stdout
    nowhere = add_webhook(cluster, "http://no-such-receiver.invalid/hook")
    proc = cluster.ag("webhook", "test", nowhere["id"], check=False)
    assert proc.returncode == 1 and "cannot reach no-such-receiver.invalid:80" in proc.stdout
    closed_port = socket.socket()
    closed_port.bind(("127.0.0.1", 0))
    port = closed_port.getsockname()[1]
    closed_port.close()
    refused = add_webhook(cluster, f"https://127.0.0.1:{port}/")
    proc = cluster.ag("webhook", "test", refused["id"], check=False)
    assert proc.returncode == 1 and "cannot reach 127.0.0.1" in proc.stdout
    ok = receivers()
    slack = add_webhook(cluster, ok.url, "--format", "slack")
    proc = cluster.ag("webhook", "test", slack["id"])
    assert "delivered (HTTP 200)" in proc.stdout
    body = json.loads(ok.bodies()[-1][1])
    assert list(body) == ["text"] and "*webhook.test*" in body["text"]
    cluster.ag("webhook", "remove", slack["id"])
    assert slack["id"] not in [w["id"] for w in cluster.ag_json("webhook", "list")["webhooks"]]


def test_a_receiver_that_hangs_times_out(cluster, receivers):
    hanging = receivers(mode="hang")
    hook = add_webhook(cluster, hanging.url)
    proc = cluster.ag("webhook", "test", hook["id"], check=False, timeout=60)
    assert proc.returncode == 1 and "no answer within 10000 ms" in proc.stdout


def test_bad_webhooks_are_refused_with_the_reason(cluster, receiver_ca):
    proc = cluster.ag("webhook", "add", "ftp://example.com/hook", check=False)
    assert proc.returncode == 1 and "must start with http:// or https://" in proc.stderr
    proc = cluster.ag("webhook", "add", "http://127.0.0.1:99999/", check=False)
    assert proc.returncode == 1 and "port must be a number" in proc.stderr
    proc = cluster.ag("webhook", "add", "http://127.0.0.1/", "--events", "job.failed,job.exploded", check=False)
    assert proc.returncode == 1 and "unknown event type 'job.exploded'" in proc.stderr
    proc = cluster.ag("webhook", "add", "http://127.0.0.1/", "--ca-file", receiver_ca / "ca.crt", check=False)
    assert proc.returncode == 1 and "--ca-file is for https://" in proc.stderr
    alice = cluster.ag_json("user", "add", "alice")["token"]
    env = {"AG_TOKEN": alice}
    proc = cluster.ag("webhook", "add", "http://127.0.0.1/", "--jobs-of", "admin", check=False, env=env)
    assert proc.returncode == 1 and "only an admin can add one for admin's jobs" in proc.stderr
    proc = cluster.ag("webhook", "add", "http://127.0.0.1/", "--all", check=False, env=env)
    assert proc.returncode == 1 and "only an admin" in proc.stderr
    proc = cluster.ag("webhook", "add", "http://127.0.0.1/", "--events", "node.dead", check=False, env=env)
    assert proc.returncode == 1 and "node events (node.dead) go only to" in proc.stderr
    mine = add_webhook(cluster, "http://127.0.0.1/", env=env)
    assert mine["jobs_of"] == "alice" and "node.dead" not in mine["events"]
    theirs = add_webhook(cluster, "http://127.0.0.1/", "--all")
    proc = cluster.ag("webhook", "remove", theirs["id"], check=False, env=env)
    assert proc.returncode == 1 and "belongs to admin" in proc.stderr
    assert [w["id"] for w in cluster.ag_json("webhook", "list", env=env)["webhooks"]] == [mine["id"]]
    vera = cluster.ag_json("user", "add", "vera", "--role", "viewer")["token"]
    proc = cluster.ag("webhook", "add", "http://127.0.0.1/", check=False, env={"AG_TOKEN": vera})
    assert proc.returncode == 1 and "viewers cannot add webhooks" in proc.stderr


def test_https_receivers_are_verified_against_the_system_cas(cluster_factory, receiver_ca, receivers):
    receiver = receivers(tls_dir=receiver_ca)
    # Not a CA this machine trusts: refused, saying why.
    plain = cluster_factory("systemcas", workers=())
    hook = add_webhook(plain, receiver.url)
    proc = plain.ag("webhook", "test", hook["id"], check=False)
    assert proc.returncode == 1 and "does not verify against this machine's CAs" in proc.stdout
    assert receiver.bodies() == []
    # SSL_CERT_FILE names the CAs the head trusts, as OpenSSL's own tools take it.
    trusting = cluster_factory("certfile", workers=(), start_head=False)
    trusting.env["SSL_CERT_FILE"] = str(receiver_ca / "ca.crt")
    trusting.start_head()
    hook = add_webhook(trusting, receiver.url)
    assert "delivered (HTTP 200)" in trusting.ag("webhook", "test", hook["id"]).stdout
