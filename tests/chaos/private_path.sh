#!/usr/bin/env bash
# The chaos harness must work from any checkout path. The partition mix runs its workers as other
# uids; with the build tree under a directory only its owner may enter (a checkout in root's home,
# or under `mktemp -d`), those uids cannot execute the worker where it was built. This runs the
# partition mix with the worker binary placed under a 0700 directory and expects a clean pass.
#   CHAOS_DRIVER=... CHAOS_WORKER=... tests/chaos/private_path.sh
set -euo pipefail
: "${CHAOS_DRIVER:?}" "${CHAOS_WORKER:?}"
if [[ $(id -u) -ne 0 ]] || ! command -v nft >/dev/null; then
  echo "SKIP: the partition mix needs root and nftables"
  exit 77
fi
private=$(mktemp -d)  # mode 0700
trap 'rm -rf "$private"' EXIT
[[ $(stat -c %a "$private") == 700 ]] || { echo "mktemp -d did not give a 0700 directory"; exit 1; }
mkdir "$private/build"
cp "$CHAOS_WORKER" "$private/build/chaos-worker"
out=$("$CHAOS_DRIVER" --worker "$private/build/chaos-worker" --mix partition --seconds 4 2>&1) || {
  echo "$out"
  echo "FAIL: the partition mix failed with the worker under a 0700 directory"
  exit 1
}
echo "$out"
if ! grep -Eq '^\| partition \|.*\| ok \|$' <<<"$out"; then
  echo "FAIL: no passing row for the partition mix (skipped?), so this checked nothing"
  exit 1
fi
echo "PASS: partition mix with the worker under $private (0700)"
