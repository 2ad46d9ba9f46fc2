#!/usr/bin/env bash
# Two (or more) builds of redlock-cli against the same nodes in one run, interleaved, so a change
# is judged against the build before it on the same machine at the same time (these machines are
# shared: only ratios measured together mean anything).
#
#   scripts/bench-compare.sh [--rounds N] [--seconds S] [--concurrency "1 64 256"] OLD_CLI NEW_CLI...
#
# Starts 5 local nodes (with the last CLI given), then for each round and each concurrency runs
# `bench --concurrency C --json` with every CLI, in an order that rotates from round to round.
# Prints, per CLI and concurrency, the median over the rounds of: cycles/s, client CPU per cycle
# (us), cycle p50 (us), the sequential cycle over its floors (bench's cycle_to_fanout: two fan-outs
# measured in the same run; cycle_to_raw_cycle: the same cycle over raw connections, no library);
# and each figure as a ratio to the first CLI.
# Extra arguments for every bench call (global flags such as --tls ...) go in BENCH_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
seconds=2
conc="1 64 256"
while (($#)); do
  case $1 in
    --rounds) rounds=${2:?}; shift 2 ;;
    --seconds) seconds=${2:?}; shift 2 ;;
    --concurrency) conc=${2:?}; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "bench-compare.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
(($# >= 2)) || { echo "bench-compare.sh: give at least two redlock-cli binaries (try --help)" >&2; exit 2; }
clis=("$@")
for c in "${clis[@]}"; do [[ -x $c ]] || { echo "bench-compare.sh: $c is not executable" >&2; exit 2; }; done

work=$(mktemp -d "${TMPDIR:-/tmp}/redlock-bench-compare.XXXXXX")
manager=${clis[-1]}
cleanup() { "$manager" cluster down --dir "$work/nodes" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
# Ports below the kernel's ephemeral range (32768 and up here), where a machine that has just run
# the test suite holds thousands of sockets in TIME_WAIT; `up` refuses a taken port, and a few
# tries find a free range.
base=""
for _ in 1 2 3 4 5 6 7 8; do
  b=$((22768 + RANDOM % (32000 - 22768)))
  if "$manager" cluster up --count 5 --base-port "$b" --dir "$work/nodes" >"$work/up.log" 2>&1; then
    base=$b
    break
  fi
  "$manager" cluster down --dir "$work/nodes" >/dev/null 2>&1 || true
done
[[ -n $base ]] || { echo "bench-compare.sh: could not start 5 nodes:" >&2; cat "$work/up.log" >&2; exit 1; }
nodes=$(seq -s, -f "127.0.0.1:%g" "$base" $((base + 4)))
read -r -a extra <<<"${BENCH_ARGS:-}"

echo "bench-compare: $rounds rounds x {$conc} x ${#clis[@]} builds, ${seconds} s each, 5 nodes at $base; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
  for c in $conc; do
    for ((k = 0; k < ${#clis[@]}; k++)); do
      i=$(((k + r) % ${#clis[@]}))
      "${clis[$i]}" -n "$nodes" "${extra[@]}" bench --seconds "$seconds" --concurrency "$c" --json \
        >"$work/r$r-c$c-b$i.json" 2>/dev/null || echo "{}" >"$work/r$r-c$c-b$i.json"
    done
  done
done
python3 - "$work" "$rounds" "$conc" "${clis[@]}" <<'PY'
import json, os, statistics, sys
work, rounds, conc, clis = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
def load(r, c, b):
    try:
        with open(os.path.join(work, "r%d-c%s-b%d.json" % (r, c, b))) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}
print("| build | C | cycles/s | CPU us/cycle | cycle p50 us | cycle / floor | cycle / raw cycle | vs first: cycles/s | CPU | p50 |")
print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
for c in conc:
    first = None
    for b, cli in enumerate(clis):
        runs = [load(r, c, b) for r in range(rounds)]
        def med(key):
            v = [j[key] for j in runs if key in j]
            return statistics.median(v) if v else float("nan")
        row = (med("cycles_per_s"), med("cpu_us_per_cycle"), med("cycle_us_p50"))
        floor = med("cycle_to_fanout")  # the sequential cycle / two fan-outs, same run
        raw = med("cycle_to_raw_cycle")  # ... / the raw cycle (older builds: none, nan)
        if first is None:
            first = row
        ratio = ["%.2f" % (a / f) if f == f and f else "-" for a, f in zip(row, first)]
        print("| %s | %s | %.0f | %.1f | %.0f | %.2f | %.2f | %s | %s | %s |" % (cli, c, row[0], row[1], row[2], floor, raw, *ratio))
PY
