"""AetherGrid across machines: a head, two workers and a client, each on a host of its
own (a network namespace with its own address, hostname, HOME and session; see
netns.py), joined as the README says, over TLS with the printed CA fingerprint.

Each host's hostname resolves to loopback (127.0.1.1, as Debian writes /etc/hosts), so
a library that finds "its address" from the hostname announces loopback to the other
machines: that is what the DDP tests check the product copes with.
"""
import collections
import hashlib
import json
import re
import subprocess
import time

import pytest

from conftest import REPO, pid_alive, wait_until

EXAMPLES = REPO / "examples"
PYTHON = "/usr/bin/python3"
# What the ranks of a gloo job print when one announced a loopback address to another
# host: gloo dials the peer's 127.x address, which is its own host's.
GLOO_DIALS_LOOPBACK = re.compile(r"connect \[127\.\d+\.\d+\.\d+\]:\d+: Connection refused")
SOCKET_IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME")

# A task that reports what it sees of its host, one JSON line.
_REPORT = ("import json, os, socket; h = socket.gethostname(); "
           "print(json.dumps({'rank': os.environ['RANK'], 'hostname': h, 'resolves_to': socket.gethostbyname(h), "
           + ", ".join(f"'{v}': os.environ.get('{v}')" for v in SOCKET_IFNAME_VARS) + "}))")


def task_reports(c):
    """One task per worker host reports its hostname, what that resolves to and the
    socket interface variables it was given: {worker ip: report}."""
    job_id = c.submit("-n", len(c.workers), "--placement", "spread", "--num-cpus", "0.5", "--",
                      PYTHON, "-c", _REPORT)
    job = c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=60)
    assert job["state"] == "SUCCEEDED", job["message"]
    reports = {}
    for task in job["attempts"][-1]["tasks"]:
        line = c.logs(job_id, "--task-index", task["task_index"]).strip().splitlines()[-1]
        reports[task["node_address"]] = json.loads(line)
    return reports


def check_interface_feature(c, reports):
    """Asserts what every DDP test relies on about the hosts, and returns whether the
    workers told the tasks which interface carries their node's address."""
    for worker in c.workers:
        seen = reports[worker.ip]
        # The premise: the task runs on its own host, whose hostname means loopback.
        assert seen["hostname"] == worker.hostname and seen["resolves_to"].startswith("127."), seen
    told = [reports[w.ip][v] for w in c.workers for v in SOCKET_IFNAME_VARS]
    if any(told):
        for worker in c.workers:
            for var in SOCKET_IFNAME_VARS:
                assert reports[worker.ip][var] == worker.ifname, (
                    f"{var} on {worker.name} is {reports[worker.ip][var]!r}, but its address {worker.ip} is on "
                    f"{worker.ifname}")
    return any(told)


def submit_ddp(c, ranks, ranks_per_host, command=("python", "train.py")):
    """examples/train.py as the repo has it, from the client with --working-dir, spread
    over the worker hosts; returns (job id, the finished job's JSON) once it has checked
    where the ranks ran."""
    job_id = c.submit("-n", ranks, "--num-cpus", "1", "--placement", "spread", "--working-dir", EXAMPLES,
                      "--python", PYTHON, "--", *command, timeout=120)
    job = c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=150)
    per_host = collections.Counter(t["node_address"] for t in job["attempts"][0]["tasks"])
    assert per_host == {w.ip: ranks_per_host for w in c.workers}, per_host
    return job_id, job


def run_ddp(c, ranks, ranks_per_host):
    """submit_ddp, asserting success. Where the workers do not yet tell tasks their
    interface (no *_SOCKET_IFNAME in a task's environment) and gloo failed the known way,
    the test is an expected failure that names the line gloo printed."""
    told_ifname = check_interface_feature(c, task_reports(c))
    job_id, job = submit_ddp(c, ranks, ranks_per_host)
    if job["state"] != "SUCCEEDED":
        logs = c.logs(job_id)
        dialed = GLOO_DIALS_LOOPBACK.search(logs)
        if not told_ifname and dialed:
            pytest.xfail("the workers set no GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME/TP_SOCKET_IFNAME for their "
                         "tasks, so gloo binds where the hostname resolves (loopback) and a rank on another "
                         f"host dials that: `{dialed.group(0)}`")
        raise AssertionError(f"DDP job {job_id} {job['state']}: {job['message']}\n{logs[-4000:]}")
    assert job["num_attempts"] == 1
    return job_id, job


def test_workers_on_other_hosts_join_as_the_readme_says(host_cluster):
    c = host_cluster()
    nodes = c.nodes()
    assert sorted((n["address"], n["hostname"], n["state"]) for n in nodes) == sorted(
        (w.ip, w.hostname, "ALIVE") for w in c.workers)
    # The client reaches the head over TLS, verified against the CA it pinned.
    config = json.loads((c.client.home / ".aethergrid" / "config.json").read_text())
    assert config["address"] == c.address and c.address in config["ca_files"]
    assert c.client.ag("whoami").stdout.startswith("alice (user")
    # A client that pinned nothing is refused with how to pin, not sent in clear text.
    stranger = c.client.ag("--address", c.address, "list-nodes", env={"HOME": str(c.client.tmp)}, check=False)
    assert stranger.returncode != 0 and "ag config --address" in stranger.stderr, stranger.stderr


def test_two_rank_ddp_one_rank_per_worker_host(host_cluster):
    c = host_cluster()
    job_id, _ = run_ddp(c, ranks=2, ranks_per_host=1)
    log = c.logs(job_id)
    assert "Epoch 4, Loss:" in log and "[Rank 1] Training finished." in log, log[-2000:]


def test_without_the_interface_variables_gloo_dials_loopback_across_hosts(host_cluster):
    # What the workers' *_SOCKET_IFNAME variables are for: without them the hosts'
    # hostnames (loopback) break gloo between machines. This also keeps the hosts honest:
    # were a hostname to resolve to the host's own address, this job would succeed.
    c = host_cluster()
    unset = ["env"] + [f"-u{v}" for v in SOCKET_IFNAME_VARS]
    job_id, job = submit_ddp(c, 2, 1, command=(*unset, "python", "train.py"))
    logs = c.logs(job_id)
    assert job["state"] == "FAILED" and GLOO_DIALS_LOOPBACK.search(logs), (job["message"], logs[-3000:])


def test_four_rank_ddp_two_ranks_per_worker_host(host_cluster):
    c = host_cluster()
    job_id, _ = run_ddp(c, ranks=4, ranks_per_host=2)
    log = c.logs(job_id)
    assert "Epoch 4, Loss:" in log, log[-2000:]
    for rank in range(4):
        assert f"[Rank {rank}] Training finished." in log, log[-2000:]


_SDK_SCRIPT = """
import json, sys
import aethergrid as ag

client = ag.Client(sys.argv[1])
out = {"whoami": client.whoami(), "nodes": [(n["address"], n["hostname"]) for n in client.list_nodes()]}
job = client.submit_job(entrypoint="python report.py", num_workers=2, placement="spread",
                        runtime_env={"working_dir": sys.argv[2], "env_vars": {"GREETING": "hi from ${AG_JOB_ID}"},
                                     "python": {"executable": "/usr/bin/python3"}},
                        task_options={"num_cpus": 1}, job_name="sdk-multihost")
job.wait(timeout=60)
out["job_id"] = job.job_id
out["status"] = job.status()
out["logs"] = [job.get_logs(task_index=i) for i in (0, 1)]
bad = client.submit_job(entrypoint="echo going down; exit 3", job_name="sdk-fails")
try:
    bad.wait(timeout=60)
    out["failed"] = None
except ag.exceptions.AGJobFailedError:
    out["failed"] = bad.get_error_message()
print(json.dumps(out))
"""


def test_the_sdk_on_the_client_host_runs_a_job_on_both_worker_hosts(host_cluster):
    c = host_cluster()
    workdir = c.client.home / "project"
    workdir.mkdir()
    (workdir / "report.py").write_text(
        "import os, socket\n"
        "print(f\"rank {os.environ['RANK']} on {socket.gethostname()}: {os.environ['GREETING']}\")\n")
    script = c.client.tmp / "sdk_client.py"
    script.write_text(_SDK_SCRIPT)

    proc = c.client.run([PYTHON, script, c.address, workdir], env={"PYTHONPATH": str(REPO / "python")},
                        timeout=150)

    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["whoami"]["name"] == "alice"
    assert sorted(map(tuple, out["nodes"])) == sorted((w.ip, w.hostname) for w in c.workers)
    assert out["status"] == "SUCCEEDED"
    hosts = set()
    for rank, line in enumerate(out["logs"]):
        m = re.fullmatch(rf"rank {rank} on (\S+): hi from {out['job_id']}", line.strip())
        assert m, out["logs"]
        hosts.add(m.group(1))
    assert hosts == {w.hostname for w in c.workers}
    assert out["failed"] is not None and "going down" in out["failed"], out["failed"]


def test_a_200_mib_log_reaches_a_client_on_another_host_whole(host_cluster):
    c = host_cluster()
    command = "seq 1 25000000"  # 204 MiB of text
    expected = subprocess.run(["sh", "-c", command], capture_output=True, check=True, timeout=60).stdout
    expected_sha, expected_size = hashlib.sha256(expected).hexdigest(), len(expected)
    del expected
    job_id = c.submit("--", command)
    job = c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=120)
    assert job["state"] == "SUCCEEDED", job["message"]

    out = c.client.tmp / "task0.log"
    c.client.sh(f"ag logs {job_id} --task-index 0 > {out}", timeout=120)

    h = hashlib.sha256()
    with open(out, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    assert (out.stat().st_size, h.hexdigest()) == (expected_size, expected_sha)
    # The output crossed on the workers' log streams inside TLS, not in channel frames;
    # where the kernel has no kTLS the worker's log says so.
    for worker in c.workers:
        log = c.worker_log(worker)
        assert re.search(r"log stream to the head: TLSv1\.3 \S+, encrypted (by the kernel|in the worker: no kTLS, .+)",
                         log), log[-2000:]
        assert "task output goes in frames" not in log and "lost the log stream" not in log, log[-2000:]


def running_tasks(c, job_id):
    """The first attempt's tasks once every one of them runs (with its pid)."""
    def all_running():
        job = c.job(job_id)
        tasks = job["attempts"][0]["tasks"] if job["attempts"] else []
        return tasks if tasks and all(t["state"] == "RUNNING" and t["pid"] for t in tasks) else None
    return wait_until(all_running, 30, interval=0.25, message=f"every task of {job_id} running")


def test_a_partitioned_worker_is_declared_dead_its_gang_retried_and_it_rejoins_once(host_cluster, netns_network):
    c = host_cluster(node_timeout_s=3)
    node_ids = {n["address"]: n["node_id"] for n in c.nodes()}
    job_id = c.submit("-n", "2", "--placement", "spread", "--max-retries", "1", "--retry-delay", "0", "--",
                      'if [ "$AG_ATTEMPT" = 0 ]; then exec sleep 300; fi; echo "rank $RANK on $(hostname)"')
    tasks = running_tasks(c, job_id)
    victim = c.worker_by_ip(tasks[1]["node_address"])
    survivor = next(w for w in c.workers if w is not victim)
    cut_task_pid = tasks[1]["pid"]

    netns_network.unplug(victim)
    try:
        job = c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=40)
        assert job["state"] == "SUCCEEDED", job["message"]
        assert job["num_attempts"] == 2
        lost = job["attempts"][0]["tasks"][1]
        assert lost["state"] == "FAILED" and "stopped responding" in lost["reason"], lost
        assert {t["node_address"] for t in job["attempts"][1]["tasks"]} == {survivor.ip}
        assert {n["address"]: n["state"] for n in c.nodes()}[victim.ip] == "DEAD"
        # Cut off, the worker stopped its task itself once its lease ran out: two copies
        # of rank 1 never ran at once.
        wait_until(lambda: not pid_alive(cut_task_pid), 15, message="the cut-off worker to stop its task")
        assert "nothing from the head for" in c.worker_log(victim)
    finally:
        netns_network.plug(victim)

    wait_until(lambda: victim.ip in c.alive_worker_ips(), 45, interval=0.5,
               message=f"{victim.name} to rejoin after the partition")
    nodes = c.nodes()
    assert sorted((n["address"], n["node_id"], n["state"]) for n in nodes) == sorted(
        (w.ip, node_ids[w.ip], "ALIVE") for w in c.workers), nodes
    logs = c.logs(job_id)
    assert f"rank 0 on {survivor.hostname}" in logs and f"rank 1 on {survivor.hostname}" in logs, logs
    # The rejoined node takes work again.
    again = c.submit("-n", "2", "--placement", "spread", "--", "hostname")
    job = c.wait_state(again, ("SUCCEEDED", "FAILED"), timeout=30)
    assert job["state"] == "SUCCEEDED", job["message"]
    assert {t["node_address"] for t in job["attempts"][0]["tasks"]} == {w.ip for w in c.workers}


def test_a_blip_shorter_than_the_node_timeout_keeps_the_running_task(host_cluster, netns_network):
    c = host_cluster(node_timeout_s=3)
    job_id = c.submit("-n", "2", "--placement", "spread", "--",
                      'sleep 6; echo "rank $RANK done on $(hostname)"')
    tasks = running_tasks(c, job_id)
    victim = c.worker_by_ip(tasks[1]["node_address"])
    pids = [t["pid"] for t in tasks]

    netns_network.unplug(victim)
    time.sleep(1.0)  # the blip: a third of the node timeout without a link
    netns_network.plug(victim)

    assert all(pid_alive(p) for p in pids)
    job = c.job(job_id)
    assert job["state"] == "RUNNING" and job["num_attempts"] == 1, job
    job = c.wait_state(job_id, ("SUCCEEDED", "FAILED"), timeout=30)
    assert job["state"] == "SUCCEEDED", job["message"]
    assert job["num_attempts"] == 1
    assert [t["pid"] for t in job["attempts"][0]["tasks"]] == pids
    assert c.logs(job_id, "--task-index", "1").strip() == f"rank 1 done on {victim.hostname}"
    assert {n["address"]: n["state"] for n in c.nodes()} == {w.ip: "ALIVE" for w in c.workers}
    assert "nothing from the head for" not in c.worker_log(victim)


# ---- ag doctor across hosts ----------------------------------------------------------------

def doctor_checks(proc):
    """`ag doctor -o json`'s checks as {check: [(status, detail, fix), ...]}."""
    report = json.loads(proc.stdout)
    checks = collections.defaultdict(list)
    for check in report["checks"]:
        checks[check["check"]].append((check["status"], check["detail"], check["fix"]))
    return report, checks


def test_ag_doctor_on_the_client_passes_and_warns_of_hostnames_that_resolve_to_loopback(host_cluster):
    c = host_cluster()
    proc = c.client.ag("-o", "json", "doctor", "--nodes", "2", "--timeout", "30", timeout=90, check=False)
    report, checks = doctor_checks(proc)
    assert proc.returncode == 0 and report["ok"], proc.stdout
    assert [s for s, _, _ in checks["tls"]] == ["ok"] and "pinned" in checks["tls"][0][1]
    assert checks["token"][0][1] == "works: alice (user)"
    assert [s for s, _, _ in checks["ports"]] == ["ok"] and [s for s, _, _ in checks["interface"]] == ["ok"]
    # Each worker host's hostname resolves to 127.0.1.1: a warning with the fix, per node.
    assert sorted(s for s, _, _ in checks["hostname"]) == ["warn", "warn"], checks["hostname"]
    for status, detail, fix in checks["hostname"]:
        assert "resolves to 127.0.1.1 (loopback)" in detail and "eth0" in detail, detail
        assert "/etc/hosts" in fix, fix
    # Nothing of the probe is left.
    assert not [j for j in c.client.ag_json("list-jobs")["jobs"] if j.get("name") == "ag-doctor"]


def test_ag_doctor_finds_the_master_ports_blocked_between_workers(host_cluster):
    c = host_cluster()
    for worker in c.workers:  # whichever holds rank 0, the other cannot reach its master port
        subprocess.run(["ip", "netns", "exec", worker.name, "iptables", "-A", "INPUT", "-p", "tcp", "--dport",
                        "29500:31499", "-j", "DROP"], check=True, timeout=30)
    proc = c.client.ag("doctor", "--nodes", "2", "--timeout", "20", timeout=90, check=False)
    assert proc.returncode == 1, proc.stdout
    failed = [line for line in proc.stdout.splitlines() if line.lstrip().startswith("FAIL")]
    assert len(failed) == 1 and "ports" in failed[0] and "cannot reach rank 0" in failed[0], proc.stdout
    assert "fix: open TCP ports 29500-31499" in proc.stdout, proc.stdout
    assert "1 problem" in proc.stdout.splitlines()[-1], proc.stdout


def test_plain_http_is_served_on_the_heads_own_machine_and_refused_from_others(host_cluster):
    """The sign-in link `ag start-head` prints for its own machine is plain http to the
    head's address (not loopback): answered there, refused from the client's host."""
    c = host_cluster()
    url = f"http://{c.head.ip}:8265/api/healthz"
    on_head = c.head.run(["curl", "-s", "-m", "10", "-w", " %{http_code}", url], check=False)
    assert on_head.stdout.endswith(" 200"), on_head
    elsewhere = c.client.run(["curl", "-s", "-m", "10", "-w", " %{http_code}", url], check=False)
    assert elsewhere.stdout.endswith(" 400") and "plain HTTP only from its own machine" in elsewhere.stdout, elsewhere
    printed = re.search(r"Sign in on this machine \(as admin\): http://(\S+?):8265/\?token=", c.start_output)
    assert printed and printed.group(1) == c.head.ip, c.start_output


# Each rank answers HTTP on 127.0.0.1 of its own host, then waits in a named function.
_DEBUGGEE = """
import http.server, os, socket, threading, time
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"rank {os.environ['RANK']} on {socket.gethostname()}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", PORT), Answer)
threading.Thread(target=server.serve_forever, daemon=True).start()
def wait_for_a_debugger():
    print("serving on", socket.gethostname(), flush=True)
    time.sleep(600)
wait_for_a_debugger()
"""


def test_exec_stack_and_port_forward_reach_ranks_on_other_hosts(host_cluster):
    c = host_cluster()
    port = 18731
    job_id = c.submit("-n", 2, "--placement", "spread", "--", PYTHON, "-c", _DEBUGGEE.replace("PORT", str(port)))
    wait_until(lambda: c.logs(job_id).count("serving on") == 2, 60, message="both ranks to serve")
    hosts = {int(line.split("]")[0].split()[-1]): line.split("serving on ")[1].strip()
             for line in c.logs(job_id).splitlines() if "serving on" in line}
    assert hosts[0] != hosts[1], hosts
    # A command beside rank 1 runs on rank 1's host, from the client's.
    out = c.client.ag("exec", job_id, "--task-index", "1", "--", "sh", "-c", 'echo "$RANK $(hostname)"').stdout
    assert out.strip() == f"1 {hosts[1]}", out
    # Every rank's stacks, from the client.
    stacks = c.client.ag("stack", job_id).stdout
    assert stacks.count("in wait_for_a_debugger") == 2, stacks
    # A port on rank 1's host, on the client's loopback.
    forward = subprocess.Popen(c.client.command(["ag", "port-forward", job_id, "--task-index", "1", f"0:{port}"]),
                               env=c.client.environment(None), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        line = forward.stdout.readline()
        assert line.startswith("Forwarding http://127.0.0.1:"), (line, forward.stderr.read()
                                                                  if forward.poll() is not None else "")
        local = int(line.split("http://127.0.0.1:")[1].split()[0])
        fetch = (f"import urllib.request; "
                 f"print(urllib.request.urlopen('http://127.0.0.1:{local}/', timeout=20).read().decode())")
        assert c.client.run([PYTHON, "-c", fetch]).stdout.strip() == f"rank 1 on {hosts[1]}"
    finally:
        forward.terminate()
        forward.wait(20)
    c.client.ag("stop-job", job_id)
