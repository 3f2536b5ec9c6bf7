#!/usr/bin/env bash
# The README's second command: builds AetherGrid and runs every test: the GoogleTest
# unit tests (ctest), then the integration tests (pytest over real head and worker
# daemons on 127.0.0.0/8). Ends with pytest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
echo "== unit tests (ctest)"
(cd build && ctest --output-on-failure -j "$(nproc)")
echo "== integration tests (pytest)"
export AG_BIN="$(pwd)/build/bin/ag"
/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/integration "$@"
