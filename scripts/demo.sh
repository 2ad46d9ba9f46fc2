#!/usr/bin/env bash
# The first thing to run on a fresh machine: set-up (packages, configure, build into build/),
# then the narrated, self-checking failover demonstration on five local Redis masters.
# Its last line is the verdict; exit 0 only if every step behaved as Redlock should.
#
# Usage: scripts/demo.sh [--count N] [--base-port P] [--dir DIR] [--tls]
#   --count N        number of masters (default 5, or what `redlock-cli cluster up` saved)
#   --base-port P    port of master 1; master I listens on P + I - 1 (default 7001)
#   --dir DIR        the cluster directory, as for `redlock-cli cluster`
#   --tls            over TLS: the masters it starts are TLS-only, with a throwaway CA in DIR
#                    (as `redlock-cli cluster up --tls`); also REDLOCK_TLS=1
# Exit status: that of `redlock-cli demo` (0 every check passed, 1 a check failed, 2 usage
# error, 130 interrupted, 141 its output closed); 1 if the set-up itself failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# -h must answer at once: without this, asking for help would first install packages and build.
for arg in "$@"; do
  case $arg in
    -h | --help)
      sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"
      if [[ -x build/tools/redlock-cli ]]; then
        echo
        build/tools/redlock-cli demo --help
      fi
      exit 0
      ;;
  esac
done

scripts/setup.sh build
exec build/tools/redlock-cli demo "$@"
