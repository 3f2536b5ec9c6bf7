#!/usr/bin/python3
"""Where the CPU of the throughput benchmark goes: CPU milliseconds per job for the
head, each worker agent (and what they reaped), the submitting client, and the whole
machine, over rounds of one-task `true` jobs from 4 concurrent clients.

    /usr/bin/python3 bench/cpu_per_job.py [--jobs 2000] [--rounds 2]

A profiling aid for the throughput target (bench/run_bench.py); its numbers are not
written to RESULTS.md. The task supervisor's own CPU shows only in the machine total
(it is reaped after its agent exits).
"""
import argparse
import glob
import os
import resource
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def process_cpu(pid):
    """(own, reaped children's) CPU time of `pid`, in clock ticks."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def machine_busy():
    values = list(map(int, open("/proc/stat").readline().split()[1:]))
    return sum(values) - values[3] - values[4]  # all but idle and iowait


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    cluster = run_bench.Cluster().start()
    try:
        pids = {os.path.basename(f)[:-4]: int(open(f).read()) for f in glob.glob(cluster.session + "/daemons/*.pid")}
        run_bench.bench_throughput(cluster, 300, 4)  # warm up
        for _ in range(args.rounds):
            before = {name: process_cpu(pid) for name, pid in pids.items()}
            busy0, self0 = machine_busy(), resource.getrusage(resource.RUSAGE_SELF)
            result = run_bench.bench_throughput(cluster, args.jobs, 4)
            after = {name: process_cpu(pid) for name, pid in pids.items()}
            busy1, self1 = machine_busy(), resource.getrusage(resource.RUSAGE_SELF)
            per_job = lambda ticks: ticks * TICK_MS / args.jobs  # noqa: E731
            parts = [f"{name} {per_job(after[name][0] - before[name][0]):.2f}"
                     f" (+{per_job(after[name][1] - before[name][1]):.2f} reaped)" for name in sorted(pids)]
            client = ((self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime)) * 1000 / args.jobs
            print(f"{result['rate_per_s']:.0f} jobs/s; CPU ms per job: machine {per_job(busy1 - busy0):.2f}; "
                  + "; ".join(parts) + f"; client {client:.2f}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
