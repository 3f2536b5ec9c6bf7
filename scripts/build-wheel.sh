#!/usr/bin/env bash
# Builds the aethergrid wheel: the Python SDK, the `ag` console command, and this
# checkout's `ag` binary (build/bin/ag, debug info stripped) for this platform.
# No network: Debian's setuptools and wheel (scripts/install-deps.sh) build it.
# Usage: scripts/build-wheel.sh [OUT_DIR]   (default build/wheel; AG_BINARY=PATH: another ag)
# Install: pip install --no-index OUT_DIR/aethergrid-*.whl (in a venv)
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-build/wheel}")"
[ -n "${AG_BINARY:-}" ] || [ -x build/bin/ag ] || scripts/build.sh
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
# A copy, so that the build's leftovers (build/, *.egg-info) stay out of the checkout.
tar -C python --exclude=__pycache__ --exclude='*.egg-info' --exclude=build -cf - . | tar -C "$stage" -xf -
AG_BINARY="${AG_BINARY:-$PWD/build/bin/ag}" /usr/bin/python3 -m pip wheel --no-build-isolation --no-deps --no-index \
  --wheel-dir "$out" "$stage"
ls -l "$out"/aethergrid-*.whl
