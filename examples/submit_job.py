"""Submits examples/train.py as a 2-task DDP job with the AetherGrid Python SDK.

    python3 examples/submit_job.py [HEAD:PORT]

The head's address comes from the command line, else AG_ADDRESS, else this machine's
session (a head started here with `ag start-head`); the token likewise from AG_TOKEN or
the session. This folder is shipped to the workers as the job's working directory, so
`train.py` runs from there. Exits 0 when the job succeeds.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import aethergrid as ag
except ImportError:  # running from a clone without `pip install python/`
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
    import aethergrid as ag
from aethergrid.exceptions import AGJobFailedError, AGTimeoutError


def main():
    address = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("AG_ADDRESS")
    try:
        client = ag.Client(address)  # None: this machine's session
        job = client.submit_job(
            entrypoint="/usr/bin/python3 train.py",
            runtime_env={"working_dir": HERE, "env_vars": {"PYTHONUNBUFFERED": "1"}},
            num_workers=2,
            job_name="ddp-example",
            placement="spread",
        )
    except ag.AGError as e:  # no cluster, wrong token, refused spec
        print(f"Could not submit the job: {e}", file=sys.stderr)
        return 2
    print(f"Submitted {job.job_id}; waiting for it to finish...", flush=True)
    try:
        job.wait(timeout=300)
    except AGTimeoutError:
        print(f"{job.job_id} did not finish within 300 s; stopping it.", file=sys.stderr)
        job.stop()
        return 1
    except AGJobFailedError:
        print(f"{job.job_id} failed: {job.get_error_message()}", file=sys.stderr)
        print(job.get_logs(task_index=0), file=sys.stderr)
        return 1
    print(f"--- {job.job_id} task 0 output ---")
    print(job.get_logs(task_index=0), end="")
    print(f"--- {job.job_id} SUCCEEDED ---")
    return 0


if __name__ == "__main__":
    sys.exit(main())
