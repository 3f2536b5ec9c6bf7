"""The Prometheus alerting rules in packaging/prometheus: promtool accepts them, their
unit tests (aethergrid-alerts.test.yml) pass, and every metric they use is one a real
head serves at /metrics."""
import os
import re
import shutil
import subprocess

import yaml

from conftest import REPO
from test_readme_flags import help_text, lists_flag

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
RULES_DIR = REPO / "packaging" / "prometheus"
RULES = RULES_DIR / "aethergrid-alerts.yml"
RULE_TESTS = RULES_DIR / "aethergrid-alerts.test.yml"
SCRAPE_JOB = "aethergrid-head"

# The metric families the rules read, as the head names them in `# TYPE` lines (a
# histogram by its family name, not its _bucket series). A rule that reads a metric not
# listed here fails test_every_metric_the_rules_use_is_listed.
RULE_METRIC_FAMILIES = (
    "ag_nodes",                 # gauge {state}
    "ag_head_leader",           # gauge
    "ag_store_write_seconds",   # histogram
    "ag_node_unhealthy",        # gauge {node, reason}
    "ag_gpu_errors_total",      # counter {node, gpu, kind}
    "ag_jobs_finished_total",   # counter {state}
    "ag_job_pending_seconds",   # gauge {job_id, owner, queue, reason}
)
_METRIC_NAME = re.compile(r"\bag_[a-z0-9_]+")


def promtool(*args):
    assert os.path.exists(PROMTOOL), (
        "promtool is missing; it comes with Debian's prometheus package: run scripts/install-deps.sh")
    # Relative paths, from the rules' folder, as the test file names its rule file.
    return subprocess.run([PROMTOOL, *args], cwd=RULES_DIR, capture_output=True, text=True, timeout=60)


def rule_expressions():
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule["expr"] for group in groups for rule in group["rules"]}


def families_the_rules_use():
    names = set()
    for expr in rule_expressions().values():
        for name in _METRIC_NAME.findall(expr):
            # ag_store_write_seconds_bucket is a series of the histogram ag_store_write_seconds.
            names.add(name.removesuffix("_bucket"))
    return names


def test_promtool_checks_the_rules():
    check = promtool("check", "rules", RULES.name)
    assert check.returncode == 0, f"promtool check rules failed:\n{check.stdout}\n{check.stderr}"
    assert f"SUCCESS: {len(rule_expressions())} rules found" in check.stdout, check.stdout + check.stderr


def test_promtool_unit_tests_of_the_rules_pass():
    run = promtool("test", "rules", RULE_TESTS.name)
    assert run.returncode == 0, f"promtool test rules failed:\n{run.stdout}\n{run.stderr}"
    assert "SUCCESS" in run.stdout, run.stdout + run.stderr


def test_every_rule_has_unit_tests():
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    cases = [case for test in tests for case in test["alert_rule_test"]]
    for alert in rule_expressions():
        mine = [case for case in cases if case["alertname"] == alert]
        assert any(case.get("exp_alerts") for case in mine), f"no test case where {alert} fires"
        assert any(not case.get("exp_alerts") for case in mine), f"no test case where {alert} must not fire"


def test_the_rules_and_their_readme_name_the_same_scrape_job():
    assert f'up{{job="{SCRAPE_JOB}"}}' in rule_expressions()["AetherGridHeadNotLeading"]
    assert f"job_name: {SCRAPE_JOB}" in (RULES_DIR / "README.md").read_text()


def test_every_metric_the_rules_use_is_listed():
    assert families_the_rules_use() <= set(RULE_METRIC_FAMILIES), (
        f"add to RULE_METRIC_FAMILIES: {sorted(families_the_rules_use() - set(RULE_METRIC_FAMILIES))}")


def test_every_command_the_alerts_suggest_exists():
    """The `ag ...` commands in the annotations and the README's table name commands and
    flags the binary accepts (templates such as {{ $labels.node }} stand for one word)."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    texts = [text for group in groups for rule in group["rules"] for text in rule["annotations"].values()]
    texts.append((RULES_DIR / "README.md").read_text())
    commands = set()
    for text in texts:
        text = re.sub(r"\{\{[^}]*\}\}", "WORD", text)
        commands.update(tuple(m.split()) for m in re.findall(r"`(ag [^`]+)`", text))
    assert len(commands) >= 10, commands
    problems = []
    for words in sorted(commands):
        positional = [w for w in words[1:] if not w.startswith("-")]
        command = " ".join(positional[:2] if positional[:1] in (["quota"], ["queue"], ["user"], ["tls"]) else positional[:1])
        shown = help_text(*command.split())
        if f"Usage: ag {command} " not in shown:
            problems.append(f"`{' '.join(words)}`: no command `ag {command}`")
            continue
        problems += [f"`{' '.join(words)}`: `ag {command} --help` lists no {flag}"
                     for flag in words[1:] if flag.startswith("-") and not lists_flag(shown, flag)]
    assert not problems, "\n".join(problems)


def test_a_head_serves_every_metric_the_rules_use(cluster_factory):
    """Each family has its `# TYPE` line even with no samples (no unhealthy node, no
    GPU error, no long-pending job), and the counter of finished jobs starts at 0 for
    each end state, so that increase() sees the first job of each."""
    c = cluster_factory("c", workers=("127.0.0.2",))
    status, _, text = c.api_full("GET", "/metrics", port=c.dashboard_port)
    assert status == 200, text
    typed = set(re.findall(r"^# TYPE (\S+) \S+$", text, re.M))
    missing = [name for name in RULE_METRIC_FAMILIES if name not in typed]
    assert not missing, f"/metrics lacks {missing}; it has {sorted(typed)}"
    for state in ("SUCCEEDED", "FAILED", "STOPPED"):
        assert f'ag_jobs_finished_total{{state="{state}"}} 0\n' in text, (
            f"no ag_jobs_finished_total{{state=\"{state}\"}} 0 at start:\n"
            + "\n".join(line for line in text.splitlines() if "ag_jobs_finished_total" in line))
