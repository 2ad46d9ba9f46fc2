#!/usr/bin/env bash
# Pause masters (SIGSTOP: they accept connections and never answer, like a partition or a long
# GC pause): a paused minority must not slow acquisitions down, a paused majority must make them
# fail quickly, and once resumed no master may keep a stray key.
#
# Checks, on a list of N independent masters (quorum Q = N/2+1):
#   1. with each of the first N-Q masters paused in turn: acquire exits 0 with a token, within
#      FAILOVER_MAX_MS (default 2000) ms: the paused ones are not waited for;
#   2. with one more paused (a majority): acquire exits 3 (no quorum), within FAILOVER_MAX_MS;
#   3. after resuming them all: the tokens of step 1 release with exit 0, and no master keeps a
#      key of any attempt (the resumed masters applied the SETs queued while they were paused,
#      then the release/rollback queued behind them).
# Paused masters are resumed on exit, also when a check failed. Exits 1 on the first failure,
# 2 on a usage error (bad option, stray argument, malformed node list) before touching anything.
#
# Usage: scripts/failover-pause.sh [-n LIST] [-d CLUSTER_DIR] [-t]
#   -n LIST  comma-separated masters (default $REDLOCK_NODES, else 127.0.0.1:7001..7005)
#   -d DIR   directory of the local cluster (`redlock-cli cluster --dir`)
#   -t       TLS to every master (as REDLOCK_TLS=1); the CA is $REDLOCK_CACERT, else that of the
#            local cluster (`redlock-cli cluster up --tls`)
# Nodes are paused with `redlock-cli cluster stop I` and resumed with `cluster cont I` unless
# FAILOVER_STOP / FAILOVER_CONT give other commands; for real hosts, e.g.
#   FAILOVER_STOP='ssh {host} sudo systemctl kill -s STOP redis@{port}' \
#   FAILOVER_CONT='ssh {host} sudo systemctl kill -s CONT redis@{port}' \
#   scripts/failover-pause.sh -n 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379
# FAILOVER_NODE_TIMEOUT: --node-timeout of the redlock-cli calls (default redlock-cli's own, 50ms),
# e.g. 250ms on a loaded test machine, where a live master can answer later than 50 ms.
# Resources used: redlock-failover:pause:<pid>:*, released (or expiring after $FAILOVER_TTL, 30s).

# shellcheck source-path=SCRIPTDIR
set -euo pipefail
# shellcheck source=failover-lib.sh
source "$(dirname "$0")/failover-lib.sh"
fo_actions=(stop cont)
fo_parse_args "$@"
res=redlock-failover:pause:$$
max_ms=${FAILOVER_MAX_MS:-2000}

# within WHAT: asserts the last command took at most max_ms.
within() {
  ((ms <= max_ms)) || fail "$1: took $ms ms, more than $max_ms ms"
  pass "$1: $ms ms <= $max_ms ms"
}

echo "== all $N masters up"
require_all_up

tokens=()
for ((k = 1; k <= F; k++)); do
  echo "== $k of $N masters paused (at most N-Q = $F may fail)"
  pause_node "$k"
  acquire_ok "acquire with $((N - k)) of $N masters answering (>= quorum $Q)" "$res:$k" --retry-count 0
  within "not held up by the paused masters"
  tokens+=("$token")
done

echo "== $((F + 1)) of $N masters paused: a majority"
pause_node $((F + 1))
expect 3 "acquire with $((N - F - 1)) of $N masters answering (< quorum $Q): no quorum" \
  acquire "$res:majority" --ttl "$ttl" --retry-count 0
within "gives up without waiting for the paused masters"

echo "== resume them"
for ((k = F + 1; k >= 1; k--)); do resume_node "$k"; done
require_all_up
for ((k = 1; k <= F; k++)); do
  expect 0 "release the lock taken with $k paused" release "$res:$k" "${tokens[k - 1]}"
done
for ((k = 1; k <= F; k++)); do
  no_stray_keys "no master keeps $res:$k" "$res:$k"
done
no_stray_keys "no master keeps a key of the failed attempt, resumed ones included" "$res:majority"

echo "$(basename "$0"): all $checks checks passed"
