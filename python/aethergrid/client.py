"""Client: the connection to an AetherGrid head (or to a group of heads), and job submission."""
import datetime
import json
import os
import time
import uuid

from . import _session, _tls
from ._http import Head, Transport, parse_address, parse_addresses
from .exceptions import AGConnectionError, AGValidationError
from .job import Job, JobArray
from .runtime_env import PackageUploader

# The keys a job dict given to submit_jobs may have: submit_job's parameters.
JOB_KEYS = ("entrypoint", "runtime_env", "num_workers", "task_options", "job_name",
            "max_retries", "timeout", "labels", "placement", "submission_id", "timeout_per_attempt",
            "allow_unschedulable", "retry_delay", "retry_on", "constraints", "priority",
            "after", "after_any", "after_failed", "hold", "begin", "exclusive", "queue", "no_preempt",
            "hang_timeout", "on_hang", "hold_on_failure", "on_node_unhealthy", "idle_gpu_timeout", "on_idle")


class Client:
    """A connection to the head at `address` ("HOST:PORT", "http://HOST:PORT" or
    "https://HOST:PORT") as the user whose token it holds.

    address None: AG_ADDRESS, else this machine's session (the head `ag start-head`
    started here), else the default head of the user config ($AG_CONFIG, default
    ~/.aethergrid/config.json, written by `ag config`).

    Several heads of one cluster (a group sharing one store, where one leads and the
    others stand by): every head's address, separated by commas ("h1:6379,h2:6379"; at
    most 8, each once), here or in AG_ADDRESS or the config. Requests go to the head
    that answered last as leader (the first at first); when it cannot be reached or
    stands by, to the others, the leader a standby names first. A retryable request (a
    read, a submit: it carries its submission_id) rides out a takeover within the same
    window as a head restart. A malformed address or list raises AGValidationError,
    which is then a ValueError too, naming the bad entry.

    TLS, chosen as the `ag` CLI chooses: `insecure=True` sends plain HTTP (the token in
    clear text; for a head started with --insecure); else the head is verified against
    its cluster CA: `ca_file` (a PEM file), else the CA the head serves whose fingerprint
    is `ca_fingerprint` ("sha256:...", as `ag start-head` prints it; fetched once, here,
    with no token sent; of several heads, from the first that answers: they share the
    cluster CA), else this machine's session's CA when the session's head is this
    head, else the CA `ag config` pinned for HOST:PORT. A head on loopback with no CA
    known is spoken to in plain HTTP; a head on another machine with none is refused.
    With several heads, each one's CA is chosen as if it were the only head.
    The scheme in `address` does not choose: "https://" only demands TLS. `scheme` says
    which is used.

    The user's token, in the `ag` CLI's order: `token`, else the file
    `token_file`, else AG_TOKEN, else the file AG_TOKEN_FILE names, else the session's
    token file. A token file given by name must be this user's and readable by no one
    else (mode 0600), as ssh does with keys. `timeout` (seconds) bounds each request;
    long polls (wait, tail_logs) add their own wait.

    Raises AGValidationError at once when both `token` and `token_file` are given, or a
    named token file is missing, another user's or readable by others (the message says
    how to fix it, e.g. "run `chmod 600 PATH`"); when the head is on another machine and
    its CA is not pinned (the message says how to pin it); when `insecure` comes with a
    CA, or `ca_file` with `ca_fingerprint`; when a CA file cannot be read; when the head's
    CA has another fingerprint than `ca_fingerprint` (the message names both). With
    `ca_fingerprint`, raises AGConnectionError when the head cannot be reached to fetch
    its CA.

    Every method raises AGConnectionError (head unreachable, or every head stands by;
    names the address, or every head tried and why each failed),
    AGValidationError (also: the head's certificate does not verify against the cluster
    CA, i.e. another head answered or someone is in between),
    AGAuthError (token missing, unknown, revoked or of a disabled user),
    AGPermissionError (the user may not do this, e.g. stop another user's job; carries
    the head's reason), AGValidationError (the head refused the request; its message
    names the field) or AGNotFoundError as they apply. A Client keeps no connection open
    and may be shared by threads.
    """

    def __init__(self, address=None, token=None, token_file=None, timeout=30, *, ca_file=None,
                 ca_fingerprint=None, insecure=False):
        resolved_token = _session.resolve_token(token, token_file)
        resolved = _session.resolve_address(address)
        if not resolved:
            raise AGValidationError(
                "no head address: pass Client('HOST:PORT'), set AG_ADDRESS, or start a head on "
                "this machine with `ag start-head` (its session is read from {})".format(
                    _session.session_dir()))
        timeout = float(timeout)
        addresses = parse_addresses(resolved)
        if ca_file is not None:
            ca_file = _path_argument("ca_file", ca_file)
        if ca_fingerprint is not None and not isinstance(ca_fingerprint, str):
            raise AGValidationError("ca_fingerprint must be a string like 'sha256:...', got {}".format(
                type(ca_fingerprint).__name__))
        session = _session.read_session()
        session_head = _display_or_empty(session.get("address"))
        session_ca = session.get("ca_file") if isinstance(session.get("ca_file"), str) else ""
        pinned_ca_files = _session.read_user_config()["ca_files"]
        # Each head's CA is chosen as for a client of that head alone.
        sources = []
        for scheme, host, port, display in addresses:
            source = _tls.choose_ca_source(
                display, host, ca_file=ca_file, ca_fingerprint=ca_fingerprint, insecure=bool(insecure),
                session_head=session_head, session_ca_file=session_ca, pinned_ca_files=pinned_ca_files)
            if scheme == "https" and not source.tls:
                raise AGValidationError(
                    "the address {!r} asks for TLS, but no cluster CA is known for the head at {}: "
                    "pass ca_fingerprint='sha256:...' (`ag start-head` prints it) or ca_file=".format(
                        resolved if len(addresses) == 1 else "https://" + display, display))
            sources.append(source)
        heads = []
        contexts = {}  # one SSLContext for each CA
        for address, source, ca_pem in zip(addresses, sources, _load_ca_pems(addresses, sources, timeout)):
            context = None
            if ca_pem is not None:
                if ca_pem not in contexts:
                    contexts[ca_pem] = _tls.client_context(ca_pem, source)
                context = contexts[ca_pem]
            heads.append(Head(address[3], ssl_context=context, ca_description=source.describe()))
        self._transport = Transport(heads, resolved_token, timeout)

    @property
    def address(self):
        """The head's address as HOST:PORT: of several, the one requests go to now (the
        last that answered as leader)."""
        return self._transport.address

    @property
    def addresses(self):
        """Every head's address as HOST:PORT, in the order given."""
        return self._transport.addresses

    @property
    def scheme(self):
        """"https" when this client speaks TLS to the head (verified against its cluster
        CA), "http" when plain HTTP."""
        return self._transport.scheme

    def __repr__(self):
        return "Client({!r})".format(",".join(self.addresses))

    # ---- submitting -------------------------------------------------------------------
    def submit_job(self, entrypoint, runtime_env=None, num_workers=1, task_options=None,
                   job_name=None, max_retries=0, timeout=None, labels=None, placement="pack",
                   submission_id=None, timeout_per_attempt=False, allow_unschedulable=False,
                   retry_delay=None, retry_on=None, constraints=None, priority=None,
                   after=None, after_any=None, after_failed=None, hold=False, begin=None,
                   exclusive=False, queue=None, no_preempt=False, hang_timeout=None, on_hang=None,
                   hold_on_failure=None, on_node_unhealthy=None, idle_gpu_timeout=None, on_idle=None):
        """Submits one job and returns its Job at once (it runs in the background).

        entrypoint: the command each of the `num_workers` tasks runs (through a shell).
        runtime_env: {"working_dir": local folder (packed and uploaded once),
        "excludes": [gitignore patterns], "env_vars": {K: V, $VAR expanded},
        "python": "/path" or {"executable": "/path"}, "image": "registry/name:tag" (the
        tasks run in that container image), "mounts": [{"source": node path, "target":
        container path, "read_only": bool} or "SOURCE:TARGET[:ro]"] (node folders the
        workers allow with --allow-mount)}.
        task_options: per-task {"num_cpus", "num_gpus", "memory", "gpu_isolation"}. timeout: seconds
        before the job is stopped and FAILS (its whole run, retries included, unless
        timeout_per_attempt). placement: "pack" or "spread". hang_timeout: seconds after
        which a job whose ranks write no output and use under 1% of a CPU is hung: the hang
        and every rank's stacks go into its events, and with on_hang="fail" its attempt
        ends (retried if max_retries allows); default: the head's --hang-timeout, if any.
        hold_on_failure: seconds a failed attempt's still-running tasks are kept before the
        gang is torn down or retried, to look inside with job.exec().
        on_node_unhealthy: "keep" (default: run on) or "requeue" (when a node it runs on
        turns UNHEALTHY, the gang is stopped and queued again, not counted as a retry).
        idle_gpu_timeout: seconds after which a job whose GPUs all stay under 5% busy gets
        a "job.idle" event; with on_idle="stop" it is stopped for it (default: the
        head's --idle-gpu-timeout, if any).
        priority: placed before pending jobs of lower priority: "low", "normal" (default),
        "high", "urgent", or a whole number from -1000 to 1000; ties in submit order.
        after / after_any / after_failed: jobs (Job objects or ids, one or a list) it starts
        after: once they all succeeded / ended however / ended FAILED or STOPPED. A job
        whose dependency can no longer be met FAILS with that reason; a dependency that
        does not exist or already ended the wrong way is refused (AGValidationError).
        hold: submitted held; it waits until job.release(). begin: not started before this
        time: a datetime (naive means UTC), a timedelta from now, or seconds since the epoch.
        exclusive: no other job's tasks share this job's nodes.
        queue: the queue it waits in (`ag queue list`): its nodes, its priority unless
        `priority` is given, its per-user limits; jobs of a queue that preempts may stop
        lower-priority jobs to start. no_preempt: never preempted (an admin must allow
        it: `ag quota set --allow-no-preempt`). A preempted job goes back to the queue
        (its retries are not spent); its tasks get SIGTERM and AG_PREEMPT_GRACE_S seconds
        to save their work first.
        max_retries: whole-gang retries after a failure; retry_delay: seconds before the
        first (default 3), doubling for each next one up to 600; retry_on: which
        failures are retried: "any" (default), "node_lost", or a list of exit codes
        (a task killed by signal N counts as 128+N; a lost node is retried too).
        constraints: {"KEY": "VALUE"} node labels (ag start-worker --label) that every
        node of the job must have.
        submission_id: idempotency key (a fresh one by default); resubmitting the same
        key with the same spec returns the same job, so a POST retried after a lost
        connection never makes two jobs; the same key with another spec is refused
        (AGConflictError naming the job). The key also works as the job's id in get_job.
        allow_unschedulable: queue the job even when no node of the cluster as it is
        could ever run it (for nodes still to join); otherwise that submit is refused
        with the reason (AGValidationError).

        Raises AGValidationError (bad working_dir before any upload; a package over the
        head's limit, with its size and biggest files; a field the head refuses).
        """
        uploader = PackageUploader(self._transport)
        spec = self._spec(uploader, entrypoint=entrypoint, runtime_env=runtime_env,
                          num_workers=num_workers, task_options=task_options, job_name=job_name,
                          max_retries=max_retries, timeout=timeout, labels=labels,
                          placement=placement, submission_id=submission_id,
                          timeout_per_attempt=timeout_per_attempt, allow_unschedulable=allow_unschedulable,
                          retry_delay=retry_delay, retry_on=retry_on, constraints=constraints,
                          priority=priority, after=after, after_any=after_any,
                          after_failed=after_failed, hold=hold, begin=begin, exclusive=exclusive,
                          queue=queue, no_preempt=no_preempt, hang_timeout=hang_timeout, on_hang=on_hang,
                          hold_on_failure=hold_on_failure, on_node_unhealthy=on_node_unhealthy,
                          idle_gpu_timeout=idle_gpu_timeout, on_idle=on_idle)
        answer = self._transport.request("POST", "/api/jobs", body=spec, retry=True).json()
        return Job(self, answer["job_id"])

    def submit_array(self, entrypoint, array, max_running=None, **options):
        """Submits a job array: one job per index, each running `entrypoint` with
        AG_ARRAY_INDEX (and AG_ARRAY_ID, AG_ARRAY_SIZE) set; returns its JobArray.

        array: the indices, "0-99", "1,3,5", "0-98:2" (every 2nd) or "0-99%8" (at most 8
        queued or running at once), or an iterable of whole numbers. max_running: that
        limit, for an iterable. Every other option is submit_job's and applies to each
        element (num_workers, runtime_env, after, hold, ...).
        """
        if isinstance(array, str):
            text = array
        else:
            try:
                indices = sorted(set(int(i) for i in array))
            except (TypeError, ValueError):
                raise AGValidationError("array takes a string like \"0-99%8\" or whole numbers, got {!r}".format(
                    array), field="array") from None
            text = ",".join(str(i) for i in indices)
        if max_running is not None:
            if "%" in text:
                raise AGValidationError("give the limit once: in the array (\"%N\") or as max_running",
                                        field="array")
            text += "%{}".format(max_running)
        unknown = sorted(set(options) - set(JOB_KEYS))
        if unknown:
            raise AGValidationError("submit_array got unknown option(s) {}; it takes submit_job's".format(
                ", ".join(unknown)))
        spec = self._spec(PackageUploader(self._transport), entrypoint=entrypoint, **options)
        spec["array"] = text
        answer = self._transport.request("POST", "/api/jobs", body=spec, retry=True).json()
        return JobArray(self, answer["job_id"])

    def submit_jobs(self, jobs):
        """Submits many jobs in one request: all are accepted or none is. `jobs` is a list
        of dicts with submit_job's parameters as keys. Returns their Jobs in order.

        Raises AGValidationError when any one is invalid (the head's message says which),
        and then no job is created.
        """
        if isinstance(jobs, dict) or not isinstance(jobs, (list, tuple)):
            raise AGValidationError("submit_jobs takes a list of job dicts, got {}".format(
                type(jobs).__name__))
        uploader = PackageUploader(self._transport)
        specs = []
        for i, job in enumerate(jobs):
            if not isinstance(job, dict):
                raise AGValidationError("jobs[{}] must be a dict, got {}".format(i, type(job).__name__))
            unknown = sorted(set(job) - set(JOB_KEYS))
            if unknown:
                raise AGValidationError("jobs[{}] has unknown key(s) {}; known keys are: {}".format(
                    i, ", ".join(repr(k) for k in unknown), ", ".join(JOB_KEYS)))
            if "entrypoint" not in job:
                raise AGValidationError("jobs[{}] has no 'entrypoint'".format(i), field="entrypoint")
            specs.append(self._spec(uploader, **job))
        if not specs:
            return []
        answer = self._transport.request("POST", "/api/jobs/batch", body={"jobs": specs},
                                         retry=True).json()
        job_ids = answer.get("job_ids") if isinstance(answer, dict) else None
        if not isinstance(job_ids, list) or len(job_ids) != len(specs):
            raise AGValidationError("the head answered the batch submit with {!r}; expected "
                                    "{} job ids".format(answer, len(specs)))
        return [Job(self, job_id) for job_id in job_ids]

    def _spec(self, uploader, entrypoint, runtime_env=None, num_workers=1, task_options=None,
              job_name=None, max_retries=0, timeout=None, labels=None, placement="pack",
              submission_id=None, timeout_per_attempt=False, allow_unschedulable=False,
              retry_delay=None, retry_on=None, constraints=None, priority=None,
              after=None, after_any=None, after_failed=None, hold=False, begin=None,
              exclusive=False, queue=None, no_preempt=False, hang_timeout=None, on_hang=None,
              hold_on_failure=None, on_node_unhealthy=None, idle_gpu_timeout=None, on_idle=None):
        """The JSON job spec to send, with working_dir uploaded."""
        spec = {"entrypoint": entrypoint, "num_workers": num_workers, "max_retries": max_retries,
                "placement": placement, "submission_id": submission_id or uuid.uuid4().hex}
        if task_options is not None:
            spec["task_options"] = task_options
        if job_name is not None:
            spec["job_name"] = job_name
        if timeout is not None:
            spec["timeout"] = timeout
        if timeout_per_attempt:
            spec["timeout_per_attempt"] = True
        if hang_timeout is not None:
            spec["hang_timeout"] = hang_timeout
        if on_hang is not None:
            spec["on_hang"] = on_hang
        if hold_on_failure is not None:
            spec["hold_on_failure"] = hold_on_failure
        if on_node_unhealthy is not None:
            spec["on_node_unhealthy"] = on_node_unhealthy
        if idle_gpu_timeout is not None:
            spec["idle_gpu_timeout"] = idle_gpu_timeout
        if on_idle is not None:
            spec["on_idle"] = on_idle
        if allow_unschedulable:
            spec["allow_unschedulable"] = True
        if retry_delay is not None:
            spec["retry_delay"] = retry_delay
        if retry_on is not None:
            spec["retry_on"] = retry_on
        if constraints is not None:
            spec["constraints"] = constraints
        if priority is not None:
            spec["priority"] = priority
        for key, jobs in (("after", after), ("after_any", after_any), ("after_failed", after_failed)):
            if jobs is not None:
                spec[key] = _job_ids(key, jobs)
        if hold:
            spec["hold"] = True
        if exclusive:
            spec["exclusive"] = True
        if queue is not None:
            spec["queue"] = queue
        if no_preempt:
            spec["no_preempt"] = True
        if begin is not None:
            spec["begin_ms"] = _epoch_ms(begin)
        if labels is not None:
            spec["labels"] = labels
        if runtime_env is not None:
            spec["runtime_env"] = uploader.prepare(runtime_env)
        try:
            json.dumps(spec)
        except (TypeError, ValueError) as e:
            raise AGValidationError("the job spec cannot be sent as JSON: {}".format(e)) from None
        return spec

    # ---- reading ----------------------------------------------------------------------
    def whoami(self):
        """The user this client's token belongs to: {"name", "role", "groups"}; role is
        "admin", "user" or "viewer"."""
        return self._transport.request("GET", "/api/whoami").json()

    def get_job(self, job_id):
        """The Job with this id; AGNotFoundError when the head has none."""
        # A submission_id works too: the Job carries the id the head answers with.
        return Job(self, Job(self, job_id).info()["job_id"])

    def list_jobs(self, state=None, user=None, name=None, queue=None, since=None, limit=None):
        """The jobs as summary dicts (job_id, name, owner, state, message, ...), newest
        first as the head orders them. Filters, each optional: `state` (one state),
        `user` (whose jobs), `name` (a shell pattern, "train-*"), `queue`, `since` (a
        datetime, a timedelta back from now, or seconds since the epoch). All matching
        jobs, or the newest `limit` of them: the head answers in pages (of at most
        1,000), which this follows."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise AGValidationError("limit must be a whole number of 1 or more (or None for every job), got {!r}"
                                    .format(limit), field="limit")
        query = {}
        for key, value in (("state", state), ("owner", user), ("name", name), ("queue", queue)):
            if value is not None:
                if not isinstance(value, str):
                    raise AGValidationError("{} must be a string, got {}".format(
                        "user" if key == "owner" else key, type(value).__name__), field=key)
                query[key] = value
        if since is not None:
            query["since_ms"] = str(_since_ms(since))
        jobs = []
        while True:
            if limit is not None:
                query["limit"] = str(min(1000, limit - len(jobs)))
            page = self._transport.request("GET", "/api/jobs", query=query or None).json()
            jobs.extend(page.get("jobs", []))
            if not page.get("next") or (limit is not None and len(jobs) >= limit):
                return jobs
            query = dict(query, after=page["next"])

    def list_nodes(self):
        """The nodes as dicts (node_id, address, state, resources, allocated)."""
        return self._transport.request("GET", "/api/nodes").json().get("nodes", [])

    def cluster(self):
        """The cluster summary: nodes alive/total, resources, allocated, jobs by state."""
        return self._transport.request("GET", "/api/cluster").json()


def _load_ca_pems(addresses, sources, timeout):
    """The CA PEM (or None for plain HTTP) of each head, in order: `addresses` as
    parse_addresses gives them, `sources` their CaSources. A CA file is read once
    however many heads use it. A CA fetched for ca_fingerprint comes from the first
    head that answers (every head of a cluster serves the one cluster CA).

    Raises AGValidationError (unreadable CA file, another fingerprint) or
    AGConnectionError (no head could be reached to fetch the CA: names each).
    """
    pems = {}
    fetch_errors = []
    for (_, host, port, display), source in zip(addresses, sources):
        key = (source.kind, source.detail)
        if key in pems:
            continue
        if source.kind == _tls.FINGERPRINT:
            try:
                pems[key] = _tls.load_ca_pem(source, host, port, display, timeout)
            except AGConnectionError as e:
                fetch_errors.append(e)
        else:
            pems[key] = _tls.load_ca_pem(source, host, port, display, timeout)
    if any((source.kind, source.detail) not in pems for source in sources):
        # Only a fetch fails without raising at once: no head gave the CA.
        if len(fetch_errors) == 1:
            raise fetch_errors[0]
        raise AGConnectionError("cannot fetch the cluster CA from any of the heads {}: {}".format(
            ", ".join(e.address for e in fetch_errors), "; ".join(e.message for e in fetch_errors)),
            address=",".join(e.address for e in fetch_errors), reason=fetch_errors[-1].reason)
    return [pems[(source.kind, source.detail)] for source in sources]


def _since_ms(since):
    """`since` (a datetime, a timedelta back from now, or epoch seconds) as epoch ms."""
    if isinstance(since, datetime.datetime):
        if since.tzinfo is None:
            since = since.replace(tzinfo=datetime.timezone.utc)
        seconds = since.timestamp()
    elif isinstance(since, datetime.timedelta):
        seconds = time.time() - since.total_seconds()
    elif isinstance(since, (int, float)) and not isinstance(since, bool):
        seconds = float(since)
    else:
        raise AGValidationError("since must be a datetime, a timedelta or epoch seconds, got {}".format(
            type(since).__name__), field="since")
    if seconds > time.time():
        raise AGValidationError("since is in the future: give a time already past", field="since")
    return max(0, int(seconds * 1000))


def _job_ids(name, jobs):
    """Job ids from a Job, an id, or a list of them; AGValidationError for anything else."""
    if isinstance(jobs, (str, Job)):
        jobs = [jobs]
    if not isinstance(jobs, (list, tuple)):
        raise AGValidationError("{} takes a job, a job id or a list of them, got {}".format(
            name, type(jobs).__name__), field=name)
    ids = []
    for job in jobs:
        if isinstance(job, Job):
            ids.append(job.job_id)
        elif isinstance(job, str):
            ids.append(job)
        else:
            raise AGValidationError("{} takes jobs or job ids, got {}".format(name, type(job).__name__),
                                    field=name)
    return ids


def _epoch_ms(begin):
    """`begin` (datetime, timedelta from now, or seconds since the epoch) in ms."""
    if isinstance(begin, datetime.datetime):
        if begin.tzinfo is None:
            begin = begin.replace(tzinfo=datetime.timezone.utc)
        return int(begin.timestamp() * 1000)
    if isinstance(begin, datetime.timedelta):
        return int((time.time() + begin.total_seconds()) * 1000)
    if isinstance(begin, (int, float)) and not isinstance(begin, bool):
        return int(begin * 1000)
    raise AGValidationError("begin takes a datetime, a timedelta from now or seconds since the epoch, "
                            "got {}".format(type(begin).__name__), field="begin")


def _path_argument(name, value):
    """`value` as a str path ("~" expanded); AGValidationError when it is not a path."""
    try:
        value = os.fspath(value)
    except TypeError:
        raise AGValidationError("{} must be a path, got {}".format(name, type(value).__name__)) from None
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    return os.path.expanduser(value)


def _display_or_empty(address):
    """HOST:PORT of an address read from a file, or "" when it is none or malformed."""
    if not isinstance(address, str) or not address:
        return ""
    try:
        return parse_address(address)[3]
    except AGValidationError:
        return ""
