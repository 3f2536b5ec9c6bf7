"""Where the `ag` binary is: the one the aethergrid wheel carries, else `ag` on PATH."""
import os
import shutil

_BIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin")
_BUNDLED = os.path.join(_BIN_DIR, "ag")
# The glibc the bundled binary needs ("2.31"), written by the wheel's build.
_GLIBC_NEEDED = os.path.join(_BIN_DIR, "ag.glibc")


def _version(text):
    return tuple(int(part) for part in text.split("."))


def bundled_cannot_run():
    """Why the bundled binary cannot run here (a glibc older than it needs), or None."""
    try:
        with open(_GLIBC_NEEDED) as f:
            needed = f.read(32).strip()
        _version(needed)
    except (OSError, ValueError):
        return None  # no requirement recorded (or none this launcher can read): try the binary
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION").split()[1]  # "glibc 2.31"
    except (ValueError, OSError, IndexError, AttributeError):
        found = None
    if found is None:
        return f"it needs glibc {needed} or newer, and this system's C library is not glibc"
    if _version(found) < _version(needed):
        return f"it needs glibc {needed} or newer, and this system has glibc {found}"
    return None


def _ag_on_path(not_this=None):
    """The first `ag` on PATH that is not the file `not_this` (the launcher itself)."""
    skip = os.path.realpath(not_this) if not_this else None
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        found = shutil.which("ag", path=folder or ".")
        if found and os.path.realpath(found) != skip:
            return found
    return None


def ag_path(bundled_only=False, not_this=None):
    """The path of the `ag` binary: the wheel's own (installed with `pip install`), else,
    unless `bundled_only`, the first `ag` on PATH (never the file `not_this`). Raises
    FileNotFoundError saying how to get one."""
    if os.path.isfile(_BUNDLED) and os.access(_BUNDLED, os.X_OK):
        if bundled_cannot_run() is None or bundled_only:
            return _BUNDLED
    if not bundled_only:
        found = _ag_on_path(not_this)
        if found:
            return found
    if os.path.isfile(_BUNDLED):
        raise FileNotFoundError(
            f"the ag this aethergrid package carries cannot run here: {bundled_cannot_run()}; "
            "install AetherGrid's .deb or build ag from source (scripts/build.sh) and put it on PATH")
    raise FileNotFoundError(
        "this aethergrid package carries no ag binary (it was not installed from a wheel "
        "built with one: scripts/build-wheel.sh); install that wheel, or put ag on PATH")
