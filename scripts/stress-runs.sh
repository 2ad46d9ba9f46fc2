#!/usr/bin/env bash
# Runs the whole suite on fresh clones, under stress, until it has passed RUNS times in a row or
# failed once, and prints the count. What issue 13 and testing.md ("Flakes are bugs") ask for
# before a change that touched timing lands:
#   scripts/stress-runs.sh [RUNS]        default 5; each run: git clone . into a mktemp -d dir,
#                                        then scripts/test.sh --stress there
# Committed work only (a clone sees no uncommitted change). Logs stay in the printed directory.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/stress-runs.sh [RUNS]  (RUNS: a positive integer, got '$runs')" >&2; exit 2; }
logs=$(mktemp -d)
echo "stress-runs: $runs fresh-clone runs of scripts/test.sh --stress at $(git rev-parse --short HEAD); logs in $logs"
for ((i = 1; i <= runs; i++)); do
  d=$(mktemp -d)
  git clone -q . "$d/p"
  start=$SECONDS
  if (cd "$d/p" && scripts/test.sh --stress) >"$logs/run-$i.log" 2>&1; then
    echo "run $i: green ($((SECONDS - start)) s)"
    rm -rf "$d"
  else
    echo "run $i: FAILED ($((SECONDS - start)) s); log: $logs/run-$i.log, clone kept in $d"
    grep -E "FAIL|ERROR|error:" "$logs/run-$i.log" | head -20
    echo "stress-runs: $((i - 1)) consecutive green run(s), then a failure"
    exit 1
  fi
done
echo "stress-runs: $runs consecutive green run(s) under stress"
