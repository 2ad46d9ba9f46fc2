#!/usr/bin/env bash
# clang-format (.clang-format at the root) over every C and C++ source of the project.
#   scripts/format.sh           rewrite the files in place
#   scripts/format.sh --check   change nothing; list what is not formatted and exit 1 (test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format: clang-format is missing (apt-get install clang-format)" >&2; exit 1; }
mapfile -t files < <(git ls-files -- 'lib/*' 'include/*' 'tools/*' 'tests/*' | grep -E '\.(c|h|cpp|hpp)$')
if [[ ${1:-} == --check ]]; then
  if ! out=$(clang-format --dry-run --Werror "${files[@]}" 2>&1); then
    echo "$out" | grep -E "error:" | cut -d: -f1 | sort -u | sed 's/^/not formatted: /'
    echo "format: run scripts/format.sh" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files clean"
else
  clang-format -i "${files[@]}"
fi
