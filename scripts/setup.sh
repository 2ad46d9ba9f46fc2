#!/usr/bin/env bash
# Installs what the build and tests need (Debian packages only), then configures and builds.
# Idempotent: a second run only reports what is cached and that the build has nothing to do.
#   scripts/setup.sh [BUILD_DIR] [extra meson setup args...]
#   REDLOCK_SERVERS=later|0 scripts/setup.sh ...   see "Valkey 9.1 and Redis 8.0" below
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${1:-build}
shift || true

# Build: the first line (nlohmann-json3-dev is the JSON writer of redlock-cli's --json outputs).
# Tests: redis-server, python3 (CLI, ctypes and packaging tests), cmake (the CMake consumer in
# tests/packaging), libfaketime and nftables (the chaos suite's clock-jump and partition mixes),
# clang + libclang-rt-14-dev (libFuzzer, scripts/fuzz.sh), redis-sentinel (the sentinel fixture),
# openssl + libssl-dev (the TLS fixture makes certificates with the openssl CLI and talks TLS to
# servers), valkey-server + valkey-tools (from bookworm-backports: the only other server the suite
# can run against; meson's 'valkey' suite runs the integration, CLI and interop tests on it),
# python3-redis (redis-py, the independent client of the interop suite, tests/interop),
# abigail-tools (abidw/abidiff: the ABI check against abi/libredlock.abi, scripts/abi.sh),
# strace (the CLI test that every line on stderr goes out in one write(2)).
packages=(g++ make libhiredis-dev libuv1-dev doctest-dev libcli11-dev nlohmann-json3-dev meson ninja-build pkg-config
          redis-server python3 cmake libfaketime nftables clang libclang-rt-14-dev
          redis-sentinel openssl libssl-dev clang-format python3-redis spin abigail-tools strace)
backports_packages=(valkey-server valkey-tools)
missing=()
for p in "${packages[@]}" "${backports_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Valkey is only in Debian 12's bookworm-backports suite: add the suite to apt's sources when no
# source lists it yet (same archive and key as the main suite).
backports_file=/etc/apt/sources.list.d/bookworm-backports.sources
add_backports=0
if ((${#missing[@]})) &&
   ! grep -rqs -- 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  add_backports=1
fi

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    if ((add_backports)); then
      echo "setup: adding the bookworm-backports suite to apt's sources ($backports_file)"
      cat >"$backports_file" <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    fi
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    # A package that is only in backports gets its candidate from there without -t; the rest of
    # the system stays on bookworm.
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    if ((add_backports)); then
      echo "setup: valkey needs the bookworm-backports suite in apt's sources, e.g. $backports_file" >&2
    fi
    echo "setup: missing packages: ${missing[*]}" >&2
    echo "setup: run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# Valkey 9.1 and Redis 8.0 for the test matrix: built once per machine from Debian's source packages
# into a cache outside the checkout (scripts/servers.sh says what it is doing; 2-4 minutes each).
# REDLOCK_SERVERS=later: not now (scripts/test.sh builds them beside the first tests instead);
# REDLOCK_SERVERS=0: not at all (their tests then fail, saying how to build them).
case ${REDLOCK_SERVERS:-now} in
  now) scripts/servers.sh ;;
  later|0) ;;
  *) echo "setup: REDLOCK_SERVERS must be now, later or 0 (got '$REDLOCK_SERVERS')" >&2; exit 2 ;;
esac

# The packaged redis-server may start a system service on 6379; the tests never use it.
# Warnings are errors here (and in CI): the tree builds clean with -Wall -Wextra -Wpedantic.
if [[ ! -f "$build_dir/build.ninja" ]]; then
  meson setup "$build_dir" -Dwerror=true "$@" >/dev/null
fi
# A cold build takes minutes on 2 cores: show where it is. On a terminal, ninja's own progress line;
# otherwise (CI logs) one line per 10% of the steps.
if [[ -t 1 ]]; then
  ninja -C "$build_dir"
else
  echo "setup: building in $build_dir"
  ninja -C "$build_dir" | awk '
    /^\[[0-9]+\/[0-9]+\]/ {
      split(substr($0, 2, index($0, "]") - 2), n, "/")
      pct = int(100 * n[1] / n[2])
      if (pct >= next_pct) { printf "setup: build %d%% (%d/%d)\n", pct, n[1], n[2]; fflush(); next_pct = pct - pct % 10 + 10 }
      next
    }
    { print; fflush() }'
  [[ ${PIPESTATUS[0]} -eq 0 ]] || exit 1
fi
