"""Gitignore-style path patterns, as working_dir packing uses them.

Implements the rules of gitignore(5) that matter in practice: blank lines and `#`
comments, `!` negation, trailing `/` (directories only), a `/` at the start or in the
middle anchoring the pattern to its .gitignore's folder, `*`, `?`, `[...]`, `**` (as
`**/x`, `x/**` and `a/**/b`), backslash escapes and trailing-space trimming. Within one
list and across nested lists the last matching pattern decides.

Paths are relative to the packed folder, use "/" and have no leading "./".
"""
import re


class Pattern:
    """One compiled gitignore line."""

    __slots__ = ("text", "negate", "dir_only", "regex")

    def __init__(self, text, negate, dir_only, regex):
        self.text = text
        self.negate = negate
        self.dir_only = dir_only
        self.regex = regex

    def matches(self, relpath, is_dir):
        if self.dir_only and not is_dir:
            return False
        return self.regex.match(relpath) is not None

    def __repr__(self):
        return "Pattern({!r})".format(self.text)


def _strip_trailing_spaces(line):
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    return line


def _bracket(pattern, i):
    """Translates the `[...]` starting at pattern[i]; returns (regex, next index), or
    (None, i) when the bracket is not closed (then `[` is a literal)."""
    j = i + 1
    if j < len(pattern) and pattern[j] in "!^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 1
    if j >= len(pattern):
        return None, i
    body = pattern[i + 1:j]
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    body = "".join(ch if ch == "-" else re.escape(ch) for ch in body)
    return "(?!/)[" + ("^" if negate else "") + body + "]", j + 1


def translate(pattern):
    """The regex text (no anchors) for one gitignore glob, already without its leading
    `/`, its trailing `/` and its `!`."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            at_segment_start = i == 0 or pattern[i - 1] == "/"
            if pattern.startswith("**", i) and at_segment_start and (i + 2 == n or pattern[i + 2] == "/"):
                if i + 2 == n:
                    out.append(".*")      # "x/**": everything inside x; "**": everything
                    i += 2
                else:
                    out.append("(?:.*/)?")  # "**/": zero or more folders
                    i += 3
                continue
            while i < n and pattern[i] == "*":
                i += 1
            out.append("[^/]*")
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            regex, nxt = _bracket(pattern, i)
            if regex is not None:
                out.append(regex)
                i = nxt
                continue
            out.append(re.escape(c))
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def compile_line(line):
    """A Pattern for one gitignore line, or None for a blank line or a comment."""
    line = line.rstrip("\r\n")
    if not line or line.startswith("#"):
        return None
    line = _strip_trailing_spaces(line)
    text = line
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    if line.startswith("/"):
        line = line[1:]
    regex = translate(line)
    if not anchored:
        regex = "(?:.*/)?" + regex
    try:
        compiled = re.compile("^" + regex + "$", re.DOTALL)
    except re.error:
        return None  # git ignores patterns it cannot parse; so do we
    return Pattern(text, negate, dir_only, compiled)


class PatternList:
    """The patterns of one .gitignore file (or one list of excludes), applying to the
    paths under `base` (a folder relative to the packed root; "" for the root)."""

    def __init__(self, lines, base=""):
        self.base = base.strip("/")
        self.patterns = [p for p in (compile_line(line) for line in lines) if p is not None]

    @classmethod
    def from_file(cls, path, base=""):
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return cls(f.read().splitlines(), base)

    def decide(self, relpath, is_dir):
        """True (ignored), False (re-included by a `!` pattern) or None (no pattern
        matches), by the last matching pattern."""
        if self.base:
            prefix = self.base + "/"
            if not relpath.startswith(prefix):
                return None
            relpath = relpath[len(prefix):]
        for pattern in reversed(self.patterns):
            if pattern.matches(relpath, is_dir):
                return not pattern.negate
        return None

    def __bool__(self):
        return bool(self.patterns)


def is_ignored(pattern_lists, relpath, is_dir):
    """Whether `relpath` is ignored by a stack of PatternLists ordered from the root's
    to the deepest folder's: the deepest list with a matching pattern decides."""
    for plist in reversed(pattern_lists):
        decision = plist.decide(relpath, is_dir)
        if decision is not None:
            return decision
    return False
