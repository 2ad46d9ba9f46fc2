#!/usr/bin/env bash
# Builds the newer servers of the test matrix (Valkey 9.1 and Redis 8.0) from Debian's own source
# packages, once per machine, into a cache outside the checkout, so a fresh clone reuses them.
#   scripts/servers.sh            build what is missing, print where each binary is
#   scripts/servers.sh --path S   print the cached binary of S (valkey9, redis8); exit 1 if absent
#   scripts/servers.sh --list     the servers this script knows, one per line
# Cache: $REDLOCK_SERVER_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/redlock/servers/<name>-<version>/.
#
# Why from source: the binary packages of these versions (Debian's `sid` suite) need a newer C
# library than Debian 12 has. Their upstream tarballs carry their own deps/ (Lua, hiredis, ...),
# so they build with Debian 12's compiler and OpenSSL. The source comes through apt with a private
# sources file and lists directory: `sid` is never added to the system's sources (every later
# `apt-get install` would pick from it), and apt checks the files against the archive's signed
# index as it does for any package.
# Built with TLS (the TLS tests run on them) and with libc's malloc instead of the bundled
# jemalloc: a third less build time, and the tests do not measure the server's allocator.
set -euo pipefail

# name version source-package debian-version binary
servers=(
  "valkey9 9.1.2 valkey 9.1.2-1 valkey-server"
  "redis8 8.0.6 redis 5:8.0.6-3 redis-server"
)

cache=${REDLOCK_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/redlock/servers}

# The directory a server's binary is cached in.
server_dir() { echo "$cache/$1-$2"; }

lookup() {
  local want=$1 entry name version pkg debver bin
  for entry in "${servers[@]}"; do
    read -r name version pkg debver bin <<<"$entry"
    if [[ $name == "$want" ]]; then
      echo "$name $version $pkg $debver $bin"
      return 0
    fi
  done
  return 1
}

case ${1:-} in
  --list)
    for entry in "${servers[@]}"; do echo "${entry%% *}"; done
    exit 0
    ;;
  --path)
    entry=$(lookup "${2:-}") || { echo "servers: unknown server '${2:-}' (try --list)" >&2; exit 2; }
    read -r name version pkg debver bin <<<"$entry"
    exe="$(server_dir "$name" "$version")/bin/$bin"
    [[ -x $exe ]] || exit 1
    echo "$exe"
    exit 0
    ;;
  "") ;;
  -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
  *) echo "servers: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

# A private apt state for the sid source index: nothing of the system's apt configuration changes.
apt_dir=""
apt_ready=0
apt_opts=()
cleanup() { [[ -n $apt_dir ]] && rm -rf "$apt_dir"; return 0; }
trap cleanup EXIT
prepare_apt() {
  ((apt_ready)) && return 0
  apt_dir=$(mktemp -d)
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/sources"
  cat >"$apt_dir/sources/sid-src.sources" <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  apt_opts=(-o "Dir::Etc::sourcelist=/dev/null" -o "Dir::Etc::sourceparts=$apt_dir/sources"
            -o "Dir::State::Lists=$apt_dir/lists" -o "Debug::NoLocking=1"
            -o "APT::Sandbox::User=root")
  echo "servers: reading the source index of Debian's sid suite (private apt lists in $apt_dir)"
  apt-get "${apt_opts[@]}" update -qq >/dev/null
  apt_ready=1
}

build_one() {
  local name=$1 version=$2 pkg=$3 debver=$4 bin=$5
  local dir work src
  dir=$(server_dir "$name" "$version")
  if [[ -x $dir/bin/$bin ]]; then
    echo "servers: $name: $dir/bin/$bin (cached)"
    return 0
  fi
  prepare_apt
  work=$(mktemp -d)
  echo "servers: $name: fetching the source package $pkg $debver"
  (cd "$work" && apt-get "${apt_opts[@]}" source --download-only "$pkg=$debver" >/dev/null 2>&1) || {
    echo "servers: $name: could not fetch $pkg $debver from Debian's sid suite" >&2
    rm -rf "$work"
    return 1
  }
  tar -xzf "$work"/"${pkg}"_"${version}".orig.tar.gz -C "$work"
  src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -1)
  echo "servers: $name: building $bin $version (make BUILD_TLS=yes MALLOC=libc, 2-4 minutes on 2 cores; log: $work/build.log)"
  local start=$SECONDS
  if ! make -C "$src" -j"$(nproc)" BUILD_TLS=yes MALLOC=libc "$bin" >"$work/build.log" 2>&1; then
    echo "servers: $name: the build failed; the end of its log:" >&2
    tail -30 "$work/build.log" >&2
    return 1
  fi
  mkdir -p "$dir/bin"
  install -m 0755 "$src/src/$bin" "$dir/bin/$bin.tmp"
  mv "$dir/bin/$bin.tmp" "$dir/bin/$bin"
  "$dir/bin/$bin" --version >"$dir/VERSION"
  rm -rf "$work"
  echo "servers: $name: built in $((SECONDS - start)) s: $dir/bin/$bin"
}

failed=0
for entry in "${servers[@]}"; do
  read -r name version pkg debver bin <<<"$entry"
  build_one "$name" "$version" "$pkg" "$debver" "$bin" || failed=1
done
exit $failed
