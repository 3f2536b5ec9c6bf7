#!/usr/bin/env bash
# Builds AetherGrid into build/ (one build dir, ccache, Ninja). Installs missing
# Debian packages first. Usage: scripts/build.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j "$(nproc)"
echo "built: $(pwd)/build/bin/ag"
