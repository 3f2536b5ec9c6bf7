#!/usr/bin/python3
"""AetherGrid TLS benchmark: what TLS costs on the job-start path, on vs off in one run.

Two local clusters side by side (a head on 127.0.0.1, workers on 127.0.0.2 and
127.0.0.3): one as `ag start-head` makes it (TLS: workers and the client verify the
head against the cluster CA), one started with --insecure (plain HTTP everywhere).
Rounds alternate between them so that the machine's noise falls on both alike; the
report gives medians and the TLS/plain ratio. Measured:

- start latency: submit -> both ranks of a 2-task gang running (one keep-alive client);
- throughput: one-task `true` jobs back to back from one keep-alive client;
- `ag submit -- true` as users run it: a new process, new connections each call (TLS:
  full handshakes, since each process starts without a session to resume).

    /usr/bin/python3 bench/tls_bench.py [--jobs 100] [--throughput 1000] [--rounds 3] [--cli-runs 20] [--write]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_bench import AG, Cluster, bench_start_latency, bench_throughput, write_results_section  # noqa: E402


def cli_roundtrip(cluster, runs):
    times = []
    for _ in range(runs):
        t0 = time.time()
        subprocess.run([AG, "submit", "--", "true"], env=cluster.env, capture_output=True, check=True, timeout=60)
        times.append((time.time() - t0) * 1000)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100, help="jobs per round for the start-latency measure")
    parser.add_argument("--throughput", type=int, default=1000, help="jobs per round for the throughput measure")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cli-runs", type=int, default=20)
    parser.add_argument("--write", action="store_true", help="write the TLS section of bench/RESULTS.md")
    args = parser.parse_args()
    command = "/usr/bin/python3 bench/tls_bench.py " + " ".join(sys.argv[1:])

    clusters = {"tls": Cluster(tls_client=True).start(), "plain": Cluster(insecure=True).start()}
    results = {name: {"latency_p50": [], "latency_p99": [], "rate": [], "cli": []} for name in clusters}
    try:
        for _ in range(args.rounds):
            for name, cluster in clusters.items():
                lat = bench_start_latency(cluster, args.jobs)
                results[name]["latency_p50"].append(lat["p50_ms"])
                results[name]["latency_p99"].append(lat["p99_ms"])
                results[name]["rate"].append(bench_throughput(cluster, args.throughput)["rate_per_s"])
                results[name]["cli"].append(cli_roundtrip(cluster, args.cli_runs))
    finally:
        for cluster in clusters.values():
            cluster.stop()

    med = {name: {k: statistics.median(v) for k, v in r.items()} for name, r in results.items()}
    t, p = med["tls"], med["plain"]
    rows = [
        ("submit → both ranks of a 2-task gang running, p50 (n=%d per round)" % args.jobs,
         f"{t['latency_p50']:.2f} ms", f"{p['latency_p50']:.2f} ms", t["latency_p50"] / p["latency_p50"], "≤ 1.10×"),
        ("the same, p99", f"{t['latency_p99']:.2f} ms", f"{p['latency_p99']:.2f} ms",
         t["latency_p99"] / p["latency_p99"], ""),
        ("throughput, %d one-task jobs, one keep-alive client" % args.throughput, f"{t['rate']:.0f} jobs/s",
         f"{p['rate']:.0f} jobs/s", t["rate"] / p["rate"], "≥ 0.90×"),
        ("`ag submit -- true` + wait, a new process each (n=%d per round)" % args.cli_runs, f"{t['cli']:.1f} ms",
         f"{p['cli']:.1f} ms", t["cli"] / p["cli"], ""),
    ]
    lines = ["<!-- tls:begin -->", "## TLS on vs off (issue 10)", "",
             f"Produced by `{command.strip()}` on {time.strftime('%Y-%m-%d')}: two clusters on this machine, "
             f"one with TLS (the default: workers and the client verify the head against the cluster CA) and one "
             f"`--insecure`, measured in {args.rounds} alternating rounds; medians of the rounds.", "",
             "| measure | TLS | plain | TLS / plain | goal |", "| --- | --- | --- | --- | --- |"]
    for measure, tls, plain, ratio, goal in rows:
        lines.append(f"| {measure} | {tls} | {plain} | {ratio:.2f}× | {goal} |")
    lines += ["", "Per round (TLS / plain): start p50 " +
              ", ".join(f"{a:.2f}/{b:.2f} ms" for a, b in zip(results['tls']['latency_p50'], results['plain']['latency_p50'])) +
              "; throughput " +
              ", ".join(f"{a:.0f}/{b:.0f}" for a, b in zip(results['tls']['rate'], results['plain']['rate'])) + " jobs/s.",
              "", "The job-start path's TLS is the client's and the workers' long-lived connections (keep-alive; one "
              "handshake each), so it costs only the symmetric cipher on the bytes; a new `ag` process does full "
              "handshakes (ECDSA P-256) on each of its connections.", "<!-- tls:end -->"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        write_results_section(text, "<!-- tls:begin -->", "<!-- tls:end -->")

if __name__ == "__main__":
    main()
