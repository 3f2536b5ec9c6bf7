"""Exceptions raised by the AetherGrid SDK.

Every error the SDK raises is an ``AGError``; callers that want to handle one kind
catch its subclass. All of them are importable both as ``aethergrid.exceptions.X`` and
as ``aethergrid.X``.
"""
import re

__all__ = [
    "AGError",
    "AGConnectionError",
    "AGAuthError",
    "AGPermissionError",
    "AGValidationError",
    "AGNotFoundError",
    "AGTimeoutError",
    "AGJobFailedError",
]

_FIELD_RE = re.compile(r"field '([^']+)'")


class AGError(Exception):
    """Base class of every AetherGrid SDK error.

    ``status`` is the HTTP status the head answered with, or None when the error was
    found on the client side (or no answer came back).
    """

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        self.status = status


class AGConnectionError(AGError):
    """The head could not be reached (refused, unresolvable, reset, or silent).

    ``address`` is the address that was tried; ``reason`` is the underlying OS error
    text. The original exception is not chained, so users see one clear message rather
    than a urllib/http.client traceback.
    """

    def __init__(self, message, address=None, reason=None):
        super().__init__(message)
        self.address = address
        self.reason = reason


class AGAuthError(AGError):
    """The head did not accept the caller's token (HTTP 401): none was given, or it is
    unknown, revoked, expired, or its user is disabled. The message says how to pass a
    user token (token=, token_file=, AG_TOKEN or AG_TOKEN_FILE)."""


class AGPermissionError(AGError):
    """The head knows the caller but does not allow the call (HTTP 403): e.g. stopping or
    reading the logs of another user's job, submitting as a viewer, or an admin-only call.

    ``message`` is the head's reason as is, e.g. ``job job_x belongs to alice; only its
    owner, members of the owner's groups and admins can stop it``; ``str(error)`` adds
    the request it refused.
    """

    def __init__(self, message, status=403, request=None):
        text = "{} refused (HTTP {}): {}".format(request, status, message) if request else message
        super().__init__(text, status)
        self.message = message
        self.request = request


class AGValidationError(AGError):
    """A request was refused as invalid (HTTP 400 or 413), or the SDK found it invalid
    before sending it.

    ``message`` is the head's message as is; it names the offending field, e.g.
    ``field 'num_workers': must be between 1 and 4096, got 0``. ``field`` is that field's
    name when the message names one (``"num_workers"``, ``"runtime_env.python"``), else
    None.
    """

    def __init__(self, message, status=None, field=None):
        super().__init__(message, status)
        if field is None:
            m = _FIELD_RE.search(message)
            field = m.group(1) if m else None
        self.field = field


class AGNotFoundError(AGError):
    """The head has no such object (HTTP 404), e.g. an unknown job id."""


class AGConflictError(AGError):
    """The request conflicts with what the head holds (HTTP 409): a submission_id
    already used for a job with another spec (the message names that job), or a job
    that has already finished. Job.exec raises it too when the job or task is not
    running, or the command could not be started beside the task (``status`` is None
    then: the reason came after the connection was upgraded)."""


class AGTimeoutError(AGError):
    """A wait ran out of time. The job keeps running; ``job_id`` names it, ``timeout``
    is the time waited in seconds, ``info`` the job as last seen. From Job.exec, the
    command was ended (its connection closed) and ``stdout`` and ``stderr`` hold the
    bytes it wrote before."""

    def __init__(self, message, job_id=None, timeout=None, info=None):
        super().__init__(message)
        self.job_id = job_id
        self.timeout = timeout
        self.info = info


class AGJobFailedError(AGError):
    """The job ended FAILED or STOPPED.

    ``message`` is the job's own reason, which names the task and its exit code or
    signal (``task 1 exited with code 3``), a lost node, a timeout, or why it could not
    start; when a task failed, its last lines of output follow on the next lines.
    ``info`` is the job's full JSON (``info["failure"]`` holds the failing task and its
    lines); ``state`` and ``job_id`` come from it.
    ``str(error)`` adds the job id and state to the message.
    """

    def __init__(self, message, info=None):
        info = info or {}
        self.job_id = info.get("job_id")
        self.state = info.get("state")
        text = message
        if self.job_id:
            text = "job {} {}: {}".format(self.job_id, self.state or "FAILED", message)
        super().__init__(text)
        self.message = message
        self.info = info
