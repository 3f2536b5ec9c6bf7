"""The `ag` console command of the aethergrid wheel: runs the `ag` binary the wheel
carries (aethergrid/_bin/ag), with the same arguments, in place of this process. Where
that binary cannot run (a glibc older than it needs), another `ag` on PATH runs instead,
after a line saying why; without one, the reason and what to do, exit 127."""
import os
import sys

from ._binary import ag_path, bundled_cannot_run


def main():
    why = bundled_cannot_run()
    try:
        path = ag_path(bundled_only=why is None, not_this=sys.argv[0])
    except FileNotFoundError as e:
        sys.stderr.write(f"error: {e}\n")
        return 127
    if why is not None:
        sys.stderr.write(f"aethergrid: the ag this package carries cannot run here ({why}); using {path}\n")
    os.execv(path, [path, *sys.argv[1:]])
    return 127  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
