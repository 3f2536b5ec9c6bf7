"""The CLI shows what jobs and tasks wrote without letting the terminal obey it: escape
sequences in job names, commands and log lines come out as \\xHH text, unless the user
asks for the raw bytes (`ag logs --raw`)."""


def test_commands_and_logs_with_escape_sequences_are_shown_not_obeyed(cluster):
    c = cluster
    # A name is one line of text: control characters are refused where they arrive.
    refused = c.ag("submit", "--name", "\x1b[2Jwiped", "--", "true", check=False)
    assert refused.returncode != 0 and "control characters" in refused.stderr
    # A command may hold them (it is the user's shell text): shown escaped, never obeyed.
    command = "printf 'ok \\033]0;owned\\007 done\\n' # \x1b[2Jwiped"
    job_id, proc = c.submit("--name", "plain", "--", command)
    assert proc.returncode == 0, proc.stderr
    listed = c.ag("list-jobs").stdout
    assert "\x1b" not in listed and "\\x1b[2Jwiped" in listed
    status = c.ag("status", job_id, "-v").stdout
    assert "\x1b" not in status and "\\x1b[2Jwiped" in status
    logs = c.ag("logs", job_id).stdout
    assert logs == "ok \\x1b]0;owned\\x07 done\n"
    raw = c.ag("logs", job_id, "--raw").stdout
    assert raw == "ok \x1b]0;owned\x07 done\n"
    # The JSON output is data, exact.
    assert c.ag_json("status", job_id)["entrypoint"] == command


def test_a_control_split_between_two_reads_is_still_escaped(cluster):
    """A task writes the two bytes of a C1 control (CSI, \\xc2\\x9b) two seconds apart:
    `ag logs -f` reads them in two answers and escapes them together."""
    import subprocess
    from conftest import AG_BIN
    job_id, _ = cluster.submit("--no-wait", "--", "printf 'a\\302'; sleep 2; printf '\\23331mred\\n'")
    cluster.wait_state(job_id, "RUNNING")
    proc = subprocess.run([AG_BIN, "logs", job_id, "--task-index", "0", "-f"], env=cluster.env, capture_output=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"a\\xc2\\x9b31mred\n", proc.stdout
