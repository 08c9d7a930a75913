"""chorus: collective communication among N ranks, from Python.

One process per rank; start them with ``chorus-run -n 4 /usr/bin/python3 script.py``
(or torchrun, mpirun, srun) and let each build its communicator from the
environment::

    import numpy as np
    import chorus

    with chorus.init() as comm:
        grad = np.full(1 << 20, comm.rank + 1, dtype=np.float32)
        comm.allreduce(grad, out=grad)                  # in place: 1 + 2 + ... + size
        rows = comm.allgather(np.arange(3))             # shape (comm.size, 3)
        work = comm.allreduce(grad, op="avg", async_op=True)
        mean = work.wait()

Buffers are any C-contiguous buffer (numpy arrays, memoryviews, bytearrays)
of int8, uint8, int32, uint32, int64, uint64, float16, float32 or float64.
Blocking calls release the GIL; Ctrl-C in one aborts the communicator and
raises KeyboardInterrupt. Errors are chorus.Error subclasses (TimeoutError,
PeerFailure, MismatchError, AbortedError, and InvalidArgument, which is also
a ValueError). ``import chorus.torch`` registers the "chorus" backend of
torch.distributed. docs/PYTHON.md has the details.
"""

from ._chorus import (  # noqa: F401
    AbortedError,
    Communicator,
    Error,
    InvalidArgument,
    MismatchError,
    PeerFailure,
    ReduceOp,
    TimeoutError,
    Work,
    __version__,
    init,
)

__all__ = [
    "AbortedError",
    "Communicator",
    "Error",
    "InvalidArgument",
    "MismatchError",
    "PeerFailure",
    "ReduceOp",
    "TimeoutError",
    "Work",
    "init",
]
