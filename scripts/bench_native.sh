#!/usr/bin/env bash
# Native commands against the Lua scripts, in one run on the same Valkey 9.1 nodes (issue 43,
# item 7): a plain lock's release (DELIFEQ against the release script) through the library, and
# its extend (SET IFEQ PX against the extend script) straight against one server.
#
#   scripts/bench_native.sh [--seconds S] [--base-port P] [--dir DIR]
#
# Release: `redlock-cli --commands scripts|native bench --concurrency 64` on 3 local Valkey 9.1
# nodes (scripts/servers.sh builds the server), alternating the two forms twice each. Its cycle
# is acquire + release: the acquire (SET NX) is the same in both. Server CPU per cycle is the
# nodes' INFO cpu (used_cpu_user + used_cpu_sys, summed over the nodes) before and after, divided
# by the cycles run; the server time of one release call is INFO commandstats' usec_per_call.
# Extend: valkey-benchmark (-c 64) sends each form of a successful extend to one node, and the
# node's INFO commandstats gives its usec_per_call; the library's extend round adds the same
# client and network cost to both forms.
# Figures only: nothing is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=3
base_port=5810
dir=/tmp/redlock-bench-native-$UID
while (($#)); do
  case "$1" in
    --seconds) seconds=${2:?}; shift ;;
    --base-port) base_port=${2:?}; shift ;;
    --dir) dir=${2:?}; shift ;;
    *) echo "bench_native.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
cli=${REDLOCK_CLI:-build/tools/redlock-cli}
server=$(scripts/servers.sh --path valkey9)
bench=$(command -v valkey-benchmark || command -v redis-benchmark)
export REDLOCK_REDIS_SERVER=$server
nodes=$base_port
for i in 1 2; do nodes+=",127.0.0.1:$((base_port + i))"; done
nodes="127.0.0.1:${nodes}"
"$cli" cluster up --count 3 --base-port "$base_port" --dir "$dir" >/dev/null
trap '"$cli" cluster down --dir "$dir" >/dev/null 2>&1 || true' EXIT

cpu_total() {  # server CPU seconds, summed over the nodes
  local sum=0 p
  for p in $base_port $((base_port + 1)) $((base_port + 2)); do
    sum=$(valkey-cli -p "$p" INFO cpu | awk -F: -v s="$sum" \
      '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.6f", s }')
  done
  echo "$sum"
}
usec_per_call() {  # port command
  valkey-cli -p "$1" INFO commandstats | tr -d '\r' |
    awk -F'[:=,]' -v c="cmdstat_$2" '$1 == c { for (i = 2; i < NF; i++) if ($i == "usec_per_call") print $(i + 1) }'
}
reset_stats() {
  for p in $base_port $((base_port + 1)) $((base_port + 2)); do valkey-cli -p "$p" CONFIG RESETSTAT >/dev/null; done
}

echo "server: $("$server" --version | head -c 60)"
echo "revision: $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
printf '%-8s %-5s %12s %12s %14s %16s %18s\n' form round cycle_p50_us release_p50 cycles/s_C64 server_us/cycle release_usec/call
for round in 1 2; do
  for form in scripts native; do
    reset_stats
    before=$(cpu_total)
    json=$("$cli" -n "$nodes" --commands "$form" -q --json bench --seconds "$seconds" --concurrency 64)
    after=$(cpu_total)
    call=$(usec_per_call "$base_port" "$([[ $form == native ]] && echo delifeq || echo evalsha)")
    python3 - "$form" "$round" "$before" "$after" "$call" "$json" <<'PY'
import json, sys
form, rnd, before, after, call, text = sys.argv[1:]
j = json.loads(text)
cycles = j["cycles"] + sum(t["cycles"] for t in j["throughput"])
print("%-8s %-5s %12.0f %12.0f %14.0f %16.1f %18s" % (
    form, rnd, j["cycle_us_p50"], j["release_us_p50"], j["cycles_per_s"],
    (float(after) - float(before)) * 1e6 / max(cycles, 1), call or "-"))
PY
  done
done

# Extend, straight against node 1: the key holds the token, and each form extends it.
p=$base_port
valkey-cli -p "$p" SET bench-extend tok >/dev/null
sha=$(valkey-cli -p "$p" SCRIPT LOAD 'if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end')
printf '%-8s %14s %18s\n' extend requests/s server_usec/call
for round in 1 2; do
  for form in scripts native; do
    reset_stats
    if [[ $form == native ]]; then
      rps=$("$bench" -p "$p" -c 64 -n 200000 -q SET bench-extend tok IFEQ tok PX 30000 | tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -1)
      call=$(usec_per_call "$p" set)
    else
      rps=$("$bench" -p "$p" -c 64 -n 200000 -q EVALSHA "$sha" 1 bench-extend tok 30000 | tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -1)
      call=$(usec_per_call "$p" evalsha)
    fi
    printf '%-8s %14s %18s\n' "$form" "$rps" "$call"
  done
done
