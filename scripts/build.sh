#!/usr/bin/env bash
# Builds AetherGrid into build/ (one build dir, ccache, Ninja). Installs missing
# Debian packages first. Usage: scripts/build.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Paths relative to the checkout, so that a clone elsewhere (CI) hits the same cache.
export CCACHE_BASEDIR="$(pwd)"
# With -g, ccache would also hash the build folder's absolute path, so a fresh clone
# elsewhere (CI) would miss every entry; the paths inside are relative already.
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j "$(nproc)"
echo "built: $(pwd)/build/bin/ag"
