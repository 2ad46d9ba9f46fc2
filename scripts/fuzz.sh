#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan+UBSan, coverage on the whole library)
# in build-fuzz/, replays each seed corpus once, then fuzzes each target for N seconds.
#   scripts/fuzz.sh                     20 s per target
#   scripts/fuzz.sh --seconds 10        (what scripts/test.sh runs)
#   scripts/fuzz.sh --seconds 0         build + corpus replay only
#   scripts/fuzz.sh --target reply      one target (address, duration, classify, cluster_slots,
#                                       info, sentinel, wake, reply)
#   scripts/fuzz.sh --build-only        configure and build, nothing else (scripts/test.sh)
# New inputs the fuzzer finds go to build-fuzz/corpus/<target>/ (not to the seed corpus in the
# repository; copy interesting ones by hand). A crash leaves build-fuzz/artifacts/<target>/crash-*
# (reproduce: build-fuzz/tests/fuzz/fuzz_<target> FILE) and makes this script exit non-zero.
# Needs clang and libclang-rt-dev (installed with apt-get when running as root).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=20
only=""
build_only=0
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --seconds=*) seconds=${1#*=}; shift ;;
    --target) only=$2; shift 2 ;;
    --target=*) only=${1#*=}; shift ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --seconds takes a whole number" >&2; exit 2; }

# clang++ and libFuzzer's runtime (libclang-rt-<ver>-dev on Debian 12, part of clang before).
have_fuzzer() {
  command -v clang++ >/dev/null &&
    echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
      clang++ -x c++ -fsanitize=fuzzer -o /dev/null - 2>/dev/null
}
if ! have_fuzzer; then
  if [[ $(id -u) -eq 0 ]]; then
    echo "fuzz: installing clang and its runtime"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends clang >/dev/null
    ver=$(clang++ --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
    apt-get install -y -qq --no-install-recommends "libclang-rt-$ver-dev" >/dev/null 2>&1 || true
  fi
  have_fuzzer || { echo "fuzz: clang++ with -fsanitize=fuzzer is not available (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
fi

dir=build-fuzz
if [[ ! -f $dir/build.ninja ]]; then
  # Coverage (fuzzer-no-link) and the sanitizers on everything, so the library's own code guides
  # the fuzzer; a static library keeps the sanitizer runtimes simple. -g1: line tables, enough
  # for a crash's stack (scripts/test.sh says what it saves).
  CXX=clang++ meson setup "$dir" -Dfuzz=true -Dbuildtype=debugoptimized -Ddefault_library=static \
    -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcpp_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=all -fno-omit-frame-pointer -g1" >/dev/null
fi

targets=(address duration classify cluster_slots info sentinel wake reply)
[[ -n $only ]] && targets=("$only")
ninja -C "$dir" "${targets[@]/#/tests/fuzz/fuzz_}" >/dev/null
((build_only)) && exit 0

export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# One oversized allocation is reported as a crash above this (hiredis itself may reserve a lot).
common=(-malloc_limit_mb=20480 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1)

status=0
for t in "${targets[@]}"; do
  exe=$dir/tests/fuzz/fuzz_$t
  seeds=tests/fuzz/corpus/$t
  work=$dir/corpus/$t
  artifacts=$dir/artifacts/$t/
  mkdir -p "$work" "$artifacts"
  echo "== fuzz_$t: replaying $(ls "$seeds" | wc -l) seed inputs"
  if ! "$exe" "${common[@]}" -runs=0 -artifact_prefix="$artifacts" "$seeds" >"$dir/fuzz_$t.replay.log" 2>&1; then
    echo "fuzz_$t: the seed corpus fails; see $dir/fuzz_$t.replay.log" >&2
    tail -30 "$dir/fuzz_$t.replay.log" >&2
    status=1
    continue
  fi
  ((seconds > 0)) || continue
  echo "== fuzz_$t: fuzzing for $seconds s"
  log=$dir/fuzz_$t.log
  if "$exe" "${common[@]}" -max_total_time="$seconds" -max_len=4096 -artifact_prefix="$artifacts" \
      "$work" "$seeds" >"$log" 2>&1; then
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$log" |
      sed "s/^/   /" || true
  else
    echo "fuzz_$t: the fuzzer found a problem; see $log and $artifacts" >&2
    grep -E 'ERROR|invariant broken|Assertion|SUMMARY|Test unit written' "$log" | head -20 >&2 || true
    status=1
  fi
done
exit $status
