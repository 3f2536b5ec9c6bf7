"""What a job can find of the cluster's credentials. A task looks for the token in its
own environment and in the environment and command line of every process above it
(its supervisor, the worker daemon, ...), and finds nothing. (Files are still readable
to a task that runs as the worker's own user: that part of issue 10 is not done.)"""
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
