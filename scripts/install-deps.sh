#!/usr/bin/env bash
# Installs every Debian package AetherGrid needs to build, run and test.
# Idempotent: only packages that are missing are installed.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost-dev libboost-system-dev
  nlohmann-json3-dev libsqlite3-dev libcli11-dev libspdlog-dev libfmt-dev
  libarchive-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev googletest
  python3 python3-pytest python3-torch python3-numpy
  procps iproute2 curl
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
