"""Tests of the `aethergrid` SDK with users and roles: where a Client finds its user
token (token=, token_file=, AG_TOKEN, AG_TOKEN_FILE, the session), the private-file
check on token files, whoami, and the errors for a refused token (401) and a refused
action (403), over real daemons (the fixtures of conftest.py).

Every client has a short request timeout, every wait a deadline; the fixtures stop the
daemons and kill whatever the cluster left.
"""
import json
import os
import sys

import pytest

from conftest import REPO, job_processes, wait_until

SDK_PATH = str(REPO / "python")
if SDK_PATH not in sys.path:
    sys.path.insert(0, SDK_PATH)

import aethergrid as ag  # noqa: E402

# Seconds any one SDK request may take in these tests.
REQUEST_TIMEOUT_S = 10


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No token or address from the caller's environment, and an empty session, so that
    only what a test sets is used."""
    for key in ("AG_TOKEN", "AG_TOKEN_FILE", "AG_ADDRESS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AG_SESSION_DIR", str(tmp_path / "no-session"))
    return monkeypatch


def add_user(cluster, name, role="user", groups=()):
    """Adds a user with the admin's CLI; returns their token."""
    args = ["user", "add", name, "--role", role]
    for group in groups:
        args += ["--group", group]
    out = json.loads(cluster.ag(*args, "-o", "json").stdout)
    token = out["token"]
    assert token.startswith("agu_"), out
    return token


def write_token_file(path, token, mode=0o600):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, mode)
    return path


def client(cluster, **kwargs):
    return ag.Client(cluster.address, timeout=REQUEST_TIMEOUT_S, **kwargs)


# ---- where the token comes from ---------------------------------------------------------

def test_token_file_and_its_environment_variable_give_the_users_identity(head_only, tmp_path, clean_env):
    alice = add_user(head_only, "alice", groups=["ml"])
    path = write_token_file(tmp_path / "alice-token", alice)
    expected = {"name": "alice", "role": "user", "groups": ["ml"]}

    assert client(head_only, token_file=path).whoami() == expected
    assert client(head_only, token_file=str(path)).whoami() == expected
    # "~" is expanded, as a shell would for the CLI's --token-file.
    clean_env.setenv("HOME", str(tmp_path))
    assert client(head_only, token_file="~/alice-token").whoami() == expected

    clean_env.setenv("AG_TOKEN_FILE", str(path))
    assert client(head_only).whoami() == expected
    # The CLI's order: token=, token_file=, AG_TOKEN, AG_TOKEN_FILE, the session.
    assert client(head_only, token=head_only.token).whoami()["role"] == "admin"
    clean_env.setenv("AG_TOKEN", head_only.token)
    assert client(head_only).whoami()["role"] == "admin"
    assert client(head_only, token_file=path).whoami() == expected

    admin = client(head_only, token=head_only.token).whoami()
    assert admin == {"name": "admin", "role": "admin", "groups": []}


def test_the_session_token_is_the_last_resort(head_only, clean_env):
    clean_env.setenv("AG_SESSION_DIR", str(head_only.session_dir))
    me = ag.Client(timeout=REQUEST_TIMEOUT_S).whoami()
    assert me["name"] == "admin" and me["role"] == "admin"


def test_token_file_readable_by_others_is_refused_with_the_clis_words(tmp_path, clean_env):
    path = write_token_file(tmp_path / "token", "agu_0123", mode=0o644)
    with pytest.raises(ag.AGValidationError) as info:
        ag.Client("127.0.0.1:1", token_file=path)
    assert str(info.value) == (f"token_file: token file {path} can be read by other users "
                               f"(mode 0644); run `chmod 600 {path}`")

    os.chmod(path, 0o640)
    clean_env.setenv("AG_TOKEN_FILE", str(path))
    with pytest.raises(ag.AGValidationError) as info:
        ag.Client("127.0.0.1:1")
    assert str(info.value) == (f"AG_TOKEN_FILE: token file {path} can be read by other users "
                               f"(mode 0640); run `chmod 600 {path}`")

    os.chmod(path, 0o600)
    assert ag.Client("127.0.0.1:1")._transport.token == "agu_0123"


def test_token_files_that_are_missing_empty_or_not_files_are_refused(tmp_path, clean_env):
    missing = tmp_path / "missing"
    with pytest.raises(ag.AGValidationError) as info:
        ag.Client("127.0.0.1:1", token_file=missing)
    assert str(info.value) == f"token_file: cannot read token file {missing}: No such file or directory"

    empty = write_token_file(tmp_path / "empty", "")
    with pytest.raises(ag.AGValidationError) as info:
        ag.Client("127.0.0.1:1", token_file=empty)
    assert str(info.value) == f"token_file: token file {empty} is empty"

    folder = tmp_path / "folder"
    folder.mkdir(mode=0o700)
    with pytest.raises(ag.AGValidationError) as info:
        ag.Client("127.0.0.1:1", token_file=folder)
    assert str(info.value) == f"token_file: token file {folder} is not a regular file"

    # A FIFO is refused at once rather than blocking the open.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ag.AGValidationError) as info:
        ag.Client("127.0.0.1:1", token_file=fifo)
    assert str(info.value) == f"token_file: token file {fifo} is not a regular file"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another uid needs root")
def test_token_file_of_another_user_is_refused(tmp_path, clean_env):
    path = write_token_file(tmp_path / "theirs", "agu_0123")
    os.chown(path, 65534, 65534)
    with pytest.raises(ag.AGValidationError) as info:
        ag.Client("127.0.0.1:1", token_file=path)
    assert str(info.value) == (f"token_file: token file {path} belongs to uid 65534, not to this "
                               f"user; use a file of your own")


def test_token_and_token_file_together_are_refused(tmp_path, clean_env):
    path = write_token_file(tmp_path / "token", "agu_0123")
    with pytest.raises(ag.AGValidationError) as info:
        ag.Client("127.0.0.1:1", token="agu_0123", token_file=path)
    assert str(info.value) == "give token= or token_file=, not both"
    # The refusal comes before anything else is looked at, even a bad file.
    with pytest.raises(ag.AGValidationError) as info:
        ag.Client("127.0.0.1:1", token="agu_0123", token_file=tmp_path / "missing")
    assert str(info.value) == "give token= or token_file=, not both"


# ---- what the head refuses --------------------------------------------------------------

def test_a_refused_token_says_how_to_pass_a_user_token(head_only, clean_env):
    with pytest.raises(ag.AGAuthError) as info:
        client(head_only, token="agu_notatoken").whoami()
    assert info.value.status == 401
    text = str(info.value)
    for hint in ("token_file=", "AG_TOKEN_FILE", "token=", "AG_TOKEN"):
        assert hint in text, text

    # A join token is known to the head, but it registers nodes only.
    with pytest.raises(ag.AGPermissionError) as info:
        client(head_only, token=head_only.join_token).list_jobs()
    assert "use a user token for the API" in info.value.message

    # A disabled user's token stops working.
    alice = client(head_only, token=add_user(head_only, "alice"))
    assert alice.whoami()["name"] == "alice"
    head_only.ag("user", "disable", "alice")
    with pytest.raises(ag.AGAuthError) as info:
        alice.list_jobs()
    assert info.value.status == 401


def test_a_user_cannot_stop_another_users_job(cluster, clean_env):
    alice = client(cluster, token=add_user(cluster, "alice", groups=["ml"]))
    bob = client(cluster, token=add_user(cluster, "bob"))
    carol = client(cluster, token=add_user(cluster, "carol", groups=["ml"]))
    vic = client(cluster, token=add_user(cluster, "vic", role="viewer"))
    admin = client(cluster, token=cluster.token)

    job = alice.submit_job("sleep 300", runtime_env={"env_vars": {"SECRET": "s3cret"}})
    cluster.job_ids.add(job.job_id)
    cluster.wait_state(job.job_id, "RUNNING", timeout=30)
    wait_until(lambda: job_processes([job.job_id]), 15, message="the job's process to start")
    assert job.owner() == "alice"
    assert [j["owner"] for j in bob.list_jobs() if j["job_id"] == job.job_id] == ["alice"]

    theirs = bob.get_job(job.job_id)
    with pytest.raises(ag.AGPermissionError) as info:
        theirs.stop()
    error = info.value
    assert isinstance(error, ag.AGError) and not isinstance(error, ag.AGAuthError)
    assert error.status == 403
    assert error.message == (f"job {job.job_id} belongs to alice; only its owner, members of "
                             f"the owner's groups and admins can stop it")
    assert str(error) == f"POST /api/jobs/{job.job_id}/stop refused (HTTP 403): {error.message}"
    with pytest.raises(ag.AGPermissionError) as info:
        theirs.get_logs()
    assert info.value.message.endswith("can read its logs")

    # The job runs on, untouched.
    seen = admin.get_job(job.job_id).info()
    assert seen["state"] == "RUNNING" and not seen["stop_requested"]
    assert job_processes([job.job_id]), "a refused stop must leave the job's process alone"

    # Bob sees the job but not its environment; a member of alice's group and an admin
    # may act on it.
    bobs_view = theirs.info()
    assert bobs_view["owner"] == "alice" and bobs_view["caller_may_act"] is False
    assert "env_vars" not in bobs_view["spec"]["runtime_env"]
    assert bobs_view["spec"]["runtime_env"]["env_vars_hidden"] is True
    assert job.info()["caller_may_act"] is True
    assert job.info()["spec"]["runtime_env"]["env_vars"] == {"SECRET": "s3cret"}
    assert carol.get_job(job.job_id).info()["caller_may_act"] is True
    assert admin.get_job(job.job_id).info()["caller_may_act"] is True

    # A viewer may look but not submit.
    assert vic.whoami()["role"] == "viewer"
    with pytest.raises(ag.AGPermissionError) as info:
        vic.submit_job("true")
    assert info.value.message == "user vic is a viewer: viewers cannot submit jobs"

    # Its owner may stop it.
    job.stop()
    with pytest.raises(ag.AGJobFailedError) as info:
        job.wait(timeout=30)
    assert info.value.state == "STOPPED"
    wait_until(lambda: not job_processes([job.job_id]), 15, message="the job's processes to end")
