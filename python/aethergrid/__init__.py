"""AetherGrid Python SDK: submit and follow distributed jobs on an AetherGrid cluster.

    import aethergrid as ag

    # The fingerprint pins the head's cluster CA (`ag start-head` prints it); on the
    # head's own machine, or after `ag config`, Client() needs no arguments.
    client = ag.Client("HOST:6379", token_file="~/.aethergrid-token",
                       ca_fingerprint="sha256:...")
    job = client.submit_job(entrypoint="python train.py", num_workers=2,
                            runtime_env={"working_dir": "."})
    job.wait(timeout=300)
    print(job.get_logs(task_index=0))

Coming from Ray Jobs: `from aethergrid import JobSubmissionClient, JobStatus` in place
of `from ray.job_submission import ...` (see ray_compat.py).

Standard library only; Python >= 3.8.
"""
from . import exceptions
from ._binary import ag_path
from ._exec import ExecResult
from .client import Client
from .exceptions import (AGAuthError, AGConflictError, AGConnectionError, AGError, AGJobFailedError,
                         AGNotFoundError, AGPermissionError, AGTimeoutError, AGValidationError)
from .job import Job, JobArray
from .ray_compat import JobStatus, JobSubmissionClient

__version__ = "0.1.0"

__all__ = [
    "Client",
    "ag_path",
    "Job",
    "JobArray",
    "ExecResult",
    "JobSubmissionClient",
    "JobStatus",
    "exceptions",
    "AGError",
    "AGConnectionError",
    "AGAuthError",
    "AGPermissionError",
    "AGValidationError",
    "AGNotFoundError",
    "AGConflictError",
    "AGTimeoutError",
    "AGJobFailedError",
]
