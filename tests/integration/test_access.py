"""Who may do what, over real daemons: users and roles (admin, user, viewer), job
owners, join tokens that only add nodes, node credentials bound to their node, and
revocation that works at once. Each refusal is a clear error that changes nothing."""
import json
import os
import stat

from conftest import wait_until, pid_alive
from ws_peer import WsPeer, register_message


def add_user(c, name, *args):
    """Adds a user through the CLI (as the first admin); returns their token."""
    out = c.ag_json("user", "add", name, *args)
    assert out["name"] == name and out["token"].startswith("agu_"), out
    return out["token"]


def as_user(c, token, *args, check=False):
    return c.ag(*args, check=check, env={"AG_TOKEN": token})


def long_job(c, token, *extra):
    proc = as_user(c, token, "submit", "--no-wait", *extra, "--", "sleep 60", check=True)
    job_id = proc.stdout.strip().splitlines()[-1]
    c.job_ids.add(job_id)
    c.wait_state(job_id, "RUNNING")
    return job_id


def test_a_user_cannot_stop_or_read_another_users_job_but_the_owner_group_and_admins_can(cluster):
    c = cluster
    alice = add_user(c, "alice", "--group", "vision")
    bob = add_user(c, "bob")
    carol = add_user(c, "carol", "--group", "vision")
    job_id = long_job(c, alice, "--env", "WANDB_API_KEY=s3cret")

    # Bob sees the job's status, owner included, but not its env vars or logs.
    status, job = c.api("GET", f"/api/jobs/{job_id}", token=bob)
    assert status == 200 and job["owner"] == "alice" and job["caller_may_act"] is False
    assert "env_vars" not in job["spec"]["runtime_env"] and job["spec"]["runtime_env"]["env_vars_hidden"] is True
    assert "s3cret" not in json.dumps(job)
    listed = json.loads(as_user(c, bob, "-o", "json", "list-jobs", check=True).stdout)
    assert [(j["job_id"], j["owner"]) for j in listed["jobs"]] == [(job_id, "alice")]
    status, metrics = c.api("GET", "/metrics", token=bob)
    assert status == 200 and 'ag_jobs_live{owner="alice",state="RUNNING"} 1' in metrics, metrics

    stop = as_user(c, bob, "stop-job", job_id)
    assert stop.returncode == 1
    assert stop.stderr.strip() == (f"error: refused (HTTP 403): job {job_id} belongs to alice; only its owner, "
                                   "members of the owner's groups and admins can stop it")
    logs = as_user(c, bob, "logs", job_id)
    assert logs.returncode == 1 and "can read its logs" in logs.stderr
    assert c.job(job_id)["state"] == "RUNNING"  # nothing changed

    # The owner sees everything; a member of her group may act on it; so may an admin.
    status, own = c.api("GET", f"/api/jobs/{job_id}", token=alice)
    assert own["spec"]["runtime_env"]["env_vars"] == {"WANDB_API_KEY": "s3cret"} and own["caller_may_act"]
    status, _ = c.api("GET", f"/api/jobs/{job_id}/logs?task_index=0", token=carol)
    assert status == 200
    as_user(c, carol, "stop-job", job_id, check=True)
    assert c.wait_state(job_id, ("STOPPED",))["state"] == "STOPPED"
    events = c.api("GET", f"/api/jobs/{job_id}/events")[1]["events"]
    assert any(e["message"] == "stop requested by carol" for e in events), events
    assert any(e["message"].startswith("submitted by alice from 127.0.0.1") for e in events), events


def test_a_viewer_reads_status_but_not_logs_and_changes_nothing(cluster):
    c = cluster
    alice = add_user(c, "alice")
    viewer = add_user(c, "vic", "--role", "viewer")
    job_id = long_job(c, alice)
    assert as_user(c, viewer, "list-nodes").returncode == 0
    status, job = c.api("GET", f"/api/jobs/{job_id}", token=viewer)
    assert status == 200 and job["state"] == "RUNNING"
    status, body = c.api("GET", f"/api/jobs/{job_id}/logs?task_index=0", token=viewer)
    assert status == 403 and "can read its logs" in body["error"]
    submit = as_user(c, viewer, "submit", "--", "true")
    assert submit.returncode == 1 and "viewers cannot submit jobs" in submit.stderr
    status, body = c.api("PUT", "/api/packages/" + "a" * 64, raw=b"x", token=viewer)
    assert status == 403 and "viewers cannot" in body["error"]
    assert as_user(c, viewer, "stop-job", job_id).returncode == 1
    for path in ("/api/users", "/api/tokens", "/api/audit"):
        status, body = c.api("GET", path, token=viewer)
        assert status == 403 and "only an admin" in body["error"], (path, body)
    assert len(c.jobs()) == 1 and c.job(job_id)["state"] == "RUNNING"


def test_disabled_and_rotated_tokens_stop_working_at_once(cluster):
    c = cluster
    token = add_user(c, "dave")
    assert c.api("GET", "/api/cluster", token=token)[0] == 200
    c.ag("user", "disable", "dave")
    status, body = c.api("GET", "/api/cluster", token=token)
    assert status == 401 and "user 'dave' is disabled" in body["error"]
    c.ag("user", "enable", "dave")
    assert c.api("GET", "/api/cluster", token=token)[0] == 200

    rotated = c.ag_json("user", "rotate", "dave")["token"]
    assert rotated != token
    assert c.api("GET", "/api/cluster", token=token)[0] == 401
    assert c.api("GET", "/api/cluster", token=rotated)[0] == 200
    # A user may rotate their own token, not another's.
    status, body = c.api("POST", "/api/users/dave/rotate", token=rotated)
    assert status == 200 and body["token"] != rotated
    other = add_user(c, "erin")
    status, body = c.api("POST", "/api/users/dave/rotate", token=other)
    assert status == 403
    # The last admin cannot be disabled (nobody could manage the cluster after).
    refused = c.ag("user", "disable", "admin", check=False)
    assert refused.returncode == 1 and "last enabled admin" in refused.stderr
    users = {u["name"]: u for u in c.ag_json("user", "list")["users"]}
    assert users["admin"]["role"] == "admin" and not users["admin"]["disabled"]
    assert "token_hash" not in users["dave"] and "token" not in users["dave"]


def test_bad_user_and_token_requests_get_clear_errors_and_change_nothing(cluster):
    c = cluster
    before = c.ag_json("user", "list")["users"]
    for name, expected in (("Bad Name", "is not valid"), ("../x", "is not valid"), ("admin", "already exists")):
        proc = c.ag("user", "add", name, check=False)
        assert proc.returncode == 1 and expected in proc.stderr, (name, proc.stderr)
    assert c.ag("user", "add", "frank", "--role", "root", check=False).returncode == 2
    status, body = c.api("POST", "/api/users", body={"name": "gina", "groups": ["Not OK"]})
    assert status == 400 and "group name 'Not OK' is not valid" in body["error"]
    status, body = c.api("POST", "/api/users", body={"name": "gina", "role": "superuser"})
    assert status == 400 and "use admin, user or viewer" in body["error"]
    assert c.ag_json("user", "list")["users"] == before
    bad_ttl = c.ag("token", "create", "--join", "--ttl", "forever", check=False)
    assert bad_ttl.returncode == 2 and "is not a duration" in bad_ttl.stderr
    status, body = c.api("POST", "/api/tokens", body={"kind": "join", "ttl_s": -5})
    assert status == 400 and "ttl_s" in body["error"]
    assert c.ag("token", "revoke", "join_nope", check=False).returncode == 1
    assert len(c.ag_json("token", "list")["tokens"]) == 1
    missing = c.ag("remove-node", "node_nope", check=False)
    assert missing.returncode == 1 and "no node with id 'node_nope'" in missing.stderr


def test_a_join_token_only_adds_nodes_and_a_node_credential_only_speaks_for_its_node(cluster_factory, tmp_path):
    c = cluster_factory("join", workers=())
    # The join token opens no API.
    for path in ("/api/jobs", "/api/cluster", "/metrics", "/api/packages/" + "a" * 64):
        status, body = c.api("GET", path, token=c.join_token)
        assert status == 403 and "join token can only register a worker node" in body["error"], (path, body)
    c.start_worker("127.0.0.2", token=c.join_token)
    credential_file = c.worker_data_dir("127.0.0.2") / "node-credential"
    assert stat.S_IMODE(credential_file.stat().st_mode) == 0o600
    credential = credential_file.read_text().strip()
    assert credential.startswith("agn_")
    # The node credential cannot submit, list, read logs or open the dashboard.
    for method, path in (("GET", "/api/jobs"), ("POST", "/api/jobs"), ("GET", "/api/jobs/job_x/logs"),
                         ("GET", "/"), ("GET", "/api/stream"), ("GET", "/api/users")):
        status, body = c.api(method, path, body={"entrypoint": "true"} if method == "POST" else None,
                             token=credential)
        assert status == 403 and "credential can only speak the worker protocol" in str(body), (path, body)
    # A restarted worker needs no join token: it comes back with its own credential.
    node_id = c.nodes()[0]["node_id"]
    c.ag("stop")
    c.start_head()
    c.start_worker("127.0.0.2")  # the session's join token would do too; the credential is used first
    wait_until(lambda: [n["state"] for n in c.nodes()] == ["ALIVE"], 20, message="worker back")
    assert c.nodes()[0]["node_id"] == node_id
    job_id, proc = c.submit("--", "echo hello from the node")
    assert proc.returncode == 0, proc.stderr


def test_a_revoked_join_token_stops_adding_nodes_at_once(cluster_factory):
    c = cluster_factory("revoke", workers=())
    made = c.ag_json("token", "create", "--join", "--ttl", "1h")
    assert made["token"].startswith("agj_") and made["expires_ms"] > 0
    c.ag("token", "revoke", made["id"])
    refused = c.start_worker("127.0.0.2", token=made["token"], check=False)
    assert refused.returncode != 0
    assert "unknown or revoked token" in refused.stdout + refused.stderr
    assert c.nodes() == []
    # The token start-head printed still works.
    c.start_worker("127.0.0.3", token=c.join_token)
    assert [n["address"] for n in c.nodes()] == ["127.0.0.3"]


def test_a_rogue_worker_with_a_join_token_cannot_take_over_a_live_node(cluster):
    c = cluster
    job_id, _ = c.submit("--no-wait", "--num-workers", "2", "--placement", "spread", "--", "sleep 3; echo ok")
    c.wait_state(job_id, "RUNNING")
    victim = c.nodes()[0]
    peer = WsPeer("127.0.0.1", c.port, token=c.join_token)
    try:
        peer.send_json(register_message(victim["node_id"]))
        reply = peer.recv_until("error")
        assert reply["message"].startswith(f"node id {victim['node_id']} is already registered and live")
        assert peer.recv() is None  # closed
    finally:
        peer.close()
    after = {n["node_id"]: n for n in c.nodes()}
    assert after[victim["node_id"]]["state"] == "ALIVE" and after[victim["node_id"]]["address"] == victim["address"]
    done = c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=30)
    assert done["state"] == "SUCCEEDED", done
    audit = c.ag_json("audit")["entries"]
    assert any(e["action"] == f"register node {victim['node_id']}" and e["outcome"].startswith("refused")
               for e in audit), audit


def test_remove_node_revokes_its_credential_and_its_worker_stops_with_a_clear_message(cluster_factory):
    c = cluster_factory("remove", workers=("127.0.0.2",))
    node_id = c.nodes()[0]["node_id"]
    worker = c.worker_pid("127.0.0.2")
    credential = (c.worker_data_dir("127.0.0.2") / "node-credential").read_text().strip()
    out = c.ag("remove-node", node_id).stdout
    assert f"Node {node_id} removed" in out
    assert c.nodes() == []
    wait_until(lambda: not pid_alive(worker), 20, message="the removed worker exits")
    log = (c.worker_data_dir("127.0.0.2") / "worker.log").read_text()
    assert "the head no longer accepts this node's credential" in log and "delete" in log
    status, _ = c.api("GET", "/api/packages/" + "a" * 64, token=credential)
    assert status == 401
    # Deleting the credential and joining again with a join token brings it back.
    os.unlink(c.worker_data_dir("127.0.0.2") / "node-credential")
    c.start_worker("127.0.0.2", token=c.join_token)
    assert [n["node_id"] for n in c.nodes()] == [node_id]


def test_the_audit_log_records_who_changed_what_and_only_admins_read_it(cluster):
    c = cluster
    alice = add_user(c, "alice")
    job_id = long_job(c, alice)
    as_user(c, alice, "stop-job", job_id, check=True)
    c.ag("token", "create", "--join")
    assert as_user(c, alice, "audit").returncode == 1
    entries = c.ag_json("audit")["entries"]
    actions = [(e["actor"], e["action"], e["outcome"]) for e in entries]
    assert ("admin", "POST /api/users (alice)", "ok") in actions
    assert ("alice", f"submit {job_id}", "ok") in actions
    assert ("alice", f"POST /api/jobs/{job_id}/stop", "ok") in actions
    assert ("admin", "POST /api/tokens", "ok") in actions
    assert ("alice", "GET /api/audit", "ok") not in actions  # reads are not audited
    assert all(e["from"] == "127.0.0.1" for e in entries if e["actor"] in ("admin", "alice"))
    # Newest first, and it survives a head restart.
    times = [e["time_ms"] for e in entries]
    assert times == sorted(times, reverse=True)
    c.ag("stop")
    c.start_head()
    again = [(e["actor"], e["action"]) for e in c.ag_json("audit")["entries"]]
    assert ("alice", f"POST /api/jobs/{job_id}/stop") in again


def test_user_set_and_delete_change_roles_and_groups_and_end_access_at_once(head_only):
    c = head_only
    alice = add_user(c, "alice")
    bob = add_user(c, "bob", "--group", "vision")
    job_id = as_user(c, alice, "submit", "--no-wait", "--", "true", check=True).stdout.strip().splitlines()[-1]
    # A role change holds on the next request: a viewer submits nothing.
    out = c.ag("user", "set", "alice", "--role", "viewer", "--group", "vision").stdout
    assert out == "User alice is now viewer, in groups vision\n", out
    proc = as_user(c, alice, "submit", "--", "true")
    assert proc.returncode == 1 and "viewers cannot submit jobs" in proc.stderr, proc
    users = {u["name"]: u for u in c.ag_json("user", "list")["users"]}
    assert users["alice"]["groups"] == ["vision"] and users["alice"]["role"] == "viewer"
    assert users["alice"]["created_ms"] > 0 and users["alice"]["token_issued_ms"] >= users["alice"]["created_ms"]
    c.ag("user", "set", "alice", "--remove-group", "vision", "--role", "user")
    # Deleting ends the token at once; the job keeps its owner's name.
    out = c.ag("user", "delete", "alice").stdout
    assert "their jobs keep alice as owner" in out, out
    proc = as_user(c, alice, "list-jobs")
    assert proc.returncode == 1 and "refused the credential" in proc.stderr, proc
    assert c.job(job_id)["owner"] == "alice"
    assert "alice" not in {u["name"] for u in c.ag_json("user", "list")["users"]}

    for args, code, said in ((["set", "nobody", "--role", "user"], 1, "no user 'nobody'"),
                             (["set", "bob"], 2, "say what to change"),
                             (["set", "bob", "--remove-group", "speech"], 1, "user 'bob' is not in group 'speech'"),
                             (["set", "bob", "--group", "Bad Group"], 1, "group name"),
                             (["delete", "admin"], 1, "last enabled admin"),
                             (["set", "admin", "--role", "user"], 1, "last enabled admin"),
                             (["delete", "nobody"], 1, "no user 'nobody'")):
        proc = c.ag("user", *args, check=False)
        assert proc.returncode == code and proc.stderr.startswith("error: ") and said in proc.stderr, (args, proc)
    assert {u["name"]: u["groups"] for u in c.ag_json("user", "list")["users"]}["bob"] == ["vision"]
    proc = as_user(c, bob, "user", "delete", "admin")
    assert proc.returncode == 1 and "only an admin" in proc.stderr, proc
