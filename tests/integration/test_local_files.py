"""On a shared host, what AetherGrid keeps on disk is its user's alone: the session dir,
the data dirs, the token and the head's database. A token file the head did not make,
one that others can read, or a link planted where the session dir or token goes is
refused with a clear error, and nothing is started."""
import os
import stat

from conftest import Cluster


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_what_the_head_keeps_is_private(cluster):
    assert mode(cluster.session_dir) == 0o700
    assert mode(cluster.head_data_dir) == 0o700
    assert mode(cluster.head_data_dir / "token") == 0o600
    assert mode(cluster.head_data_dir / "head.db") == 0o600
    assert mode(cluster.head_data_dir / "logs") == 0o700
    worker = cluster.worker_data_dir("127.0.0.2")
    if os.geteuid() == 0:
        # Tasks run as their users' own accounts and cross the data dir to their work
        # dirs, packages and homes; they cannot list it, nor enter what is the worker's.
        assert mode(worker) == 0o711
        assert mode(worker / "tasks") == 0o700
        assert mode(worker / "node-credential") == 0o600
    else:
        assert mode(worker) == 0o700


def start_head_over_planted_token(tmp_path, file_mode, owner=None):
    """A head started where someone left a token file first; returns (cluster, token
    path, the CompletedProcess). The caller tears the cluster down."""
    c = Cluster(tmp_path / "c")
    c.head_data_dir.mkdir(parents=True)
    token = c.head_data_dir / "token"
    token.write_text("planted-token\n")
    os.chmod(token, file_mode)
    if owner is not None:
        os.chown(token, owner, owner)
    return c, token, c.start_head(check=False)


def test_a_token_file_others_can_read_is_refused(tmp_path):
    c, token, proc = start_head_over_planted_token(tmp_path, 0o644)
    try:
        assert proc.returncode != 0
        assert (f"token file {token} can be read by other users (mode 0644); run `chmod 600 {token}`"
                in proc.stderr), proc.stderr
        assert c.head_pid() is None
    finally:
        c.teardown()


def test_a_token_file_of_another_user_is_refused(tmp_path):
    c, token, proc = start_head_over_planted_token(tmp_path, 0o600, owner=65534)
    try:
        assert proc.returncode != 0
        assert f"token file {token} belongs to uid 65534, not to this user" in proc.stderr, proc.stderr
    finally:
        c.teardown()


def test_a_link_planted_as_the_token_file_is_refused(tmp_path):
    c = Cluster(tmp_path / "c")
    c.head_data_dir.mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.write_text("attacker-known-token\n")
    os.chmod(target, 0o600)
    (c.head_data_dir / "token").symlink_to(target)
    try:
        proc = c.start_head(check=False)
        assert proc.returncode != 0
        assert "is a symbolic link; the head uses only a token file it created" in proc.stderr, proc.stderr
    finally:
        c.teardown()


def test_a_link_planted_as_the_session_dir_is_refused(tmp_path):
    c = Cluster(tmp_path / "c")
    real = tmp_path / "attacker-owned"
    real.mkdir()
    os.rmdir(c.session_dir)
    c.session_dir.symlink_to(real)
    try:
        proc = c.ag("start-head", "--port", c.port, "--dashboard-port", c.dashboard_port, check=False)
        assert proc.returncode != 0
        assert f"session dir: {c.session_dir} is a symbolic link, not a folder" in proc.stderr, proc.stderr
        assert list(real.iterdir()) == []  # nothing was written through the link
    finally:
        c.teardown()


def test_a_session_dir_of_another_user_is_refused(tmp_path):
    c = Cluster(tmp_path / "c")
    os.chown(c.session_dir, 65534, 65534)
    try:
        proc = c.ag("start-head", "--port", c.port, "--dashboard-port", c.dashboard_port, check=False)
        assert proc.returncode != 0
        assert f"session dir: {c.session_dir} belongs to uid 65534, not to this user" in proc.stderr, proc.stderr
    finally:
        os.chown(c.session_dir, os.getuid(), os.getgid())
        c.teardown()
