#!/usr/bin/env bash
# Restart a majority of masters empty while a lock is held: without a guard another client can
# take the "held" lock (the hazard of restarting at once); with --min-uptime above the age of the
# restart, redlock-cli refuses (the restart guard works).
#
# Checks, on a list of N independent masters (quorum Q = N/2+1) without persistence:
#   1. client A: acquire exits 0 with a token (ttl FAILOVER_TTL, default 30s);
#   2. masters 1..Q are killed and restarted at once: they come back empty;
#   3. with --min-uptime FAILOVER_MIN_UPTIME (default 60s, above the restart's age): acquire exits
#      3 with empty stdout, its --json shows the restarted masters' votes "excluded", and the
#      masters store A's token or nothing (the refused attempt was rolled back);
#   4. the hazard: with --min-uptime 0, acquire exits 0 with a second token while A's lock has
#      not expired: two holders. (With FAILOVER_DURABLE=1, for masters with appendonly yes +
#      appendfsync always, the restarted masters kept A's key and it must exit 1 instead.)
#   5. both locks release with exit 0.
# Exits 1 on the first failed check; killed masters are restarted on exit in any case. Exits 2
# on a usage error (bad option, stray argument, malformed node list) before touching anything.
#
# Usage: scripts/failover-restart.sh [-n LIST] [-d CLUSTER_DIR] [-t]
#   -n LIST  comma-separated masters (default $REDLOCK_NODES, else 127.0.0.1:7001..7005)
#   -d DIR   directory of the local cluster (`redlock-cli cluster --dir`)
#   -t       TLS to every master (as REDLOCK_TLS=1); the CA is $REDLOCK_CACERT, else that of the
#            local cluster (`redlock-cli cluster up --tls`)
# Nodes are killed with `redlock-cli cluster kill I` and restarted with `cluster start I` unless
# FAILOVER_KILL / FAILOVER_START give other commands; for real hosts, e.g.
#   FAILOVER_KILL='ssh {host} sudo systemctl kill -s KILL redis@{port}' \
#   FAILOVER_START='ssh {host} sudo systemctl start redis@{port}' \
#   scripts/failover-restart.sh -n 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379
# FAILOVER_NODE_TIMEOUT: --node-timeout of the redlock-cli calls (default redlock-cli's own, 50ms),
# e.g. 250ms on a loaded test machine, where a live master can answer later than 50 ms.
# Resource used: redlock-failover:restart:<pid>, released at the end.

# shellcheck source-path=SCRIPTDIR
set -euo pipefail
# shellcheck source=failover-lib.sh
source "$(dirname "$0")/failover-lib.sh"
fo_actions=(kill start)
fo_parse_args "$@"
res=redlock-failover:restart:$$
min_uptime=${FAILOVER_MIN_UPTIME:-60s}
durable=${FAILOVER_DURABLE:-0}

echo "== client A takes the lock"
require_all_up
acquire_ok "A: acquire with every master up" "$res" --min-uptime 0
token_a=$token

echo "== masters 1..$Q (a majority) crash and come back at once"
for ((i = 1; i <= Q; i++)); do
  kill_node "$i"
  start_node "$i"
done
require_all_up

echo "== the guard: a client that requires $min_uptime of uptime"
expect 3 "B --min-uptime $min_uptime: refused, no quorum" \
  acquire "$res" --ttl "$ttl" --retry-count 0 --min-uptime "$min_uptime" --json
if ((durable == 0)); then
  [[ $out == *'"state":"excluded"'* ]] || fail "the refusal does not come from the guard: $out"
  pass "the restarted masters' votes were excluded by the restart guard"
fi
no_stray_keys "the masters store A's token or nothing" "$res" "$token_a"
a_on=$(count_token "$res" "$token_a")
want=$((durable == 0 ? N - Q : N))
((a_on == want)) || fail "A's token should be on $want masters, it is on $a_on"
pass "A's token is on the $a_on masters that $( ((durable == 0)) && echo "were not restarted" || echo "kept it")"

echo "== the hazard: the same request without the guard"
if ((durable == 0)); then
  acquire_ok "B --min-uptime 0: acquired while A's lock is still valid (two holders: the hazard)" \
    "$res" --retry-count 0 --min-uptime 0
  token_b=$token
  [[ $token_b != "$token_a" ]] || fail "B got A's token"
  a_on=$(count_token "$res" "$token_a")
  b_on=$(count_token "$res" "$token_b")
  ((a_on == N - Q && b_on >= Q)) || fail "expected A's token on $((N - Q)) and B's on >= $Q masters: $a_on, $b_on"
  pass "two holders: A's token still on $a_on masters (its ttl has not run out), B's on $b_on"
  expect 0 "release B's lock" release "$res" "$token_b"
else
  expect 1 "B --min-uptime 0: refused, the durable masters kept A's key" \
    acquire "$res" --ttl "$ttl" --retry-count 0 --min-uptime 0
fi
expect 0 "release A's lock" release "$res" "$token_a"
no_stray_keys "no master keeps $res" "$res"

echo "$(basename "$0"): all $checks checks passed"
