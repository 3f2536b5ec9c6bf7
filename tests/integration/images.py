"""Container images for the tests, built from Debian's packages with no registry:
`mmdebstrap` makes a Debian root file system (bookworm, or bullseye for the recipes in
OLD_SUITE) with a recipe's packages, and
`podman import` turns it into an image. The tag is a hash of the recipe, so a machine
builds each recipe once and later runs (and CI's next steps) find it.

    python3 tests/integration/images.py python     # build (or find) one, print its name
"""
import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile

# Recipe name -> Debian packages on top of the minimal base.
RECIPES = {
    "python": ["python3"],
    "torch": ["python3", "python3-torch"],
    # systemd as PID 1 and the shared libraries of a Debian 12 build of `ag` (mounted in):
    # the units under a real systemd (test_systemd_units.py).
    "systemd": ["systemd", "systemd-sysv", "passwd", "procps", "libspdlog1.10", "libfmt9", "libsqlite3-0",
                "libarchive13", "libssl3", "libicu72", "libxml2"],
    # The release artifacts (test_package.py): the minimal base alone, which lacks every
    # library a dynamic `ag` needs, for the portable binary; and systemd without them,
    # for the .deb.
    "bare": [],
    "systemd-bare": ["systemd", "systemd-sysv", "procps"],
    # The same two in Debian 11 (glibc 2.31, the oldest the portable binary is for).
    "bare-bullseye": [],
    "systemd-bare-bullseye": ["systemd", "systemd-sysv", "procps"],
    # Python 3.9 and its venv (pip 20.3): the wheel installed as a user would (test_install.py).
    "python-bullseye": ["python3", "python3-venv"],
}
SUITE = "bookworm"
OLD_SUITE = {"bare-bullseye": "bullseye", "systemd-bare-bullseye": "bullseye", "python-bullseye": "bullseye"}
# Building one takes a minute or a few (downloads); never forever.
BUILD_TIMEOUT_S = 1200
LOCK_FILE = os.path.join(tempfile.gettempdir(), "aethergrid-test-images.lock")


def suite(recipe):
    return OLD_SUITE.get(recipe, SUITE)


def image_name(recipe):
    packages = RECIPES[recipe]
    digest = hashlib.sha256((suite(recipe) + " " + " ".join(sorted(packages))).encode()).hexdigest()[:12]
    return "localhost/aethergrid-test-{}:{}".format(recipe, digest)


def image_exists(name):
    return subprocess.run(["podman", "image", "exists", name], timeout=60).returncode == 0


def ensure_image(recipe):
    """The image for `recipe`, built now if this machine lacks it."""
    name = image_name(recipe)
    with open(LOCK_FILE, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time, even across processes
        if image_exists(name):
            return name
        with tempfile.TemporaryDirectory(prefix="ag-image-") as tmp:
            rootfs = os.path.join(tmp, "rootfs.tar")
            include = ["--include=" + ",".join(RECIPES[recipe])] if RECIPES[recipe] else []
            subprocess.run(["mmdebstrap", "--quiet", "--variant=minbase", *include, suite(recipe), rootfs],
                           check=True, timeout=BUILD_TIMEOUT_S)
            subprocess.run(["podman", "import", "--quiet",
                            "--change", "ENV=PATH=/usr/local/bin:/usr/bin:/bin",
                            "--change", "ENV=LANG=C.UTF-8", rootfs, name],
                           check=True, timeout=600, stdout=subprocess.DEVNULL)
    return name


if __name__ == "__main__":
    for recipe in sys.argv[1:] or sorted(RECIPES):
        print(ensure_image(recipe))
