"""chorus as a torch.distributed backend.

Importing this module registers the backend "chorus"::

    import torch.distributed as dist
    import chorus.torch  # noqa: F401

    dist.init_process_group("chorus")   # env:// (chorus-run, torchrun), file:// or tcp://
    dist.all_reduce(tensor)

The process group meets its peers through the store torch hands it and runs
every call on one chorus communicator: shared memory between the ranks of a
host, TCP across hosts. It takes contiguous or not CPU tensors of int8, uint8,
int32, int64, float16, bfloat16, float32 and float64 (data that is only moved,
not reduced, may have any dtype). Errors of chorus (timeouts, mismatches,
aborts) reach Python as chorus.Error subclasses, which are RuntimeErrors too.
docs/PYTHON.md lists the supported calls.
"""

import datetime

import torch.distributed as _dist

import chorus as _chorus  # noqa: F401  (the exception classes torch's calls raise)

from ._backend import ProcessGroupChorus

__all__ = ["ProcessGroupChorus", "BACKEND"]

BACKEND = "chorus"


def _create_process_group(store, rank, world_size, timeout):
    """Backend creator torch.distributed calls: (store, rank, world size, timeout)."""
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    return ProcessGroupChorus(store, rank, world_size, float(timeout))


if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, _create_process_group)
