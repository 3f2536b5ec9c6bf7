"""The Python SDK following the leader among several heads, against fake heads.

No daemons: each fake head is an http.server in a thread on a free 127.0.0.1 port (plain
HTTP, as the SDK speaks to a loopback head with no CA known). A fake head either leads
(answers the API, and creates a job once per submission_id) or stands by (answers 503
{"standby": true, "leader": ...} as a real standby does). Every client has a short
timeout and every test asserts how long it took, so no test can hang; every fake head
is shut down when its test ends.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import REPO, free_ports

SDK_PATH = str(REPO / "python")
if SDK_PATH not in sys.path:
    sys.path.insert(0, SDK_PATH)

import aethergrid as ag  # noqa: E402
from aethergrid import _http  # noqa: E402

# Seconds each request of a test's client may take.
REQUEST_TIMEOUT_S = 5


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass  # quiet

    def _answer(self, status, body):
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _handle(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        self.server.head.answer(self, self.command, self.path, body)

    do_GET = do_POST = do_HEAD = do_DELETE = _handle


class FakeHead:
    """A head on 127.0.0.1:PORT. `role()` decides each answer: None leads, a string
    stands by naming that leader ("" while none leads). `requests` records (method,
    path, body) of each request; `created` the submission_ids of the jobs it created."""

    def __init__(self, role=lambda: None):
        self.role = role
        self.requests = []
        self.created = []
        self._jobs = {}
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.head = self
        self.address = "127.0.0.1:{}".format(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        self._closed = False

    def answer(self, handler, method, path, body):
        leader = self.role()
        with self._lock:
            self.requests.append((method, path, body))
            if leader is not None:
                handler._answer(503, {
                    "error": "this head ({}) stands by: {}".format(
                        self.address, "the leader is " + leader if leader else "no head leads right now"),
                    "standby": True, "leader": leader, "epoch": 3, "head": self.address})
                return
            if method == "POST" and path == "/api/jobs":
                submission_id = body["submission_id"]
                if submission_id not in self._jobs:
                    self._jobs[submission_id] = "job_{}".format(len(self._jobs) + 1)
                    self.created.append(submission_id)
                handler._answer(201, {"job_id": self._jobs[submission_id]})
            elif method == "GET" and path == "/api/whoami":
                handler._answer(200, {"name": "alice", "role": "user", "groups": []})
            elif method == "GET" and path == "/api/nodes":
                handler._answer(200, {"nodes": []})
            elif method == "GET" and path == "/api/cluster":
                handler._answer(200, {"nodes_alive": 0, "nodes_total": 0})
            else:
                handler._answer(404, {"error": "no route {} {}".format(method, path)})

    def paths(self):
        with self._lock:
            return [(method, path) for method, path, _ in self.requests]

    def close(self):
        """Stops serving and closes the port: connections to it are refused from now."""
        if not self._closed:
            self._closed = True
            self.server.shutdown()
            self.server.server_close()
            self._thread.join(5)


@pytest.fixture
def heads(monkeypatch, tmp_path):
    """make(role=...) -> a started FakeHead, closed when the test ends. No address,
    token, session or user config from the caller's environment reaches the client."""
    for key in ("AG_TOKEN", "AG_TOKEN_FILE", "AG_ADDRESS"):
        monkeypatch.delenv(key, raising=False)
    no_session = tmp_path / "no-session"
    no_session.mkdir()
    monkeypatch.setenv("AG_SESSION_DIR", str(no_session))
    monkeypatch.setenv("AG_CONFIG", str(tmp_path / "no-config" / "config.json"))
    made = []

    def make(role=lambda: None):
        head = FakeHead(role)
        made.append(head)
        return head

    try:
        yield make
    finally:
        for head in made:
            head.close()


def client_for(*addresses):
    return ag.Client(",".join(addresses), token="t", timeout=REQUEST_TIMEOUT_S)


# ---- the address list ---------------------------------------------------------------------

def test_an_address_list_names_every_head_and_loopback_heads_get_plain_http(heads, monkeypatch):
    client = ag.Client(" 127.0.0.1:7001, localhost:7002 ,http://127.0.0.1:7003", token="t")
    assert client.addresses == ("127.0.0.1:7001", "localhost:7002", "127.0.0.1:7003")
    assert client.address == "127.0.0.1:7001"  # the first, until another answers as leader
    assert client.scheme == "http"
    assert repr(client) == "Client('127.0.0.1:7001,localhost:7002,127.0.0.1:7003')"
    monkeypatch.setenv("AG_ADDRESS", "127.0.0.1:7004,127.0.0.1:7005")
    assert ag.Client(token="t").addresses == ("127.0.0.1:7004", "127.0.0.1:7005")
    eight = ",".join("127.0.0.1:{}".format(7000 + i) for i in range(8))
    assert len(ag.Client(eight, token="t").addresses) == 8


def test_bad_address_lists_are_refused_naming_the_bad_entry(heads):
    nine = ",".join("127.0.0.1:{}".format(7000 + i) for i in range(9))
    for text, words in (("h1:6379,,h2", "empty entry (number 2)"),
                        ("127.0.0.1:7000,", "empty entry (number 2)"),
                        ("127.0.0.1:7000,127.0.0.1:7000", "name 127.0.0.1:7000 twice"),
                        ("localhost,localhost:6379", "name localhost:6379 twice"),
                        (nine, "name 9 heads; give at most 8"),
                        ("127.0.0.1:7000,ftp://x:1", "'ftp://x:1'"),
                        ("127.0.0.1:7000,127.0.0.1:notaport", "'127.0.0.1:notaport'")):
        with pytest.raises(ValueError) as info:
            ag.Client(text, token="t")
        assert isinstance(info.value, ag.AGValidationError)  # the SDK's own error, too
        assert words in str(info.value), (text, str(info.value))


# ---- following the leader -----------------------------------------------------------------

def test_a_standby_sends_the_client_to_the_leader_it_names(heads):
    leader = heads()
    # Both standbys name the leader; the one listed second is skipped for it.
    first = heads(role=lambda: leader.address)
    second = heads(role=lambda: leader.address)
    client = client_for(first.address, second.address, leader.address)
    started = time.monotonic()
    assert client.whoami()["name"] == "alice"
    assert client.address == leader.address
    assert first.paths() == [("GET", "/api/whoami")]
    assert second.paths() == []
    # Later calls go straight to the leader.
    assert client.list_nodes() == []
    assert client.cluster()["nodes_total"] == 0
    job = client.submit_job("true")
    assert job.job_id == "job_1"
    assert first.paths() == [("GET", "/api/whoami")]
    assert second.paths() == []
    assert leader.paths() == [("GET", "/api/whoami"), ("GET", "/api/nodes"), ("GET", "/api/cluster"),
                              ("POST", "/api/jobs")]
    assert time.monotonic() - started < 5


def test_a_standby_naming_an_unlisted_leader_moves_on_in_list_order(heads):
    leader = heads()
    standby = heads(role=lambda: "192.0.2.10:6379")
    client = client_for(standby.address, leader.address)
    assert client.whoami()["name"] == "alice"
    assert client.address == leader.address


def test_an_unreachable_first_head_is_skipped(heads):
    (closed,) = free_ports(1)
    leader = heads()
    client = client_for("127.0.0.1:{}".format(closed), leader.address)
    started = time.monotonic()
    assert client.whoami()["name"] == "alice"
    assert client.address == leader.address
    assert client.submit_job("true").job_id == "job_1"
    assert leader.paths() == [("GET", "/api/whoami"), ("POST", "/api/jobs")]
    assert time.monotonic() - started < 5


def test_a_submit_rides_out_a_takeover_with_one_submission_id(heads):
    # No head leads for the first second (a takeover); then the second leads.
    switch = time.monotonic() + 1.0
    holder = {}
    first = heads(role=lambda: "" if time.monotonic() < switch else holder["next"].address)
    second = heads(role=lambda: "" if time.monotonic() < switch else None)
    holder["next"] = second
    client = client_for(first.address, second.address)
    started = time.monotonic()
    job = client.submit_job("true")
    took = time.monotonic() - started
    assert job.job_id == "job_1"
    assert 0.9 <= took < 10, took
    assert client.address == second.address
    posts = [body for head in (first, second) for method, path, body in head.requests
             if (method, path) == ("POST", "/api/jobs")]
    assert len(posts) >= 4, "the submit was not retried while no head led"
    assert len({body["submission_id"] for body in posts}) == 1
    assert all(body == posts[0] for body in posts)
    assert first.created == []
    assert second.created == [posts[0]["submission_id"]]


def test_every_head_down_fails_at_once_naming_them(heads):
    closed = ["127.0.0.1:{}".format(port) for port in free_ports(2)]
    client = client_for(*closed)
    started = time.monotonic()
    for call in (client.whoami, lambda: client.submit_job("true")):
        with pytest.raises(ag.AGConnectionError) as info:
            call()
        message = str(info.value)
        assert "tried {}, {}".format(*closed) in message, message
        assert "connection refused" in message
        assert info.value.reason.startswith("connection refused")
        assert info.value.__cause__ is None and info.value.__suppress_context__
    # A client that never reached a head does not wait for one.
    assert time.monotonic() - started < 2


def test_heads_lost_after_answering_are_retried_for_the_window_then_named(heads, monkeypatch):
    monkeypatch.setattr(_http, "RECONNECT_WINDOW_S", 1.5)
    first, second = heads(), heads()
    client = client_for(first.address, second.address)
    assert client.whoami()["name"] == "alice"
    first.close()
    second.close()
    started = time.monotonic()
    with pytest.raises(ag.AGConnectionError) as info:
        client.submit_job("true")
    took = time.monotonic() - started
    assert 1.2 <= took < 5, took
    message = str(info.value)
    assert "tried {}, {}".format(first.address, second.address) in message, message
    assert "connection refused" in message and "[POST /api/jobs]" in message


def test_only_standbys_fail_naming_the_heads_and_the_last_reason(heads, monkeypatch):
    monkeypatch.setattr(_http, "RECONNECT_WINDOW_S", 1.0)
    first = heads(role=lambda: "")
    second = heads(role=lambda: "")
    client = client_for(first.address, second.address)
    started = time.monotonic()
    with pytest.raises(ag.AGConnectionError) as info:
        client.list_nodes()
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert "tried {}, {}".format(first.address, second.address) in message, message
    assert message.count("stands by: no head leads right now") == 2
    assert info.value.status == 503
    assert info.value.reason == "this head ({}) stands by: no head leads right now".format(second.address)
