#!/usr/bin/env python3
"""Tuner regret: how much slower chorus's default pick is than the best algorithm.

Each trial starts from an empty calibration cache (a fresh XDG_CACHE_HOME) and
runs, in that cache:
  job 1       `chorus-perf -a auto`: calibrates, and the learner
              (CHORUS_TUNER=learn, the default) learns each size's class;
  jobs 2..J   `chorus-perf -a auto` again: the picks a user's later jobs get
              (the `algo` of each row: the class's decision);
  -a all      every algorithm at every size, --reps times.
regret = median time of the pick / best median time, both from the trial's
`-a all` runs, so that run-to-run noise does not enter the ratio; a row's
regret is the median over the trials. Out-of-place times.

With --first-calls C, job 1 runs -w 0 -n C (no warm-up: every call of the
class counts, exploration included), and the script also prints job 1's
total time over C calls per size against the best fixed choice per size:
that algorithm (the best of the -a all medians) named in a job of its own
with the same -w 0 -n C, which pays its own first calls too. What the first
job paid for learning.

  bench/tuner_regret.py --ranks 2 --transport shm
  bench/tuner_regret.py --ranks 4 --transport shm --trials 3 --jobs 3
  bench/tuner_regret.py --ranks 2 --transport shm --first-calls 1000 -e 64M
  bench/tuner_regret.py --launcher "scripts/testbed run --name tb --" ...  # on the testbed
  bench/tuner_regret.py --tuner model ...   # the model's picks, nothing learned
  bench/tuner_regret.py --hog 2 ...         # job 1 (and its cache) beside 2 CPU hogs
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

from perf_json import perf_rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--perf", default="build/tools/chorus-perf")
    p.add_argument("--launcher", default="",
                   help="command prefix that starts chorus-perf (e.g. the testbed's run)")
    p.add_argument("--ranks", default="2")
    p.add_argument("--transport", default="shm")
    p.add_argument("-b", default="8")
    p.add_argument("-e", default="64M")
    p.add_argument("-f", default="4")
    p.add_argument("-n", default="20")
    p.add_argument("--reps", type=int, default=2, help="-a all runs per trial")
    p.add_argument("--trials", type=int, default=3, help="fresh caches; rows are their medians")
    p.add_argument("--jobs", type=int, default=3, help="-a auto jobs per trial (job 1 learns)")
    p.add_argument("--first-calls", type=int, default=0,
                   help="job 1 runs -w 0 -n this many calls; prints its total against the best")
    p.add_argument("--min-time", default="5",
                   help="chorus-perf --min-time (ms): small rows are timed this long")
    p.add_argument("--tuner", default="learn", help="CHORUS_TUNER of the -a auto jobs")
    p.add_argument("--hog", type=int, default=0,
                   help="job 1 runs beside this many CPU-bound processes (a cache written "
                        "under load); the later jobs run on the quiet host")
    p.add_argument("--tuning", help="calibrate into this tuning file first (chorus-perf "
                   "--calibrate) and give it to the -a auto jobs (CHORUS_TUNING_FILE)")
    p.add_argument("--cold-cache", action="store_true",
                   help="(every trial starts from an empty cache; kept for older commands)")
    o = p.parse_args()
    perf = shlex.split(o.launcher) + [o.perf] if o.launcher else [o.perf]
    # --ranks 0: the launcher starts the ranks (the testbed's run), no --ranks/--transport.
    common = ["allreduce"] + (["--ranks", o.ranks, "--transport", o.transport]
                              if o.ranks != "0" else []) + [
        "-b", o.b, "-e", o.e, "-f", o.f, "-c", "0"]
    timed = ["-n", o.n, "-w", "3", "--min-time", o.min_time]
    first = (["-n", str(o.first_calls), "-w", "0", "--min-time", "0"] if o.first_calls else timed)
    if o.tuning:
        subprocess.run(perf + common + ["--calibrate", o.tuning] + timed, check=True,
                       stdout=subprocess.DEVNULL)

    regrets = {}   # (size, job) -> [regret per trial]
    picks = {}     # (size, job) -> [pick per trial]
    best_of = {}   # size -> [best algorithm per trial]
    first_ratio = {}  # size -> [job 1 time / best time]
    totals = []    # per trial: (job 1 total, best total)
    for trial in range(o.trials):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, XDG_CACHE_HOME=cache, CHORUS_TUNER=o.tuner)
            env.pop("CHORUS_ALGO", None)
            env.pop("CHORUS_TUNING_FILE", None)
            auto_env = dict(env, CHORUS_TUNING_FILE=o.tuning) if o.tuning else env
            jobs = []
            for j in range(o.jobs):
                hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"])
                        for _ in range(o.hog if j == 0 else 0)]
                try:
                    jobs.append(perf_rows(perf[0], perf[1:] + common + ["-a", "auto"] +
                                          (first if j == 0 else timed), auto_env))
                finally:
                    for h in hogs:
                        h.kill()
                        h.wait()
            times = {}
            for _ in range(o.reps):
                for r in perf_rows(perf[0], perf[1:] + common + ["-a", "all"] + timed, env):
                    times.setdefault((r["size_B"], r["algo"]), []).append(
                        r["out_of_place"]["time_us"])
        t_first = t_best = 0.0
        fixed = {}  # size -> the best algorithm's time in a job like job 1
        if o.first_calls:
            with tempfile.TemporaryDirectory() as cache2:
                env2 = dict(os.environ, XDG_CACHE_HOME=cache2, CHORUS_TUNER=o.tuner)
                for size in sorted({s for s, _ in times}):
                    med = {a: statistics.median(t) for (s, a), t in times.items() if s == size}
                    best = min(med, key=med.get)
                    one = list(common)
                    one[one.index("-b") + 1] = one[one.index("-e") + 1] = str(size)
                    rows = perf_rows(perf[0], perf[1:] + one + ["-a", best] + first, env2)
                    fixed[size] = rows[0]["out_of_place"]["time_us"]
        for size in sorted({s for s, _ in times}):
            med = {a: statistics.median(t) for (s, a), t in times.items() if s == size}
            best = min(med, key=med.get)
            best_of.setdefault(size, []).append(best)
            for j, rows in enumerate(jobs):
                row = next(r for r in rows if r["size_B"] == size)
                if j == 0:
                    base = fixed.get(size, med[best])
                    first_ratio.setdefault(size, []).append(row["out_of_place"]["time_us"] / base)
                    t_first += row["out_of_place"]["time_us"]
                    t_best += base
                    continue
                pick = row["algo"]
                picks.setdefault((size, j + 1), []).append(pick)
                # A pick -a all does not run (none should be) counts as unmeasured.
                regrets.setdefault((size, j + 1), []).append(
                    med[pick] / med[best] if pick in med else float("nan"))
        totals.append((t_first, t_best))
        print(f"# trial {trial + 1} of {o.trials} done", file=sys.stderr)

    later = list(range(2, o.jobs + 1))
    where = f"N={o.ranks}, {o.transport}" if o.ranks != "0" else f"ranks of {o.launcher!r}"
    print(f"# allreduce float32, {where}, CHORUS_TUNER={o.tuner}; "
          f"{o.trials} trials from an empty cache; regret of jobs {later} "
          f"(median over trials), times from {o.reps} runs of -a all per trial")
    head = f"{'size(B)':>12} {'best':>20}"
    for j in later:
        head += f" {'pick job ' + str(j):>22} {'regret':>7}"
    if o.first_calls:
        head += f" {'job1/best':>10}"
    print(head)
    worst = 0.0
    for size in sorted(best_of):
        line = f"{size:>12} {statistics.mode(best_of[size]):>20}"
        for j in later:
            r = statistics.median(regrets[(size, j)])
            worst = max(worst, r)
            line += f" {statistics.mode(picks[(size, j)]):>22} {r:>7.2f}"
        if o.first_calls:
            line += f" {statistics.median(first_ratio[size]):>10.2f}"
        print(line)
    print(f"# worst regret (jobs {later}): {worst:.2f}")
    if o.first_calls:
        ratios = [f / b for f, b in totals]
        print(f"# job 1 ({o.first_calls} calls per size, no warm-up): total time / best fixed "
              f"choices = {statistics.median(ratios):.3f} (median of {len(ratios)} trials; "
              f"each: {', '.join(f'{r:.3f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
