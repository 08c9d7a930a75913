"""Errors of the torch backend (run under chorus-run -n 2; argument: a scratch directory).

Unsupported calls name what is unsupported; chorus's mismatch detection,
timeouts and abort reach Python as chorus.Error subclasses; destroying
process groups leaves no thread behind. Prints "torch_errors OK".
"""

import datetime
import os
import sys

import torch
import torch.distributed as dist

import chorus
import chorus.torch  # noqa: F401
from expect import expect


def unsupported(rank):
    t = torch.ones(4)
    # The bitwise ops reduce integers only.
    expect(chorus.InvalidArgument, lambda: dist.all_reduce(t, op=dist.ReduceOp.BAND),
           "ReduceOp band applies to integer types only, not float32")
    expect(chorus.InvalidArgument, lambda: dist.all_reduce(t, op=dist.ReduceOp.BXOR),
           "ReduceOp bxor applies to integer types only")
    # A tensor on another device (this torch has no CUDA; "meta" reaches the
    # backend in inference mode, where no autograd key stands in the way).
    with torch.inference_mode():
        meta = torch.empty(4, device="meta")
        expect(chorus.InvalidArgument, lambda: dist.all_reduce(meta),
               "all_reduce", "the tensor is on meta", "CPU tensors only")
    sparse = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([1.0, 2.0]), (4,))
    expect(chorus.InvalidArgument, lambda: dist.all_reduce(sparse, op=dist.ReduceOp.MAX),
           "sparse tensor is reduced with SUM only")
    expect(chorus.InvalidArgument, lambda: dist.broadcast(sparse, src=0), "a Sparse tensor",
           "dense (strided) tensors only")
    expect(chorus.InvalidArgument, lambda: dist.broadcast(torch.ones(4).to_mkldnn(), src=0),
           "a Mkldnn tensor")
    expect(chorus.InvalidArgument, lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)),
           "Short cannot be reduced")
    # torch itself sums complex tensors as pairs of floats: that works.
    z = torch.full((3,), complex(rank + 1, -rank), dtype=torch.complex64)
    dist.all_reduce(z)
    assert torch.equal(z, torch.full((3,), complex(3, -1), dtype=torch.complex64)), z
    expect(chorus.InvalidArgument, lambda: dist.reduce(torch.ones(4, dtype=torch.bool), dst=0),
           "Bool cannot be reduced")
    expect(chorus.InvalidArgument, lambda: dist.send(t, 1 - rank, tag=-3), "tag -3")
    expect(chorus.InvalidArgument,
           lambda: dist.all_to_all_single(torch.zeros(3), torch.zeros(3)), "multiple of the group size")
    # Nothing was sent: the group still works.
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((3,), 3.0)), t


def mismatch(rank):
    group = dist.new_group(backend="chorus")
    t = torch.ones(10 if rank == 0 else 12)
    e = expect(chorus.MismatchError, lambda: dist.all_reduce(t, group=group))
    assert e.code == "mismatch"


def tags(rank):
    """Tags that agree pass; a send and a recv with different tags raise mismatch on both."""
    group = dist.new_group(backend="chorus")
    t = torch.full((5,), float(rank + 1))
    if rank == 0:
        dist.send(t, 1, group=group, tag=7)
    else:
        dist.recv(t, 0, group=group, tag=7)
        assert torch.equal(t, torch.full((5,), 1.0)), t
    group = dist.new_group(backend="chorus")
    if rank == 0:
        # An eager send may complete before the receiver refuses it; the news
        # then fails this rank's next call on the group.
        try:
            dist.send(t, 1, group=group, tag=3)
            e = expect(chorus.MismatchError, lambda: dist.barrier(group=group), "tag")
        except chorus.MismatchError as err:
            e = err
    else:
        e = expect(chorus.MismatchError, lambda: dist.recv(t, 0, group=group, tag=5),
                   "tag 3", "tag 5")
    assert e.code == "mismatch"


def timeout(rank):
    group = dist.new_group(backend="chorus", timeout=datetime.timedelta(seconds=1))
    if rank == 0:
        e = expect(chorus.TimeoutError, lambda: dist.all_reduce(torch.ones(4), group=group),
                   "rank 0", "allreduce")
        assert e.code == "timeout"
        dist.barrier()
    else:
        dist.barrier()  # over the default group: rank 0 has timed out by now
        expect(chorus.PeerFailure, lambda: dist.all_reduce(torch.ones(4), group=group), "rank 0")


def abort(rank):
    group = dist.new_group(backend="chorus")
    if rank == 0:
        group.abort("stopped by the test")
        expect(chorus.AbortedError, lambda: dist.barrier(group=group), "stopped by the test")
    else:
        expect(chorus.AbortedError, lambda: dist.all_reduce(torch.ones(4), group=group),
               "rank 0", "stopped by the test")


def threads():
    return len(os.listdir("/proc/self/task"))


def destroy_frees(rank, world, scratch):
    """Creating and destroying the default group again and again leaves no thread."""
    counts = []
    for i in range(3):
        dist.init_process_group("chorus", init_method=f"file://{scratch}/round{i}", rank=rank,
                                world_size=world)
        t = torch.full((4,), float(rank))
        dist.all_reduce(t)
        assert torch.equal(t, torch.full((4,), 1.0))
        dist.destroy_process_group()
        counts.append(threads())
    assert counts[1] == counts[0] and counts[2] == counts[0], f"threads after each round: {counts}"


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    destroy_frees(rank, world, sys.argv[1])
    dist.init_process_group("chorus")
    assert dist.get_world_size() == 2, "run with -n 2"
    unsupported(rank)
    mismatch(rank)
    tags(rank)
    timeout(rank)
    abort(rank)
    dist.barrier()  # the default group is untouched by the others' failures
    dist.destroy_process_group()
    print(f"torch_errors OK rank {rank}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
