"""`ag logs` is whole or says why (issue 32): every mode pages until the log is
complete, byte for byte against what the tasks wrote (200 MB), --tail reads from the
end, --limit-bytes cuts where it says, -o json gives JSON lines, and a job that has not
started says what it waits for instead of printing nothing."""
import hashlib
import json
import subprocess

import pytest

from conftest import AG_BIN, wait_until

# Numbered lines of 77 bytes: `seq` writes them fast, and every line is its own.
LINES = 2_600_000  # 200 MB
SEQ = "seq -f '%076g' 1 {n}"


def expected_seq(n, prefix=""):
    """What `seq -f '%076g' 1 n` (with `prefix` in the format) prints, as a sha256 and size."""
    out = subprocess.run(["seq", "-f", prefix + "%0" + str(76 - len(prefix)) + "g", "1", str(n)], check=True,
                         capture_output=True, timeout=60).stdout
    return out


def ag_bytes(cluster, *args, timeout=120):
    """`ag ARGS...` with its stdout as bytes (and stderr as text)."""
    proc = subprocess.run([AG_BIN, *[str(a) for a in args]], env=cluster.env, capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr.decode(errors="replace")


def digest(data):
    return hashlib.sha256(data).hexdigest()


def test_a_200_mb_log_is_whole_in_every_mode(cluster):
    job_id, proc = cluster.submit("--no-wait", "--", SEQ.format(n=LINES))
    assert cluster.wait_state(job_id, "SUCCEEDED", timeout=120)
    expected = expected_seq(LINES)
    assert len(expected) == LINES * 77
    want = digest(expected)
    # Every rank's lines (one rank: no prefix), one rank's bytes, --raw, lines since an
    # hour ago: each the whole output.
    for mode in ([], ["--task-index", 0], ["--raw"], ["--since", "1h"]):
        rc, out, err = ag_bytes(cluster, "logs", job_id, *mode)
        assert rc == 0, (mode, err)
        assert len(out) == len(expected) and digest(out) == want, (mode, len(out), err)
    # The longest tail (77 MB, many pages) is the end of the log, whole.
    rc, out, err = ag_bytes(cluster, "logs", job_id, "--tail", 1_000_000)
    assert rc == 0 and digest(out) == digest(expected[-1_000_000 * 77:]), (len(out), err)
    # With timestamps: each line after its time.
    rc, out, err = ag_bytes(cluster, "logs", job_id, "--timestamps")
    assert rc == 0, err
    assert digest(b"".join(line.split(b" ", 1)[1] + b"\n" for line in out.splitlines())) == want
    # JSON lines: one object a line, the text whole.
    rc, out, err = ag_bytes(cluster, "-o", "json", "logs", job_id)
    assert rc == 0, err
    first = json.loads(out[:out.index(b"\n")])
    assert set(first) == {"rank", "ts", "line"} and first["rank"] == 0 and first["ts"].endswith("Z"), first
    rebuilt = b"".join(json.loads(line)["line"].encode() + b"\n" for line in out.splitlines())
    assert digest(rebuilt) == want
    # The last lines, read from the end.
    rc, out, err = ag_bytes(cluster, "logs", job_id, "--tail", 1000)
    assert rc == 0 and out == expected[-1000 * 77:], err


def test_every_rank_of_a_large_gang_log_arrives_whole_and_in_order(cluster):
    per_rank = 650_000  # 2 x 50 MB
    job_id, _ = cluster.submit("-n", 2, "--placement", "spread", "--no-wait", "--",
                               f'seq -f "$RANK-%074g" 1 {per_rank}')
    assert cluster.wait_state(job_id, "SUCCEEDED", timeout=120)
    rc, out, err = ag_bytes(cluster, "logs", job_id)
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 2 * per_rank
    for rank in (0, 1):
        prefix = b"[rank %d] " % rank
        mine = b"".join(line[len(prefix):] + b"\n" for line in lines if line.startswith(prefix))
        assert digest(mine) == digest(expected_seq(per_rank, prefix=f"{rank}-")), rank
    # The merged tail is the end of the merge.
    rc, tail, err = ag_bytes(cluster, "logs", job_id, "--tail", 5000)
    assert rc == 0 and tail.splitlines() == lines[-5000:], err


def test_limit_bytes_cuts_where_it_says_and_exits_non_zero(cluster):
    job_id, _ = cluster.submit("--no-wait", "--", SEQ.format(n=100_000))  # 7.7 MB
    assert cluster.wait_state(job_id, "SUCCEEDED", timeout=60)
    expected = expected_seq(100_000)
    for mode in ([], ["--task-index", 0]):
        rc, out, err = ag_bytes(cluster, "logs", job_id, "--limit-bytes", "1M", *mode)
        assert rc == 3, (mode, rc, err)
        assert out == expected[:1 << 20], mode
        assert "[... cut at 1 MiB; --limit-bytes 0 for all]" in err, err
    # A limit past the log's end cuts nothing.
    rc, out, err = ag_bytes(cluster, "logs", job_id, "--limit-bytes", "1G")
    assert rc == 0 and out == expected and "cut" not in err
    # Bad sizes are usage errors that name the flag.
    for bad in ("lots", "-5", "1.5", "2X"):
        rc, out, err = ag_bytes(cluster, "logs", job_id, "--limit-bytes", bad)
        assert rc == 2 and "--limit-bytes" in err and "is not a size" in err, (bad, err)


def test_a_held_job_says_it_waits_and_follow_waits_for_its_output(cluster):
    job_id, _ = cluster.submit("--hold", "--no-wait", "--", "echo started")
    rc, out, err = ag_bytes(cluster, "logs", job_id)
    assert rc == 0 and out == b"", (rc, out)
    assert f"job {job_id} is PENDING" in err and "held" in err and "no output yet" in err, err
    follower = subprocess.Popen([AG_BIN, "logs", job_id, "-f"], env=cluster.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        # It says it waits (read line by line: the process is still running).
        said = follower.stderr.readline().decode() + follower.stderr.readline().decode()
        assert "is PENDING" in said and "waiting for it to start" in said, said
        cluster.ag("release", job_id)
        out, err = follower.communicate(timeout=60)
        assert follower.returncode == 0, err
        assert out == b"started\n"
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait(timeout=10)


def test_a_job_stopped_before_it_started_says_so(cluster):
    job_id, _ = cluster.submit("--hold", "--no-wait", "--", "echo never")
    cluster.ag("stop-job", job_id)
    assert cluster.wait_state(job_id, "STOPPED", timeout=30)
    rc, out, err = ag_bytes(cluster, "logs", job_id)
    assert rc == 0 and out == b"" and "STOPPED and never started" in err, err


def test_since_in_the_future_is_refused(cluster):
    job_id, _ = cluster.submit("--no-wait", "--", "echo x")
    rc, out, err = ag_bytes(cluster, "logs", job_id, "--since", "2099-01-01T00:00:00")
    assert rc == 2 and "is in the future" in err, err


@pytest.mark.parametrize("query, expected", [
    ("format=xml", "'format' must be json, text or jsonl"),
    ("from=0&tail=5", "'from' continues a read and takes no 'tail'"),
    ("from=0&since_ms=5", "'from' continues a read"),
    ("tail=1000001", "'tail' must be a whole number between 1 and 1000000"),
    ("timestamps=2", "'timestamps'"),
])
def test_bad_lines_queries_are_refused(cluster, query, expected):
    job_id, _ = cluster.submit("--no-wait", "--", "echo x")
    cluster.wait_state(job_id, "SUCCEEDED")
    status, body = cluster.api("GET", f"/api/jobs/{job_id}/lines?{query}")
    assert status == 400 and expected in body["error"], (query, body)


def test_the_text_format_pages_with_headers(cluster):
    job_id, _ = cluster.submit("-n", 2, "--no-wait", "--", SEQ.format(n=80_000))  # 6 MB a rank: two pages
    assert cluster.wait_state(job_id, "SUCCEEDED", timeout=60)
    status, headers, first = cluster.api_full("GET", f"/api/jobs/{job_id}/lines?format=text")
    assert status == 200 and headers["X-AG-More"] == "1" and headers["X-AG-Log-Complete"] == "0", headers
    cursor = headers["X-AG-Next"]
    assert len(cursor.split(",")) == 2
    total = first.count("\n")
    for _ in range(10):
        status, headers, page = cluster.api_full("GET", f"/api/jobs/{job_id}/lines?format=text&from={cursor}")
        total += page.count("\n")
        cursor = headers["X-AG-Next"]
        if headers["X-AG-More"] == "0":
            break
    assert total == 160_000 and headers["X-AG-Log-Complete"] == "1", (total, headers)
