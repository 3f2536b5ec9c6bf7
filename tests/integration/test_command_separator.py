"""The command after `--` is the task's, word for word, whatever option of `ag submit`
stands before the `--` (issue 32). CLI11 ends a repeatable option (--env, --exclude,
--after, ...) at `--` and used to take the words after it as ag's own: the README's
example failed with "The following argument was not expected: --epochs"."""
import json
import re
import subprocess

import pytest

from conftest import AG_BIN

ARGV = "import sys; print(sys.argv[1:])"


def repeatable_submit_options():
    """The options `ag submit --help` lists as taking several values (CLI11 shows them
    as `TEXT ...`)."""
    text = subprocess.run([AG_BIN, "submit", "--help"], capture_output=True, text=True, timeout=30).stdout
    return sorted(set(re.findall(r"^\s+(--[a-z-]+)(?:,[^ ]*)? \S+ \.\.\.", text, re.M)))


def test_the_readme_example_keeps_the_scripts_own_flags(cluster, tmp_path):
    (tmp_path / "train.py").write_text("import os, sys\nprint('argv', sys.argv[1:], os.environ['PYTHONPATH'])\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.bin").write_bytes(b"x" * 1000)
    proc = subprocess.run(
        [AG_BIN, "submit", "-n", "2", "--working-dir", str(tmp_path), "--exclude", "data/", "--python",
         "/usr/bin/python3", "--env", "PYTHONPATH=/opt/lib:$PYTHONPATH", "--", "python", "train.py", "--epochs",
         "1"],
        env=cluster.env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "argv ['--epochs', '1'] /opt/lib:" in proc.stdout, proc.stdout


def test_every_repeatable_option_before_the_separator_leaves_the_command_whole(cluster, tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    options = repeatable_submit_options()
    for expected in ("--env", "--exclude", "--constraint", "--after", "--after-any", "--after-failed", "--mount"):
        assert expected in options, options
    first, _ = cluster.submit("--no-wait", "--hold", "--", "true")  # pending: every --after kind may wait on it
    values = {"--env": "A=1", "--constraint": "zone=a", "--after": first, "--after-any": first,
              "--after-failed": first, "--exclude": "data/", "--mount": "/srv:/srv:ro"}
    needs = {"--exclude": ["--working-dir", str(tmp_path)], "--constraint": ["--allow-unschedulable"],
             "--mount": ["--image", "debian:12", "--allow-unschedulable"]}
    commands = [["python3", "-u", "-c", ARGV, "--epochs", "1"], ["bash", "-c", "echo one; echo two", "-x"]]
    for option in options:
        assert option in values, f"{option} is new: give it a value in this table"
        for command in commands:
            args = ["submit", "--no-wait", "--hold", *needs.get(option, []), option, values[option], "--", *command]
            proc = subprocess.run([AG_BIN, *args], env=cluster.env, capture_output=True, text=True, timeout=60,
                                  stdin=subprocess.DEVNULL, cwd=tmp_path)
            assert "not expected" not in proc.stderr, (option, command, proc.stderr)
            assert proc.returncode == 0, (option, command, proc.stderr)
            job_id = proc.stdout.strip().splitlines()[-1]
            cluster.job_ids.add(job_id)
            spec = cluster.job(job_id)
            assert spec["entrypoint"] == " ".join(
                w if re.fullmatch(r"[\w./=:,+@%-]+", w) else "'" + w.replace("'", "'\\''") + "'" for w in command), (
                option, spec["entrypoint"])


def test_a_dependency_pipeline_runs_its_bash_c_command(cluster):
    first, _ = cluster.submit("--no-wait", "--", "echo first")
    job_id, proc = cluster.submit("--after", first, "--", "bash", "-c", "echo after $AG_JOB_ID")
    assert proc.returncode == 0, proc.stderr
    assert f"after {job_id}" in proc.stdout, proc.stdout


def test_words_on_both_sides_of_the_separator_are_refused(head_only):
    proc = head_only.ag("submit", "python", "--", "train.py", check=False)
    assert proc.returncode == 2, proc
    assert "'python' stands before `--`" in proc.stderr, proc.stderr
    assert head_only.api("GET", "/api/jobs")[1]["total"] == 0
