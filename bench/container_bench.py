#!/usr/bin/env python3
"""Containers: what AetherGrid adds to the engine, measured against the engine itself in
the same run (the machine is shared and noisy: medians, and ratios to a floor).

- start: submit -> both ranks of a 2-task gang running in containers (image cached),
  against two `podman run --rm IMAGE` of the same command started at once by hand
  (the engine's floor for two ranks on this machine), alternating.
- ddp: the example DDP job in containers vs. on the host, through `ag submit` both.

    AG_BIN=build/bin/ag python3 bench/container_bench.py [--runs 15] [--write]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))

from images import ensure_image  # noqa: E402
from run_bench import AG, PYTHON, REPO, Cluster, percentile, write_results_section  # noqa: E402

BEGIN, END = "<!-- containers:begin -->", "<!-- containers:end -->"
STAMP = "date +%s.%N"


def engine_floor(image):
    """Seconds from starting two `podman run`s at once (the two ranks) to the later of
    their commands printing the time."""
    t0 = time.time()
    procs = [subprocess.Popen(["podman", "run", "--rm", "--init", "--network", "host", "--ipc", "host", "--pull",
                               "never", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", image, "sh",
                               "-c", STAMP], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    stamps = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        if p.returncode != 0:
            raise RuntimeError("podman run failed")
        stamps.append(float(out.strip()))
    return max(stamps) - t0


def gang_start(cluster, image):
    """Seconds from the submit to the later of the two ranks printing the time."""
    t0 = time.time()
    job_id = cluster.api("POST", "/api/jobs", {
        "entrypoint": STAMP, "num_workers": 2, "placement": "spread", "task_options": {"num_cpus": 0.5},
        "runtime_env": {"image": image}})["job_id"]
    job = cluster.wait(job_id)
    assert job["state"] == "SUCCEEDED", job
    starts = [float(cluster.api("GET", f"/api/jobs/{job_id}/logs?task_index={i}").decode()) for i in range(2)]
    return max(starts) - t0


def bench_start(cluster, image, runs):
    ours, floor = [], []
    gang_start(cluster, image)  # the agent learns the image once
    for _ in range(runs):
        ours.append(gang_start(cluster, image) * 1000)
        floor.append(engine_floor(image) * 1000)
    return {"runs": runs, "ag_p50_ms": statistics.median(ours), "ag_p99_ms": percentile(ours, 99),
            "floor_p50_ms": statistics.median(floor), "ratio": statistics.median(ours) / statistics.median(floor)}


def bench_ddp(cluster, image, runs):
    def run(*extra):
        t0 = time.time()
        subprocess.run([AG, "submit", "-n", "2", "--placement", "spread", "--working-dir",
                        os.path.join(REPO, "examples"), *extra, "--", "python3 train.py"],
                       env=cluster.env, capture_output=True, check=True, timeout=600)
        return time.time() - t0

    host, container = [], []
    for _ in range(runs):
        host.append(run("--python", PYTHON))
        container.append(run("--image", image))
    return {"runs": runs, "host_s": statistics.median(host), "container_s": statistics.median(container),
            "ratio": statistics.median(container) / statistics.median(host)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--ddp-runs", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md's containers section")
    args = parser.parse_args()
    python_image, torch_image = ensure_image("python"), ensure_image("torch")
    cluster = Cluster(num_cpus=2).start()
    try:
        start = bench_start(cluster, python_image, args.runs)
        ddp = bench_ddp(cluster, torch_image, args.ddp_runs)
    finally:
        cluster.stop()
    command = "AG_BIN=build/bin/ag python3 bench/container_bench.py " + " ".join(sys.argv[1:])
    text = (f"{BEGIN}\n## Containers: start latency and DDP overhead\n\n"
            f"Command: `{command}` ({time.strftime('%Y-%m-%d')}, podman with runc, images from Debian packages)\n\n"
            f"| measure | AetherGrid | floor | ratio |\n|---|---|---|---|\n"
            f"| submit -> both ranks running in containers on 2 nodes, p50 (p99) | {start['ag_p50_ms']:.0f} ms "
            f"({start['ag_p99_ms']:.0f} ms) | two `podman run --rm` at once by hand: {start['floor_p50_ms']:.0f} ms | "
            f"{start['ratio']:.2f}x |\n"
            f"| example DDP job (2 ranks, gloo), median of {ddp['runs']} | in containers {ddp['container_s']:.2f} s | "
            f"on the host {ddp['host_s']:.2f} s | {ddp['ratio']:.2f}x |\n"
            f"{END}")
    print(text)
    if args.write:
        write_results_section(text, BEGIN, END)


if __name__ == "__main__":
    main()
