#!/usr/bin/env bash
# The safety harness (tests/chaos/README.md): worker processes loop acquire -> critical section ->
# release on shared resources while a nemesis injects faults; an oracle records every critical
# section; a checker prints one table row per fault mix. Non-zero exit on any violation in a
# "must be zero" mix (or a harness error). The seed is printed; pass it back to replay a schedule.
#
#   scripts/chaos.sh                                  short run (~1.5 min; also `meson test --suite chaos`)
#   scripts/chaos.sh --minutes N [--seed S]           soak: N minutes over all mixes
#   scripts/chaos.sh --minutes N --report FILE        ... and append the table to FILE (markdown)
#   scripts/chaos.sh --list                           the fault mixes
#   scripts/chaos.sh --mix sentinel-failover --seconds 10         Sentinel votes (meson test chaos-sentinel)
#   scripts/chaos.sh --mix cluster-migrate-failover --seconds 10  Redis Cluster votes (meson test chaos-cluster)
# Other arguments go to chaos-driver: --mix a,b  --seconds S (per mix)  --workers W  --nodes N
#   --resources R  --ttl-ms T  --verbose  --keep-logs  --no-netns  --tls (nodes over TLS)
#
# As root it installs libfaketime (clock-jump mix) and nftables (partition mix) when missing,
# and runs in a private network namespace. Otherwise those mixes are skipped with a note.
set -euo pipefail
cd "$(dirname "$0")/.."

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  missing=()
  for p in libfaketime nftables; do have_pkg "$p" || missing+=("$p"); done
  if ((${#missing[@]})); then
    # Bounded (at most ~90 s) so the short run stays inside meson's 240 s timeout.
    echo "chaos: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache policy "${missing[@]}" 2>/dev/null | grep -q "Candidate: [0-9]"; then
      timeout 45 apt-get update -qq >/dev/null 2>&1 || true
    fi
    timeout 45 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
      echo "chaos: could not install ${missing[*]}: the mixes that need them are skipped"
  fi
fi

driver=${CHAOS_DRIVER:-}
worker=${CHAOS_WORKER:-}
if [[ -z $driver ]]; then
  build_dir=${CHAOS_BUILD_DIR:-build}
  if [[ ! -f $build_dir/build.ninja ]]; then
    scripts/setup.sh "$build_dir"
  fi
  ninja -C "$build_dir" tests/chaos/chaos-driver tests/chaos/chaos-worker >/dev/null
  driver=$build_dir/tests/chaos/chaos-driver
  worker=$build_dir/tests/chaos/chaos-worker
fi

exec "$driver" --worker "$worker" "$@"
