#!/usr/bin/python3
"""Where a gang's start goes, over many gangs: the steps from the client's submit to
each rank's exec, as medians and p90s. A light trace (the head's fdatasync, the launch
frames' system calls, the ranks' execs: a few events per step, not every one), so
that the gangs run at close to their untraced speed; bench/gang_timeline.py traces one
gang in full.

Starts a cluster as bench/run_bench.py does (AG_BIN picks the `ag`), warms it up with
30 gangs, then traces --gangs gangs of 2 ranks spread over the two workers (or --ranks
N, --packed on one node) that run build/bin/start_stamp. Needs root and tracefs.

    sudo /usr/bin/python3 bench/gang_phases.py [--gangs 80] [--ranks 2] [--packed]
"""
import argparse
import collections
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gang_timeline import TRACING, write  # noqa: E402

EVENTS = ("syscalls/sys_enter_fdatasync", "syscalls/sys_exit_fdatasync", "syscalls/sys_enter_sendmsg",
          "syscalls/sys_exit_recvmsg", "syscalls/sys_enter_execve", "sched/sched_process_exec",
          "sched/sched_process_fork", "syscalls/sys_enter_write")
LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\].{4,6}\s+([\d.]+): (\w+):? ?(.*)$")
# A launch frame is a few hundred bytes; what else an agent receives while a gang
# starts (acknowledgements) is smaller.
LAUNCH_BYTES = 300


def threads_of(pid):
    return {int(t) for t in os.listdir(f"/proc/{pid}/task")}


def children_of(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def trace_gangs(cluster, stamp, gangs, ranks, placement):
    write("tracing_on", "0")
    write("trace", "")
    write("buffer_size_kb", "30000")
    for event in EVENTS:
        write(f"events/{event}/enable", "1")
    latencies = []
    with open(TRACING + "trace_marker", "w") as marker:
        write("tracing_on", "1")
        for i in range(gangs):
            marker.write(f"submit {i}\n")
            marker.flush()
            t0 = time.time()
            job_id = cluster.api("POST", "/api/jobs", {"entrypoint": stamp.path, "num_workers": ranks,
                                                       "placement": placement, "task_options": {"num_cpus": 1}})["job_id"]
            job = cluster.wait(job_id)
            assert job["state"] == "SUCCEEDED", job
            starts = [float(cluster.api("GET", f"/api/jobs/{job_id}/logs?task_index={k}").decode())
                      for k in range(ranks)]
            latencies.append((max(starts) - t0) * 1000)
        write("tracing_on", "0")
    for event in EVENTS:
        write(f"events/{event}/enable", "0")
    with open(TRACING + "trace") as f:
        return f.read(), latencies


def parse(text):
    """[(gang's events: [(ms since its submit, tid, event, detail)])], {child pid: parent pid}"""
    gangs, parent, current = [], {}, None
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        _, tid, _, ts, event, rest = m.groups()
        ms, tid = float(ts) * 1000, int(tid)
        if event == "tracing_mark_write":
            current = (ms, [])
            gangs.append(current)
        elif event == "sched_process_fork":
            fork = re.search(r" pid=(\d+).*child_pid=(\d+)", rest)
            parent[int(fork.group(2))] = int(fork.group(1))
        elif current is not None:
            if event.startswith("sys_"):  # sys_NAME(args) on entry, sys_NAME -> value on exit
                event = ("exit_" if rest.startswith("->") else "enter_") + event[4:]
            current[1].append((ms - current[0], tid, event, rest))
    return [events for _, events in gangs], parent


def returned(detail):
    value = int(detail.split("->")[1].strip(), 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def phases(events, parent, head, agents, supervisors):
    """{step: ms} for one gang, or None where a step is missing from its trace."""
    def first(pred, after):
        return next((e for e in events if e[0] >= after and pred(e)), None)

    fsync = first(lambda e: e[1] in head and e[2] == "enter_fdatasync", 0)
    if fsync is None:
        return None
    synced = first(lambda e: e[1] == fsync[1] and e[2] == "exit_fdatasync", fsync[0])
    if synced is None:
        return None
    ranks = []
    for agent in agents:
        # Each launch the agent received, in order, and what it led to.
        after = synced[0]
        for received in [e for e in events if e[1] == agent and e[2] == "exit_recvmsg" and e[0] > after and
                         returned(e[3]) >= LAUNCH_BYTES]:
            sent = first(lambda e: e[1] == agent and e[2] == "enter_sendmsg", received[0])
            taken = sent and first(lambda e: e[1] in supervisors.get(agent, ()) and e[2] == "exit_recvmsg", sent[0])
            execve = taken and first(lambda e: e[2] == "enter_execve" and parent.get(e[1]) == taken[1], taken[0])
            done = execve and first(lambda e: e[1] == execve[1] and e[2] == "sched_process_exec", execve[0])
            wrote = done and first(lambda e: e[1] == execve[1] and e[2] == "enter_write", done[0])
            if not wrote:
                return None
            ranks.append((received[0], sent[0], taken[0], execve[0], done[0], wrote[0]))
    if not ranks:
        return None
    ranks.sort(key=lambda r: r[5])
    out = {"submit -> the head's fdatasync": fsync[0], "the head's fdatasync": synced[0] - fsync[0],
           "fdatasync -> first launch at an agent": min(r[0] for r in ranks) - synced[0],
           "fdatasync -> last launch at an agent": max(r[0] for r in ranks) - synced[0]}
    for name, rank in (("first", ranks[0]), ("last", ranks[-1])):
        received, sent, taken, execve, done, wrote = rank
        out[f"{name} rank: agent, launch -> frame to its supervisor"] = sent - received
        out[f"{name} rank: frame -> the supervisor has it"] = taken - sent
        out[f"{name} rank: supervisor -> the rank's execve"] = execve - taken
        out[f"{name} rank: execve -> the new program"] = done - execve
        out[f"{name} rank: the new program -> its first write"] = wrote - done
        out[f"{name} rank: submit -> its first write"] = wrote
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gangs", type=int, default=80)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--packed", action="store_true", help="every rank on one node")
    args = parser.parse_args()
    import run_bench
    if not os.path.exists(TRACING + "trace"):
        import subprocess
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACING], check=True)
    stamp = run_bench.StartStamp()
    cluster = run_bench.Cluster(num_cpus=8).start() if args.packed else run_bench.Cluster().start()
    placement = "pack" if args.packed else "spread"
    try:
        run_bench.bench_start_latency(cluster, 30, command=stamp.path, ranks=args.ranks, placement=placement)
        head = threads_of(cluster.head_pid())
        agents = [cluster.worker_pid(ip) for ip in ("127.0.0.2", "127.0.0.3")]
        supervisors = {a: set(p for s in children_of(a) for p in threads_of(s)) for a in agents}
        text, latencies = trace_gangs(cluster, stamp, args.gangs, args.ranks, placement)
    finally:
        cluster.stop()
        stamp.close()
    gangs, parent = parse(text)
    steps = collections.defaultdict(list)
    for events in gangs:
        found = phases(events, parent, head, agents, supervisors)
        for step, ms in (found or {}).items():
            steps[step].append(ms)
    print(f"{len(latencies)} gangs of {args.ranks} ranks ({placement}), traced lightly: submit -> every rank "
          f"running (start_stamp's own clock) p50 {statistics.median(latencies):.2f} ms, "
          f"p90 {run_bench.percentile(latencies, 90):.2f} ms")
    traced = len(steps.get("the head's fdatasync", []))
    print(f"steps, in ms (from the {traced} gangs whose every step was traced):")
    for step, values in steps.items():
        print(f"  {step:58s} p50 {statistics.median(values):6.2f}  p90 {run_bench.percentile(values, 90):6.2f}")


if __name__ == "__main__":
    main()
