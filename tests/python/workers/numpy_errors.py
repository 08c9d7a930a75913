"""Two ranks of the numpy binding's error tests (run under chorus-run -n 2).

Each case makes fresh communicators on both ranks and checks the class, the
code and the message of what each rank raises. Prints "numpy_errors OK" at
the end; any wrong outcome raises.
"""

import os
import sys

import numpy as np

import chorus
from expect import expect


def class_tree():
    for cls in [chorus.TimeoutError, chorus.PeerFailure, chorus.MismatchError,
                chorus.AbortedError, chorus.InvalidArgument]:
        assert issubclass(cls, chorus.Error), cls
    assert issubclass(chorus.InvalidArgument, ValueError)
    assert issubclass(chorus.Error, RuntimeError)
    assert chorus.TimeoutError is not TimeoutError


def invalid_arguments(comm):
    n, rank = comm.size, comm.rank
    x = np.zeros(8, np.float32)
    strided = np.zeros((4, 4), np.float32)[:, ::2]
    e = expect(chorus.InvalidArgument, lambda: comm.allreduce(strided), "allreduce: x", "not C-contiguous")
    assert isinstance(e, ValueError) and e.code == "invalid_argument", e
    expect(ValueError, lambda: comm.allgather(strided), "allgather: x", "not C-contiguous")
    for bad in [np.zeros(4, np.int16), np.zeros(4, np.complex64), np.zeros(4, bool)]:
        expect(chorus.InvalidArgument, lambda b=bad: comm.allreduce(b),
               f"dtype {bad.dtype}", "chorus does not support")
    expect(chorus.InvalidArgument, lambda: comm.allreduce(x, "xor"), "op 'xor'", "bxor")
    expect(chorus.InvalidArgument, lambda: comm.allreduce(x, "band"),
           "ReduceOp band applies to integer types only, not float32")
    expect(chorus.InvalidArgument, lambda: comm.allreduce(x, 3), "op must be a str")
    expect(chorus.InvalidArgument, lambda: comm.allreduce(x, out=np.zeros(8, np.float64)),
           "out has type float64")
    expect(chorus.InvalidArgument, lambda: comm.allreduce(x, out=np.zeros(9, np.float32)),
           "out has 9 elements")
    ro = np.zeros(8, np.float32)
    ro.setflags(write=False)
    expect(chorus.InvalidArgument, lambda: comm.allreduce(x, out=ro), "out is read-only")
    expect(chorus.InvalidArgument, lambda: comm.recv(ro, (rank + 1) % n), "x is read-only")
    expect(chorus.InvalidArgument, lambda: comm.allreduce([1.0, 2.0]), "buffer protocol")
    expect(chorus.InvalidArgument, lambda: comm.broadcast(x, root=n), f"root {n} outside")
    expect(chorus.InvalidArgument, lambda: comm.send(x, rank), "peer is this rank")
    expect(chorus.InvalidArgument, lambda: comm.send(x, n + 3), "peer outside")
    expect(chorus.InvalidArgument, lambda: comm.reduce_scatter(np.zeros(n * 3 + 1, np.int32)),
           "not a multiple of the communicator size")
    expect(chorus.InvalidArgument, lambda: comm.alltoall(np.float32(1)), "scalar")
    expect(chorus.InvalidArgument, lambda: comm.allreduce(x, timeout=-1), "timeout must be")
    expect(chorus.InvalidArgument, lambda: comm.allreduce(x, algorithm="no_such_algorithm"),
           "no_such_algorithm")
    expect(chorus.InvalidArgument, lambda: chorus.init(rank=0), "rank, world_size and store")
    # None of these broke the communicator.
    check = comm.allreduce(np.full(3, rank + 1, np.int32))
    assert (check == sum(range(1, n + 1))).all(), check


def mismatch(comm):
    # Rank 0 reduces 10 elements, rank 1 12: both learn that the ranks disagree.
    count = 10 if comm.rank == 0 else 12
    e = expect(chorus.MismatchError, lambda: comm.allreduce(np.ones(count, np.float32)))
    assert e.code == "mismatch"


def timeout(comm, sync):
    # A receive sends nothing: rank 1 is not given a message of this call,
    # so what reaches it is rank 0's failure alone.
    if comm.rank == 0:
        e = expect(chorus.TimeoutError, lambda: comm.recv(np.zeros(4), 1, timeout=0.5),
                   "rank 0", "recv from peer 1")
        assert e.code == "timeout"
        # The communicator is broken: later calls raise the same failure.
        expect(chorus.TimeoutError, lambda: comm.barrier())
        sync.barrier()
    else:
        # Rank 1 sends nothing; once rank 0 has given up (the barrier of the
        # other communicator says so), its failure reaches rank 1's next call.
        sync.barrier()
        e = expect(chorus.PeerFailure, lambda: comm.barrier(timeout=120), "rank 0")
        assert e.code == "peer_failure"


def collective_timeout(comm, sync):
    if comm.rank == 0:
        expect(chorus.TimeoutError, lambda: comm.allreduce(np.ones(4, np.float32), timeout=0.5),
               "rank 0", "allreduce")
    sync.barrier()  # rank 1 never joins the AllReduce


def abort(comm):
    if comm.rank == 0:
        comm.abort("stop for the test")
        expect(chorus.AbortedError, lambda: comm.barrier(), "stop for the test")
    else:
        e = expect(chorus.AbortedError, lambda: comm.allreduce(np.ones(4), timeout=120),
                   "rank 0", "stop for the test")
        assert e.code == "aborted"


def with_block_raises(rank):
    """An exception leaving a with-block aborts the communicator."""
    if rank == 0:
        try:
            with chorus.init() as comm:
                raise KeyError("boom in the block")
        except KeyError:
            pass
        else:
            raise AssertionError("the KeyError did not leave the with-block")
        expect(chorus.InvalidArgument, lambda: comm.barrier(), "closed")
        return

    def body():
        # The abort may reach rank 1 while its communicator still starts.
        with chorus.init() as comm:
            comm.allreduce(np.ones(4), timeout=120)

    expect(chorus.AbortedError, body, "raised KeyError", "boom in the block")


def work_wait_timeout(comm, sync):
    if comm.rank == 0:
        w = comm.recv(np.zeros(4, np.float32), 1, async_op=True)
        expect(chorus.TimeoutError, lambda: w.wait(timeout=0.3), "did not complete within")
        assert w.done()
        expect(chorus.AbortedError, lambda: w.wait())  # the call itself ended aborted
        expect(chorus.AbortedError, lambda: comm.barrier())
        sync.barrier()
    else:
        sync.barrier()
        expect(chorus.AbortedError, lambda: comm.barrier(timeout=120), "rank 0", "Work.wait")


def closed(comm):
    w = comm.allreduce(np.full(2, 1.0), async_op=True)
    comm.close()  # waits for w first
    assert (w.wait() == 2.0).all()
    expect(chorus.InvalidArgument, lambda: comm.allreduce(np.ones(2)), "closed")
    expect(chorus.InvalidArgument, lambda: comm.rank, "closed")
    comm.close()  # again: nothing


def peer_dies(comm):
    if comm.rank == 1:
        print("numpy_errors OK rank 1", flush=True)
        os._exit(0)  # leaves without a word, in the middle of the job
    e = expect(chorus.PeerFailure,
               lambda: comm.allreduce(np.ones(1 << 16, np.float32), timeout=120), "peer 1")
    print(f"rank 0 saw: {e}", flush=True)


def main():
    class_tree()
    with chorus.init() as comm:
        assert comm.size == 2, "run with -n 2"
        rank = comm.rank
        invalid_arguments(comm)
    sync = chorus.init()  # orders the cases' steps across the ranks
    for case in [mismatch, timeout, collective_timeout, abort, work_wait_timeout, closed]:
        comm = chorus.init()
        sync.barrier()  # both have their communicator: a failure now is the case's own
        if case in (timeout, collective_timeout, work_wait_timeout):
            case(comm, sync)
        else:
            case(comm)
        comm.close()
    with_block_raises(rank)
    comm = chorus.init()
    sync.barrier()
    peer_dies(comm)
    print(f"numpy_errors OK rank {rank}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
