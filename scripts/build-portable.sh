#!/usr/bin/env bash
# Builds the portable release `ag` into build-portable/ (or BUILD_DIR): every library
# but glibc linked in statically (libstdc++ and libgcc too), -O2, stripped, its debug
# info in bin/ag.debug. Its objects are compiled as build/'s (RelWithDebInfo), so after
# scripts/build.sh ccache makes this mostly a link. It is linked against Debian 11's
# glibc 2.31 (extracted once into ~/.cache/aethergrid/, AG_GLIBC_SYSROOT), and the
# build fails if it asks for any newer glibc symbol (docs/adr/0009).
# Usage: scripts/build-portable.sh [extra cmake args]
#   AG_VERSION_SUFFIX=+rebuild1 BUILD_DIR=build-portable-next scripts/build-portable.sh
#   AG_BUILD_JOBS=1: parallel jobs (default: the number of CPUs)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh >/dev/null
build_dir="${BUILD_DIR:-build-portable}"
oldest_glibc=2.31

# Debian 11's libc6-dev (glibc 2.31), extracted from its packages (no chroot, no
# configuration): what the binary is linked against.
sysroot="${AG_GLIBC_SYSROOT:-$HOME/.cache/aethergrid/glibc-$oldest_glibc-sysroot}"
if [ ! -e "$sysroot/usr/lib/x86_64-linux-gnu/libc_nonshared.a" ]; then
  mkdir -p "$(dirname "$sysroot")"
  exec 9>"$sysroot.lock"
  flock 9
  if [ ! -e "$sysroot/usr/lib/x86_64-linux-gnu/libc_nonshared.a" ]; then
    echo "build-portable: extracting Debian 11's glibc $oldest_glibc into $sysroot"
    rm -rf "$sysroot.new"
    mmdebstrap --quiet --variant=extract --include=libc6-dev,libgcc-s1 bullseye "$sysroot.new" \
      http://deb.debian.org/debian
    # Its absolute links (/lib64/ld-linux-x86-64.so.2 -> /lib/...) made relative, so
    # that they stay inside it.
    find "$sysroot.new/lib" "$sysroot.new/lib64" "$sysroot.new/usr/lib" -type l -lname '/*' | while read -r link; do
      ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$sysroot.new$(readlink "$link")")" "$link"
    done
    rm -rf "$sysroot" && mv "$sysroot.new" "$sysroot"
  fi
  exec 9>&-
fi

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="$(pwd)"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAG_PORTABLE=ON -DBUILD_TESTING=OFF \
  -DAG_VERSION_SUFFIX="${AG_VERSION_SUFFIX:-}" -DAG_GLIBC_SYSROOT="$sysroot" -DAG_OLDEST_GLIBC="$oldest_glibc" "$@" >/dev/null
cmake --build "$build_dir" --target ag -j "${AG_BUILD_JOBS:-$(nproc)}"
ag="$(pwd)/$build_dir/bin/ag"
# Nothing but glibc may be left to load at run time.
unexpected="$(ldd "$ag" | awk '{print $1}' | grep -Ev '^(linux-vdso\.so\.1|lib(c|m|pthread|dl|rt|util)\.so\.[0-9]+|/lib(64)?/ld-linux[-a-z0-9_]*\.so\.[0-9]+)$' || true)"
if [ -n "$unexpected" ]; then
  echo "error: the portable ag needs shared libraries beyond glibc:" $unexpected >&2
  exit 1
fi
# Nor any glibc symbol version newer than the oldest glibc it is for.
newest="$(objdump -T "$ag" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)"
if [ "$(printf '%s\n%s\n' "$newest" "$oldest_glibc" | sort -V | tail -1)" != "$oldest_glibc" ]; then
  echo "error: the portable ag asks for glibc $newest, newer than $oldest_glibc:" >&2
  objdump -T "$ag" | grep -E "GLIBC_$newest\b" >&2
  exit 1
fi
echo "built: $ag ($(du -h "$ag" | cut -f1), for glibc $oldest_glibc and later (its newest symbol: $newest), debug info: $ag.debug)"
