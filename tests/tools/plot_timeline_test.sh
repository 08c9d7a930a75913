#!/usr/bin/env bash
# scripts/plot_timeline.py draws a measured (CHORUS_TRACE) and a simulated
# (chorus-sim --trace) timeline of one ring AllReduce into a PNG.
#   plot_timeline_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CHORUS_TRACE="$tmp/measured" "$build/tools/chorus-perf" allreduce --ranks 2 --transport inproc \
  -b 64K -e 64K -n 2 -w 1 -c 1 -a ring > "$tmp/perf.txt"
"$build/tools/chorus-sim" allreduce --ranks 2 --bytes 64K --algo ring --alpha 1us --beta 5GB/s \
  --trace "$tmp/sim.json" > /dev/null 2>&1
/usr/bin/python3 "$src/scripts/plot_timeline.py" --measured "$tmp/measured" \
  --simulated "$tmp/sim.json" -o "$tmp/timeline.png"
# A PNG: its 8-byte signature.
[ "$(head -c 8 "$tmp/timeline.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]
# A wrong call number is an error that names it, not an empty picture.
if /usr/bin/python3 "$src/scripts/plot_timeline.py" --measured "$tmp/measured" --call 999 \
     --simulated "$tmp/sim.json" -o "$tmp/none.png" 2> "$tmp/err.txt"; then
  echo "plot_timeline accepted call 999" >&2
  exit 1
fi
grep -q "no collective call 999" "$tmp/err.txt"
echo "plot_timeline: PNG drawn; a missing call is an error"
