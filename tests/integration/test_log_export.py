"""Log export (issue 29 item 7) over real daemons: `ag start-head --log-export DIR` writes
every task line as JSON lines for a log shipper; every line of a 2-rank job is there
exactly once across a head kill -9; a directory that cannot be written stops the head at
start, and one that fills up pauses export (an event, a metric) while the head serves on,
then catches up with nothing lost or doubled."""
import json
import os
import signal
import time

from conftest import pid_alive, wait_until


def fill(path):
    """Writes `path` until its file system is full (unbuffered: nothing left to flush)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return path


def exported(directory):
    records = []
    for path in sorted(directory.glob("tasks-*.jsonl")):
        for line in path.read_text().splitlines():
            records.append(json.loads(line))
    return records


def lines_of(records, job_id):
    return [(r["task"], r["line"]) for r in records if r["job"] == job_id]


def test_every_line_of_a_two_rank_job_exactly_once_across_a_head_kill(cluster_factory, tmp_path):
    export = tmp_path / "export"
    cluster = cluster_factory("export", head_options=["--log-export", export])
    lines = 40
    job, _ = cluster.submit("--no-wait", "-n", "2", "--placement", "spread", "--",
                            f'for i in $(seq 1 {lines}); do echo "rank $RANK line $i"; sleep 0.05; done')
    cluster.wait_tasks_running(job)
    time.sleep(1.2)
    head = cluster.head_pid()
    os.kill(head, signal.SIGKILL)
    wait_until(lambda: not pid_alive(head), 5, message="the head to die")
    cluster.start_head()
    cluster.wait_state(job, "SUCCEEDED", timeout=60)
    expected = sorted((rank, f"rank {rank} line {i}") for rank in (0, 1) for i in range(1, lines + 1))
    wait_until(lambda: sorted(lines_of(exported(export), job)) == expected, 20,
               message="every line exported once")
    time.sleep(1.5)  # and no more after
    records = [r for r in exported(export) if r["job"] == job]
    assert sorted((r["task"], r["line"]) for r in records) == expected
    nodes = {n["node_id"] for n in cluster.nodes()}
    for r in records:
        assert set(r) == {"ts", "job", "attempt", "task", "node", "owner", "stream", "line"}
        assert r["attempt"] == 0 and r["owner"] == "admin" and r["stream"] == "output" and r["node"] in nodes
        assert r["ts"].endswith("Z") and r["ts"][:4].isdigit()
    # Each rank's lines in the order written.
    for rank in (0, 1):
        mine = [r["line"] for r in records if r["task"] == rank]
        assert mine == [f"rank {rank} line {i}" for i in range(1, lines + 1)]
    status, metrics = cluster.api("GET", "/metrics")
    assert "ag_log_export_failing 0" in metrics and "ag_log_export_lines_total" in metrics


def test_the_vector_sample_reads_the_files_the_head_writes():
    import tomllib
    from conftest import REPO
    sample = tomllib.loads((REPO / "packaging" / "log-export" / "vector.toml").read_text())
    source = sample["sources"]["aethergrid_tasks"]
    assert source["type"] == "file" and source["include"][0].endswith("/tasks-*.jsonl")
    assert "parse_json" in sample["transforms"]["aethergrid_parse"]["source"]
    assert set(sample["sinks"]["loki"]["labels"].values()) == {"{{ job }}", "{{ owner }}", "{{ node }}"}


def test_a_directory_that_cannot_be_written_stops_the_head_at_start(cluster_factory, tmp_path):
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("")
    cluster = cluster_factory("badexport", workers=(), start_head=False, head_options=["--log-export", not_a_dir])
    proc = cluster.start_head(check=False)
    assert proc.returncode != 0
    assert f"--log-export {not_a_dir}" in proc.stderr and "cannot be created" in proc.stderr


def test_a_full_disk_pauses_export_and_nothing_is_lost_once_there_is_room(cluster_factory, tmp_path, small_disk):
    export = small_disk(tmp_path / "small", size="2m")
    cluster = cluster_factory("fullexport", head_options=["--log-export", export])
    filler = fill(export / "filler")
    job, _ = cluster.submit("--no-wait", "--", "for i in $(seq 1 3000); do echo line $i of some length here; done")
    cluster.wait_state(job, "SUCCEEDED", timeout=30)
    wait_until(lambda: "log_export.failed" in cluster.ag("events", "--type", "log_export.failed").stdout, 15,
               message="the log_export.failed event")
    status, metrics = cluster.api("GET", "/metrics")
    assert "ag_log_export_failing 1" in metrics
    # The head serves on.
    other, _ = cluster.submit("--no-wait", "--", "echo still here")
    cluster.wait_state(other, "SUCCEEDED", timeout=30)
    filler.unlink()
    wait_until(lambda: "log_export.resumed" in cluster.ag("events", "--type", "log_export.resumed").stdout, 15,
               message="the log_export.resumed event")
    expected = [(0, f"line {i} of some length here") for i in range(1, 3001)]
    wait_until(lambda: lines_of(exported(export), job) == expected, 15, message="every line, once")
    assert lines_of(exported(export), other) == [(0, "still here")]
