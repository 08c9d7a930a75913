"""torch.profiler sees the chorus calls (run under chorus-run, N = 2).

An all_reduce, a broadcast and a DDP step, each profiled with
record_shapes: the profile holds "chorus:all_reduce" with the tensor's shape
as its input shape, "chorus:broadcast", and the DDP step's AllReduces.
"""

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile

import chorus.torch  # noqa: F401


def events(prof, name):
    return [e for e in prof.events() if e.name == name]


def main():
    dist.init_process_group("chorus")
    rank = dist.get_rank()
    size = dist.get_world_size()

    t = torch.ones(3, 5)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        dist.all_reduce(t)
        dist.broadcast(t, src=0)
    reduces = events(prof, "chorus:all_reduce")
    assert len(reduces) == 1, [e.name for e in prof.events()]
    assert reduces[0].input_shapes == [[3, 5]], reduces[0].input_shapes
    assert len(events(prof, "chorus:broadcast")) == 1, [e.name for e in prof.events()]
    assert torch.equal(t, torch.full((3, 5), 2.0)), t

    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        model(torch.randn(4, 8)).sum().backward()
    assert events(prof, "chorus:all_reduce"), [e.name for e in prof.events()]

    dist.destroy_process_group()
    print(f"torch_profiler OK rank {rank} of {size}")


if __name__ == "__main__":
    sys.exit(main())
