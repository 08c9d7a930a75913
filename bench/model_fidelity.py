#!/usr/bin/env python3
"""Model fidelity: how far the fitted machine model's prediction is from the
measured time of every algorithm, over sizes.

Fit and evaluation are separate runs at separate sizes:
  1. fit:      `chorus-perf --calibrate FILE` (thorough probes: ping-pongs at
               8 * 4^k bytes, kernels at 4K * 4^k) on its own job;
  2. evaluate: `chorus-perf COLL -a all` at 16 * 4^k bytes (the powers of two
               between the fit's), with CHORUS_TUNING_FILE=FILE, --reps times;
               per (size, algorithm) the median of the best (in or out of
               place) time against the row's predicted_us.
err% = (measured - predicted) / measured. Prints one row per size and
algorithm, then the median and 90th percentile of |err%|.

With --learn-runs K the model is the calibration cache's after learning
instead: a fresh XDG_CACHE_HOME, K jobs of `-a all` at 8 * 4^k bytes (each
row an observation that refits the model's corrections, tune/learner.h),
then the evaluation at 16 * 4^k with CHORUS_TUNER=model (the cached model,
corrections included, nothing more learned).

  bench/model_fidelity.py --ranks 2 --transport shm
  bench/model_fidelity.py --ranks 4 --transport tcp --collective allgather
  bench/model_fidelity.py --ranks 2 --transport shm -e 64M --learn-runs 2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from perf_json import perf_rows


def best_time(row):
    cells = [row[k]["time_us"] for k in ("out_of_place", "in_place") if row.get(k)]
    return min(cells)


def percentile(values, q):
    v = sorted(values)
    k = (len(v) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--perf", default="build/tools/chorus-perf")
    p.add_argument("--ranks", default="2")
    p.add_argument("--transport", default="shm")
    p.add_argument("--collective", default="allreduce")
    p.add_argument("-b", default="16")
    p.add_argument("-e", default="256M")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--min-time", default="5")
    p.add_argument("--tuning", help="use this fitted file instead of fitting a new one")
    p.add_argument("--json", help="also write the rows here")
    p.add_argument("--learn-runs", type=int, default=0,
                   help="evaluate the cache's model after this many learning jobs")
    o = p.parse_args()
    env = dict(os.environ)
    common = ["--ranks", o.ranks, "--transport", o.transport]
    tmp = None
    tuning = o.tuning
    if o.learn_runs:
        tmp = tempfile.TemporaryDirectory()
        env["XDG_CACHE_HOME"] = tmp.name
        env.pop("CHORUS_TUNING_FILE", None)
        learn = [o.collective, "-a", "all", "-b", "8", "-e", o.e, "-f", "4", "-c", "0", "-n", "10",
                 "-w", "2", "--min-time", o.min_time] + common
        for _ in range(o.learn_runs):
            perf_rows(o.perf, learn, dict(env, CHORUS_TUNER="learn"))
        env["CHORUS_TUNER"] = "model"
    elif not tuning:
        tmp = tempfile.TemporaryDirectory()
        tuning = os.path.join(tmp.name, "fit.json")
        subprocess.run([o.perf, o.collective, "--calibrate", tuning, "-b", "8", "-e", "8"] + common,
                       check=True, stdout=subprocess.DEVNULL, env=env)
    if tuning:
        env["CHORUS_TUNING_FILE"] = tuning
    args = [o.collective, "-a", "all", "-b", o.b, "-e", o.e, "-f", "4", "-c", "0", "-n", "10",
            "-w", "2", "--min-time", o.min_time] + common
    times, pred = {}, {}
    for _ in range(o.reps):
        for r in perf_rows(o.perf, args, env):
            key = (r["size_B"], r["algo"])
            times.setdefault(key, []).append(best_time(r))
            pred[key] = r["predicted_us"]
    source = (f"the cache's model after {o.learn_runs} learning jobs" if o.learn_runs else
              "fitted model of a separate calibration run")
    print(f"# {o.collective} float32, N={o.ranks}, {o.transport}; {source}; "
          f"medians of {o.reps} runs of -a all")
    print(f"{'size(B)':>12} {'algo':>20} {'meas(us)':>11} {'pred(us)':>11} {'err%':>7}")
    errs, rows = [], []
    for key in sorted(times):
        meas = statistics.median(times[key])
        err = 100 * (meas - pred[key]) / meas
        errs.append(abs(err))
        rows.append({"size_B": key[0], "algo": key[1], "measured_us": meas,
                     "predicted_us": pred[key], "err_pct": err})
        print(f"{key[0]:>12} {key[1]:>20} {meas:>11.2f} {pred[key]:>11.2f} {err:>7.1f}")
    print(f"# |err%| median {statistics.median(errs):.1f}, p90 {percentile(errs, 0.9):.1f} "
          f"over {len(errs)} rows")
    if o.json:
        json.dump({"ranks": int(o.ranks), "transport": o.transport, "collective": o.collective,
                   "rows": rows, "median_abs_err_pct": statistics.median(errs),
                   "p90_abs_err_pct": percentile(errs, 0.9)}, open(o.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
