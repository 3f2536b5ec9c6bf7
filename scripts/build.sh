#!/usr/bin/env bash
# Builds AetherGrid into build/ (one build dir, ccache, Ninja). Installs missing
# Debian packages first.
#   scripts/build.sh [extra cmake args]            everything: ag, unit tests, benchmarks
#   scripts/build.sh --example [extra cmake args]  `ag` alone, with only the packages
#                                                  building it and the example need, and
#                                                  without debug info (a third less
#                                                  compiling: the first run's minutes)
# The two configure build/ differently (Release -O2 / RelWithDebInfo -O2 -g); ccache
# keeps both, so going back and forth costs a link once each has been built.
set -euo pipefail
cd "$(dirname "$0")/.."
example=false
if [ "${1:-}" = "--example" ]; then
  example=true
  shift
fi
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Paths relative to the checkout, so that a clone elsewhere (CI) hits the same cache.
export CCACHE_BASEDIR="$(pwd)"
# With -g, ccache would also hash the build folder's absolute path, so a fresh clone
# elsewhere (CI) would miss every entry; the paths inside are relative already.
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
if $example; then
  scripts/install-deps.sh --example
  # Without the test libraries, unless this build dir has them configured already.
  testing=()
  [ -f build/CMakeCache.txt ] || testing=(-DBUILD_TESTING=OFF)
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
    "${testing[@]}" "$@" >/dev/null
  cmake --build build --target ag -j "$(nproc)"
else
  scripts/install-deps.sh
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON "$@" >/dev/null
  cmake --build build -j "$(nproc)"
fi
echo "built: $(pwd)/build/bin/ag"
