"""Machines for multi-host tests, made from Linux namespaces on this one machine.

A Network is a private subnet, 10.231.X.0/24, X unique among the networks that exist
at once, behind a Linux bridge (the "switch", `br0`) that lives in a network namespace
of its own. Each Host on it has:
- its own network namespace, with `lo` and `eth0` up: `eth0` is one end of a veth pair
  whose other end is a port of the switch, and holds the host's address 10.231.X.N/24;
- its own UTS namespace, so its own hostname, and its own /etc/hosts that maps that
  hostname to 127.0.1.1, as Debian's installer writes it: the hostname resolves to
  loopback, as on a freshly installed machine (what trips gloo up between machines);
- its own HOME, AG_SESSION_DIR and TMPDIR under the test's tmp dir, and `ag` on PATH.

A command runs in a host through `nsenter` (the host's network and UTS namespaces) and
a fresh mount namespace of its own (`unshare --mount`) in which /etc/hosts is the host's
file and /sys is a sysfs of the host's network namespace (so /sys/class/net lists the
host's interfaces), with the machine's /sys/fs/cgroup mounted back in place: the worker
contains each task in control groups there. (`ip netns exec` mounts /etc/netns/NAME/*
over /etc too, but it also replaces /sys without putting the cgroup file systems back.)
The hosts file is /etc/netns/NAME/hosts, so `ip netns exec NAME ...` sees the same one
when you poke at a host by hand.

Processes, the file system and the PID space are shared with this machine: the test
can read /proc of every host's processes, and tears a host down by killing, by pid,
every process in its network namespace (`ip netns pids`), then deleting the namespaces
(which deletes the veths) and the files it made.

Every subprocess call has a timeout and every wait a deadline.
"""
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import AG_BIN, pid_alive, processes_where, remove_node_cgroups, wait_for_job_state, wait_until

# Where the hosts' UTS namespaces are kept (bind mounts of /proc/PID/ns/uts).
RUN_DIR = Path("/run/aethergrid-test-netns")
ETC_NETNS = Path("/etc/netns")
SUBNET = "10.231.{}.0/24"
HEAD_PORT = 6379  # each host has its own ports: the head keeps the default, as in the README
IP_TIMEOUT_S = 15
_counter = itertools.count()

# Runs as `sh -c ENTER ag-host HOSTS_FILE CGROUP_SPARE ARGV...` inside the host's network
# and UTS namespaces and a mount namespace of its own (see the module's docstring).
_ENTER = r"""
hosts=$1 spare=$2
shift 2
mount --bind "$hosts" /etc/hosts &&
mount --rbind /sys/fs/cgroup "$spare" &&
mount -t sysfs sysfs /sys &&
mount --rbind "$spare" /sys/fs/cgroup &&
umount -l "$spare" || { echo "ag-host: could not set up the host's mounts" >&2; exit 125; }
exec "$@"
"""


def _run(argv, timeout=IP_TIMEOUT_S, check=True, **kwargs):
    """One command on this machine (not in a host); returns the CompletedProcess (text)."""
    try:
        proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, **kwargs)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"`{shlex.join(map(str, argv))}` did not finish within {timeout}s") from e
    if check and proc.returncode != 0:
        raise AssertionError(f"`{shlex.join(map(str, argv))}` exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def skip_unless_namespaces_work():
    """Skips the calling test, saying why, where this machine cannot make the hosts."""
    if os.geteuid() != 0:
        pytest.skip("multi-host tests need root: they make network namespaces, veths and a bridge")
    missing = [tool for tool in ("ip", "nsenter", "unshare", "mount") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"multi-host tests need {', '.join(missing)} (iproute2, util-linux)")


class Host:
    """One machine of a Network. Made by Network.add_host; not thread-safe."""

    def __init__(self, network, role, slot):
        self.network = network
        self.role = role
        self.name = f"{network.prefix}-{role}"  # namespace name and hostname
        self.hostname = self.name
        self.ip = network.address(slot)
        self.ifname = "eth0"
        self.port = f"{network.prefix}p{slot}"  # its veth end on the switch (<= 15 characters)
        self.dir = network.root / role
        self.home = self.dir / "home"
        self.session_dir = self.dir / "session"
        self.tmp = self.dir / "tmp"
        self.bin = self.dir / "bin"
        self.cgroup_spare = self.dir / ".cgroup"
        self.uts_file = RUN_DIR / f"{self.name}.uts"
        self.etc_dir = ETC_NETNS / self.name
        self.hosts_file = self.etc_dir / "hosts"
        self.env_extra = {}  # more environment for every command run here (e.g. AG_TOKEN_FILE)

    # ---- making and removing it -----------------------------------------------------
    def create(self):
        sw = self.network.switch
        _run(["ip", "netns", "add", self.name])
        self.network.made_namespaces.append(self.name)
        # Both ends made in their namespaces at once: nothing is left in this machine's.
        _run(["ip", "link", "add", self.port, "netns", sw, "type", "veth", "peer", "name", self.ifname,
              "netns", self.name])
        _run(["ip", "-n", sw, "link", "set", self.port, "master", "br0", "up"])
        _run(["ip", "-n", self.name, "link", "set", "lo", "up"])
        _run(["ip", "-n", self.name, "addr", "add", f"{self.ip}/24", "dev", self.ifname])
        _run(["ip", "-n", self.name, "link", "set", self.ifname, "up"])

        RUN_DIR.mkdir(mode=0o700, exist_ok=True)
        self.uts_file.touch()
        _run(["unshare", f"--uts={self.uts_file}", "hostname", self.hostname])
        self.etc_dir.mkdir(parents=True, exist_ok=True)
        self.hosts_file.write_text(
            "127.0.0.1\tlocalhost\n"
            f"127.0.1.1\t{self.hostname}\n\n"
            "::1     localhost ip6-localhost ip6-loopback\n"
            "ff02::1 ip6-allnodes\nff02::2 ip6-allrouters\n")
        for d in (self.home, self.session_dir, self.tmp, self.bin, self.cgroup_spare):
            d.mkdir(parents=True, exist_ok=True)
        self.home.chmod(0o700)
        (self.bin / "ag").symlink_to(AG_BIN)
        return self

    def write_enter_script(self):
        """`DIR/enter [COMMAND...]` runs COMMAND (default: bash) in this host, with the
        environment every command of the tests gets here: for looking around by hand."""
        env = [f"{k}={v}" for k, v in self.environment().items()]
        script = self.dir / "enter"
        script.write_text("#!/bin/sh\n[ $# -gt 0 ] || set -- bash\n"
                          f"exec {shlex.join(['env', '-i', *env, *self.command([])])} \"$@\"\n")
        script.chmod(0o755)
        return script

    def pids(self):
        """Every process in this host's network namespace."""
        proc = _run(["ip", "netns", "pids", self.name], check=False)
        return [int(p) for p in proc.stdout.split() if p.isdigit()]

    def processes(self):
        """This host's processes: those in its namespace, and any carrying its session dir
        in their environment (the workers pass it on to their tasks)."""
        mine = str(self.session_dir)
        return set(self.pids()) | set(processes_where(lambda env: env.get("AG_SESSION_DIR") == mine))

    def kill_everything(self, timeout=15):
        me = os.getpid()

        def gone():
            left = [p for p in self.processes() if p != me and pid_alive(p)]
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            return not left

        wait_until(gone, timeout, interval=0.1, message=f"every process of host {self.name} to end")

    def remove(self):
        """Kills what runs here and removes the host's namespaces and files (its dirs
        stay under the test's tmp dir for a look after a failure)."""
        errors = []
        for step in (self.kill_everything,
                     lambda: remove_node_cgroups(self.session_dir.glob("worker-*")),
                     self._remove_namespace,
                     self._remove_uts,
                     lambda: shutil.rmtree(self.etc_dir, ignore_errors=True)):
            try:
                step()
            except Exception as e:  # every step is tried; the first failure is reported
                errors.append(e)
        if errors:
            raise errors[0]

    def _remove_namespace(self):
        if self.name in namespaces():
            _run(["ip", "netns", "del", self.name])

    def _remove_uts(self):
        if self.uts_file.exists():
            _run(["umount", self.uts_file], check=False)
            self.uts_file.unlink()

    # ---- running commands -----------------------------------------------------------
    def environment(self, extra=None):
        """A login-like environment of this host: nothing of the test process's own."""
        env = {
            "HOME": str(self.home), "USER": "root", "LOGNAME": "root", "SHELL": "/bin/sh",
            "LANG": "C.UTF-8", "TMPDIR": str(self.tmp), "AG_SESSION_DIR": str(self.session_dir),
            "PATH": f"{self.bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        }
        env.update(self.env_extra)
        env.update(extra or {})
        return env

    def command(self, argv):
        """argv wrapped so that it runs in this host."""
        return ["nsenter", f"--net=/run/netns/{self.name}", f"--uts={self.uts_file}", "--",
                "unshare", "--mount", "--propagation", "slave", "--",
                "sh", "-c", _ENTER, "ag-host", str(self.hosts_file), str(self.cgroup_spare),
                *[str(a) for a in argv]]

    def run(self, argv, timeout=60, check=True, input=None, env=None, cwd=None):
        """Runs argv in this host and returns the CompletedProcess (text). `check`: a
        non-zero exit fails the test, showing the output."""
        shown = shlex.join(str(a) for a in argv)
        try:
            proc = subprocess.run(self.command(argv), env=self.environment(env), cwd=cwd or self.home,
                                  capture_output=True, text=True, timeout=timeout,
                                  input=input, stdin=None if input is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"[{self.name}] `{shown}` did not finish within {timeout}s; "
                                 f"stdout={e.stdout!r} stderr={e.stderr!r}") from None
        if check and proc.returncode != 0:
            raise AssertionError(f"[{self.name}] `{shown}` exited {proc.returncode}\n"
                                 f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}")
        return proc

    def sh(self, script, **kwargs):
        """A shell command line, as a user would paste it (with ~ being this host's HOME)."""
        return self.run(["sh", "-c", script], **kwargs)

    def ag(self, *args, **kwargs):
        return self.run(["ag", *args], **kwargs)

    def ag_json(self, *args, **kwargs):
        proc = self.ag("-o", "json", *args, **kwargs)
        return json.loads(proc.stdout)

    def __repr__(self):
        return f"Host({self.name}, {self.ip})"


class Network:
    """A subnet with a switch, and the hosts plugged into it. Network.create() makes it
    (or skips the test where namespaces cannot be made); teardown() removes all of it."""

    def __init__(self, root, index):
        self.root = Path(root)
        self.index = index
        self.prefix = f"agn{index}"
        self.switch = f"{self.prefix}-switch"
        self.subnet = SUBNET.format(index)
        self.hosts = []
        self.made_namespaces = []
        self._unplugged = set()

    @classmethod
    def create(cls, root):
        """A new network on a subnet no other network of these tests uses now: the switch
        namespace's name carries X, and `ip netns add` fails when it exists already."""
        skip_unless_namespaces_work()
        start = (os.getpid() * 7 + next(_counter) * 13) % 254
        for i in range(254):
            index = (start + i) % 254 + 1
            net = cls(root, index)
            proc = _run(["ip", "netns", "add", net.switch], check=False)
            if proc.returncode == 0:
                net.made_namespaces.append(net.switch)
                try:
                    _run(["ip", "-n", net.switch, "link", "add", "br0", "type", "bridge"])
                    _run(["ip", "-n", net.switch, "link", "set", "br0", "up"])
                except BaseException:
                    net.teardown()
                    raise
                net.root.mkdir(parents=True, exist_ok=True)
                return net
            if "File exists" not in proc.stderr:
                pytest.skip(f"cannot make a network namespace here (`ip netns add` said: {proc.stderr.strip()})")
        pytest.skip("every 10.231.X.0/24 test subnet is in use")

    def address(self, slot):
        return f"10.231.{self.index}.{slot}"

    def add_host(self, role):
        host = Host(self, role, len(self.hosts) + 1)
        self.hosts.append(host)
        return host.create()

    # ---- faults ---------------------------------------------------------------------
    def unplug(self, host):
        """Takes the host's cable out of the switch: its link stays up, and whatever it
        sends (and whatever is sent to it) is lost without an error, as in a partition."""
        _run(["ip", "-n", self.switch, "link", "set", host.port, "nomaster"])
        self._unplugged.add(host.name)

    def plug(self, host):
        _run(["ip", "-n", self.switch, "link", "set", host.port, "master", "br0"])
        self._unplugged.discard(host.name)

    # ---- teardown -------------------------------------------------------------------
    def teardown(self):
        """`ag stop` in every host that started daemons (workers first), then kill every
        process left in a host by pid, then delete the namespaces (with them the veths and
        the bridge) and the files made outside the test's tmp dir."""
        errors = []
        ordered = sorted(self.hosts, key=lambda h: h.role == "head")
        for host in ordered:
            if (host.session_dir / "daemons").is_dir():
                try:
                    host.ag("stop", "--timeout", "5", check=False, timeout=40)
                except Exception as e:
                    errors.append(e)
        for host in ordered:
            try:
                host.remove()
            except Exception as e:
                errors.append(e)
        if self.switch in self.made_namespaces:
            proc = _run(["ip", "netns", "del", self.switch], check=False)
            if proc.returncode != 0:
                errors.append(AssertionError(f"ip netns del {self.switch}: {proc.stderr.strip()}"))
        for shared_dir in (ETC_NETNS, RUN_DIR):
            try:
                shared_dir.rmdir()  # only when no other network keeps files there
            except OSError:
                pass
        leftovers = [n for n in namespaces() if n.startswith(self.prefix + "-")]
        if leftovers:
            errors.append(AssertionError(f"namespaces left behind: {leftovers}"))
        if errors:
            raise errors[0]


def namespaces():
    """The names of this machine's named network namespaces."""
    proc = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


# ---- an AetherGrid cluster over a Network, set up as the README says ------------------
_JOIN_TOKEN_LINE = re.compile(r"^\s*(\(umask 077; echo \S+ > ~/\.aethergrid-join-token\))\s*$", re.M)
_WORKER_LINE = re.compile(r"^\s*(ag start-worker --head-node \S+ --token-file ~/\.aethergrid-join-token"
                          r" --ca-fingerprint sha256:[0-9a-f]{64})\s*$", re.M)
_PIN_LINE = re.compile(r"pin the head once with `(ag config --address \S+ --ca-fingerprint sha256:[0-9a-f]{64})`")
_USER_TOKEN = re.compile(r"shown only this once:\s*\n\s*\n\s*(\S+)\s*\n")
_USER_TOKEN_SAVE = re.compile(r"^\s*(\(umask 077; cat > ~/\.aethergrid-token\))", re.M)


class HostCluster:
    """A head, workers and a client ("laptop") on their own hosts, joined with the lines
    `ag start-head` prints (README, "Using a cluster" and "Multi-machine set-up"): the
    join token saved and the start-worker line run on each worker with
    `--node-ip-address THIS_IP`; the client pins the head with the printed `ag config`
    line and uses a user's token (`ag user add` on the head) from ~/.aethergrid-token."""

    def __init__(self, network, workers=2, num_cpus=2, node_timeout_s=None, kill_grace_s=1):
        self.network = network
        self.num_cpus = num_cpus
        self.node_timeout_s = node_timeout_s
        self.kill_grace_s = kill_grace_s
        self.head = network.add_host("head")
        self.workers = [network.add_host(f"w{i + 1}") for i in range(workers)]
        self.client = network.add_host("client")
        self.start_output = ""
        self.worker_line = ""

    @property
    def address(self):
        return f"{self.head.ip}:{HEAD_PORT}"

    def start(self):
        options = ["--node-ip-address", self.head.ip, "--kill-grace", self.kill_grace_s]
        if self.node_timeout_s is not None:
            options += ["--node-timeout", self.node_timeout_s]
        out = self.head.ag("start-head", *options, timeout=60).stdout
        self.start_output = out
        save_token, worker_line, pin = (_JOIN_TOKEN_LINE.search(out), _WORKER_LINE.search(out),
                                        _PIN_LINE.search(out))
        assert save_token and worker_line and pin, f"`ag start-head` did not print the lines to paste:\n{out}"
        self.worker_line = worker_line.group(1)
        assert f"--head-node {self.address} " in self.worker_line, self.worker_line
        for worker in self.workers:
            worker.sh(save_token.group(1))
            worker.sh(f"{self.worker_line} --node-ip-address {worker.ip} --num-cpus {self.num_cpus} "
                      f"--kill-grace {self.kill_grace_s}", timeout=60)
        self.client.sh(pin.group(1))
        added = self.head.ag("user", "add", "alice").stdout
        token, save = _USER_TOKEN.search(added), _USER_TOKEN_SAVE.search(added)
        assert token and save, f"`ag user add` did not print the token and how to keep it:\n{added}"
        self.client.sh(save.group(1), input=token.group(1) + "\n")
        self.client.env_extra["AG_TOKEN_FILE"] = str(self.client.home / ".aethergrid-token")
        wait_until(lambda: self.alive_worker_ips() >= {w.ip for w in self.workers}, 30,
                   message="every worker ALIVE in the client's `ag list-nodes`")
        return self

    # ---- from the client ------------------------------------------------------------
    def nodes(self):
        body = self.client.ag_json("list-nodes")
        return body["nodes"] if isinstance(body, dict) else body

    def alive_worker_ips(self):
        return {n["address"] for n in self.nodes() if n["state"] == "ALIVE"}

    def submit(self, *args, timeout=60):
        """`ag submit --no-wait ARGS` from the client; returns the job id."""
        proc = self.client.ag("submit", "--no-wait", *args, timeout=timeout)
        return proc.stdout.strip().splitlines()[-1].strip()

    def job(self, job_id):
        return self.client.ag_json("status", job_id)

    def wait_state(self, job_id, states, timeout=60):
        return wait_for_job_state(self.job, job_id, states, timeout, interval=0.25)

    def logs(self, job_id, *args, timeout=60):
        return self.client.ag("logs", job_id, *args, timeout=timeout).stdout

    def worker_by_ip(self, ip):
        return next(w for w in self.workers if w.ip == ip)

    def worker_log(self, worker):
        return (worker.session_dir / f"worker-{worker.ip}" / "worker.log").read_text(errors="replace")


def main():
    """`python3 tests/integration/netns.py [WORKERS]`: the same cluster for trying things
    by hand; prints how to enter each host, and tears it all down on Enter."""
    import sys
    import tempfile
    root = Path(tempfile.mkdtemp(prefix="ag-netns-"))
    net = Network.create(root)
    try:
        c = HostCluster(net, workers=int(sys.argv[1]) if len(sys.argv) > 1 else 2).start()
        print(c.start_output)
        for host in net.hosts:
            print(f"{host.role:7} {host.ip:15} enter with {host.write_enter_script()}")
        input(f"Cluster up, files under {root}. Press Enter to tear it down. ")
    finally:
        net.teardown()


if __name__ == "__main__":
    main()
