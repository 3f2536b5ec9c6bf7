"""The CLI shows what jobs and tasks wrote without letting the terminal obey it: escape
sequences in job names, commands and log lines come out as \\xHH text, unless the user
asks for the raw bytes (`ag logs --raw`)."""


def test_names_and_logs_with_escape_sequences_are_shown_not_obeyed(cluster):
    c = cluster
    name = "\x1b[2Jwiped"
    job_id, proc = c.submit("--name", name, "--", "printf 'ok \\033]0;owned\\007 done\\n'")
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
    assert c.ag_json("status", job_id)["name"] == name
