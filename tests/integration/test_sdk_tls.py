"""The SDK's side of TLS on the head's port, over real daemons: how a Client chooses
between TLS (verified against the cluster CA) and plain HTTP, the way the `ag` CLI does,
and the errors it gives when it cannot trust the head.

Another machine is played by a Client that has no session of the head (AG_SESSION_DIR
is an empty folder): it then needs ca_fingerprint=, ca_file= or the CA `ag config`
pinned, as a user elsewhere would (only the loopback fallback differs: a loopback head
with no CA known is spoken to in plain HTTP). Every request has a timeout and every
subprocess a deadline, so no test can hang.
"""
import hashlib
import json
import os
import re
import ssl
import subprocess
import sys

import pytest

from conftest import REPO, Cluster

SDK_PATH = str(REPO / "python")
if SDK_PATH not in sys.path:
    sys.path.insert(0, SDK_PATH)

import aethergrid as ag  # noqa: E402

# Seconds any one SDK request may take in these tests.
REQUEST_TIMEOUT_S = 10
# Seconds `openssl` may take to make a throwaway CA.
OPENSSL_TIMEOUT_S = 30

_FINGERPRINT_RE = re.compile(r"--ca-fingerprint (sha256:[0-9a-f]{64})")


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No address, token or user config from the caller's environment, and an empty
    session: only what a test sets is used."""
    for key in ("AG_TOKEN", "AG_TOKEN_FILE", "AG_ADDRESS"):
        monkeypatch.delenv(key, raising=False)
    no_session = tmp_path / "no-session"
    no_session.mkdir()
    monkeypatch.setenv("AG_SESSION_DIR", str(no_session))
    monkeypatch.setenv("AG_CONFIG", str(tmp_path / "no-config" / "config.json"))
    return monkeypatch


@pytest.fixture
def tls_head(tmp_path):
    """A head with no workers (TLS on), and the fingerprint its `ag start-head` printed."""
    c = Cluster(tmp_path / "head")
    try:
        proc = c.start_head()
        m = _FINGERPRINT_RE.search(proc.stdout + proc.stderr)
        assert m, f"no --ca-fingerprint in start-head's output:\n{proc.stdout}\n{proc.stderr}"
        yield c, m.group(1)
    finally:
        c.teardown()


def fingerprint_of_file(path):
    """sha256: and the hex SHA-256 of the DER of the PEM certificate in `path`."""
    der = ssl.PEM_cert_to_DER_cert(path.read_text())
    return "sha256:" + hashlib.sha256(der).hexdigest()


def other_ca(tmp_path):
    """A throwaway CA's certificate (PEM file) that signed nothing of the head's."""
    key, cert = tmp_path / "other-ca.key", tmp_path / "other-ca.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-subj", "/CN=not the cluster CA", "-days", "1", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True, timeout=OPENSSL_TIMEOUT_S,
                   stdin=subprocess.DEVNULL)
    return cert


def client(address=None, **kwargs):
    return ag.Client(address, timeout=REQUEST_TIMEOUT_S, **kwargs)


# ---- choosing, before any request --------------------------------------------------------

def test_a_head_on_another_machine_needs_its_ca_pinned(clean_env):
    with pytest.raises(ag.AGValidationError) as info:
        client("192.0.2.10:6379", token="agu_0123")
    message = str(info.value)
    assert ("the head at 192.0.2.10:6379 is on another machine and its cluster CA is not "
            "pinned here") in message
    assert "`ag config --address 192.0.2.10:6379 --ca-fingerprint sha256:...`" in message
    assert "ca_fingerprint=" in message and "insecure=True" in message
    # insecure=True is the explicit way to send the token in clear text anyway.
    assert client("192.0.2.10:6379", token="agu_0123", insecure=True).scheme == "http"


def test_contradicting_or_malformed_tls_arguments_are_refused(clean_env, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    fingerprint = "sha256:" + "ab" * 32
    with pytest.raises(ag.AGValidationError, match="insecure=True or ca_file="):
        client("127.0.0.1:1", token="t", insecure=True, ca_file=ca)
    with pytest.raises(ag.AGValidationError, match="insecure=True or ca_fingerprint="):
        client("127.0.0.1:1", token="t", insecure=True, ca_fingerprint=fingerprint)
    with pytest.raises(ag.AGValidationError, match="ca_file= or ca_fingerprint=, not both"):
        client("127.0.0.1:1", token="t", ca_file=ca, ca_fingerprint=fingerprint)
    for bad in ("ab" * 32, "sha256:abc", "md5:" + "ab" * 32):
        with pytest.raises(ag.AGValidationError, match="is not a CA fingerprint"):
            client("127.0.0.1:1", token="t", ca_fingerprint=bad)
    with pytest.raises(ag.AGValidationError, match="cannot read ca_file"):
        client("127.0.0.1:1", token="t", ca_file=tmp_path / "missing.pem")
    with pytest.raises(ag.AGValidationError, match="holds no PEM certificate"):
        client("127.0.0.1:1", token="t", ca_file=ca)
    # "https://" demands TLS: with no CA known it is refused, not downgraded.
    with pytest.raises(ag.AGValidationError, match="asks for TLS"):
        client("https://127.0.0.1:1", token="t")


def test_a_loopback_head_with_no_ca_known_gets_plain_http(clean_env):
    # As the CLI: the head answers plain HTTP to its own machine.
    assert client("127.0.0.1:1", token="t").scheme == "http"
    assert client("localhost:1", token="t").scheme == "http"


# ---- over a real head -------------------------------------------------------------------

def test_a_client_in_the_heads_session_speaks_tls(tls_head, clean_env):
    c, _ = tls_head
    clean_env.setenv("AG_SESSION_DIR", str(c.session_dir))
    # On the head's loopback the session's client needs no TLS (nothing leaves the
    # machine); given the cluster CA it verifies the head over TLS.
    assert client().scheme == "http"
    me = client(ca_file=str(c.head_data_dir / "tls" / "ca.crt"))
    assert me.address == c.address
    assert me.scheme == "https"
    assert me.whoami()["role"] == "admin"
    assert me.list_jobs() == []
    # Many requests, each its own TLS connection, share the client's one context.
    for _ in range(5):
        assert me.cluster()["nodes_total"] == 0


def test_a_ca_that_did_not_sign_the_head_fails_verification(tls_head, clean_env, tmp_path):
    c, _ = tls_head
    wrong = client(c.address, token=c.token, ca_file=other_ca(tmp_path))
    assert wrong.scheme == "https"
    with pytest.raises(ag.AGValidationError) as info:
        wrong.whoami()
    message = str(info.value)
    assert f"the certificate of the head at {c.address} does not verify against the cluster CA" in message
    assert "ca_file" in message and "certificate verify failed" in message, message
    assert info.value.__cause__ is None and info.value.__suppress_context__
    # The head's own CA, given as a file, verifies.
    right = client(c.address, token=c.token, ca_file=c.head_data_dir / "tls" / "ca.crt")
    assert right.scheme == "https"
    assert right.whoami()["role"] == "admin"


def test_ca_fingerprint_pins_the_head_from_elsewhere(tls_head, clean_env):
    c, printed = tls_head
    # The fingerprint start-head prints is the SHA-256 of the CA's DER.
    assert printed == fingerprint_of_file(c.head_data_dir / "tls" / "ca.crt")
    remote = client(c.address, token=c.token, ca_fingerprint=printed)
    assert remote.scheme == "https"
    assert remote.whoami()["role"] == "admin"
    # Case does not matter, as for the CLI.
    upper = client(c.address, token=c.token, ca_fingerprint="sha256:" + printed[7:].upper())
    assert upper.scheme == "https" and upper.whoami()["role"] == "admin"


def test_a_wrong_fingerprint_is_refused_naming_both(tls_head, clean_env):
    c, printed = tls_head
    wrong = "sha256:" + ("0" * 64 if printed[7:] != "0" * 64 else "1" * 64)
    with pytest.raises(ag.AGValidationError) as info:
        client(c.address, token=c.token, ca_fingerprint=wrong)
    message = str(info.value)
    assert printed in message and wrong in message
    assert f"the head at {c.address} has cluster CA {printed}, not the pinned {wrong}" in message


def test_insecure_speaks_plain_http_to_a_loopback_head(tls_head, clean_env):
    c, _ = tls_head
    # Even in the head's session, where TLS would be chosen.
    clean_env.setenv("AG_SESSION_DIR", str(c.session_dir))
    plain = client(insecure=True)
    assert plain.scheme == "http"
    assert plain.whoami()["role"] == "admin"


def test_the_ca_pinned_by_ag_config_is_used(tls_head, clean_env, tmp_path):
    c, printed = tls_head
    config = tmp_path / "user" / "config.json"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    c.ag("config", "--address", c.address, "--ca-fingerprint", printed,
         env={"AG_CONFIG": str(config), "AG_SESSION_DIR": str(elsewhere)})
    written = json.loads(config.read_text())
    assert written["address"] == c.address and c.address in written["ca_files"]
    clean_env.setenv("AG_CONFIG", str(config))
    clean_env.setenv("AG_SESSION_DIR", str(elsewhere))
    pinned = client(token=c.token)  # the address, too, comes from the config
    assert pinned.address == c.address
    assert pinned.scheme == "https"
    assert pinned.whoami()["role"] == "admin"


def test_a_working_dir_uploads_over_tls(tls_head, clean_env, tmp_path):
    c, _ = tls_head
    clean_env.setenv("AG_SESSION_DIR", str(c.session_dir))
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("print('hi')\n")
    (work / "blob.bin").write_bytes(os.urandom(3 << 20))  # incompressible: several chunks
    me = client(ca_file=str(c.head_data_dir / "tls" / "ca.crt"))
    assert me.scheme == "https"
    job = me.submit_job("python train.py", runtime_env={"working_dir": str(work)})
    info = job.info()
    assert info["state"] == "PENDING"  # no workers: it waits, with its package stored
    assert info["spec"]["runtime_env"]["working_dir"].startswith("sha256:")
    status, stats = c.api("GET", "/api/packages")
    assert status == 200, stats
    assert stats["uploads"] == 1 and stats["bytes_uploaded"] > 3 << 20, stats


def test_a_head_started_insecure_is_spoken_to_in_plain_http(tmp_path, clean_env):
    c = Cluster(tmp_path / "insecure-head")
    try:
        c.ag(*c.head_args(), "--insecure", timeout=30)
        c.head_started = True
        session = json.loads((c.session_dir / "session.json").read_text())
        assert session.get("ca_file", "") == ""
        clean_env.setenv("AG_SESSION_DIR", str(c.session_dir))
        me = client()
        assert me.scheme == "http"
        assert me.whoami()["role"] == "admin"
        # It has no CA to pin: a fingerprint cannot be checked, and says why.
        with pytest.raises(ag.AGConnectionError, match="insecure=True"):
            client(c.address, token=c.token, ca_fingerprint="sha256:" + "ab" * 32)
    finally:
        c.teardown()
