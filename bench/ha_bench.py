#!/usr/bin/python3
"""AetherGrid on PostgreSQL against SQLite: throughput, gang start, head memory, failover.

One run, the two backends alternating round by round on the same machine (a head on
127.0.0.1 and two workers on 127.0.0.2/.3; for PostgreSQL a server the bench starts on
loopback, fsync on as in production): submit throughput with 1 and 8 clients, submit ->
both ranks of a 2-task gang running (p50/p99), head RSS with N finished jobs. Then the
failover time over T trials: two heads (127.0.0.1, 127.0.0.4) with a 3 s lease, kill -9
of the leader -> the first job placed by the new leader, and whether any takeover
happened under load that was not asked for (the epoch after the throughput rounds).

    /usr/bin/python3 bench/ha_bench.py [--rounds 2] [--jobs 500] [--memory-jobs 100000] [--trials 10] [--write]
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import json

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))

import run_bench  # noqa: E402
from pg_server import PostgresServer  # noqa: E402

LEASE = "3s"


class StoreCluster(run_bench.Cluster):
    """A cluster whose head keeps its state in PostgreSQL (`--store`), with a shared dir."""

    def __init__(self, pg, database, **kwargs):
        self.shared = tempfile.mkdtemp(prefix="ag-bench-shared-")
        url = pg.create_database(database)
        super().__init__(head_args=["--store", url, "--store-password-file", str(pg.password_file),
                                    "--shared-dir", self.shared, "--leader-lease", LEASE], **kwargs)

    def start_head(self):
        self.ag("start-head", "--port", str(self.port), "--dashboard-port", str(self.dash), *self.head_args)
        with open(os.path.join(self.shared, "token")) as f:
            self.token = f.read().strip()
        self.conn = None
        # The head answers once it leads (a moment after it starts).
        deadline = time.time() + 30
        while True:
            try:
                if self.api("GET", "/api/version").get("role") == "leader":
                    return
            except RuntimeError:
                pass
            if time.time() > deadline:
                raise RuntimeError("the head did not lead within 30 s")
            time.sleep(0.05)

    def stop(self):
        try:
            super().stop()
        finally:
            shutil.rmtree(self.shared, ignore_errors=True)


def measure(cluster, jobs, latency_jobs):
    out = {}
    for clients in (1, 8):
        out[f"throughput_{clients}"] = run_bench.bench_throughput(cluster, jobs, clients)["rate_per_s"]
    latency = run_bench.bench_start_latency(cluster, latency_jobs)
    out["start_p50_ms"], out["start_p99_ms"] = latency["p50_ms"], latency["p99_ms"]
    return out


def memory(cluster, jobs):
    result = run_bench.bench_memory(cluster, jobs)
    return {"loaded_mib": result["loaded_mib"], "restarted_mib": result["restarted_mib"],
            "restart_s": result["restart_s"], "jobs_in_store": result["jobs_in_store"]}


def version_at(ip, port, token, timeout=1.0):
    req = urllib.request.Request(f"http://{ip}:{port}/api/version", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError):
        return None


def post_job(ip, port, token, timeout=2.0):
    body = json.dumps({"entrypoint": "true", "task_options": {"num_cpus": 0.5}}).encode()
    req = urllib.request.Request(f"http://{ip}:{port}/api/jobs", data=body, method="POST",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())["job_id"]
    except (OSError, urllib.error.HTTPError, ValueError):
        return None


def job_state(ip, port, token, job_id):
    req = urllib.request.Request(f"http://{ip}:{port}/api/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=2) as resp:
            return json.loads(resp.read())["state"]
    except (OSError, urllib.error.HTTPError, ValueError):
        return None


def failover_trials(pg, trials):
    """Two heads, lease 3 s; kill -9 of the leader -> first job placed by the new one."""
    root = tempfile.mkdtemp(prefix="ag-bench-ha-")
    shared = os.path.join(root, "shared")
    url = pg.create_database(f"failover{os.getpid()}")
    port, dash = run_bench.free_port(), run_bench.free_port()
    ips = ("127.0.0.1", "127.0.0.4")
    envs = {ip: dict(os.environ, AG_SESSION_DIR=os.path.join(root, f"s-{ip}")) for ip in ips}

    def start_head(ip):
        subprocess.run([run_bench.AG, "start-head", "--node-ip-address", ip, "--port", str(port), "--dashboard-port",
                        str(dash), "--data-dir", os.path.join(root, f"h-{ip}"), "--store", url,
                        "--store-password-file", str(pg.password_file), "--shared-dir", shared,
                        "--leader-lease", LEASE], env=envs[ip], capture_output=True, check=True, timeout=60)

    def head_pid(ip):
        with open(os.path.join(envs[ip]["AG_SESSION_DIR"], "daemons", "head.pid")) as f:
            return int(f.read())

    times = []
    try:
        start_head(ips[0])
        token = open(os.path.join(shared, "token")).read().strip()
        deadline = time.monotonic() + 30
        while (version_at(ips[0], port, token) or {}).get("role") != "leader":
            if time.monotonic() > deadline:
                raise RuntimeError("the first head did not lead within 30 s")
            time.sleep(0.05)
        start_head(ips[1])
        join = open(os.path.join(shared, "join-token")).read().strip()
        addresses = ",".join(f"{ip}:{port}" for ip in ips)
        for ip in ("127.0.0.2", "127.0.0.3"):
            subprocess.run([run_bench.AG, "start-worker", "--head-node", addresses, "--node-ip-address", ip,
                            "--num-cpus", "2", "--token", join], env=envs[ips[0]], capture_output=True, check=True,
                           timeout=60)
        leader = ips[0]
        for _ in range(trials):
            other = ips[1] if leader == ips[0] else ips[0]
            # Both workers with the leader, and a job through it, before the kill.
            warm = None
            deadline = time.monotonic() + 60
            while warm is None or job_state(leader, port, token, warm) != "SUCCEEDED":
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no job succeeded through the leader {leader} within 60 s")
                warm = warm or post_job(leader, port, token)
                time.sleep(0.05)
            os.kill(head_pid(leader), signal.SIGKILL)
            killed = time.monotonic()
            job = None
            deadline = time.monotonic() + 60
            while job is None or job_state(other, port, token, job) not in ("RUNNING", "SUCCEEDED", "FAILED"):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{other} placed no job within 60 s of the kill (job {job})")
                job = job or post_job(other, port, token)
                time.sleep(0.02)
            times.append(time.monotonic() - killed)
            start_head(leader)  # back as a standby for the next trial
            leader = other
        return {"trials": trials, "median_s": statistics.median(times), "max_s": max(times),
                "min_s": min(times), "times": times}
    finally:
        for ip in ips:
            subprocess.run([run_bench.AG, "stop", "--timeout", "5"], env=envs[ip], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each backend, alternating")
    parser.add_argument("--jobs", type=int, default=500, help="jobs per throughput measure")
    parser.add_argument("--latency-jobs", type=int, default=100)
    parser.add_argument("--memory-jobs", type=int, default=100000)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args()

    pg_root = tempfile.mkdtemp(prefix="ag-bench-pg-")
    pg = PostgresServer(pg_root, run_bench.free_port())
    pg.init()
    pg.fsync = True
    pg.start()
    results = {"sqlite": [], "postgresql": []}
    epochs = []
    try:
        for r in range(args.rounds):
            for backend in ("sqlite", "postgresql"):
                cluster = (run_bench.Cluster() if backend == "sqlite"
                           else StoreCluster(pg, f"bench{os.getpid()}_{r}"))
                try:
                    cluster.start()
                    results[backend].append(measure(cluster, args.jobs, args.latency_jobs))
                    if backend == "postgresql":
                        epochs.append(cluster.api("GET", "/api/version")["epoch"])
                    print(backend, results[backend][-1], flush=True)
                finally:
                    cluster.stop()
        mem = {}
        if args.memory_jobs:
            for backend in ("sqlite", "postgresql"):
                cluster = (run_bench.Cluster() if backend == "sqlite" else StoreCluster(pg, f"mem{os.getpid()}"))
                try:
                    cluster.start()
                    mem[backend] = memory(cluster, args.memory_jobs)
                    print(backend, mem[backend], flush=True)
                finally:
                    cluster.stop()
        failover = failover_trials(pg, args.trials) if args.trials else None
        print("failover", failover, flush=True)
    finally:
        pg.stop("immediate")
        shutil.rmtree(pg_root, ignore_errors=True)

    def med(backend, key):
        return statistics.median(r[key] for r in results[backend])

    command = "/usr/bin/python3 bench/ha_bench.py " + " ".join(sys.argv[1:])
    lines = ["<!-- ha:begin -->", "## Standby heads: PostgreSQL against SQLite (issue 27)", "",
             f"`{command.strip()}` on {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, the backends alternating "
             f"({args.rounds} rounds each; medians). PostgreSQL 15 on loopback, the bench's own server with fsync "
             "on; a head on 127.0.0.1 and two workers on 127.0.0.2/.3.", "",
             "| measure | SQLite | PostgreSQL | ratio | target |", "| --- | --- | --- | --- | --- |"]
    for clients in (1, 8):
        s, p = med("sqlite", f"throughput_{clients}"), med("postgresql", f"throughput_{clients}")
        lines.append(f"| throughput, {args.jobs} one-task jobs, {clients} client(s) | {s:.0f} jobs/s | {p:.0f} jobs/s | "
                     f"{100 * p / s:.0f}% | ≥ 50% |")
    s50, p50 = med("sqlite", "start_p50_ms"), med("postgresql", "start_p50_ms")
    lines.append(f"| submit → both ranks of a 2-task gang running, p50 / p99 (n={args.latency_jobs}) | "
                 f"{s50:.1f} / {med('sqlite', 'start_p99_ms'):.1f} ms | {p50:.1f} / {med('postgresql', 'start_p99_ms'):.1f} ms | "
                 f"{p50 / s50:.2f}× | p50 ≤ 1.5× |")
    if mem:
        lines.append(f"| head RSS with {mem['sqlite']['jobs_in_store']:,} finished jobs / after a restart | "
                     f"{mem['sqlite']['loaded_mib']:.0f} / {mem['sqlite']['restarted_mib']:.0f} MiB | "
                     f"{mem['postgresql']['loaded_mib']:.0f} / {mem['postgresql']['restarted_mib']:.0f} MiB | "
                     f"{mem['postgresql']['restarted_mib'] / mem['sqlite']['restarted_mib']:.2f}× | |")
        lines.append(f"| head restart with them | {mem['sqlite']['restart_s']:.2f} s | {mem['postgresql']['restart_s']:.2f} s | | |")
    if failover:
        lines.append(f"| failover, kill -9 of the leader → first job placed by the new one ({failover['trials']} trials, "
                     f"lease 3 s) | | median {failover['median_s']:.2f} s (min {failover['min_s']:.2f}, max "
                     f"{failover['max_s']:.2f}) | | ≤ lease + 2 s = 5 s; goal ≤ 5 s |")
    lines.append(f"| takeovers not asked for during the PostgreSQL rounds (epoch at the end of each) | | "
                 f"{', '.join(str(e) for e in epochs)} | | all 1 |")
    lines.append("<!-- ha:end -->")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        run_bench.write_results_section(text, "<!-- ha:begin -->", "<!-- ha:end -->")


if __name__ == "__main__":
    main()
