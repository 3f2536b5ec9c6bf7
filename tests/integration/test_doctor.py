"""`ag doctor` over real daemons on this machine (issue 25): a healthy cluster passes,
and each thing it exists to find is found, with its fix and a non-zero exit: a head that
does not answer, a head whose certificate is not the pinned CA's, a token the head
refuses, more nodes asked for than are alive. Across hosts (blocked ports, hostnames
that resolve to loopback): test_multihost.py."""
import json

from conftest import free_ports


def checks_of(proc):
    report = json.loads(proc.stdout)
    return report, {c["check"]: c for c in report["checks"]}


def test_a_healthy_cluster_passes_every_check(cluster):
    proc = cluster.ag("doctor")
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith("All 4 checks passed."), proc.stdout
    proc = cluster.ag("-o", "json", "doctor", "--nodes", 2, timeout=90)
    report, checks = checks_of(proc)
    assert report["ok"] and report["head"] == cluster.address, report
    assert {c["status"] for c in report["checks"]} == {"ok"}, report
    assert set(checks) >= {"head", "tls", "token", "clock", "nodes", "ports", "interface", "hostname", "clocks"}
    assert "2 ranks on 2 nodes" in checks["nodes"]["detail"] and "lo" in checks["nodes"]["detail"]
    # The probe job is deleted once read.
    assert not [j for j in cluster.jobs() if j.get("name") == "ag-doctor"]


def test_a_head_that_does_not_answer_is_a_failed_check_with_its_fix(cluster):
    port = free_ports(1)[0]
    proc = cluster.ag("doctor", "--address", f"127.0.0.1:{port}", check=False)
    assert proc.returncode == 1, proc.stdout
    assert f"FAIL  head       cannot reach head at 127.0.0.1:{port}" in proc.stdout, proc.stdout
    assert "fix: check that the head runs" in proc.stdout and f"drops port {port}" in proc.stdout
    report, checks = checks_of(cluster.ag("-o", "json", "doctor", "--address", f"127.0.0.1:{port}", check=False))
    assert not report["ok"] and checks["head"]["status"] == "fail"


def test_a_head_whose_certificate_is_not_the_pinned_cas_fails_tls(cluster_factory, tmp_path):
    ours = cluster_factory("ours", workers=())
    other = cluster_factory("other", workers=())
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"address": ours.address,
                                  "ca_files": {ours.address: str(other.head_data_dir / "tls" / "ca.crt")}}))
    proc = ours.ag("doctor", check=False, env={"AG_CONFIG": str(config)})
    assert proc.returncode == 1, proc.stdout
    assert "FAIL  tls" in proc.stdout and "does not verify against the pinned cluster CA" in proc.stdout, proc.stdout
    assert f"fix: pin this head's CA: ag config --address {ours.address} --ca-fingerprint" in proc.stdout


def test_a_token_the_head_refuses_fails_the_token_check(cluster):
    proc = cluster.ag("doctor", "--token", "x" * 40, check=False)
    assert proc.returncode == 1, proc.stdout
    assert "FAIL  token" in proc.stdout and "fix: the token is wrong, revoked" in proc.stdout, proc.stdout
    # A user disabled by an admin: the same.
    added = cluster.ag("user", "add", "bob").stdout
    token = added.split("shown only this once:")[1].split()[0]
    cluster.ag("user", "disable", "bob")
    proc = cluster.ag("doctor", "--token", token, check=False)
    assert proc.returncode == 1 and "FAIL  token" in proc.stdout, proc.stdout


def test_more_nodes_than_are_alive_is_a_failed_check_and_starts_nothing(cluster):
    proc = cluster.ag("doctor", "--nodes", 3, check=False)
    assert proc.returncode == 1, proc.stdout
    assert "--nodes 3 asks for 3 nodes, but 2 are alive and not draining" in proc.stdout, proc.stdout
    assert "ag doctor --nodes 2" in proc.stdout
    assert cluster.jobs() == []


def test_bad_doctor_flags_are_usage_errors(cluster):
    for flags in (["--nodes", "-1"], ["--nodes", "x"], ["--timeout", "1"]):
        proc = cluster.ag("doctor", *flags, check=False)
        assert proc.returncode == 2 and ("--nodes" in proc.stderr or "--timeout" in proc.stderr), (flags, proc.stderr)


def test_tasks_are_told_the_nodes_interface_unless_the_job_names_one(cluster):
    job_id, proc = cluster.submit("--", "echo $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME $TP_SOCKET_IFNAME")
    assert proc.returncode == 0 and "lo lo lo" in proc.stdout, proc.stdout
    job_id, proc = cluster.submit("--env", "GLOO_SOCKET_IFNAME=eth9", "--", "echo $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME")
    assert proc.returncode == 0 and "eth9 lo" in proc.stdout, proc.stdout
    nodes = cluster.ag("list-nodes", "-v").stdout
    assert "INTERFACE" in nodes.splitlines()[0] and " lo " in nodes, nodes


def test_a_worker_is_refused_an_interface_that_does_not_hold_its_address(head_only):
    c = head_only
    def start_worker(ip, *more):
        return c.ag("start-worker", "--head-node", c.address, "--node-ip-address", ip, "--token", c.join_token,
                    "--data-dir", c.worker_data_dir(ip), *more, check=False)

    missing = start_worker("127.0.0.2", "--network-interface", "nosuch0")
    assert missing.returncode != 0, missing
    assert "--network-interface nosuch0: this machine has no such interface" in missing.stdout + missing.stderr
    assert "lo 127.0.0.1/8" in missing.stdout + missing.stderr
    elsewhere = start_worker("192.0.2.77")
    assert elsewhere.returncode != 0, elsewhere
    assert "the node address 192.0.2.77 is on no interface of this machine" in elsewhere.stdout + elsewhere.stderr
    assert c.nodes() == []
