#!/usr/bin/env python3
"""Communicator.split against a fresh chorus.init() of the same group.

Each job of --ranks ranks (chorus-run) makes its communicator with
chorus.init() (a rendezvous through the job's store), timed on each rank;
the figure is the fastest rank's, the last to arrive, which waited for
nobody (a second chorus.init() in the same job cannot be timed from a
barrier: with a tcp:// store rank 0 already serves the store's port). Then
it times, from a barrier to its end on every rank, comm.split(0) (the whole
group again) and comm.split(rank % 2) (two halves); those figures are the
slowest rank's.
With --cache warm (the default) the calibration cache is warmed by a first
job and kept, so that every communicator's tuner model comes from it (on a
busy host a model is stored as provisional and measured again); with
--cache off (CHORUS_TUNING_CACHE=off) no communicator calibrates, which
times the set-up alone. Medians of --reps jobs.

  PYTHONPATH=build/python /usr/bin/python3 bench/split_time.py --ranks 8 --transport shm

On a testbed made with scripts/testbed up (hosts x --ranks-per-host ranks,
shm inside a host, tcp across), --testbed NAME runs each job through
`scripts/testbed run` instead of chorus-run (--transport is then left to
the job):

  scripts/testbed up --name sp --hosts 4 --rate 500mbit
  PYTHONPATH=build/python /usr/bin/python3 bench/split_time.py --testbed sp --ranks-per-host 2
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

RANK = r"""
import time
import numpy as np
import chorus

def timed(comm, make):
    comm.barrier()
    t = time.perf_counter()
    made = make()
    dt = np.array([time.perf_counter() - t])
    return made, comm.allreduce(dt, "max")[0]

t = time.perf_counter()
comm = chorus.init()
t_init = comm.allreduce(np.array([time.perf_counter() - t]), "min")[0]
whole, t_whole = timed(comm, lambda: comm.split(0, key=comm.rank))
halves, t_halves = timed(comm, lambda: comm.split(comm.rank % 2, key=comm.rank))
assert whole.size == comm.size and halves.size in (comm.size // 2, comm.size - comm.size // 2)
if comm.rank == 0:
    print(f"SIZE {comm.size} TIMES {t_init * 1e3:.3f} {t_whole * 1e3:.3f} {t_halves * 1e3:.3f}")
"""


def job(launch, env):
    out = subprocess.run(launch + [sys.executable, "-c", RANK], env=env,
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "TIMES" in line:
            return [float(v) for v in line.split("TIMES")[1].split()]
    raise RuntimeError("no TIMES line in: " + out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", default="build/tools/chorus-run")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--transport", default="shm")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--cache", choices=["warm", "off"], default="warm")
    p.add_argument("--testbed", help="run on this testbed (scripts/testbed) instead")
    p.add_argument("--ranks-per-host", type=int, default=2)
    o = p.parse_args()
    if o.testbed:
        testbed = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "testbed")
        launch = [testbed, "run", "--name", o.testbed, "--ranks-per-host", str(o.ranks_per_host),
                  "--"]
        where = f"testbed {o.testbed}, {o.ranks_per_host} ranks per host"
    else:
        launch = [o.run, "-n", str(o.ranks)]
        where = f"N={o.ranks}, {o.transport}"
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, XDG_CACHE_HOME=cache)
        if not o.testbed:
            env["CHORUS_TRANSPORT"] = o.transport
        env.pop("CHORUS_TUNING_FILE", None)
        if o.cache == "off":
            env["CHORUS_TUNING_CACHE"] = "off"
        job(launch, env)  # warms the cache for every shape
        rows = [job(launch, env) for _ in range(o.reps)]
    names = ["chorus.init(), last to arrive", "split(0): the whole group",
             "split(rank % 2): halves"]
    print(f"# {where}, cache {o.cache}: median (min-max) of {o.reps} jobs, ms")
    for i, name in enumerate(names):
        v = [r[i] for r in rows]
        print(f"{name:>30} {statistics.median(v):8.1f}  ({min(v):.1f}-{max(v):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
