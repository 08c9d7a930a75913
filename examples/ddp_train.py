"""Data-parallel training with torch.distributed over chorus.

Each rank trains a replica of a small classifier on batches of its own;
DistributedDataParallel averages the gradients over the "chorus" backend.

    chorus-run -n 4 /usr/bin/python3 examples/ddp_train.py
    chorus-run -n 4 /usr/bin/python3 examples/ddp_train.py --backend gloo   # to compare
    torchrun --nproc-per-node 4 --redirects 2 --tee 2 examples/ddp_train.py

The only chorus-specific line is `import chorus.torch`, which registers the
backend. Rank 0 prints the loss as it falls and the time of a step.
"""

import argparse
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import chorus.torch  # noqa: F401  (registers the "chorus" backend)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="chorus")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()

    dist.init_process_group(args.backend)  # env:// from chorus-run or torchrun
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # the same initial replica on every rank (DDP checks it)
    model = torch.nn.Sequential(
        torch.nn.Linear(128, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))
    teacher = torch.nn.Linear(128, 10)  # the labels come from a fixed linear map
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)

    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches
    first = last = None
    start = time.perf_counter()
    for step in range(args.steps):
        x = torch.randn(args.batch, 128, generator=data)
        with torch.no_grad():
            y = teacher(x).argmax(dim=1)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()  # gradients are averaged over the ranks here
        opt.step()
        # The mean loss over the ranks, for the report.
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world
        first = mean.item() if first is None else first
        last = mean.item()
        if rank == 0 and (step % 20 == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {last:.4f}", flush=True)
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(f"{args.backend}, {world} ranks: loss {first:.4f} -> {last:.4f}, "
              f"{1000 * elapsed / args.steps:.2f} ms per step", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
