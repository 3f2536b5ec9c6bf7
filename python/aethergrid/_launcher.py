"""The `ag` console command of the aethergrid wheel: runs the `ag` binary the wheel
carries (aethergrid/_bin/ag), with the same arguments, in place of this process."""
import os
import sys

from ._binary import ag_path


def main():
    try:
        path = ag_path(bundled_only=True)
    except FileNotFoundError as e:
        sys.stderr.write(f"error: {e}\n")
        return 127
    os.execv(path, [path, *sys.argv[1:]])
    return 127  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
