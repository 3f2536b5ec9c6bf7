"""What a job can find of the cluster's credentials. A task looks for the token in its
own environment and in the environment and command line of every process above it
(its supervisor, the worker daemon, ...), and finds nothing. Run as an unprivileged
account (`--task-user`), it cannot read the node's credential, the head's token files
or the worker's data dir either, and holds no descriptor but its own output."""
import json
import os
import pwd
import shlex
import stat
import subprocess

import pytest

from conftest import PYTHON, read_environ, proc_cmdline, wait_until

LOOK_FOR_TOKEN = r'''
import os, sys
token = open(sys.argv[1]).read().strip()  # the test's copy, given by path
pid = os.getpid()
found = []
while pid > 1:
    for name in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                if token.encode() in f.read():
                    found.append(f"{pid}/{name}")
        except OSError:
            pass
    with open(f"/proc/{pid}/stat") as f:
        pid = int(f.read().rsplit(")", 1)[1].split()[1])
print("FOUND " + " ".join(found) if found else "CLEAN")
'''


def test_a_job_finds_no_token_in_any_environment_or_command_line_above_it(cluster_factory, tmp_path):
    c = cluster_factory("creds", workers=())
    token = c.token
    # A worker given the token both ways a user might: on the command line and in AG_TOKEN.
    args = ["start-worker", "--head-node", c.address, "--node-ip-address", "127.0.0.2", "--num-cpus", 2,
            "--data-dir", c.worker_data_dir("127.0.0.2"), "--token", token]
    c.ag(*args, env={"AG_TOKEN": token})
    worker = c.worker_pid("127.0.0.2")
    assert worker
    assert token not in proc_cmdline(worker), "the worker's command line shows the token"
    assert token not in "".join(f"{k}={v}" for k, v in (read_environ(worker) or {}).items())
    script = tmp_path / "look.py"
    script.write_text(LOOK_FOR_TOKEN)
    token_copy = tmp_path / "token-to-look-for"
    token_copy.write_text(token)
    job_id, proc = c.submit("--", f"{PYTHON} {script} {token_copy}")
    assert proc.returncode == 0, proc.stderr
    out = c.ag("logs", job_id).stdout
    assert "CLEAN" in out, out


def test_a_worker_joins_with_a_private_token_file_and_refuses_a_shared_one(cluster_factory, tmp_path):
    c = cluster_factory("tokfile", workers=())
    base = ["start-worker", "--head-node", c.address, "--node-ip-address", "127.0.0.2", "--num-cpus", 1,
            "--data-dir", c.worker_data_dir("127.0.0.2")]
    token_file = tmp_path / "token"
    token_file.write_text(c.join_token + "\n")
    os.chmod(token_file, 0o644)
    refused = c.ag(*base, "--token-file", token_file, check=False)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (f"error: --token-file: token file {token_file} can be read by other users "
                                      f"(mode 0644); run `chmod 600 {token_file}`")
    missing = c.ag(*base, "--token-file", tmp_path / "nope", check=False)
    assert missing.returncode == 2
    assert "cannot read token file" in missing.stderr and "No such file" in missing.stderr
    both = c.ag(*base, "--token-file", token_file, "--token", c.join_token, check=False)
    assert both.returncode == 2 and "give --token-file or --token, not both" in both.stderr
    assert c.nodes() == []  # none of those joined
    os.chmod(token_file, 0o600)
    joined = c.ag(*base, "--token-file", token_file)
    assert "joined the cluster" in joined.stdout
    # Who its tasks run as is said on the terminal, on a line of its own.
    who = ("each user's tasks run as an account of their own" if os.geteuid() == 0
           else "tasks run as this worker's own user")
    assert f"\n  {who}" in joined.stdout, joined.stdout
    assert [n["state"] for n in c.nodes()] == ["ALIVE"]


def test_the_join_line_start_head_prints_works_as_printed(cluster_factory, tmp_path):
    c = cluster_factory("joinline", start_head=False)
    out = c.start_head().stdout
    lines = out.splitlines()
    i = lines.index("To add a worker on another machine, run there (the join token can only add nodes):")
    save, join = lines[i + 1].strip(), lines[i + 2].strip()
    assert c.join_token.startswith("agj_") and c.join_token != c.token
    assert save == f"(umask 077; echo {c.join_token} > ~/.aethergrid-join-token)"
    assert join == (f"ag start-worker --head-node {c.address} --token-file ~/.aethergrid-join-token "
                    f"--ca-fingerprint {c.ca_fingerprint}")
    # Run both as printed, with a home of the test's own.
    home = tmp_path / "home"
    home.mkdir()
    env = dict(c.env, HOME=str(home))
    subprocess.run(["bash", "-c", save], env=env, check=True, timeout=10)
    token_file = home / ".aethergrid-join-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    args = shlex.split(join)[1:] + ["--node-ip-address", "127.0.0.2", "--data-dir", c.worker_data_dir("127.0.0.2")]
    args = [str(token_file) if a == "~/.aethergrid-join-token" else a for a in args]
    c.ag(*args, env={"HOME": str(home)})
    assert [n["state"] for n in c.nodes()] == ["ALIVE"]
    # The worker pinned the head's CA from the fingerprint, for every later connection.
    pinned = (c.worker_data_dir("127.0.0.2") / "head-ca.pem").read_text()
    assert pinned.strip() == (c.head_data_dir / "tls" / "ca.crt").read_text().strip()


LOOK_AROUND = r'''
import os, sys
print("uid", os.getuid())
for path in sys.argv[1:]:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path).read()
        print("READ", path)
    except OSError as e:
        print("DENIED", path, e.errno)
pid = os.getppid()
while pid > 1:
    if os.stat(f"/proc/{pid}").st_uid != os.getuid():  # not the task's own shell
        try:
            open(f"/proc/{pid}/environ", "rb").read()
            print("READ environ of", pid)
        except OSError:
            pass
    with open(f"/proc/{pid}/stat") as f:
        pid = int(f.read().rsplit(")", 1)[1].split()[1])
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        fds[int(fd)] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass  # the listing's own descriptor, closed by now
print("fds", sorted(fds), fds)
print("home", os.environ.get("HOME"), "user", os.environ.get("USER"))
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="starting tasks as another user needs a worker running as root")
def test_tasks_run_as_the_task_user_and_cannot_read_what_the_worker_keeps(cluster_factory, tmp_path):
    c = cluster_factory("taskuser", workers=())
    nobody = pwd.getpwnam("nobody")
    c.ag("start-worker", "--head-node", c.address, "--node-ip-address", "127.0.0.2", "--num-cpus", 1,
         "--data-dir", c.worker_data_dir("127.0.0.2"), "--token", c.join_token, "--task-user", "nobody")
    script = tmp_path / "look.py"
    script.write_text(LOOK_AROUND)
    os.chmod(tmp_path, 0o755)  # the script itself must be readable to the task
    os.chmod(script, 0o644)
    secrets = [c.worker_data_dir("127.0.0.2") / "node-credential", c.worker_data_dir("127.0.0.2"),
               c.worker_data_dir("127.0.0.2") / "tasks", c.head_data_dir / "token", c.head_data_dir / "join-token",
               c.head_data_dir / "head.db"]
    job_id, proc = c.submit("--", f"{PYTHON} {script} " + " ".join(str(p) for p in secrets) + "; touch made-here")
    assert proc.returncode == 0, proc.stderr
    out = c.ag("logs", job_id).stdout
    assert f"uid {nobody.pw_uid}" in out, out
    assert "READ" not in out, out
    assert out.count("DENIED") == len(secrets), out
    # Nothing of the worker's: stdio, and the file this Python process opened itself for
    # `ag stack` (in its task's own folder, in its user's under the worker's stacks/).
    fds = out.split("fds ", 1)[1].split("\n", 1)[0]
    assert fds.startswith("[0, 1, 2, 3] "), out
    assert f"/stacks/u{nobody.pw_uid}/{job_id}.0.0/" in fds.split("3: ")[1], out
    assert f"home {nobody.pw_dir} user nobody" in out, out


def test_an_unknown_or_root_task_user_is_refused(cluster_factory):
    c = cluster_factory("badtaskuser", workers=())
    base = ["start-worker", "--head-node", c.address, "--node-ip-address", "127.0.0.2",
            "--data-dir", c.worker_data_dir("127.0.0.2"), "--token", c.join_token]
    unknown = c.ag(*base, "--task-user", "no-such-user-here", check=False)
    assert unknown.returncode != 0
    assert "--task-user: there is no user 'no-such-user-here' on this machine" in unknown.stdout + unknown.stderr
    if os.geteuid() == 0:
        root = c.ag(*base, "--task-user", "root", check=False)
        assert root.returncode != 0 and "is root; give an unprivileged account" in root.stdout + root.stderr
    assert c.nodes() == []


def test_a_task_cannot_move_itself_out_of_its_control_group_and_outlive_its_job(cluster_factory):
    from conftest import all_pids, wait_until
    from test_faults import cgroups_available
    if not cgroups_available():
        pytest.skip("this machine has no cgroup hierarchy a worker can use (v2, or v1 pids/freezer)")
    c = cluster_factory("escape", workers=())
    c.ag("start-worker", "--head-node", c.address, "--node-ip-address", "127.0.0.2", "--num-cpus", 1,
         "--data-dir", c.worker_data_dir("127.0.0.2"), "--token", c.join_token, "--task-user", "nobody")
    # A grandchild leaves its session, drops the task marker and tries every place it
    # could move itself to: the root of each hierarchy and its parent group.
    escape = ("for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs "
              "$(sed -n 's|^[0-9]*:[^:]*:\\(.*\\)|/sys/fs/cgroup/pids\\1/../cgroup.procs|p' /proc/self/cgroup); do "
              "if (echo $$ > $f) 2>/dev/null; then echo ESCAPED to $f; fi; done; echo tried; exec sleep 313.71")
    job_id, _ = c.submit("--no-wait", "--", f"env -i setsid sh -c {shlex.quote(escape)} & sleep 300")
    c.wait_state(job_id, "RUNNING", timeout=10)

    def escaped():
        return [p for p in all_pids() if proc_cmdline(p).strip() == "sleep 313.71"]

    wait_until(lambda: escaped(), 10, message="the escaping grandchild to start")
    log = c.ag("logs", job_id).stdout
    assert "tried" in log and "ESCAPED" not in log, log
    with open(f"/proc/{escaped()[0]}/cgroup") as f:
        assert "/aethergrid/" in f.read()
    c.ag("stop-job", job_id)
    c.wait_state(job_id, "STOPPED", timeout=c.kill_grace_s + 10)
    wait_until(lambda: not escaped(), 10, message="the grandchild to be killed with its job")


@pytest.mark.skipif(os.geteuid() != 0, reason="starting tasks as another user needs a worker running as root")
def test_on_a_shared_worker_a_jobs_files_are_its_tasks_alone(cluster_factory, tmp_path):
    """A local account other than the task user cannot list or read a job's unpacked
    package or a task's working dir, though cluster users see job ids; the task can."""
    c = cluster_factory("private", workers=())
    data = c.worker_data_dir("127.0.0.2")
    c.ag("start-worker", "--head-node", c.address, "--node-ip-address", "127.0.0.2", "--num-cpus", 1,
         "--data-dir", data, "--token", c.join_token, "--task-user", "nobody")
    code = tmp_path / "code"
    code.mkdir()
    (code / "secret_model.py").write_text("WEIGHTS = 'do not share'\n")
    # Running while its files are looked at (they go when the job ends).
    job_id, _ = c.submit("--no-wait", "--working-dir", code, "--", "cat secret_model.py; sleep 60")
    wait_until(lambda: "do not share" in c.ag("logs", job_id).stdout, 30, message="the task to read its file")
    package = data / "packages" / "jobs" / job_id
    assert stat.S_IMODE(os.stat(package).st_mode) == 0o700
    assert os.stat(package).st_uid == pwd.getpwnam("nobody").pw_uid
    other = pwd.getpwnam("daemon")  # another unprivileged account on this machine
    for path in (package / "secret_model.py", package, data / "tasks", data / "work"):
        looked = subprocess.run(["setpriv", f"--reuid={other.pw_uid}", f"--regid={other.pw_gid}", "--clear-groups",
                                 "cat" if path.suffix else "ls", str(path)],
                                capture_output=True, text=True, timeout=30)
        assert looked.returncode != 0 and "Permission denied" in looked.stderr, (path, looked)
    c.ag("stop-job", job_id)
    # A task without a package works in a folder of its own, as private.
    job_id, proc = c.submit("--", "pwd; ls -ld .")
    assert proc.returncode == 0 and proc.stdout.split("\n")[1].startswith("drwx------"), proc.stdout


LOOK_AT = r'''
import os, sys
for path in sys.argv[1:]:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path).read()
        print("READ", path)
    except OSError:
        print("DENIED", path)
print("uid", os.getuid(), "user", os.environ["USER"], "home", os.environ["HOME"])
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="accounts of their own need a worker running as root")
def test_on_a_shared_worker_each_users_tasks_run_as_their_own_account(cluster_factory, tmp_path):
    """A worker running as root (no --task-user) gives each user's tasks an account of
    their own: a task reads its own package, work dir and home, and nothing of another
    user's; the same user's jobs share theirs."""
    c = cluster_factory("accounts", workers=())
    data = c.worker_data_dir("127.0.0.2")
    c.ag("start-worker", "--head-node", c.address, "--node-ip-address", "127.0.0.2", "--num-cpus", 4,
         "--data-dir", data, "--token", c.join_token)
    tokens = {name: c.ag_json("user", "add", name)["token"] for name in ("alice", "bob")}

    def submit(user, *args):
        proc = c.ag("submit", "--no-wait", "--num-cpus", 0.5, *args, env={"AG_TOKEN": tokens[user]})
        job_id = proc.stdout.strip().splitlines()[-1]
        c.job_ids.add(job_id)
        return job_id

    code = tmp_path / "code"
    code.mkdir()
    (code / "secret_model.py").write_text("WEIGHTS = 'alice only'\n")
    packaged = submit("alice", "--working-dir", code, "--", "cat secret_model.py; sleep 60")
    working = submit("alice", "--", 'echo "$USER $(id -u) $HOME $PWD"; echo mine > note; echo mine > "$HOME/note"; '
                                    "sleep 60")
    wait_until(lambda: "alice only" in c.ag("logs", packaged).stdout, 30, message="alice's task to read her file")
    wait_until(lambda: c.ag("logs", working).stdout.strip(), 30, message="alice's second task to say who it is")
    user, uid, home, work_dir = c.ag("logs", working).stdout.split()
    assert user == "ag-alice" and int(uid) >= 1900000000 and home == str(data / "homes" / uid), (user, uid, home)
    assert os.stat(data / "packages" / "jobs" / packaged).st_uid == int(uid)  # one account for all her jobs

    look = tmp_path / "look.py"
    look.write_text(LOOK_AT)
    look.chmod(0o644)
    alices = [data / "packages" / "jobs" / packaged / "secret_model.py", data / "packages" / "jobs" / packaged,
              f"{work_dir}/note", work_dir, f"{home}/note", home]
    prying = submit("bob", "--", f"{PYTHON} {look} " + " ".join(str(p) for p in alices))
    assert c.wait_state(prying, "SUCCEEDED", timeout=30)
    out = c.ag("logs", prying).stdout
    assert out.count("DENIED") == len(alices) and "READ" not in out, out
    bob_uid = int(out.split("uid ")[1].split()[0])
    assert bob_uid != int(uid) and bob_uid >= 1900000000 and "user ag-bob" in out, out
    assert f"home {data / 'homes' / str(bob_uid)}" in out, out
    # Alice herself reads all of it.
    own = submit("alice", "--", f"{PYTHON} {look} " + " ".join(str(p) for p in alices))
    assert c.wait_state(own, "SUCCEEDED", timeout=30)
    out = c.ag("logs", own).stdout
    assert out.count("READ") == len(alices) and "DENIED" not in out, out
    kept = json.loads((data / "task-accounts.json").read_text())["accounts"]
    assert kept == {"alice": int(uid), "bob": bob_uid}, kept
    for job_id in (packaged, working):
        c.ag("stop-job", job_id)
