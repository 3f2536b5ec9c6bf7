"""Who reaches the head's port without a token cannot exhaust it: a body is read only
from a caller with a valid credential (a stranger's is dropped as it arrives, never
held), and one peer address holds at most a bounded number of connections while the
head goes on answering."""
import socket
import time

from conftest import rss_kib
from test_tls import OTHER, head_on_other_address, needs_other


def test_unauthenticated_bodies_are_not_held_in_memory(head_only):
    c = head_only
    head = c.head_pid()
    before = rss_kib(head)
    declared, sent = 7 << 20, 6 << 20
    chunk = b"x" * (1 << 20)
    socks = []
    try:
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", c.port), timeout=10)
            s.sendall(f"POST /api/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {declared}\r\n\r\n".encode())
            for _ in range(sent >> 20):
                s.sendall(chunk)
            socks.append(s)
        time.sleep(0.5)
        grown_mib = (rss_kib(head) - before) / 1024
        # 20 unfinished 6 MiB bodies would be 120 MiB held; dropped as they arrive, nothing is.
        assert grown_mib < 40, f"head grew by {grown_mib:.0f} MiB holding strangers' bodies"
        # The head still answers its owner.
        status, _ = c.api("GET", "/api/cluster")
        assert status == 200
    finally:
        for s in socks:
            s.close()
    # A whole body without a token gets the 401, not a reset.
    s = socket.create_connection(("127.0.0.1", c.port), timeout=10)
    try:
        body = b"{}" + b" " * (1 << 20)
        s.sendall(f"POST /api/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
        assert b"missing credential" in answer
    finally:
        s.close()
    assert c.api("GET", "/api/jobs")[1]["total"] == 0


@needs_other
def test_one_peer_holds_a_bounded_number_of_connections_and_the_head_goes_on(tmp_path):
    c = head_on_other_address(tmp_path)
    port = c.port
    socks = []
    try:
        # Idle connections from one peer (this machine's non-loopback address).
        for _ in range(256):
            socks.append(socket.create_connection((OTHER, port), timeout=10))
        time.sleep(0.3)
        extra = socket.create_connection((OTHER, port), timeout=10)
        extra.settimeout(5)
        try:
            assert extra.recv(1) == b"", "the peer's 257th connection is closed at once"
        except ConnectionResetError:
            pass
        finally:
            extra.close()
        # Once some close, the peer is served again.
        for s in socks[:10]:
            s.close()
        del socks[:10]
        time.sleep(0.3)
        again = socket.create_connection((OTHER, port), timeout=10)
        try:
            again.sendall(b"GET /api/healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            # The peer is this machine (its own address): plain HTTP is answered.
            assert again.recv(4096).startswith(b"HTTP/1.1 200")
        finally:
            again.close()
    finally:
        for s in socks:
            s.close()
        c.teardown()


def test_oversized_fields_and_pages_are_refused_at_submit_naming_the_limit(head_only):
    c = head_only
    status, body = c.api("POST", "/api/jobs", body={"entrypoint": "true",
                                                    "runtime_env": {"env_vars": {"BIG": "x" * (64 * 1024 + 1)}}})
    assert status == 400 and "runtime_env.env_vars.BIG" in body["error"] and "the limit is 65536" in body["error"]
    status, body = c.api("POST", "/api/jobs", body={"entrypoint": "true",
                                                    "runtime_env": {"excludes": ["*.tmp"] * 1025}})
    assert status == 400 and "the limit is 1024" in body["error"]
    status, body = c.api("GET", "/api/jobs?limit=100000")
    assert status == 400 and "'limit' must be a whole number between 1 and 1000" in body["error"]
    assert c.api("GET", "/api/jobs?limit=1")[1]["total"] == 0  # nothing was accepted


def test_every_string_of_a_spec_is_bounded_and_one_line_where_it_names_something(head_only):
    c = head_only
    refused = [
        ({"runtime_env": {"python": "p" * (6 << 20)}}, "runtime_env.python", "the limit is 4096"),
        ({"runtime_env": {"python": "py\u0000thon"}}, "runtime_env.python", "NUL"),
        ({"runtime_env": {"python": {"executable": "/usr/bin/python3\n--evil"}}}, "runtime_env.python.executable",
         "control characters"),
        ({"job_name": "\u001b[2Jcleared"}, "job_name", "control characters"),
        ({"submission_id": "a/b"}, "submission_id", "must not contain '/'"),
        ({"labels": {"team": "a\rb"}}, "labels.team", "control characters"),
        ({"array": "1" * 5000}, "array", "the limit is 4096"),
    ]
    for extra, field, says in refused:
        status, body = c.api("POST", "/api/jobs", body={"entrypoint": "true", **extra})
        assert status == 400, (field, status)
        assert field in body["error"] and says in body["error"], body["error"][:300]
        assert len(body["error"]) < 1024, "the answer does not echo the value"
    assert c.api("GET", "/api/jobs?limit=1")[1]["total"] == 0  # nothing was accepted


def test_an_env_value_that_expands_past_the_limit_fails_its_task_with_the_reason(cluster_factory):
    c = cluster_factory("expand", workers=())
    c.ag("start-worker", "--head-node", c.address, "--node-ip-address", "127.0.0.2", "--num-cpus", 1,
         "--data-dir", c.worker_data_dir("127.0.0.2"), env={"LONGVAR": "x" * 1000})
    head = c.head_pid()
    bomb = "${LONGVAR}" * 2000  # 20 KB accepted at submit, 2 MB once expanded on the node
    status, body = c.api("POST", "/api/jobs", body={"entrypoint": "true", "runtime_env": {"env_vars": {"BOMB": bomb}}})
    assert status == 201, body
    job = c.wait_state(body["job_id"], ("FAILED",))
    assert "runtime_env.env_vars.BOMB expands to more than 1 MiB" in job["message"], job["message"]
    assert c.nodes()[0]["state"] == "ALIVE" and c.head_pid() == head
    # The node goes on running other jobs.
    job_id, proc = c.submit("--", "echo fine")
    assert proc.returncode == 0 and "fine" in proc.stdout


def test_job_pages_follow_each_other_by_cursor_while_jobs_arrive(head_only):
    c = head_only
    ids = [c.api("POST", "/api/jobs", body={"entrypoint": "true"})[1]["job_id"] for _ in range(5)]
    seen = []
    status, page = c.api("GET", "/api/jobs?limit=2")
    assert status == 200 and page["total"] == 5
    seen += [j["job_id"] for j in page["jobs"]]
    # A job submitted between pages does not shift the next page (as an offset would).
    ids.append(c.api("POST", "/api/jobs", body={"entrypoint": "true"})[1]["job_id"])
    while page["next"]:
        status, page = c.api("GET", f"/api/jobs?limit=2&after={page['next']}")
        assert status == 200
        seen += [j["job_id"] for j in page["jobs"]]
    assert seen == list(reversed(ids[:5])), "every job once, newest first"
    # Bad cursors are refused, naming what was wrong.
    status, body = c.api("GET", "/api/jobs?after=job_nosuchjob000")
    assert status == 400 and "'after': no job with id 'job_nosuchjob000'" in body["error"]
    status, body = c.api("GET", f"/api/jobs?after={ids[0]}&offset=3")
    assert status == 400 and "either 'after' or 'offset'" in body["error"]


@needs_other
def test_one_peer_holds_a_bounded_amount_of_request_bodies_at_once(tmp_path):
    import ssl
    c = head_on_other_address(tmp_path)
    head = c.head_pid()
    ctx = ssl._create_unverified_context()
    socks = []
    declared = 7 << 20
    try:
        before = rss_kib(head)

        def slow_submit(body_bytes=6 << 20):
            s = ctx.wrap_socket(socket.create_connection((OTHER, c.port), timeout=10))
            s.sendall(f"POST /api/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {c.token}\r\n"
                      f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n".encode())
            s.sendall(b" " * body_bytes)  # and never the rest
            return s

        # A token holder's unfinished bodies: nine of 7 MiB fit in the peer's 64 MiB.
        for _ in range(9):
            socks.append(slow_submit())
        time.sleep(0.5)
        extra = slow_submit(body_bytes=0)  # answered from its header alone
        extra.settimeout(10)
        answer = extra.recv(4096)
        extra.close()
        assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
        assert b"too many large requests from your address" in answer
        grown_mib = (rss_kib(head) - before) / 1024
        assert grown_mib < 100, f"the head grew by {grown_mib:.0f} MiB"
        # Once those are gone the peer's requests are read again.
        for s in socks:
            s.close()
        socks.clear()
        time.sleep(0.5)
        body = b'{"entrypoint": "true"}'
        s = ctx.wrap_socket(socket.create_connection((OTHER, c.port), timeout=10))
        s.sendall(f"POST /api/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {c.token}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        assert s.recv(4096).startswith(b"HTTP/1.1 201")
        s.close()
    finally:
        for s in socks:
            s.close()
        c.teardown()
