#!/usr/bin/env bash
# Side-by-side Gather and Scatter: chorus-perf against Open MPI (MPI_Gather,
# MPI_Scatter) over shared memory, same N, sizes and dtype (float32, root 0),
# the two systems taking turns in each of -r rounds. Prints, per collective
# and size (the root's buffer of N blocks), each system's median
# out-of-place time (us) over the rounds and chorus's speed-up over Open MPI
# (MPI time / chorus time; >= 1: chorus is as fast or faster).
#
#   bench/compare/gather_scatter.sh [-n 4] [-b 64K] [-e 16M] [-f 4] [-i 50] [-r 5]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
n=4; minb=64K; maxb=16M; factor=4; iters=50; reps=5
while getopts "n:b:e:f:i:r:" opt; do
  case $opt in
    n) n=$OPTARG ;; b) minb=$OPTARG ;; e) maxb=$OPTARG ;; f) factor=$OPTARG ;;
    i) iters=$OPTARG ;; r) reps=$OPTARG ;; *) exit 2 ;;
  esac
done
build="${BUILD_DIR:-$root/build-compare}"
"$root/scripts/install-deps.sh" openmpi-bin libopenmpi-dev
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target chorus-perf >/dev/null
mkdir -p "$build/compare"
mpicxx.openmpi -O2 -std=c++20 -o "$build/compare/mpi_gather_scatter" "$here/mpi_gather_scatter.cc"
ompi_root=(); [ "$(id -u)" -eq 0 ] && ompi_root=(--allow-run-as-root)
sweep=(-b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w 5)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export XDG_CACHE_HOME="$out/cache"
for ((round = 1; round <= reps; round++)); do
  for c in gather scatter; do
    "$build/tools/chorus-perf" "$c" --ranks "$n" --transport shm "${sweep[@]}" > "$out/chorus.$c.$round"
    mpirun.openmpi "${ompi_root[@]}" --oversubscribe -np "$n" --mca btl vader,self \
      "$build/compare/mpi_gather_scatter" "$c" "${sweep[@]}" > "$out/mpi.$c.$round"
  done
done
python3 - "$out" "$reps" "$n" <<'PY'
import statistics, sys, glob
out, reps, n = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def rows(path):
    t = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        t[int(f[0])] = float(f[5]) if "chorus" in path else float(f[2])
    return t
print(f"Gather and Scatter, float32, root 0, N={n}, shared memory: median out-of-place time (us) over {reps} rounds")
print("| collective | size | chorus | Open MPI | Open MPI / chorus |")
print("|---|---|---|---|---|")
for c in ("gather", "scatter"):
    ch = [rows(f"{out}/chorus.{c}.{r}") for r in range(1, reps + 1)]
    mp = [rows(f"{out}/mpi.{c}.{r}") for r in range(1, reps + 1)]
    for size in sorted(ch[0]):
        a = statistics.median(x[size] for x in ch if size in x)
        b = statistics.median(x[size] for x in mp if size in x)
        print(f"| {c} | {size} | {a:.1f} | {b:.1f} | {b / a:.2f} |")
PY
