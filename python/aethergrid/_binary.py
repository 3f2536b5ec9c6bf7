"""Where the `ag` binary is: the one the aethergrid wheel carries, else `ag` on PATH."""
import os
import shutil

_BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "ag")


def ag_path(bundled_only=False):
    """The path of the `ag` binary: the wheel's own (installed with `pip install`), else,
    unless `bundled_only`, the first `ag` on PATH. Raises FileNotFoundError saying how to
    get one."""
    if os.path.isfile(_BUNDLED) and os.access(_BUNDLED, os.X_OK):
        return _BUNDLED
    if not bundled_only:
        found = shutil.which("ag")
        if found:
            return found
    raise FileNotFoundError(
        "this aethergrid package carries no ag binary (it was not installed from a wheel "
        "built with one: scripts/build-wheel.sh); install that wheel, or put ag on PATH")
