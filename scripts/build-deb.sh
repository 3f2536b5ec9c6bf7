#!/usr/bin/env bash
# Builds the AetherGrid .deb from the portable build: /usr/bin/ag, the systemd units
# (/lib/systemd/system), /etc/aethergrid/{head,worker}.conf (conffiles), maintainer
# scripts from packaging/deb/. Prints the package's path on its last line.
# Usage: scripts/build-deb.sh            -> build-portable/aethergrid_VERSION_amd64.deb
#   AG_VERSION_SUFFIX=+rebuild1 BUILD_DIR=build-portable-next scripts/build-deb.sh
#   (a newer package of the same source, as the upgrade test uses)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build-portable}"
scripts/build-portable.sh >&2
rm -f "$build_dir"/aethergrid_*.deb
(cd "$build_dir" && cpack -G DEB --config CPackConfig.cmake >&2)
deb="$(ls "$(pwd)/$build_dir"/aethergrid_*.deb)"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p' >&2
echo "$deb"
