"""The README and the binary agree (issue 32): every `ag` command line in README.md's
code blocks names commands that exist and flags that `ag COMMAND --help` lists. A flag
renamed in the code but not in the README (or the other way round) fails here."""
import re
import shlex
import subprocess

from conftest import AG_BIN, REPO

GLOBAL_FLAGS = {"--address", "--token", "--token-file", "-o", "--output", "--insecure", "--help", "-h"}


def help_text(*command):
    proc = subprocess.run([AG_BIN, *command, "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, f"`ag {' '.join(command)} --help` failed: {proc.stderr}"
    return proc.stdout


def lists_flag(help_output, flag):
    """Whether `--help` output lists `flag` itself (not only a longer flag it begins);
    short flags written together (`-it`) each."""
    if re.fullmatch(r"-[a-zA-Z]{2,}", flag):
        return all(lists_flag(help_output, "-" + letter) for letter in flag[1:])
    return re.search(rf"(^|[\s,]){re.escape(flag)}([\s,=]|$)", help_output, re.M) is not None


def readme_command_lines():
    """Each `ag ...` command in README.md's code blocks, as (line number, words)."""
    text = (REPO / "README.md").read_text()
    lines = []
    for block in re.finditer(r"```(?:bash|sh)?\n(.*?)```", text, re.S):
        start = text[:block.start()].count("\n") + 2
        joined = block.group(1).replace("\\\n", " ")
        for offset, line in enumerate(joined.splitlines()):
            code = re.sub(r"(^|\s)#.*$", "", line)  # comments say things in prose
            for part in re.split(r"[;|]|&&", code):
                part = part.strip()
                if not part.startswith("ag "):
                    continue
                try:
                    words = shlex.split(part.split(">")[0])
                except ValueError:
                    continue
                lines.append((start + offset, words))
    return lines


def test_every_flag_the_readme_shows_is_accepted():
    commands_with_subcommands = {"quota", "queue", "user", "token", "tls"}
    seen = 0
    for line_no, words in readme_command_lines():
        words = words[1:]
        if "--" in words:
            words = words[:words.index("--")]
        positional = [w for w in words if not w.startswith("-")]
        flags = {w.split("=")[0] for w in words if w.startswith("-") and w != "..."}
        command = positional[:1]
        if command and command[0] in commands_with_subcommands and len(positional) > 1:
            command = positional[:2]
        shown = help_text(*command)
        for flag in sorted(flags - GLOBAL_FLAGS):
            assert lists_flag(shown, flag), (
                f"README.md line {line_no}: `ag {' '.join(command)}` has no flag {flag} (ag {' '.join(command)} --help)")
        seen += 1
    assert seen >= 30, f"only {seen} ag command lines found in README.md: did the code blocks change shape?"


def test_the_check_tells_a_flag_from_a_longer_one():
    shown = help_text("submit")
    assert lists_flag(shown, "--num-workers") and lists_flag(shown, "-n")
    assert not lists_flag(shown, "--num-worker") and not lists_flag(shown, "--no-such-flag")
