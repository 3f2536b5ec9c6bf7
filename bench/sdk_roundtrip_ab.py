"""A trivial job's submit + wait through the SDK, two builds in turn.

run_bench.py measures one build per run, so two builds compared that way are measured
minutes apart on a machine whose speed drifts. This runs them in turn (ABBA...), each
round on a fresh cluster of its own (run_bench.Cluster: a head and two workers on
loopback), and reports each round's median and the median of the rounds.

    /usr/bin/python3 bench/sdk_roundtrip_ab.py --before AG --after AG [--rounds 5] [--jobs 70] [--warmup 10]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402


def one_round(ag_bin, jobs, warmup):
    import aethergrid as ag
    run_bench.AG = ag_bin
    cluster = run_bench.Cluster().start()
    try:
        client = ag.Client(f"127.0.0.1:{cluster.port}", token=cluster.token)
        times = []
        for _ in range(jobs):
            t0 = time.time()
            client.submit_job(entrypoint="true").wait(timeout=60)
            times.append((time.time() - t0) * 1000)
        return statistics.median(times[warmup:])
    finally:
        cluster.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the ag binary measured first in odd rounds")
    parser.add_argument("--after", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=70, help="submit + wait calls per round")
    parser.add_argument("--warmup", type=int, default=10, help="first calls of a round left out")
    args = parser.parse_args()
    if args.jobs <= args.warmup:
        parser.error(f"--jobs ({args.jobs}) must be more than --warmup ({args.warmup})")
    for path in (args.before, args.after):
        if not os.access(path, os.X_OK):
            parser.error(f"{path} is not an executable ag binary")
    results = {"before": [], "after": []}
    for r in range(args.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for name in order:
            results[name].append(one_round(getattr(args, name), args.jobs, args.warmup))
    for name in ("before", "after"):
        runs = " / ".join(f"{ms:.2f}" for ms in results[name])
        print(f"{name}: SDK submit + wait p50 per round {runs} ms; median {statistics.median(results[name]):.2f} ms")


if __name__ == "__main__":
    main()
