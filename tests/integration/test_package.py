"""The release artifacts in clean Debian root file systems (issues 15, 30): the portable
`ag` (scripts/build-portable.sh) and the .deb (scripts/build-deb.sh), each in a container
made with mmdebstrap (images.py, built once per machine; rootfs.py runs them), in Debian
12 and in Debian 11 (glibc 2.31, the oldest glibc the binary is built for).

- The portable binary in a minimal Debian (`bare`: no SQLite, libarchive, OpenSSL,
  spdlog, fmt, ICU, libxml2): its ldd is glibc alone, and a head and a worker run a job
  with a working_dir (libarchive), over TLS (OpenSSL) with the job in SQLite.
- The .deb in a Debian with systemd but none of those libraries: what it installs, the
  accounts and folders postinst makes, the daemons started from the units' own ExecStart
  lines (no systemd running), and then under a real systemd: the units start, a job runs,
  both logs (journal and the data dir's file) have the daemons' lines, `systemctl restart`
  keeps tasks and jobs, and `dpkg -r` / `--purge` stop and clean up.
- The upgrade: the .deb of a newer version of the same source (AG_VERSION_SUFFIX, a
  second portable build) over the installed one, then the head's and the worker's
  restarts: every job, log and token kept, the running task goes on (same pid) and ends
  with its whole log.

scripts/test.sh builds the binary and both packages before pytest. Run alone:
    scripts/build-deb.sh && AG_VERSION_SUFFIX=+rebuild1 BUILD_DIR=build-portable-next scripts/build-deb.sh
    /usr/bin/python3 -m pytest -q tests/integration/test_package.py
(AG_PORTABLE_BIN, AG_DEB and AG_DEB_NEXT name other files.)
"""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import rootfs
from conftest import REPO, wait_until
from rootfs import ADMIN, unit_settings

pytestmark = pytest.mark.skipif(not (shutil.which("podman") and shutil.which("mmdebstrap")),
                                reason="needs podman and mmdebstrap (scripts/install-deps.sh installs them)")

# The libraries a dynamic build of `ag` loads, none of which the test rootfs may have.
BUILD_MACHINE_LIBRARIES = ("sqlite3", "archive", "ssl", "crypto", "spdlog", "fmt", "icuuc", "xml2")
GLIBC = {"linux-vdso.so.1", "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1",
         "/lib64/ld-linux-x86-64.so.2"}
# Each test's Debian: 12 (bookworm, glibc 2.36) and 11 (bullseye, glibc 2.31).
DEBIANS = {"bare": "2.36", "bare-bullseye": "2.31"}
LINES = 40
SLOW_JOB = f"for i in $(seq 1 {LINES}); do echo line $i; sleep 0.2; done"
# SLOW_JOB, then it runs on until the test makes this file: an upgrade on a loaded
# machine can take longer than its lines.
GO_FILE = "/var/tmp/ag-upgrade-test-go"
SLOW_JOB_UNTIL_GO = SLOW_JOB + f"; while [ ! -e {GO_FILE} ]; do sleep 0.1; done"


def built(env_name, pattern, how):
    """The artifact env_name names, else the one `pattern` (under the checkout) finds;
    skips the test, saying how to build it, when there is none."""
    path = os.environ.get(env_name)
    if path:
        assert os.path.isfile(path), f"{env_name}={path}: no such file"
        return Path(path)
    found = sorted(REPO.glob(pattern))
    if not found:
        pytest.skip(f"no {pattern}: build it with {how} (scripts/test.sh does)")
    return found[-1]


@pytest.fixture
def portable_bin():
    return built("AG_PORTABLE_BIN", "build-portable/bin/ag", "scripts/build-portable.sh")


@pytest.fixture
def deb():
    return built("AG_DEB", "build-portable/aethergrid_*.deb", "scripts/build-deb.sh")


@pytest.fixture
def next_deb():
    return built("AG_DEB_NEXT", "build-portable-next/aethergrid_*.deb",
                 "AG_VERSION_SUFFIX=+rebuild1 BUILD_DIR=build-portable-next scripts/build-deb.sh")


def deb_field(path, field):
    return subprocess.run(["dpkg-deb", "--field", str(path), field], capture_output=True, text=True, check=True,
                          timeout=30).stdout.strip()


def assert_no_build_machine_libraries(m, but=()):
    names = [name for name in BUILD_MACHINE_LIBRARIES if name not in but]
    found = m.sh("ls /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu | grep -E '^lib(" +
                 "|".join(names) + r")[0-9.-]*\.so' || true")
    assert found == "", f"the test rootfs has libraries it must lack: {found}"


def install(m, deb_path):
    """dpkg -i of a package copied into the machine; dpkg's output."""
    m.copy_in(deb_path, "/tmp/" + deb_path.name)
    return m.sh(f"dpkg -i /tmp/{deb_path.name} 2>&1", timeout=120)


def configure_worker(m):
    """worker.conf's head-node (and a small node) and the join token where the packaged
    worker.conf's token-file names it: what an operator does before starting the worker."""
    m.sh("printf 'head-node = \"127.0.0.1:6379\"\\nnum-cpus = 2\\nkill-grace = 2\\n' >> /etc/aethergrid/worker.conf"
         " && install -m 600 /var/lib/aethergrid/head/join-token /etc/aethergrid/join-token")


def glibc_of(m):
    """The glibc version of machine `m` ("2.31")."""
    return m.sh("getconf GNU_LIBC_VERSION").split()[1]


@pytest.mark.parametrize("image", sorted(DEBIANS))
def test_the_portable_binary_runs_in_a_bare_debian_without_its_libraries(portable_bin, image):
    expected_version = subprocess.run([str(portable_bin), "--version"], capture_output=True, text=True, check=True,
                                      timeout=30).stdout.strip()
    with rootfs.machine(image, volumes=[(portable_bin, "/usr/bin/ag")]) as m:
        assert glibc_of(m) == DEBIANS[image]
        # (Debian 11's apt brings OpenSSL 1.1, which a build against OpenSSL 3 cannot use.)
        assert_no_build_machine_libraries(m, but=("ssl", "crypto") if image.endswith("bullseye") else ())
        ldd = m.sh("ldd /usr/bin/ag")
        assert {line.split()[0] for line in ldd.splitlines()} <= GLIBC, ldd
        assert m.sh("ag --version") == expected_version
        # A C++ exception thrown and caught (CLI11's parse error): the unwinder finds its
        # tables on this glibc too (src/cli/glibc_compat.cc).
        assert m.sh("ag list-jobs --no-such-option 2>&1; echo rc=$?").splitlines() == [
            "error: unknown option '--no-such-option': `ag list-jobs --help` lists the options", "rc=2"]
        started = m.sh("ag start-head --node-ip-address 127.0.0.1", timeout=60)
        fingerprint = re.search(r"--ca-fingerprint (sha256:[0-9a-f:]+)", started)
        assert fingerprint, started
        m.sh("ag start-worker --head-node 127.0.0.1:6379 --num-cpus 2", timeout=60)
        # Over TLS, verified against the pinned cluster CA (OpenSSL linked in); a
        # working_dir packed, stored, fetched and unpacked (libarchive linked in).
        m.sh(f"ag config --address 127.0.0.1:6379 --ca-fingerprint {fingerprint.group(1)}")
        m.sh("mkdir -p /tmp/wd && echo 'packed and unpacked' > /tmp/wd/data.txt")
        out = m.sh("ag submit --working-dir /tmp/wd -- 'cat data.txt; echo rank=$RANK of $WORLD_SIZE'", timeout=60)
        assert "packed and unpacked" in out and "rank=0 of 1" in out, out
        assert "SUCCEEDED" in m.sh("ag list-jobs")
        m.sh("ag stop", timeout=60)


@pytest.mark.parametrize("image", ["systemd-bare", "systemd-bare-bullseye"])
def test_the_deb_installs_into_a_clean_debian_and_runs_from_its_units_command_lines(deb, image):
    version = deb_field(deb, "Version")
    depends = deb_field(deb, "Depends")
    # glibc and passwd (postinst's useradd) only; containers are a suggestion.
    assert {re.sub(r"\s*\(.*\)", "", d).strip() for d in depends.split(",")} == {"libc6", "passwd"}, depends
    libc6 = re.search(r"libc6 \(>= ([0-9.]+)\)", depends)
    assert libc6 and tuple(map(int, libc6.group(1).split("."))) <= (2, 31), depends  # Debian 11 has 2.31
    assert "podman" in deb_field(deb, "Suggests")
    with rootfs.machine(image) as m:  # systemd is installed, but not running
        assert_no_build_machine_libraries(m, but=("ssl", "crypto"))  # systemd itself needs OpenSSL's
        out = install(m, deb)
        assert "systemctl enable --now aethergrid-head" in out, out
        assert m.sh("dpkg-query -W -f '${Status} ${Version}' aethergrid") == f"install ok installed {version}"
        assert m.sh("dpkg-query -W -f '${Conffiles}' aethergrid").split()[0::2] == [
            "/etc/aethergrid/head.conf", "/etc/aethergrid/worker.conf"]
        assert m.sh("ag --version").startswith(f"AetherGrid {version} (commit ")
        assert m.sh("ls /lib/systemd/system/aethergrid-*").split() == [
            "/lib/systemd/system/aethergrid-head.service", "/lib/systemd/system/aethergrid-worker.service"]
        assert m.sh("stat -c '%U %a' /var/lib/aethergrid/head /var/lib/aethergrid/worker").splitlines() == [
            "aethergrid-head 700", "root 711"]
        assert m.sh("getent passwd aethergrid-head | cut -d: -f1,6,7").splitlines() == [
            "aethergrid-head:/var/lib/aethergrid/head:/usr/sbin/nologin"]

        # The head as its unit runs it: ExecStart, as User=, with the unit's environment.
        head = unit_settings(m.sh("cat /lib/systemd/system/aethergrid-head.service"))
        user = head["User"][0]
        env = dict(e.split("=", 1) for e in head["Environment"])
        m.sh(f"install -d -o {user} /run/{head['RuntimeDirectory'][0]}")
        m.start(f"exec {head['ExecStart'][0]} 2>/tmp/head.err", user=user, env=env)
        m.wait_for_file("/var/lib/aethergrid/head/join-token")
        m.sh("install -m 600 /var/lib/aethergrid/head/token /root/admin-token")
        # The worker as its unit runs it (root), once the operator has configured it.
        configure_worker(m)
        worker = unit_settings(m.sh("cat /lib/systemd/system/aethergrid-worker.service"))
        assert "token" not in worker["ExecStart"][0].replace("--config", "")
        env = dict(e.split("=", 1) for e in worker["Environment"])
        m.sh(f"install -d /run/{worker['RuntimeDirectory'][0]}")
        m.start(f"exec {worker['ExecStart'][0]} 2>/tmp/worker.err", env=env)
        wait_until(lambda: '"ALIVE"' in m.sh(f"{ADMIN} -o json list-nodes"), 30, interval=0.5, message="the worker")

        # A job end to end; the task runs as its user's own account.
        out = m.sh(f"{ADMIN} submit -- 'echo hello from $AG_JOB_ID as $USER uid $(id -u)'", timeout=60)
        job_id = re.search(r"(job_[0-9a-zA-Z]+)", out).group(1)
        assert m.job(job_id)["state"] == "SUCCEEDED"
        assert re.fullmatch(f"hello from {job_id} as ag-admin uid 19\\d{{8}}", m.sh(f"{ADMIN} logs {job_id}"))
        # Each daemon logs to stderr (the journal, under systemd) and to its data dir's file.
        for err, log, words in (("/tmp/head.err", "/var/lib/aethergrid/head/head.log", "head listening on"),
                                ("/tmp/worker.err", "/var/lib/aethergrid/worker/worker.log", "worker node_")):
            assert words in m.sh(f"cat {err}") and words in m.sh(f"cat {log}"), (err, log)
        assert m.sh("stat -c '%U %a' /var/lib/aethergrid/head/head.log") == "aethergrid-head 640"


def job_states(m):
    return {j["job_id"]: j["state"] for j in json.loads(m.sh(f"{ADMIN} -o json list-jobs"))["jobs"]}


@pytest.fixture
def systemd_machine():
    with rootfs.machine("systemd-bare", systemd=True) as m:
        yield m


def start_units(m):
    """Starts the installed units as an operator would: the head, then the worker once
    worker.conf and the join token are in place; returns once the worker is ALIVE."""
    m.sh("systemctl start aethergrid-head")
    m.wait_for_file("/var/lib/aethergrid/head/join-token")
    m.sh("install -m 600 /var/lib/aethergrid/head/token /root/admin-token")
    configure_worker(m)
    m.sh("systemctl start aethergrid-worker")
    wait_until(lambda: '"ALIVE"' in m.sh(f"{ADMIN} -o json list-nodes"), 30, interval=0.5, message="the worker")


def test_the_deb_units_under_systemd_run_jobs_log_twice_keep_tasks_and_clean_up(deb, systemd_machine):
    m = systemd_machine
    install(m, deb)  # while systemd runs: postinst reloads it
    assert m.show("aethergrid-head", "LoadState") == "loaded"
    assert m.show("aethergrid-head", "UnitFileState") == "disabled"  # nothing starts by itself
    assert m.show("aethergrid-head", "ActiveState") == "inactive"
    start_units(m)
    assert m.sh("ps -o user= -p " + m.show("aethergrid-head", "MainPID")) == "aethergrid-head"

    # A job end to end; the head's lines reach the journal (with priorities) and its file.
    out = m.sh(f"{ADMIN} submit -- 'echo hello from the package'", timeout=60)
    assert "hello from the package" in out
    journal = m.sh("journalctl --no-pager -o cat -u aethergrid-head -p info")
    assert re.search(r"^info AetherGrid .*: head listening on", journal, re.M), journal
    # The tokens stay in their files: the journal names the files.
    for token in m.sh("cat /var/lib/aethergrid/head/token /var/lib/aethergrid/head/join-token").split():
        assert token not in m.sh("journalctl --no-pager -o cat")
    assert "/var/lib/aethergrid/head/join-token" in journal
    assert "head listening on" in m.sh("cat /var/lib/aethergrid/head/head.log")
    assert "worker node_" in m.sh("journalctl --no-pager -o cat -u aethergrid-worker")
    assert "worker node_" in m.sh("cat /var/lib/aethergrid/worker/worker.log")
    # Each line at its own priority: a refused join is a warning, the start is info.
    refused = m.sh("ag start-worker --block --head-node 127.0.0.1:6379 --token not-a-token --data-dir /tmp/w2"
                   " --node-ip-address 127.0.0.2 2>&1; echo exit $?", timeout=60)
    assert refused.endswith("exit 78"), refused
    warnings = m.sh("journalctl --no-pager -o cat -u aethergrid-head -p warning")
    assert "warning refused a worker join from " in warnings and "head listening" not in warnings, warnings

    # systemctl restart aethergrid-worker keeps the running task (same pid, whole log).
    job_id = m.submit(SLOW_JOB)
    pid = m.running_task_pid(job_id)
    m.sh("systemctl restart aethergrid-worker")
    m.sh(f"kill -0 {pid}")
    job = m.wait_job(job_id, ("SUCCEEDED", "FAILED"))
    assert job["state"] == "SUCCEEDED" and job["attempts"][0]["tasks"][0]["pid"] == pid, job
    assert m.sh(f"{ADMIN} logs {job_id}").splitlines() == [f"line {i}" for i in range(1, LINES + 1)]

    # systemctl restart aethergrid-head keeps every job: done, pending and running.
    m.submit("true", options="--num-cpus 64 --allow-unschedulable")
    m.running_task_pid(m.submit(SLOW_JOB))
    jobs_before = job_states(m)
    assert sorted(jobs_before.values()) == ["PENDING", "RUNNING", "SUCCEEDED", "SUCCEEDED"], jobs_before
    m.sh("systemctl restart aethergrid-head")
    wait_until(lambda: m.sh(f"{ADMIN} status", check=False), 30, interval=0.5, message="the head to answer again")
    assert job_states(m) == jobs_before

    # dpkg -r: the daemons stop (the worker ends its task), the files go, the data and
    # the configuration stay; --purge removes those too. The accounts stay.
    long_id = m.submit("sleep 313")
    m.running_task_pid(long_id)
    m.sh("dpkg -r aethergrid", timeout=120)
    assert m.show("aethergrid-worker", "ActiveState") in ("inactive", "")
    assert m.sh("pgrep -f '[s]leep 313' || true") == ""
    assert m.sh("pgrep -f '[s]tart-head|[s]tart-worker' || true") == ""
    wait_until(lambda: m.sh("pgrep -f '[_]_task-supervisor' || true") == "", 15, interval=0.5,
               message="the task supervisor to leave")
    assert m.sh("ls /usr/bin/ag /lib/systemd/system/aethergrid-head.service 2>&1 || true").count("No such file") == 2
    assert m.sh("ls /var/lib/aethergrid/head/head.db /etc/aethergrid/head.conf /etc/aethergrid/join-token")
    m.sh("dpkg --purge aethergrid", timeout=120)
    assert m.sh("ls -d /var/lib/aethergrid /etc/aethergrid 2>&1 || true").count("No such file") == 2
    assert m.sh("getent passwd aethergrid-head | wc -l") == "1"


@pytest.fixture
def previous_deb():
    return built("AG_DEB_PREVIOUS", "build-previous/aethergrid_*.deb", "scripts/build-previous-deb.sh")


@pytest.mark.parametrize("upgrade", ["from the previous release", "to a rebuild of this source"])
def test_upgrading_the_deb_keeps_every_job_log_token_user_and_queue_and_the_running_task(upgrade, request,
                                                                                         systemd_machine):
    # From the release packaging/previous-release names to this source; from this
    # source to a newer build of it.
    if upgrade == "from the previous release":
        old_deb, new_deb = request.getfixturevalue("previous_deb"), request.getfixturevalue("deb")
    else:
        old_deb, new_deb = request.getfixturevalue("deb"), request.getfixturevalue("next_deb")
    m = systemd_machine
    old_version, new_version = deb_field(old_deb, "Version"), deb_field(new_deb, "Version")
    assert subprocess.run(["dpkg", "--compare-versions", new_version, "gt", old_version], timeout=30).returncode == 0
    install(m, old_deb)
    start_units(m)
    old_build = m.sh(f"{ADMIN} --version")
    assert old_build.startswith(f"AetherGrid {old_version} ")
    if upgrade == "from the previous release":
        commit = (REPO / "packaging" / "previous-release").read_text().split()[-1]
        assert f"(commit {commit[:12]}," in old_build, old_build  # that release's own source

    # A user with their own token, and a queue.
    added = json.loads(m.sh(f"{ADMIN} -o json user add alice"))
    alice = f"ag --address 127.0.0.1:6379 --token {added['token']}"
    m.sh(f"{ADMIN} queue create nightly --priority low")
    queues_before = {q["name"]: q["priority"] for q in json.loads(m.sh(f"{ADMIN} -o json queue list"))["queues"]}
    assert queues_before.get("nightly") == -100, queues_before  # "low"
    alice_id = re.search(r"job_[0-9a-zA-Z]+", m.sh(f"{alice} submit --no-wait -- echo from alice")).group(0)
    m.wait_job(alice_id, ("SUCCEEDED",))

    done_id = m.submit("echo done before the upgrade")
    m.wait_job(done_id, ("SUCCEEDED",))
    pending_id = m.submit("true", options="--num-cpus 64 --allow-unschedulable")
    m.sh(f"rm -f {GO_FILE}")
    running_id = m.submit(SLOW_JOB_UNTIL_GO)
    pid = m.running_task_pid(running_id)
    secrets = "cat /var/lib/aethergrid/head/token /var/lib/aethergrid/head/join-token" \
              " /var/lib/aethergrid/worker/node-credential | sha256sum"
    secrets_before = m.sh(secrets)

    out = install(m, new_deb)
    assert "aethergrid-head still runs the previous AetherGrid" in out, out
    assert m.sh("ag --version").startswith(f"AetherGrid {new_version} ")
    # The head first: its restart keeps every job, its log and every token.
    m.sh("systemctl restart aethergrid-head")
    wait_until(lambda: m.sh(f"{ADMIN} status", check=False), 30, interval=0.5, message="the upgraded head")
    assert f"AetherGrid {new_version} " in m.sh("journalctl --no-pager -o cat -u aethergrid-head | tail -n 20")
    assert m.job(done_id)["state"] == "SUCCEEDED"
    assert m.sh(f"{ADMIN} logs {done_id}") == "done before the upgrade"
    assert m.job(pending_id)["state"] == "PENDING"
    assert m.job(running_id)["state"] == "RUNNING"
    # Then the worker: the new agent adopts the task, which goes on in the same process.
    agent_before = m.show("aethergrid-worker", "MainPID")
    m.sh("systemctl restart aethergrid-worker")
    agent_after = m.show("aethergrid-worker", "MainPID")
    assert agent_after != agent_before
    assert m.sh(f"readlink /proc/{agent_after}/exe") == "/usr/bin/ag"  # the new binary, not a deleted old one
    m.sh(f"kill -0 {pid}")
    m.sh(f"touch {GO_FILE}")
    job = m.wait_job(running_id, ("SUCCEEDED", "FAILED"))
    assert job["state"] == "SUCCEEDED" and len(job["attempts"]) == 1, job
    assert job["attempts"][0]["tasks"][0]["pid"] == pid
    assert m.sh(f"{ADMIN} logs {running_id}").splitlines() == [f"line {i}" for i in range(1, LINES + 1)]
    assert m.sh(secrets) == secrets_before
    assert f"AetherGrid {new_version} " in m.sh("journalctl --no-pager -o cat -u aethergrid-worker | tail -n 20")
    assert m.job(pending_id)["state"] == "PENDING"
    # The user, their token, their job and its log, and the queue.
    users = json.loads(m.sh(f"{ADMIN} -o json user list"))
    assert "alice" in [u["name"] for u in users["users"]], users
    assert m.sh(f"{alice} logs {alice_id}") == "from alice"
    assert json.loads(m.sh(f"{alice} -o json status {alice_id}"))["owner"] == "alice"
    queues = {q["name"]: q["priority"] for q in json.loads(m.sh(f"{ADMIN} -o json queue list"))["queues"]}
    assert queues == queues_before
