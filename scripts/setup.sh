#!/usr/bin/env bash
# Installs what the build and tests need (Debian packages only), then configures and builds.
# Idempotent and quiet when there is nothing to do.
#   scripts/setup.sh [BUILD_DIR] [extra meson setup args...]
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${1:-build}
shift || true

# Build: the first line (nlohmann-json3-dev is the JSON writer of redlock-cli's --json outputs).
# Tests: redis-server, python3 (CLI, ctypes and packaging tests), cmake (the CMake consumer in
# tests/packaging), libfaketime and nftables (the chaos suite's clock-jump and partition mixes),
# clang + libclang-rt-14-dev (libFuzzer, scripts/fuzz.sh).
packages=(g++ libhiredis-dev libuv1-dev doctest-dev libcli11-dev nlohmann-json3-dev meson ninja-build pkg-config
          redis-server python3 cmake libfaketime nftables clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing packages: ${missing[*]}" >&2
    echo "setup: run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# The packaged redis-server may start a system service on 6379; the tests never use it.
# Warnings are errors here (and in CI): the tree builds clean with -Wall -Wextra -Wpedantic.
if [[ ! -f "$build_dir/build.ninja" ]]; then
  meson setup "$build_dir" -Dwerror=true "$@" >/dev/null
fi
ninja -C "$build_dir" >/dev/null
