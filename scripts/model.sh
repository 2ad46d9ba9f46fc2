#!/usr/bin/env bash
# Model-checks the Promela specification in spec/ with SPIN (docs/model.md says what is modelled
# and what each check shows). Every check compiles its own pan binary from spec/*.pml with -D
# macros and runs it with a bounded search:
#   - the real model must give "errors: 0";
#   - each mutation (a mechanism removed, or the library's old behaviour) must give a
#     counterexample ("errors: 1"): if it does not, the model no longer exercises that mechanism;
#     where the check names the assertion that must fail, another one failing is a failure too;
#   - a trace check (Kleppmann's pause) must find its trace, and the trace replayed with
#     `spin -t` must show the step the check names; its readable rendering (the MSC lines) is
#     kept in <name>/trace.txt (docs/model/ holds the committed ones).
# A pan run that does not finish within its time limit fails the check.
#
# Usage: scripts/model.sh [--deep] [--jobs N] [--keep DIR] [--only NAME]
#   --deep        bigger bounds (N = 5, C = 3, the fair nemesis, liveness): about an hour
#   --jobs N      checks run at once (default 2)
#   --keep DIR    build and run in DIR and keep it (pan binaries, outputs, trails)
#   --only NAME   run only the named check(s) (a regex over the names)
# Exit status: 0 when every check gives what it must, 1 otherwise.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
spec=$root/spec
deep=0
jobs=2
keep=
only=.
while (($#)); do
  case $1 in
    --deep) deep=1 ;;
    --jobs) jobs=$2; shift ;;
    --keep) keep=$2; shift ;;
    --only) only=$2; shift ;;
    *) echo "model.sh: unknown argument '$1' (see the comment at the top)" >&2; exit 2 ;;
  esac
  shift
done
command -v spin >/dev/null || { echo "model.sh: spin not found: apt-get install spin" >&2; exit 1; }
command -v "${CC:-gcc}" >/dev/null || { echo "model.sh: no C compiler (${CC:-gcc})" >&2; exit 1; }

if [[ -n $keep ]]; then
  work=$keep
  mkdir -p "$work"
else
  work=$(mktemp -d /tmp/redlock-model.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi

# The smallest world in which the mechanism matters: one attempt and one acquisition per client,
# no extends, no connection resets, no slow answers.
small="-DRESETS=0 -DSLOW=0 -DMAXEXT=0 -DMAXATT=1 -DMAXACQ=1"

# name | expect | model | spin -D macros | pan compile flags | pan run flags | seconds [| trace]
#   expect: pass (errors: 0), fail (a counterexample), or fail:REGEX (the violated assertion's
#   text must match REGEX); trace: a regex the replayed trace must match.
#   -DBFS in the compile flags (breadth-first: the shortest trace) is given to spin as well, as the
#   models hide their scratch variables only from a depth-first search.
checks=(
  # --- the real model
  "lock-exhaustive|pass|lock.pml|$small -DCRASHES=0|-DHC4|-w25 -m10000|300"
  # the nemesis (a crash with or without persistence, a reset, a slow answer) and fencing
  "lock-fenced|pass|lock.pml|-DFENCED|-DBITSTATE|-w21 -m10000|300"
  "fair-forger|pass|fair.pml|-DFORGER -DMAXSER=3|-DBITSTATE|-w21 -m10000|300"
  # FIFO where it can be broken: two acquisitions each, so a waiter can wait behind a holder
  # that comes back (no time passes: the FIFO bookkeeping needs none)
  "fair-fifo|pass|fair.pml|-DTIMELESS -DFAST_NODES=0 -DSLOW=0 -DMAXACQ=2|-DBITSTATE|-w20 -m10000|300"
  # N = 5
  "lock-n5|pass|lock.pml|$small -DN=5 -DFENCED|-DBITSTATE|-w20 -m10000|300"
  "fair-n5|pass|fair.pml|-DN=5 -DMAXSER=3|-DBITSTATE|-w20 -m10000|300"
  # --- mutations: each must give a counterexample
  "mut-no-guard|fail|lock.pml|$small -DFAST_NODES=0 -DMUT_NO_GUARD|-DBITSTATE|-w24 -m10000|300"
  "mut-no-drift|fail|lock.pml|$small -DCRASHES=0 -DMUT_NO_DRIFT|-DBITSTATE|-w24 -m10000|300"
  "mut-no-rollback|fail|lock.pml|-DMUT_NO_ROLLBACK|-DBITSTATE|-w24 -m10000|300"
  "mut-no-writeback|fail|lock.pml|-DRESETS=0 -DSLOW=0 -DMAXEXT=0 -DMAXATT=2 -DMAXACQ=1 -DFENCED -DMUT_NO_WRITEBACK|-DBITSTATE|-w24 -m10000|300"
  "mut-trust-hint|fail|fair.pml|-DFORGER -DMUT_TRUST_HINT|-DBITSTATE|-w24 -m60|300"
  # the ticket agreement: in the scenario where a counter lags (three clients, LAGGING_COUNTER),
  # the real model keeps FIFO and the model without the agreement breaks it (depth-first to
  # depth 40: breadth-first runs out of memory at depth 22, before the trace's end)
  "fair-lagging-counter|pass|fair.pml|-DC=3 -DTIMELESS -DFAST_NODES=0 -DMAXACQ=1 -DMAXSER=2 -DLAGGING_COUNTER|-DBITSTATE|-w22 -m10000|300"
  "mut-no-ticket-agree|fail:aheadof|fair.pml|-DC=3 -DTIMELESS -DFAST_NODES=0 -DMAXACQ=1 -DMAXSER=2 -DLAGGING_COUNTER -DMUT_NO_TICKET_AGREE|-DBITSTATE|-w28 -m40|300"
  "mut-fifo-by-waiter|fail:aheadof|fair.pml|-DTIMELESS -DFAST_NODES=0 -DSLOW=0 -DMAXACQ=2 -DMUT_FIFO_BY_WAITER|-DBFS|-m10000|300"
  # --- Kleppmann's pause: the trace, and the fence check of the resource that makes it harmless
  "kleppmann|fail:!\\(ovl\\[c\\]\\)|lock.pml|$small -DCRASHES=0 -DFAST_NODES=0 -DFENCED -DKLEPPMANN|-DBFS|-m10000|300|c1: resource accepts the write with fence.*c0: resource REFUSES the write"
  "mut-no-fence-check|fail:lseq|lock.pml|$small -DCRASHES=0 -DFAST_NODES=0 -DFENCED -DKLEPPMANN -DMUT_NO_FENCE_CHECK|-DBFS|-m10000|300"
)
if ((deep)); then
  checks+=(
    # bitstate with 2^25 bits: about 16 times the states of the suite's checks, 10-20 min each
    # on a loaded 2-core machine (docs/model.md has the figures of a run)
    "deep-lock-nemesis|pass|lock.pml|-DFENCED|-DBITSTATE|-w25 -m100000|3600"
    "deep-lock-fenced-n5|pass|lock.pml|-DFENCED -DN=5|-DBITSTATE|-w25 -m100000|3600"
    "deep-lock-c3|pass|lock.pml|-DC=3 -DFENCED|-DBITSTATE|-w25 -m100000|3600"
    "deep-fair-forger|pass|fair.pml|-DFORGER -DRESETS=1 -DLAPSES=1|-DBITSTATE|-w25 -m100000|3600"
    # liveness: acceptance cycles under weak fairness (pan -a -f; -DNFAIR=3: more processes than
    # the default fairness bookkeeping allows for)
    "deep-liveness|pass|lock.pml|$small -DCRASHES=0 -DFAST_NODES=0 -DDELAYS=1 -DLIVENESS|-DBITSTATE -DNFAIR=3|-a -f -w27 -m100000|3600"
  )
fi

# Runs one check; its summary line goes to $work/<name>.result.
run_check() {
  local name expect model macros ccflags panflags secs trace
  IFS='|' read -r name expect model macros ccflags panflags secs trace <<<"$1"
  local dir=$work/$name
  mkdir -p "$dir"
  cp "$spec"/*.pml "$dir"/
  [[ " $ccflags " == *" -DBFS "* ]] && macros="$macros -DBFS"
  # a search for acceptance cycles (liveness, pan -a) needs the cycle detection -DSAFETY leaves out
  local safety=-DSAFETY
  [[ " $panflags " == *" -a "* ]] && safety=
  local must_violate=
  [[ $expect == fail:* ]] && must_violate=${expect#fail:} && expect=fail
  local verdict
  # shellcheck disable=SC2086 # the macro and flag lists are word lists
  if ! (cd "$dir" && spin -a $macros "$model" >spin.out 2>&1); then
    verdict="FAIL (spin -a failed: see $dir/spin.out)"
  elif ! (cd "$dir" && "${CC:-gcc}" -O1 $safety -DMEMLIM=4000 -DVECTORSZ=4096 $ccflags \
            -o pan pan.c >cc.out 2>&1); then
    verdict="FAIL (pan did not compile: see $dir/cc.out)"
  else
    local start=$SECONDS rc=0
    (cd "$dir" && timeout "$secs" ./pan $panflags >pan.out 2>&1) || rc=$?
    local took=$((SECONDS - start))
    local errors states
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.out" | tail -n 1)
    states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$dir/pan.out" | tail -n 1)
    local what="errors: ${errors:-?}, states stored: ${states:-?}, ${took} s"
    # a bitstate search's coverage: SPIN's hash factor (states the table can tell apart per
    # state stored; above 100 nearly every state is visited, near 1 the search is partial)
    local factor
    factor=$(sed -n 's/^hash factor: \([0-9.e+]*\).*/\1/p' "$dir/pan.out" | tail -n 1)
    [[ -n $factor ]] && what="$what, hash factor ${factor}"
    if ((rc == 124)); then
      verdict="FAIL (no verdict within ${secs} s)"
    elif [[ -z $errors ]]; then
      verdict="FAIL (pan gave no verdict, exit $rc: see $dir/pan.out)"
    elif [[ $expect == pass && $errors == 0 ]]; then
      verdict="ok ($what)"
    elif [[ $expect == fail && $errors != 0 ]]; then
      grep -m1 -E 'assertion violated|violated' "$dir/pan.out" | cut -c1-160 >"$dir/violation" || true
      # the trace, replayed: its MSC lines are the readable rendering
      # shellcheck disable=SC2086
      (cd "$dir" && spin -t $macros "$model" 2>&1 | grep 'MSC:' >trace.txt) || true
      if [[ -n $must_violate ]] && ! grep -qE -- "$must_violate" "$dir/violation"; then
        verdict="FAIL (another counterexample than the one expected: $(cat "$dir/violation"))"
      elif [[ -n $trace ]] && ! tr '\n' ' ' <"$dir/trace.txt" | grep -qE -- "$trace"; then
        verdict="FAIL (the trace does not show '$trace': see $dir/trace.txt)"
      elif [[ -f $root/docs/model/$name.txt ]] &&
        ! diff <(grep -v '^#' "$root/docs/model/$name.txt") <(sed 's/^ *//' "$dir/trace.txt") \
          >"$dir/trace.diff"; then
        verdict="FAIL (the trace changed: update docs/model/$name.txt from $dir/trace.txt, with --keep DIR)"
      else
        verdict="ok, counterexample found as it must ($what)"
      fi
    elif [[ $expect == pass ]]; then
      verdict="FAIL (counterexample in the real model: $what; keep the trail with --keep DIR, replay in DIR/$name with spin -t -p $macros $model)"
    else
      verdict="FAIL (the mutation gave no counterexample: $what)"
    fi
  fi
  printf '%-22s %s\n' "$name" "$verdict" >"$work/$name.result"
}

status=0
running=0
for c in "${checks[@]}"; do
  [[ ${c%%|*} =~ $only ]] || continue
  run_check "$c" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

for c in "${checks[@]}"; do
  name=${c%%|*}
  [[ $name =~ $only ]] || continue
  if [[ -f $work/$name.result ]]; then
    cat "$work/$name.result"
    grep -q '^[^ ]* *ok' "$work/$name.result" || status=1
  else
    printf '%-22s FAIL (did not run)\n' "$name"
    status=1
  fi
done
exit $status
