#!/usr/bin/env bash
# The README's second command: builds AetherGrid and runs every test: the GoogleTest
# unit tests (ctest), then the integration tests (pytest over real head and worker
# daemons on 127.0.0.0/8), four at a time (pytest-xdist; AG_TEST_PROCESSES=N for
# another number, 0 for one at a time). Ends with pytest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
# The release artifacts test_package.py installs into clean Debian root file systems:
# the portable binary and its .deb, a .deb of the same source with a newer version and
# the previous release's .deb, for the upgrade tests. Their objects are build/'s
# (ccache): about a minute of linking (the previous release: once per machine).
echo "== release build and packages (build-portable/, build-portable-next/, build-previous/)"
scripts/build-deb.sh >/dev/null
AG_VERSION_SUFFIX=+rebuild1 BUILD_DIR=build-portable-next scripts/build-deb.sh >/dev/null
scripts/build-previous-deb.sh >/dev/null
echo "== unit tests (ctest)"
(cd build && ctest --output-on-failure -j "$(nproc)")
echo "== integration tests (pytest)"
export AG_BIN="$(pwd)/build/bin/ag"
# Each test has its own addresses, ports (conftest.free_ports: a block per process), data
# dirs and network namespaces, so they run side by side; most of their time is waiting.
# Those marked `serial` (they measure CPU time, or need the CPUs) run first, alone; a
# failure there ends the script with that run's summary line.
status=0
/usr/bin/python3 -m pytest -q -p no:cacheprovider -m serial tests/integration "$@" || status=$?
[ "$status" -eq 0 ] || [ "$status" -eq 5 ] || exit "$status"  # 5: none selected (-k)
/usr/bin/python3 -m pytest -q -p no:cacheprovider -n "${AG_TEST_PROCESSES:-4}" --durations=15 -m "not serial" \
  tests/integration "$@"
