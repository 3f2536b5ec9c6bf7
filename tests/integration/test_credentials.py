"""What a job can find of the cluster's credentials. A task looks for the token in its
own environment and in the environment and command line of every process above it
(its supervisor, the worker daemon, ...), and finds nothing. (Files are still readable
to a task that runs as the worker's own user: that part of issue 10 is not done.)"""
import os
import shlex
import stat
import subprocess

from conftest import PYTHON, read_environ, proc_cmdline

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
    assert [n["state"] for n in c.nodes()] == ["ALIVE"]


def test_the_join_line_start_head_prints_works_as_printed(cluster_factory, tmp_path):
    c = cluster_factory("joinline", start_head=False)
    out = c.start_head().stdout
    lines = out.splitlines()
    i = lines.index("To add a worker on another machine, run there (the join token can only add nodes):")
    save, join = lines[i + 1].strip(), lines[i + 2].strip()
    assert c.join_token.startswith("agj_") and c.join_token != c.token
    assert save == f"(umask 077; echo {c.join_token} > ~/.aethergrid-join-token)"
    assert join == f"ag start-worker --head-node {c.address} --token-file ~/.aethergrid-join-token"
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
