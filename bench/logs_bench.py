#!/usr/bin/python3
"""`ag logs` against the REST calls it makes: how fast the CLI reads a large log whole.

Starts a local cluster (bench/run_bench.py's), runs a 2-rank job whose ranks each print
`--mib` MiB of numbered lines, then times, alternating, `--rounds` times each:
  rest lines  every page of GET /api/jobs/{id}/lines?format=text (both ranks, merged),
              read over one kept-alive connection and thrown away: the REST ceiling of
              `ag logs JOB`
  ag logs     `ag logs JOB > /dev/null` (every rank, interleaved, [rank N] prefixes)
  rest bytes  every page of GET /api/jobs/{id}/logs for each rank (its bytes as written)
  ag logs -t  `ag logs JOB --task-index 0` and `--task-index 1`, one after the other
and reports medians and the ratio of each CLI mode to its REST ceiling (target >= 2/3).

    /usr/bin/python3 bench/logs_bench.py [--mib 211] [--rounds 5] [--write]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402

BEGIN = "<!-- logs_bench:begin -->"
END = "<!-- logs_bench:end -->"


def get_page(cluster, path):
    """One GET over the cluster's kept-alive connection: (body, response)."""
    conn = cluster.conn or cluster.connect()
    cluster.conn = conn
    conn.request("GET", path, headers={"Authorization": f"Bearer {cluster.token}"})
    res = conn.getresponse()
    body = res.read()
    if res.status != 200:
        raise RuntimeError(f"{path}: {res.status} {body[:200]!r}")
    return body, res


def rest_lines(cluster, job_id):
    total, cursor = 0, None
    while True:
        body, res = get_page(cluster, f"/api/jobs/{job_id}/lines?format=text" + (f"&from={cursor}" if cursor else ""))
        total += len(body)
        cursor = res.getheader("X-AG-Next")
        if res.getheader("X-AG-More") != "1":
            return total


def rest_bytes(cluster, job_id, task_index):
    total, offset = 0, 0
    while True:
        body, res = get_page(cluster, f"/api/jobs/{job_id}/logs?task_index={task_index}&offset={offset}")
        total += len(body)
        offset = int(res.getheader("X-AG-Next-Offset"))
        if res.getheader("X-AG-Log-Complete") == "1" or not body:
            return total


def ag_logs(cluster, *args):
    with open(os.devnull, "wb") as null:
        subprocess.run([run_bench.AG, "logs", *args], env=cluster.env, stdout=null, check=True, timeout=600)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=211, help="MiB each of the 2 ranks prints")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="put the report into bench/RESULTS.md")
    args = parser.parse_args()
    lines = args.mib * (1 << 20) // 77
    cluster = run_bench.Cluster(num_cpus=2).start()
    try:
        job = cluster.api("POST", "/api/jobs", {
            "entrypoint": f"seq -f \"$RANK-%074g\" 1 {lines}", "num_workers": 2, "placement": "spread"})
        job_id = job["job_id"]
        state = cluster.wait(job_id, timeout=600)["state"]
        assert state == "SUCCEEDED", state
        times = {"rest lines": [], "ag logs": [], "rest bytes": [], "ag logs --task-index": []}
        sizes = {}
        for _ in range(args.rounds):
            t, sizes["lines"] = timed(lambda: rest_lines(cluster, job_id))
            times["rest lines"].append(t)
            times["ag logs"].append(timed(lambda: ag_logs(cluster, job_id))[0])
            t, n = timed(lambda: rest_bytes(cluster, job_id, 0) + rest_bytes(cluster, job_id, 1))
            sizes["bytes"] = n
            times["rest bytes"].append(t)
            times["ag logs --task-index"].append(
                timed(lambda: (ag_logs(cluster, job_id, "--task-index", "0"),
                               ag_logs(cluster, job_id, "--task-index", "1")))[0])
    finally:
        cluster.stop()
    med = {k: statistics.median(v) for k, v in times.items()}
    rate = {k: (sizes["lines"] if k in ("rest lines", "ag logs") else sizes["bytes"]) / med[k] / (1 << 20) for k in med}
    command = f"/usr/bin/python3 bench/logs_bench.py --mib {args.mib} --rounds {args.rounds}"
    report = [BEGIN, "## Reading a large log (`ag logs`)", "",
              f"`{command}` ({time.strftime('%Y-%m-%d')}): a 2-rank job, {args.mib} MiB a rank of numbered lines; "
              f"medians of {args.rounds} rounds, the modes alternating in each round.", "",
              "| read | median s | MiB/s | CLI / its REST calls |", "| --- | --- | --- | --- |"]
    for name, base in (("rest lines", None), ("ag logs", "rest lines"), ("rest bytes", None),
                       ("ag logs --task-index", "rest bytes")):
        ratio = f"{med[base] / med[name]:.2f}" if base else "-"
        report.append(f"| {name} | {med[name]:.2f} | {rate[name]:.0f} | {ratio} |")
    report += ["", "`rest lines`: every page of `GET /api/jobs/{id}/lines?format=text` over one connection "
               "(what `ag logs JOB` asks for); `rest bytes`: every page of `GET .../logs` for each rank "
               "(what `ag logs JOB --task-index N` asks for). Target: the CLI at >= 2/3 of its REST calls.", END]
    text = "\n".join(report) + "\n"
    print(text)
    if args.write:
        run_bench.write_results_section(text, BEGIN, END)


if __name__ == "__main__":
    main()
