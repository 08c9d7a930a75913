#!/usr/bin/env bash
# Small-message latency of two chorus-perf builds, measured back to back:
# rounds alternate A and B, and the medians of each are printed with B/A.
#   bench/ab_latency.sh OLD/chorus-perf NEW/chorus-perf [rounds] [chorus-perf flags...]
# Default flags: AllReduce of 8 B at N = 2 over shm, 20000 timed iterations.
set -euo pipefail
a=${1:?usage: ab_latency.sh A B [rounds] [flags...]}
b=${2:?usage: ab_latency.sh A B [rounds] [flags...]}
rounds=${3:-9}
shift $(( $# < 3 ? $# : 3 ))
flags=("$@")
[ ${#flags[@]} -eq 0 ] && flags=(allreduce --ranks 2 --transport shm -b 8 -e 8 -n 20000 -w 2000 -c 0)
# The out-of-place time (column 6 of chorus-perf's table) of the one row.
time_of() { "$1" "${flags[@]}" | awk '$1 ~ /^[0-9]+$/ { print $6; exit }'; }
ta=(); tb=()
for ((i = 0; i < rounds; ++i)); do
  ta+=("$(time_of "$a")")
  tb+=("$(time_of "$b")")
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ma=$(median "${ta[@]}"); mb=$(median "${tb[@]}")
echo "A: ${ta[*]} us (median $ma)"
echo "B: ${tb[*]} us (median $mb)"
awk -v a="$ma" -v b="$mb" 'BEGIN { printf "B/A = %.3f\n", b / a }'
