#!/usr/bin/env python3
"""Deterministic reductions against the default mode, side by side.

For each configuration (ranks, transport) and dtype, fresh chorus-perf jobs
alternate between the default mode and --deterministic, --rounds times; each
row's time is the job's out-of-place mean over -n calls, and the table shows
the median over rounds of each, their ratio, and for small sizes the
difference in microseconds. The default mode's row is its automatic pick
(the best it knows); the deterministic row is its automatic road (gather,
split:<algorithm>, or the integer pass's algorithm).

  /usr/bin/python3 bench/deterministic.py [--perf build/tools/chorus-perf] \
      [--configs 2:shm,4:shm,2:tcp] [--types float32,bfloat16] \
      [--small 8,4K] [--small-factor 8] [--large 1M,16M] [--large-factor 4] \
      [--rounds 3] [--iters 200]

Prints a markdown table (docs/PERFORMANCE.md, "Deterministic reductions").
Use a calibration cache of its own (XDG_CACHE_HOME) and run it alone.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_json import perf_rows  # noqa: E402


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--perf", default=os.path.join(here, "..", "build", "tools", "chorus-perf"))
    ap.add_argument("--configs", default="2:shm,4:shm,2:tcp")
    ap.add_argument("--types", default="float32,bfloat16")
    ap.add_argument("--small", default="8,4K", help="smallest and largest small size")
    ap.add_argument("--large", default="1M,16M", help="smallest and largest large size")
    ap.add_argument("--small-factor", default="8")
    ap.add_argument("--large-factor", default="4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=200)
    a = ap.parse_args()

    print("| ranks | transport | dtype | size | default (us) | pick | deterministic (us) | road | ratio | difference (us) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for config in a.configs.split(","):
        ranks, transport = config.split(":")
        for dtype in a.types.split(","):
            for lo, hi, factor, iters in [(*a.small.split(","), a.small_factor, a.iters),
                                          (*a.large.split(","), a.large_factor, max(10, a.iters // 10))]:
                times = {False: {}, True: {}}
                algos = {False: {}, True: {}}
                for _ in range(a.rounds):
                    for det in (False, True):
                        args = ["allreduce", "-b", lo, "-e", hi, "-f", factor, "--ranks", ranks,
                                "--transport", transport, "-d", dtype, "-n", str(iters), "-w", "10"]
                        if det:
                            args.append("--deterministic")
                        for row in perf_rows(a.perf, args):
                            times[det].setdefault(row["size_B"], []).append(row["out_of_place"]["time_us"])
                            algos[det].setdefault(row["size_B"], []).append(row["algo"])
                for size in sorted(times[False]):
                    d = statistics.median(times[False][size])
                    t = statistics.median(times[True][size])
                    pick = max(set(algos[False][size]), key=algos[False][size].count)
                    road = max(set(algos[True][size]), key=algos[True][size].count)
                    print(f"| {ranks} | {transport} | {dtype} | {size} | {d:.2f} | {pick} | {t:.2f} | {road} "
                          f"| {t / d:.2f} | {t - d:+.2f} |", flush=True)


if __name__ == "__main__":
    main()
