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

``chorus.torch.empty`` makes tensors in shared windows: calls whose tensors
all lie in windows read the peers' data in place, without the copies that
ordinary tensors need (ranks of one host, over shared memory)::

    grad = chorus.torch.empty(1 << 20)  # float32, in a window of the default group
    grad.copy_(local)
    dist.all_reduce(grad)

docs/PYTHON.md lists the supported calls.
"""

import datetime
import inspect as _inspect
import operator as _operator

import torch as _torch
import torch.distributed as _dist

import chorus as _chorus  # noqa: F401  (the exception classes torch's calls raise)

try:
    from ._backend import ProcessGroupChorus
except ModuleNotFoundError as e:
    if e.name != __name__ + "._backend":
        raise
    raise ImportError(
        "chorus.torch: this chorus was built without its torch backend (torch was not found "
        "when it was built; CHORUS_BUILD_TORCH). Build and install chorus again with torch "
        "present: pip install --no-build-isolation . (docs/PYTHON.md)") from None

__all__ = ["ProcessGroupChorus", "BACKEND", "empty", "shrink_default_group"]

BACKEND = "chorus"


def _ranks_of_new_group():
    """The global ranks of the sub-group torch is making now, or None for the
    default group. torch (1.13) hands a backend's creator only the group's
    store, rank and size; the ranks are the argument global_ranks_in_group
    of its _new_process_group_helper, the caller of the creator."""
    frame = _inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_name == "_new_process_group_helper":
                ranks = frame.f_locals.get("global_ranks_in_group")
                return list(ranks) if ranks else None
            frame = frame.f_back
        return None
    finally:
        del frame


# A group made already, that the next default group adopts (shrink_default_group).
_adopt = None


def _create_process_group(store, rank, world_size, timeout):
    """Backend creator torch.distributed calls: (store, rank, world size, timeout).

    A sub-group (dist.new_group) of a default group that is chorus's is
    derived from the default group's communicator: its members meet through
    it, with no second rendezvous and no keys in the store. Otherwise the
    group meets its peers through `store`."""
    global _adopt
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    ranks = _ranks_of_new_group()
    if ranks is None and _adopt is not None:
        adopted, _adopt = _adopt, None
        if adopted.rank() == rank and adopted.size() == world_size:
            return adopted
    if ranks is not None and _dist.is_initialized():
        default = _dist.distributed_c10d._get_default_group()
        if isinstance(default, ProcessGroupChorus) and len(ranks) == world_size \
                and ranks.index(default.rank()) == rank:
            return default.new_group(ranks, float(timeout))
    return ProcessGroupChorus(store, rank, world_size, float(timeout))


def empty(*size, dtype=None, group=None):
    """A CPU tensor of `size` (as torch.empty: ints or one sequence) and `dtype`
    (default: torch.get_default_dtype()) in a new shared window of the
    communicator of `group`, a chorus process group (default: the default
    group). A collective: every rank of the group calls it with the same size
    and dtype, in the same order as its other calls. The window lives as long
    as the tensor's storage (views and slices included). Calls whose tensors
    all lie in windows read the peers' data in place; over tcp the call
    raises chorus.InvalidArgument. Fill it before use: its contents are not
    defined."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, _torch.Size)):
        size = tuple(size[0])
    if dtype is None:
        dtype = _torch.get_default_dtype()
    pg = _dist.distributed_c10d._get_default_group() if group is None else group
    if not isinstance(pg, ProcessGroupChorus):
        try:
            backend = f"backend {_dist.get_backend(pg)!r}"
        except (RuntimeError, ValueError):
            backend = type(pg).__name__
        error = _chorus.InvalidArgument(
            f"chorus.torch.empty: the group is not a chorus process group ({backend}); "
            f"pass group= a group made with backend=\"chorus\"")
        error.code = "invalid_argument"
        raise error
    return pg.empty([_operator.index(s) for s in size], dtype)


def shrink_default_group(timeout=None, host="127.0.0.1", port=None):
    """After a failure of the default group (a chorus group), on every live rank:
    makes a new default group of the ranks that did not fail, ranked in the
    order of their ranks before, and returns it. The recipe torch 1.13 allows:

    1. ``shrink()`` of the default group's communicator: the survivors agree
       on who is left, without any store (docs/RELIABILITY.md);
    2. its rank 0 picks a port for a new torch store at `host` (an address of
       its own that every survivor reaches; 127.0.0.1 on one host) and sends
       it to the others over the new group;
    3. ``dist.destroy_process_group()`` and ``dist.init_process_group("chorus",
       init_method="tcp://host:port", ...)``, whose backend creator adopts the
       group made in step 1 instead of meeting again; torch's store serves
       only its own start-up barrier.

    Groups made from the old default group (new_group) are broken with it;
    make them again from the new one. `timeout` (seconds; None:
    CHORUS_TIMEOUT) bounds the shrink and the new start-up."""
    global _adopt
    import socket

    old = _dist.distributed_c10d._get_default_group()
    if not isinstance(old, ProcessGroupChorus):
        error = _chorus.InvalidArgument(
            "chorus.torch.shrink_default_group: the default group is not a chorus group")
        error.code = "invalid_argument"
        raise error
    new = old.shrink(0.0 if timeout is None else float(timeout))
    del old
    where = _torch.zeros(1, dtype=_torch.int64)
    if new.rank() == 0:
        if port is None:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((host, 0))
                port = s.getsockname()[1]
        where[0] = port
    new.broadcast([where]).wait()
    _dist.destroy_process_group()
    _adopt = new
    kwargs = {} if timeout is None else {"timeout": datetime.timedelta(seconds=timeout)}
    try:
        _dist.init_process_group(BACKEND, init_method=f"tcp://{host}:{int(where[0])}",
                                 rank=new.rank(), world_size=new.size(), **kwargs)
    finally:
        _adopt = None
    return _dist.distributed_c10d._get_default_group()


if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, _create_process_group)
