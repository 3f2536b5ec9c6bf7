#!/usr/bin/env bash
# Runs clang-tidy (the checks in .clang-tidy) over AetherGrid's sources, or over the
# files given, using build/compile_commands.json (run scripts/build.sh first).
# Exits non-zero when there is any finding. Slow on 2 cores (~15 s a file): pass the
# files you changed while working, and run it whole before a large change lands.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-tidy >/dev/null || { echo "lint: clang-tidy missing (apt-get install clang-tidy)"; exit 2; }
[ -f build/compile_commands.json ] || { echo "lint: build/compile_commands.json missing: run scripts/build.sh"; exit 2; }
if [ $# -gt 0 ]; then files=("$@"); else mapfile -t files < <(git ls-files 'src/*.cc'); fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 1 clang-tidy -p build --quiet >"$out" 2>/dev/null || true
if grep -E "(warning|error):" "$out"; then
  echo "lint: $(grep -cE '(warning|error):' "$out") finding(s)"
  exit 1
fi
echo "lint: ${#files[@]} file(s) clean"
