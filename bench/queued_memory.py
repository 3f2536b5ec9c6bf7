#!/usr/bin/python3
"""The head's memory with a deep queue: a head with no workers gets N pending jobs
(2-task gangs of 1 GPU each, three priorities) through the batch API; its resident
memory is read then, and again after a kill -9 and restart (which reloads every pending
job into the queue). The empty head, measured in the same run, is the baseline.

    /usr/bin/python3 bench/queued_memory.py [--jobs 100000] [--batch 1000]
"""
import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100000)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    cluster = run_bench.Cluster()
    cluster.start_head()
    try:
        empty = run_bench.rss_kib(cluster.head_pid())
        t0 = time.time()
        for start in range(0, args.jobs, args.batch):
            n = min(args.batch, args.jobs - start)
            jobs = [{"entrypoint": "python train.py --seed %d" % (start + i), "num_workers": 2,
                     "task_options": {"num_gpus": 1}, "priority": (start + i) % 3, "allow_unschedulable": True}
                    for i in range(n)]
            cluster.api("POST", "/api/jobs/batch", {"jobs": jobs})
        submit_s = time.time() - t0
        time.sleep(2)  # the scheduling pass over the new queue
        loaded = run_bench.rss_kib(cluster.head_pid())
        os.kill(cluster.head_pid(), signal.SIGKILL)
        time.sleep(0.5)
        t0 = time.time()
        cluster.start_head()
        restart_s = time.time() - t0
        time.sleep(2)
        restarted = run_bench.rss_kib(cluster.head_pid())
        total = cluster.api("GET", "/api/jobs?limit=1")["total"]
        print(f"| {total} pending jobs | {loaded / 1024:.1f} MiB (submitted in {submit_s:.1f} s) | "
              f"{restarted / 1024:.1f} MiB (restart {restart_s:.1f} s) | empty head {empty / 1024:.1f} MiB |")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
