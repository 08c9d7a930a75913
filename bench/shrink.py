#!/usr/bin/env python3
"""Communicator.shrink after a SIGKILL, and grow by one, against a fresh
chorus.init() of the same ranks measured in the same job.

shrink (--ranks N): each job of N ranks (chorus-run --elastic) warms up with
AllReduces, then rank N-1 kills itself (SIGKILL) while the others loop
AllReduces. Each survivor notes when its call raised and when its shrink()
returned; the figure is the time from the last survivor seeing the failure
to the last survivor returning from shrink. Then, from a barrier on the
shrunk communicator, the survivors make a fresh communicator of themselves
with chorus.init() through a new FileStore (abort + a warm init: the
processes are up, only the rendezvous and the set-up are timed), from the
first rank's start to the last rank's end.

grow (--grow N): each job of N ranks starts one more process, which calls
chorus.join(); once it waits there, the N ranks call comm.grow(1), timed
from the first member's start to the last rank's end, joiner included.
Then the N + 1 ranks make a fresh communicator with chorus.init() the same
way, for comparison.

Medians of --runs jobs; the ranks share the host's monotonic clock.

  PYTHONPATH=build/python /usr/bin/python3 bench/shrink.py --ranks 4 --transport shm
  PYTHONPATH=build/python /usr/bin/python3 bench/shrink.py --ranks 8 --transport shm
  PYTHONPATH=build/python /usr/bin/python3 bench/shrink.py --grow 3 --transport shm

On a testbed of H hosts (scripts/testbed up --name sb --hosts H), one rank
per host, tcp across (--ranks H, or --grow H for H members; the joiner then
runs on host 0):

  PYTHONPATH=build/python /usr/bin/python3 bench/shrink.py --ranks 8 --testbed sb
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

RANK = r"""
import os, signal, subprocess, sys, time
import numpy as np
import chorus

mode, scratch = sys.argv[1], sys.argv[2]
now = time.monotonic

def fresh(comm, name):
    comm.barrier()
    t0 = now()
    again = chorus.init(rank=comm.rank, world_size=comm.size, store=f"file://{scratch}/{name}")
    t1 = now()
    again.close()
    return t0, t1

def report(comm, times):
    got = comm.allgather(np.array(times, np.float64)).reshape(comm.size, len(times))
    return got

if mode == "shrink":
    comm = chorus.init()
    n, r = comm.size, comm.rank
    x = np.ones(1024, np.float32)
    for _ in range(10):
        comm.allreduce(x)
    comm.barrier()
    if r == n - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        while True:
            comm.allreduce(x)
    except chorus.Error:
        seen = now()
    new = comm.shrink()
    done = now()
    t0, t1 = fresh(new, "reinit")
    t = report(new, [seen, done, t0, t1])
    if new.rank == 0:
        shrink = t[:, 1].max() - t[:, 0].max()
        init = t[:, 3].max() - t[:, 2].min()
        print(f"SHRINK {n} {shrink * 1e3:.3f} {init * 1e3:.3f}", flush=True)
elif mode == "grow":
    comm = chorus.init()
    joiner = None
    if comm.rank == 0:
        env = dict(os.environ, CHORUS_JOIN_GENERATION="1")
        joiner = subprocess.Popen([sys.executable, "-c", sys.argv[3], "join", scratch, sys.argv[3]],
                                  env=env)
    time.sleep(2.0)  # the joiner is waiting in chorus.join()
    comm.barrier()
    t0 = now()
    grown = comm.grow(1)
    t1 = now()
    s0, s1 = fresh(grown, "fresh")
    t = report(grown, [t0, t1, s0, s1])
    if grown.rank == 0:
        members = comm.size
        grow = t[:, 1].max() - t[:members, 0].min()
        init = t[:, 3].max() - t[:, 2].min()
        print(f"GROW {members} {grow * 1e3:.3f} {init * 1e3:.3f}", flush=True)
        joiner.wait()
else:  # join
    grown = chorus.join()
    t1 = now()
    s0, s1 = fresh(grown, "fresh")
    report(grown, [float("inf"), t1, s0, s1])
"""


def job(args, mode, ranks):
    scratch = tempfile.mkdtemp(prefix="chorus-shrink-bench-")
    try:
        if args.testbed:
            testbed = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts",
                                   "testbed")
            cmd = [testbed, "run", "--name", args.testbed, "--ranks-per-host", "1", "--grace",
                   "60", "--"]
        else:
            cmd = [args.chorus_run, "-n", str(ranks), "--elastic"]
            if args.transport:
                cmd += ["--transport", args.transport]
        cmd += [sys.executable, "-c", RANK, mode, scratch, RANK]
        env = dict(os.environ)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        for line in proc.stdout.splitlines():
            parts = line.split("] ", 1)[-1].split()
            if parts and parts[0] in ("SHRINK", "GROW"):
                return float(parts[2]), float(parts[3])
        sys.exit(f"no result from the job:\n{proc.stdout}\n{proc.stderr}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--ranks", type=int, help="shrink: ranks of the job (one is killed)")
    which.add_argument("--grow", type=int, help="grow: members of the job (one joins)")
    parser.add_argument("--transport", choices=["shm", "tcp"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--chorus-run", default=os.path.join("build", "tools", "chorus-run"))
    parser.add_argument("--testbed", help="run each job on this testbed (scripts/testbed up "
                        "--hosts H, one rank per host; H must be --ranks or --grow) instead")
    args = parser.parse_args()
    mode, ranks = ("shrink", args.ranks) if args.ranks else ("grow", args.grow)
    results = [job(args, mode, ranks) for _ in range(args.runs)]
    ops = [r[0] for r in results]
    inits = [r[1] for r in results]
    what = (f"shrink of {ranks} after a SIGKILL" if mode == "shrink" else
            f"grow of {ranks} by one")
    where = f"testbed {args.testbed}" if args.testbed else (args.transport or "automatic")
    print(f"{what} ({where}), {args.runs} jobs:")
    print(f"  {mode:6s} median {statistics.median(ops):8.2f} ms  "
          f"(min {min(ops):.2f}, max {max(ops):.2f})")
    print(f"  init   median {statistics.median(inits):8.2f} ms  "
          f"(min {min(inits):.2f}, max {max(inits):.2f})  a fresh chorus.init() of the same ranks")
    print(f"  ratio  {statistics.median(inits) / statistics.median(ops):.1f}x")


if __name__ == "__main__":
    main()
