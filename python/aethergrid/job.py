"""Job: a handle on one submitted job. Cheap to create; every method asks the head."""
import codecs
import math
import time
import urllib.parse

from . import _exec
from .exceptions import AGJobFailedError, AGTimeoutError

TERMINAL_STATES = ("SUCCEEDED", "FAILED", "STOPPED")
FAILED_STATES = ("FAILED", "STOPPED")
# The head answers a long poll after at most this long (its own cap).
MAX_WAIT_MS = 60000
# How long one tail_logs long poll waits for new output before asking again.
TAIL_WAIT_MS = 25000
# How long tail_logs(task_index=None) pauses after an empty answer (a head that does not
# wait for lines on its side: wait_ms).
LINES_POLL_S = 0.3


def failure_text(info):
    """A FAILED or STOPPED job's reason, and for a failed task its last lines of output
    (at most 50 lines / 8 KiB, as the head kept them) under it."""
    text = info.get("message") or "job {}".format(str(info.get("state", "failed")).lower())
    failure = info.get("failure") or {}
    lines = failure.get("last_lines")
    if lines:
        text += "\nlast lines of task {} (attempt {}, node {}):\n{}".format(
            failure.get("task_index"), failure.get("attempt"), failure.get("node_id"), lines.rstrip("\n"))
    return text


class Job:
    """One job on the cluster, by id. Methods raise AGConnectionError, AGAuthError or
    AGNotFoundError (unknown id) besides what each one documents; stop(), exec() and
    the log methods raise AGPermissionError when the job is another user's (only its
    owner, members of the owner's groups and admins may act on it)."""

    def __init__(self, client, job_id):
        self._client = client
        self.job_id = job_id

    def __repr__(self):
        return "Job({!r})".format(self.job_id)

    def __eq__(self, other):
        return isinstance(other, Job) and other.job_id == self.job_id

    def __hash__(self):
        return hash(self.job_id)

    @property
    def _path(self):
        return "/api/jobs/" + urllib.parse.quote(self.job_id, safe="")

    def _get(self, suffix="", **kwargs):
        return self._client._transport.request("GET", self._path + suffix, **kwargs)

    def info(self):
        """The job's full JSON as a dict: state, message, owner, spec, attempts and tasks,
        and caller_may_act (whether this client's user may stop it and read its logs).
        For a caller who may not, spec.runtime_env has no env_vars and says
        env_vars_hidden: true."""
        return self._get().json()

    def owner(self):
        """The name of the user who submitted the job."""
        return self.info().get("owner")

    def status(self):
        """The job's state: PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED."""
        return self.info()["state"]

    def wait(self, timeout=None):
        """Blocks until the job ends; returns its info when it SUCCEEDED.

        Raises AGJobFailedError (with the job's reason, which names the task and exit
        code) when it ended FAILED or STOPPED, and AGTimeoutError once `timeout`
        seconds pass (the job keeps running). Uses the head's long poll, so it wakes the
        moment the job ends and sends one request per minute at most while it waits.
        """
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        while True:
            if deadline is None:
                wait_ms = MAX_WAIT_MS
            else:
                remaining = deadline - time.monotonic()
                wait_ms = max(0, min(MAX_WAIT_MS, int(math.ceil(remaining * 1000))))
            info = self._get("/wait", query={"timeout_ms": wait_ms},
                             extra_timeout=wait_ms / 1000.0).json()
            state = info.get("state")
            if state == "SUCCEEDED":
                return info
            if state in FAILED_STATES:
                raise AGJobFailedError(failure_text(info), info)
            if deadline is not None and time.monotonic() >= deadline:
                raise AGTimeoutError(
                    "job {} did not finish within {:g} s (it is {}; it keeps running: call "
                    "stop() to end it)".format(self.job_id, timeout, state),
                    job_id=self.job_id, timeout=timeout, info=info)

    def get_error_message(self):
        """Why the job FAILED or was STOPPED (names the task and exit code or signal,
        followed by the failing task's last lines of output), or None while it is not in
        one of those states."""
        info = self.info()
        if info.get("state") in FAILED_STATES:
            return failure_text(info)
        return None

    def stop(self):
        """Asks the head to stop the job: every process of every task gets SIGTERM, then
        SIGKILL after the grace period. Returns the head's answer ({job_id, state})."""
        return self._client._transport.request("POST", self._path + "/stop", retry=True).json()

    def hold(self):
        """Holds the pending job: it leaves the queue (keeping its place) until release().
        AGConflictError when it is not pending. Returns {job_id, state, held_by, message}."""
        return self._client._transport.request("POST", self._path + "/hold", retry=True).json()

    def release(self):
        """Releases the held job: it joins the queue again. AGConflictError when it is not
        held. Returns {job_id, state, held_by, message}."""
        return self._client._transport.request("POST", self._path + "/release", retry=True).json()

    def delete(self):
        """Deletes the finished job for good: its record, events, logs and (when no other
        job has it) its working_dir package. AGConflictError while it is not finished
        (stop() it first); AGNotFoundError once it is gone."""
        return self._client._transport.request("DELETE", self._path).json()

    def exec(self, command, task_index=0, stdin=None, timeout=None):
        """Runs `command` beside task `task_index` of the running job, as `ag exec` does:
        on that task's node, in its directory, as its user, with its environment (RANK,
        AG_JOB_ID, its env_vars...). Returns ExecResult(exit_code, stdout, stderr), a
        named tuple: `code, out, err = job.exec(["nvidia-smi"])`.

        command: a list of strings, run as it is (no shell), or a string, run through
        `sh -c` like a job's entrypoint. exit_code: the command's exit code, or -N when
        signal N killed it (as subprocess's returncode; `ag exec` exits 128+N instead).
        stdout, stderr: all it wrote, as bytes, kept in memory (for endless output, use
        `ag exec` or write to a file). stdin: bytes or str (sent as UTF-8) the command
        reads, then end of file; without it the command's stdin is empty.
        timeout: seconds for the whole call; when they pass the connection is closed,
        which ends the command (SIGHUP to its process group, SIGKILL 5 s later), and
        AGTimeoutError is raised with the output so far in its `stdout` and `stderr`.

        Raises AGValidationError (a bad argument; the head's reason, e.g. a task_index
        outside the job's gang), AGConflictError (the job or task is not running, e.g.
        "job ... is SUCCEEDED", or the command could not be started on the node), and
        AGConnectionError when the connection breaks before the command ends. The head
        keeps every exec in its audit log. Not retried: a command never runs twice.
        """
        return _exec.run(self._client._transport, self._path, self.job_id, _exec.command_argv(command),
                         task_index, _exec.stdin_bytes(stdin), timeout)

    def stacks(self, task_index=None):
        """The Python stacks of every thread of every process of the running job's tasks
        (or of task `task_index` only), as `ag stack` prints them: where a hang waits.
        Returns a list of {"task_index", "node_id", "python", "stacks", "error"}, one per
        running task: `stacks` is the text (for a task with no Python process, its
        process tree, and `python` is False); `error` says why a task's could not be
        taken (its node did not answer), else None. The head keeps them in the job's
        events too. Raises AGValidationError for a task_index outside the gang and
        AGConflictError when the job is not running."""
        query = {} if task_index is None else {"task_index": task_index}
        return self._client._transport.request("POST", self._path + "/stacks", query=query,
                                               extra_timeout=15.0).json()["tasks"]

    def events(self):
        """The job's event log: a list of {"time_ms", "message"}, oldest first."""
        return self._get("/events").json().get("events", [])

    def _logs(self, task_index, attempt, offset, wait_ms=0):
        query = {"task_index": task_index, "offset": offset}
        if attempt is not None:
            query["attempt"] = attempt
        if wait_ms:
            query["wait_ms"] = wait_ms
        return self._get("/logs", query=query, extra_timeout=wait_ms / 1000.0)

    def get_logs(self, task_index=None, attempt=None, tail=None, since=None, timestamps=False):
        """The output (stdout and stderr) so far, as text.

        task_index: one task's output; by default every task's, its lines interleaved in
        the order the head received them and (with several tasks) each prefixed
        "[rank N] ", as `ag logs` shows them. attempt: a retry (0 is the first run); by
        default the latest one. tail: only the last N lines. since: only lines received
        at or after this time (seconds since the epoch, as time.time() gives).
        timestamps: each line after the UTC time the head received it.
        """
        if task_index is None and tail is None and since is None and not timestamps:
            if self.info().get("num_workers", 1) == 1:
                task_index = 0
        if task_index is None or tail is not None or since is not None or timestamps:
            return self._get_lines(task_index, attempt, tail, since, timestamps)
        parts = []
        offset = 0
        while True:
            response = self._logs(task_index, attempt, offset)
            if attempt is None:
                attempt = _int_header(response, "X-AG-Attempt", None)
            if not response.body:
                break
            parts.append(response.body)
            offset = _int_header(response, "X-AG-Next-Offset", offset + len(response.body))
            if response.header("X-AG-Log-Complete") == "1":
                break
        return b"".join(parts).decode("utf-8", "replace")

    def _get_lines(self, task_index, attempt, tail, since, timestamps):
        """get_logs through GET .../lines, page after page."""
        query = {}
        if task_index is not None:
            query["task_index"] = task_index
        if attempt is not None:
            query["attempt"] = attempt
        if tail is not None:
            query["tail"] = int(tail)
        if since is not None:
            query["since_ms"] = max(0, int(float(since) * 1000))
        out = []
        pieces = {}
        while True:
            page = self._get("/lines", query=query).json()
            out.append(_render_lines(page, timestamps, pieces))
            # Page after page until the head has nothing more to give now ("more"; a
            # tail or since read goes on from where its first page ended).
            if not page.get("more", False):
                break
            query = {"attempt": page["attempt"], "from": ",".join(str(n) for n in page["next"])}
            if task_index is not None:
                query["task_index"] = task_index
        return "".join(out)

    def tail_logs(self, task_index=0):
        """Yields task `task_index`'s output as text chunks as it is written, from the
        start, until the job ends. When the job retries, follows the new attempt.

        Long polls the head (no busy polling): each request returns as soon as new bytes
        arrive or the task ends.

        task_index=None: every task's output, as whole lines in the order the head
        received them, each prefixed "[rank N] " when the job has several tasks (as
        get_logs() and `ag logs --follow` show them). Each request waits on the head
        (wait_ms) until lines come or the tasks end.
        """
        if task_index is None:
            yield from self._tail_lines()
            return
        attempt = None
        offset = 0
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            response = self._logs(task_index, attempt, offset, wait_ms=TAIL_WAIT_MS)
            if attempt is None:
                attempt = _int_header(response, "X-AG-Attempt", 0)
            if response.body:
                offset = _int_header(response, "X-AG-Next-Offset", offset + len(response.body))
                text = decoder.decode(response.body)
                if text:
                    yield text
            if response.header("X-AG-Log-Complete") != "1":
                continue
            # This attempt's log is over. Follow a retry if the job makes one.
            info = self._wait_for_attempt(attempt + 1)
            if info.get("num_attempts", len(info.get("attempts", []))) <= attempt + 1:
                tail = decoder.decode(b"", final=True)
                if tail:
                    yield tail
                return
            attempt += 1
            offset = 0
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def _tail_lines(self):
        """tail_logs(task_index=None): every task's lines through GET .../lines."""
        # A pending job has no log yet: wait for its first attempt (a long poll).
        info = self._wait_for_attempt(0)
        if not info.get("num_attempts", len(info.get("attempts", []))):
            return  # it ended before it ever started
        attempt = None
        query = {}
        pieces = {}
        while True:
            page = self._get("/lines", query=dict(query, wait_ms=TAIL_WAIT_MS),
                             extra_timeout=TAIL_WAIT_MS / 1000.0).json()
            if attempt is None:
                attempt = page["attempt"]
            text = _render_lines(page, False, pieces)
            if text:
                yield text
            query = {"attempt": attempt, "from": ",".join(str(n) for n in page["next"])}
            if not page["complete"]:
                if not page["lines"]:
                    time.sleep(LINES_POLL_S)
                continue
            # This attempt's lines are all out. Follow a retry if the job makes one.
            info = self._wait_for_attempt(attempt + 1)
            if info.get("num_attempts", len(info.get("attempts", []))) <= attempt + 1:
                return
            attempt += 1
            query = {"attempt": attempt}

    def _wait_for_attempt(self, number):
        """The job once it has attempt `number` (0-based) or has ended."""
        while True:
            info = self._get("/wait", query={"timeout_ms": MAX_WAIT_MS, "attempts_at_least": number + 1},
                             extra_timeout=MAX_WAIT_MS / 1000.0).json()
            if info.get("state") in TERMINAL_STATES or info.get("num_attempts", 0) > number:
                return info


def _render_lines(page, timestamps, pieces):
    """A page of GET .../lines as `ag logs` prints it: "[rank N] " before each line when
    the job has several tasks, the time with `timestamps`. A line longer than a page comes
    in pieces (a 4th element, true): they wait in `pieces` ({task: (time, text)}, kept
    from page to page) and the line is printed whole with its last piece."""
    several = len(page["tasks"]) > 1
    out = []
    for entry in page["lines"]:
        index, time_ms, text = entry[0], entry[1], entry[2]
        started = pieces.pop(index, None)
        if started:
            time_ms, text = started[0], started[1] + text
        if len(entry) > 3 and entry[3]:
            pieces[index] = (time_ms, text)
            continue
        stamp = _utc_timestamp(time_ms) + " " if timestamps else ""
        out.append(stamp + ("[rank {}] ".format(index) if several else "") + text + "\n")
    return "".join(out)


def _utc_timestamp(ms):
    """'2026-12-01T11:48:03.123Z', as `ag logs --timestamps` prints it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".{:03d}Z".format(ms % 1000)


def _int_header(response, name, default):
    value = response.header(name)
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class JobArray:
    """A job array (Client.submit_array): one job per index, each a Job with id
    "ARRAY_ID_INDEX" that sees AG_ARRAY_INDEX; this handle acts on them all."""

    def __init__(self, client, array_id):
        self._client = client
        self.array_id = array_id
        self._path = "/api/jobs/" + urllib.parse.quote(array_id, safe="")

    def __repr__(self):
        return "JobArray({!r})".format(self.array_id)

    def info(self):
        """{"array_id", "size", "max_running", "state", "counts": {STATE: n},
        "elements": [job summaries, by index]}. The state is RUNNING while any element
        runs, else PENDING while any waits, else FAILED or STOPPED if any ended so, else
        SUCCEEDED."""
        return self._client._transport.request("GET", self._path).json()

    def status(self):
        return self.info()["state"]

    def jobs(self):
        """The elements as Jobs, by index."""
        return [Job(self._client, e["job_id"]) for e in self.info()["elements"]]

    def _act(self, action):
        return self._client._transport.request("POST", self._path + "/" + action, retry=True).json()

    def stop(self):
        """Stops every element not finished. Returns {"array_id", "action", "jobs"}."""
        return self._act("stop")

    def hold(self):
        """Holds every pending element."""
        return self._act("hold")

    def release(self):
        """Releases every held element."""
        return self._act("release")

    def wait(self, timeout=None):
        """Blocks until every element ended; returns info() when all SUCCEEDED. Raises
        AGJobFailedError naming the elements that FAILED or were STOPPED (its `info` is
        the array's), and AGTimeoutError once `timeout` seconds pass."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        for job in self.jobs():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                job.wait(timeout=left)
            except AGJobFailedError:
                pass  # counted below, with the others
        info = self.info()
        failed = [e for e in info["elements"] if e["state"] in FAILED_STATES]
        if failed:
            raise AGJobFailedError("{} of {} jobs of array {} did not succeed: {}".format(
                len(failed), info["size"], self.array_id,
                "; ".join("{} {}: {}".format(e["job_id"], e["state"], e.get("message", "")) for e in failed[:5])),
                info)
        return info
