"""DDP over "chorus" against DDP over "gloo" (run under chorus-run, N = 2 or 3).

Two copies of one model (a few linear layers, one seed) train side by side
for 20 steps on the same per-rank batches: one through DistributedDataParallel
over a gloo process group, the other over a chorus one. Their parameters must
agree within 1e-6 relative after every step, stay identical across the ranks,
and have moved away from where they started. Small buckets make DDP reduce
several buckets per step while backward still runs.
"""

import copy
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import chorus.torch  # noqa: F401

STEPS = 20
RTOL = 1e-6


def model():
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 8))


def relative_difference(a, b):
    worst = 0.0
    for pa, pb in zip(a.parameters(), b.parameters()):
        scale = pb.detach().abs().max().item()
        worst = max(worst, (pa.detach() - pb.detach()).abs().max().item() / max(scale, 1e-12))
    return worst


def main():
    dist.init_process_group("gloo")
    chorus_group = dist.new_group(backend="chorus")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)
    reference = model()
    start = copy.deepcopy(reference)
    trained = copy.deepcopy(reference)
    over_gloo = DDP(reference, bucket_cap_mb=0.01)
    over_chorus = DDP(trained, process_group=chorus_group, bucket_cap_mb=0.01)
    opt_gloo = torch.optim.SGD(over_gloo.parameters(), lr=0.05, momentum=0.9)
    opt_chorus = torch.optim.SGD(over_chorus.parameters(), lr=0.05, momentum=0.9)
    batches = torch.Generator().manual_seed(100 + rank)
    worst = 0.0
    for step in range(STEPS):
        x = torch.randn(16, 32, generator=batches)
        y = torch.randn(16, 8, generator=batches)
        for net, opt in ((over_gloo, opt_gloo), (over_chorus, opt_chorus)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
        diff = relative_difference(trained, reference)
        worst = max(worst, diff)
        assert diff <= RTOL, f"step {step}: chorus and gloo differ by {diff:.3g} (relative)"
    moved = relative_difference(trained, start)
    assert moved > 1e-3, f"training moved the parameters by only {moved:.3g}"
    # Every rank holds the same parameters.
    flat = torch.cat([p.detach().reshape(-1) for p in trained.parameters()])
    everyone = [torch.zeros_like(flat) for _ in range(n)]
    dist.all_gather(everyone, flat, group=chorus_group)
    for r in range(n):
        assert torch.equal(everyone[r], flat), f"rank {r}'s parameters differ from rank {rank}'s"
    # The DDP modules go before the groups: torch 1.13 can deadlock when a
    # Reducer drops the last reference to a gloo group while holding the GIL.
    del over_gloo, over_chorus, opt_gloo, opt_chorus
    dist.destroy_process_group()
    print(f"torch_ddp OK rank {rank} of {n}: {STEPS} steps, worst relative difference "
          f"{worst:.3g}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
