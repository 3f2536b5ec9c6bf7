"""Builds the aethergrid wheel: the SDK, plus the `ag` binary for this platform.

The binary is the one AG_BINARY names, else this checkout's portable build
(../build-portable/bin/ag, scripts/build-portable.sh: glibc is its only shared library)
when it exists, else its ordinary build (../build/bin/ag, scripts/build.sh, which needs
the build machine's shared libraries); its debug info is stripped. The `ag` console command the wheel
installs (aethergrid/_launcher.py) execs it. The wheel is tagged py3-none-<platform>:
manylinux_X_Y_x86_64 for a binary that needs glibc alone (X.Y: the newest glibc symbol
version it asks for, never below the 2.31 the portable build is linked against and
tested on), else linux_x86_64. That glibc goes beside it (_bin/ag.glibc), so that the
launcher can say so on an older system. Metadata is in pyproject.toml.
Without network: `pip wheel --no-build-isolation --no-deps python/` (scripts/build-wheel.sh).
"""
import os
import re
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
# The oldest glibc a portable binary is built for and tested on (scripts/build-portable.sh).
OLDEST_GLIBC = (2, 31)
GLIBC_LIBRARIES = re.compile(r"^(linux-vdso\.so\.1|lib(c|m|pthread|dl|rt|util)\.so\.[0-9]+|(/lib(64)?/)?ld-linux[-a-z0-9_]*\.so\.[0-9]+)$")


def ag_binary():
    path = os.environ.get("AG_BINARY")
    if not path:
        portable = os.path.join(HERE, "..", "build-portable", "bin", "ag")
        path = portable if os.path.isfile(portable) else os.path.join(HERE, "..", "build", "bin", "ag")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SystemExit(f"aethergrid: no ag binary at {os.path.abspath(path)}: build it first "
                         "(scripts/build.sh), or set AG_BINARY to the ag binary the wheel should carry")
    return os.path.abspath(path)


def glibc_needed(path):
    """(major, minor) of the glibc the binary at `path` needs, when glibc is the only
    shared library it loads; None for a binary that needs others (a development build)."""
    needed = subprocess.run(["objdump", "-p", path], capture_output=True, text=True, check=True).stdout
    libraries = re.findall(r"^\s*NEEDED\s+(\S+)", needed, re.MULTILINE)
    if not all(GLIBC_LIBRARIES.match(name) for name in libraries):
        return None
    symbols = subprocess.run(["objdump", "-T", path], capture_output=True, text=True, check=True).stdout
    versions = [tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_([0-9]+\.[0-9]+)", symbols)]
    return max([OLDEST_GLIBC, *versions])


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
        glibc = glibc_needed(target) if shutil.which("objdump") else None
        marker = os.path.join(target_dir, "ag.glibc")
        if glibc:
            with open(marker, "w") as f:
                f.write("%d.%d\n" % glibc)
        elif os.path.exists(marker):
            os.remove(marker)


class PlatformWheel(bdist_wheel):
    """py3-none-<platform>: any Python 3, but only this platform (the binary):
    manylinux_X_Y_x86_64 when the binary needs glibc X.Y alone."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, platform = super().get_tag()
        glibc = glibc_needed(ag_binary()) if platform == "linux_x86_64" and shutil.which("objdump") else None
        if glibc:
            platform = "manylinux_%d_%d_x86_64" % glibc
        return "py3", "none", platform


setup(cmdclass={"build_py": BuildPyWithBinary, "bdist_wheel": PlatformWheel})
