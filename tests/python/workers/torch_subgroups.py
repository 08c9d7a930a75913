"""Sub-groups of a chorus default group (run under chorus-run, N = 4).

dist.new_group(ranks) over "chorus" derives the group's communicator from the
default group's, without a rendezvous through the store. A sub-group all_reduce, and DDP on
each half of the ranks, are compared with the same over gloo groups of the
same ranks. Prints "torch_subgroups OK" at the end.
"""

import copy
import json
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import chorus.torch

STEPS = 10
RTOL = 1e-6


def model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def main():
    dist.init_process_group("chorus")
    rank, n = dist.get_rank(), dist.get_world_size()
    assert n == 4, n

    # A sub-group of ranks 0 and 2, and one for each half, made by every
    # rank (torch's rule). The members meet through the default group: its
    # flight record shows the set-up messages between them (rank 0 invites
    # rank 2), where a rendezvous of chorus's own would go through the store.
    pair = dist.new_group([0, 2])
    halves = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    default = dist.distributed_c10d._get_default_group()
    calls = json.loads(default.flight_record())["calls"]
    if rank == 0:
        assert any(c["call"] == "send to peer" and c["peer"] == 2 for c in calls), calls
    if rank == 2:
        assert any(c["call"] == "recv from peer" and c["peer"] == 0 for c in calls), calls
    pair_gloo = dist.new_group([0, 2], backend="gloo")
    if rank in (0, 2):
        assert isinstance(pair, chorus.torch.ProcessGroupChorus), type(pair)
        assert pair.size() == 2 and pair.rank() == [0, 2].index(rank)
        for dtype in (torch.float32, torch.int64):
            x = (torch.arange(10) * (rank + 1)).to(dtype)
            y = x.clone()
            dist.all_reduce(x, group=pair)
            dist.all_reduce(y, group=pair_gloo)
            assert torch.equal(x, y), (dtype, x, y)
        t = torch.full((3,), float(rank))
        dist.broadcast(t, src=2, group=pair)
        assert torch.equal(t, torch.full((3,), 2.0)), t
    else:
        assert pair == dist.GroupMember.NON_GROUP_MEMBER, pair

    # DDP on each half, over chorus sub-groups and over gloo ones.
    halves_gloo = [dist.new_group([0, 1], backend="gloo"), dist.new_group([2, 3], backend="gloo")]
    mine, mine_gloo = halves[rank // 2], halves_gloo[rank // 2]
    reference = model()
    trained = copy.deepcopy(reference)
    over_gloo = DDP(reference, process_group=mine_gloo, bucket_cap_mb=0.001)
    over_chorus = DDP(trained, process_group=mine, bucket_cap_mb=0.001)
    opt_gloo = torch.optim.SGD(over_gloo.parameters(), lr=0.05)
    opt_chorus = torch.optim.SGD(over_chorus.parameters(), lr=0.05)
    batches = torch.Generator().manual_seed(50 + rank)
    for step in range(STEPS):
        x, y = torch.randn(8, 16, generator=batches), torch.randn(8, 4, generator=batches)
        for net, opt in ((over_gloo, opt_gloo), (over_chorus, opt_chorus)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
        for pa, pb in zip(trained.parameters(), reference.parameters()):
            scale = max(pb.detach().abs().max().item(), 1e-12)
            diff = (pa.detach() - pb.detach()).abs().max().item() / scale
            assert diff <= RTOL, f"step {step}: chorus and gloo differ by {diff:.3g}"
    # The two ranks of a half hold the same parameters; the halves differ.
    flat = torch.cat([p.detach().reshape(-1) for p in trained.parameters()])
    both = [torch.zeros_like(flat) for _ in range(2)]
    dist.all_gather(both, flat, group=mine)
    assert torch.equal(both[0], both[1]), "the ranks of a half differ"
    everyone = [torch.zeros_like(flat) for _ in range(n)]
    dist.all_gather(everyone, flat)
    assert not torch.equal(everyone[0], everyone[2]), "the halves trained on the same data"
    del over_gloo, over_chorus, opt_gloo, opt_chorus
    dist.destroy_process_group()
    print(f"torch_subgroups OK rank {rank}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
