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

Ranks on one host (shm) can share memory: ``comm.empty(shape, dtype)`` is a
numpy array in a new window of the communicator (``comm.window(nbytes)``, a
chorus.Window, is the raw bytes), made by every rank together. A call whose x
and out both lie in windows reads the peers' data in place, without copies::

    g = comm.empty(1 << 20, np.float32)     # a collective: every rank, same shape
    g[:] = grad
    comm.allreduce(g, out=g)                # in place, read by the peers where it lies

Blocking calls release the GIL; Ctrl-C in one aborts the communicator and
raises KeyboardInterrupt. Errors are chorus.Error subclasses (TimeoutError,
PeerFailure, MismatchError, AbortedError, RevokedError, and InvalidArgument, which is also
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
    Plan,
    ReduceOp,
    RevokedError,
    TimeoutError,
    Window,
    Work,
    __version__,
    init,
    join,
)

__all__ = [
    "AbortedError",
    "Communicator",
    "Error",
    "InvalidArgument",
    "MismatchError",
    "PeerFailure",
    "Plan",
    "ReduceOp",
    "RevokedError",
    "TimeoutError",
    "Window",
    "Work",
    "init",
    "join",
]
