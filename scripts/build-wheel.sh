#!/usr/bin/env bash
# Builds the aethergrid wheel: the Python SDK, the `ag` console command, and this
# checkout's `ag` binary for this platform: the portable one (build-portable/bin/ag,
# scripts/build-portable.sh; needs only glibc) when it exists, else build/bin/ag (debug
# info stripped; needs the build machine's shared libraries).
# No network: Debian's setuptools and wheel (scripts/install-deps.sh) build it.
# Usage: scripts/build-wheel.sh [OUT_DIR]   (default build/wheel; AG_BINARY=PATH: another ag)
# Install: pip install --no-index OUT_DIR/aethergrid-*.whl (in a venv)
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-build/wheel}")"
if [ -z "${AG_BINARY:-}" ]; then
  if [ -x build-portable/bin/ag ]; then
    AG_BINARY="$PWD/build-portable/bin/ag"
  else
    [ -x build/bin/ag ] || scripts/build.sh
    AG_BINARY="$PWD/build/bin/ag"
  fi
fi
echo "build-wheel: carrying $AG_BINARY"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
# A copy, so that the build's leftovers (build/, *.egg-info) stay out of the checkout.
tar -C python --exclude=__pycache__ --exclude='*.egg-info' --exclude=build -cf - . | tar -C "$stage" -xf -
AG_BINARY="$AG_BINARY" /usr/bin/python3 -m pip wheel --no-build-isolation --no-deps --no-index \
  --wheel-dir "$out" "$stage"
ls -l "$out"/aethergrid-*.whl
