#!/usr/bin/env bash
# The whole test suite: set-up (packages, configure, build), then `meson test`, then the unit and
# integration tests again under AddressSanitizer+UBSan and under ThreadSanitizer.
# Non-zero on any failure.
#   scripts/test.sh              everything
#   REDLOCK_SANITIZERS=0 scripts/test.sh   skip the two sanitizer builds (faster local runs)
#   REDLOCK_FUZZ=0 scripts/test.sh         skip the short fuzzing run at the end (scripts/fuzz.sh)
#   REDLOCK_OVERLAP=0 scripts/test.sh      build the sanitizer and fuzz trees after `meson test`
#                                          instead of beside it (slower; see below)
#   REDLOCK_TEST_PROCESSES=N scripts/test.sh   how many tests `meson test` runs at once where a
#                                          test allows it (default 3; 1 runs them one by one)
#   scripts/test.sh --stress     the same with a busy core and a disk writer beside it
#                                (stress-ng --cpu 1 --hdd 1, installed when missing), as
#                                testing.md's "Flakes are bugs" asks before timing changes land;
#                                scripts/stress-runs.sh repeats it on fresh clones and counts
# Extra arguments go to the main `meson test` run (e.g. --suite unit).
set -euo pipefail
cd "$(dirname "$0")/.."

sanitizers=${REDLOCK_SANITIZERS:-1}
fuzz=${REDLOCK_FUZZ:-1}
# (fixture-selftest tests the fixtures, not the library: it runs once, in the plain build)
sanitizer_tests=(unit integration capi-c)
# (capi-c starts its servers through tests/support/node-launcher)
sanitizer_targets=(tests/unit-tests tests/integration/integration-tests tests/capi/capi-test
                   tests/support/node-launcher)
# AddressSanitizer also runs the Redis Cluster votes (commands split over masters, redirections:
# object lifetimes across connections); they run on the loop thread only, nothing new for TSan.
asan_tests=(integration-cluster)
asan_targets=(tests/integration/cluster-vote-tests)

# Configures and builds what the sanitizer and fuzz phases run. -g1: line tables and function
# names, all a sanitizer's report needs; without types and variables the build takes a fifth less
# CPU (the AddressSanitizer targets: 643 s of CPU at -g, 516 at -g1, 2026-12-02).
build_sanitizer_tree() {
  local san=$1 dir=build-$1 flags
  case $san in
    asan) flags=(-Db_sanitize=address,undefined) ;;
    tsan) flags=(-Db_sanitize=thread) ;;
  esac
  if [[ ! -f $dir/build.ninja ]]; then
    meson setup "$dir" -Dbuildtype=debug -Dwerror=true "${flags[@]}" -Dc_args=-g1 -Dcpp_args=-g1 >/dev/null
  fi
  local targets=("${sanitizer_targets[@]}")
  [[ $san == asan ]] && targets+=("${asan_targets[@]}")
  ninja -C "$dir" "${targets[@]}" >/dev/null
}
build_later_trees() {
  if [[ $sanitizers != 0 ]]; then
    build_sanitizer_tree asan
    build_sanitizer_tree tsan
  fi
  if [[ $fuzz != 0 ]]; then
    scripts/fuzz.sh --build-only
  fi
}
if [[ ${1:-} == --build-later-trees ]]; then  # (internal: the background build below)
  build_later_trees
  exit 0
fi

cleanup=()
trap 'set +e; for c in "${cleanup[@]}"; do eval "$c"; done' EXIT

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
  cleanup+=('kill "$stress_pid" 2>/dev/null; wait "$stress_pid" 2>/dev/null; rm -rf "$stress_dir"')
  echo "test: under stress (stress-ng --cpu 1 --hdd 1, pid $stress_pid)"
fi

# Each phase says how long it took, so a slow CI run shows where the time went.
SECONDS=0
phase_start=0
phase_done() {
  echo "== $1: $((SECONDS - phase_start)) s (total $((SECONDS / 60)) min $((SECONDS % 60)) s)"
  phase_start=$SECONDS
}

# Valkey 9.1 and Redis 8.0 (scripts/servers.sh) are built beside the first `meson test` run when
# they are not cached yet: the tests of the other servers mostly wait on sleeps and servers.
REDLOCK_SERVERS=later scripts/setup.sh build
scripts/format.sh --check
phase_done "set-up, format check and build"
newer_suites=(valkey9 redis8)
servers_pid=""
servers_cached() {
  local s
  for s in "${newer_suites[@]}"; do scripts/servers.sh --path "$s" >/dev/null || return 1; done
}
if ! servers_cached; then
  servers_log=build/servers.log
  echo "test: building Valkey 9.1 and Redis 8.0 from Debian's source packages beside meson test (nice 19, log: $servers_log)"
  setsid nice -n 19 scripts/servers.sh >"$servers_log" 2>&1 &
  servers_pid=$!
  cleanup+=('[[ -n $servers_pid ]] && kill -- "-$servers_pid" 2>/dev/null; wait "$servers_pid" 2>/dev/null')
fi

# REDLOCK_OVERLAP=1: the sanitizer and fuzz trees are built while `meson test` runs: the builds
# need the CPU, the tests mostly wait for servers and sleeps. The builds run at nice 19 and in the
# idle I/O class, so a test process that wants a core gets it at once (a nice-0 task preempts a
# nice-19 one). REDLOCK_OVERLAP=0 builds them after `meson test` instead (the tests alone on the
# machine), e.g. to tell a flake that needs load from one that does not.
# setsid: the build is its own process group, which the EXIT trap ends if this script stops early.
later_pid=""
if [[ ${REDLOCK_OVERLAP:-1} != 0 && ($sanitizers != 0 || $fuzz != 0) ]]; then
  later_log=build/later-trees.log
  low=(nice -n 19)
  ionice -c 3 true 2>/dev/null && low+=(ionice -c 3)
  setsid "${low[@]}" scripts/test.sh --build-later-trees >"$later_log" 2>&1 &
  later_pid=$!
  cleanup+=('[[ -n $later_pid ]] && kill -- "-$later_pid" 2>/dev/null; wait "$later_pid" 2>/dev/null')
  echo "test: building the sanitizer and fuzz trees beside meson test (nice 19, log: $later_log)"
fi

# Three tests at a time where a test allows it (the integration runs: plain, Valkey, TLS and
# Cluster votes; they wait on servers far more than they compute: 235 s two at a time, 167 s
# three at a time, against 339 s one after another), and so do the CLI tests and the model. The
# chaos, interop and packaging tests still run alone (is_parallel: false in their meson.build).
# With arguments (e.g. --suite unit): one run with them, once the newer servers are there.
# Without: every suite in one run when the newer servers are cached; else every suite but the
# newer servers', then theirs once they are built.
wait_for_servers() {
  [[ -n $servers_pid ]] || return 0
  if ! wait "$servers_pid"; then
    servers_pid=""
    echo "test: building the newer servers failed; the end of $servers_log:" >&2
    tail -30 "$servers_log" >&2
    exit 1
  fi
  servers_pid=""
  cat "$servers_log"
}
if (($#)); then
  wait_for_servers
  meson test -C build --num-processes "${REDLOCK_TEST_PROCESSES:-3}" --print-errorlogs "$@"
elif [[ -z $servers_pid ]]; then
  # The newer servers are cached: one run, so their tests fill the gaps between the others.
  meson test -C build --num-processes "${REDLOCK_TEST_PROCESSES:-3}" --print-errorlogs
else
  no_suites=()
  for s in "${newer_suites[@]}"; do no_suites+=(--no-suite "$s"); done
  meson test -C build --num-processes "${REDLOCK_TEST_PROCESSES:-3}" --print-errorlogs "${no_suites[@]}"
  phase_done "meson test"
  wait_for_servers
  phase_done "the rest of the newer servers' build"
  suites=()
  for s in "${newer_suites[@]}"; do suites+=(--suite "$s"); done
  meson test -C build --num-processes "${REDLOCK_TEST_PROCESSES:-3}" --print-errorlogs "${suites[@]}"
fi
phase_done "meson test (Valkey 9.1 and Redis 8.0, or everything when they were cached)"

if [[ -n $later_pid ]]; then
  if ! wait "$later_pid"; then
    later_pid=""
    echo "test: building the sanitizer or fuzz trees failed; the end of $later_log:" >&2
    tail -40 "$later_log" >&2
    exit 1
  fi
  later_pid=""
  phase_done "the rest of the sanitizer and fuzz builds"
fi

if [[ $sanitizers != 0 ]]; then
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp
  for san in asan tsan; do
    build_sanitizer_tree "$san"  # nothing to do when built beside meson test
  done
  phase_done "sanitizer builds"
  # The two runs side by side, each to its own log, shown when both are done: like the plain
  # integration runs they mostly wait on servers (105 s together here, 202 s one after the other).
  declare -A san_pid
  for san in asan tsan; do
    tests=("${sanitizer_tests[@]}")
    [[ $san == asan ]] && tests+=("${asan_tests[@]}")
    echo "== $san: ${tests[*]}"
    meson test -C "build-$san" --no-rebuild --print-errorlogs "${tests[@]}" >"build-$san/sanitizer-tests.log" 2>&1 &
    san_pid[$san]=$!
  done
  san_failed=0
  for san in asan tsan; do
    wait "${san_pid[$san]}" || san_failed=1
    echo "== $san:"
    cat "build-$san/sanitizer-tests.log"
  done
  ((san_failed == 0)) || exit 1
  phase_done "asan and tsan tests"
fi

if [[ $fuzz != 0 ]]; then
  scripts/fuzz.sh --seconds 6
  phase_done "fuzzing"
fi
