#!/usr/bin/env bash
# The whole test suite: set-up (packages, configure, build), then `meson test`, then the unit and
# integration tests again under AddressSanitizer+UBSan and under ThreadSanitizer.
# Non-zero on any failure.
#   scripts/test.sh              everything
#   REDLOCK_SANITIZERS=0 scripts/test.sh   skip the two sanitizer builds (faster local runs)
#   REDLOCK_FUZZ=0 scripts/test.sh         skip the short fuzzing run at the end (scripts/fuzz.sh)
#   scripts/test.sh --stress     the same with a busy core and a disk writer beside it
#                                (stress-ng --cpu 1 --hdd 1, installed when missing), as
#                                testing.md's "Flakes are bugs" asks before timing changes land;
#                                scripts/stress-runs.sh repeats it on fresh clones and counts
# Extra arguments go to the main `meson test` run (e.g. --suite unit).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} == --stress ]]; then
  shift
  if ! command -v stress-ng >/dev/null; then
    if [[ $(id -u) -eq 0 ]]; then
      echo "test: installing stress-ng"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends stress-ng >/dev/null ||
        { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng >/dev/null; }
    else
      echo "test: --stress needs stress-ng: sudo apt-get install -y stress-ng" >&2
      exit 1
    fi
  fi
  stress_dir=$(mktemp -d)
  # One CPU hog and one disk writer (write + fsync in a loop) for as long as the suite runs.
  stress-ng --cpu 1 --hdd 1 --temp-path "$stress_dir" --timeout 0 --quiet &
  stress_pid=$!
  trap 'kill "$stress_pid" 2>/dev/null; wait "$stress_pid" 2>/dev/null; rm -rf "$stress_dir"' EXIT
  echo "test: under stress (stress-ng --cpu 1 --hdd 1, pid $stress_pid)"
fi

# Each phase says how long it took, so a slow CI run shows where the time went.
SECONDS=0
phase_start=0
phase_done() {
  echo "== $1: $((SECONDS - phase_start)) s (total $((SECONDS / 60)) min $((SECONDS % 60)) s)"
  phase_start=$SECONDS
}

scripts/setup.sh build
scripts/format.sh --check
phase_done "set-up, format check and build"
meson test -C build --print-errorlogs "$@"
phase_done "meson test"

if [[ ${REDLOCK_SANITIZERS:-1} != 0 ]]; then
  # (fixture-selftest tests the fixtures, not the library: it runs once, in the plain build)
  sanitizer_tests=(unit integration capi-c)
  targets=(tests/unit-tests tests/integration/integration-tests tests/capi/capi-test)
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp
  for san in asan tsan; do
    dir=build-$san
    case $san in
      asan) flags=(-Db_sanitize=address,undefined) ;;
      tsan) flags=(-Db_sanitize=thread) ;;
    esac
    if [[ ! -f $dir/build.ninja ]]; then
      meson setup "$dir" -Dbuildtype=debug -Dwerror=true "${flags[@]}" >/dev/null
    fi
    echo "== $san: ${sanitizer_tests[*]}"
    ninja -C "$dir" "${targets[@]}" >/dev/null
    meson test -C "$dir" --no-rebuild --print-errorlogs "${sanitizer_tests[@]}"
    phase_done "$san build and tests"
  done
fi

if [[ ${REDLOCK_FUZZ:-1} != 0 ]]; then
  scripts/fuzz.sh --seconds 6
  phase_done "fuzzing"
fi
