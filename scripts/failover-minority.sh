#!/usr/bin/env bash
# Kill masters one at a time: a lock must survive the loss of any minority, and nothing else.
#
# Checks, on a list of N independent masters (quorum Q = N/2+1):
#   1. all masters up: `redlock-cli acquire` exits 0 and prints a token; release exits 0;
#   2. after each of the first N-Q kills: acquire still exits 0 with a token, release exits 0,
#      and no master keeps the key;
#   3. after one more kill (a majority down): acquire exits 3 (no quorum) with empty stdout, and
#      no surviving master keeps a key of the failed attempt (its rollback reached them);
#   4. the killed masters are restarted (also when a check failed) and acquire exits 0 again.
# Exits 1 on the first failed check, 0 when all passed, 2 on a usage error (bad option, stray
# argument, malformed node list) before any master is touched.
#
# Usage: scripts/failover-minority.sh [-n LIST] [-d CLUSTER_DIR] [-t]
#   -n LIST  comma-separated masters (default $REDLOCK_NODES, else 127.0.0.1:7001..7005)
#   -d DIR   directory of the local cluster (`redlock-cli cluster --dir`), default its own default
#   -t       TLS to every master (as REDLOCK_TLS=1); the CA is $REDLOCK_CACERT, else that of the
#            local cluster (`redlock-cli cluster up --tls`)
# Nodes are killed with `redlock-cli cluster kill I` and restarted with `cluster start I` unless
# FAILOVER_KILL / FAILOVER_START give other commands; for real hosts, e.g.
#   FAILOVER_KILL='ssh {host} sudo systemctl kill -s KILL redis@{port}' \
#   FAILOVER_START='ssh {host} sudo systemctl start redis@{port}' \
#   scripts/failover-minority.sh -n 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379
# ({host}, {port}, {index}: the node's host, port and 1-based position in the list).
# FAILOVER_NODE_TIMEOUT: --node-timeout of the redlock-cli calls (default redlock-cli's own, 50ms),
# e.g. 250ms on a loaded test machine, where a live master can answer later than 50 ms.
# Resources used: redlock-failover:minority:<pid>:*, released or expired (ttl $FAILOVER_TTL, 30s).

# shellcheck source-path=SCRIPTDIR
set -euo pipefail
# shellcheck source=failover-lib.sh
source "$(dirname "$0")/failover-lib.sh"
fo_actions=(kill start)
fo_parse_args "$@"
res=redlock-failover:minority:$$

echo "== all $N masters up"
require_all_up
acquire_ok "acquire with every master up" "$res:all"
expect 0 "release it" release "$res:all" "$token"

for ((k = 1; k <= F; k++)); do
  echo "== $k of $N masters down (at most N-Q = $F may fail)"
  kill_node "$k"
  acquire_ok "acquire with $((N - k)) of $N masters up (>= quorum $Q)" "$res:$k" --retry-count 0
  expect 0 "release it" release "$res:$k" "$token"
  no_stray_keys "no master keeps $res:$k after the release" "$res:$k"
done

echo "== $((F + 1)) of $N masters down: a majority"
kill_node $((F + 1))
expect 3 "acquire with $((N - F - 1)) of $N masters up (< quorum $Q): no quorum" \
  acquire "$res:majority" --ttl "$ttl" --retry-count 0
[[ -z $out ]] || fail "a failed acquire printed on stdout: '$out'"
pass "the failed acquire printed no token"
no_stray_keys "no surviving master keeps a key of the failed attempt" "$res:majority"

echo "== restart the killed masters (no lock is held, so at once is safe)"
for ((k = F + 1; k >= 1; k--)); do start_node "$k"; done
require_all_up
acquire_ok "acquire with every master back" "$res:back"
expect 0 "release it" release "$res:back" "$token"

echo "$(basename "$0"): all $checks checks passed"
