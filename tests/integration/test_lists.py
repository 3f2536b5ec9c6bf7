"""Lists that never hide rows (issue 32, item 3): `ag list-jobs` pages through the head's
pages of 1,000 (--limit, --all), filters (--user, --mine, --name, --queue, --since, --state),
says on stderr how many it did not show, and has a MESSAGE column; `client.list_jobs()`
takes the same filters and a limit; `ag audit` filters by user, action and time. Over
2,500 held jobs on a head with no workers. Bad input: --limit 0, --all with --limit,
--mine with --user, --since in the future, a cursor that names no job."""
import datetime
import json
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "python"))
import aethergrid  # noqa: E402

TOTAL = 2500


def _submit_many(c, token=None, prefix="a", count=TOTAL):
    specs = [{"entrypoint": "true", "job_name": f"{prefix}-{i}", "hold": True} for i in range(count)]
    kwargs = {} if token is None else {"token": token}
    status, body = c.api("POST", "/api/jobs/batch", {"jobs": specs}, timeout=120, **kwargs)
    assert status == 201, body
    return body["job_ids"]


def _rows(proc):
    return [line for line in proc.stdout.splitlines()[1:] if line.strip()]


def test_list_jobs_pages_filters_and_never_hides_rows(head_only):
    c = head_only
    ids = _submit_many(c, prefix="a", count=TOTAL - 100)
    bob = c.ag_json("user", "add", "bob")["token"]
    bobs = _submit_many(c, token=bob, prefix="b", count=100)

    default = c.ag("list-jobs")
    assert len(_rows(default)) == 1000
    assert default.stderr == f"showing 1000 of {TOTAL} jobs (--all for every job, --limit N for more)\n"
    assert "MESSAGE" in default.stdout.splitlines()[0] and "PENDING (held)" in default.stdout
    every = c.ag("list-jobs", "--all")
    assert len(_rows(every)) == TOTAL and every.stderr == ""
    shown = {line.split()[0] for line in _rows(every)}
    assert shown == set(ids) | set(bobs), "every job once"
    some = c.ag("list-jobs", "--limit", 1500)
    assert len(_rows(some)) == 1500 and "showing 1500 of 2500" in some.stderr
    as_json = c.ag_json("list-jobs", "--limit", 3)
    assert len(as_json["jobs"]) == 3 and as_json["total"] == TOTAL
    assert [j["job_id"] for j in as_json["jobs"]] == bobs[::-1][:3], "newest first"

    assert len(_rows(c.ag("list-jobs", "--user", "bob"))) == 100
    assert len(_rows(c.ag("list-jobs", "--mine", "--all"))) == TOTAL - 100
    mine_as_bob = c.ag("list-jobs", "--mine", env={"AG_TOKEN": bob})
    assert {line.split()[2] for line in _rows(mine_as_bob)} == {"bob"}
    named = c.ag("list-jobs", "--name", "a-1?")
    assert sorted(line.split()[1] for line in _rows(named)) == sorted(f"a-1{i}" for i in range(10))
    assert _rows(c.ag("list-jobs", "--queue", "nope")) == []
    assert len(_rows(c.ag("list-jobs", "--since", "1h", "--all"))) == TOTAL
    assert len(_rows(c.ag("list-jobs", "--state", "pending", "--limit", 10))) == 10

    for args, said in ((["--limit", 0], "--limit: 0 is out of range"),
                       (["--all", "--limit", 5], "give --all or --limit, not both"),
                       (["--mine", "--user", "bob"], "give --mine or --user, not both"),
                       (["--since", "2999-01-01T00:00:00"], "is in the future")):
        proc = c.ag("list-jobs", *args, check=False)
        assert proc.returncode == 2 and proc.stderr.startswith("error: ") and said in proc.stderr, (args, proc)
    status, body = c.api("GET", "/api/jobs?after=job_000000000000")
    assert status == 400 and "pass the 'next' of the previous page" in body["error"]
    future = int((datetime.datetime.now().timestamp() + 3600) * 1000)
    status, body = c.api("GET", f"/api/jobs?since_ms={future}")
    assert status == 400 and "in the future" in body["error"]

    client = aethergrid.Client(c.address, token=c.token)
    assert len(client.list_jobs()) == TOTAL
    assert len(client.list_jobs(limit=1200)) == 1200
    assert len(client.list_jobs(user="bob")) == 100
    assert len(client.list_jobs(name="b-*", since=datetime.timedelta(hours=1))) == 100
    for bad in ({"limit": 0}, {"since": datetime.datetime(2999, 1, 1)}, {"user": 3}):
        try:
            client.list_jobs(**bad)
        except aethergrid.AGValidationError:
            continue
        raise AssertionError(f"list_jobs({bad}) was accepted")


def test_audit_filters_by_user_action_and_time(head_only):
    c = head_only
    c.ag("user", "add", "carol")
    c.ag("queue", "create", "a100")
    entries = c.ag_json("audit", "--action", "/api/users")["entries"]
    assert [e["action"] for e in entries] == ["POST /api/users (carol)"], entries
    assert {e["actor"] for e in c.ag_json("audit", "--user", "admin")["entries"]} == {"admin"}
    assert c.ag_json("audit", "--user", "nobody")["entries"] == []
    assert len(c.ag_json("audit", "--since", "1h")["entries"]) >= 2
    status, body = c.api("GET", "/api/audit?action=" + "x" * 201)
    assert status == 400 and "'action' is longer than 200 characters" in body["error"], body
    status, body = c.api("GET", "/api/jobs?name=" + "x" * 201)
    assert status == 400 and "'name' is longer than 200 characters" in body["error"], body
    proc = c.ag("audit", "--since", "2999-01-01T00:00:00", check=False)
    assert proc.returncode == 2 and "is in the future" in proc.stderr, proc
    print(json.dumps(entries))


def test_stop_job_takes_several_ids_or_chooses_them_with_a_count(head_only):
    c = head_only
    first, second, third = _submit_many(c, prefix="s", count=3)
    out = c.ag("stop-job", first, second).stdout
    assert f"Stop requested for job {first}" in out and f"Stop requested for job {second}" in out, out
    assert c.wait_state(first, "STOPPED")["state"] == "STOPPED"

    bob = c.ag_json("user", "add", "bob")["token"]
    (bobs,) = _submit_many(c, token=bob, prefix="t", count=1)
    # Choosing by state asks first; without a terminal it needs -y, and stops nothing.
    proc = c.ag("stop-job", "--mine", "--state", "PENDING", check=False)
    assert proc.returncode == 2 and "this stops 1 PENDING job(s) of yours: add -y" in proc.stderr, proc
    assert c.job(third)["state"] == "PENDING"
    proc = c.ag("stop-job", "--mine", "--state", "pending", "-y")
    assert "Stop requested for 1 PENDING job(s) of yours" in proc.stdout, proc.stdout
    assert c.wait_state(third, "STOPPED")["state"] == "STOPPED"
    assert c.job(bobs)["state"] == "PENDING", "only the caller's own"
    proc = c.ag("stop-job", "--mine", "-y")
    assert "no unfinished job(s) of yours to stop" in proc.stderr, proc

    for args, said in (([first, "--mine"], "give job ids, or --mine / --state to choose them, not both"),
                       ([], "give a job id (or several), or --mine / --state"),
                       (["--state", "SUCCEEDED"], "only PENDING or RUNNING jobs can be stopped")):
        proc = c.ag("stop-job", *args, check=False)
        assert proc.returncode == 2 and proc.stderr.startswith("error: ") and said in proc.stderr, (args, proc)
        assert proc.stderr.count("\n") == 1, proc.stderr
    proc = c.ag("stop-job", "job_000000000000", bobs, check=False)
    assert proc.returncode == 1 and "no job with id 'job_000000000000'" in proc.stderr, proc
    assert c.wait_state(bobs, "STOPPED")["state"] == "STOPPED", "the other id is stopped all the same"
