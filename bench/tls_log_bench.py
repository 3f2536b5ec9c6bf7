#!/usr/bin/python3
"""Task output over TLS (issue 25): how fast the head takes in output from workers that
reach it over TLS, as every worker on another machine does, against openssl's own bulk
TLS throughput on the same loopback in the same round.

    /usr/bin/python3 bench/tls_log_bench.py [--mib 200] [--rounds 5] [--write]

Each round, on a fresh cluster whose workers pin the cluster CA (so that they speak TLS
to the head on loopback, as between machines):

- the ceiling: `openssl s_client` sends 2 x MIB MiB from a file in the page cache to
  `openssl s_server` (the head's own certificate and key, the default TLS 1.3 cipher),
  time from the client's start to the server's exit;
- two tasks (one per worker) write MIB MiB each while the head is stopped (SIGSTOP), so
  the output waits in the tasks' files; the head is then let go and timed until the job
  has ended, which it does only once it holds every byte (a task's exit follows its
  last byte). That is the log path alone: worker reads the file, TLS, head writes its
  log;
- the same, with the workers' log stream off (`AG_WORKER_LOG_STREAM=off`): output in
  frames on the TLS WebSocket channel, the path a TLS worker took before;
- the same with workers that do not pin the CA: the plain log stream on loopback
  (sendfile and splice), what TLS costs.

The report gives the round with the median ratio to the ceiling and every round's ratio.
--write replaces the "tls-logs" section of bench/RESULTS.md (between its markers).
"""
import argparse
import datetime
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load_bench import LoadCluster  # noqa: E402
from run_bench import Cluster, free_port, write_results_section  # noqa: E402

BEGIN, END = "<!-- tls-logs:begin -->", "<!-- tls-logs:end -->"
TICKS = os.sysconf("SC_CLK_TCK")
# Per path: whether the workers pin the CA (TLS), and AG_WORKER_LOG_STREAM.
MODES = {"stream": (True, None), "frames": (True, "off"), "plain": (False, None)}


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def openssl_mib_s(mib, cert, key, scratch):
    """`mib` MiB from s_client to s_server on loopback, in MiB/s."""
    blob = os.path.join(scratch, "blob")
    with open(blob, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(mib):
            f.write(block)
    with open(blob, "rb") as f:  # into the page cache, as the tasks' files are
        while f.read(1 << 24):
            pass
    port = free_port()
    # s_server ends a connection when its own stdin ends: a pipe kept open.
    server = subprocess.Popen(["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-cert", cert, "-key", key,
                               "-naccept", "1", "-quiet"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while subprocess.run(["sh", "-c", f"ss -ltn | grep -q 127.0.0.1:{port}"]).returncode != 0:
            if time.time() > deadline:
                raise RuntimeError("openssl s_server did not start listening")
            time.sleep(0.02)
        counted = subprocess.Popen(["wc", "-c"], stdin=server.stdout, stdout=subprocess.PIPE, text=True)
        server.stdout.close()
        start = time.perf_counter()
        with open(blob, "rb") as source:
            subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-quiet", "-no_ign_eof", "-nocommands"],
                           stdin=source, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
        got = int(counted.communicate(timeout=300)[0])
        elapsed = time.perf_counter() - start
    finally:
        server.kill()
        server.wait()
        os.unlink(blob)
    if got != mib << 20:
        raise RuntimeError(f"openssl s_server received {got} bytes, not {mib << 20}")
    return mib / elapsed


def tasks_running(cluster, job_id):
    job = cluster.api("GET", f"/api/jobs/{job_id}")
    tasks = job["attempts"][0]["tasks"] if job.get("attempts") else []
    return len(tasks) == 2 and all(t["state"] == "RUNNING" for t in tasks)


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def head_says(cluster, text):
    with open(os.path.join(cluster.session, "head", "head.log"), errors="replace") as f:
        return f.read().count(text)


def bench_output_after_freeze(mib, mode):
    """Two tasks write `mib` MiB each with the head stopped; then the head is let go:
    MiB/s until the job has ended (the head holding every byte)."""
    tls, switch = MODES[mode]
    if switch is None:
        os.environ.pop("AG_WORKER_LOG_STREAM", None)
    else:
        os.environ["AG_WORKER_LOG_STREAM"] = switch
    try:
        cluster = Cluster(num_cpus=2, tls_client=tls).start()
    finally:
        os.environ.pop("AG_WORKER_LOG_STREAM", None)
    signals = tempfile.mkdtemp(prefix="ag-tls-log-bench-")
    os.chmod(signals, 0o777)  # the tasks may run as the workers' task account
    try:
        if switch is None:
            wait_for(lambda: head_says(cluster, "opened its log stream") == 2, 20, "both workers' log streams")
        go = os.path.join(signals, "go")
        command = (f"while [ ! -e {go} ]; do sleep 0.01; done; dd if=/dev/urandom of=/dev/stdout bs=1M "
                   f"count={mib} iflag=fullblock status=none; touch {signals}/done.$RANK")
        job_id = cluster.api("POST", "/api/jobs", {"entrypoint": command, "num_workers": 2,
                                                   "placement": "spread"})["job_id"]
        wait_for(lambda: tasks_running(cluster, job_id), 30, "both tasks running")
        head = cluster.head_pid()
        workers = [cluster.worker_pid(ip) for ip in ("127.0.0.2", "127.0.0.3")]
        os.kill(head, signal.SIGSTOP)
        try:
            open(go, "w").close()
            wait_for(lambda: all(os.path.exists(os.path.join(signals, f"done.{r}")) for r in range(2)), 120,
                     "both tasks to write their output")
            cpu_before = [cpu_s(p) for p in [head] + workers]
            start = time.perf_counter()
        finally:
            os.kill(head, signal.SIGCONT)
        job = cluster.wait(job_id, timeout=600)
        elapsed = time.perf_counter() - start
        cpu_used = [cpu_s(p) - b for p, b in zip([head] + workers, cpu_before)]
        if job["state"] != "SUCCEEDED":
            raise RuntimeError(f"job {job_id} {job['state']}: {job.get('message')}")
        sizes = [LoadCluster.log_size(cluster, job_id, task) for task in range(2)]
        if sizes != [mib << 20] * 2:
            raise RuntimeError(f"the head holds {sizes} bytes, not {mib << 20} each")
        ceiling = openssl_mib_s(2 * mib, os.path.join(cluster.session, "head", "tls", "head.crt"),
                                os.path.join(cluster.session, "head", "tls", "head.key"), signals)
        return {"mib_s": 2 * mib / elapsed, "elapsed_s": elapsed, "ceiling": ceiling,
                "head_cpu_s": cpu_used[0], "workers_cpu_s": sum(cpu_used[1:])}
    finally:
        cluster.stop()
        shutil.rmtree(signals, ignore_errors=True)


def section(runs, mib, command):
    picked = {}
    for mode, mode_runs in runs.items():
        ordered = sorted(mode_runs, key=lambda r: r["mib_s"] / r["ceiling"])
        picked[mode] = dict(ordered[len(ordered) // 2], ratios=[r["mib_s"] / r["ceiling"] for r in mode_runs],
                            head_cpu=statistics.median(r["head_cpu_s"] for r in mode_runs),
                            workers_cpu=statistics.median(r["workers_cpu_s"] for r in mode_runs))
    s, f, p = picked["stream"], picked["frames"], picked["plain"]

    def row(name, fmt):
        return f"| {name} | " + " | ".join(fmt(r) for r in (s, f, p)) + " |"

    lines = [
        BEGIN,
        "## Task output over TLS (issue 25)",
        "",
        f"Produced by `{command}` on {datetime.date.today()}: two workers on 127.0.0.2 and 127.0.0.3 that pin "
        "the cluster CA, so that they reach the head over TLS as workers on other machines do. Two tasks write "
        f"{mib} MiB each while the head is stopped; the head is then let go and timed until it holds every byte. "
        "The ceiling is `openssl s_client` sending the same amount to `openssl s_server` (the head's own "
        "certificate, the default TLS 1.3 cipher) on the same loopback, measured in the same round. "
        f"{len(s['ratios'])} rounds per path, alternating; the round with the median ratio is shown, CPU as "
        "medians of all rounds. This machine's kernel has no `tls` module, so the workers encrypt in process "
        "(no kTLS; the worker's log says so).",
        "",
        "| measure | log stream inside TLS | frames on the TLS channel (before) | plain log stream (no TLS) |",
        "|---|---|---|---|",
        row("openssl s_server/s_client, same round", lambda r: f"{r['ceiling']:.0f} MiB/s"),
        row("taken in by the head", lambda r: f"{r['mib_s']:.0f} MiB/s ({r['elapsed_s']:.2f} s)"),
        row("**head / openssl**", lambda r: f"**{100 * r['mib_s'] / r['ceiling']:.0f}%**"),
        row("every round's ratio", lambda r: ", ".join(f"{100 * x:.0f}%" for x in sorted(r["ratios"]))),
        row(f"head CPU for the {2 * mib} MiB", lambda r: f"{r['head_cpu']:.2f} s"),
        row("both workers' CPU", lambda r: f"{r['workers_cpu']:.2f} s"),
        "",
        "Target ≥ 50% of the ceiling, goal ≥ 80%. openssl's tools move 16 KiB per read and write through "
        "select(); the worker hands TLS 256 KiB at a time and the head reads its session until it is empty.",
        END,
    ]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=200, help="MiB each of the two tasks writes")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="replace the tls-logs section of bench/RESULTS.md")
    args = parser.parse_args()
    runs = {mode: [] for mode in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            run = bench_output_after_freeze(args.mib, mode)
            runs[mode].append(run)
            print(f"{mode}: {run['mib_s']:.0f} MiB/s, openssl {run['ceiling']:.0f} MiB/s "
                  f"({100 * run['mib_s'] / run['ceiling']:.0f}%)", flush=True)
    command = "/usr/bin/python3 bench/tls_log_bench.py" + (f" --mib {args.mib}" if args.mib != 200 else "") + \
        (f" --rounds {args.rounds}" if args.rounds != 5 else "") + " --write"
    text = section(runs, args.mib, command)
    print(text)
    if args.write:
        write_results_section(text, BEGIN, END)


if __name__ == "__main__":
    main()
