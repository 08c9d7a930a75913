#!/usr/bin/env bash
# Side-by-side AllReduce: chorus-perf against Open MPI, MPICH (shared memory)
# and Gloo, Open MPI over TCP (loopback), at the same N, sizes and dtype
# (float32 sum). Installs what is missing, builds, runs each system back to
# back, -r times over (the systems take turns in each round), and prints one
# table per (N, transport): size, each system's median out-of-place busbw
# (GB/s) over the rounds and chorus / best-peer, then the median 8-byte times.
# Over shm chorus runs twice, on ordinary buffers (chorus; what the
# comparison with MPI uses) and on buffers in shared windows (chorus_window,
# chorus-perf --buffers window), and STREAM copy on 2 threads is measured in
# the same run, for the share of the memory-traffic floor each reaches.
#
#   bench/compare/run.sh [-n "2 4"] [-t "shm tcp"] [-b 8] [-e 256M] [-f 4] [-i 20] [-r 3]
#
# The peers are not part of the test dependencies, so the main CMake build
# never builds them: this script compiles them with each MPI's own mpicxx.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ranks="2 4"; transports="shm tcp"; minb=8; maxb=256M; factor=4; iters=20; reps=3
while getopts "n:t:b:e:f:i:r:" opt; do
  case $opt in
    n) ranks=$OPTARG ;; t) transports=$OPTARG ;; b) minb=$OPTARG ;; e) maxb=$OPTARG ;;
    f) factor=$OPTARG ;; i) iters=$OPTARG ;; r) reps=$OPTARG ;; *) exit 2 ;;
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
g++ -O3 -march=native -std=c++20 -o "$build/compare/stream_copy" "$here/stream_copy.cc" -pthread

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

for n in $ranks; do
  for t in $transports; do
    echo "== N=$n transport=$t ==" >&2
    dir="$out/N${n}_$t"; rm -rf "$dir"; mkdir -p "$dir"
    for ((round = 1; round <= reps; round++)); do
      "$build/tools/chorus-perf" allreduce --ranks "$n" --transport "$t" "${sweep[@]}" \
        > "$dir/chorus.$round" || true
      if [ "$t" = shm ]; then
        "$build/tools/chorus-perf" allreduce --ranks "$n" --transport "$t" --buffers window \
          "${sweep[@]}" > "$dir/chorus_window.$round" || true
        mpirun.openmpi "${ompi_root[@]}" --oversubscribe -np "$n" --mca btl vader,self \
          "$build/compare/mpi_openmpi" "${sweep[@]}" > "$dir/openmpi.$round"
        mpirun.mpich -np "$n" "$build/compare/mpi_mpich" "${sweep[@]}" > "$dir/mpich.$round"
      else
        mpirun.openmpi "${ompi_root[@]}" --oversubscribe -np "$n" --mca btl tcp,self \
          --mca btl_tcp_if_include lo "$build/compare/mpi_openmpi" "${sweep[@]}" > "$dir/openmpi.$round"
        run_gloo "$n" > "$dir/gloo.$round"
      fi
    done
    if [ "$t" = shm ]; then
      copy=$("$build/compare/stream_copy" --threads 2 | sed -n 's/.*best \([0-9.]*\) GB.*/\1/p')
      python3 "$here/join.py" --stream "$copy" "AllReduce float32 busbw (GB/s), N=$n, shared memory" \
        "$dir" "$n" chorus chorus_window openmpi mpich
    else
      python3 "$here/join.py" "AllReduce float32 busbw (GB/s), N=$n, TCP loopback" "$dir" "$n" chorus openmpi gloo
    fi
    echo
  done
done
