"""Builds the aethergrid wheel: the SDK, plus the `ag` binary for this platform.

The binary is the one AG_BINARY names, else this checkout's portable build
(../build-portable/bin/ag, scripts/build-portable.sh: glibc is its only shared library)
when it exists, else its ordinary build (../build/bin/ag, scripts/build.sh, which needs
the build machine's shared libraries); its debug info is stripped. The `ag` console command the wheel
installs (aethergrid/_launcher.py) execs it. The wheel is tagged py3-none-<platform>:
the binary runs on the platform it was built for. Metadata is in pyproject.toml.
Without network: `pip wheel --no-build-isolation --no-deps python/` (scripts/build-wheel.sh).
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))


def ag_binary():
    path = os.environ.get("AG_BINARY")
    if not path:
        portable = os.path.join(HERE, "..", "build-portable", "bin", "ag")
        path = portable if os.path.isfile(portable) else os.path.join(HERE, "..", "build", "bin", "ag")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SystemExit(f"aethergrid: no ag binary at {os.path.abspath(path)}: build it first "
                         "(scripts/build.sh), or set AG_BINARY to the ag binary the wheel should carry")
    return os.path.abspath(path)


class BuildPyWithBinary(build_py):
    """The SDK's modules, then the binary as aethergrid/_bin/ag."""

    def run(self):
        super().run()
        target_dir = os.path.join(self.build_lib, "aethergrid", "_bin")
        os.makedirs(target_dir, exist_ok=True)
        target = os.path.join(target_dir, "ag")
        shutil.copyfile(ag_binary(), target)
        if shutil.which("objcopy"):
            subprocess.run(["objcopy", "--strip-debug", target], check=True)
        os.chmod(target, 0o755)


class PlatformWheel(bdist_wheel):
    """py3-none-<platform>: any Python 3, but only this platform (the binary)."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(cmdclass={"build_py": BuildPyWithBinary, "bdist_wheel": PlatformWheel})
