#!/usr/bin/env bash
# Builds the portable release `ag` into build-portable/ (or BUILD_DIR): every library
# but glibc linked in statically (libstdc++ and libgcc too), -O2, stripped, its debug
# info in bin/ag.debug. Its objects are compiled as build/'s (RelWithDebInfo), so after
# scripts/build.sh ccache makes this mostly a link.
# Usage: scripts/build-portable.sh [extra cmake args]
#   AG_VERSION_SUFFIX=+rebuild1 BUILD_DIR=build-portable-next scripts/build-portable.sh
#   AG_BUILD_JOBS=1: parallel jobs (default: the number of CPUs)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh >/dev/null
build_dir="${BUILD_DIR:-build-portable}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="$(pwd)"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAG_PORTABLE=ON -DBUILD_TESTING=OFF \
  -DAG_VERSION_SUFFIX="${AG_VERSION_SUFFIX:-}" "$@" >/dev/null
cmake --build "$build_dir" --target ag -j "${AG_BUILD_JOBS:-$(nproc)}"
ag="$(pwd)/$build_dir/bin/ag"
# Nothing but glibc may be left to load at run time.
unexpected="$(ldd "$ag" | awk '{print $1}' | grep -Ev '^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|/lib(64)?/ld-linux[-a-z0-9_]*\.so\.[0-9]+)$' || true)"
if [ -n "$unexpected" ]; then
  echo "error: the portable ag needs shared libraries beyond glibc:" $unexpected >&2
  exit 1
fi
echo "built: $ag ($(du -h "$ag" | cut -f1), debug info: $ag.debug)"
