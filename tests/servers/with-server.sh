#!/usr/bin/env bash
# Runs a test against one of the newer servers that scripts/servers.sh builds (Valkey 9.1, Redis
# 8.0): finds its binary in the cache when the test runs (so a build configured before the cache
# was filled needs no reconfigure), points the fixtures at it, and names the server and version
# the tests must find behind every port.
#   with-server.sh valkey9|redis8 COMMAND [ARGS...]
# The fixtures start $REDLOCK_TEST_REDIS_SERVER (C++ and tests/cli/redisfix.py; sentinels are the
# same binary with --sentinel), `redlock-cli cluster` starts $REDLOCK_REDIS_SERVER, and every
# server a test talks to must report $REDLOCK_TEST_SERVER_NAME and a version that starts with
# $REDLOCK_TEST_SERVER_VERSION: a run that quietly tested another server would hide a gap.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=${1:?with-server.sh: which server (valkey9, redis8)?}
shift
case $name in
  valkey9) server_name=valkey; version=9.1 ;;
  redis8) server_name=redis; version=8.0 ;;
  *) echo "with-server.sh: unknown server '$name'" >&2; exit 2 ;;
esac
if ! exe=$("$here/../../scripts/servers.sh" --path "$name"); then
  echo "$name is not built: run scripts/servers.sh (or scripts/setup.sh), which builds it from" \
       "Debian's source package into a cache outside the checkout" >&2
  exit 1
fi
export REDLOCK_TEST_REDIS_SERVER=$exe REDLOCK_REDIS_SERVER=$exe
export REDLOCK_TEST_SERVER_NAME=$server_name REDLOCK_TEST_SERVER_VERSION=$version
exec "$@"
