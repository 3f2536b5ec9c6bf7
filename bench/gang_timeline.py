#!/usr/bin/python3
"""One gang's start (2 tasks, or --ranks N, --packed on one node), traced with ftrace: where the time between submit and the
ranks' exec goes (system calls, scheduling, page faults of every process involved).

Starts a cluster as bench/run_bench.py does (AG_BIN picks the `ag`), warms it up with
30 gangs, then traces one whose ranks run build/bin/start_stamp. Prints one line per
event, in ms from the client's submit, then a summary: the head's fdatasyncs, the ranks'
execs, and page faults by process. Needs root and tracefs (mounted if missing).

    sudo /usr/bin/python3 bench/gang_timeline.py [--ranks 2] [--packed] > timeline.txt
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TRACING = "/sys/kernel/tracing/"
EVENTS = ("sched/sched_switch", "sched/sched_wakeup", "sched/sched_process_exec", "sched/sched_process_fork",
          "exceptions/page_fault_user", "exceptions/page_fault_kernel", "raw_syscalls/sys_enter",
          "raw_syscalls/sys_exit")
# x86_64 numbers of the calls a launch makes (others print as their number).
SYSCALLS = {0: "read", 1: "write", 3: "close", 7: "poll", 9: "mmap", 10: "mprotect", 12: "brk", 13: "sigaction",
            14: "sigprocmask", 17: "pread", 18: "pwrite", 20: "writev", 33: "dup2", 44: "sendto", 45: "recvfrom",
            46: "sendmsg", 47: "recvmsg", 53: "socketpair", 56: "clone", 57: "fork", 59: "execve", 61: "wait4",
            62: "kill", 72: "fcntl", 74: "fsync", 75: "fdatasync", 80: "chdir", 82: "rename", 83: "mkdir",
            84: "rmdir", 87: "unlink", 90: "chmod", 94: "lchown", 105: "setuid", 106: "setgid", 109: "setpgid",
            112: "setsid", 116: "setgroups", 157: "prctl", 202: "futex", 217: "getdents64", 232: "epoll_wait",
            233: "epoll_ctl", 254: "inotify_add_watch", 257: "openat", 262: "newfstatat", 263: "unlinkat",
            271: "ppoll", 281: "epoll_pwait", 286: "timerfd_settime", 288: "accept4", 318: "getrandom",
            435: "clone3", 436: "close_range"}
LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\].{4,6}\s+([\d.]+): (\w+): (.*)$")


def write(path, value):
    with open(TRACING + path, "w") as f:
        f.write(value)


def trace_one_gang(ranks=2, packed=False):
    import run_bench
    if not os.path.exists(TRACING + "trace"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACING], check=True)
    stamp = run_bench.StartStamp()
    # Packed: every rank on one node (8 CPUs each, so that 8 fit).
    cluster = run_bench.Cluster(num_cpus=8).start() if packed else run_bench.Cluster().start()
    shape = {"ranks": ranks, "placement": "pack"} if packed else {"ranks": ranks}
    try:
        run_bench.bench_start_latency(cluster, 30, command=stamp.path, **shape)  # warm up
        write("tracing_on", "0")
        write("trace", "")
        write("buffer_size_kb", "30000")
        for event in EVENTS:
            write(f"events/{event}/enable", "1")
        time.sleep(0.2)
        write("tracing_on", "1")
        latency = run_bench.bench_start_latency(cluster, 1, command=stamp.path, **shape)["p50_ms"]
        write("tracing_on", "0")
        for event in EVENTS:
            write(f"events/{event}/enable", "0")
        with open(TRACING + "trace") as f:
            return f.read(), latency
    finally:
        cluster.stop()
        stamp.close()


def timeline(text):
    """[(ms since the client's submit, cpu, process, event, detail)]"""
    t0, out = None, []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, cpu, ts, event, rest = m.groups()
        ts = float(ts)
        if event in ("sys_enter", "sys_exit"):
            nr = int(re.search(r"NR (-?\d+)", rest).group(1))
            name = SYSCALLS.get(nr, str(nr))
            if t0 is None and comm.startswith("python") and event == "sys_enter" and name in ("sendto", "write"):
                t0 = ts  # the submit leaves the client
            rest = name + ("(" if event == "sys_enter" else " -> " + rest.split("=")[-1].strip())
        if t0 is None:
            continue
        if comm.startswith(("<idle>", "kworker", "rcu", "migration")) and event != "sched_switch":
            continue
        out.append(((ts - t0) * 1000, cpu, f"{comm}-{pid}", event, rest))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--packed", action="store_true", help="every rank on one node")
    args = parser.parse_args()
    text, latency = trace_one_gang(args.ranks, args.packed)
    events = timeline(text)
    for ms, cpu, who, event, detail in events:
        print(f"{ms:8.3f} cpu{cpu} {who} {event} {detail[:110]}")
    faults = collections.Counter(who for _, _, who, event, _ in events if event.startswith("page_fault"))
    print(f"\nsubmit to every rank running: {latency:.2f} ms (traced, so slower than untraced)")
    for ms, _, who, event, detail in events:
        if detail.startswith("fdatasync") or event == "sched_process_exec":
            print(f"{ms:8.3f} {who} {event} {detail[:60]}")
    print("page faults:", ", ".join(f"{who} {n}" for who, n in faults.most_common(8)))


if __name__ == "__main__":
    main()
