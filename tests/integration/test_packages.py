"""working_dir packages through the real head and workers: `ag submit --working-dir`,
and archives crafted by hand against the REST API that must never write outside the
job's directory."""
import hashlib
import io
import json
import os
import re
import tarfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_tar(entries):
    """entries: list of (TarInfo-kwargs dict, bytes or None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for fields, data in entries:
            info = tarfile.TarInfo(fields.pop("name"))
            for key, value in fields.items():
                setattr(info, key, value)
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def upload(cluster, data):
    digest = hashlib.sha256(data).hexdigest()
    status, _, payload = cluster.api_full("PUT", f"/api/packages/{digest}", raw=data)
    assert status in (200, 201), payload
    return digest


def submit_with_package(cluster, digest, entrypoint="true"):
    status, _, payload = cluster.api_full("POST", "/api/jobs", body={
        "entrypoint": entrypoint, "runtime_env": {"working_dir": f"sha256:{digest}"}})
    assert status == 201, payload
    return payload["job_id"]


def test_cli_working_dir_ships_the_folder_and_uploads_once(cluster, tmp_path):
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "pkg" / "mod.py").write_text("VALUE = 41\n")
    (code / "main.py").write_text("import pkg.mod\nprint('value', pkg.mod.VALUE + 1)\n")
    (code / "secret.txt").write_text("not shipped\n")
    (code / ".gitignore").write_text("*.log\n")
    (code / "debug.log").write_text("ignored\n")
    proc = cluster.ag("submit", "-n", "2", "--working-dir", str(code), "--exclude", "secret.txt",
                      "--python", "/usr/bin/python3", "--", "python main.py; ls -a")
    assert "value 42" in proc.stdout
    assert "secret.txt" not in proc.stdout and "debug.log" not in proc.stdout
    _, _, before = cluster.api_full("GET", "/api/packages")
    cluster.ag("submit", "--working-dir", str(code), "--exclude", "secret.txt", "--", "true")
    _, _, after = cluster.api_full("GET", "/api/packages")
    assert after["bytes_uploaded"] == before["bytes_uploaded"]  # unchanged folder: nothing sent


def test_cli_working_dir_that_is_not_a_folder(cluster, tmp_path):
    missing = cluster.ag("submit", "--working-dir", str(tmp_path / "nope"), "--", "true", check=False)
    assert missing.returncode != 0 and "does not exist" in missing.stderr
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    not_dir = cluster.ag("submit", "--working-dir", str(afile), "--", "true", check=False)
    assert not_dir.returncode != 0 and "not a folder" in not_dir.stderr


def test_corrupted_upload_is_refused(cluster):
    data = make_tar([({"name": "a.txt"}, b"hello")])
    wrong = hashlib.sha256(b"something else").hexdigest()
    status, _, payload = cluster.api_full("PUT", f"/api/packages/{wrong}", raw=data)
    assert status == 400 and "hash to sha256:" in payload["error"]
    status, _, _ = cluster.api_full("HEAD", f"/api/packages/{wrong}")
    assert status == 404


def test_unknown_package_is_refused_at_submit(cluster):
    status, _, payload = cluster.api_full("POST", "/api/jobs", body={
        "entrypoint": "true", "runtime_env": {"working_dir": "sha256:" + "ab" * 32}})
    assert status == 400 and "never uploaded" in payload["error"]


def assert_refused_and_contained(cluster, data, needle, outside_name):
    digest = upload(cluster, data)
    job_id = submit_with_package(cluster, digest)
    job = cluster.wait_state(job_id, {"FAILED"}, timeout=30)
    assert needle in job["message"], job["message"]
    for ip in ("127.0.0.2", "127.0.0.3"):
        packages = os.path.join(cluster.worker_data_dir(ip), "packages")
        for base, _, files in os.walk(cluster.worker_data_dir(ip)):
            assert outside_name not in files, f"{outside_name} written under {base}"
        assert not os.path.exists(os.path.join(packages, outside_name))


def test_archive_with_dotdot_entry_fails_the_job(cluster):
    data = make_tar([({"name": "../escaped_dotdot.txt"}, b"x")])
    assert_refused_and_contained(cluster, data, "escapes the working directory", "escaped_dotdot.txt")


def test_archive_with_absolute_path_fails_the_job(cluster, tmp_path):
    target = tmp_path / "escaped_absolute.txt"
    data = make_tar([({"name": str(target)}, b"x")])
    digest = upload(cluster, data)
    job = cluster.wait_state(submit_with_package(cluster, digest), {"FAILED", "SUCCEEDED"}, timeout=30)
    # tar strips a leading "/" into a relative name or the worker refuses it; either
    # way nothing may land at the absolute path.
    assert not target.exists()
    if job["state"] == "FAILED":
        assert "package" in job["message"]


def test_archive_with_symlink_pointing_outside_fails_the_job(cluster):
    data = make_tar([({"name": "evil_link", "type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}, None)])
    assert_refused_and_contained(cluster, data, "link pointing outside", "evil_link")


def test_archive_with_symlink_climbing_up_fails_the_job(cluster):
    data = make_tar([({"name": "up_link", "type": tarfile.SYMTYPE, "linkname": "../../../etc"}, None),
                     ({"name": "up_link/owned", }, b"x")])
    assert_refused_and_contained(cluster, data, "link pointing outside", "owned")


def _raw_put(cluster, digest, total_bytes, send_bytes, token):
    """PUT /api/packages/<digest> announcing `total_bytes` but sending only `send_bytes`
    (then half-closing); returns the raw answer, b"" when the connection was reset."""
    import socket
    with socket.create_connection(("127.0.0.1", cluster.port), timeout=20) as sock:
        sock.sendall((f"PUT /api/packages/{digest} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                      f"Content-Length: {total_bytes}\r\n\r\n").encode())
        chunk = b"z" * (1 << 16)
        sent = 0
        while sent < send_bytes:
            n = min(len(chunk), send_bytes - sent)
            sock.sendall(chunk[:n])
            sent += n
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        except ConnectionResetError:
            pass
        return answer


def _package_files(cluster):
    return sorted(p.name for p in (cluster.head_data_dir / "packages").iterdir())


def test_upload_with_a_wrong_token_is_answered_and_stores_nothing(cluster):
    before = _package_files(cluster)
    size = 8 << 20
    answer = _raw_put(cluster, "a" * 64, size, size, token="not-the-token")
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert b"unknown or revoked token" in answer
    assert _package_files(cluster) == before


def test_upload_cut_short_leaves_no_file_and_the_head_serves_on(cluster):
    before = _package_files(cluster)
    answer = _raw_put(cluster, "b" * 64, 50 << 20, 3 << 20, token=cluster.token)
    assert b"201" not in answer.split(b"\r\n")[0]
    deadline = time.time() + 10
    while _package_files(cluster) != before and time.time() < deadline:
        time.sleep(0.05)
    assert _package_files(cluster) == before
    digest = upload(cluster, b"still works")
    status, _, payload = cluster.api_full("GET", "/api/packages")
    assert status == 200 and payload["packages"] >= 1
    assert cluster.api_full("HEAD", f"/api/packages/{digest}")[0] == 200


def test_large_package_round_trips_byte_for_byte(cluster):
    data = os.urandom(24 << 20)
    digest = upload(cluster, data)
    import urllib.request
    req = urllib.request.Request(f"http://127.0.0.1:{cluster.port}/api/packages/{digest}",
                                 headers={"Authorization": f"Bearer {cluster.token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.headers["Content-Length"] == str(len(data))
        assert hashlib.sha256(resp.read()).hexdigest() == digest


def test_job_directories_are_removed_once_the_job_ends_and_the_archive_stays(cluster, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "data.txt").write_text("payload\n")
    proc = cluster.ag("submit", "-n", "2", "--placement", "spread", "--working-dir", str(code), "--", "cat data.txt")
    assert "payload" in proc.stdout
    roots = [cluster.worker_data_dir(ip) / "packages" for ip in ("127.0.0.2", "127.0.0.3")]
    deadline = time.time() + 10
    while any(list((root / "jobs").iterdir()) for root in roots) and time.time() < deadline:
        time.sleep(0.05)
    for root in roots:
        assert list((root / "jobs").iterdir()) == [], f"{root}/jobs still holds a finished job's files"
        assert len(list((root / "archives").iterdir())) == 1, "the package stays cached"
    # The same folder again: no upload, unpacked anew from the cached archive.
    proc = cluster.ag("submit", "-n", "2", "--placement", "spread", "--working-dir", str(code), "--", "cat data.txt")
    assert "payload" in proc.stdout


def test_cli_shows_upload_progress_on_a_terminal_only(cluster, tmp_path):
    import pty
    import subprocess
    code = tmp_path / "code"
    code.mkdir()
    (code / "weights.bin").write_bytes(os.urandom(12 << 20))
    from conftest import AG_BIN
    args = [AG_BIN, "submit", "--no-wait", "--working-dir", str(code), "--", "true"]
    (code / ".gitignore").write_text("*.ckpt\n")
    (code / "old.ckpt").write_bytes(b"x" * (3 << 20))
    # Through a pipe: the one "Uploading" line with sizes for people, no bar.
    piped = subprocess.run(args, env=cluster.env, capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert "Uploading working_dir" in piped.stderr and "%" not in piped.stderr
    assert "(2 files, 12.0 MiB, sha256:" in piped.stderr, piped.stderr
    assert "skipped 1 files (3.0 MiB) by .gitignore/--exclude" in piped.stderr, piped.stderr
    # The same folder again: nothing to upload, and it says so.
    again = subprocess.run(args, env=cluster.env, capture_output=True, text=True, timeout=60)
    assert f"working_dir {code} unchanged: reusing sha256:" in again.stderr, again.stderr
    assert "Uploading" not in again.stderr
    # On a terminal (a new folder, so that it uploads again): the bar reaches 100%.
    (code / "weights.bin").write_bytes(os.urandom(12 << 20))
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, env=cluster.env, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    shown = b""
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        shown += data
    proc.wait(timeout=60)
    os.close(leader)
    assert proc.returncode == 0, shown
    assert b"100%" in shown and b"12.0 / 12.0 MiB" in shown, shown[-500:]


def test_cli_and_sdk_pack_a_folder_to_the_same_package(cluster, tmp_path):
    """`ag submit --working-dir` and the SDK write the same bytes for the same folder:
    what one uploaded, the other finds on the head and does not send again."""
    import sys
    sys.path.insert(0, os.path.join(REPO, "python"))
    from aethergrid import packaging
    code = tmp_path / "code"
    files = {
        "a/b.txt": b"nested\n",
        "a-c.txt": b"sorts before a/ by bytes\n",
        "Z.txt": b"upper case first\n",
        "d" * 60 + "/" + "e" * 70 + "/long.txt": b"a path over 100 bytes\n",
        "donn\u00e9es \u00e9t\u00e9.txt": b"non-ASCII name\n",
        "run.sh": b"#!/bin/sh\necho run\n",
        "big.bin": os.urandom(3 << 20),
        "ignored.log": b"left out by .gitignore\n",
        "data/big.csv": b"left out by the excludes, whatever .gitignore says\n",
        ".gitignore": b"*.log\n!data/\n",
        "__pycache__/x.pyc": b"skipped\n",
        ".git/HEAD": b"skipped\n",
    }
    for rel, data in files.items():
        path = code / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    os.chmod(code / "run.sh", 0o750)
    (code / "empty").mkdir()
    os.symlink("run.sh", code / "link.sh")

    with packaging.pack_working_dir(str(code), excludes=["data/"]) as package:
        sdk_hash = package.sha256
        names = package.names()
    assert "ignored.log" not in names and not any("__pycache__" in n or ".git/" in n for n in names)
    assert not any(n.startswith("data") for n in names)
    proc = cluster.ag("submit", "--no-wait", "--working-dir", str(code), "--exclude", "data/", "--", "true")
    job_id = proc.stdout.strip().splitlines()[-1]
    assert cluster.job(job_id)["spec"]["runtime_env"]["working_dir"] == f"sha256:{sdk_hash}"


def test_damaged_cached_package_is_downloaded_again(cluster, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    payload = os.urandom(1 << 20)
    (code / "data.bin").write_bytes(payload)
    (code / "check.py").write_text(
        "import hashlib; print('digest', hashlib.sha256(open('data.bin', 'rb').read()).hexdigest())\n")
    want = "digest " + hashlib.sha256(payload).hexdigest()
    args = ("submit", "-n", "2", "--placement", "spread", "--working-dir", str(code), "--", "/usr/bin/python3 check.py")
    assert want in cluster.ag(*args).stdout
    import sys
    sys.path.insert(0, os.path.join(REPO, "python"))
    from aethergrid import packaging
    with packaging.pack_working_dir(str(code)) as package:  # the CLI packs the same bytes
        digest = package.sha256
    archives = [cluster.worker_data_dir(ip) / "packages" / "archives" / f"{digest}.tar.gz"
                for ip in ("127.0.0.2", "127.0.0.3")]
    assert all(a.exists() for a in archives)
    for archive in archives:  # as a crash mid-write could leave them: cut short
        with open(archive, "r+b") as f:
            f.truncate(archive.stat().st_size // 2)

    proc = cluster.ag(*args)

    assert want in proc.stdout
    for archive in archives:
        assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest


def _folder_of(tmp_path, name, size):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "data.bin").write_bytes(os.urandom(size))
    return folder


def test_the_package_store_keeps_to_its_quota_and_never_drops_a_package_a_job_needs(cluster_factory, tmp_path):
    # A 2.5 MiB store (no workers: submitted jobs stay PENDING, so they need their package).
    c = cluster_factory("quota", workers=(), head_options=["--package-store-gb", 2.5 / 1024, "--max-package-mb", 1.5])
    first, _ = c.submit("--no-wait", "--working-dir", _folder_of(tmp_path, "a", 1 << 20), "--", "true")
    second, _ = c.submit("--no-wait", "--working-dir", _folder_of(tmp_path, "b", 1 << 20), "--", "true")
    hashes = [re.search(r'"sha256:([0-9a-f]{64})"', json.dumps(c.job(j))).group(1) for j in (first, second)]
    # Both are needed: a third does not fit, and the refusal says why and what to do.
    third = c.ag("submit", "--no-wait", "--working-dir", _folder_of(tmp_path, "c", 1 << 20), "--", "true", check=False)
    assert third.returncode != 0
    assert "package store is full" in third.stderr and "--package-store-gb" in third.stderr, third.stderr
    assert [c.api("HEAD", f"/api/packages/{h}")[0] for h in hashes] == [200, 200]
    assert len(c.jobs()) == 2
    # Once the first job is over its package may make room; the second job's stays.
    c.ag("stop-job", first)
    c.wait_state(first, "STOPPED")
    job_id, proc = c.submit("--no-wait", "--working-dir", tmp_path / "c", "--", "true")
    assert proc.returncode == 0, proc.stderr
    assert [c.api("HEAD", f"/api/packages/{h}")[0] for h in hashes] == [404, 200]
    status, body = c.api("GET", "/api/packages")
    assert body["stored_bytes"] <= body["quota_bytes"] == int(2.5 * (1 << 20))


def test_a_package_store_smaller_than_one_package_is_refused_at_start(cluster_factory):
    c = cluster_factory("tinystore", start_head=False, head_options=["--package-store-gb", 0.1])
    proc = c.start_head(check=False)
    assert proc.returncode != 0
    assert "--package-store-gb 0.1 cannot hold one package of --max-package-mb 500" in proc.stderr, proc.stderr


def test_a_package_unpacking_a_thousandfold_fails_its_tasks_with_the_numbers(cluster):
    # 200 MiB of zeros gzip to about 200 KiB: a thousandfold (the CLI and SDK pack
    # without compressing, so such a package is made by hand).
    data = make_tar([({"name": "weights.bin"}, bytes(200 << 20))])
    assert len(data) < 1 << 20
    job_id = submit_with_package(cluster, upload(cluster, data), entrypoint="echo never runs")
    cluster.job_ids.add(job_id)
    job = cluster.wait_state(job_id, ["FAILED"], timeout=60)
    assert "more than 200 times its packed size" in job["message"], job["message"]
    assert "--max-unpack-ratio" in job["message"]


def test_refused_uploads_leave_no_file_behind_even_when_many_come_at_once(cluster):
    from concurrent.futures import ThreadPoolExecutor
    packages = cluster.head_data_dir / "packages"

    def one(i):
        data = os.urandom(256 << 10) + str(i).encode()
        digest = hashlib.sha256(data).hexdigest()
        wrong = hashlib.sha256(data + b"!").hexdigest() if i % 2 else digest
        status, _, payload = cluster.api_full("PUT", f"/api/packages/{wrong}", raw=data)
        return i, status, payload

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(one, range(40)))
    for i, status, payload in answers:
        assert status == (400 if i % 2 else 201) or (not i % 2 and status == 200), (i, status, payload)
    # Every answer is in: nothing but whole packages is left, at once.
    stray = [p.name for p in packages.iterdir() if not p.name.endswith(".tar.gz")]
    assert not stray, stray
    assert len([p for p in packages.iterdir()]) == 20
