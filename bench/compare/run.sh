#!/usr/bin/env bash
# Side-by-side AllReduce: chorus-perf against Open MPI, MPICH (shared memory)
# and Gloo, Open MPI over TCP (loopback), at the same N, sizes and dtype
# (float32 sum). Installs what is missing, builds, runs each system back to
# back and prints one table per (N, transport): size, each system's
# out-of-place busbw (GB/s) and chorus / best-peer.
#
#   bench/compare/run.sh [-n "2 4"] [-t "shm tcp"] [-b 8] [-e 256M] [-f 4] [-i 20]
#
# The peers are not part of the test dependencies, so the main CMake build
# never builds them: this script compiles them with each MPI's own mpicxx.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ranks="2 4"; transports="shm tcp"; minb=8; maxb=256M; factor=4; iters=20
while getopts "n:t:b:e:f:i:" opt; do
  case $opt in
    n) ranks=$OPTARG ;; t) transports=$OPTARG ;; b) minb=$OPTARG ;; e) maxb=$OPTARG ;;
    f) factor=$OPTARG ;; i) iters=$OPTARG ;; *) exit 2 ;;
  esac
done
build="${BUILD_DIR:-$root/build-compare}"

"$root/scripts/install-deps.sh" openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target chorus-perf >/dev/null
mkdir -p "$build/compare"
mpicxx.openmpi -O2 -std=c++20 -o "$build/compare/mpi_openmpi" "$here/mpi_allreduce.cc"
mpicxx.mpich -O2 -std=c++20 -o "$build/compare/mpi_mpich" "$here/mpi_allreduce.cc"
g++ -O2 -std=c++20 -o "$build/compare/gloo_allreduce" "$here/gloo_allreduce.cc" -lgloo -pthread

sweep=(-b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w 5)
out="$build/compare/results"; mkdir -p "$out"
ompi_root=(); [ "$(id -u)" -eq 0 ] && ompi_root=(--allow-run-as-root)

run_gloo() {  # N -> rank 0's output
  local n=$1 dir; dir=$(mktemp -d)
  local pids=()
  for ((r = 1; r < n; r++)); do
    "$build/compare/gloo_allreduce" --rank "$r" --size "$n" --store "$dir" "${sweep[@]}" >/dev/null &
    pids+=($!)
  done
  "$build/compare/gloo_allreduce" --rank 0 --size "$n" --store "$dir" "${sweep[@]}"
  wait "${pids[@]}"
  rm -rf "$dir"
}

# Prints the joined table of the named result files (column 8 = busbw).
join_table() {
  local title=$1; shift
  echo "# $title"
  awk -v names="$*" '
    BEGIN { k = split(names, sys, " ") }
    FNR == 1 { f++ }
    /^#/ || NF < 8 { next }
    { bw[f, $1] = $8; if (!($1 in seen)) { seen[$1] = 1; order[++m] = $1 } }
    END {
      printf "%12s", "size(B)"; for (i = 1; i <= k; i++) printf " %12s", sys[i]; printf " %14s\n", "chorus/best"
      for (j = 1; j <= m; j++) {
        s = order[j]; best = 0
        printf "%12s", s
        for (i = 1; i <= k; i++) { v = bw[i, s]; printf " %12s", (v == "" ? "-" : v); if (i > 1 && v + 0 > best) best = v + 0 }
        if (best > 0) printf " %14.2f\n", bw[1, s] / best; else printf " %14s\n", "-"
      }
    }' "${@/#/$out/}"
}

for n in $ranks; do
  for t in $transports; do
    echo "== N=$n transport=$t ==" >&2
    "$build/tools/chorus-perf" allreduce --ranks "$n" --transport "$t" "${sweep[@]}" \
      > "$out/chorus_${t}_$n" || true
    if [ "$t" = shm ]; then
      mpirun.openmpi "${ompi_root[@]}" --oversubscribe -np "$n" --mca btl vader,self \
        "$build/compare/mpi_openmpi" "${sweep[@]}" > "$out/openmpi_${t}_$n"
      mpirun.mpich -np "$n" "$build/compare/mpi_mpich" "${sweep[@]}" > "$out/mpich_${t}_$n"
      join_table "AllReduce float32 busbw (GB/s), N=$n, shared memory" \
        "chorus_${t}_$n" "openmpi_${t}_$n" "mpich_${t}_$n"
    else
      mpirun.openmpi "${ompi_root[@]}" --oversubscribe -np "$n" --mca btl tcp,self \
        --mca btl_tcp_if_include lo "$build/compare/mpi_openmpi" "${sweep[@]}" > "$out/openmpi_${t}_$n"
      run_gloo "$n" > "$out/gloo_${t}_$n"
      join_table "AllReduce float32 busbw (GB/s), N=$n, TCP loopback" \
        "chorus_${t}_$n" "openmpi_${t}_$n" "gloo_${t}_$n"
    fi
    # 8-byte latency (out-of-place time, us) of each system.
    for f in "$out"/*_"${t}_$n"; do
      awk -v name="$(basename "$f")" '!/^#/ && $1 == 8 { printf "#   8-byte time %-16s %8s us\n", name, $6 }' "$f"
    done
    echo
  done
done
