#!/usr/bin/python3
"""AetherGrid benchmarks: start latency, throughput, DDP overhead, head memory and dashboard data times.

Starts its own local cluster (a head on 127.0.0.1, workers on 127.0.0.2 and
127.0.0.3) in a temporary session, measures the machine's spawn floor in the same
run, and prints a Markdown report (also written to bench/RESULTS.md with --write).

    /usr/bin/python3 bench/run_bench.py [--jobs 200] [--throughput 2000] [--memory-jobs 10000] [--write]
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AG = os.environ.get("AG_BIN", os.path.join(REPO, "build", "bin", "ag"))
SUBMIT_CLIENT = os.path.join(REPO, "build", "bin", "submit_client")
SPAWN_FLOOR = os.path.join(REPO, "build", "bin", "spawn_floor")
PYTHON = "/usr/bin/python3"
sys.path.insert(0, os.path.join(REPO, "python"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


class Cluster:
    """`insecure`: the head runs without TLS. `tls_client`: api() speaks TLS to it
    (verifying the cluster CA) instead of plain HTTP on loopback."""

    def __init__(self, num_cpus=2, insecure=False, tls_client=False, head_args=()):
        self.session = tempfile.mkdtemp(prefix="ag-bench-")
        self.head_args = [str(a) for a in head_args]  # more `ag start-head` options
        self.env = dict(os.environ, AG_SESSION_DIR=self.session)
        self.port, self.dash = free_port(), free_port()
        self.num_cpus = num_cpus
        self.insecure = insecure
        self.tls_client = tls_client
        self.ssl_context = None
        self.conn = None

    def ag(self, *args, timeout=120):
        return subprocess.run([AG, *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=True)

    def start_head(self):
        self.ag("start-head", "--port", str(self.port), "--dashboard-port", str(self.dash),
                *(["--insecure"] if self.insecure else []), *self.head_args)
        with open(os.path.join(self.session, "head", "token")) as f:
            self.token = f.read().strip()
        if self.tls_client:
            import ssl
            self.ssl_context = ssl.create_default_context(cafile=os.path.join(self.session, "head", "tls", "ca.crt"))
        self.conn = None

    def connect(self):
        if self.ssl_context is not None:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=120, context=self.ssl_context)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)

    def start(self):
        self.start_head()
        pin = []
        if self.tls_client:
            # On loopback the daemons and the CLI would use plain HTTP; pinning the CA
            # makes them verify the head over TLS, as they do between machines.
            import hashlib
            import ssl
            with open(os.path.join(self.session, "head", "tls", "ca.crt")) as f:
                fingerprint = "sha256:" + hashlib.sha256(ssl.PEM_cert_to_DER_cert(f.read())).hexdigest()
            pin = ["--ca-fingerprint", fingerprint]
            self.env["AG_CONFIG"] = os.path.join(self.session, "config.json")
            self.ag("config", "--address", f"127.0.0.1:{self.port}", *pin)
        for ip in ("127.0.0.2", "127.0.0.3"):
            self.ag("start-worker", "--head-node", f"127.0.0.1:{self.port}", "--node-ip-address", ip,
                    "--num-cpus", str(self.num_cpus), *pin)
        return self

    def head_pid(self):
        with open(os.path.join(self.session, "daemons", "head.pid")) as f:
            return int(f.read())

    def worker_pid(self, ip):
        with open(os.path.join(self.session, "daemons", f"worker-{ip}.pid")) as f:
            return int(f.read())

    def api(self, method, path, body=None):
        for _ in range(2):
            if self.conn is None:
                self.conn = self.connect()
            try:
                # Bytes, not str: http.client then sends the headers and the body in one
                # write (a str body goes in a second one, and the head wakes twice).
                self.conn.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                                  headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
                res = self.conn.getresponse()
                data = res.read()
                if res.status >= 300:
                    raise RuntimeError(f"{method} {path}: HTTP {res.status}: {data[:200]!r}")
                return json.loads(data) if res.getheader("Content-Type", "").startswith("application/json") else data
            except (http.client.HTTPException, ConnectionError):
                self.conn = None
        raise RuntimeError(f"{method} {path}: connection failed twice")

    def wait(self, job_id, timeout=120):
        deadline = time.time() + timeout
        while True:
            job = self.api("GET", f"/api/jobs/{job_id}/wait?timeout_ms=60000")
            if job["state"] in ("SUCCEEDED", "FAILED", "STOPPED"):
                return job
            if time.time() > deadline:
                raise RuntimeError(f"job {job_id} still {job['state']} after {timeout}s")

    def stop(self):
        try:
            self.ag("stop", timeout=60)
        finally:
            shutil.rmtree(self.session, ignore_errors=True)


TASK_COMMAND = "exec bash -c 'echo $EPOCHREALTIME >/dev/null'"


def write_results_section(text, begin, end):
    """Puts `text` (which starts with `begin` and ends with `end`) into bench/RESULTS.md
    in place of the section between those markers, or at the end."""
    path = os.path.join(REPO, "bench", "RESULTS.md")
    old = open(path).read() if os.path.exists(path) else ""
    if begin in old and end in old:
        new = old[:old.index(begin)] + text.rstrip("\n") + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n" + text
    with open(path, "w") as f:
        f.write(new)


def spawn_floor(n=500, command=None, mean_gap_ms=0, ranks=1):
    """posix_spawn + wait of /bin/true (or `command`) n times: back to back, or each after
    an idle gap drawn from an exponential distribution of mean `mean_gap_ms`; with `ranks`
    above 1, that many at once by as many spawners (a gang's floor)."""
    gaps = ["--mean-gap-ms", str(mean_gap_ms)] if mean_gap_ms else []
    together = ["--ranks", str(ranks)] if ranks > 1 else []
    out = subprocess.run([SPAWN_FLOOR, *gaps, *together, str(n), *(command or [])], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.splitlines()[-1])  # after what the command itself printed


# What each rank of the start-latency gang runs: it prints when it started.
START_COMMAND = "exec bash -c 'echo $EPOCHREALTIME'"


class StartStamp:
    """build/bin/start_stamp copied where every task's account can run it: a rank that
    prints the wall clock as its program starts, with no shell's start in front."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ag-stamp-")
        os.chmod(self.dir, 0o755)
        self.path = os.path.join(self.dir, "start_stamp")
        shutil.copy(os.path.join(REPO, "build", "bin", "start_stamp"), self.path)
        os.chmod(self.path, 0o755)

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def bench_start_latency(cluster, jobs, mean_gap_s=0.0, seed=31, command=START_COMMAND, ranks=2, placement="spread"):
    """Submit -> every rank of a gang (2 tasks spread over the workers by default)
    running `command` (which prints the wall clock as it starts), one job at a time: back
    to back, or (mean_gap_s > 0) after an idle gap drawn from an exponential
    distribution of that mean before each submit (random arrivals at low load)."""
    gaps = random.Random(seed)
    latencies = []
    for _ in range(jobs):
        if mean_gap_s > 0:
            time.sleep(gaps.expovariate(1 / mean_gap_s))
        t0 = time.time()
        job_id = cluster.api("POST", "/api/jobs", {
            "entrypoint": command, "num_workers": ranks,
            "placement": placement, "task_options": {"num_cpus": 1}})["job_id"]
        job = cluster.wait(job_id)
        assert job["state"] == "SUCCEEDED", job
        starts = [float(cluster.api("GET", f"/api/jobs/{job_id}/logs?task_index={i}").decode()) for i in range(ranks)]
        latencies.append((max(starts) - t0) * 1000)
    return {"p50_ms": statistics.median(latencies), "p99_ms": percentile(latencies, 99), "n": jobs}


THROUGHPUT_BODY = {"entrypoint": "true", "task_options": {"num_cpus": 0.5}}


def bench_throughput(cluster, jobs, clients=1, at_clock_stop=None, native=False, entrypoint=None):
    """`jobs` one-task `true` jobs (or `entrypoint` ones) submitted back to back by
    `clients` concurrent submitters (each on its own keep-alive connection), until all
    SUCCEEDED.
    `at_clock_stop`, if given, is called as the clock stops, before each job is
    checked (what a measure of the jobs' cost reads then excludes the checks).
    `native`: each submitter is build/bin/submit_client (C++, plain HTTP) rather than a
    thread of this process using http.client."""
    import threading

    body = dict(THROUGHPUT_BODY, entrypoint=entrypoint) if entrypoint else THROUGHPUT_BODY
    ids, errors = [], []
    lock = threading.Lock()

    def submitter(count):
        own = Cluster.__new__(Cluster)
        own.port, own.token, own.conn, own.ssl_context = cluster.port, cluster.token, None, cluster.ssl_context
        try:
            for _ in range(count):
                job_id = own.api("POST", "/api/jobs", body)["job_id"]
                with lock:
                    ids.append(job_id)
        except Exception as e:  # reported below; a benchmark with lost submits is void
            errors.append(e)

    def succeeded():
        return cluster.api("GET", "/api/cluster")["jobs"]["SUCCEEDED"]

    counts = [jobs // clients + (i < jobs % clients) for i in range(clients)]
    already = succeeded()
    t0 = time.time()
    if native:
        if cluster.ssl_context is not None:
            raise ValueError("submit_client speaks plain HTTP only")
        env = dict(os.environ, AG_TOKEN=cluster.token)
        procs = [subprocess.Popen([SUBMIT_CLIENT, str(cluster.port), str(count), json.dumps(body)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for count in counts]
        starts = []
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            if proc.returncode != 0:
                raise RuntimeError(f"submit_client failed: {err.strip()}")
            lines = out.splitlines()
            starts.append(json.loads(lines[0])["start"])
            ids.extend(lines[1:])
        t0 = min(starts)  # the clock starts with the first request, not the client's own start
    else:
        threads = [threading.Thread(target=submitter, args=(count,)) for count in counts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    submitted = time.time()
    # The clock stops when the head counts them all SUCCEEDED (one cheap poll every
    # few ms rather than 2,000 waits, which would load the head being measured).
    deadline = t0 + 600
    while succeeded() < already + jobs:
        if time.time() > deadline:
            raise RuntimeError("throughput jobs did not all succeed within 600 s")
        time.sleep(0.005)
    total = time.time() - t0
    if at_clock_stop:
        at_clock_stop()
    assert len(ids) == jobs, (len(ids), jobs)
    for job_id in ids:  # each one checked, outside the timed span
        job = cluster.wait(job_id, timeout=600)
        assert job["state"] == "SUCCEEDED", job
    return {"n": jobs, "clients": clients, "rate_per_s": jobs / total,
            "submit_rate_per_s": jobs / (submitted - t0), "total_s": total}


def bench_throughput_rounds(cluster, jobs, clients, rounds):
    """bench_throughput `rounds` times, each right after its own spawn-floor measure;
    medians of the rates and of the per-round ratios to the floor."""
    runs = []
    for _ in range(rounds):
        floor_rate = spawn_floor()["rate_per_s"]
        run = bench_throughput(cluster, jobs, clients)
        run["floor_rate_per_s"] = floor_rate
        runs.append(run)
    result = {key: statistics.median(r[key] for r in runs)
              for key in ("rate_per_s", "submit_rate_per_s", "floor_rate_per_s", "total_s")}
    result.update(n=jobs, clients=clients, rounds=rounds,
                  ratio=statistics.median(r["rate_per_s"] / r["floor_rate_per_s"] for r in runs),
                  ratios=[round(r["rate_per_s"] / r["floor_rate_per_s"], 3) for r in runs])
    return result


def bench_ddp(cluster, runs):
    """The example DDP job through `ag submit` vs. the same two ranks launched by hand."""
    script = os.path.join(REPO, "examples", "train.py")
    via_ag, by_hand = [], []
    for _ in range(runs):
        t0 = time.time()
        subprocess.run([AG, "submit", "-n", "2", "--placement", "spread", "--", PYTHON, script],
                       env=cluster.env, capture_output=True, check=True, timeout=300)
        via_ag.append(time.time() - t0)

        port = free_port()
        t0 = time.time()
        procs = []
        for rank, ip in enumerate(("127.0.0.3", "127.0.0.2")):
            env = dict(os.environ, AG_TASK_INDEX=str(rank), AG_WORKER_NUM="2", AG_MASTER_ADDR="127.0.0.3",
                       AG_MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.3",
                       MASTER_PORT=str(port), CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
            procs.append(subprocess.Popen([PYTHON, script], env=env, stdout=subprocess.DEVNULL))
        for p in procs:
            if p.wait(timeout=300) != 0:
                raise RuntimeError("hand-launched rank failed")
        by_hand.append(time.time() - t0)
    ag_s, hand_s = statistics.median(via_ag), statistics.median(by_hand)
    return {"runs": runs, "ag_s": ag_s, "hand_s": hand_s, "ratio": ag_s / hand_s}


def make_working_dir(root, total_mib):
    """A folder of about `total_mib` MiB: 90% in ten large random files, the rest in
    a thousand small source-like text files."""
    import random
    rng = random.Random(7)
    os.makedirs(os.path.join(root, "src"), exist_ok=True)
    large = total_mib * 9 // 10
    for i in range(10):
        with open(os.path.join(root, f"weights_{i}.bin"), "wb") as f:
            f.write(rng.randbytes(large * (1 << 20) // 10))
    small_total = (total_mib - large) << 20
    for i in range(1000):
        words = " ".join(rng.choice(["def", "return", "self", "x", "torch", "tensor", "loss", "=", "(", ")"])
                         for _ in range(small_total // 1000 // 5))
        with open(os.path.join(root, "src", f"module_{i}.py"), "w") as f:
            f.write(words[: small_total // 1000])


def bench_working_dir(cluster, total_mib, rounds):
    """Submit -> both ranks started with a `total_mib` working_dir, first (packed,
    uploaded, downloaded, unpacked) and second (same folder: no upload, cached
    package, unpacked for the new job), through `ag submit` and through the SDK,
    against `tar c DIR | tar x` on the same disk. Each round changes one small file
    (so its first submission is a new package) and measures its own tar baseline;
    medians over the rounds."""
    import aethergrid as ag
    client = ag.Client(f"127.0.0.1:{cluster.port}", token=cluster.token)
    entrypoint = "exec bash -c 'echo $EPOCHREALTIME'"

    def via_cli(src):
        t0 = time.time()
        job_id = subprocess.run([AG, "submit", "--no-wait", "-n", "2", "--placement", "spread", "--working-dir",
                                 src, "--", entrypoint], env=cluster.env,
                                capture_output=True, text=True, check=True, timeout=600).stdout.strip()
        job = cluster.wait(job_id, timeout=600)
        assert job["state"] == "SUCCEEDED", job
        starts = [float(cluster.api("GET", f"/api/jobs/{job_id}/logs?task_index={i}").decode()) for i in range(2)]
        return max(starts) - t0

    def via_sdk(src):
        t0 = time.time()
        job = client.submit_job(entrypoint=entrypoint, num_workers=2, placement="spread",
                                runtime_env={"working_dir": src})
        job.wait(timeout=600)
        starts = [float(job.get_logs(task_index=i)) for i in range(2)]
        return max(starts) - t0

    root = tempfile.mkdtemp(prefix="ag-bench-wd-")
    samples = {key: [] for key in ("tar_s", "first_s", "second_s", "sdk_first_s", "sdk_second_s")}
    try:
        src = os.path.join(root, "code")
        make_working_dir(src, total_mib)
        for r in range(rounds):
            out = os.path.join(root, f"copy{r}")
            os.makedirs(out)
            t0 = time.time()
            subprocess.run(f"tar c -C {src} . | tar x -C {out}", shell=True, check=True)
            samples["tar_s"].append(time.time() - t0)
            shutil.rmtree(out)
            for submit, first, second in ((via_cli, "first_s", "second_s"), (via_sdk, "sdk_first_s", "sdk_second_s")):
                with open(os.path.join(src, "round.txt"), "w") as f:
                    f.write(f"{submit.__name__} {r}\n")
                samples[first].append(submit(src))
                samples[second].append(submit(src))
        result = {key: statistics.median(values) for key, values in samples.items()}
        result.update(mib=total_mib, rounds=rounds, samples=samples)
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench_sdk_roundtrip(cluster, runs):
    """A trivial job's submit + wait through the SDK (in-process) and through the CLI
    (`ag submit`, a new process each time, as users run it)."""
    import aethergrid as ag
    client = ag.Client(f"127.0.0.1:{cluster.port}", token=cluster.token)
    sdk, cli = [], []
    for _ in range(runs):
        t0 = time.time()
        client.submit_job(entrypoint="true").wait(timeout=60)
        sdk.append((time.time() - t0) * 1000)
        t0 = time.time()
        subprocess.run([AG, "submit", "--", "true"], env=cluster.env, capture_output=True, check=True, timeout=60)
        cli.append((time.time() - t0) * 1000)
    return {"runs": runs, "sdk_p50_ms": statistics.median(sdk), "cli_p50_ms": statistics.median(cli)}


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def bench_memory(cluster, jobs):
    """Head resident memory with `jobs` finished jobs in its store, and after a restart."""
    before = rss_kib(cluster.head_pid())
    batch = 500
    for start in range(0, jobs, batch):
        ids = [cluster.api("POST", "/api/jobs", {"entrypoint": "true", "task_options": {"num_cpus": 0.5}})["job_id"]
               for _ in range(min(batch, jobs - start))]
        for job_id in ids:
            cluster.wait(job_id, timeout=600)
    loaded = rss_kib(cluster.head_pid())
    os.kill(cluster.head_pid(), signal.SIGKILL)
    time.sleep(0.5)
    t0 = time.time()
    cluster.start_head()
    restart_s = time.time() - t0
    restarted = rss_kib(cluster.head_pid())
    total = cluster.api("GET", "/api/jobs?limit=1")["total"]
    return {"jobs_in_store": total, "empty_mib": before / 1024, "loaded_mib": loaded / 1024,
            "restarted_mib": restarted / 1024, "restart_s": restart_s}


def timed_calls(cluster, paths, runs):
    """Median and worst wall time (ms) over `runs` of making every call in `paths` one
    after the other on one keep-alive connection: the server time a page's data costs
    (the loopback round trips are included and are tens of microseconds)."""
    totals = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for path in paths:
            cluster.api("GET", path)
        totals.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": statistics.median(totals), "max_ms": max(totals), "calls": len(paths)}


def bench_dashboard(cluster, log_mib, runs=20):
    """What the dashboard's pages fetch when they open, with the jobs of bench_memory in
    the store (10,000 by default), and reads of a `log_mib` MiB task log."""
    jobs = cluster.api("GET", "/api/jobs?limit=1")
    total = jobs["total"]
    newest = jobs["jobs"][0]["job_id"]
    # The workers come back to the restarted head on their own reconnect schedule.
    deadline = time.time() + 60
    while True:
        nodes = [n["node_id"] for n in cluster.api("GET", "/api/nodes")["nodes"] if n["state"] == "ALIVE"]
        if len(nodes) >= 2 or time.time() > deadline:
            break
        time.sleep(0.2)
    if not nodes:
        raise RuntimeError("no worker reconnected to the restarted head within 60 s")
    pages = {
        "cluster overview": ["/api/cluster", "/api/nodes", "/api/jobs?limit=8"] + [f"/api/nodes/{n}" for n in nodes],
        "jobs list, first page": ["/api/cluster", "/api/jobs?limit=50&offset=0"],
        "jobs list, page 100": ["/api/cluster", f"/api/jobs?limit=50&offset={min(total - 1, 99 * 50)}"],
        "jobs list, filtered (FAILED)": ["/api/cluster", "/api/jobs?state=FAILED&limit=50"],
        "job page": [f"/api/jobs/{newest}", f"/api/jobs/{newest}/events",
                     f"/api/jobs/{newest}/logs?task_index=0&tail_bytes=262144"],
        "node page": [f"/api/nodes/{nodes[0]}"],
        "/metrics scrape": ["/metrics"],
    }
    out = {"jobs_in_store": total, "pages": {name: timed_calls(cluster, paths, runs) for name, paths in pages.items()}}
    if log_mib:
        # A task that prints `log_mib` MiB of 100-byte lines.
        job_id = cluster.api("POST", "/api/jobs", {
            "entrypoint": f"head -c {log_mib * 1024 * 1024} /dev/zero | tr '\\0' x | fold -w 99; echo",
            "task_options": {"num_cpus": 0.5}})["job_id"]
        job = cluster.wait(job_id, timeout=600)
        assert job["state"] == "SUCCEEDED", job
        base = f"/api/jobs/{job_id}/logs?task_index=0"
        tail = cluster.api("GET", base + "&tail_bytes=262144")
        assert len(tail) == 262144 and tail.endswith(b"x\n"), "the log holds the task's output"
        out["log"] = {
            "mib": log_mib,
            "tail": timed_calls(cluster, [base + "&tail_bytes=262144"], runs),
            "middle": timed_calls(cluster, [base + f"&offset={log_mib * 512 * 1024}&max_bytes=262144"], runs),
            "job_page": timed_calls(cluster, [f"/api/jobs/{job_id}", f"/api/jobs/{job_id}/events",
                                              base + "&tail_bytes=262144"], runs),
        }
    return out


def report(floor, latency, throughput, ddp, memory, command, working_dir=None, sdk=None, dashboard=None):
    lines = [
        "# Benchmark results",
        "",
        f"Produced by `{command}` on {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores "
        f"(a shared, noisy VM: compare ratios within one run). Cluster: head on 127.0.0.1, "
        f"two workers on 127.0.0.2 and 127.0.0.3, all on this machine.",
        "",
        "| measure | result | baseline in the same run | ratio | target / goal |",
        "| --- | --- | --- | --- | --- |",
    ]
    if latency:
        lines.append(f"| submit → both ranks of a 2-task gang running (n={latency['n']}) | p50 {latency['p50_ms']:.1f} ms, "
                     f"p99 {latency['p99_ms']:.1f} ms | spawn floor p50 {floor['p50_ms']:.2f} ms | "
                     f"{latency['p50_ms'] / floor['p50_ms']:.1f}× | p50 ≤ 20 ms / ≤ 3× floor |")
        task_floor = floor["task_command"]["p50_ms"]
        lines.append(f"| the same, against spawning the task's own command line by hand | p50 {latency['p50_ms']:.1f} ms | "
                     f"`sh -c \"exec bash -c 'echo $EPOCHREALTIME'\"` p50 {task_floor:.2f} ms | "
                     f"{latency['p50_ms'] / task_floor:.1f}× | |")
    for t in throughput:
        who = "one client" if t["clients"] == 1 else f"{t['clients']} concurrent clients"
        lines.append(f"| throughput, {t['n']} one-task `true` jobs back to back, {who} (median of {t['rounds']} rounds, "
                     f"each with its own floor measure; ratios {', '.join(f'{100 * r:.0f}%' for r in t['ratios'])}) | "
                     f"{t['rate_per_s']:.0f} jobs/s (submits accepted at {t['submit_rate_per_s']:.0f}/s) | "
                     f"spawn floor {t['floor_rate_per_s']:.0f}/s | {100 * t['ratio']:.0f}% | ≥ 30% / ≥ 60% |")
    if ddp:
        lines.append(f"| example DDP job (2 ranks, gloo) end to end via `ag submit`, median of {ddp['runs']} | "
                     f"{ddp['ag_s']:.2f} s | launched by hand {ddp['hand_s']:.2f} s | {ddp['ratio']:.2f}× | ≤ 1.3× / ≤ 1.1× |")
    if working_dir:
        wd = working_dir
        lines.append(f"| {wd['mib']} MiB working_dir, 2-task job via `ag submit --working-dir`: submit → both ranks "
                     f"started, first submission (median of {wd['rounds']}) | {wd['first_s']:.2f} s | "
                     f"`tar c DIR \\| tar x` {wd['tar_s']:.2f} s | {wd['first_s'] / wd['tar_s']:.1f}× | ≤ 3× / ≤ 1.5× |")
        lines.append(f"| the same folder again (no upload; package cached on the workers, unpacked for the new job) | "
                     f"{wd['second_s']:.2f} s | `tar c DIR \\| tar x` {wd['tar_s']:.2f} s | "
                     f"{wd['second_s'] / wd['tar_s']:.1f}× | |")
        lines.append(f"| the same through the SDK (`submit_job(runtime_env={{'working_dir': DIR}})`), first / second | "
                     f"{wd['sdk_first_s']:.2f} s / {wd['sdk_second_s']:.2f} s | `tar c DIR \\| tar x` {wd['tar_s']:.2f} s | "
                     f"{wd['sdk_first_s'] / wd['tar_s']:.1f}× / {wd['sdk_second_s'] / wd['tar_s']:.1f}× | ≤ 3× / ≤ 1.5× |")
    if sdk:
        lines.append(f"| trivial job submit + wait, median of {sdk['runs']}: SDK (in-process) | {sdk['sdk_p50_ms']:.1f} ms | "
                     f"`ag submit -- true` {sdk['cli_p50_ms']:.1f} ms | {sdk['sdk_p50_ms'] / sdk['cli_p50_ms']:.2f}× | |")
    if memory:
        lines.append(f"| head RSS with {memory['jobs_in_store']} finished jobs | {memory['loaded_mib']:.1f} MiB; after SIGKILL "
                     f"+ restart {memory['restarted_mib']:.1f} MiB (restart took {memory['restart_s']:.2f} s) | "
                     f"empty head {memory['empty_mib']:.1f} MiB | | |")
    if dashboard:
        for name, t in dashboard["pages"].items():
            lines.append(f"| dashboard data with {dashboard['jobs_in_store']} jobs in the store: {name} "
                         f"({t['calls']} API call{'s' if t['calls'] > 1 else ''}) | p50 {t['p50_ms']:.1f} ms, "
                         f"max {t['max_ms']:.1f} ms | | | ≤ 100 ms |")
        if "log" in dashboard:
            log = dashboard["log"]
            lines.append(f"| {log['mib']} MiB task log: last 256 KiB (`tail_bytes`) / 256 KiB from the middle / "
                         f"its job page's 3 calls | {log['tail']['p50_ms']:.1f} / {log['middle']['p50_ms']:.1f} / "
                         f"{log['job_page']['p50_ms']:.1f} ms (p50) | | | ≤ 100 ms |")
    lines += ["", f"Spawn floor: `build/bin/spawn_floor` — posix_spawn + waitpid of /bin/true in a loop, "
              f"n={floor['n']}: p50 {floor['p50_ms']:.2f} ms, p99 {floor['p99_ms']:.2f} ms, {floor['rate_per_s']:.0f}/s.", "",
              "How each number is taken:",
              "- Start latency: the client's clock before `POST /api/jobs` to the later of the two ranks' "
              "`$EPOCHREALTIME`, printed by `bash` as the task's command (the task runs `sh -c`, which execs bash). "
              "One job at a time; the path includes the SQLite commit (fsync) before the job is acknowledged, "
              "placement, the launch messages, fork/exec on both workers. No step waits for a timer.",
              "- Throughput: 2,000 `POST /api/jobs`, each on a keep-alive connection; the clock stops when the "
              "head's `/api/cluster` counts all of them SUCCEEDED (polled every 5 ms; each job's state is checked "
              "afterwards). jobs/s over the whole span. Each job is durable (SQLite WAL, synchronous=FULL) before "
              "its 201, so one client waits out an fsync per job; with several clients the group-commit writer "
              "puts many jobs in one transaction. Every round measures the spawn floor (500 `posix_spawn` + "
              "`waitpid` of /bin/true) just before it, and the ratio is taken within the round.",
              "- DDP: `ag submit -n 2 --placement spread -- python examples/train.py` (wall time of the CLI, "
              "which streams rank 0's log until the job is SUCCEEDED) against the same two ranks started with "
              "Popen and the same environment. Ranks other than 0 wait for rank 0's store to listen before "
              "`init_process_group` (torch's store client otherwise sleeps 1 s after a refused connection, "
              "which made runs where rank 1 won the race ~0.9 s slower whoever launched them).",
              "- working_dir: a folder of 10 random 9 MiB files and 1,000 small text files; from the client's "
              "clock before `ag submit` (or `submit_job`) to the later rank's `$EPOCHREALTIME`. The first "
              "submission packs, uploads (the head syncs the package to disk before answering), downloads and "
              "unpacks on both workers; the second finds the package on the head and in both workers' caches. "
              "Each round rewrites one small file (so its first submission is a new package) and times its own "
              "`tar c DIR | tar x` into a new folder on the same disk; medians of the rounds.",
              "- Memory: VmRSS of the head after 10,000 one-task jobs finished, then after `kill -9` and "
              "`ag start-head` on the same data dir (it reloads every job and event).",
              "- Dashboard: on the restarted head of the memory measure, each page's API calls (the ones its "
              "JavaScript makes when it opens) one after the other on one keep-alive connection, 20 times; "
              "the sum per page. The log rows read a task log of the given size the way the log viewer does.", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200, help="jobs for the start-latency measure")
    parser.add_argument("--throughput", type=int, default=2000)
    parser.add_argument("--throughput-rounds", type=int, default=3)
    parser.add_argument("--ddp-runs", type=int, default=5)
    parser.add_argument("--memory-jobs", type=int, default=10000)
    parser.add_argument("--dashboard-log-mib", type=int, default=100,
                        help="size of the task log the dashboard measure reads (0: skip); needs --memory-jobs")
    parser.add_argument("--working-dir-mib", type=int, default=100)
    parser.add_argument("--working-dir-rounds", type=int, default=5)
    parser.add_argument("--sdk-runs", type=int, default=30)
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args()
    command = "/usr/bin/python3 bench/run_bench.py " + " ".join(sys.argv[1:])

    floor = spawn_floor()
    floor["task_command"] = spawn_floor(200, ["/bin/sh", "-c", TASK_COMMAND])
    cluster = Cluster().start()
    try:
        latency = bench_start_latency(cluster, args.jobs) if args.jobs else None
        throughput = ([bench_throughput_rounds(cluster, args.throughput, clients, args.throughput_rounds)
                       for clients in (1, 4)] if args.throughput else [])
        ddp = bench_ddp(cluster, args.ddp_runs) if args.ddp_runs else None
        working_dir = (bench_working_dir(cluster, args.working_dir_mib, args.working_dir_rounds)
                       if args.working_dir_mib else None)
        sdk = bench_sdk_roundtrip(cluster, args.sdk_runs) if args.sdk_runs else None
    finally:
        cluster.stop()
    memory = dashboard = None
    if args.memory_jobs:
        cluster = Cluster(num_cpus=8).start()
        try:
            memory = bench_memory(cluster, args.memory_jobs)
            dashboard = bench_dashboard(cluster, args.dashboard_log_mib)
        finally:
            cluster.stop()
    text = report(floor, latency, throughput, ddp, memory, command.strip(), working_dir, sdk, dashboard)
    print(text)
    if args.write:
        # Sections other scripts write (between <!-- name:begin --> markers) are kept.
        path = os.path.join(REPO, "bench", "RESULTS.md")
        old = open(path).read() if os.path.exists(path) else ""
        blocks = [m.group(0) for m in re.finditer(r"<!-- (\w+):begin -->.*?<!-- \1:end -->", old, flags=re.S)]
        with open(path, "w") as f:
            f.write(text.rstrip("\n") + "\n" + "".join("\n" + b + "\n" for b in blocks))


if __name__ == "__main__":
    main()
