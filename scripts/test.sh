#!/usr/bin/env bash
# The whole test suite: set-up (packages, configure, build), then `meson test`.
# Non-zero on any failure. Extra arguments go to `meson test` (e.g. --suite unit).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh build
meson test -C build --print-errorlogs "$@"
