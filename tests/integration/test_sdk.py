"""Tests of the `aethergrid` Python SDK: unit tests of working_dir packing (no cluster),
and end-to-end tests over real daemons (the `cluster` fixtures of conftest.py).

The SDK is imported in-process from <repo>/python; the example script runs as a
subprocess with PYTHONPATH pointing there. Every wait has a timeout and every
subprocess a deadline, so no test can hang.
"""
import io
import json
import os
import socket
import struct
import subprocess
import sys
import tarfile
import threading
import time

import pytest

from conftest import PYTHON, REPO, free_ports

SDK_PATH = str(REPO / "python")
if SDK_PATH not in sys.path:
    sys.path.insert(0, SDK_PATH)

import aethergrid as ag  # noqa: E402
from aethergrid import _gitignore, packaging  # noqa: E402
from aethergrid.runtime_env import PackageUploader  # noqa: E402

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


# ---- helpers ----------------------------------------------------------------------------

def client_for(cluster, **kwargs):
    return ag.Client(cluster.address, token=cluster.token, **kwargs)


def package_stats(cluster):
    status, body = cluster.api("GET", "/api/packages")
    assert status == 200, f"GET /api/packages -> {status}: {body}"
    return body


class RequestLog:
    """Records every request a Client sends (method and path), passing it through."""

    def __init__(self, client):
        self.calls = []
        transport = client._transport
        original = transport.request

        def recording(method, path, *args, **kwargs):
            self.calls.append((method, path, kwargs.get("query")))
            return original(method, path, *args, **kwargs)

        transport.request = recording

    def paths(self, method=None):
        return [p for m, p, _ in self.calls if method is None or m == method]


def write_tree(root, files):
    """Creates files under root: {relpath: text or bytes}; a relpath ending in "/" is an
    (empty) folder."""
    for rel, content in files.items():
        path = root / rel
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def packed_names(folder, excludes=None):
    with packaging.pack_working_dir(folder, excludes) as package:
        return package.names()


def wait_done(job, timeout=60):
    """The job's info once it has ended, whatever the ending (never raises for FAILED)."""
    try:
        return job.wait(timeout=timeout)
    except ag.AGJobFailedError as e:
        return e.info


# ---- packing: unit tests, no cluster ----------------------------------------------------

def make_project(root):
    write_tree(root, {
        "train.py": "print('hi')\n",
        "run.sh": "#!/bin/sh\necho run\n",
        "pkg/__init__.py": "",
        "pkg/model.py": "X = 1\n",
        "empty/": None,
    })
    os.chmod(root / "run.sh", 0o700)
    os.chmod(root / "train.py", 0o600)
    os.symlink("train.py", root / "link.py")


def test_pack_is_deterministic(tmp_path):
    a = tmp_path / "a"
    make_project(a)
    with packaging.pack_working_dir(a) as first:
        first_bytes = first.read_bytes()
        first_hash = first.sha256
    # New mtimes and other non-executable permission bits change nothing.
    later = time.time() + 1000
    for p in a.rglob("*"):
        if not p.is_symlink():
            os.utime(p, (later, later))
    os.chmod(a / "train.py", 0o664)
    with packaging.pack_working_dir(a) as second:
        assert second.read_bytes() == first_bytes
        assert second.sha256 == first_hash

    # The same content in another folder, created in another order, packs the same too.
    b = tmp_path / "b"
    b.mkdir()
    os.symlink("train.py", b / "link.py")
    write_tree(b, {"empty/": None, "pkg/model.py": "X = 1\n", "pkg/__init__.py": "",
                   "run.sh": "#!/bin/sh\necho run\n", "train.py": "print('hi')\n"})
    os.chmod(b / "run.sh", 0o755)
    with packaging.pack_working_dir(b) as third:
        assert third.sha256 == first_hash

    # A plain tar, as `ag submit` packs it.
    with tarfile.open(fileobj=io.BytesIO(first_bytes), mode="r:") as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert names == ["empty", "link.py", "pkg", "pkg/__init__.py", "pkg/model.py", "run.sh", "train.py"]
    by_name = {m.name: m for m in members}
    for m in members:
        assert (m.mtime, m.uid, m.gid, m.uname, m.gname) == (0, 0, 0, "", "")
    assert by_name["empty"].isdir() and by_name["empty"].mode == 0o755
    assert by_name["pkg"].isdir() and by_name["pkg"].mode == 0o755
    assert by_name["run.sh"].mode == 0o755
    assert by_name["train.py"].mode == 0o644
    assert by_name["link.py"].issym() and by_name["link.py"].linkname == "train.py"


def test_long_and_non_ascii_names_round_trip(tmp_path):
    src = tmp_path / "src"
    long_path = "d" * 60 + "/" + "e" * 70 + "/" + "f" * 120 + ".txt"
    write_tree(src, {long_path: "deep\n", "données é.txt": "uni\n"})
    os.symlink(long_path, src / "link")
    with packaging.pack_working_dir(src) as package:
        with tarfile.open(fileobj=io.BytesIO(package.read_bytes()), mode="r:") as tar:
            members = {m.name: m for m in tar.getmembers()}
            assert tar.extractfile(members[long_path]).read() == b"deep\n"
            assert tar.extractfile(members["données é.txt"]).read() == b"uni\n"
            assert members["link"].issym() and members["link"].linkname == long_path
    assert sorted(members) == sorted(["d" * 60, "d" * 60 + "/" + "e" * 70, long_path, "données é.txt", "link"])


def test_changing_one_file_changes_the_hash(tmp_path):
    make_project(tmp_path)
    with packaging.pack_working_dir(tmp_path) as before:
        hash_before = before.sha256
    (tmp_path / "pkg" / "model.py").write_text("X = 2\n")
    with packaging.pack_working_dir(tmp_path) as after:
        assert after.sha256 != hash_before
    # Ignored content does not count.
    (tmp_path / "pkg" / "model.py").write_text("X = 1\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0" * 10)
    with packaging.pack_working_dir(tmp_path) as same:
        assert same.sha256 == hash_before


def test_gitignore_and_excludes_are_honoured(tmp_path):
    write_tree(tmp_path, {
        ".gitignore": "# comment\n\n*.log\n!keep.log\nbuild/\n/root_only.txt\ndocs/**/*.tmp\n"
                      "cache\nname\\ with\\ space \n",
        "a.py": "", "run.log": "", "keep.log": "", "root_only.txt": "",
        "build/out.o": "", "src/build/x.o": "", "src/build.txt": "", "src/root_only.txt": "",
        "src/deep/trace.log": "", "docs/a/b/c.tmp": "", "docs/c.tmp": "", "docs/readme.md": "",
        "cache": "", "src/cache/blob": "",
        "name with space": "",
        ".git/config": "", "sub/.git": "gitdir: elsewhere", "src/__pycache__/m.pyc": "",
        "sub/.gitignore": "*.dat\n!important.dat\n/local.txt\n",
        "sub/x.dat": "", "sub/important.dat": "", "sub/local.txt": "", "sub/deeper/local.txt": "",
        "sub/deeper/y.dat": "", "z.dat": "",
        "data/big.bin": "", "model.ckpt": "", "sub/model.ckpt": "", "notes/keep.ckpt": "",
    })
    names = packed_names(tmp_path, excludes=["data/", "*.ckpt", "!notes/keep.ckpt", "/z.dat"])
    assert names == [
        ".gitignore",
        "a.py",
        "docs", "docs/a", "docs/a/b", "docs/readme.md",  # docs/**/*.tmp: docs/c.tmp too
        "keep.log",
        "notes", "notes/keep.ckpt",
        "src", "src/build.txt", "src/deep", "src/root_only.txt",
        "sub", "sub/.gitignore", "sub/deeper", "sub/deeper/local.txt", "sub/important.dat",
    ]


@pytest.mark.parametrize("pattern, path, is_dir, ignored", [
    ("*.py", "a.py", False, True),
    ("*.py", "x/y/a.py", False, True),
    ("*.py", "a.pyc", False, False),
    ("/a.py", "x/a.py", False, False),
    ("x/a.py", "x/a.py", False, True),
    ("x/a.py", "y/x/a.py", False, False),
    ("out/", "out", False, False),
    ("out/", "out", True, True),
    ("out/", "src/out", True, True),
    ("**/logs", "a/b/logs", True, True),
    ("**/logs/debug.log", "logs/debug.log", False, True),
    ("a/**/b", "a/b", True, True),
    ("a/**/b", "a/x/y/b", False, True),
    ("a/**", "a/x/y", False, True),
    ("a/**", "a", True, False),
    ("doc/*.txt", "doc/x.txt", False, True),
    ("doc/*.txt", "doc/sub/x.txt", False, False),
    ("file?.txt", "file1.txt", False, True),
    ("file?.txt", "file10.txt", False, False),
    ("[abc].txt", "b.txt", False, True),
    ("[!abc].txt", "b.txt", False, False),
    ("[!abc].txt", "d.txt", False, True),
    ("\\#hash", "#hash", False, True),
    ("\\!bang", "!bang", False, True),
    ("# comment", "# comment", False, False),
    ("trail   ", "trail", False, True),
])
def test_gitignore_pattern_rules(pattern, path, is_dir, ignored):
    assert _gitignore.is_ignored([_gitignore.PatternList([pattern])], path, is_dir) is ignored


def test_nested_gitignore_takes_precedence():
    lists = [_gitignore.PatternList(["*.txt"]), _gitignore.PatternList(["!keep.txt"], base="sub")]
    assert _gitignore.is_ignored(lists, "sub/keep.txt", False) is False
    assert _gitignore.is_ignored(lists, "keep.txt", False) is True
    assert _gitignore.is_ignored(lists, "sub/other.txt", False) is True


def test_runtime_env_shorthands_and_excludes_are_not_sent():
    from aethergrid import runtime_env
    env = runtime_env.normalize({"python": "/usr/bin/python3", "env_vars": {"A": "1"}})
    assert env == {"python": {"executable": "/usr/bin/python3"}, "env_vars": {"A": "1"}}
    with pytest.raises(ag.AGValidationError):
        runtime_env.normalize(["working_dir"])


def test_exceptions_are_importable_both_ways():
    for name in ("AGError", "AGTimeoutError", "AGJobFailedError", "AGConnectionError",
                 "AGAuthError", "AGPermissionError", "AGValidationError", "AGNotFoundError"):
        cls = getattr(ag.exceptions, name)
        assert getattr(ag, name) is cls
        assert issubclass(cls, ag.AGError)


# ---- the client against a fake that resets the connection (unit test of _http) ---------

class ResettingServer:
    """Accepts connections on 127.0.0.1; resets the first after reading its request,
    answers the next with 201 {"job_id": "job_fake"}. Records the request bodies."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(10)
        self.port = self.sock.getsockname()[1]
        self.bodies = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @staticmethod
    def _read_request(conn):
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        while len(body) < length:
            body += conn.recv(65536)
        return body

    def _serve(self):
        try:
            for i in range(2):
                conn, _ = self.sock.accept()
                with conn:
                    conn.settimeout(10)
                    self.bodies.append(json.loads(self._read_request(conn)))
                    if i == 0:
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        continue  # closing with linger 0 sends a RST
                    payload = b'{"job_id": "job_fake"}'
                    conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(payload), payload))
        except OSError:
            pass
        finally:
            self.sock.close()


def test_submit_is_retried_once_with_the_same_submission_id():
    server = ResettingServer()
    client = ag.Client(f"http://127.0.0.1:{server.port}", token="t", timeout=10)
    job = client.submit_job("true")
    server.thread.join(10)
    assert job.job_id == "job_fake"
    assert len(server.bodies) == 2
    first, second = server.bodies
    assert first == second
    assert len(first["submission_id"]) == 32 and int(first["submission_id"], 16) >= 0


def test_head_down_raises_connection_error_naming_the_address():
    (port,) = free_ports(1)
    client = ag.Client(f"127.0.0.1:{port}", token="t", timeout=5)
    started = time.monotonic()
    for call in (client.list_nodes, client.cluster, lambda: client.submit_job("true")):
        with pytest.raises(ag.AGConnectionError) as info:
            call()
        assert f"127.0.0.1:{port}" in str(info.value)
        assert "refused" in str(info.value)
        # One clear error, not a chained urllib/http.client traceback.
        assert info.value.__cause__ is None and info.value.__suppress_context__
    assert time.monotonic() - started < 5


def test_address_forms():
    assert ag.Client("127.0.0.1:7000", token="t").address == "127.0.0.1:7000"
    assert ag.Client("http://127.0.0.1:7000/", token="t").address == "127.0.0.1:7000"
    assert ag.Client("localhost", token="t").address == "localhost:6379"
    with pytest.raises(ag.AGValidationError):
        ag.Client("ftp://x:1", token="t")


# ---- end to end over real daemons -------------------------------------------------------

def test_example_submit_script_end_to_end(cluster):
    env = dict(cluster.env)
    env["PYTHONPATH"] = SDK_PATH + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    script = REPO / "examples" / "submit_job.py"
    try:
        proc = subprocess.run([PYTHON, str(script), cluster.address], env=env, capture_output=True,
                              text=True, timeout=240, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"submit_job.py did not finish in 240 s: {e.stdout!r} {e.stderr!r}") from None
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    for epoch in range(5):
        assert f"Epoch {epoch}, Loss:" in proc.stdout, proc.stdout
    assert "[Rank 0] Training finished." in proc.stdout

    job = cluster.jobs()[0]
    info = cluster.job(job["job_id"])
    assert info["state"] == "SUCCEEDED"
    assert info["spec"]["runtime_env"]["working_dir"].startswith("sha256:")
    tasks = info["attempts"][0]["tasks"]
    assert len(tasks) == 2 and tasks[0]["node_id"] != tasks[1]["node_id"]  # spread


def test_same_working_dir_is_uploaded_once_and_a_change_uploads_again(cluster, tmp_path):
    client = client_for(cluster)
    folder = tmp_path / "code"
    long_path = "d" * 60 + "/" + "e" * 70 + "/" + "f" * 80 + ".txt"  # needs a PAX header
    write_tree(folder, {"data.txt": "version one\n", "lib/util.py": "X = 1\n",
                        long_path: "deep\n", "données.txt": "unicode\n"})
    stats0 = package_stats(cluster)

    job1 = client.submit_job(f"cat data.txt {long_path} données.txt", runtime_env={"working_dir": str(folder)})
    info1 = job1.wait(timeout=60)
    assert job1.get_logs() == "version one\ndeep\nunicode\n"
    stats1 = package_stats(cluster)
    assert stats1["bytes_uploaded"] > stats0["bytes_uploaded"]
    assert stats1["uploads"] == stats0["uploads"] + 1
    hash1 = info1["spec"]["runtime_env"]["working_dir"]
    assert hash1.startswith("sha256:")

    log = RequestLog(client)
    job2 = client.submit_job("cat data.txt", runtime_env={"working_dir": str(folder)})
    info2 = job2.wait(timeout=60)
    assert package_stats(cluster)["bytes_uploaded"] == stats1["bytes_uploaded"]
    assert package_stats(cluster)["uploads"] == stats1["uploads"]
    assert log.paths("PUT") == []
    assert info2["spec"]["runtime_env"]["working_dir"] == hash1
    assert "excludes" not in info2["spec"]["runtime_env"]

    (folder / "data.txt").write_text("version two\n")
    job3 = client.submit_job("cat data.txt", runtime_env={"working_dir": str(folder)})
    info3 = job3.wait(timeout=60)
    assert info3["spec"]["runtime_env"]["working_dir"] != hash1
    assert package_stats(cluster)["bytes_uploaded"] > stats1["bytes_uploaded"]
    assert job3.get_logs().strip() == "version two"


def test_wait_timeout_is_accurate_and_does_not_busy_poll(cluster):
    client = client_for(cluster)
    job = client.submit_job("sleep 60")
    log = RequestLog(client)
    for asked in (1.5, 0.3):
        started = time.monotonic()
        with pytest.raises(ag.AGTimeoutError) as info:
            job.wait(timeout=asked)
        elapsed = time.monotonic() - started
        assert abs(elapsed - asked) <= 0.5, f"asked {asked} s, waited {elapsed:.3f} s"
        assert info.value.job_id == job.job_id
    # One long poll per wait, no polling loop.
    assert len(log.calls) <= 4, log.calls
    assert job.status() in ("PENDING", "RUNNING")  # the job keeps running
    job.stop()
    with pytest.raises(ag.AGJobFailedError) as info:
        job.wait(timeout=30)
    assert info.value.state == "STOPPED"
    assert job.get_error_message()


def test_failing_job_raises_with_task_and_exit_code(cluster):
    client = client_for(cluster)
    job = client.submit_job(
        "sh -c 'if [ \"$AG_TASK_INDEX\" = 1 ]; then echo bad >&2; exit 3; fi; sleep 30'",
        num_workers=2, placement="spread")
    started = time.monotonic()
    with pytest.raises(ag.AGJobFailedError) as info:
        job.wait(timeout=30)
    assert time.monotonic() - started < 25
    error = info.value
    assert "task 1" in error.message and "3" in error.message, error.message
    assert error.info["state"] == "FAILED" and error.job_id == job.job_id
    assert job.get_error_message() == error.message
    assert job.status() == "FAILED"
    assert "bad" in job.get_logs(task_index=1)
    assert job.events(), "a failed job has events"


def test_submit_jobs_fifty_in_one_request(cluster):
    client = client_for(cluster)
    log = RequestLog(client)
    jobs = client.submit_jobs([{"entrypoint": f"echo job-{i}", "job_name": f"batch-{i}"} for i in range(50)])
    assert log.paths("POST") == ["/api/jobs/batch"]
    assert len(jobs) == 50 and len({j.job_id for j in jobs}) == 50
    deadline = time.monotonic() + 120
    for job in jobs:
        job.wait(timeout=max(1.0, deadline - time.monotonic()))
    assert jobs[7].get_logs().strip() == "job-7"
    assert jobs[49].info()["name"] == "batch-49"

    # All or none: one bad spec refuses the whole batch.
    before = len(client.list_jobs())
    with pytest.raises(ag.AGValidationError) as info:
        client.submit_jobs([{"entrypoint": "true"}, {"entrypoint": "true", "num_workers": 0}])
    assert "num_workers" in str(info.value)
    assert len(client.list_jobs()) == before


def test_env_vars_expand_against_the_task_environment(cluster):
    client = client_for(cluster)
    script = "import os; print(os.environ['MYPATH']); print(os.environ['BRACED']); print(os.environ['HOME'])"
    job = client.submit_job(f'/usr/bin/python3 -c "{script}"',
                            runtime_env={"env_vars": {"MYPATH": "/code:$HOME", "BRACED": "${HOME}/x"}})
    job.wait(timeout=60)
    mypath, braced, home = job.get_logs().strip().splitlines()
    assert home
    assert mypath == "/code:" + home
    assert braced == home + "/x"


def test_python_executable_present(cluster):
    client = client_for(cluster)
    entry = "python -c 'import sys; print(sys.executable)'"
    long_form = client.submit_job(entry, runtime_env={"python": {"executable": "/usr/bin/python3"}})
    shorthand = client.submit_job(entry, runtime_env={"python": "/usr/bin/python3"})
    for job in (long_form, shorthand):
        job.wait(timeout=60)
        assert job.get_logs().strip() == "/usr/bin/python3"
    assert shorthand.info()["spec"]["runtime_env"]["python"] == {"executable": "/usr/bin/python3"}


def test_python_executable_of_a_virtualenv_runs_in_that_env(cluster, tmp_path):
    # The common case: python.executable is a venv's interpreter. `python` must run it
    # as that venv (its sys.prefix, hence its site-packages), which a symlink to the
    # interpreter placed elsewhere would not do.
    venv = tmp_path / "venv"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    client = client_for(cluster)
    job = client.submit_job("python -c 'import sys; print(sys.prefix)'",
                            runtime_env={"python": str(venv / "bin" / "python")})
    job.wait(timeout=60)
    assert job.get_logs().strip() == str(venv)


def test_python_executable_missing_fails_the_job(cluster):
    client = client_for(cluster)
    job = client.submit_job("python -c 'print(1)'", runtime_env={"python": "/nonexistent/python"})
    started = time.monotonic()
    with pytest.raises(ag.AGJobFailedError) as info:
        job.wait(timeout=30)
    assert time.monotonic() - started < 25
    message = info.value.message.lower()
    assert "python executable" in message and "not found" in message, info.value.message


def test_bad_working_dir_is_refused_before_any_upload(head_only, tmp_path):
    client = client_for(head_only)
    stats = package_stats(head_only)
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    log = RequestLog(client)
    for bad in (tmp_path / "missing", a_file):
        with pytest.raises(ag.AGValidationError) as info:
            client.submit_job("true", runtime_env={"working_dir": str(bad)})
        assert str(bad) in str(info.value)
        assert info.value.field == "runtime_env.working_dir"
    with pytest.raises(ag.AGValidationError):
        client.submit_jobs([{"entrypoint": "true", "runtime_env": {"working_dir": str(tmp_path / "missing")}}])
    assert log.calls == []
    assert package_stats(head_only) == stats
    assert head_only.jobs() == []


def test_package_over_the_size_limit_names_size_and_biggest_files(cluster_factory, tmp_path, monkeypatch):
    head = cluster_factory("small", start_head=False)
    head.ag(*head.head_args(), "--max-package-mb", "1")
    head.head_started = True
    folder = tmp_path / "big"
    write_tree(folder, {"huge.bin": os.urandom(1536 * 1024), "mid.bin": os.urandom(300 * 1024),
                        "a.txt": "a", "b.txt": "bb", "c.txt": "ccc", "d.txt": "dddd"})
    client = client_for(head)

    def check(error):
        text = str(error)
        with packaging.pack_working_dir(folder) as package:
            assert str(package.size) in text
        for name in ("huge.bin", "mid.bin", "d.txt", "c.txt", "b.txt"):
            assert name in text, text
        assert "a.txt" not in text  # only the 5 biggest
        assert head.jobs() == []

    # The head tells its limit: refused before anything is sent.
    with pytest.raises(ag.AGValidationError) as info:
        client.submit_job("true", runtime_env={"working_dir": str(folder)})
    check(info.value)
    assert package_stats(head)["bytes_uploaded"] == 0

    # A head that does not tell its limit answers the upload with 413.
    monkeypatch.setattr(PackageUploader, "_head_limit", lambda self: None)
    with pytest.raises(ag.AGValidationError) as info:
        client.submit_job("true", runtime_env={"working_dir": str(folder)})
    assert info.value.status == 413
    check(info.value)


def test_upload_progress_bar_only_on_a_terminal(head_only, tmp_path):
    folder = tmp_path / "data"
    write_tree(folder, {"blob.bin": os.urandom(3 << 20)})

    class FakeTerminal(io.StringIO):
        def isatty(self):
            return True

    client = client_for(head_only)
    terminal = FakeTerminal()
    env = PackageUploader(client._transport, progress_stream=terminal).prepare({"working_dir": str(folder)})
    assert env["working_dir"].startswith("sha256:")
    assert "100%" in terminal.getvalue() and terminal.getvalue().endswith("\n")

    (folder / "blob.bin").write_bytes(os.urandom(3 << 20))
    not_terminal = io.StringIO()
    PackageUploader(client._transport, progress_stream=not_terminal).prepare({"working_dir": str(folder)})
    assert not_terminal.getvalue() == ""
    assert package_stats(head_only)["uploads"] == 2


def test_tail_logs_follows_a_running_job(cluster):
    client = client_for(cluster)
    script = "import time\nfor i in range(6):\n    print('line', i, flush=True)\n    time.sleep(0.4)\n"
    job = client.submit_job(f"/usr/bin/python3 -c \"{script}\"")
    chunks = []
    errors = []

    def follow():
        try:
            for chunk in job.tail_logs():
                chunks.append((time.monotonic(), chunk))
        except Exception as e:  # reported below
            errors.append(e)

    started = time.monotonic()
    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    follower.join(60)
    assert not follower.is_alive(), "tail_logs did not end after the job finished"
    assert not errors, errors
    text = "".join(c for _, c in chunks)
    assert text == "".join(f"line {i}\n" for i in range(6))
    # Output arrived while the job ran, not all at the end.
    assert len(chunks) >= 3, chunks
    assert chunks[-1][0] - chunks[0][0] >= 1.0
    assert job.status() == "SUCCEEDED"
    assert time.monotonic() - started < 30


def test_tail_logs_follows_a_retry(cluster):
    client = client_for(cluster)
    job = client.submit_job("sh -c 'echo attempt $AG_ATTEMPT; sleep 0.3; [ \"$AG_ATTEMPT\" = 1 ]'",
                            max_retries=1)
    out = []
    follower = threading.Thread(target=lambda: out.extend(job.tail_logs()), daemon=True)
    follower.start()
    follower.join(60)
    assert not follower.is_alive(), "tail_logs did not end after the job finished"
    assert "".join(out) == "attempt 0\nattempt 1\n"
    assert job.wait(timeout=10)["num_attempts"] == 2
    assert job.get_logs(attempt=0) == "attempt 0\n"
    assert job.get_logs() == "attempt 1\n"


def test_auth_errors(cluster, tmp_path, monkeypatch):
    with pytest.raises(ag.AGAuthError) as info:
        ag.Client(cluster.address, token="wrong-token").list_jobs()
    assert info.value.status == 401
    # No token anywhere: no argument, no AG_TOKEN, an empty session dir.
    monkeypatch.delenv("AG_TOKEN", raising=False)
    monkeypatch.setenv("AG_SESSION_DIR", str(tmp_path / "no-session"))
    with pytest.raises(ag.AGAuthError) as info:
        ag.Client(cluster.address).list_nodes()
    assert "token" in str(info.value)


def test_client_finds_the_session_and_reads_the_cluster(cluster, monkeypatch):
    monkeypatch.delenv("AG_ADDRESS", raising=False)
    monkeypatch.delenv("AG_TOKEN", raising=False)
    monkeypatch.setenv("AG_SESSION_DIR", str(cluster.session_dir))
    client = ag.Client()
    assert client.address == cluster.address
    assert client.cluster()["nodes_alive"] == 2
    nodes = client.list_nodes()
    assert sorted(n["address"] for n in nodes) == ["127.0.0.2", "127.0.0.3"]

    job = client.submit_job("echo hello", job_name="hello", labels={"team": "sdk"})
    assert job.wait(timeout=30)["state"] == "SUCCEEDED"
    assert client.get_job(job.job_id) == job
    assert job.job_id in [j["job_id"] for j in client.list_jobs(state="SUCCEEDED")]
    assert job.job_id not in [j["job_id"] for j in client.list_jobs(state="RUNNING")]
    assert job.get_logs() == "hello\n"
    assert job.get_logs(attempt=0) == "hello\n"
    assert job.get_error_message() is None
    assert all({"time_ms", "message"} <= set(e) for e in job.events())
    with pytest.raises(ag.AGNotFoundError):
        client.get_job("job_doesnotexist")


def test_head_refusals_become_validation_errors(head_only):
    client = client_for(head_only)
    with pytest.raises(ag.AGValidationError) as info:
        client.submit_job("true", num_workers=0)
    assert info.value.field == "num_workers"
    assert "must be between 1 and 4096, got 0" in str(info.value)

    with pytest.raises(ag.AGValidationError) as info:
        client.submit_job("true", runtime_env={"no_such_key": 1})
    assert "no_such_key" in str(info.value) and "env_vars" in str(info.value)

    with pytest.raises(ag.AGValidationError) as info:
        client.submit_job("true", runtime_env={"image": "Ubuntu:22.04"})
    assert "runtime_env.image" in str(info.value) and "malformed name part 'Ubuntu'" in str(info.value)

    with pytest.raises(ag.AGValidationError) as info:
        client.submit_job("true", runtime_env={"image": "ubuntu:22.04", "mounts": ["data:/data"]})
    assert "'data' is not an absolute path" in str(info.value)

    with pytest.raises(ag.AGValidationError) as info:
        client.submit_job("true", runtime_env={"image": "ubuntu:22.04", "mounts": ["/a:/b:rx"]})
    assert "is not SOURCE:TARGET or SOURCE:TARGET:ro" in str(info.value)

    with pytest.raises(ag.AGValidationError):
        client.submit_job("true", placement="everywhere")
    assert head_only.jobs() == []
