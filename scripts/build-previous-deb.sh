#!/usr/bin/env bash
# Builds the .deb of the previous release (the commit packaging/previous-release names)
# into build-previous/, versioned VERSION~prev so that this checkout's package is an
# upgrade of it; the upgrade test installs it first. Its source comes from this
# repository's history (a git worktree); its objects mostly from ccache, since most files
# are the same as this checkout's. Skipped when build-previous/ holds that commit's
# package already. Prints the package's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
commit="$(grep -Ev '^\s*(#|$)' packaging/previous-release | head -1 | tr -d '[:space:]')"
if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
  # A shallow clone: the upgrade test from that release skips, saying how to build it.
  echo "warning: packaging/previous-release names commit $commit, which this clone lacks" \
       "(a shallow clone? git fetch --unshallow); no previous release's .deb built" >&2
  exit 0
fi
out="$repo/build-previous"
if [ -f "$out/commit" ] && [ "$(cat "$out/commit")" = "$commit" ] && ls "$out"/aethergrid_*.deb >/dev/null 2>&1; then
  ls "$out"/aethergrid_*.deb
  exit 0
fi
rm -rf "$out"
mkdir -p "$out"
# A worktree of that commit outside this checkout, so that its version stamp names it.
src="$(mktemp -d "${TMPDIR:-/tmp}/ag-previous-XXXXXX")"
trap 'git -C "$repo" worktree remove --force "$src" >/dev/null 2>&1 || true; rm -rf "$src"' EXIT
git worktree add --quiet --detach "$src" "$commit"
# The previous release's own scripts, as they were.
(cd "$src" && AG_VERSION_SUFFIX="~prev" scripts/build-deb.sh >&2)
mv "$src"/build-portable/aethergrid_*.deb "$out/"
echo "$commit" > "$out/commit"
ls "$out"/aethergrid_*.deb
