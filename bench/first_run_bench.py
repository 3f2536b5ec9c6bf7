#!/usr/bin/python3
"""The README's two commands on a fresh machine (issue 30): how many minutes each takes.

The fresh machine is a container of a minimal Debian 12 (mmdebstrap's minbase, the
tests' `bare` image: no compiler, no libraries, no Python), with a fresh clone of this
checkout's HEAD and the network to Debian's mirror, on this machine's cores. In it:

1. `scripts/run-example.sh`, the first command, timed by its phases: the Debian packages
   (`install-deps.sh --example`), the build of `ag` (ccache empty), the example's two
   jobs (`ag submit` and the SDK);
2. the set-up half of `scripts/test.sh`, the second command, after the first: the rest
   of the packages, the build of everything else (unit tests, benchmarks, the portable
   binary and its two packages) and the unit tests.

The integration tests need network namespaces, iptables and podman, which a container
here cannot give: their time is measured on this machine, warm, in the same run
(`pytest -n 4`, as scripts/test.sh runs them).

    /usr/bin/python3 bench/first_run_bench.py [--write] [--skip-integration]
"""
import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import images  # noqa: E402

BEGIN, END = "<!-- first-run:begin -->", "<!-- first-run:end -->"
# Privileged: the machine it stands for is one where the scripts run as root (mmdebstrap
# unshares namespaces to extract the portable build's glibc).
PODMAN_RUN = ["podman", "run", "-d", "--privileged", "--runtime", "runc", "--ulimit", "nofile=20000:20000",
              "--ulimit", "nproc=30000:30000"]

# Run inside the container: each phase prints "phase NAME SECONDS".
SCRIPT = r"""
set -eu
cd /src
phase() { local name=$1; shift; local t0=$(date +%s.%N); "$@"; echo "phase $name $(echo "$(date +%s.%N) - $t0" | bc)"; }
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends bc >/dev/null
case "$1" in
  example)
    phase packages scripts/install-deps.sh --example
    phase build scripts/build.sh --example
    phase run scripts/run-example.sh ;;
  tests)
    phase packages scripts/install-deps.sh
    phase build scripts/build.sh
    phase release sh -c 'scripts/build-deb.sh >/dev/null && AG_VERSION_SUFFIX=+rebuild1 BUILD_DIR=build-portable-next scripts/build-deb.sh >/dev/null'
    phase unit_tests sh -c 'cd build && ctest -j "$(nproc)" >/tmp/ctest.log 2>&1; tail -1 /tmp/ctest.log >&2; grep -E "tests passed|tests failed" /tmp/ctest.log' ;;
esac
"""


def in_container(name, part, log):
    started = time.monotonic()
    proc = subprocess.run(["podman", "exec", name, "bash", "-c", SCRIPT, "bash", part], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=5400)
    wall = time.monotonic() - started
    log.write(proc.stdout)
    phases = {m.group(1): float(m.group(2)) for m in re.finditer(r"^phase (\w+) ([0-9.]+)$", proc.stdout, re.M)}
    return proc.returncode, wall, phases, proc.stdout


def integration_warm():
    env = {**os.environ, "AG_BIN": os.path.join(REPO, "build", "bin", "ag")}
    started = time.monotonic()
    proc = subprocess.run(["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "4",
                           "tests/integration"], cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - started
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-500:]
    return wall, summary


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="put the table into bench/RESULTS.md")
    parser.add_argument("--skip-integration", action="store_true")
    args = parser.parse_args()

    image = images.ensure_image("bare")
    workdir = tempfile.mkdtemp(prefix="ag-first-run-")
    clone = os.path.join(workdir, "src")
    subprocess.run(["git", "clone", "--quiet", REPO, clone], check=True, timeout=300)
    commit = subprocess.run(["git", "-C", clone, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    name = f"ag-first-run-{os.getpid()}"
    # This machine's CA bundle, for npm's HTTPS through the egress proxy (a fresh machine
    # of this kind has it; apt's mirror is plain HTTP).
    cas = ["-v", "/etc/ssl/certs/ca-certificates.crt:/etc/host-ca.crt:ro", "-e", "NODE_EXTRA_CA_CERTS=/etc/host-ca.crt"]
    subprocess.run(PODMAN_RUN + ["--name", name, "--init", *cas, "-v", f"{clone}:/src", image, "sleep", "infinity"],
                   check=True, capture_output=True, timeout=120)
    log_path = os.path.join(workdir, "first-run.log")
    try:
        with open(log_path, "w") as log:
            rc1, _, phases1, out1 = in_container(name, "example", log)
            if rc1 != 0:
                sys.exit(f"the first command failed in the container (its log: {log_path})")
            rc2, _, phases2, out2 = in_container(name, "tests", log)
            if rc2 != 0:
                sys.exit(f"the second command's set-up failed in the container (its log: {log_path})")
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True, timeout=120)
    print(out1[-3000:])
    shutil.rmtree(workdir, ignore_errors=True)
    ranks_ok = "SUCCEEDED" in out1
    integration = (0, "skipped") if args.skip_integration else integration_warm()
    unit_line = next((line for line in out2.splitlines() if "tests passed" in line or "tests failed" in line), "")

    def minutes(seconds):
        return f"{seconds / 60:.1f} min"

    rows = [
        ("**first command** `scripts/run-example.sh`, fresh", minutes(phases1.get("packages", 0) +
                                                                    phases1.get("build", 0) + phases1.get("run", 0)),
         "≤ 8 min"),
        ("… Debian packages (`install-deps.sh --example`)", minutes(phases1.get("packages", 0)), ""),
        ("… build of `ag` alone (empty ccache)", minutes(phases1.get("build", 0)), ""),
        ("… the example: cluster up, DDP job by `ag submit` and by the SDK, cluster down",
         minutes(phases1.get("run", 0)), ""),
        ("**second command** `scripts/test.sh` after it: set-up in the fresh machine",
         minutes(sum(phases2.values())), ""),
        ("… the rest of the Debian packages and the browser tests' npm package", minutes(phases2.get("packages", 0)),
         ""),
        ("… build of everything else (unit tests, benchmarks)", minutes(phases2.get("build", 0)), ""),
        ("… portable binary and its two .debs", minutes(phases2.get("release", 0)), ""),
        (f"… unit tests ({unit_line.strip() or 'not run'})", minutes(phases2.get("unit_tests", 0)), ""),
        (f"… integration tests, on this machine, warm, 4 at a time ({integration[1]})", minutes(integration[0]), ""),
    ]
    date = datetime.date.today().isoformat()
    text = [BEGIN, "## The README's two commands on a fresh machine (issue 30)", "",
            f"`/usr/bin/python3 bench/first_run_bench.py --write` on {date}, commit {commit}, 2 cores. The fresh "
            "machine: a container of a minimal Debian 12 (mmdebstrap minbase: no compiler, no Python), a fresh clone, "
            "Debian's mirror over the network. The integration tests need network namespaces and podman, which the "
            "container cannot give; they ran on this machine, warm, in the same run."
            + ("" if ranks_ok else " (The example's output did not show SUCCEEDED: see the log.)"), "",
            "| measure | minutes | target |", "| --- | --- | --- |"]
    text += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    text += ["", END]
    table = "\n".join(text)
    print(table)
    if args.write:
        path = os.path.join(REPO, "bench", "RESULTS.md")
        content = open(path).read()
        if BEGIN in content:
            content = content[:content.index(BEGIN)] + table + content[content.index(END) + len(END):]
        else:
            content = content.rstrip("\n") + "\n\n" + table + "\n"
        open(path, "w").write(content)


if __name__ == "__main__":
    main()
