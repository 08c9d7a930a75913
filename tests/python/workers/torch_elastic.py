"""The torch recipe for going on after a failure (run under chorus-run -n 4 --grace 60).

Rank 3 kills itself (SIGKILL); the survivors' all_reduce raises a
chorus.Error; chorus.torch.shrink_default_group() gives torch a new default
group of the survivors, built on the shrunk communicator; all_reduce and a
DistributedDataParallel step then work on it, and dist.get_rank() /
get_world_size() tell the new numbering. Each survivor prints
"torch_elastic OK".
"""

import os
import signal

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import chorus
import chorus.torch


def main():
    dist.init_process_group("chorus")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.ones(8)
    dist.all_reduce(t)
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        for _ in range(100):
            dist.all_reduce(t)
        raise AssertionError("no call raised after the last rank was killed")
    except chorus.Error:
        pass
    chorus.torch.shrink_default_group(timeout=60)
    assert dist.get_world_size() == world - 1, dist.get_world_size()
    assert dist.get_rank() == rank, (dist.get_rank(), rank)
    x = torch.full((5,), float(rank))
    dist.all_reduce(x)
    expected = float(sum(range(world - 1)))
    assert torch.equal(x, torch.full((5,), expected)), x

    # Training goes on: one DDP step on the new default group.
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(100 + rank)
    loss = model(torch.randn(3, 4)).square().sum()
    loss.backward()
    opt.step()
    w = model.module.weight.detach().clone()
    gathered = [torch.empty_like(w) for _ in range(world - 1)]
    dist.all_gather(gathered, w)
    assert all(torch.equal(g, w) for g in gathered), "the replicas differ after a DDP step"
    print(f"torch_elastic OK rank {rank}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
