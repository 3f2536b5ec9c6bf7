#!/usr/bin/python3
"""What one trivial job costs the machine, by part (issue 31's cost model).

One run on this machine: a head on 127.0.0.1, workers on 127.0.0.2/.3. N one-task
`/bin/true` jobs from one REST client, back to back; per job: the CPU of the head, of each
worker agent, of what the agents reaped (the tasks' supervisors and the tasks), of the
client, and of the whole machine (/proc/stat; its system share is the kernel's), the
bytes the head wrote to storage and its write calls (/proc/PID/io), and the messages
and bytes on the workers' channels by type (the head's /metrics). Then a smaller pass
with strace attached to the head and to one worker: their fsyncs and system calls per
job (strace slows them: only the counts are read). The baseline in the same run is the
spawn floor: posix_spawn + wait of /bin/true (build/bin/spawn_floor), its rate and its
CPU per spawn; and two such spawners side by side, which tells whether this machine's
CPUs start processes independently (a job runs beside others and its daemons).

A job's task runs the program the floor spawns, so that the ratios measure what a job
costs beyond its own process. The same jobs with the entrypoint `true` (dash's builtin:
the task is `/bin/sh -c true`, a dearer process than /bin/true) are measured too, against
the floor of spawning `/bin/sh -c true`.

Before those, a 2-task gang's start (submit -> both ranks' programs running), back to
back and after exponential idle gaps: ranks that run build/bin/start_stamp (it prints the
wall clock as its main begins), then ranks that start bash. Random arrivals are compared
with spawns after the same gaps (spawn_floor --mean-gap-ms): waking an idle CPU costs
the floor too.

With --before, the two builds run in turn, a round each (ABBA..., 4 rounds by default),
each round on its own cluster with a share of the jobs: a machine whose speed drifts
moves both alike. Each figure is the median of the rounds'.

    /usr/bin/python3 bench/job_cost_bench.py [--jobs 1000] [--traced-jobs 200] [--latency-jobs 200]
        [--mean-gap-ms 300] [--before AG --before-label COMMIT [--rounds 4]] [--write]
"""
import argparse
import datetime
import glob
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402

BEGIN, END = "<!-- job-cost:begin -->", "<!-- job-cost:end -->"
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def process_cpu(pid):
    """(own, reaped children's) CPU of `pid`, in ms."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_MS, (int(fields[13]) + int(fields[14])) * TICK_MS


def machine_cpu():
    """(busy, system) CPU of the whole machine, in ms: all but idle and iowait; kernel."""
    values = list(map(int, open("/proc/stat").readline().split()[1:]))
    return (sum(values) - values[3] - values[4]) * TICK_MS, (values[2] + values[5] + values[6]) * TICK_MS


def supervisors(agent_pids):
    """The task supervisors (`ag-supervisor`) the agents started: they start and reap the tasks."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            text = open(stat).read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        if name == "ag-supervisor" and ppid in agent_pids:
            found.append(int(stat.split("/")[2]))
    return found


def process_io(pid):
    io = dict(line.split(": ") for line in open(f"/proc/{pid}/io").read().splitlines())
    return int(io["write_bytes"]), int(io["syscw"])


def channel_counts(cluster):
    """The head's counts of what crossed the workers' channels ({(family, direction, type): n},
    family "messages" or "bytes"); empty for a build without them."""
    text = cluster.api("GET", "/metrics")
    text = text.decode() if isinstance(text, bytes) else str(text)
    counts = {}
    for m in re.finditer(r'^ag_worker_channel_(messages|bytes)_total\{direction="(\w+)",type="(\w+)"\} (\d+)$', text,
                         re.MULTILINE):
        counts[(m[1], m[2], m[3])] = int(m[4])
    return counts


def spawn_floor_cpu(n=500, command=None):
    """The floor's rate and the CPU one spawn + wait of /bin/true (or `command`) costs
    (the spawner's own CPU and its reaped child's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    floor = run_bench.spawn_floor(n, command)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_ms = ((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)) * 1000 / n
    return floor, cpu_ms


def spawn_floor_side_by_side(n=400, spawners=2):
    """Two floors at once, one per vCPU: their rate together and the machine's CPU per
    spawn. A machine whose CPUs start processes independently doubles the rate at the
    same CPU per spawn; one whose CPUs share what a process start needs (a host that
    serialises page-table work) does not, and every job beside another pays for it."""
    busy = machine_cpu()[0]
    start = time.time()
    spawners = [subprocess.Popen([run_bench.SPAWN_FLOOR, str(n)], stdout=subprocess.DEVNULL)
                for _ in range(spawners)]
    for spawner in spawners:
        if spawner.wait() != 0:
            raise RuntimeError("spawn_floor failed")
    total = n * len(spawners)
    return {"rate_per_s": total / (time.time() - start), "cpu_ms": (machine_cpu()[0] - busy) / total}


def traced_counts(cluster, pid, jobs, calls=None):
    """System calls of `pid` (all its threads) while `jobs` trivial jobs run: {name: count}."""
    out = os.path.join(cluster.session, f"strace-{pid}.txt")
    argv = ["strace", "-f", "-c", "-o", out, "-p", str(pid)] + (["-e", "trace=" + ",".join(calls)] if calls else [])
    tracer = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached to every thread
    return tracer, out


def read_strace(out):
    counts = {}
    for line in open(out).read().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0].replace(".", "").isdigit() and parts[-1] not in ("total",):
            try:
                counts[parts[-1]] = int(parts[3])
            except ValueError:
                pass
    return counts


def combine(rounds):
    """One result from several rounds' of the same build: the median of each figure (the
    counts of jobs added up), so that a round the machine ran slow moves nothing much."""
    first = rounds[0]
    if isinstance(first, dict):
        def one(key):
            values = [r[key] for r in rounds]
            if key in ("n", "jobs", "traced_jobs", "latency_jobs"):
                return sum(values)
            if key == "mean_gap_ms":
                return values[0]  # a setting, the same in every round
            return combine(values)
        return {key: one(key) for key in first if all(key in r for r in rounds)}
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return statistics.median(rounds)
    return first


def run_alternating(builds, rounds, jobs, traced_jobs, latency_jobs, mean_gap_ms):
    """Each build measured `rounds` times, in turn (ABBA...), each round a share of the
    jobs on a cluster of its own: on a machine whose speed drifts, both builds see the
    same drift. {label: combined result}."""
    results = {label: [] for label, _ in builds}
    this_build = run_bench.AG
    try:
        for i in range(rounds):
            for label, ag in (builds if i % 2 == 0 else builds[::-1]):
                run_bench.AG = ag
                print(f"round {i + 1}/{rounds}: {label}", file=sys.stderr, flush=True)
                results[label].append(run(max(1, jobs // rounds), max(1, traced_jobs // rounds),
                                          max(1, latency_jobs // rounds), mean_gap_ms,
                                          packed_jobs=max(10, 40 // rounds)))
    finally:
        run_bench.AG = this_build
    return {label: combine(r) for label, r in results.items()}


def run(jobs, traced_jobs, latency_jobs, mean_gap_ms, packed_jobs=40):
    stamp = run_bench.StartStamp()
    try:
        r = run_costs(jobs, traced_jobs, latency_jobs, mean_gap_ms, stamp)
        r["packed"] = run_packed(packed_jobs, stamp)
        return r
    finally:
        stamp.close()


def run_packed(jobs, stamp):
    """Gangs of 1, 2, 4 and 8 ranks packed on one node (8 CPUs each, so that 8 fit),
    back to back: {ranks: latency}."""
    cluster = run_bench.Cluster(num_cpus=8).start()
    try:
        run_bench.bench_start_latency(cluster, 10, command=stamp.path, placement="pack")  # warm up
        return {n: run_bench.bench_start_latency(cluster, jobs, command=stamp.path, ranks=n, placement="pack")
                for n in (1, 2, 4, 8)}
    finally:
        cluster.stop()


TRIVIAL = "/bin/true"  # what a trivial job runs: the floor's own program
SHELL_TRUE = ["/bin/sh", "-c", "true"]  # the task of a job whose entrypoint is `true`


def measure_throughput(cluster, pids, jobs, native, entrypoint=TRIVIAL):
    """`jobs` trivial jobs from one client, back to back: the rate, and per job the CPU of
    each process, the machine's, the head's writes and the worker channel's traffic."""
    head = pids["head"]

    def snapshot():
        """What every process has used so far (this one and its clients last)."""
        return ({name: process_cpu(pid) for name, pid in pids.items()}, machine_cpu(), process_io(head),
                resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))

    channel0 = channel_counts(cluster)
    cpu0, (busy0, system0), io0, self0, children0 = snapshot()
    # Read as the clock stops: the benchmark's check of each job afterwards (a request
    # per job) is no part of what the jobs cost.
    at_stop = []
    result = run_bench.bench_throughput(cluster, jobs, 1, at_clock_stop=lambda: at_stop.append(snapshot()),
                                        native=native, entrypoint=entrypoint)
    cpu1, (busy1, system1), io1, self1, children1 = at_stop[0]
    channel1 = channel_counts(cluster)
    per = lambda v: v / jobs  # noqa: E731
    used = lambda a, b: (b.ru_utime + b.ru_stime) - (a.ru_utime + a.ru_stime)  # noqa: E731
    workers = [n for n in pids if n.startswith("worker-")]
    sups = [n for n in pids if n.startswith("supervisor-")]
    return {
        "rate": result["rate_per_s"],
        "head_ms": per(cpu1["head"][0] - cpu0["head"][0]),
        "agents_ms": per(sum(cpu1[n][0] - cpu0[n][0] for n in workers)),
        "supervisors_ms": per(sum(cpu1[n][0] - cpu0[n][0] for n in sups)),
        "tasks_ms": per(sum(cpu1[n][1] - cpu0[n][1] for n in sups + workers)),
        # This process (its polls, and for http.client the submits) and its submit_client.
        "client_ms": per((used(self0, self1) + used(children0, children1)) * 1000),
        "machine_ms": per(busy1 - busy0),
        "kernel_ms": per(system1 - system0),
        "head_write_bytes": per(io1[0] - io0[0]),
        "head_write_calls": per(io1[1] - io0[1]),
        "channel": {key: per(channel1[key] - channel0.get(key, 0)) for key in channel1},
    }


def run_costs(jobs, traced_jobs, latency_jobs, mean_gap_ms, stamp):
    cluster = run_bench.Cluster().start()
    try:
        pids = {os.path.basename(f)[:-4]: int(open(f).read()) for f in glob.glob(cluster.session + "/daemons/*.pid")}
        head = pids["head"]
        run_bench.bench_throughput(cluster, 200, 1, entrypoint=TRIVIAL)  # warm up
        r = {"jobs": jobs}
        r["floor"], r["floor_cpu_ms"] = spawn_floor_cpu()
        r["shell_floor"], r["shell_floor_cpu_ms"] = spawn_floor_cpu(command=SHELL_TRUE)
        r["floor_pair"] = spawn_floor_side_by_side()
        # The gang's own command, spawned directly: what a rank's start costs without us.
        r["command_floor"] = run_bench.spawn_floor(300, ["/bin/sh", "-c", run_bench.TASK_COMMAND])
        r["stamp_floor"] = run_bench.spawn_floor(300, [stamp.path])
        # A 2-rank gang's own floor: two processes started at once, by a spawner each.
        r["gang_floor"] = run_bench.spawn_floor(300, ranks=2)
        r["stamp_gang_floor"] = run_bench.spawn_floor(300, [stamp.path], ranks=2)
        # The floor from idle: each spawn after the same random gaps as the gangs below.
        r["floor_random"] = run_bench.spawn_floor(latency_jobs, mean_gap_ms=mean_gap_ms)
        # Gang start (submit -> both ranks running), back to back and at random arrivals:
        # ranks that print the time as their program starts, then ranks that start bash.
        r["latency_jobs"], r["mean_gap_ms"] = latency_jobs, mean_gap_ms
        r["start_back_to_back"] = run_bench.bench_start_latency(cluster, latency_jobs, command=stamp.path)
        r["start_random"] = run_bench.bench_start_latency(cluster, latency_jobs, mean_gap_ms / 1000,
                                                          command=stamp.path)
        r["bash_back_to_back"] = run_bench.bench_start_latency(cluster, latency_jobs)
        r["bash_random"] = run_bench.bench_start_latency(cluster, latency_jobs, mean_gap_ms / 1000)
        for pid in supervisors({pid for name, pid in pids.items() if name != "head"}):
            pids[f"supervisor-{pid}"] = pid
        # The jobs from a client in C++ (what the jobs cost the head and workers, beside a
        # client as lean as the floor's own loop), the same with the shell's `true`, then
        # from Python's http.client.
        r.update(measure_throughput(cluster, pids, jobs, native=True))
        r["shell"] = measure_throughput(cluster, pids, jobs, native=True, entrypoint="true")
        r["python"] = measure_throughput(cluster, pids, jobs, native=False)
        workers = [n for n in pids if n.startswith("worker-")]
        # Counts with strace attached (slow; counts only).
        if shutil.which("strace"):
            head_tracer, head_out = traced_counts(cluster, head, traced_jobs, ["fsync", "fdatasync", "sync_file_range"])
            # Every agent: the scheduler may pack the jobs onto one of them.
            agent_traces = [traced_counts(cluster, pids[name], traced_jobs) for name in workers]
            run_bench.bench_throughput(cluster, traced_jobs, 1, entrypoint=TRIVIAL)
            for tracer in [head_tracer] + [t for t, _ in agent_traces]:
                tracer.send_signal(signal.SIGINT)
                tracer.wait(30)
            head_calls = read_strace(head_out)
            worker_calls = {}
            for _, out in agent_traces:
                for name, count in read_strace(out).items():
                    worker_calls[name] = worker_calls.get(name, 0) + count
            r["traced_jobs"] = traced_jobs
            r["fsyncs"] = sum(head_calls.values()) / traced_jobs
            r["worker_syscalls"] = sum(worker_calls.values()) / traced_jobs
            r["worker_top"] = sorted(worker_calls.items(), key=lambda kv: -kv[1])[:6]
        return r
    finally:
        cluster.stop()


def rows(r):
    """(measure, result, baseline in the same run, ratio, target) for one build's results."""
    floor_rate, floor_cpu = r["floor"]["rate_per_s"], r["floor_cpu_ms"]
    floor_p50 = r["floor"]["p50_ms"]
    floor_idle = r["floor_random"]["p50_ms"]
    gap = r["mean_gap_ms"]
    out = []
    for key, ranks in (("start", "ranks that print the time as their program starts (`start_stamp`)"),
                       ("bash", "ranks that start bash (`{}`)".format(run_bench.START_COMMAND))):
        back, rand = r[f"{key}_back_to_back"], r[f"{key}_random"]
        target = "≤ 3×" if key == "start" else ""
        out += [
            (f"2-task gang, submit to both {ranks} running, back to back (n={r['latency_jobs']}): p50 / p99",
             f"{back['p50_ms']:.1f} / {back['p99_ms']:.1f} ms", f"spawn floor p50 {floor_p50:.2f} ms",
             f"{back['p50_ms'] / floor_p50:.1f}×", target),
            (f"… at random arrivals (exponential gaps, mean {gap} ms): p50 / p99",
             f"{rand['p50_ms']:.1f} / {rand['p99_ms']:.1f} ms",
             f"spawn floor after the same gaps p50 {floor_idle:.2f} ms",
             f"{rand['p50_ms'] / floor_idle:.1f}× ({rand['p50_ms'] / floor_p50:.1f}× the back-to-back floor)", target),
        ]
    out += [
        ("… the ranks' own commands, spawned and waited for directly: p50 `start_stamp` / "
         "`sh -c \"{}\"`".format(run_bench.TASK_COMMAND),
         f"{r['stamp_floor']['p50_ms']:.2f} / {r['command_floor']['p50_ms']:.2f} ms", "", "", ""),
    ]
    if "stamp_gang_floor" in r:
        gang_floor = r["stamp_gang_floor"]["p50_ms"]
        out.append(
            ("… a 2-rank gang's own floor: two processes started at once by a spawner each (as two supervisors "
             "do), until both have exited: p50 `/bin/true` / `start_stamp`; the `start_stamp` gang's start "
             "back to back against it",
             f"{r['gang_floor']['p50_ms']:.2f} / {gang_floor:.2f} ms", f"spawn floor p50 {floor_p50:.2f} ms",
             f"{r['gang_floor']['p50_ms'] / floor_p50:.1f}× / {gang_floor / floor_p50:.1f}×; gang "
             f"{r['start_back_to_back']['p50_ms'] / gang_floor:.1f}×", ""))
    out += [
        ("trivial jobs (`/bin/true`) from one client (`submit_client`, C++), back to back (n={})".format(r["jobs"]),
         f"{r['rate']:.0f} jobs/s",
         f"spawn floor {floor_rate:.0f}/s", f"{r['rate'] / floor_rate:.0%}", "≥ 60%"),
        ("machine CPU per job (all processes, kernel included)", f"{r['machine_ms']:.2f} ms",
         f"floor {floor_cpu:.2f} ms per spawn", f"{r['machine_ms'] / floor_cpu:.1f}×", "≤ 3×"),
        ("… of which the kernel (system time, all processes)", f"{r['kernel_ms']:.2f} ms", "", "", ""),
        ("… the head", f"{r['head_ms']:.2f} ms", "", "", ""),
        ("… the worker agents", f"{r['agents_ms']:.2f} ms", "", "", ""),
        ("… the task supervisors", f"{r['supervisors_ms']:.2f} ms", "", "", ""),
        ("… the tasks themselves (`/bin/true`, reaped by the supervisors)", f"{r['tasks_ms']:.2f} ms", "", "", ""),
        ("… the REST client (`submit_client`, and this benchmark's polls)", f"{r['client_ms']:.2f} ms", "", "", ""),
        ("the spawn floor on both vCPUs at once (two spawners side by side): their rate together / machine "
         "CPU per spawn; this build's one-client rate and CPU per job against it",
         f"{r['floor_pair']['rate_per_s']:.0f}/s / {r['floor_pair']['cpu_ms']:.2f} ms", "",
         f"{r['rate'] / r['floor_pair']['rate_per_s']:.0%} / {r['machine_ms'] / r['floor_pair']['cpu_ms']:.1f}×", ""),
        ("head: bytes written to storage / write calls per job",
         f"{r['head_write_bytes'] / 1024:.1f} KiB / {r['head_write_calls']:.1f}", "", "", ""),
    ]
    if "shell" in r:
        sh, sh_rate, sh_cpu = r["shell"], r["shell_floor"]["rate_per_s"], r["shell_floor_cpu_ms"]
        out += [("the same jobs with the entrypoint `true` (the task runs `/bin/sh -c true`): rate / machine CPU "
                 "per job / of which the tasks", f"{sh['rate']:.0f} jobs/s / {sh['machine_ms']:.2f} ms / "
                 f"{sh['tasks_ms']:.2f} ms", f"floor of `/bin/sh -c true` {sh_rate:.0f}/s, {sh_cpu:.2f} ms per spawn",
                 f"{sh['rate'] / sh_rate:.0%} / {sh['machine_ms'] / sh_cpu:.1f}×", ""),
                ("… against the floor of `/bin/true`", "", "",
                 f"{sh['rate'] / floor_rate:.0%} / {sh['machine_ms'] / floor_cpu:.1f}×", "")]
    if "python" in r:
        py = r["python"]
        out.append(("the same jobs from Python's `http.client` (one thread): rate / machine CPU per job / "
                    "of which the client", f"{py['rate']:.0f} jobs/s / {py['machine_ms']:.2f} ms / "
                    f"{py['client_ms']:.2f} ms", "",
                    f"{py['rate'] / floor_rate:.0%} / {py['machine_ms'] / floor_cpu:.1f}×", ""))
    channel = r.get("channel") or {}
    for direction, words in (("to_worker", "head to workers"), ("from_worker", "workers to head")):
        kinds = sorted(((t, n) for (f, d, t), n in channel.items() if f == "messages" and d == direction and n >= 0.005),
                       key=lambda kv: -kv[1])
        messages = sum(n for _, n in kinds)
        size = sum(n for (f, d, _), n in channel.items() if f == "bytes" and d == direction)
        which = ", ".join(f"{t} {n:.2f}" for t, n in kinds)
        out.append((f"worker channel, {words}: messages / bytes per job" + (f" ({which})" if which else ""),
                    f"{messages:.2f} / {size:.0f} B" if channel else "not counted by this build", "", "", ""))
    if "packed" in r:
        sizes = sorted(r["packed"])
        out.append(("gang of 1 / 2 / 4 / 8 `start_stamp` ranks packed on one node, back to back "
                    f"(n={r['packed'][sizes[0]]['n']} each): p50",
                    " / ".join(f"{r['packed'][n]['p50_ms']:.1f}" for n in sizes) + " ms", "", "", ""))
    if "fsyncs" in r:
        top = ", ".join(f"{name} {count}" for name, count in r["worker_top"])
        out += [("head: fsyncs per job (strace)", f"{r['fsyncs']:.2f}", "", "", ""),
                (f"worker agents: system calls per job (strace; the most frequent over {r['traced_jobs']} "
                 "jobs: " + top + ")", f"{r['worker_syscalls']:.0f}", "", "", "")]
    return out


def report(r, command, before=None, before_label=""):
    today = datetime.date.today().isoformat()
    lines = [BEGIN, "## What one trivial job costs (issue 31)", "",
             f"`{command}` on {today}, 2 cores. A head on 127.0.0.1, workers on 127.0.0.2 and 127.0.0.3; "
             "one-task `/bin/true` jobs (the floor's program) from one client; CPU from /proc (a process's own "
             "and what it reaped).", ""]
    if before is None:
        lines += ["| measure | result | baseline in the same run | ratio | target |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows(r)]
    else:
        lines += [f"The build before ({before_label}) and this one ran in turn, {r['rounds']} rounds each (ABBA...), "
                  "each round on a cluster of its own with a share of the jobs and its own spawn floor; each figure "
                  "is the median of the rounds'.", "",
                  "| measure | before: result | ratio | this build: result | baseline | ratio | target |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        old = rows(before)
        for i, (a, b, c, d, e) in enumerate(rows(r)):
            was = old[i] if i < len(old) else (a, "", "", "", "")
            lines.append(f"| {a} | {was[1]} | {was[3]} | {b} | {c} | {d} | {e} |")
    floor_p50 = r["floor"]["p50_ms"]
    lines += ["", "A gang has started when both ranks' programs run: the ranks of the first two rows are a "
              "program that prints the wall clock as it starts (`bench/start_stamp.cc`, linked like any user "
              f"program). Ranks that start bash take {r['command_floor']['p50_ms'] / floor_p50:.1f}× the spawn floor "
              "by themselves before they print, however little the rest costs. A start at random arrivals wakes "
              "idle CPUs, as a spawn after the same idle gaps does: its ratio is against that floor (and, in "
              "brackets, against the back-to-back floor)."]
    if "stamp_gang_floor" in r:
        pair = r["gang_floor"]["p50_ms"] / floor_p50
        lines[-1] += (f" Two processes started at once by two spawners take {pair:.1f}× one on this machine, "
                      "with a vCPU each to run on: that is a 2-rank gang's own floor before anything of ours runs.")
    lines += ["", "The parts do not add up to the machine's total: the kernel's work for the network, the disk "
              "and processes that exit is charged partly to no process. This is the model later changes are "
              "judged by, each against the build before it in the same run.", "", END, ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--traced-jobs", type=int, default=200)
    parser.add_argument("--latency-jobs", type=int, default=200, help="gangs for each start-latency measure")
    parser.add_argument("--mean-gap-ms", type=int, default=300, help="mean idle gap before each random arrival")
    parser.add_argument("--before", metavar="AG", help="the `ag` of the build before, measured in the same run")
    parser.add_argument("--before-label", default="", help="what that build is (a commit), for the table")
    parser.add_argument("--rounds", type=int, default=None,
                        help="with --before: rounds, the builds in turn (default 4); the jobs are shared out")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if not os.path.exists(run_bench.AG):
        sys.exit(f"error: {run_bench.AG} not found; build first (scripts/build.sh) or set AG_BIN")
    before = None
    rounds = args.rounds or (4 if args.before else 1)
    if args.before:
        both = run_alternating([("before", args.before), ("this", run_bench.AG)], rounds, args.jobs,
                               args.traced_jobs, args.latency_jobs, args.mean_gap_ms)
        before, r = both["before"], both["this"]
    elif rounds > 1:
        r = run_alternating([("this", run_bench.AG)], rounds, args.jobs, args.traced_jobs, args.latency_jobs,
                            args.mean_gap_ms)["this"]
    else:
        r = run(args.jobs, args.traced_jobs, args.latency_jobs, args.mean_gap_ms)
    r["rounds"] = rounds
    command = ("/usr/bin/python3 bench/job_cost_bench.py " + " ".join(sys.argv[1:])).strip()
    text = report(r, command, before, args.before_label or args.before or "")
    print(text)
    if args.write:
        run_bench.write_results_section(text, BEGIN, END)


if __name__ == "__main__":
    main()
