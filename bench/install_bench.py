#!/usr/bin/python3
"""AetherGrid release-build benchmark (issue 15): binary sizes, and how fast a new `ag`
process starts, for the ordinary dynamic build (build/bin/ag, RelWithDebInfo) and the
portable one (build-portable/bin/ag: static libraries, stripped), measured in the same
run with the two alternating so that the machine's noise falls on both alike.

- sizes: each binary as built, build/bin/ag stripped (objcopy --strip-all into a
  temporary file), the portable binary's separate debug file, the .deb;
- `ag --version`: fork+exec to exit, a new process each run (the files are in the page
  cache; the VM's caches are not dropped, which would slow whoever else uses it);
- `ag start-head --block` until GET /api/healthz answers: a new data dir each run (the
  head makes its database, tokens and cluster CA), and a restart on an existing one.

    /usr/bin/python3 bench/install_bench.py [--runs 15] [--write]
"""
import argparse
import datetime
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
from run_bench import write_results_section  # noqa: E402

DYNAMIC = os.path.join(REPO, "build", "bin", "ag")
PORTABLE = os.path.join(REPO, "build-portable", "bin", "ag")


def mib(n):
    return f"{n / (1 << 20):.1f} MiB"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def time_version(binary):
    t0 = time.perf_counter()
    subprocess.run([binary, "--version"], check=True, stdout=subprocess.DEVNULL, timeout=30)
    return (time.perf_counter() - t0) * 1000


def time_head_ready(binary, data_dir, session_dir):
    """ms from spawning `ag start-head --block` to GET /api/healthz answering 200."""
    port, dashboard = free_port(), free_port()
    env = {**os.environ, "AG_SESSION_DIR": session_dir}
    url = f"http://127.0.0.1:{port}/api/healthz"
    t0 = time.perf_counter()
    head = subprocess.Popen([binary, "start-head", "--block", "--data-dir", data_dir, "--port", str(port),
                             "--dashboard-port", str(dashboard)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = t0 + 30
        while True:
            try:
                with urllib.request.urlopen(url, timeout=1) as r:
                    if r.status == 200:
                        return (time.perf_counter() - t0) * 1000
            except OSError:
                pass
            if time.perf_counter() > deadline or head.poll() is not None:
                raise RuntimeError(f"{binary}: the head did not answer {url} (exit {head.poll()})")
            time.sleep(0.002)
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait(timeout=30)


def stripped_size(binary):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ag")
        subprocess.run(["objcopy", "--strip-all", binary, out], check=True, timeout=120)
        return os.path.getsize(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each measure per binary")
    parser.add_argument("--write", action="store_true", help="write the section into bench/RESULTS.md")
    args = parser.parse_args()
    for binary, how in ((DYNAMIC, "scripts/build.sh"), (PORTABLE, "scripts/build-portable.sh")):
        if not os.path.isfile(binary):
            sys.exit(f"no {binary}: build it with {how}")
    builds = {"dynamic": DYNAMIC, "portable": PORTABLE}
    version = {name: subprocess.run([b, "--version"], capture_output=True, text=True, check=True).stdout.strip()
               for name, b in builds.items()}
    times = {(name, measure): [] for name in builds for measure in ("version", "first", "restart")}
    with tempfile.TemporaryDirectory(prefix="ag-install-bench-") as tmp:
        for run in range(args.runs):
            for name, binary in builds.items():  # alternating, one run of each measure at a time
                times[(name, "version")].append(time_version(binary))
                data_dir = os.path.join(tmp, f"{name}-{run}")
                session = os.path.join(tmp, f"session-{name}-{run}")
                os.makedirs(session)
                times[(name, "first")].append(time_head_ready(binary, data_dir, session))
                times[(name, "restart")].append(time_head_ready(binary, data_dir, session))
                shutil.rmtree(data_dir)
    med = {key: statistics.median(v) for key, v in times.items()}
    loaded = {}
    for name, binary in builds.items():
        ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
        loaded[name] = [line.split()[0] for line in ldd.splitlines()
                        if line.split() and line.split()[0] not in ("linux-vdso.so.1", "libc.so.6", "libm.so.6")
                        and "ld-linux" not in line.split()[0]]
    debs = sorted(f for f in os.listdir(os.path.join(REPO, "build-portable")) if f.endswith(".deb"))
    rows = [
        ("`build/bin/ag` (RelWithDebInfo, dynamic) as built", mib(os.path.getsize(DYNAMIC))),
        ("the same, stripped (`objcopy --strip-all`)", mib(stripped_size(DYNAMIC))),
        ("`build-portable/bin/ag` (Release -O2, static but glibc, stripped)", mib(os.path.getsize(PORTABLE))),
        ("its debug info, `build-portable/bin/ag.debug` (zlib-compressed)",
         mib(os.path.getsize(PORTABLE + ".debug")) if os.path.exists(PORTABLE + ".debug") else "—"),
    ]
    for deb in debs:
        rows.append((f"the package, `{deb}`", mib(os.path.getsize(os.path.join(REPO, "build-portable", deb)))))
    today = datetime.date.today().isoformat()
    lines = [
        "<!-- install:begin -->",
        "## Release build: size and start-up (issue 15)",
        "",
        f"Produced by `/usr/bin/python3 bench/install_bench.py --runs {args.runs} --write` on {today}: "
        f"the dynamic build ({version['dynamic']}) and the portable one ({version['portable']}), "
        f"{args.runs} runs of each measure, alternating between the two; medians. Each run is a new "
        "process with the binary in the page cache (caches are not dropped).",
        "",
        "| binary | size |",
        "| --- | --- |",
        *[f"| {what} | {size} |" for what, size in rows],
        "",
        "| measure | dynamic | portable | portable / dynamic |",
        "| --- | --- | --- | --- |",
    ]
    for measure, what in (("version", "`ag --version` (exec to exit)"),
                          ("first", "`ag start-head --block` → /api/healthz answers, new data dir"),
                          ("restart", "the same, restart on its data dir")):
        d, p = med[("dynamic", measure)], med[("portable", measure)]
        lines.append(f"| {what} | {d:.1f} ms | {p:.1f} ms | {p / d:.2f}× |")
    lines += ["", f"Shared libraries beyond glibc (libc, libm, the loader) that each loads at start: dynamic "
              f"{len(loaded['dynamic'])} ({', '.join(loaded['dynamic'])}); portable {len(loaded['portable'])}. "
              "The dynamic build measured here already has spdlog and fmt compiled in (issue 15), so two "
              "libraries fewer than before; the portable binary is larger than the stripped dynamic one by "
              "the libraries linked into it."]
    lines += ["", "All runs (ms): " + "; ".join(
        f"{name} {measure}: " + ", ".join(f"{t:.1f}" for t in times[(name, measure)])
        for name in builds for measure in ("version", "first", "restart")), "<!-- install:end -->", ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_results_section(text, "<!-- install:begin -->", "<!-- install:end -->")


if __name__ == "__main__":
    main()
