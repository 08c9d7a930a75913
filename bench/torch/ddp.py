"""DDP step time of a ~25M-parameter model: the "chorus" backend against "gloo".

    PYTHONPATH=build/python chorus-run -n 2 /usr/bin/python3 bench/torch/ddp.py
    PYTHONPATH=build/python chorus-run -n 4 /usr/bin/python3 bench/torch/ddp.py

One model (an MLP 1024 -> 4096 -> 4096 -> 1024 -> 16: 25.2M parameters, about
100 MB of float32 gradients per step) is trained by DistributedDataParallel
twice in the same processes, once over gloo (the default group) and once
over chorus, in alternating rounds so that both see the same machine. A
step is forward, backward (where DDP all-reduces its buckets) and an SGD
update; its time is the slowest rank's. Prints the median and the minimum
step time of each backend. Not a pass/fail test.
"""

import argparse
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import chorus.torch  # noqa: F401


def model():
    return torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
        torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
        torch.nn.Linear(4096, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 16))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="timed steps per round and backend")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    groups = {"gloo": dist.group.WORLD, "chorus": dist.new_group(backend="chorus")}
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    nets, opts = {}, {}
    for name, group in groups.items():
        net = DDP(model(), process_group=group)
        nets[name] = net
        opts[name] = torch.optim.SGD(net.parameters(), lr=1e-3)
    params = sum(p.numel() for p in nets["chorus"].parameters())
    data = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, 1024, generator=data)
    y = torch.randn(args.batch, 16, generator=data)

    def step(name):
        opts[name].zero_grad()
        torch.nn.functional.mse_loss(nets[name](x), y).backward()
        opts[name].step()

    times = {name: [] for name in groups}
    for name in groups:  # warm-up
        for _ in range(2):
            step(name)
    for _ in range(args.rounds):
        for name in groups:
            for _ in range(args.steps):
                dist.barrier(group=groups["gloo"])
                start = time.perf_counter()
                step(name)
                t = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX, group=groups["gloo"])
                times[name].append(t.item())
    if rank == 0:
        print(f"# DDP, {params / 1e6:.1f}M parameters, batch {args.batch} per rank, {n} ranks, "
              f"torch threads {torch.get_num_threads()}", flush=True)
        for name in groups:
            print(f"{name:>7}: median step {1000 * statistics.median(times[name]):8.1f} ms, "
                  f"min {1000 * min(times[name]):8.1f} ms over {len(times[name])} steps", flush=True)
        ratio = statistics.median(times["gloo"]) / statistics.median(times["chorus"])
        print(f"gloo/chorus median step time: {ratio:.2f}", flush=True)
    # The DDP modules go before the groups: torch 1.13 can deadlock when a
    # Reducer drops the last reference to a gloo group while holding the GIL.
    nets.clear()
    opts.clear()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
