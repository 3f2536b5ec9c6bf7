#!/usr/bin/python3
"""What the head's summaries cost with many jobs kept (issue 31): GET /api/cluster,
GET /api/jobs?limit=20 and a /metrics scrape, each called back to back with N finished
jobs in the table. Per endpoint: the p50 of the call as the client sees it, and the
head's CPU per call (/proc). A dashboard, `ag list` and a Prometheus scrape poll these;
they should not cost more with every job the head keeps.

With --before AG, that build runs too, each build on a cluster of its own, in turn
(ABAB... for --rounds rounds); each figure is the median of the rounds'.

    /usr/bin/python3 bench/summary_bench.py [--jobs 4000] [--calls 300]
        [--before AG --before-label COMMIT [--rounds 2]] [--write]
"""
import argparse
import datetime
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402
from job_cost_bench import process_cpu  # noqa: E402

BEGIN, END = "<!-- summary-cost:begin -->", "<!-- summary-cost:end -->"
ENDPOINTS = ("/api/cluster", "/api/jobs?limit=20", "/metrics")


def head_cpu_ms(cluster):
    return process_cpu(int(open(os.path.join(cluster.session, "daemons", "head.pid")).read()))[0]


def measure(jobs, calls):
    """{endpoint: (p50 ms, head CPU ms per call)} on a fresh cluster holding `jobs` jobs."""
    cluster = run_bench.Cluster().start()
    try:
        run_bench.bench_throughput(cluster, jobs, 1, native=True)
        out = {}
        for endpoint in ENDPOINTS:
            times = []
            cpu0 = head_cpu_ms(cluster)
            for _ in range(calls):
                t = time.perf_counter()
                cluster.api("GET", endpoint)
                times.append((time.perf_counter() - t) * 1000)
            out[endpoint] = (statistics.median(times), (head_cpu_ms(cluster) - cpu0) / calls)
        return out
    finally:
        cluster.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=4000, help="finished jobs kept in the table")
    parser.add_argument("--calls", type=int, default=300, help="calls of each endpoint")
    parser.add_argument("--before", metavar="AG", help="the `ag` of the build before, measured in turn")
    parser.add_argument("--before-label", default="", help="what that build is (a commit)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if not os.path.exists(run_bench.AG):
        sys.exit(f"error: {run_bench.AG} not found; build first (scripts/build.sh) or set AG_BIN")
    if args.before and not os.path.exists(args.before):
        sys.exit(f"error: --before {args.before} not found")
    builds = [("this", run_bench.AG)] + ([("before", args.before)] if args.before else [])
    rounds = {label: [] for label, _ in builds}
    for i in range(args.rounds if args.before else 1):
        for label, ag in (builds if i % 2 == 0 else builds[::-1]):
            run_bench.AG = ag
            rounds[label].append(measure(args.jobs, args.calls))
    medians = {label: {e: tuple(statistics.median(r[e][k] for r in runs) for k in (0, 1)) for e in ENDPOINTS}
               for label, runs in rounds.items()}
    command = ("/usr/bin/python3 bench/summary_bench.py " + " ".join(sys.argv[1:])).strip()
    lines = [BEGIN, "## What the head's summaries cost with many jobs kept (issue 31)", "",
             f"`{command}` on {datetime.date.today().isoformat()}, 2 cores. {args.jobs} finished one-task jobs "
             f"kept; {args.calls} calls of each endpoint back to back; p50 as the client sees it, and the head's "
             "CPU per call." + (f" Each build on its own cluster, in turn, {args.rounds} rounds; medians." if args.before
                                else ""), ""]
    if args.before:
        lines += [f"| endpoint | before ({args.before_label or args.before}): p50 / head CPU per call | "
                  "this build: p50 / head CPU per call |", "| --- | --- | --- |"]
        for e in ENDPOINTS:
            b, t = medians["before"][e], medians["this"][e]
            lines.append(f"| `GET {e}` | {b[0]:.2f} / {b[1]:.2f} ms | {t[0]:.2f} / {t[1]:.2f} ms |")
    else:
        lines += ["| endpoint | p50 / head CPU per call |", "| --- | --- |"]
        for e in ENDPOINTS:
            t = medians["this"][e]
            lines.append(f"| `GET {e}` | {t[0]:.2f} / {t[1]:.2f} ms |")
    lines += ["", END, ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        run_bench.write_results_section(text, BEGIN, END)


if __name__ == "__main__":
    main()
