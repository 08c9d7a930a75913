#!/usr/bin/env python3
"""Communicator start-up time, with the calibration cache cold and warm.

Each run starts a fresh job of --ranks ranks (chorus-run) whose ranks time
chorus.init() (the communicator's creation: bootstrap, transport, the tuner's
model) and report rank 0's time. "cold" runs start with an empty cache
directory (XDG_CACHE_HOME), so creation calibrates and stores the model;
"warm" runs reuse it; "off" runs set CHORUS_TUNING_CACHE=off. Medians of
--reps jobs each.

  PYTHONPATH=build/python /usr/bin/python3 bench/startup.py --ranks 2 --transport shm
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

RANK = r"""
import time, chorus
t = time.perf_counter()
comm = chorus.init()
dt = time.perf_counter() - t
if comm.rank == 0:
    print(f"STARTUP {dt * 1e3:.3f}")
"""


def job(run, ranks, env):
    out = subprocess.run([run, "-n", str(ranks), sys.executable, "-c", RANK], env=env,
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "STARTUP" in line:
            return float(line.split()[-1])
    raise RuntimeError("no STARTUP line in: " + out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", default="build/tools/chorus-run")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--transport", default="shm")
    p.add_argument("--reps", type=int, default=5)
    o = p.parse_args()
    base = dict(os.environ, CHORUS_TRANSPORT=o.transport)
    base.pop("CHORUS_TUNING_FILE", None)
    res = {"cold": [], "warm": [], "off": []}
    for _ in range(o.reps):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(base, XDG_CACHE_HOME=cache)
            res["cold"].append(job(o.run, o.ranks, env))
            res["warm"].append(job(o.run, o.ranks, env))
        res["off"].append(job(o.run, o.ranks, dict(base, CHORUS_TUNING_CACHE="off")))
    print(f"# communicator creation, N={o.ranks}, {o.transport}: median (min-max) of {o.reps} jobs, ms")
    for k, v in res.items():
        print(f"{k:>5} {statistics.median(v):9.1f}  ({min(v):.1f}-{max(v):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
