"""The head's side of the worker protocol against a peer that breaks it: every bad
message is answered with an error that names what was wrong, and nothing the real
cluster is doing is lost or changed."""
import os

from ws_peer import WsPeer, register_message


def connect(cluster):
    peer = WsPeer("127.0.0.1", cluster.port, token=cluster.join_token)  # a rogue worker with a valid join token
    assert peer.status == 101, f"worker join refused: {peer.status}"
    return peer


def node_ids(cluster):
    return {n["node_id"] for n in cluster.nodes()}


def test_a_first_message_that_is_not_a_register_is_refused_and_the_channel_closed(head_only):
    peer = connect(head_only)
    try:
        peer.send_json({"type": "heartbeat", "usage": {"cpu_percent": 1, "memory_used_bytes": 1, "gpus": []}})
        msg = peer.recv()
        assert msg == {"type": "error", "message": "the first message must be a register message"}
        assert peer.recv() is None  # closed
    finally:
        peer.close()
    assert node_ids(head_only) == set()


def test_a_register_with_a_bad_field_is_refused_naming_the_field(head_only):
    cases = [
        ({"node_id": "../../etc"}, "register.node_id: expected 1-64 characters of [A-Za-z0-9_-]"),
        ({"resources": {"cpu_millis": "lots", "memory_bytes": 1, "gpu_ids": []}},
         "register.resources.cpu_millis: expected an integer"),
        ({"address": None}, "register.address: expected a string"),
        # An absurd offer would draw every queued job (and its env_vars) to this node.
        ({"resources": {"cpu_millis": 9 * 10**15, "memory_bytes": 1, "gpu_ids": []}},
         f"register.resources.cpu_millis: must be between 0 and 100000000, got {9 * 10**15}"),
        ({"resources": {"cpu_millis": 1000, "memory_bytes": 1, "gpu_ids": [0, 0]}},
         "register.resources.gpu_ids: holds 0 twice"),
    ]
    for change, expected in cases:
        peer = connect(head_only)
        try:
            msg = register_message("node_rogue")
            msg.update(change)
            peer.send_json(msg)
            reply = peer.recv()
            assert reply["type"] == "error"
            assert reply["message"] == "bad register message: " + expected
            assert peer.recv() is None
        finally:
            peer.close()
    peer = connect(head_only)
    try:
        peer.send_text("{not json")
        assert peer.recv()["message"] == "bad register message: message is not valid JSON"
    finally:
        peer.close()
    assert node_ids(head_only) == set()


def test_bad_messages_after_registering_get_errors_and_lose_nothing(cluster, tmp_path):
    # A real job runs on the real workers throughout.
    job_id, _ = cluster.submit("--no-wait", "--num-workers", "2", "--", "sleep 2; echo done")
    peer = connect(cluster)
    try:
        peer.send_json(register_message("node_rogue"))
        assert peer.recv_until("registered")["node_id"] == "node_rogue"
        bad = [
            ({"type": "task_exited", "job_id": job_id, "attempt": "0", "task_index": 0},
             "task_exited.attempt: expected an integer"),
            ({"type": "task_started", "job_id": job_id, "attempt": 0, "task_index": 0},
             "task_started.pid: missing"),
            ({"type": "reboot"}, "unknown message type 'reboot' from a worker"),
            ({"type": "task_exited", "job_id": "../../../tmp/x", "attempt": 0, "task_index": 0},
             "task_exited.job_id: expected 1-64 characters of [A-Za-z0-9_-]"),
        ]
        for message, expected in bad:
            peer.send_json(message)
            reply = peer.recv_until("error")
            assert reply is not None, f"no answer to {message}"
            assert reply["message"] == "the head could not accept a message: " + expected
        # A log frame whose ids would make a path outside the head's data dir.
        peer.send_log_frame({"job_id": "../../escape", "attempt": 0, "task_index": 0, "offset": 0}, b"owned\n")
        reply = peer.recv_until("error")
        assert reply["message"].startswith("the head could not accept a log frame: log_frame.job_id:")
        assert not (cluster.session_dir / "escape").exists()
        assert not any(p.name == "escape" for p in cluster.session_dir.rglob("escape"))
        # The channel is still open and the node still registered.
        peer.send_json({"type": "heartbeat", "usage": {"cpu_percent": 1.0, "memory_used_bytes": 1, "gpus": []},
                        "busy_ports": []})
        assert "node_rogue" in node_ids(cluster)
    finally:
        peer.close()
    job = cluster.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=30)
    assert job["state"] == "SUCCEEDED", job
    assert [t["state"] for t in job["attempts"][-1]["tasks"]] == ["SUCCEEDED", "SUCCEEDED"]


def test_a_node_cannot_report_on_another_nodes_task(cluster):
    # A running job on the real workers; a second node (with a valid join token) forges
    # that its tasks started and ended.
    job_id, _ = cluster.submit("--no-wait", "--num-workers", "2", "--placement", "spread", "--", "sleep 3")
    job = cluster.wait_state(job_id, "RUNNING")
    peer = connect(cluster)
    try:
        peer.send_json(register_message("node_rogue"))
        assert peer.recv_until("registered")["node_id"] == "node_rogue"
        for index in (0, 1):
            peer.send_json({"type": "task_exited", "job_id": job_id, "attempt": 0, "task_index": index,
                            "exit_code": 0, "signal": None})
            reply = peer.recv_until("error")
            assert reply["message"] == (f"the head refused a message: task {job_id}/0/{index} "
                                        "is not placed on node node_rogue")
        peer.send_json({"type": "task_started", "job_id": job_id, "attempt": 0, "task_index": 0, "pid": 1})
        assert peer.recv_until("error")["message"].startswith("the head refused a message: task ")
        # Nothing changed: the job still runs, with its real pids.
        now = cluster.job(job_id)
        assert now["state"] == "RUNNING"
        assert all(t["pid"] != 1 for t in now["attempts"][-1]["tasks"])
    finally:
        peer.close()
    done = cluster.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=30)
    assert done["state"] == "SUCCEEDED", done
    assert job["attempts"][-1]["tasks"][0]["node_id"] != "node_rogue"
