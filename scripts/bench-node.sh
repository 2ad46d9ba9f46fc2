#!/usr/bin/env bash
# redlock-cli's sequential lock cycle against the node.js Redlock clients, side by side on the same
# nodes in one run (issue 46: cycle p50 at least 1.5x faster than the best node client in every
# round). These machines are shared: only figures measured together, interleaved, compare.
#
#   scripts/bench-node.sh [--rounds N] [--seconds S] [--cli PATH] [--json]
#
#   --rounds N   rounds (default 5); the order of the runs rotates from round to round.
#   --seconds S  measured seconds of each run (default 3; redlock-cli's --concurrency 1 adds a
#                throughput phase of as long, and each node run 0.5 s of unmeasured warm-up).
#   --cli PATH   redlock-cli to measure (default build-rel/tools/redlock-cli where it exists,
#                else build/tools/redlock-cli; judge the target on a release build).
#   --json       one JSON object (every round's figures, the medians, the verdict) on stdout.
#
# Starts 5 local nodes (`cluster up`, ports in 22768-27999: below the ephemeral range), then each
# round runs `redlock-cli bench --concurrency 1 --json` and scripts/node-bench/bench.mjs for each
# node client: node-redlock 4.2, @sesamecare-oss/redlock 1.4, redlock-universal 0.8.5 over ioredis
# (the Redis client of the other two, so only the lock library differs) and over node-redis (its
# other adapter, in case that is the faster one). Each does one acquire then one release on one
# resource, ttl 10 s, no retry, drift factor 0.01. Prints the median over the rounds of each
# one's cycle p50 and p99, and per round the best node client's p50 / redlock-cli's p50: MISS
# when a round is below 1.5, met otherwise. Figures only: a MISS still exits 0.
#
# The node packages are installed once, pinned, with npm into ${XDG_CACHE_HOME:-~/.cache}/redlock/
# node-bench (outside the checkout); later runs use them without the network. Needs node and npm
# (Debian: apt-get install nodejs npm), redis-server, redis-cli and python3. Exits 1 when a run
# fails or a node still holds keys after the runs (every cycle releases what it took).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
seconds=3
cli=""
json=0
while (($#)); do
  case $1 in
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --seconds) seconds=${2:?--seconds needs seconds}; shift 2 ;;
    --cli) cli=${2:?--cli needs a path}; shift 2 ;;
    --json) json=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench-node.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench-node.sh: --rounds: a positive number" >&2; exit 2; }
if ! [[ $seconds =~ ^[0-9]*\.?[0-9]+$ ]] || ! awk -v s="$seconds" 'BEGIN { exit !(s > 0) }'; then
  echo "bench-node.sh: --seconds: a positive number of seconds" >&2
  exit 2
fi
if [[ -z $cli ]]; then
  cli=build/tools/redlock-cli
  [[ -x build-rel/tools/redlock-cli ]] && cli=build-rel/tools/redlock-cli
fi
[[ -x $cli ]] || { echo "bench-node.sh: $cli is not executable (build it, or give --cli)" >&2; exit 1; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "bench-node.sh: node and npm are needed: apt-get install nodejs npm" >&2
  exit 1
fi
for tool in redis-server redis-cli python3; do
  command -v "$tool" >/dev/null ||
    { echo "bench-node.sh: $tool is missing (Debian: redis-server, redis-tools, python3)" >&2; exit 1; }
done

# Pinned: a new version of a client is a new comparison, made on purpose.
packages=(redlock@4.2.0 @sesamecare-oss/redlock@1.4.0 redlock-universal@0.8.5 ioredis@5.9.3 redis@5.12.1)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/redlock/node-bench
installed() {  # installed NAME@VERSION: that version is in the cache
  local name=${1%@*} version=${1##*@}
  local json=$cache/node_modules/$name/package.json
  [[ $(node -p 'require(process.argv[1]).version' "$json" 2>/dev/null) == "$version" ]]
}
missing=0
for p in "${packages[@]}"; do installed "$p" || missing=1; done
if ((missing)); then
  # All in one command: npm install --no-save prunes what an earlier --no-save put there.
  # redlock-universal asks for node >= 22 (an EBADENGINE warning); it runs on node 20 (20.20).
  echo "bench-node.sh: installing ${packages[*]} into $cache" >&2
  mkdir -p "$cache"
  npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$cache" "${packages[@]}" >&2
  for p in "${packages[@]}"; do
    installed "$p" || { echo "bench-node.sh: $p did not install" >&2; exit 1; }
  done
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/redlock-bench-node.XXXXXX")
# shellcheck disable=SC2317  # reached through the trap (shellcheck 0.9 thinks it is not)
cleanup() {
  local rc=$?
  # `down` stops only the nodes whose pid files are in this directory: those started here.
  "$cli" -q cluster down --dir "$work/nodes" >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Binding, not connecting: a port in TIME_WAIT or bound but not listening counts as taken too.
ports_free() {  # ports_free BASE COUNT
  python3 -c 'import socket, sys
for p in range(int(sys.argv[1]), int(sys.argv[1]) + int(sys.argv[2])):
    with socket.socket() as s:
        s.bind(("127.0.0.1", p))' "$1" "$2" 2>/dev/null
}
base=""
for _ in 1 2 3 4 5 6 7 8 9 10; do
  b=$((22768 + RANDOM % (27999 - 22768 - 4)))
  ports_free "$b" 5 || continue
  # A port taken between the check and the start makes `up` fail: stop what it started, try again.
  if "$cli" -q cluster up --count 5 --base-port "$b" --dir "$work/nodes" >"$work/up.log" 2>&1; then
    base=$b
    break
  fi
  "$cli" -q cluster down --dir "$work/nodes" >/dev/null 2>&1 || true
done
[[ -n $base ]] || { echo "bench-node.sh: could not start 5 nodes:" >&2; cat "$work/up.log" >&2; exit 1; }
nodes=$(seq -s, -f "127.0.0.1:%g" "$base" $((base + 4)))

runners=(redlock-cli redlock sesamecare universal universal-redis)
run() {  # run NAME OUT: one measured run, its JSON in OUT
  if [[ $1 == redlock-cli ]]; then
    "$cli" -n "$nodes" bench --seconds "$seconds" --concurrency 1 --json >"$2" 2>"$2.err"
  else
    node scripts/node-bench/bench.mjs "$1" --nodes "$nodes" --seconds "$seconds" --modules "$cache" \
      >"$2" 2>"$2.err"
  fi
}
cli_version=$("$cli" --version)
echo "bench-node: $rounds rounds x ${#runners[@]} runs, ${seconds} s each, 5 nodes at $base; $cli" \
  "($cli_version), node $(node --version); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
failed=0
for ((r = 0; r < rounds; r++)); do
  order=()
  for ((k = 0; k < ${#runners[@]}; k++)); do order+=("${runners[(k + r) % ${#runners[@]}]}"); done
  echo "round $((r + 1))/$rounds: ${order[*]}" >&2
  for name in "${order[@]}"; do
    if ! run "$name" "$work/r$r-$name.json"; then
      echo "bench-node.sh: round $((r + 1)): $name failed:" >&2
      head -n 5 "$work/r$r-$name.json.err" >&2
      failed=1
    fi
  done
done

# Every cycle released what it took, so the nodes must be empty (redlock-cli sweeps its own keys).
left=""
for ((p = base; p < base + 5; p++)); do
  n=$(redis-cli -p "$p" dbsize 2>/dev/null || echo "?")
  [[ $n == 0 ]] || left+="${left:+ }$p:$n"
done

python3 - "$work" "$rounds" "$seconds" "$json" "$left" "${cli_version##* }" "${runners[@]}" <<'PY'
import json, os, statistics, sys
work, rounds, seconds, as_json = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
left, cli_version, runners = sys.argv[5], sys.argv[6], sys.argv[7:]
TARGET = 1.5
def load(r, name):
    try:
        with open(os.path.join(work, "r%d-%s.json" % (r, name))) as f:
            j = json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return {}
    if name == "redlock-cli":  # its "errors" counts the throughput phase too
        j["errors"] = j.get("sequential_errors")
    return j
def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
runs = [{name: load(r, name) for name in runners} for r in range(rounds)]
node_clients = runners[1:]
per_round = []
for r, run in enumerate(runs):
    cli = run["redlock-cli"]
    c1 = (cli.get("throughput") or [{}])[0]
    fig = {n: run[n].get("cycle_us_p50") for n in node_clients if run[n].get("cycle_us_p50")}
    best = min(fig, key=fig.get) if fig else None
    p50 = cli.get("cycle_us_p50")
    per_round.append({
        "round": r + 1,
        "redlock_cli": {k: cli.get(k) for k in ("cycle_us_p50", "cycle_us_p99", "rtt_us_p50",
                                                  "cycle_to_rtt", "cycle_to_fanout",
                                                  "raw_cycle_us_p50", "cycle_to_raw_cycle",
                                                  "errors")}
                       | {"c1_cycle_us_p50": c1.get("cycle_us_p50")},
        "node": {n: {k: run[n].get(k) for k in ("cycle_us_p50", "cycle_us_p99", "cycles", "errors")}
                 for n in node_clients},
        "best_node_client": best,
        "ratio": round(fig[best] / p50, 2) if best and p50 else None,
        # The most any client could be faster than the best node client in this round: its p50
        # over the raw cycle (the same commands over raw connections, no library; bench.cpp).
        "ceiling": round(fig[best] / cli["raw_cycle_us_p50"], 2)
                   if best and cli.get("raw_cycle_us_p50") else None,
    })
ratios = [p["ratio"] for p in per_round]
medians = {}
for n in runners:
    m = medians[n] = {k: med([run[n].get(k) for run in runs])
                      for k in ("cycle_us_p50", "cycle_us_p99", "cycles")}
    errors = [run[n]["errors"] for run in runs if run[n].get("errors") is not None]
    m["errors"] = sum(errors) if errors else None
    for k in ("version", "redis_client"):
        m[k] = next((run[n][k] for run in runs if run[n].get(k)), None)
medians["redlock-cli"]["version"] = cli_version
complete = all(x is not None for x in ratios)
verdict = "MISS" if any(x is not None and x < TARGET for x in ratios) else ("met" if complete else "incomplete")
result = {"rounds": rounds, "seconds": seconds, "target": TARGET, "per_round": per_round,
          "medians": medians, "ratio_median": med(ratios), "verdict": verdict,
          "ceiling_median": med([p["ceiling"] for p in per_round]),
          "keys_left": left or None}
if as_json:
    print(json.dumps(result))
    sys.exit(0)
f = lambda v, spec="%.0f": "-" if v is None else spec % v
print("| client | version | Redis client | cycles | cycle p50 us | cycle p99 us | errors |")
print("|---|---|---|--:|--:|--:|--:|")
for n in runners:
    m = medians[n]
    print("| %s | %s | %s | %s | %s | %s | %s |" % (n, m["version"] or "-", m["redis_client"] or "-",
          f(m["cycles"]), f(m["cycle_us_p50"]), f(m["cycle_us_p99"]), f(m["errors"], "%d")))
print()
print("| round | redlock-cli p50 us | x rtt | x fan-out | raw cycle p50 us | x raw cycle"
      " | (C=1 p50 us) | best node client | its p50 us | ratio | ceiling |")
print("|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|")
for p in per_round:
    c, best = p["redlock_cli"], p["best_node_client"]
    print("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (p["round"],
          f(c["cycle_us_p50"]), f(c["cycle_to_rtt"], "%.2f"), f(c["cycle_to_fanout"], "%.2f"),
          f(c["raw_cycle_us_p50"]), f(c["cycle_to_raw_cycle"], "%.2f"), f(c["c1_cycle_us_p50"]),
          best or "-", f(p["node"][best]["cycle_us_p50"] if best else None), f(p["ratio"], "%.2f"),
          f(p["ceiling"], "%.2f")))
print()
print("medians over %d rounds; ratio = best node client's cycle p50 / redlock-cli's (sequential phase);"
      " ceiling = best node client's p50 / the raw cycle's (the same commands over raw connections,"
      " no library: no client's ratio can be much above it); C=1 p50 is redlock-cli's"
      " --concurrency 1 throughput phase, for reference only" % rounds)
print("median ratio %s (ceiling %s); target %.1fx in every round: %s"
      % (f(result["ratio_median"], "%.2f"), f(result["ceiling_median"], "%.2f"), TARGET, verdict))
print("nodes empty after the runs: "
      + ("yes" if not left else "NO, keys left (port:count, ? when it did not answer): " + left))
PY
if [[ -n $left ]]; then
  echo "bench-node.sh: keys left on the nodes: $left" >&2
  failed=1
fi
exit "$failed"
