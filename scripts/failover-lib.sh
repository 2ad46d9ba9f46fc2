# shellcheck shell=bash disable=SC2034  # (variables set here are read by the sourcing scripts)
# Shared by scripts/failover-*.sh (sourced, not run): the node list, how to act on one node,
# assertions, and putting every node back the way it was when a script exits, even on failure.
#
# Environment:
#   REDLOCK_NODES          node list when -n is not given (default 127.0.0.1:7001..7005)
#   REDLOCK_CLI            the redlock-cli to test (default build/tools/redlock-cli, else PATH)
#   REDLOCK_CLUSTER_DIR    --dir of the local cluster (when -d is not given)
#   REDLOCK_TLS=1          TLS to every master (as -t); REDLOCK_CACERT, REDLOCK_CERT ... as for
#                          redlock-cli. Unset REDLOCK_CACERT with the local cluster: its own CA
#   FAILOVER_KILL, FAILOVER_START, FAILOVER_STOP, FAILOVER_CONT
#                          shell commands acting on one node, with {host}, {port} and {index}
#                          (1-based position in the list) replaced, e.g.
#                          FAILOVER_KILL='ssh {host} sudo systemctl kill -s KILL redis@{port}'
#                          Unset: `redlock-cli cluster kill|start|stop|cont {index}` on the local
#                          cluster, whose node I must then be item I of the list.
#   FAILOVER_TTL           ttl of the locks taken (default 30s)
#   FAILOVER_NODE_TIMEOUT  --node-timeout of every redlock-cli call on the node list (default
#                          unset: redlock-cli's own, 50ms); e.g. 250ms on a loaded test machine

fo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -n ${REDLOCK_CLI:-} ]]; then
  cli=$REDLOCK_CLI
elif [[ -x $fo_root/build/tools/redlock-cli ]]; then
  cli=$fo_root/build/tools/redlock-cli
else
  cli=redlock-cli
fi
ttl=${FAILOVER_TTL:-30s}
node_timeout=${FAILOVER_NODE_TIMEOUT:-}
cluster_dir=${REDLOCK_CLUSTER_DIR:-}
nodes=${REDLOCK_NODES:-127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005}
fo_actions=()  # the actions a script uses, "kill start" or "stop cont": set before fo_parse_args

# Prints the calling script's header comment (its documentation) as usage.
fo_usage() {
  sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0"
}

fo_parse_args() {
  local opt
  OPTIND=1
  while getopts "n:d:th" opt; do
    case $opt in
      n) nodes=$OPTARG ;;
      d) cluster_dir=$OPTARG ;;
      t) export REDLOCK_TLS=1 ;;
      h) fo_usage; exit 0 ;;
      *) fo_usage >&2; exit 2 ;;
    esac
  done
  shift $((OPTIND - 1))
  # A stray word (a node list without -n, a typo) must not be ignored: the run would then test
  # other masters than the ones meant.
  (($# == 0)) || fo_usage_error "unexpected argument '$1' (node lists go after -n; see -h)"
  IFS=, read -r -a node_list <<<"$nodes"
  N=${#node_list[@]}
  Q=$((N / 2 + 1))  # quorum
  F=$((N - Q))      # how many masters may fail
  if ((N < 1)); then
    echo "$(basename "$0"): empty node list" >&2
    exit 2
  fi
  fo_tls_ca
  # A malformed list is a usage error (exit 2) before anything is touched, not a failed check.
  # (status exits 2 only for usage; its other codes are verdicts: free, held, no quorum to tell)
  local why rc=0
  why=$("$cli" -n "$nodes" --connect-timeout 100ms status redlock-failover-precheck 2>&1 >/dev/null) || rc=$?
  if ((rc == 2)); then
    fo_usage_error "bad node list '$nodes': ${why#redlock-cli: }"
  fi
  fo_check_actions
  fo_tmp=$(mktemp -d)
  trap fo_on_exit EXIT
  trap 'exit 130' INT TERM
  local over=""
  [[ ${REDLOCK_TLS:-} == 1 || $nodes == *rediss://* ]] && over=" over TLS"
  echo "$(basename "$0"): $N masters ($nodes)$over, quorum $Q, cli $cli"
}

# With TLS and no REDLOCK_CACERT, the CA of the local cluster (`cluster up --tls` made it), when
# there is one: what `eval "$(redlock-cli cluster env)"` would set.
fo_tls_ca() {
  [[ ${REDLOCK_TLS:-} == 1 || $nodes == *rediss://* ]] || return 0
  [[ -z ${REDLOCK_CACERT:-} ]] || return 0
  local args=(cluster env) env_text ca
  [[ -n $cluster_dir ]] && args+=(--dir "$cluster_dir")
  env_text=$("$cli" "${args[@]}" 2>/dev/null) || return 0
  ca=$(
    eval "$env_text"
    printf '%s' "${REDLOCK_CACERT:-}"
  )
  if [[ -n $ca ]]; then export REDLOCK_CACERT=$ca; fi
}

# ---- acting on one node ------------------------------------------------------------------------

killed=()  # indices killed and not restarted yet: restarted on exit
paused=()  # indices paused and not resumed yet: resumed on exit

# Host and port of node I, for the command templates (redis://user:pw@host:port/db, [v6]:port).
node_host_port() {
  local a=${node_list[$1 - 1]}
  a=${a#*://}
  a=${a##*@}
  a=${a%%/*}
  a=${a%%\?*}
  if [[ $a == \[* ]]; then
    host=${a%%]*}
    host=${host#[}
    port=${a##*]:}
  elif [[ $a == *:* ]]; then
    host=${a%:*}
    port=${a##*:}
  else
    host=$a
    port=6379
  fi
}

fo_usage_error() {
  echo "$(basename "$0"): $*" >&2
  exit 2
}

# Refuses, before touching anything, set-ups in which a master could not be put back, or in
# which the default commands would act on a local node that is not the one in the list.
# fo_actions (set by each script): the pair of actions it uses, "kill start" or "stop cont".
fo_check_actions() {
  local a=FAILOVER_${fo_actions[0]^^} b=FAILOVER_${fo_actions[1]^^}
  if [[ -n ${!a:-} && -z ${!b:-} ]] || [[ -z ${!a:-} && -n ${!b:-} ]]; then
    fo_usage_error "set both $a and $b (or neither): a master must be put back the way it was taken down"
  fi
  [[ -n ${!a:-} ]] && return 0
  # Some default commands are used: node I of the list must be node I of the local cluster.
  local status i where ports=()
  local args=(cluster status)
  [[ -n $cluster_dir ]] && args+=(--dir "$cluster_dir")
  status=$("$cli" "${args[@]}" 2>&1) || fo_usage_error "cannot read the local cluster: $status"
  read -r -a ports <<<"$(awk 'NR > 1 { printf "%s ", $2 }' <<<"$status")"
  for ((i = 1; i <= N; i++)); do
    node_host_port "$i"
    if [[ $host != 127.0.0.1 && $host != localhost ]] || [[ $port != "${ports[i - 1]:-}" ]]; then
      where="it has no node $i"
      [[ -n ${ports[i - 1]:-} ]] && where="that one is on port ${ports[i - 1]}"
      fo_usage_error "node $i of the list (${node_list[i - 1]}) is not node $i of the local cluster" \
        "($where); for other masters set $a and $b (see -h)"
    fi
  done
}

# node_do ACTION I: ACTION is kill, start, stop (SIGSTOP) or cont (SIGCONT).
node_do() {
  local action=$1 i=$2 var tmpl cmd
  var=FAILOVER_${action^^}
  tmpl=${!var:-}
  node_host_port "$i"
  echo "  $action node $i (${node_list[$i - 1]})"
  if [[ -n $tmpl ]]; then
    cmd=${tmpl//\{host\}/$host}
    cmd=${cmd//\{port\}/$port}
    cmd=${cmd//\{index\}/$i}
    bash -c "$cmd" >"$fo_tmp/node.out" 2>&1 || { cat "$fo_tmp/node.out" >&2; return 1; }
    return 0
  fi
  local args=(cluster "$action" "$i")
  [[ -n $cluster_dir ]] && args+=(--dir "$cluster_dir")
  # A node killed a moment ago can hold its port for a few ms more (its threads are still
  # exiting), so a local start that found its port taken is retried briefly. Any other failure
  # (the node did not come up in time: it may still be starting) is final, and every attempt's
  # output is shown.
  local attempt
  : >"$fo_tmp/node.all"
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    "$cli" "${args[@]}" >"$fo_tmp/node.out" 2>&1 && return 0
    { echo "  attempt $attempt:"; cat "$fo_tmp/node.out"; } >>"$fo_tmp/node.all"
    if [[ $action != start ]] || ! grep -q "already in use by another process" "$fo_tmp/node.out"; then
      break
    fi
    sleep 0.2
  done
  cat "$fo_tmp/node.all" >&2
  return 1
}

kill_node() { node_do kill "$1" || fail "could not kill node $1"; killed+=("$1"); }
pause_node() { node_do stop "$1" || fail "could not pause node $1"; paused+=("$1"); }

start_node() {
  node_do start "$1" || fail "could not restart node $1"
  local k rest=()
  for k in "${killed[@]}"; do [[ $k == "$1" ]] || rest+=("$k"); done
  killed=("${rest[@]}")
}

resume_node() {
  node_do cont "$1" || fail "could not resume node $1"
  local k rest=()
  for k in "${paused[@]}"; do [[ $k == "$1" ]] || rest+=("$k"); done
  paused=("${rest[@]}")
}

# Whatever happened, leave no master paused or down. A restart here is immediate: the scripts
# hold no lock by then that a forgetful master could hand out twice.
fo_on_exit() {
  local rc=$? i
  for i in "${paused[@]}"; do node_do cont "$i" || echo "could not resume node $i" >&2; done
  for i in "${killed[@]}"; do node_do start "$i" || echo "could not restart node $i" >&2; done
  rm -rf "$fo_tmp"
  exit "$rc"
}

# ---- running redlock-cli and asserting -----------------------------------------------------------

checks=0

pass() {
  checks=$((checks + 1))
  echo "ok    $*"
}

fail() {
  echo "FAIL  $*"
  echo "$(basename "$0"): FAILED after $checks passed checks" >&2
  exit 1
}

# rl ARGS...: runs redlock-cli on the node list; sets out (stdout), err (stderr), rc, ms.
rl() {
  local t0 t1 opts=()
  if [[ -n $node_timeout ]]; then opts=(--node-timeout "$node_timeout"); fi
  t0=$(date +%s%N)
  set +e
  out=$("$cli" -n "$nodes" "${opts[@]}" "$@" 2>"$fo_tmp/err")
  rc=$?
  set -e
  t1=$(date +%s%N)
  ms=$(((t1 - t0) / 1000000))
  err=$(<"$fo_tmp/err")
}

# expect CODE WHAT ARGS...: runs `redlock-cli ARGS...` and asserts its exit status.
expect() {
  local want=$1 what=$2
  shift 2
  rl "$@"
  if [[ $rc -ne $want ]]; then
    fail "$what: expected exit $want, got $rc (redlock-cli $*)${err:+: $err}"
  fi
  pass "$what (exit $rc, $ms ms)"
}

# acquire_ok WHAT RESOURCE [ARGS...]: asserts acquire exits 0 with a token; sets token.
acquire_ok() {
  local what=$1 res=$2
  shift 2
  expect 0 "$what" acquire "$res" --ttl "$ttl" "$@"
  [[ $out =~ ^[0-9a-f]{40}$ ]] || fail "$what: stdout is not one token: '$out'"
  token=$out
}

# Every node answers: checked first, so a failure later is about the failover, not the setup.
require_all_up() {
  rl status "redlock-failover-precheck"
  # (0 held, 1 free: both verdicts; 3 is no quorum to tell)
  ((rc == 0 || rc == 1)) || fail "redlock-cli status exited $rc: $err"
  local down
  down=$(awk 'NR > 2 && $2 != "up" { print $1 }' <<<"$out" | paste -sd, -)
  [[ -z $down ]] || fail "every master must be up before the test; down: $down"
  pass "all $N masters answer"
}

# stray_keys RES [ALLOWED_TOKEN...]: prints the live nodes whose value for RES is not allowed.
stray_keys() {
  local res=$1
  shift
  rl status "$res"
  awk -v allowed=" $* " 'NR > 2 && $2 == "up" && $3 != "-" && index(allowed, " " $3 " ") == 0 { print $1 "=" $3 }' \
    <<<"$out" | paste -sd, -
}

# no_stray_keys WHAT RES [ALLOWED_TOKEN...]: asserts no live master stores anything else for RES.
# A failed attempt's rollback is sent before the CLI exits, but a node that was paused applies
# it when resumed: allow a moment (a key really left behind stays for its whole ttl).
no_stray_keys() {
  local what=$1 res=$2 stray
  shift 2
  for _ in $(seq 1 30); do
    stray=$(stray_keys "$res" "$@")
    [[ -z $stray ]] && break
    sleep 0.1
  done
  [[ -z $stray ]] || fail "$what: left behind on $stray"
  pass "$what"
}

# count_token RES TOKEN: how many live masters store TOKEN for RES.
count_token() {
  rl status "$1"
  awk -v t="$2" 'NR > 2 && $2 == "up" && $3 == t { n++ } END { print n + 0 }' <<<"$out"
}
