#!/usr/bin/env bash
# The library's ABI against the committed baseline (abi/libredlock.abi), with libabigail
# (Debian abigail-tools), so that an accidental break of the binary interface fails the suite.
#   scripts/abi.sh check [BUILD_DIR]    exit 0 when the built libredlock.so has the baseline's ABI;
#                                       else prints abidiff's report and exits 1
#   scripts/abi.sh update [BUILD_DIR]   rewrites the baseline from the build: a deliberate change,
#                                       committed with the change that makes it (docs/abi.md)
# BUILD_DIR defaults to build/. Only what the public headers (include/redlock/) declare and the
# library exports counts; the build needs debug information (meson's default debugoptimized).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
build=${2:-build}
baseline=abi/libredlock.abi
case $mode in
  check|update) ;;
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  *) echo "abi.sh: give 'check' or 'update' (try --help), got '${mode}'" >&2; exit 2 ;;
esac
for tool in abidw abidiff; do
  command -v "$tool" >/dev/null || { echo "abi.sh: $tool is missing (apt-get install abigail-tools)" >&2; exit 2; }
done
lib=$(find "$build/lib" -maxdepth 1 -name 'libredlock.so.*.*.*' -type f | head -1)
[[ -n $lib ]] || { echo "abi.sh: no libredlock.so.X.Y.Z under $build/lib (build first)" >&2; exit 2; }
if ! readelf -S "$lib" | grep -q '\.debug_info'; then
  echo "abi.sh: $lib has no debug information: configure with -Ddebug=true (debugoptimized)" >&2
  exit 2
fi
if [[ $mode == update ]]; then
  abidw --no-corpus-path --no-show-locs --type-id-style hash --exported-interfaces-only \
    --drop-private-types --headers-dir include/redlock --out-file "$baseline" "$lib"
  echo "abi.sh: $baseline rewritten from $lib ($(grep -c '<function-decl' "$baseline") functions)"
  exit 0
fi
set +e
# The baseline was written with only the public headers' types; filtering the build's side the
# same way hid a member added to Options (tried), so it is read whole and compared with it.
# abi/std-instances.suppr: the standard library's template instances the library happens to export
# are no part of its ABI (the file says why).
report=$(abidiff --no-show-locs --suppressions abi/std-instances.suppr "$baseline" "$lib")
rc=$?
set -e
# abidiff's exit status is a bit field: 1 error, 2 usage, 4 an ABI change, 8 an incompatible one.
if ((rc == 0)); then
  echo "abi.sh: $lib has the ABI of $baseline"
  exit 0
fi
echo "$report"
if ((rc & 3)); then
  echo "abi.sh: abidiff failed (exit $rc)" >&2
elif ((rc & 8)); then
  echo "abi.sh: an incompatible ABI change (above): if it is deliberate, bump 'soversion' in" \
    "lib/meson.build and run scripts/abi.sh update (docs/abi.md)" >&2
else
  echo "abi.sh: the ABI changed (above). A public type whose size or layout changed breaks every" \
    "program built against the old one: bump 'soversion' in lib/meson.build; an added function" \
    "or type does not. If the change is deliberate, run scripts/abi.sh update and commit the" \
    "baseline with it (docs/abi.md)" >&2
fi
exit 1
