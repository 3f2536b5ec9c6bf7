#!/usr/bin/python3
"""AetherGrid fault-tolerance measures: how fast a dead worker is noticed and its gang
runs again elsewhere, and how fast a restarted head has its workers and jobs back.

    /usr/bin/python3 bench/run_fault_bench.py [--workers 100] [--write]

--write replaces the "Fault tolerance" section of bench/RESULTS.md (between its
markers) and leaves the rest of the file as it is.
"""
import argparse
import os
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_bench import Cluster, write_results_section  # noqa: E402

BEGIN, END = "<!-- faults:begin -->", "<!-- faults:end -->"


class FaultCluster(Cluster):
    def __init__(self, node_timeout_s=None, num_cpus=2):
        head_args = ["--kill-grace", "2"]
        if node_timeout_s is not None:
            head_args += ["--node-timeout", node_timeout_s]
        super().__init__(num_cpus=num_cpus, head_args=head_args)
        self.node_timeout_s = node_timeout_s

    def start_workers(self, ips):
        for ip in ips:
            self.ag("start-worker", "--head-node", f"127.0.0.1:{self.port}", "--node-ip-address", ip,
                    "--num-cpus", str(self.num_cpus), "--kill-grace", "2")

    def node_states(self):
        return {n["address"]: n["state"] for n in self.api("GET", "/api/nodes")["nodes"]}


def wait_for(predicate, timeout, interval=0.01):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise RuntimeError("timed out waiting")


def worker_death(node_timeout_s):
    """kill -9 of the worker running rank 1 of a spread 2-task gang with a retry left."""
    cluster = FaultCluster(node_timeout_s=node_timeout_s)
    try:
        cluster.start_head()
        cluster.start_workers(["127.0.0.2", "127.0.0.3"])
        job_id = cluster.api("POST", "/api/jobs", {
            "entrypoint": "if [ \"$AG_ATTEMPT\" = 0 ]; then exec sleep 300; fi; exec bash -c 'echo $EPOCHREALTIME'",
            # No retry delay: what is measured is how fast the cluster notices and acts.
            "num_workers": 2, "placement": "spread", "max_retries": 1, "retry_delay": 0})["job_id"]
        wait_for(lambda: all(t["state"] == "RUNNING" for t in
                             (cluster.api("GET", f"/api/jobs/{job_id}")["attempts"] or [{"tasks": [{"state": ""}]}])[0]["tasks"]), 20)
        victim = cluster.api("GET", f"/api/jobs/{job_id}")["attempts"][0]["tasks"][1]["node_address"]
        t_kill = time.time()
        os.kill(cluster.worker_pid(victim), signal.SIGKILL)
        wait_for(lambda: cluster.node_states()[victim] == "DEAD", node_timeout_s * 3 + 30)
        t_dead = time.time()
        job = cluster.wait(job_id, timeout=120)
        assert job["state"] == "SUCCEEDED" and job["num_attempts"] == 2, job
        starts = [float(cluster.api("GET", f"/api/jobs/{job_id}/logs?task_index={i}&attempt=1").decode())
                  for i in range(2)]
        return {"timeout_s": node_timeout_s, "dead_s": t_dead - t_kill, "replacement_s": max(starts) - t_kill}
    finally:
        cluster.stop()


def head_restart(num_workers):
    """kill -9 of the head with one running task per worker; time from starting the head
    again to every worker back and every job's task adopted."""
    cluster = FaultCluster(num_cpus=1)
    try:
        cluster.start_head()
        ips = [f"127.0.0.{i}" for i in range(2, 2 + num_workers)]
        cluster.start_workers(ips)
        ids = [cluster.api("POST", "/api/jobs", {"entrypoint": "sleep 120", "task_options": {"num_cpus": 1}})["job_id"]
               for _ in ips]
        wait_for(lambda: all(cluster.api("GET", f"/api/jobs/{j}")["state"] == "RUNNING" for j in ids), 60, 0.1)
        wait_for(lambda: all(t["state"] == "RUNNING" for j in ids
                             for t in cluster.api("GET", f"/api/jobs/{j}")["attempts"][0]["tasks"]), 60, 0.1)
        pids = {j: cluster.api("GET", f"/api/jobs/{j}")["attempts"][0]["tasks"][0]["pid"] for j in ids}
        os.kill(cluster.head_pid(), signal.SIGKILL)
        time.sleep(0.5)
        t0 = time.time()
        cluster.start_head()
        listening = time.time() - t0
        wait_for(lambda: sum(s == "ALIVE" for s in cluster.node_states().values()) == num_workers, 120, 0.02)
        reconnected = time.time() - t0

        def reconciled():
            running = cluster.api("GET", "/api/jobs?state=RUNNING&limit=1")["total"]
            return running >= len(ids)
        wait_for(reconciled, 120, 0.02)
        reconciled_s = time.time() - t0
        for j in ids:
            task = cluster.api("GET", f"/api/jobs/{j}")["attempts"][0]["tasks"][0]
            assert task["state"] == "RUNNING" and task["pid"] == pids[j], task
        return {"workers": num_workers, "listening_s": listening, "reconnected_s": reconnected,
                "reconciled_s": reconciled_s}
    finally:
        cluster.stop()


def section(deaths, restarts, command):
    lines = [BEGIN, "## Fault tolerance", "",
             f"Produced by `{command}` on {time.strftime('%Y-%m-%d')}. Workers and head on this machine "
             "(127.0.0.0/8); `kill -9` of a worker running rank 1 of a 2-task spread gang with one retry left.", "",
             "| node-loss timeout | worker killed → node DEAD | worker killed → replacement attempt running |",
             "| --- | --- | --- |"]
    for d in deaths:
        label = f"{d['timeout_s']:g} s" + (" (default)" if d["timeout_s"] == 10 else "")
        lines.append(f"| {label} | {d['dead_s']:.2f} s | {d['replacement_s']:.2f} s |")
    lines += ["", "Head `kill -9` and `ag start-head` again, one running task per worker (1 CPU each); "
              "times from the start command:", "",
              "| workers | head listening | all workers reconnected | all jobs reconciled (tasks adopted, same pids) |",
              "| --- | --- | --- | --- |"]
    for r in restarts:
        lines.append(f"| {r['workers']} | {r['listening_s']:.2f} s | {r['reconnected_s']:.2f} s | {r['reconciled_s']:.2f} s |")
    lines += ["", "A dead worker is noticed by missing heartbeats (sent every second; the head checks every "
              "250 ms at most), so the node is DEAD about the timeout after its last heartbeat, and the gang's "
              "new attempt runs a few milliseconds later. A reconnecting worker retries with backoff from 250 ms "
              "doubling to 5 s, which is most of the reconnect time.", END]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=100, help="workers for the large head-restart measure")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    command = "/usr/bin/python3 bench/run_fault_bench.py " + " ".join(sys.argv[1:])
    deaths = [worker_death(t) for t in (1, 5, 10)]
    restarts = [head_restart(2), head_restart(args.workers)]
    text = section(deaths, restarts, command.strip())
    print(text)
    if args.write:
        write_results_section(text, BEGIN, END)

if __name__ == "__main__":
    main()
