#!/usr/bin/env python3
"""Tuner regret: how much slower the tuner's pick is than the best algorithm.

For each size, the tuner's pick comes from `chorus-perf -a auto`; the times of
every algorithm come from `chorus-perf -a all`, repeated --reps times (median
per size and algorithm). regret = median time of the pick / best median time,
both taken from the same `-a all` runs, so that run-to-run noise does not
enter the ratio. Out-of-place times.

  bench/tuner_regret.py --perf build/tools/chorus-perf --ranks 2 --transport shm
  bench/tuner_regret.py ... --tuning /tmp/shm2.json   # calibrate first, then measure

With --tuning FILE, `chorus-perf --calibrate FILE` runs first (a separate
sweep), and the -a auto run reads FILE through CHORUS_TUNING_FILE. Without
it the picks come from the fitted model of the calibration cache; with
--cold-cache that cache starts empty (a fresh XDG_CACHE_HOME), so the -a auto
run calibrates first, as a user's first job does, and the start-up that
calibration took is printed.
"""
import os
import argparse
import statistics
import subprocess
import sys
import tempfile

from perf_json import perf_rows


def run(perf, args, algo, env=None):
    return perf_rows(perf, ["allreduce", "-a", algo] + args, env)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--perf", default="build/tools/chorus-perf")
    p.add_argument("--ranks", default="2")
    p.add_argument("--transport", default="shm")
    p.add_argument("-b", default="8")
    p.add_argument("-e", default="256M")
    p.add_argument("-f", default="8")
    p.add_argument("-n", default="20")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--min-time", default="5",
                   help="chorus-perf --min-time (ms): small rows are timed this long")
    p.add_argument("--tuning", help="calibrate into this tuning file first, then use it")
    p.add_argument("--cold-cache", action="store_true",
                   help="start the -a auto run with an empty calibration cache")
    o = p.parse_args()
    args = ["--ranks", o.ranks, "--transport", o.transport, "-b", o.b, "-e", o.e, "-f", o.f,
            "-n", o.n, "-w", "3", "-c", "0", "--min-time", o.min_time]
    env = dict(os.environ)
    if o.tuning:
        subprocess.run([o.perf, "allreduce", "--calibrate", o.tuning] + args, check=True,
                       stdout=subprocess.DEVNULL)
        env["CHORUS_TUNING_FILE"] = o.tuning
    cache = None
    if o.cold_cache and not o.tuning:
        cache = tempfile.TemporaryDirectory()
        env["XDG_CACHE_HOME"] = cache.name
    picks = {r["size_B"]: r["algo"] for r in run(o.perf, args, "auto", env)}
    times = {}
    for _ in range(o.reps):
        for r in run(o.perf, args, "all"):
            times.setdefault((r["size_B"], r["algo"]), []).append(r["out_of_place"]["time_us"])
    source = (f"{o.tuning}" if o.tuning else
              "the fitted model of a cold calibration cache" if o.cold_cache else
              "the fitted model of the calibration cache")
    print(f"# allreduce float32, N={o.ranks}, {o.transport}; picks from {source}; "
          f"medians of {o.reps} runs of -a all")
    print(f"{'size(B)':>12} {'pick':>20} {'best':>20} {'pick(us)':>10} {'best(us)':>10} {'regret':>7}")
    worst = 0.0
    for size in sorted(picks):
        med = {a: statistics.median(t) for (s, a), t in times.items() if s == size}
        best = min(med, key=med.get)
        pick = picks[size]
        regret = med[pick] / med[best]
        worst = max(worst, regret)
        print(f"{size:>12} {pick:>20} {best:>20} {med[pick]:>10.2f} {med[best]:>10.2f} {regret:>7.2f}")
    print(f"# worst regret {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
