#!/usr/bin/env bash
# docs/ALGORITHMS.md's algorithm table must be exactly what
# `chorus-verify --markdown` prints from the registry.
# Usage: check_algorithms_table.sh CHORUS_VERIFY ALGORITHMS_MD
set -euo pipefail
verify="$1"
doc="$2"
committed=$(sed -n '/^<!-- BEGIN chorus-verify --markdown -->$/,/^<!-- END chorus-verify --markdown -->$/p' "$doc" |
  sed '1d;$d')
if [ -z "$committed" ]; then
  echo "$doc has no table between <!-- BEGIN chorus-verify --markdown --> and <!-- END ... -->"
  exit 1
fi
generated=$("$verify" --markdown)
if [ "$committed" != "$generated" ]; then
  echo "$doc's algorithm table differs from what the registry generates:"
  diff <(printf '%s\n' "$committed") <(printf '%s\n' "$generated") || true
  echo "Regenerate it: replace the lines between the markers with the output of"
  echo "  build/tools/chorus-verify --markdown"
  exit 1
fi
echo "docs/ALGORITHMS.md's table matches the registry"
