#!/usr/bin/python3
"""Hundreds of worker agents on one machine (issue 33): how long they take to register,
what the head costs with them idle and under a gang as wide as the cluster, what one
heartbeat costs, and how soon a restarted head has every worker back.

    /usr/bin/python3 bench/many_workers_bench.py [--workers 500] [--idle-s 30] [--write]

Each worker gets its own loopback address (127.1.X.Y) and data dir and offers one CPU.
The limits this needs are raised for the run and put back at the end: the user's inotify
instances (fs.inotify.max_user_instances; Linux's default of 128 would send the 129th
worker onwards to polling), and this process's soft descriptor limit (the head inherits
it and raises it to the hard one itself). --write replaces the "many-workers" section of
bench/RESULTS.md (between its markers).
"""
import argparse
import concurrent.futures
import datetime
import os
import resource
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load_bench import cpu_s, rss_mib  # noqa: E402
from run_bench import AG, Cluster, write_results_section  # noqa: E402

BEGIN, END = "<!-- many-workers:begin -->", "<!-- many-workers:end -->"
INOTIFY = "/proc/sys/fs/inotify/max_user_instances"


def worker_ip(i):
    return f"127.1.{i // 250}.{i % 250 + 1}"


def alive_pid(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


class RaisedLimits:
    """The limits a few hundred agents need, put back as they were on exit."""

    def __init__(self, workers):
        self.workers = workers
        self.inotify_before = None
        self.nofile_before = resource.getrlimit(resource.RLIMIT_NOFILE)

    def __enter__(self):
        with open(INOTIFY) as f:
            self.inotify_before = int(f.read())
        wanted = self.workers + 256
        if self.inotify_before < wanted:
            with open(INOTIFY, "w") as f:
                f.write(str(wanted))
        soft, hard = self.nofile_before
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return self

    def __exit__(self, *exc):
        with open(INOTIFY, "w") as f:
            f.write(str(self.inotify_before))
        resource.setrlimit(resource.RLIMIT_NOFILE, self.nofile_before)


class ManyWorkers(Cluster):
    def __init__(self, workers):
        super().__init__(num_cpus=1, head_args=["--kill-grace", "1"])
        self.count = workers
        self.worker_pids = {}

    def start_worker(self, i):
        ip = worker_ip(i)
        self.ag("start-worker", "--head-node", f"127.0.0.1:{self.port}", "--node-ip-address", ip,
                "--num-cpus", "1", "--memory", "1G", "--container-engine", "none", timeout=300)
        with open(os.path.join(self.session, "daemons", f"worker-{ip}.pid")) as f:
            self.worker_pids[ip] = int(f.read())

    def alive(self):
        return sum(1 for n in self.api("GET", "/api/nodes")["nodes"] if n["state"] == "ALIVE")

    def wait_alive(self, count, timeout):
        deadline = time.time() + timeout
        while True:
            n = self.alive()
            if n >= count:
                return
            if time.time() > deadline:
                raise RuntimeError(f"{n} of {count} workers alive after {timeout} s")
            time.sleep(0.05)

    def teardown(self, remove=True):
        try:
            self.ag("stop", timeout=600)
        except Exception as e:  # noqa: BLE001 - whatever `ag stop` left is killed below
            print(f"ag stop: {e}", file=sys.stderr)
        for pid in list(self.worker_pids.values()) + [self.head_pid_or_none()]:
            if pid and alive_pid(pid):
                os.kill(pid, signal.SIGKILL)
        if remove:
            subprocess.run(["rm", "-rf", self.session], check=False)
        else:
            print(f"the daemons' logs are kept in {self.session}", file=sys.stderr)

    def head_pid_or_none(self):
        try:
            return self.head_pid()
        except OSError:
            return None


class Progress(dict):
    """The results, each also said on stderr as it is measured."""

    def __setitem__(self, key, value):
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}", file=sys.stderr, flush=True)
        super().__setitem__(key, value)


def measure_cpu(pids, seconds):
    """CPU per process over `seconds` as a % of one core, and the wall time taken."""
    before = {p: cpu_s(p) for p in pids}
    t0 = time.perf_counter()
    time.sleep(seconds)
    wall = time.perf_counter() - t0
    return {p: (cpu_s(p) - before[p]) / wall * 100 for p in pids}


def run(workers, idle_s, parallel):
    out = Progress(workers=workers)
    cluster = ManyWorkers(workers)
    failed = True
    try:
        cluster.start_head()
        head = cluster.head_pid()
        out["head_rss_empty_mib"] = rss_mib(head)
        cpu_before = cpu_s(head)
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
            list(pool.map(cluster.start_worker, range(workers)))
        started = time.perf_counter() - t0
        cluster.wait_alive(workers, 120)
        out["register_s"] = time.perf_counter() - t0
        out["last_start_returned_s"] = started
        out["head_cpu_register_s"] = cpu_s(head) - cpu_before

        # Idle: nothing but heartbeats (one a second from every worker, each with its
        # node's usage) and the head's own timers.
        time.sleep(3)
        sample = sorted(cluster.worker_pids.values())[:: max(1, workers // 50)]
        cpu = measure_cpu([head, *sample], idle_s)
        out["head_idle_cpu_pct"] = cpu[head]
        out["worker_idle_cpu_pct"] = sum(cpu[p] for p in sample) / len(sample)
        out["head_idle_rss_mib"] = rss_mib(head)
        out["worker_rss_mib"] = sum(rss_mib(p) for p in sample) / len(sample)
        # One heartbeat a second from each worker: the head's idle CPU per heartbeat.
        out["heartbeat_us"] = cpu[head] / 100 / workers * 1e6

        # A gang as wide as the cluster: one task on every worker.
        cpu_before = cpu_s(head)
        t0 = time.perf_counter()
        job_id = cluster.api("POST", "/api/jobs", {
            "entrypoint": "sleep 600", "num_workers": workers,
            "task_options": {"num_cpus": 1}})["job_id"]

        def running():
            job = cluster.api("GET", f"/api/jobs/{job_id}")
            tasks = job.get("attempts", [{}])[-1].get("tasks", []) if job.get("attempts") else []
            return job, sum(1 for t in tasks if t.get("state") == "RUNNING")

        deadline = time.time() + 120
        while True:
            job, n = running()
            if n == workers:
                break
            if job["state"] in ("FAILED", "STOPPED") or time.time() > deadline:
                raise RuntimeError(f"gang: {n} of {workers} tasks running, job {job['state']}: {job.get('message')}")
            time.sleep(0.05)
        out["gang_running_s"] = time.perf_counter() - t0
        out["head_cpu_gang_start_s"] = cpu_s(head) - cpu_before
        time.sleep(3)
        cpu = measure_cpu([head, *sample], idle_s)
        out["head_gang_cpu_pct"] = cpu[head]
        out["worker_gang_cpu_pct"] = sum(cpu[p] for p in sample) / len(sample)
        out["head_gang_rss_mib"] = rss_mib(head)

        # A head restart under the running gang: kill -9, start again, time until
        # every worker is back and has told it about its task.
        os.kill(head, signal.SIGKILL)
        while alive_pid(head):
            time.sleep(0.01)
        t0 = time.perf_counter()
        cluster.start_head()
        out["head_start_s"] = time.perf_counter() - t0
        head = cluster.head_pid()
        cluster.wait_alive(workers, 120)
        out["restart_all_alive_s"] = time.perf_counter() - t0
        job, n = running()
        deadline = time.time() + 60
        while n != workers and time.time() < deadline:
            time.sleep(0.05)
            job, n = running()
        out["restart_tasks_running_s"] = time.perf_counter() - t0
        out["restart_tasks_running"] = n
        out["job_state_after_restart"] = job["state"]

        # Stop the gang: every task on every worker ends.
        t0 = time.perf_counter()
        cluster.api("POST", f"/api/jobs/{job_id}/stop")
        cluster.wait(job_id, timeout=120)
        out["gang_stop_s"] = time.perf_counter() - t0
        time.sleep(3)
        cpu = measure_cpu([head], idle_s)
        out["head_idle_after_cpu_pct"] = cpu[head]
        out["head_idle_after_rss_mib"] = rss_mib(head)
        failed = False
    finally:
        cluster.teardown(remove=not failed)
    return out


def report(r, command):
    w = r["workers"]
    today = datetime.date.today().isoformat()
    rows = [
        ("register", f"{w} workers started {8 if r.get('parallel') is None else r['parallel']} at a time, "
                     "first start → all ALIVE", f"{r['register_s']:.1f} s", "≤ 60 s"),
        ("", "head CPU spent on the registrations", f"{r['head_cpu_register_s']:.2f} s", ""),
        ("idle", f"head CPU with {w} idle workers (heartbeat every second)", f"{r['head_idle_cpu_pct']:.1f}%", "< 5%"),
        ("", "head RSS: no workers / idle workers", f"{r['head_rss_empty_mib']:.0f} / {r['head_idle_rss_mib']:.0f} MiB", ""),
        ("", "head CPU per heartbeat (idle CPU / heartbeats per second)", f"{r['heartbeat_us']:.0f} µs", ""),
        ("", "one idle worker: CPU / RSS", f"{r['worker_idle_cpu_pct']:.2f}% / {r['worker_rss_mib']:.1f} MiB", ""),
        ("gang", f"submit → all {w} tasks of one gang RUNNING", f"{r['gang_running_s']:.2f} s", ""),
        ("", "head CPU for that start", f"{r['head_cpu_gang_start_s']:.2f} s", ""),
        ("", f"head CPU / RSS while the {w} tasks run", f"{r['head_gang_cpu_pct']:.1f}% / {r['head_gang_rss_mib']:.0f} MiB", ""),
        ("", "one worker with its task running: CPU (heartbeat with the task's usage)",
         f"{r['worker_gang_cpu_pct']:.2f}%", ""),
        ("restart", "kill -9 of the head → `ag start-head` returned", f"{r['head_start_s']:.2f} s", ""),
        ("", f"→ all {w} workers ALIVE again", f"{r['restart_all_alive_s']:.2f} s", "≤ 10 s"),
        ("", f"→ all {w} tasks reported RUNNING ({r['restart_tasks_running']} of {w}; job {r['job_state_after_restart']})",
         f"{r['restart_tasks_running_s']:.2f} s", "≤ 10 s"),
        ("stop", f"stop the gang → job STOPPED (all {w} tasks ended)", f"{r['gang_stop_s']:.2f} s", ""),
        ("", "head CPU / RSS idle afterwards", f"{r['head_idle_after_cpu_pct']:.1f}% / {r['head_idle_after_rss_mib']:.0f} MiB", ""),
    ]
    lines = [BEGIN, f"## {w} workers on one machine (issue 33)", "",
             f"`{command}` on {today}, 2 cores. A head on 127.0.0.1 and {w} worker agents on "
             f"127.1.X.Y, each with its own data dir, one CPU and 1 GiB offered, no container engine; "
             "CPU is % of one core over the idle window.", "",
             "| phase | measure | result | target |", "| --- | --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    missed = [name for name, ok in (("registration", r["register_s"] <= 60),
                                    ("idle CPU", r["head_idle_cpu_pct"] < 5),
                                    ("restart", r["restart_tasks_running_s"] <= 10)) if not ok]
    lines += ["", "Targets missed: " + ", ".join(missed) + "." if missed else "Every target is met.",
              "The workers share the machine's 2 cores, so the gang's start and stop measure them "
              "more than the head: a stop ends every task at once, and removing hundreds of task "
              "control groups together waits on one kernel lock. Each heartbeat of a worker with a "
              "task reads only its task's processes (those of its control group), not all of /proc.",
              "", END, ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=500)
    parser.add_argument("--idle-s", type=float, default=30)
    parser.add_argument("--parallel", type=int, default=8, help="`ag start-worker` commands at once")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("error: run as root: the benchmark raises fs.inotify.max_user_instances for the run")
    if not os.path.exists(AG):
        sys.exit(f"error: {AG} not found; build first (scripts/build.sh) or set AG_BIN")
    with RaisedLimits(args.workers):
        r = run(args.workers, args.idle_s, args.parallel)
    r["parallel"] = args.parallel
    command = "/usr/bin/python3 bench/many_workers_bench.py " + " ".join(sys.argv[1:])
    text = report(r, command.strip())
    print(text)
    if args.write:
        write_results_section(text, BEGIN, END)


if __name__ == "__main__":
    main()
