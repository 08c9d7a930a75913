"""One rank of the numpy binding's grow test (run under chorus-run), or the
process that joins (argument "join").

The last rank kills itself (SIGKILL); the survivors shrink; rank 0 of the
shrunk communicator starts a new process of this script that calls
chorus.join() with CHORUS_JOIN_GENERATION=1, while the survivors call
comm.grow(1): the communicator is back at 4 ranks, the joiner last, and an
AllReduce on it is exact. Every rank of it prints "numpy_grow OK".
"""

import os
import signal
import subprocess
import sys

import numpy as np

import chorus
from refs import check_equal


def check(comm, me):
    assert comm.size == 4, comm.size
    got = [int(v) for v in comm.allgather(np.array([me], np.int32)).ravel()]
    assert got == [0, 1, 2, 3], got
    x = np.arange(5, dtype=np.float64) + me
    check_equal(comm.allreduce(x), sum(np.arange(5, dtype=np.float64) + r for r in range(4)),
                "allreduce after grow")
    print(f"numpy_grow OK rank {comm.rank}", flush=True)


def main():
    if sys.argv[1:] == ["join"]:
        check(chorus.join(), 3)
        return
    comm = chorus.init()
    n, r = comm.size, comm.rank
    x = np.ones(100, np.float32)
    if r == n - 1:
        comm.allreduce(x)
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        for _ in range(100):
            comm.allreduce(x)
    except chorus.Error:
        pass
    shrunk = comm.shrink()
    joiner = None
    if shrunk.rank == 0:
        env = dict(os.environ, CHORUS_JOIN_GENERATION="1")
        joiner = subprocess.Popen([sys.executable, __file__, "join"], env=env)
    grown = shrunk.grow(1)
    check(grown, r)
    if joiner is not None:
        assert joiner.wait(timeout=60) == 0, "the joiner failed"


if __name__ == "__main__":
    main()
