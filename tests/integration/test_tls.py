"""TLS between machines, over real daemons: the head makes its cluster CA and speaks
TLS on both ports; a worker or user on another machine verifies the head against the
CA fingerprint `ag start-head` prints before sending anything; plain HTTP is served
only on loopback; a wrong fingerprint or a different head is refused with a clear
error; `--insecure` turns TLS off and says so."""
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess

import pytest

from conftest import Cluster, free_ports


def other_address():
    """An address of this machine that is not loopback (traffic to it stays on the
    machine), or None."""
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=5).stdout.split()
    except OSError:
        return None
    for addr in out:
        if "." in addr and not addr.startswith("127."):
            return addr
    return None


OTHER = other_address()
needs_other = pytest.mark.skipif(OTHER is None, reason="this machine has no non-loopback IPv4 address")


def head_on_other_address(tmp_path):
    """A head listening on OTHER only (so every client reaches it as another machine
    would); the caller tears it down."""
    c = Cluster(tmp_path / "c")
    c.port, c.dashboard_port = free_ports(2, host=OTHER)
    args = c.head_args()
    args[args.index("--node-ip-address") + 1] = OTHER
    c.ag(*args)
    c.head_started = True
    return c


def tls_get(host, port, path, ca_pem=None, server_hostname=None, token=None):
    ctx = ssl.create_default_context(cadata=ca_pem) if ca_pem else ssl._create_unverified_context()
    conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        conn.request("GET", path, headers=headers)
        res = conn.getresponse()
        return res.status, res.read().decode()
    finally:
        conn.close()


def plain_get(host, port, path):
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", path)
        res = conn.getresponse()
        return res.status, res.read().decode()
    finally:
        conn.close()


def ca_pem(c):
    return (c.head_data_dir / "tls" / "ca.crt").read_text()


def test_the_head_speaks_tls_on_both_ports_with_its_own_ca(head_only):
    c = head_only
    for port in (c.port, c.dashboard_port):
        status, body = tls_get("127.0.0.1", port, "/api/cluster", ca_pem=ca_pem(c), token=c.token)
        assert status == 200 and json.loads(body)["tls"] is True
    # The CA is public (GET /api/tls/ca needs no credential) and is the one pinned.
    status, pem = tls_get("127.0.0.1", c.port, "/api/tls/ca")
    assert status == 200 and pem.strip() == ca_pem(c).strip()
    # The CLI on the head's own loopback needs no TLS, and says so.
    out = c.ag("status").stdout
    assert "TLS: on for other machines (this connection stays on this machine)" in out, out
    # The CA key is the head's alone.
    assert oct((c.head_data_dir / "tls" / "ca.key").stat().st_mode & 0o777) == "0o600"


def test_a_certificate_from_another_ca_is_not_trusted(head_only, tmp_path):
    c = head_only
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-subj", "/CN=other", "-days", "1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True, timeout=30)
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_get("127.0.0.1", c.port, "/api/healthz", ca_pem=cert.read_text())


@needs_other
def test_a_head_on_another_address_takes_plain_http_from_itself_and_workers_pin_its_ca(tmp_path):
    c = head_on_other_address(tmp_path)
    port = c.port
    address = f"{OTHER}:{port}"
    try:
        # Plain HTTP to the head's own address from its own machine is served (the
        # dashboard link `ag start-head` prints for it); from another machine it is
        # refused, saying why: test_multihost.py, across network namespaces.
        status, body = plain_get(OTHER, port, "/api/healthz")
        assert status == 200, body
        # A worker elsewhere: no session here (its own session dir), the join token only.
        token_file = tmp_path / "join"
        token_file.write_text(c.join_token)
        token_file.chmod(0o600)
        remote = {"AG_SESSION_DIR": str(tmp_path / "remote-session")}
        base = ["start-worker", "--head-node", address, "--token-file", token_file, "--node-ip-address", "127.0.0.2",
                "--data-dir", c.worker_data_dir("127.0.0.2"), "--num-cpus", 1]
        unpinned = c.ag(*base, env=remote, check=False)
        assert unpinned.returncode == 2
        assert f"the head at {address} is on another machine and its cluster CA is not pinned here" in unpinned.stderr
        wrong = c.ag(*base, "--ca-fingerprint", "sha256:" + "0" * 64, env=remote, check=False)
        assert wrong.returncode == 1 and f"has cluster CA {c.ca_fingerprint}, not the pinned sha256:000" in wrong.stderr
        bad = c.ag(*base, "--ca-fingerprint", "12345", env=remote, check=False)
        assert bad.returncode == 2 and "is not a CA fingerprint" in bad.stderr
        c.ag(*base, "--ca-fingerprint", c.ca_fingerprint, env=remote)
        # A user elsewhere pins it once with `ag config`, then everything is verified TLS.
        # (In a folder of its own: `ag config` makes its folder private.)
        user = dict(remote, AG_CONFIG=str(tmp_path / "client" / "cfg.json"))
        no_pin = c.ag("--address", address, "--token-file", c.head_data_dir / "token", "list-nodes", env=user,
                      check=False)
        assert no_pin.returncode == 1 and "--ca-fingerprint" in no_pin.stderr
        c.ag("config", "--address", address, "--ca-fingerprint", c.ca_fingerprint, env=user)
        nodes = json.loads(c.ag("-o", "json", "--token-file", c.head_data_dir / "token", "list-nodes", env=user).stdout)
        assert [n["state"] for n in nodes["nodes"]] == ["ALIVE"]
        out = c.ag("--token-file", c.head_data_dir / "token", "submit", "--", "echo over TLS", env=user).stdout
        assert "over TLS" in out
        status_out = c.ag("--token-file", c.head_data_dir / "token", "status", env=user).stdout
        assert "TLS: on (verified against the cluster CA)" in status_out
        # Its output travels on its log stream inside TLS, whole; the worker's log says
        # whether the kernel encrypts it (kTLS) or the worker does, and why.
        lines = c.ag("--token-file", c.head_data_dir / "token", "submit", "--", "seq 1 2000000", env=user,
                     timeout=120).stdout
        assert lines == "".join(f"{i}\n" for i in range(1, 2000001))
        worker_log = (c.worker_data_dir("127.0.0.2") / "worker.log").read_text(errors="replace")
        assert re.search(r"log stream to the head: TLSv1\.3 \S+, encrypted (by the kernel|in the worker: no kTLS, .+)",
                         worker_log), worker_log[-2000:]
        assert "task output goes in frames" not in worker_log, worker_log[-2000:]
        assert "opened its log stream" in (c.head_data_dir / "head.log").read_text(errors="replace")
    finally:
        # The worker "elsewhere" belongs to its own session, which the cluster's
        # teardown does not know: stopped here, and killed by pid if it did not stop.
        remote_session = tmp_path / "remote-session"
        c.ag("stop", env={"AG_SESSION_DIR": str(remote_session)}, check=False)
        for pid_file in (remote_session / "daemons").glob("*.pid"):
            try:
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
            except (ValueError, IndexError, OSError):
                pass
        c.teardown()


def test_a_worker_pinned_to_one_head_refuses_a_different_head(cluster_factory, tmp_path):
    c = cluster_factory("pinned", workers=())
    token_file = tmp_path / "join"
    token_file.write_text(c.join_token)
    token_file.chmod(0o600)
    base = ["start-worker", "--head-node", c.address, "--token-file", token_file, "--node-ip-address", "127.0.0.2",
            "--data-dir", c.worker_data_dir("127.0.0.2"), "--num-cpus", 1]
    c.ag(*base, "--ca-fingerprint", c.ca_fingerprint)
    c.ag("stop")
    # Another head at the same address: a new data dir, so a new CA (and join token).
    import shutil
    shutil.rmtree(c.head_data_dir)
    c.start_head()
    token_file.write_text(c.join_token)
    again = c.ag(*base, check=False)
    assert again.returncode != 0
    log = (c.worker_data_dir("127.0.0.2") / "worker.log").read_text()
    assert "does not verify against the pinned cluster CA" in again.stdout + again.stderr + log
    assert c.nodes() == []  # it sent nothing the head took


def test_insecure_turns_tls_off_and_says_so(cluster_factory):
    c = cluster_factory("insecure", start_head=False, workers=())
    args = c.head_args() + ["--insecure"]
    out = c.ag(*args).stdout
    c.head_started = True
    assert "WARNING: TLS is off (--insecure)" in out
    assert "--ca-fingerprint" not in out
    assert plain_get("127.0.0.1", c.port, "/api/tls/ca")[0] == 404
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException, OSError)):
        tls_get("127.0.0.1", c.port, "/api/healthz")
    status_out = c.ag("status").stdout
    assert "TLS: OFF: the head runs --insecure" in status_out
    c.start_worker("127.0.0.2", num_cpus=1)
    job_id, proc = c.submit("--", "echo plain")
    assert proc.returncode == 0 and "plain" in proc.stdout


def test_the_dashboard_port_can_carry_the_users_own_certificate(cluster_factory, tmp_path):
    c = cluster_factory("owncert", start_head=False, workers=())
    key, cert = tmp_path / "dash.key", tmp_path / "dash.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-subj", "/CN=dashboard.example", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=30)
    key.chmod(0o600)
    # A key others can read, or a key that is not the certificate's, is refused.
    key.chmod(0o644)
    shared = c.ag(*c.head_args(), "--tls-cert", cert, "--tls-key", key, check=False)
    assert shared.returncode != 0 and "can be read by other users" in shared.stdout + shared.stderr
    key.chmod(0o600)
    alone = c.ag(*c.head_args(), "--tls-cert", cert, check=False)
    assert alone.returncode == 2 and "give --tls-cert and --tls-key together" in alone.stderr
    c.ag(*c.head_args(), "--tls-cert", cert, "--tls-key", key)
    c.head_started = True
    status, _ = tls_get("127.0.0.1", c.dashboard_port, "/api/healthz", ca_pem=cert.read_text())
    assert status == 200
    # The API port keeps the cluster's own certificate (workers pin that CA).
    status, _ = tls_get("127.0.0.1", c.port, "/api/healthz", ca_pem=ca_pem(c))
    assert status == 200
