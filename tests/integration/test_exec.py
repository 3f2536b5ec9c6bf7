"""`ag exec`: a command beside a running task, through the head, over real daemons."""
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time

from conftest import AG_BIN, pid_alive, wait_until


def running_job(c, *args):
    job_id, _ = c.submit("--no-wait", *args, "--", "sleep", "120")
    job = c.wait_state(job_id, ["RUNNING"], timeout=30)
    assert job["state"] == "RUNNING", job
    c.wait_tasks_running(job_id, timeout=20)
    return job_id


def test_exec_runs_beside_the_task_with_its_environment_and_exit_code(cluster):
    c = cluster
    job_id = running_job(c, "-n", "2")
    proc = c.ag("exec", job_id, "--task-index", "1", "--", "sh", "-c",
                'echo "$RANK $AG_JOB_ID $(pwd)"; echo to-stderr >&2; exit 7', check=False)
    assert proc.returncode == 7, proc.stderr
    rank, job, cwd = proc.stdout.split()
    assert (rank, job) == ("1", job_id)
    assert proc.stderr == "to-stderr\n"
    # The task's own directory, and the task's own user.
    task_pid = c.job(job_id)["attempts"][-1]["tasks"][1]["pid"]
    assert cwd == os.readlink(f"/proc/{task_pid}/cwd")
    uid = c.ag("exec", job_id, "--task-index", "1", "--", "id", "-u").stdout.strip()
    assert int(uid) == os.stat(f"/proc/{task_pid}").st_uid
    # Input with -i.
    piped = subprocess.run([AG_BIN, "exec", "-i", job_id, "--", "wc", "-c"], input=b"x" * 300000, env=c.env,
                           capture_output=True, timeout=60)
    assert piped.returncode == 0 and piped.stdout.strip() == b"300000", piped
    # Each is on record.
    entries = c.ag_json("audit")["entries"]
    assert any(e["action"].startswith(f"exec {job_id} task 1: sh -c") and e["outcome"] == "ok" for e in entries)


def test_exec_refuses_bad_requests_with_the_reason(cluster):
    c = cluster
    job_id = running_job(c)
    missing = c.ag("exec", job_id, "--", "no-such-command-here", check=False)
    assert missing.returncode == 127 and "no-such-command-here: command not found" in missing.stderr, missing
    outside = c.ag("exec", job_id, "--task-index", "3", "--", "true", check=False)
    assert outside.returncode != 0 and "outside job" in outside.stderr and "gang of 1" in outside.stderr
    nothing = c.ag("exec", job_id, check=False)
    assert nothing.returncode == 2 and "give the command to run after `--`" in nothing.stderr
    unknown = c.ag("exec", "job_000000000000", "--", "true", check=False)
    assert unknown.returncode != 0 and "no job with id" in unknown.stderr
    c.ag("stop-job", job_id)
    c.wait_state(job_id, ["STOPPED"], timeout=30)
    ended = c.ag("exec", job_id, "--", "true", check=False)
    assert ended.returncode != 0 and "is STOPPED" in ended.stderr, ended.stderr


def test_another_users_job_is_refused(cluster):
    c = cluster
    alice, bob = (c.ag_json("user", "add", name)["token"] for name in ("alice", "bob"))
    proc = c.ag("submit", "--no-wait", "--", "sleep", "120", env={"AG_TOKEN": alice})
    job_id = proc.stdout.strip().splitlines()[-1]
    c.job_ids.add(job_id)
    c.wait_tasks_running(job_id)
    refused = c.ag("exec", job_id, "--", "true", check=False, env={"AG_TOKEN": bob})
    assert refused.returncode != 0 and "belongs to alice" in refused.stderr, refused.stderr
    assert c.ag("exec", job_id, "--", "true", check=False, env={"AG_TOKEN": alice}).returncode == 0
    entries = c.ag_json("audit")["entries"]
    assert any(e["actor"] == "bob" and e["action"].startswith(f"exec {job_id}") and "belongs to alice" in e["outcome"]
               for e in entries), entries


def test_a_client_that_goes_away_ends_the_command(cluster, tmp_path):
    c = cluster
    job_id = running_job(c)
    pid_file = tmp_path / "exec.pid"
    client = subprocess.Popen([AG_BIN, "exec", job_id, "--", "sh", "-c", f"echo $$ > {pid_file}; exec sleep 300"],
                              env=c.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 20, message="the command to start")
        remote = int(pid_file.read_text())
        assert pid_alive(remote)
        client.kill()
        client.wait(10)
        wait_until(lambda: not pid_alive(remote), 15, message="the command to end after its client left")
    finally:
        if client.poll() is None:
            client.kill()


def test_all_ranks_prefixes_each_line_with_its_rank(cluster):
    c = cluster
    job_id = running_job(c, "-n", "2")
    proc = c.ag("exec", "--all-ranks", job_id, "--", "sh", "-c", 'echo "a $RANK"; printf "b $RANK"', check=False)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == ["[rank 0] a 0", "[rank 0] b 0", "[rank 1] a 1", "[rank 1] b 1"]
    # The first rank that fails decides the exit code, and each error names its rank.
    failing = c.ag("exec", "--all-ranks", job_id, "--", "sh", "-c", 'exit $((RANK + 3))', check=False)
    assert failing.returncode == 3, failing
    both = c.ag("exec", "--all-ranks", "--task-index", "1", job_id, "--", "true", check=False)
    assert both.returncode == 2 and "give one of them" in both.stderr, both.stderr
    with_input = c.ag("exec", "--all-ranks", "-i", job_id, "--", "cat", check=False)
    assert with_input.returncode == 2 and "drop -i and -t" in with_input.stderr, with_input.stderr


def set_window(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Terminal:
    """`ag` run on a real pseudo-terminal, as from an interactive shell."""

    def __init__(self, env, args, rows=40, cols=100):
        self.master, self.slave = pty.openpty()
        set_window(self.slave, rows, cols)
        self.proc = subprocess.Popen([AG_BIN, *args], env=dict(env, TERM="xterm-256color"), stdin=self.slave,
                                     stdout=self.slave, stderr=self.slave, start_new_session=True)
        self.seen = b""

    def read_until(self, needle, timeout=20):
        deadline = time.monotonic() + timeout
        while needle not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"{needle!r} did not show on the terminal; it shows {self.seen!r}"
            if select.select([self.master], [], [], min(left, 0.5))[0]:
                try:
                    self.seen += os.read(self.master, 65536)
                except OSError:  # every writer is gone
                    time.sleep(0.1)
        return self.seen

    def send(self, data):
        os.write(self.master, data)

    def wait(self, timeout=20):
        code = self.proc.wait(timeout)
        try:  # what was left on the terminal
            while select.select([self.master], [], [], 0.2)[0]:
                self.seen += os.read(self.master, 65536)
        except OSError:
            pass
        return code

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.master)
        os.close(self.slave)


def test_exec_with_a_terminal_follows_its_size_and_keys(cluster):
    c = cluster
    job_id = running_job(c)
    term = Terminal(c.env, ["exec", "-it", job_id, "--", "sh", "-c",
                            'stty size; echo "term=$TERM tty=$(tty)"; read line; stty size; echo "got $line"'])
    try:
        term.read_until(b"40 100")
        term.read_until(b"term=xterm-256color tty=/dev/pts/")
        # ag's own terminal is raw meanwhile: the remote side echoes.
        mode = termios.tcgetattr(term.slave)
        assert not mode[3] & termios.ICANON and not mode[3] & termios.ECHO
        # A resize reaches the remote terminal.
        set_window(term.slave, 50, 120)
        term.proc.send_signal(signal.SIGWINCH)
        time.sleep(0.5)
        term.send(b"hello\r")
        term.read_until(b"got hello")
        assert b"50 120" in term.seen, term.seen
        assert term.wait() == 0
        # The local terminal is back as it was.
        mode = termios.tcgetattr(term.slave)
        assert mode[3] & termios.ICANON and mode[3] & termios.ECHO
    finally:
        term.close()
    # Ctrl-C reaches the remote command (the remote terminal makes it SIGINT); Ctrl-D
    # is the end of input.
    term = Terminal(c.env, ["exec", "-it", job_id, "--", "sh", "-c", "echo ready; exec sleep 300"])
    try:
        term.read_until(b"ready")
        term.send(b"\x03")
        assert term.wait() == 128 + signal.SIGINT
    finally:
        term.close()
    term = Terminal(c.env, ["exec", "-it", job_id, "--", "sh", "-c", "echo ready; cat; echo cat-ended"])
    try:
        term.read_until(b"ready")
        term.send(b"\x04")
        term.read_until(b"cat-ended")
        assert term.wait() == 0
    finally:
        term.close()


def test_a_terminal_is_refused_without_one_here(cluster):
    c = cluster
    job_id = running_job(c)
    proc = c.ag("exec", "-it", job_id, "--", "bash", check=False)
    assert proc.returncode == 2, proc
    assert "-t needs a terminal here" in proc.stderr and "drop -t" in proc.stderr, proc.stderr


def test_a_plain_request_on_the_exec_route_says_it_takes_a_websocket(cluster):
    c = cluster
    job_id = running_job(c)
    status, body = c.api("GET", f"/api/jobs/{job_id}/exec?command=true")
    assert status == 426 and "WebSocket" in body["error"], (status, body)
    status, body = c.api("GET", f"/api/jobs/{job_id}/exec?command=true&task_index=9")
    assert status == 400 and "outside job" in body["error"], (status, body)
