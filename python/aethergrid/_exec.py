"""Job.exec: a command beside a running task, as `ag exec` runs it.

The wire is the head's exec route: a WebSocket on
GET /api/jobs/JOB/exec?task_index=N&command=ARG...[&stdin=1], refused before the upgrade
with an ordinary HTTP error (mapped as every REST error is). After the upgrade every
message is binary, [channel: 1 byte][bytes]: channel 0 carries stdin from here (an empty
one closes the command's stdin), 1 stdout, 2 stderr, and 3 one status as JSON
({"exit_code": N}, {"signal": N} or {"error": why it did not run}), after which the head
closes. Closing the WebSocket early ends the command (SIGHUP to its process group,
SIGKILL 5 s later).

Output is read while stdin is written (one thread, a non-blocking socket), and stdin is
queued only a little ahead of the socket: a command that echoes its input back (cat) is
held back by its pipes, never deadlocked against this client.
"""
import collections
import json
import time

from . import _websocket
from .exceptions import AGConflictError, AGConnectionError, AGError, AGTimeoutError, AGValidationError

CHANNEL_STDIN = 0
CHANNEL_STDOUT = 1
CHANNEL_STDERR = 2
CHANNEL_STATUS = 3
# Stdin goes out in chunks of the head's own size, queued while less than this waits.
STDIN_CHUNK_BYTES = 64 << 10
STDIN_QUEUE_BYTES = 512 << 10

ExecResult = collections.namedtuple("ExecResult", ["exit_code", "stdout", "stderr"])
ExecResult.__doc__ = """How a command run by Job.exec ended: `exit_code` (negative -N when
signal N killed it), and all it wrote to `stdout` and `stderr`, as bytes."""


def command_argv(command):
    """The argument list a `command` stands for: a string runs through `sh -c` (like a
    job's entrypoint), a list or tuple of strings runs as it is. Raises
    AGValidationError for anything else, or an empty list."""
    if isinstance(command, str):
        if not command.strip():
            raise AGValidationError("the command to run is empty")
        return ["sh", "-c", command]
    if not isinstance(command, (list, tuple)) or not command:
        raise AGValidationError("command must be a string (run through `sh -c`) or a non-empty list of "
                                "strings, got {!r}".format(command))
    for arg in command:
        if not isinstance(arg, str):
            raise AGValidationError("every argument of the command must be a string, got {!r} in {!r}".format(
                arg, command))
    return list(command)


def stdin_bytes(stdin):
    """`stdin` as bytes (a str is encoded as UTF-8), or None when none is given."""
    if stdin is None or isinstance(stdin, bytes):
        return stdin
    if isinstance(stdin, str):
        return stdin.encode("utf-8")
    if isinstance(stdin, (bytearray, memoryview)):
        return bytes(stdin)
    raise AGValidationError("stdin must be bytes or str, got {}".format(type(stdin).__name__))


def run(transport, job_path, job_id, command, task_index, stdin, timeout):
    """Runs `command` (a list of strings) beside task `task_index` of the job at
    `job_path`; returns its ExecResult. See Job.exec for what it raises."""
    if isinstance(task_index, bool) or not isinstance(task_index, int):
        raise AGValidationError("task_index must be a whole number, got {!r}".format(task_index))
    if timeout is not None:
        timeout = float(timeout)
    deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
    query = [("task_index", str(task_index))] + [("command", arg) for arg in command]
    if stdin is not None:
        query.append(("stdin", "1"))
    session = _Session(transport, job_id, command, task_index, timeout, deadline)
    ws = session.open(job_path + "/exec", query)
    try:
        return session.relay(ws, _StdinFeed(stdin) if stdin is not None else None)
    finally:
        ws.close()


class _StdinFeed:
    """Queues `data` for the command's stdin a chunk at a time, then the empty message
    that closes it, while little is queued on the WebSocket."""

    def __init__(self, data):
        self._data = memoryview(data)
        self._at = 0
        self.done = False

    def fill(self, ws):
        self.done = self.done or not ws.sending
        while not self.done and ws.queued_bytes < STDIN_QUEUE_BYTES:
            chunk = self._data[self._at:self._at + STDIN_CHUNK_BYTES]
            ws.send_binary(bytes((CHANNEL_STDIN,)) + chunk)
            self._at += len(chunk)
            self.done = not chunk


class _Session:
    """One exec call: its WebSocket's opening, the relay of its channels, and the errors
    that name the command and the job."""

    def __init__(self, transport, job_id, command, task_index, timeout, deadline):
        self._transport = transport
        self._job_id = job_id
        self._command = command
        self._task_index = task_index
        self._timeout = timeout
        self._deadline = deadline
        self._stdout = bytearray()
        self._stderr = bytearray()

    def open(self, path, query):
        handshake_timeout = self._transport.timeout
        if self._deadline is not None:
            handshake_timeout = min(handshake_timeout, max(0.001, self._deadline - time.monotonic()))
        try:
            return _websocket.open_websocket(self._transport, path, query, timeout=handshake_timeout)
        except AGConnectionError:
            if self._deadline is not None and time.monotonic() >= self._deadline:
                raise self._timed_out() from None
            raise
        except _websocket.WebSocketError as e:
            raise self._broken(str(e)) from None

    def relay(self, ws, stdin):
        """Passes stdin out and collects stdout and stderr until the status comes."""
        while True:
            if stdin is not None:
                stdin.fill(ws)
            if self._deadline is not None and time.monotonic() >= self._deadline:
                raise self._timed_out()
            try:
                messages = ws.pump(self._deadline)
            except _websocket.WebSocketError as e:
                raise self._broken(str(e)) from None
            except OSError as e:
                raise self._broken("{} ({})".format(e.strerror or e, type(e).__name__)) from None
            for opcode, payload in messages:
                if opcode != _websocket.OP_BINARY or not payload:
                    continue
                channel = payload[0]
                if channel == CHANNEL_STDOUT:
                    self._stdout += memoryview(payload)[1:]
                elif channel == CHANNEL_STDERR:
                    self._stderr += memoryview(payload)[1:]
                elif channel == CHANNEL_STATUS:
                    return ExecResult(self._exit_code(payload[1:]), bytes(self._stdout), bytes(self._stderr))
            if ws.closed:
                raise self._broken("{} before the command ended".format(ws.close_reason))

    def _exit_code(self, text):
        """The exit code a status stands for (-N for signal N); raises AGConflictError
        for the reason the command did not run."""
        try:
            status = json.loads(text.decode("utf-8"))
        except ValueError:
            status = None
        if not isinstance(status, dict):
            raise AGError("the head sent an exec status that is not a JSON object: {!r}".format(text[:200]))
        if isinstance(status.get("error"), str) and status["error"]:
            raise AGConflictError("cannot run {} in task {} of job {}: {}".format(
                self._shown_command(), self._task_index, self._job_id, status["error"]))
        if isinstance(status.get("signal"), int):
            return -status["signal"]
        if isinstance(status.get("exit_code"), int):
            return status["exit_code"]
        raise AGError("the head sent an exec status with neither exit_code, signal nor error: {!r}".format(
            text[:200]))

    def _shown_command(self):
        line = " ".join(self._command)
        return repr(line if len(line) <= 80 else line[:77] + "...")

    def _timed_out(self):
        error = AGTimeoutError(
            "{} in task {} of job {} did not finish within {:g} s; the connection was closed, "
            "which ends the command (SIGHUP, then SIGKILL 5 s later); the job keeps running".format(
                self._shown_command(), self._task_index, self._job_id, self._timeout),
            job_id=self._job_id, timeout=self._timeout)
        error.stdout = bytes(self._stdout)
        error.stderr = bytes(self._stderr)
        return error

    def _broken(self, why):
        address = self._transport.address
        return AGConnectionError("the exec connection to the AetherGrid head at {} broke off while {} ran "
                                 "in task {} of job {}: {}".format(
                                     address, self._shown_command(), self._task_index, self._job_id, why),
                                 address=address, reason=why)
