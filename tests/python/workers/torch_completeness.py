"""torch calls that gloo serves, over chorus and over gloo side by side (run
under chorus-run, N = 4). The default group is chorus's; gloo groups of the
same ranks are made with new_group(backend="gloo").

    all_reduce_coalesced  SUM, PRODUCT, MIN and MAX, float32 and int64, on the
                          default group and on the sub-group [0, 2]
    all_gather_coalesced  several tensors, an empty one and complex ones
    monitored_barrier     the process group's method: passes when every rank
                          calls it; rank 0 names the rank that did not come
                          (every missing rank with wait_all_ranks=True);
                          a zero timeout raises at once on rank 0
    all_reduce (sparse)   sparse COO tensors with different non-zeros per rank
    recv without src      rank 0 receives from whichever rank sends first and
                          learns the sender (recvAnysource)

Prints "torch_completeness OK" at the end.
"""

import datetime
import sys

import torch
import torch.distributed as dist

import chorus.torch

OPS = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]


def same(a, b, what):
    assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), f"{what}: {a} != {b}"


def coalesced(rank, chorus_group, gloo_group, what):
    for dtype in (torch.float32, torch.int64):
        for op in OPS:
            base = [torch.arange(5) % 3 + 1 + rank, torch.arange(12).reshape(3, 4) % 2 + rank]
            mine = [t.to(dtype) for t in base]
            theirs = [t.clone() for t in mine]
            dist.all_reduce_coalesced(mine, op=op, group=chorus_group)
            dist.all_reduce_coalesced(theirs, op=op, group=gloo_group)
            for a, b in zip(mine, theirs):
                same(a, b, f"all_reduce_coalesced {op} {dtype} {what}")


def gather_coalesced(rank, n, chorus_group, gloo_group):
    # torch wants one dtype per call: floats with an empty tensor, then
    # complex tensors (which torch passes on as real views).
    lists = [[torch.full((3,), float(rank)), torch.zeros(0), torch.arange(4.0) * rank],
             [torch.tensor([rank + 1j, 2 * rank - 1j], dtype=torch.complex64),
              torch.zeros(0, dtype=torch.complex64),
              torch.arange(6.0).to(torch.complex64).reshape(2, 3) * (rank + 1j)]]
    for inputs in lists:
        results = []
        for group in (chorus_group, gloo_group):
            outputs = [[torch.empty_like(t) for t in inputs] for _ in range(n)]
            dist.all_gather_coalesced(outputs, inputs, group=group)
            results.append(outputs)
        for r in range(n):
            for i in range(len(inputs)):
                same(results[0][r][i], results[1][r][i],
                     f"all_gather_coalesced {inputs[i].dtype} [{r}][{i}]")
        # Rank 2's first tensor, as rank 2 made it.
        want = torch.full((3,), 2.0) if inputs is lists[0] else torch.tensor([2 + 1j, 4 - 1j])
        same(results[0][2][0], want, f"all_gather_coalesced {inputs[0].dtype} of rank 2")


def monitored(rank, n):
    pg = dist.distributed_c10d._get_default_group()
    pg.monitored_barrier(datetime.timedelta(seconds=60))
    pg.monitored_barrier(datetime.timedelta(seconds=60), wait_all_ranks=True)
    # Ranks that do not come: rank 0 names them, over chorus and over gloo.
    short = datetime.timedelta(seconds=2)
    for backend in ("chorus", "gloo"):
        for wait_all, absent in ((False, [3]), (True, [2, 3])):
            group = dist.new_group(backend=backend, timeout=short)
            if rank in absent:
                continue
            try:
                group.monitored_barrier(short, wait_all_ranks=wait_all)
            except RuntimeError as e:
                text = str(e)
                if rank == 0:
                    named = ", ".join(map(str, absent)) if wait_all else str(absent[0])
                    assert f"{named} failed to pass monitoredBarrier" in text, (backend, text)
                continue
            raise AssertionError(f"{backend}: monitored_barrier passed on rank {rank} "
                                 f"without ranks {absent}")
    # A zero timeout has passed already: rank 0, alone in the call, raises
    # at once naming itself and the first missing rank, as gloo does.
    for backend in ("chorus", "gloo"):
        group = dist.new_group(backend=backend, timeout=short)
        if rank != 0:
            continue
        try:
            group.monitored_barrier(datetime.timedelta(seconds=0))
        except RuntimeError as e:
            assert "Rank 0 timed out in monitoredBarrier" in str(e), (backend, str(e))
            if backend == "chorus":
                assert "Rank 1 failed to pass monitoredBarrier in 0 ms" in str(e), str(e)
            continue
        raise AssertionError(f"{backend}: monitored_barrier(timeout=0) passed on rank 0 alone")


def sparse(rank, chorus_group, gloo_group):
    # Rank r has non-zeros at rows r, r + 1 and 7 (shared), values integral.
    rows = torch.tensor([[rank, rank + 1, 7]])
    values = torch.tensor([[1.0, 2.0], [rank + 3.0, 4.0], [5.0, 6.0]])
    results = []
    for group in (chorus_group, gloo_group):
        t = torch.sparse_coo_tensor(rows, values, (8, 2))
        dist.all_reduce(t, group=group)
        results.append(t.coalesce())
    same(results[0].to_dense(), results[1].to_dense(), "sparse all_reduce")
    assert results[0].is_sparse


def recv_any_source(rank, n, chorus_group, gloo_group):
    for group in (chorus_group, gloo_group):
        if rank == 0:
            senders = []
            for _ in range(n - 1):
                t = torch.zeros(5, dtype=torch.int64)
                sender = dist.recv(t, group=group)
                assert torch.equal(t, torch.full((5,), 10 * sender)), (sender, t)
                senders.append(sender)
            assert sorted(senders) == list(range(1, n)), senders
        else:
            dist.send(torch.full((5,), 10 * rank, dtype=torch.int64), 0, group=group)
        dist.barrier(group=gloo_group)


def main():
    dist.init_process_group("chorus")
    rank, n = dist.get_rank(), dist.get_world_size()
    assert n == 4, n
    gloo_all = dist.new_group(backend="gloo")
    pair = dist.new_group([0, 2])
    pair_gloo = dist.new_group([0, 2], backend="gloo")
    coalesced(rank, None, gloo_all, "on the default group")
    if rank in (0, 2):
        coalesced(rank, pair, pair_gloo, "on the sub-group [0, 2]")
    gather_coalesced(rank, n, None, gloo_all)
    sparse(rank, None, gloo_all)
    recv_any_source(rank, n, None, gloo_all)
    monitored(rank, n)
    dist.barrier(group=gloo_all)
    print("torch_completeness OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
