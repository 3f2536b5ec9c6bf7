"""The web dashboard over real daemons: sign-in and its cookie, the CSRF check, the
pages' security headers, the API additions the pages use (pagination, log tails, node
tasks, the live event stream), and the browser suite in tests/browser/ run in Debian's
headless Chromium.

Every HTTP call has a timeout and every wait a deadline.
"""
import http.client
import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import AG_BIN, REPO, wait_until

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
BROWSER_DIR = REPO / "tests" / "browser"
ARTIFACTS = REPO / "build" / "browser-artifacts"
BROWSER_SUITE_TIMEOUT_S = 300


def request(cluster, method, path, headers=None, body=None, port=None, timeout=30):
    """One HTTP call with exactly the given headers (no token unless given). Returns
    (status, headers dict with lowercase names, body text). Redirects are not followed."""
    conn = http.client.HTTPConnection("127.0.0.1", port or cluster.dashboard_port, timeout=timeout)
    try:
        data = json.dumps(body) if isinstance(body, (dict, list)) else body
        conn.request(method, path, body=data, headers=headers or {})
        res = conn.getresponse()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, res.read().decode(errors="replace")
    finally:
        conn.close()


def sign_in(cluster, port=None):
    """Signs in like the sign-in page does; returns the Cookie header value."""
    status, headers, body = request(cluster, "POST", "/api/session", body={"token": cluster.token},
                                    headers={"Content-Type": "application/json"}, port=port)
    assert status == 200, body
    return headers["set-cookie"].split(";")[0]


def bearer(cluster):
    return {"Authorization": f"Bearer {cluster.token}"}


def long_job(cluster, name="long"):
    job_id, _ = cluster.submit("--no-wait", "--name", name, "--", "sleep 300")
    wait_until(lambda: cluster.job(job_id)["attempts"] and
               all(t["state"] == "RUNNING" for t in cluster.job(job_id)["attempts"][0]["tasks"]),
               30, message=f"{job_id}'s task to run")
    return job_id


# ---- sign-in ------------------------------------------------------------------------

def test_nothing_answers_without_sign_in(head_only):
    c = head_only
    status, headers, body = request(c, "GET", "/")
    assert status == 401
    assert headers["content-type"].startswith("text/html")
    assert 'id="sign-in"' in body and "app.js" not in body, "signed out, / is the sign-in page, not the app"
    for path in ("/api/jobs", "/api/cluster", "/api/nodes", "/api/stream", "/metrics", "/assets/app.js",
                 "/assets/pages/job.js"):
        status, _, body = request(c, "GET", path)
        assert status == 401, f"{path} answered {status} without a token: {body[:200]}"
    # What the sign-in page itself needs, and the health check, are open.
    for path in ("/api/healthz", "/login", "/assets/login.js", "/assets/style.css"):
        status, _, _ = request(c, "GET", path)
        assert status == 200, path


def test_sign_in_sets_an_http_only_strict_cookie_that_works_on_both_ports(head_only):
    c = head_only
    status, _, body = request(c, "POST", "/api/session", body={"token": "wrong"})
    assert status == 401 and "unknown or revoked token" in body

    status, headers, _ = request(c, "POST", "/api/session", body={"token": c.token})
    assert status == 200
    cookie = headers["set-cookie"]
    for attribute in ("HttpOnly", "SameSite=Strict", "Path=/"):
        assert attribute in cookie, cookie
    assert c.token not in cookie, "the cookie carries a session id, never the token itself"
    pair = cookie.split(";")[0]
    for port in (c.dashboard_port, c.port):
        status, _, body = request(c, "GET", "/api/cluster", headers={"Cookie": pair}, port=port)
        assert status == 200, body
    status, headers, body = request(c, "GET", "/", headers={"Cookie": pair})
    assert status == 200 and "/assets/app.js" in body

    # A made-up session id is refused.
    name, value = pair.split("=", 1)
    forged = f"{name}={value[:-4]}abcd"
    status, _, _ = request(c, "GET", "/api/cluster", headers={"Cookie": forged})
    assert status == 401

    # Sign-out clears it and ends the session on the head: the same cookie, kept by
    # someone who copied it, no longer works, and the ending survives a head restart.
    status, headers, _ = request(c, "DELETE", "/api/session", headers={"Cookie": pair})
    assert status == 200 and "Max-Age=0" in headers["set-cookie"]
    status, _, body = request(c, "GET", "/api/cluster", headers={"Cookie": pair})
    assert status == 401 and "session has ended" in body, body


def test_sign_in_link_sets_the_cookie_and_drops_the_token_from_the_address(head_only):
    c = head_only
    status, headers, _ = request(c, "GET", f"/?token={c.token}")
    assert status == 303 and headers["location"] == "/"
    assert "HttpOnly" in headers["set-cookie"]
    status, _, body = request(c, "GET", "/?token=wrong")
    assert status == 401 and 'id="sign-in"' in body


def test_pages_carry_a_content_security_policy(head_only):
    c = head_only
    cookie = sign_in(c)
    for path in ("/", "/login", "/assets/app.js"):
        _, headers, _ = request(c, "GET", path, headers={"Cookie": cookie})
        csp = headers.get("content-security-policy", "")
        assert "script-src 'self'" in csp and "default-src 'none'" in csp, (path, csp)
        assert headers.get("x-content-type-options") == "nosniff"
    status, headers, body = request(c, "GET", "/assets/app.js", headers={"Cookie": cookie})
    assert status == 200 and headers["content-type"].startswith("text/javascript")
    # The UI writes data as text only.
    assert ".innerHTML" not in body


# ---- CSRF -----------------------------------------------------------------------------

def test_cross_site_stop_with_the_cookie_is_refused_and_changes_nothing(cluster):
    job_id = long_job(cluster)
    cookie = sign_in(cluster)
    host = f"127.0.0.1:{cluster.dashboard_port}"
    attacks = [
        {"Cookie": cookie, "Origin": "http://evil.example"},
        # The head's other port is another origin, and cookies do not care about ports.
        {"Cookie": cookie, "Origin": f"http://127.0.0.1:{cluster.port}"},
        {"Cookie": cookie, "Origin": "null"},
        # A foreign Origin loses even with the custom header.
        {"Cookie": cookie, "Origin": "http://evil.example", "X-AG-CSRF": "1"},
        # Neither an Origin nor the header: a plain form post from an old browser.
        {"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"},
    ]
    for headers in attacks:
        status, _, body = request(cluster, "POST", f"/api/jobs/{job_id}/stop", headers=headers, body="")
        assert status == 403, (headers, status, body)
        assert "cross-site" in body
    # Submitting is refused the same way.
    status, _, _ = request(cluster, "POST", "/api/jobs", headers={"Cookie": cookie, "Origin": "http://evil.example"},
                           body={"entrypoint": "true"})
    assert status == 403

    job = cluster.job(job_id)
    assert job["state"] == "RUNNING" and not job["stop_requested"]
    assert all(t["state"] == "RUNNING" for t in job["attempts"][0]["tasks"])
    assert len(cluster.jobs()) == 1, "the refused submit created nothing"

    # The dashboard's own request (same Origin, header) goes through.
    status, _, body = request(cluster, "POST", f"/api/jobs/{job_id}/stop",
                              headers={"Cookie": cookie, "Origin": f"http://{host}", "Host": host, "X-AG-CSRF": "1"},
                              body="")
    assert status == 200, body
    cluster.wait_state(job_id, "STOPPED")


def test_bearer_requests_need_no_origin_check(cluster):
    job_id = long_job(cluster)
    headers = dict(bearer(cluster), Origin="http://anything.example")
    status, _, body = request(cluster, "POST", f"/api/jobs/{job_id}/stop", headers=headers, body="")
    assert status == 200, body
    cluster.wait_state(job_id, "STOPPED")


# ---- the API the pages use ----------------------------------------------------------

def test_jobs_list_paginates_with_a_total(head_only):
    c = head_only
    status, body = c.api("POST", "/api/jobs/batch", {"jobs": [{"entrypoint": f"echo {i}", "job_name": f"j{i}"}
                                                              for i in range(120)]})
    assert status == 201
    ids = body["job_ids"]
    status, page = c.api("GET", "/api/jobs?limit=50&offset=50")
    assert status == 200
    assert page["total"] == 120 and page["offset"] == 50 and page["limit"] == 50
    newest_first = list(reversed(ids))
    assert [j["job_id"] for j in page["jobs"]] == newest_first[50:100]
    status, last = c.api("GET", "/api/jobs?limit=50&offset=100")
    assert [j["job_id"] for j in last["jobs"]] == newest_first[100:]
    status, filtered = c.api("GET", "/api/jobs?state=SUCCEEDED&limit=50")
    assert filtered["total"] == 0 and filtered["jobs"] == []
    status, filtered = c.api("GET", "/api/jobs?state=pending&limit=10")
    assert filtered["total"] == 120 and len(filtered["jobs"]) == 10
    status, _ = c.api("GET", "/api/jobs?offset=-1")
    assert status == 400


def test_jobs_list_searches_sorts_and_says_each_pending_jobs_place_in_the_queue(head_only):
    c = head_only  # no workers: every job stays PENDING, in submission order
    specs = [{"entrypoint": "python train.py --lr 0.1", "job_name": "bert-small", "labels": {"team": "nlp"}},
             {"entrypoint": "python eval.py", "job_name": "resnet", "labels": {"team": "vision"}},
             {"entrypoint": "torchrun finetune.py"},
             {"entrypoint": "echo BERT-large", "job_name": "alpha"}]
    status, body = c.api("POST", "/api/jobs/batch", {"jobs": specs, "allow_unschedulable": True})
    assert status == 201, body
    ids = body["job_ids"]

    def listed(query):
        status, page = c.api("GET", "/api/jobs?" + query)
        assert status == 200, page
        return page

    # Search: id, name, command, owner, label; case does not matter.
    assert [j["job_id"] for j in listed("q=bert")["jobs"]] == [ids[3], ids[0]]
    assert listed("q=bert")["total"] == 2
    assert [j["job_id"] for j in listed("q=team%3Dvision")["jobs"]] == [ids[1]]
    assert [j["job_id"] for j in listed("q=FINETUNE")["jobs"]] == [ids[2]]
    assert [j["job_id"] for j in listed("q=" + ids[2][-6:])["jobs"]] == [ids[2]]
    assert listed("q=admin")["total"] == 4
    assert listed("q=nothing-like-this")["total"] == 0
    assert listed("q=bert&state=RUNNING")["total"] == 0
    # Sort: by name ascending, descending; the default stays newest first.
    assert [j["name"] for j in listed("sort=name")["jobs"]] == ["", "alpha", "bert-small", "resnet"]
    assert [j["name"] for j in listed("sort=-name")["jobs"]] == ["resnet", "bert-small", "alpha", ""]
    assert [j["job_id"] for j in listed("sort=submitted")["jobs"]] == ids
    assert [j["job_id"] for j in listed("")["jobs"]] == list(reversed(ids))
    # Each pending job's place: 1 is the next the scheduler weighs.
    places = {j["job_id"]: j["queue_position"] for j in listed("")["jobs"]}
    assert places == {ids[0]: 1, ids[1]: 2, ids[2]: 3, ids[3]: 4}
    assert c.job(ids[2])["queue_position"] == 3
    assert listed("")["jobs"][0]["entrypoint"] == "echo BERT-large"
    assert listed("q=nlp")["jobs"][0]["labels"] == {"team": "nlp"}
    # A stopped job leaves the queue; those behind it move up.
    assert c.api("POST", f"/api/jobs/{ids[0]}/stop")[0] == 200
    assert c.job(ids[1])["queue_position"] == 1
    assert "queue_position" not in c.job(ids[0])
    # Bad input: what was wrong and what to use.
    status, err = c.api("GET", "/api/jobs?sort=size")
    assert status == 400 and "unknown sort 'size'; use submitted, name, owner, state or duration" in err["error"]
    status, err = c.api("GET", "/api/jobs?q=" + "x" * 201)
    assert status == 400 and "'q' is longer than 200 characters" in err["error"]
    status, err = c.api("GET", f"/api/jobs?sort=name&after={ids[1]}")
    assert status == 400 and "use 'offset' with 'sort'" in err["error"]


def test_log_tail_bytes_reads_only_the_end(cluster):
    job_id, proc = cluster.submit("--", "for i in $(seq 1 2000); do echo line-$i; done")
    assert proc.returncode == 0
    status, headers, full = cluster.api_full("GET", f"/api/jobs/{job_id}/logs?task_index=0")
    size = len(full.encode())
    status, headers, tail = cluster.api_full("GET", f"/api/jobs/{job_id}/logs?task_index=0&tail_bytes=100")
    assert status == 200
    assert tail == full[-100:]
    assert int(headers["X-AG-Offset"]) == size - 100
    assert int(headers["X-AG-Next-Offset"]) == size
    assert int(headers["X-AG-Log-Size"]) == size
    assert headers["X-AG-Log-Complete"] == "1"
    assert tail.endswith("line-2000\n")
    # Earlier parts by offset, as the viewer's "load earlier" asks.
    status, headers, earlier = cluster.api_full("GET", f"/api/jobs/{job_id}/logs?task_index=0&offset={size - 200}&max_bytes=100")
    assert earlier + tail == full[-200:]


def test_node_detail_lists_its_tasks(cluster):
    job_id, proc = cluster.submit("-n", "2", "--placement", "spread", "--", "echo hi")
    assert proc.returncode == 0
    for node in cluster.nodes():
        status, detail = cluster.api("GET", f"/api/nodes/{node['node_id']}")
        assert status == 200
        assert [(t["job_id"], t["state"]) for t in detail["tasks"]] == [(job_id, "SUCCEEDED")]
        wait_until(lambda: cluster.api("GET", f"/api/nodes/{node['node_id']}")[1]["usage"], 10,
                   message="usage samples from heartbeats")


def read_events(resp, want, timeout_s):
    """Reads server-sent events from `resp` until want(event, data) is true; returns
    the events seen as (name, data) pairs."""
    seen = []
    event = None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = resp.fp.readline().decode()
        if not line:
            break
        line = line.rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
            seen.append((event, data))
            if want(event, data):
                return seen
    raise AssertionError(f"no wanted event within {timeout_s}s; saw {[e for e, _ in seen]}")


def test_event_stream_pushes_job_and_node_changes(cluster):
    conn = http.client.HTTPConnection("127.0.0.1", cluster.dashboard_port, timeout=30)
    try:
        conn.request("GET", "/api/stream", headers=bearer(cluster))
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("Content-Type").startswith("text/event-stream")
        seen = read_events(resp, lambda e, d: e == "nodes", 10)
        assert seen[0][0] == "hello"
        nodes = seen[-1][1]["nodes"]
        assert sorted(n["address"] for n in nodes) == ["127.0.0.2", "127.0.0.3"]

        job_id, _ = cluster.submit("--no-wait", "--", "echo pushed")
        states = []

        def succeeded(event, data):
            if event != "jobs":
                return False
            for job in data["jobs"]:
                if job["job_id"] == job_id:
                    states.append(job["state"])
            return "SUCCEEDED" in states

        seen = read_events(resp, succeeded, 20)
        jobs_event = [d for e, d in seen if e == "jobs"][-1]
        assert jobs_event["counts"]["SUCCEEDED"] == 1
    finally:
        conn.close()


# ---- the browser suite --------------------------------------------------------------

def test_dashboard_in_headless_chromium(cluster):
    """tests/browser/ in Debian's Chromium: sign-in, nodes, live job updates, logs,
    escaping, stop. Screenshots land in build/browser-artifacts/."""
    assert os.path.exists(CHROMIUM), (
        f"Chromium is missing at {CHROMIUM}; the browser tests need Debian's chromium package: "
        "run scripts/install-deps.sh (or apt-get install chromium)")
    node = shutil.which("node")
    assert node, "node is missing; the browser tests need Node.js 20 (scripts/install-deps.sh installs it)"
    assert (BROWSER_DIR / "node_modules" / "playwright-core").is_dir(), (
        "playwright-core is not installed in tests/browser: run `npm ci --prefix tests/browser` "
        "(scripts/install-deps.sh and scripts/test.sh do)")
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # this run's screenshots only
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = dict(cluster.env,
               AG_DASHBOARD_URL=f"http://127.0.0.1:{cluster.dashboard_port}",
               AG_TOKEN=cluster.token,
               AG_BIN=AG_BIN,
               AG_BROWSER_ARTIFACTS=str(ARTIFACTS),
               CHROMIUM=CHROMIUM)
    try:
        proc = subprocess.run([node, "--test", "--test-reporter=spec", str(BROWSER_DIR)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=BROWSER_SUITE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the browser tests did not finish within {BROWSER_SUITE_TIMEOUT_S}s:\n"
                             f"{e.stdout}\n{e.stderr}") from None
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"browser tests failed (screenshots in {ARTIFACTS}):\n{output}"
    # The closing counts (spec reporter: "ℹ pass 8"); every step must have run.
    passed = re.search(r"\bpass (\d+)", output)
    assert passed and int(passed.group(1)) >= 10 and re.search(r"\bfail 0\b", output), output


def test_the_sign_in_link_ag_start_head_prints_opens_the_dashboard_in_a_browser(cluster_factory):
    """With TLS on, the link for the head's own machine is plain http (a browser does not
    trust the cluster CA); opened in Chromium it signs in, and the https link for other
    machines is printed with how to trust the CA."""
    c = cluster_factory("link", workers=(), start_head=False)
    out = c.start_head().stdout
    link = re.search(r"Sign in on this machine \(as admin\): (http://\S+/\?token=\S+)", out)
    assert link, out
    assert f"From other machines: https://127.0.0.1:{c.dashboard_port}/?token=... once the browser trusts" in out, out
    assert "ag tls ca-cert > aethergrid-ca.crt" in out
    node = shutil.which("node")
    assert node and os.path.exists(CHROMIUM), "the browser tests need node and chromium (scripts/install-deps.sh)"
    proc = subprocess.run([node, str(BROWSER_DIR / "open_link.mjs"), link.group(1), "#who"], cwd=REPO,
                          env=dict(c.env, CHROMIUM=CHROMIUM), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = json.loads(proc.stdout.strip().splitlines()[-1])
    assert shown["text"] == "admin · admin" and "token" not in shown["url"], shown


def test_ag_tls_ca_cert_prints_the_pinned_ca(cluster, tmp_path):
    proc = cluster.ag("tls", "ca-cert")
    assert proc.stdout == (cluster.head_data_dir / "tls" / "ca.crt").read_text()
    assert cluster.ca_fingerprint in proc.stderr, proc.stderr
    # Somewhere nothing is pinned for the head: refused, saying how to pin it.
    lost = cluster.ag("tls", "ca-cert", "--address", "10.255.0.9:6379", check=False,
                      env={"AG_CONFIG": str(tmp_path / "none.json"), "AG_SESSION_DIR": str(tmp_path / "no-session")})
    assert lost.returncode == 1 and "no cluster CA is known here for 10.255.0.9:6379" in lost.stderr, lost.stderr
