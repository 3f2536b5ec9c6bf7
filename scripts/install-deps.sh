#!/usr/bin/env bash
# Installs the Debian packages AetherGrid needs, and the browser tests' npm package
# (playwright-core, pinned by tests/browser/package-lock.json). Idempotent: only what is
# missing is installed.
#   scripts/install-deps.sh            everything: build, run, test, package
#   scripts/install-deps.sh --example  only what building `ag` and running the example
#                                      DDP job need (scripts/run-example.sh)
set -euo pipefail

# Building `ag` and running the example (2 ranks of PyTorch DDP, gloo on CPU).
example_packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost-dev libboost-system-dev
  nlohmann-json3-dev libsqlite3-dev libcli11-dev libspdlog-dev libfmt-dev
  libarchive-dev libssl-dev
  libpq-dev               # libpq's header: the PostgreSQL store loads libpq at run time
  python3 python3-torch python3-numpy
  procps iproute2
)
# Testing, benchmarking and packaging (scripts/test.sh).
test_packages=(
  postgresql              # the PostgreSQL store's tests start their own server (initdb, pg_ctl)
  libacl1-dev zlib1g-dev  # libacl.a, libz.a: the portable `ag` links libarchive statically (scripts/build-portable.sh)
  libgtest-dev libgmock-dev libbenchmark-dev googletest
  python3-pytest python3-pytest-xdist
  python3-setuptools python3-wheel python3-pip python3-venv   # the wheel with `ag` (scripts/build-wheel.sh)
  curl openssl
  iptables                # the multi-host tests drop packets between network-namespace hosts
  chromium                # the dashboard's browser tests (headless, driven by playwright-core)
  prometheus              # promtool, which checks /metrics in the tests (the server is not used)
  podman runc catatonit   # jobs in container images (runc: crun cannot start containers on some hosts)
  mmdebstrap              # the tests' images, and Debian 11's glibc for the portable build
  docker-registry         # a registry on loopback, for the tests' real pulls
)

example_only=false
if [ "${1:-}" = "--example" ]; then
  example_only=true
elif [ $# -gt 0 ]; then
  echo "usage: scripts/install-deps.sh [--example]" >&2
  exit 2
fi
packages=("${example_packages[@]}")
$example_only || packages+=("${test_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Node.js (>= 20 for playwright-core) and npm run the browser tests. A machine may have
# them from outside Debian (NodeSource's nodejs package bundles npm and conflicts with
# Debian's npm), so Debian's are installed only when the commands are missing.
if ! $example_only; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

$example_only && exit 0

# The browser tests' playwright-core, exactly as locked; it drives Debian's chromium
# (it never downloads a browser of its own). Re-installed when the lock file is newer
# than the install.
browser_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
if [ ! -d "$browser_dir/node_modules/playwright-core" ] ||
   [ "$browser_dir/package-lock.json" -nt "$browser_dir/node_modules/.package-lock.json" ]; then
  echo "install-deps: npm ci in tests/browser"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix "$browser_dir" --no-audit --no-fund --loglevel=error
fi
