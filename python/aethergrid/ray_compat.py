"""Ray Jobs' client on AetherGrid: a script written for `ray.job_submission` runs with
only its import line changed.

    from aethergrid import JobSubmissionClient, JobStatus   # was: from ray.job_submission import ...

    client = JobSubmissionClient("http://HEAD:8265")
    submission_id = client.submit_job(entrypoint="python train.py",
                                      runtime_env={"working_dir": "./", "env_vars": {"EPOCHS": "3"}},
                                      entrypoint_num_gpus=1, metadata={"num_workers": "2"})
    while client.get_job_status(submission_id) not in {JobStatus.SUCCEEDED, JobStatus.STOPPED,
                                                       JobStatus.FAILED}:
        time.sleep(1)
    print(client.get_job_logs(submission_id))

Each method is one of Ray's, with its name, arguments and return shape, carried out by
the SDK's Client and Job (this module sends no request of its own). A Ray submission is
an AetherGrid job: its entrypoint runs as a gang of `num_workers` tasks (1 unless the
`num_workers=` keyword or metadata["num_workers"] says more), each with the
entrypoint_num_cpus/gpus/memory Ray reserves for the entrypoint. What AetherGrid does
not do is refused when the job is submitted, with what to use instead: runtime_env
pip/uv/conda (a virtualenv on the workers with runtime_env={"python": {"executable":
...}}, or an image), py_modules (working_dir), container (image_uri), custom
entrypoint_resources (node labels and constraints).

Errors: the SDK's own exceptions, made to match what Ray raises as well: an unknown job
raises JobNotFoundError (an AGNotFoundError and a RuntimeError), deleting a running job
or reusing a submission_id for another job raises JobConflictError (an AGConflictError
and a RuntimeError), and an argument AetherGrid cannot honour raises
JobSubmissionValueError (an AGValidationError and a ValueError). Connection and
permission errors are the SDK's as they are.
"""
import asyncio
import concurrent.futures
import contextlib
import dataclasses
import enum
import os
import secrets
import string
import threading
from typing import Any, Dict, Optional

from .client import JOB_KEYS, Client
from .exceptions import AGConflictError, AGNotFoundError, AGValidationError
from .job import Job, failure_text

__all__ = ["JobSubmissionClient", "JobStatus", "JobType", "JobDetails", "JobNotFoundError",
           "JobConflictError", "JobSubmissionValueError"]


class JobNotFoundError(AGNotFoundError, RuntimeError):
    """No job has this job id or submission id (Ray raises RuntimeError here)."""


class JobConflictError(AGConflictError, RuntimeError):
    """The job is not in a state that allows the call (deleting a job that has not
    ended), or a submission_id was already used for another job (Ray raises
    RuntimeError here)."""


class JobSubmissionValueError(AGValidationError, ValueError):
    """An argument AetherGrid cannot honour (a runtime_env key it does not support, a
    custom resource, a fractional GPU, ...); the message says what to use instead."""


class JobStatus(str, enum.Enum):
    """A job's status, as Ray names it: a str, so JobStatus.SUCCEEDED == "SUCCEEDED"."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    def __str__(self):
        return self.value

    def is_terminal(self):
        """True for STOPPED, SUCCEEDED and FAILED: the job will not change again."""
        return self.value in ("STOPPED", "SUCCEEDED", "FAILED")


class JobType(str, enum.Enum):
    """Ray's job types. Every AetherGrid job is a SUBMISSION."""

    SUBMISSION = "SUBMISSION"
    DRIVER = "DRIVER"


# Ray's messages for a job whose own message says nothing more.
_DEFAULT_MESSAGES = {
    "PENDING": "Job has not started yet.",
    "RUNNING": "Job is currently running.",
    "STOPPED": "Job was intentionally stopped.",
    "SUCCEEDED": "Job finished successfully.",
    "FAILED": "Job failed.",
}


@dataclasses.dataclass
class JobDetails:
    """One job, with Ray's JobDetails attribute names.

    job_id is AetherGrid's job id (what `ag status`, `ag logs` and the dashboard show);
    submission_id is the id submit_job returned. Both work with every method. start_time
    is when the job was submitted and end_time when it ended (ms since the epoch, None
    while it runs), as in Ray. entrypoint_num_cpus/gpus/memory are what each task
    holds; num_workers (an AetherGrid addition) is how many tasks the gang has.
    """

    type: JobType
    job_id: Optional[str]
    submission_id: Optional[str]
    driver_info: Any
    status: JobStatus
    entrypoint: str
    message: Optional[str] = None
    error_type: Optional[str] = None
    start_time: Optional[int] = None
    end_time: Optional[int] = None
    metadata: Optional[Dict[str, str]] = None
    runtime_env: Optional[Dict[str, Any]] = None
    driver_agent_http_address: Optional[str] = None
    driver_node_id: Optional[str] = None
    driver_exit_code: Optional[int] = None
    entrypoint_num_cpus: Optional[float] = None
    entrypoint_num_gpus: Optional[int] = None
    entrypoint_memory: Optional[int] = None
    entrypoint_resources: Optional[Dict[str, float]] = None
    attempt_number: int = 0
    num_workers: int = 1
    name: Optional[str] = None
    owner: Optional[str] = None

    def dict(self):
        """The fields as a plain dict (status and type as strings), as pydantic's dict()."""
        out = dataclasses.asdict(self)
        out["status"] = str(self.status)
        out["type"] = self.type.value
        return out


# runtime_env keys that go to AetherGrid as they are, and those that change name.
_PASSED_KEYS = ("working_dir", "env_vars", "excludes", "python", "image", "mounts")
_RENAMED_KEYS = {"py_executable": "python", "image_uri": "image"}

_VENV_HINT = ("make the packages part of an interpreter on the workers (a virtualenv) and "
              "pass runtime_env={'python': {'executable': '/path/venv/bin/python'}} "
              "(`ag submit --python`), or run the job in an image that has them: "
              "runtime_env={'image_uri': 'registry/name:tag'} (`ag submit --image`)")
_REFUSED_KEYS = {
    "pip": "AetherGrid installs no packages per job: " + _VENV_HINT,
    "uv": "AetherGrid installs no packages per job: " + _VENV_HINT,
    "conda": "AetherGrid makes no conda environment per job: " + _VENV_HINT +
             "; a conda env's own python works as the executable too",
    "py_modules": "AetherGrid ships one folder per job: put the modules inside working_dir "
                  "(it is the tasks' current directory), or point env_vars PYTHONPATH at "
                  "their folder on the workers ({'PYTHONPATH': '/opt/lib:$PYTHONPATH'})",
    "container": "use runtime_env={'image_uri': 'registry/name:tag'} (AetherGrid's 'image', "
                 "`ag submit --image`), with 'mounts' for node folders; AetherGrid chooses "
                 "the container's run options itself",
    "java_jars": "AetherGrid runs no JVM workers; ship the jars in working_dir",
    "config": "AetherGrid has no runtime_env set-up phase to configure; leave 'config' out",
}


def _refuse(message, field=None):
    raise JobSubmissionValueError(message, field=field)


def _runtime_env(runtime_env):
    """Ray's runtime_env as AetherGrid's: working_dir, env_vars and excludes as they
    are, py_executable -> python, image_uri -> image (AetherGrid's own python, image
    and mounts pass too); anything else refused, saying what to use."""
    if runtime_env is None:
        return None
    if not isinstance(runtime_env, dict):
        _refuse("runtime_env must be a dict, got {}".format(type(runtime_env).__name__), "runtime_env")
    out = {}
    for key, value in runtime_env.items():
        if key in _PASSED_KEYS or key in _RENAMED_KEYS:
            target = _RENAMED_KEYS.get(key, key)
            if target in out:
                _refuse("runtime_env gives the {} twice ({!r} and {!r}); keep one".format(
                    target, key, next(k for k in runtime_env if _RENAMED_KEYS.get(k, k) == target)),
                    "runtime_env." + key)
            out[target] = value
        elif key in _REFUSED_KEYS:
            _refuse("runtime_env[{!r}] is not supported by AetherGrid: {}".format(key, _REFUSED_KEYS[key]),
                    "runtime_env." + key)
        else:
            _refuse("runtime_env[{!r}] is not supported by AetherGrid; it understands working_dir, "
                    "env_vars, excludes, py_executable (or python), image_uri (or image) and "
                    "mounts".format(key), "runtime_env." + str(key))
    working_dir = out.get("working_dir")
    if isinstance(working_dir, str) and "://" in working_dir:
        _refuse("runtime_env['working_dir'] {!r} is a remote URI; AetherGrid takes a local folder "
                "(it packs and uploads it once to the head's package store): download and unpack it "
                "first, then pass the folder".format(working_dir), "runtime_env.working_dir")
    return out


def _whole_gpus(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _refuse("entrypoint_num_gpus must be a number, got {!r}".format(value), "entrypoint_num_gpus")
    if value != int(value) or value < 0:
        _refuse("entrypoint_num_gpus={!r}: AetherGrid gives each task whole GPUs (0, 1, 2, ...); "
                "to share one GPU, run the work as several processes of one task".format(value),
                "entrypoint_num_gpus")
    return int(value)


def _num_workers(keyword, metadata):
    """The gang size: the num_workers= keyword or metadata["num_workers"]; 1 without."""
    from_metadata = None
    if "num_workers" in metadata:
        text = metadata["num_workers"]
        try:
            from_metadata = int(str(text).strip())
        except ValueError:
            _refuse("metadata['num_workers'] must be a whole number of tasks, got {!r}".format(text),
                    "metadata.num_workers")
    if keyword is not None and from_metadata is not None and keyword != from_metadata:
        _refuse("num_workers={} and metadata['num_workers']={!r} disagree; give one".format(
            keyword, metadata["num_workers"]), "num_workers")
    if keyword is not None:
        return keyword
    return 1 if from_metadata is None else from_metadata


def _submission_id():
    """A fresh submission id in Ray's form ("raysubmit_" and 16 letters and digits)."""
    alphabet = string.ascii_letters + string.digits
    return "raysubmit_" + "".join(secrets.choice(alphabet) for _ in range(16))


@contextlib.contextmanager
def _ray_errors(job_id=None):
    """The SDK's not-found and conflict errors as the ones that are RuntimeErrors too."""
    try:
        yield
    except AGNotFoundError as e:
        if job_id is None:
            raise JobNotFoundError(e.message, e.status) from None
        raise JobNotFoundError("Job {} does not exist: no job has that job id or submission id "
                               "(the head says: {})".format(job_id, e.message), e.status) from None
    except AGConflictError as e:
        raise JobConflictError(e.message, e.status) from None


def _error_type(info):
    """Ray's error_type for a FAILED job: JOB_ENTRYPOINT_COMMAND_ERROR when a task
    exited with an error, else a word for what AetherGrid saw (NODE_LOST, TIMEOUT,
    JOB_ENTRYPOINT_COMMAND_START_ERROR)."""
    if info.get("state") != "FAILED":
        return None
    attempts = info.get("attempts") or []
    last = attempts[-1] if attempts else {}
    if info.get("timed_out"):
        return "TIMEOUT"
    if last.get("failure_node_lost"):
        return "NODE_LOST"
    if last.get("failure_exit_code") is not None or last.get("failed_task_index") is not None:
        return "JOB_ENTRYPOINT_COMMAND_ERROR"
    return "JOB_ENTRYPOINT_COMMAND_START_ERROR"


def _details(info):
    """A JobDetails from the head's full job JSON (Job.info())."""
    spec = info.get("spec") or {}
    task_options = spec.get("task_options") or {}
    state = info["state"]
    if state in ("FAILED", "STOPPED") and info.get("message"):
        message = failure_text(info)
    else:
        message = info.get("message") or _DEFAULT_MESSAGES.get(state)
    attempts = info.get("attempts") or []
    driver = None
    if attempts:
        tasks = attempts[-1].get("tasks") or []
        driver = next((t for t in tasks if t.get("task_index") == 0), None)
    memory = task_options.get("memory")
    return JobDetails(
        type=JobType.SUBMISSION,
        job_id=info["job_id"],
        submission_id=spec.get("submission_id") or info["job_id"],
        driver_info=None,
        status=JobStatus(state),
        entrypoint=info.get("entrypoint", spec.get("entrypoint", "")),
        message=message,
        error_type=_error_type(info),
        start_time=info.get("submitted_ms") or None,
        end_time=info.get("finished_ms") or None,
        metadata=dict(info.get("labels") or spec.get("labels") or {}),
        runtime_env=spec.get("runtime_env") or {},
        driver_node_id=(driver or {}).get("node_id") or None,
        driver_exit_code=(driver or {}).get("exit_code") if JobStatus(state).is_terminal() else None,
        entrypoint_num_cpus=task_options.get("num_cpus", info.get("num_cpus")),
        entrypoint_num_gpus=task_options.get("num_gpus", info.get("num_gpus")),
        entrypoint_memory=memory or None,
        attempt_number=max(0, len(attempts) - 1),
        num_workers=info.get("num_workers", spec.get("num_workers", 1)),
        name=info.get("name") or spec.get("job_name") or None,
        owner=info.get("owner"),
    )


# What the producer thread of tail_job_logs hands over when the log is over.
_END = object()
# How many chunks tail_job_logs reads ahead of a slow consumer.
_TAIL_READ_AHEAD = 16


class JobSubmissionClient:
    """Ray's JobSubmissionClient, on an AetherGrid head.

    address: "http://HEAD:8265" (Ray's dashboard address; the head's REST API answers on
    its dashboard port too), "HOST:PORT", "https://HOST:PORT", or None: RAY_API_SERVER_ADDRESS
    or RAY_ADDRESS when it is an http(s):// address, else what ag.Client() finds
    (AG_ADDRESS, this machine's session, `ag config`'s default head).

    Ray's other arguments: metadata (merged into every job's, the job's own winning);
    headers {"Authorization": "Bearer TOKEN"} (the user token; no other header is sent);
    verify True, or a path to the cluster CA's PEM file (ca_file). create_cluster_if_needed
    and cookies are refused when given.

    AetherGrid additions, as ag.Client takes them: token, token_file, ca_file,
    ca_fingerprint, insecure, timeout; or client=, an ag.Client to use. `self.client` is
    the ag.Client, for what only AetherGrid does.
    """

    def __init__(self, address=None, create_cluster_if_needed=False, cookies=None, metadata=None,
                 headers=None, verify=True, *, client=None, **client_options):
        if address is not None and not isinstance(address, str):
            raise TypeError("address must be a string, got {}".format(type(address).__name__))
        if create_cluster_if_needed:
            _refuse("create_cluster_if_needed=True: AetherGrid starts no cluster for a client; start "
                    "one with `ag start-head` and `ag start-worker`")
        if cookies:
            _refuse("cookies are not used by AetherGrid: pass the user token with "
                    "headers={'Authorization': 'Bearer TOKEN'}, token=, token_file= or AG_TOKEN")
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError("metadata must be a dict, got {}".format(type(metadata).__name__))
        self._default_metadata = dict(metadata or {})
        if client is not None:
            if address is not None or headers or verify is not True or client_options:
                raise TypeError("give client= alone, or the connection arguments without it")
            self.client = client
            return
        options = dict(client_options)
        unknown = sorted(set(options) - {"token", "token_file", "ca_file", "ca_fingerprint", "insecure",
                                         "timeout"})
        if unknown:
            raise TypeError("JobSubmissionClient() got unexpected keyword argument(s) {}".format(
                ", ".join(repr(k) for k in unknown)))
        token = self._token_from_headers(headers)
        if token is not None:
            if options.get("token") is not None or options.get("token_file") is not None:
                _refuse("the token is given twice: in headers and as token=/token_file=; keep one")
            options["token"] = token
        if isinstance(verify, (str, os.PathLike)):
            if options.get("ca_file") is not None:
                _refuse("give verify=PATH or ca_file=, not both")
            options["ca_file"] = verify
        elif verify is not True:
            _refuse("verify={!r}: AetherGrid always verifies a head on another machine against its "
                    "cluster CA; pass ca_fingerprint='sha256:...' (`ag start-head` prints it), "
                    "verify='/path/ca.crt', or insecure=True for a head started with "
                    "--insecure".format(verify))
        self.client = Client(self._address(address), **options)

    @staticmethod
    def _address(address):
        if address is None:
            for name in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS"):
                value = os.environ.get(name, "")
                if value.startswith(("http://", "https://")):
                    return value
            return None  # ag.Client's own order
        text = address.strip()
        if text == "auto" or text.startswith("ray://"):
            _refuse("address {!r} is a Ray Client or auto address; give the AetherGrid head's "
                    "address: 'http://HEAD:8265' (its dashboard port) or 'HEAD:6379'".format(address))
        return text

    @staticmethod
    def _token_from_headers(headers):
        if not headers:
            return None
        if not isinstance(headers, dict):
            raise TypeError("headers must be a dict, got {}".format(type(headers).__name__))
        token = None
        for name, value in headers.items():
            if str(name).lower() == "authorization" and isinstance(value, str) \
                    and value.lower().startswith("bearer "):
                token = value[len("bearer "):].strip()
            else:
                _refuse("header {!r} is not sent to AetherGrid; only 'Authorization: Bearer TOKEN' "
                        "(the user token) is understood".format(name))
        return token

    def __repr__(self):
        return "JobSubmissionClient({!r})".format(self.client.address)

    def _job(self, job_id):
        if not isinstance(job_id, str) or not job_id:
            raise TypeError("job_id must be a non-empty string (a job id or submission id), got {!r}".format(
                job_id))
        return Job(self.client, job_id)

    # ---- submitting -------------------------------------------------------------------
    def submit_job(self, *, entrypoint, job_id=None, runtime_env=None, metadata=None, submission_id=None,
                   entrypoint_num_cpus=None, entrypoint_num_gpus=None, entrypoint_memory=None,
                   entrypoint_resources=None, entrypoint_label_selector=None, retry_policy=None,
                   num_workers=None, **options):
        """Submits the entrypoint as an AetherGrid job and returns its submission id (the
        one given, else a fresh "raysubmit_..." one). It runs in the background.

        Gang: `num_workers` tasks (an AetherGrid addition; or metadata["num_workers"]),
        each running the entrypoint with RANK, WORLD_SIZE, MASTER_ADDR, ... set, and each
        holding entrypoint_num_cpus (default 1), entrypoint_num_gpus (whole GPUs) and
        entrypoint_memory (bytes). entrypoint_label_selector {"KEY": "VALUE"}: only on
        nodes with those labels (`ag start-worker --label`). metadata: kept as the job's
        labels; metadata["job_name"] names the job. Any other ag.Client.submit_job
        keyword works too (max_retries=, timeout=, placement=, priority=, ...).

        submission_id: as in Ray it names the job; unlike Ray, submitting the same id with
        the same arguments again returns the same job instead of failing (a retried
        submit never makes two jobs). Another job with that id raises JobConflictError.
        """
        if not isinstance(entrypoint, str) or not entrypoint.strip():
            raise TypeError("entrypoint must be a non-empty string (a shell command), got {!r}".format(
                entrypoint))
        allowed = set(JOB_KEYS) - {"entrypoint", "runtime_env", "num_workers", "submission_id", "labels"}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise TypeError("submit_job() got unexpected keyword argument(s) {}; besides Ray's it takes "
                            "num_workers= and ag.Client.submit_job's: {}".format(
                                ", ".join(repr(k) for k in unknown), ", ".join(sorted(allowed))))
        if retry_policy:
            _refuse("retry_policy is not taken as Ray's: AetherGrid retries the whole gang; pass "
                    "max_retries=N, retry_delay=SECONDS (doubling) and retry_on='any'|'node_lost'|[exit "
                    "codes]", "retry_policy")
        if entrypoint_resources:
            _refuse("entrypoint_resources {!r}: AetherGrid has no custom resources; label the nodes "
                    "(`ag start-worker --label KEY=VALUE`) and place the job on them with "
                    "entrypoint_label_selector={{'KEY': 'VALUE'}} or constraints= (`ag submit "
                    "--constraint KEY=VALUE`); CPUs, GPUs and memory go in entrypoint_num_cpus, "
                    "entrypoint_num_gpus and entrypoint_memory".format(entrypoint_resources),
                    "entrypoint_resources")
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError("metadata must be a dict, got {}".format(type(metadata).__name__))
        labels = dict(self._default_metadata)
        labels.update(metadata or {})
        for key, value in labels.items():
            if not isinstance(key, str) or not isinstance(value, str):
                _refuse("metadata must map strings to strings, got {!r}: {!r}".format(key, value), "metadata")
        gang = _num_workers(num_workers, labels)

        task_options = dict(options.pop("task_options", None) or {})
        for name, key, value in (("entrypoint_num_cpus", "num_cpus", entrypoint_num_cpus),
                                 ("entrypoint_num_gpus", "num_gpus", entrypoint_num_gpus),
                                 ("entrypoint_memory", "memory", entrypoint_memory)):
            if value is None:
                continue
            if key in task_options and task_options[key] != value:
                _refuse("{}={!r} and task_options[{!r}]={!r} disagree; give one".format(
                    name, value, key, task_options[key]), name)
            if key == "num_gpus":
                value = _whole_gpus(value)
            elif key == "num_cpus" and value == 0:
                value = 0.001  # Ray's "no CPU reserved": AetherGrid's smallest share
            task_options[key] = value

        constraints = dict(options.pop("constraints", None) or {})
        for key, value in (entrypoint_label_selector or {}).items():
            if not isinstance(value, str) or value.startswith("!") or value.startswith("in(") \
                    or value.startswith("!in("):
                _refuse("entrypoint_label_selector[{!r}]={!r}: AetherGrid matches node labels by equal "
                        "value only ({{'KEY': 'VALUE'}})".format(key, value), "entrypoint_label_selector")
            if constraints.get(key, value) != value:
                _refuse("entrypoint_label_selector and constraints disagree on {!r}".format(key),
                        "entrypoint_label_selector")
            constraints[key] = value

        if "job_name" not in options and labels.get("job_name"):
            options["job_name"] = labels["job_name"]
        sid = submission_id or job_id or _submission_id()
        with _ray_errors():
            self.client.submit_job(entrypoint, runtime_env=_runtime_env(runtime_env), num_workers=gang,
                                   task_options=task_options or None, labels=labels or None,
                                   submission_id=sid, constraints=constraints or None, **options)
        return sid

    # ---- reading ----------------------------------------------------------------------
    def get_job_info(self, job_id):
        """The job's JobDetails; JobNotFoundError when no job has this job id or
        submission id."""
        with _ray_errors(job_id):
            return _details(self._job(job_id).info())

    def get_job_status(self, job_id):
        """The job's JobStatus (PENDING, RUNNING, STOPPED, SUCCEEDED or FAILED)."""
        with _ray_errors(job_id):
            return JobStatus(self._job(job_id).status())

    def list_jobs(self):
        """Every job the head has (newest first), as JobDetails."""
        summaries = self.client.list_jobs()

        def details(summary):
            try:
                return _details(Job(self.client, summary["job_id"]).info())
            except AGNotFoundError:
                return None  # deleted since it was listed
        if len(summaries) <= 1:
            found = [details(s) for s in summaries]
        else:
            # The list has no spec in it (runtime_env, submission_id, memory): one request
            # per job, a few at a time.
            with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(summaries))) as pool:
                found = list(pool.map(details, summaries))
        return [d for d in found if d is not None]

    def get_job_logs(self, job_id):
        """All of the job's output so far (its latest attempt), as one string. With a gang,
        every task's lines in the order the head received them, each prefixed
        "[rank N] "."""
        with _ray_errors(job_id):
            return self._job(job_id).get_logs()

    async def tail_job_logs(self, job_id):
        """An async iterator of the job's output, chunk by chunk as it is written, from
        the start until the job ends (a retry is followed):

            async for lines in client.tail_job_logs(submission_id):
                print(lines, end="")

        A one-task job's output comes as the head receives it (a long poll); a gang's as
        whole lines of every task, each prefixed "[rank N] ". The blocking requests run in
        a daemon thread, so leaving the loop early never holds up the event loop or the
        interpreter's exit.
        """
        with _ray_errors(job_id):
            job = self._job(job_id)
            info = await asyncio.get_running_loop().run_in_executor(None, job.info)
        job = Job(self.client, info["job_id"])
        task_index = 0 if info.get("num_workers", 1) == 1 else None
        loop = asyncio.get_running_loop()
        chunks = asyncio.Queue(maxsize=_TAIL_READ_AHEAD)
        stop = threading.Event()

        def hand_over(item):
            """Puts `item` on the loop's queue, waiting while it is full; False once
            the consumer is gone."""
            if stop.is_set():
                return False
            put = chunks.put(item)
            try:
                future = asyncio.run_coroutine_threadsafe(put, loop)
            except RuntimeError:  # the loop is closed
                put.close()
                return False
            while not stop.is_set():
                try:
                    future.result(timeout=0.5)
                    return True
                except concurrent.futures.TimeoutError:
                    continue
                except (concurrent.futures.CancelledError, RuntimeError):
                    return False
            future.cancel()
            return False

        def produce():
            ending = (_END, None)
            try:
                with _ray_errors(job_id):
                    for chunk in job.tail_logs(task_index=task_index):
                        if stop.is_set() or not hand_over((chunk, None)):
                            return
            except BaseException as e:  # handed to the consumer, raised there
                ending = (_END, e)
            hand_over(ending)

        threading.Thread(target=produce, name="tail_job_logs " + info["job_id"], daemon=True).start()
        try:
            while True:
                chunk, error = await chunks.get()
                if chunk is _END:
                    if error is not None:
                        raise error
                    return
                yield chunk
        finally:
            stop.set()

    # ---- acting -----------------------------------------------------------------------
    def stop_job(self, job_id):
        """Asks the head to stop the job (SIGTERM to every process of every task, SIGKILL
        after the grace period). True when it was pending or running, False when it had
        already ended."""
        with _ray_errors(job_id):
            try:
                self._job(job_id).stop()
            except AGConflictError:
                return False
        return True

    def delete_job(self, job_id):
        """Deletes an ended job for good (its record, events and logs); True once done.
        JobConflictError when it has not ended (stop_job() it first), JobNotFoundError
        when there is no such job."""
        with _ray_errors(job_id):
            try:
                self._job(job_id).delete()
            except AGConflictError as e:
                raise JobConflictError("cannot delete job {}: {} (call stop_job() first, then delete_job() "
                                       "once it has ended)".format(job_id, e.message), e.status) from None
        return True
