#!/usr/bin/env python3
"""Row stability between jobs: the same chorus-perf row in --jobs fresh jobs.

Each job is a new chorus-perf process (new ranks, new shared memory, a new
placement on the cores) that runs one size; the row's time is its mean over
-n calls, as chorus-perf prints it. Reports every job's time and max/min per
size and buffer kind: a bimodal row (fast in one job, several times slower in
the next) shows as a large max/min.

  /usr/bin/python3 bench/stability.py [--perf build/tools/chorus-perf] \
      [--ranks 2] [--transport shm] [--sizes 64K,8M] [--jobs 10] [--buffers user,window] \
      [--mpi build-compare/compare/mpi_openmpi]

With --mpi (bench/compare/mpi_allreduce.cc built with Open MPI's mpicxx, as
bench/compare/run.sh builds it), each job of chorus is followed by a job of
Open MPI at the same size (taking turns, over vader shared memory, or tcp
with --transport tcp), and its rows print as buffers "openmpi": where the
host itself is bimodal, Open MPI's max/min shows it.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_json import perf_rows  # noqa: E402


def mpi_time(a, size):
    """One Open MPI job at `size`: its out-of-place time (us), mean of --iters calls."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    btl = "tcp,self" if a.transport == "tcp" else "vader,self"
    out = subprocess.run(["mpirun.openmpi"] + root + ["--oversubscribe", "-np", str(a.ranks),
                          "--mca", "btl", btl, a.mpi, "-b", size, "-e", size, "-n", str(a.iters),
                          "-w", "10"], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if f and not line.startswith("#") and f[0].isdigit():
            return float(f[5])
    raise RuntimeError(f"no row in Open MPI's output:\n{out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--perf", default="build/tools/chorus-perf")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--transport", default="shm")
    ap.add_argument("--sizes", default="64K,8M")
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--buffers", default="user,window")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--algo", default="auto")
    ap.add_argument("--mpi", help="Open MPI build of bench/compare/mpi_allreduce.cc: its jobs "
                    "take turns with chorus's")
    a = ap.parse_args()
    sizes = a.sizes.split(",")
    kinds = a.buffers.split(",") + (["openmpi"] if a.mpi else [])
    times = {(s, k): [] for s in sizes for k in kinds}
    algos = {(s, k): set() for s in sizes for k in kinds}
    # Jobs interleave sizes and buffer kinds, so that a slow spell of the
    # host falls on all of them alike.
    for _ in range(a.jobs):
        for s in sizes:
            for k in kinds:
                if k == "openmpi":
                    times[(s, k)].append(mpi_time(a, s))
                    algos[(s, k)].add("openmpi")
                    continue
                rows = perf_rows(a.perf, ["allreduce", "--ranks", str(a.ranks), "--transport",
                                          a.transport, "-b", s, "-e", s, "-n", str(a.iters),
                                          "-w", "10", "-c", "0", "--buffers", k, "-a", a.algo])
                times[(s, k)].append(rows[0]["out_of_place"]["time_us"])
                algos[(s, k)].add(rows[0]["algo"])
    print(f"# allreduce float32 sum, N={a.ranks} {a.transport}, {a.jobs} jobs, "
          f"out of place, mean of {a.iters} calls per job (us)")
    print(f"{'size':>6} {'buffers':>8} {'algo':>22} {'min':>9} {'median':>9} {'max':>9} "
          f"{'max/min':>8}  every job")
    for s in sizes:
        for k in kinds:
            t = sorted(times[(s, k)])
            med = t[len(t) // 2]
            print(f"{s:>6} {k:>8} {','.join(sorted(algos[(s, k)])):>22} {t[0]:9.2f} {med:9.2f} "
                  f"{t[-1]:9.2f} {t[-1] / t[0]:8.2f}  "
                  + " ".join(f"{x:.1f}" for x in times[(s, k)]))


if __name__ == "__main__":
    main()
