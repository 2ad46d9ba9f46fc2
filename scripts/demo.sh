#!/usr/bin/env bash
# The first thing to run on a fresh machine: set-up (packages, configure, build into build/),
# then the narrated, self-checking failover demonstration on five local Redis masters.
# Its last line is the verdict; exit 0 only if every step behaved as Redlock should.
#   scripts/demo.sh [--count N] [--base-port P] [--dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh build
exec build/tools/redlock-cli demo "$@"
