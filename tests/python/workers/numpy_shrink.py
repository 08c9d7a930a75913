"""One rank of the numpy binding's revoke and shrink test (run under chorus-run).

The last rank kills itself (SIGKILL) after two AllReduces; the survivors
catch the error, shrink, and check the new communicator (size, ranks in
order, an exact AllReduce). Then rank 0 of it revokes it while the others
wait for it in an AllReduce: every rank's call raises RevokedError, and a
second shrink keeps every rank. Each
survivor prints "numpy_shrink OK" at the end.
"""

import os
import signal
import time

import numpy as np

import chorus
from refs import check_equal


def check_new(comm, old_rank, members, what):
    assert comm.size == len(members), (what, comm.size, members)
    assert comm.rank == members.index(old_rank), (what, comm.rank, members)
    got = [int(v) for v in comm.allgather(np.array([old_rank], np.int32)).ravel()]
    assert got == members, (what, got, members)
    x = np.arange(7, dtype=np.float64) + old_rank
    check_equal(comm.allreduce(x), sum(np.arange(7, dtype=np.float64) + r for r in members),
                what + ": allreduce")


def main():
    comm = chorus.init()
    n, r = comm.size, comm.rank
    x = np.ones(1000, np.float32)
    if r == n - 1:
        comm.allreduce(x)
        comm.allreduce(x)
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        for _ in range(100):
            comm.allreduce(x)
        raise AssertionError("no call raised after the last rank was killed")
    except chorus.Error as e:
        assert isinstance(e, (chorus.PeerFailure, chorus.RevokedError)), repr(e)
    survivors = list(range(n - 1))
    shrunk = comm.shrink()
    check_new(shrunk, r, survivors, "shrink after a kill")

    # Rank 0 revokes once every other rank waits for it in an AllReduce (a
    # revoke cuts short the calls still in flight, a barrier's included).
    shrunk.barrier()
    if shrunk.rank == 0:
        time.sleep(0.3)
        shrunk.revoke()
    try:
        shrunk.allreduce(x)
        raise AssertionError("a call after the revoke returned")
    except chorus.RevokedError as e:
        assert "revoke" in str(e), str(e)
    again = shrunk.shrink(timeout=30)
    check_new(again, shrunk.rank, list(range(n - 1)), "shrink after a revoke")
    print(f"numpy_shrink OK rank {r}", flush=True)


if __name__ == "__main__":
    main()
