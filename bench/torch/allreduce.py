"""torch.distributed AllReduce: the "chorus" backend against "gloo", back to back.

Run one process per rank under chorus-run (or torchrun):

    PYTHONPATH=build/python chorus-run -n 2 /usr/bin/python3 bench/torch/allreduce.py
    PYTHONPATH=build/python chorus-run -n 4 /usr/bin/python3 bench/torch/allreduce.py -e 64M
    PYTHONPATH=build/python chorus-run -n 4 /usr/bin/python3 bench/torch/allreduce.py --window

Both process groups live in the same processes (gloo is the default group,
chorus a second one over the same store). For each size, float32 tensors are
all-reduced (SUM, in place) by gloo, then by chorus: a few warm-up calls,
then enough calls for about --seconds each. A row's time is the slowest
rank's mean per call; busbw = 2 (N-1)/N x bytes / time, as nccl-tests
count it. After the timed calls every element of one fresh call per backend
is checked, so a fast wrong answer cannot pass unseen. With --window, chorus's
tensors (timed and checked) come from chorus.torch.empty: they lie in shared
windows, whose data the peers read in place (gloo's stay ordinary tensors).
Not a pass/fail test.
"""

import argparse
import sys
import time

import torch
import torch.distributed as dist

import chorus.torch


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def human(nbytes):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes} B"


def timed(group, tensor, iters, rank_group):
    """Slowest rank's mean seconds per all_reduce over `iters` calls."""
    dist.barrier(group=rank_group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor, group=group)
    elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=rank_group)
    return elapsed.item() / iters


def new_tensor(count, group, window):
    """`count` float32 elements: in a window of `group` (a chorus group) or ordinary."""
    return chorus.torch.empty(count, group=group) if window else torch.empty(count)


def check(group, count, n, rank, window=False):
    """One fresh call, every element compared with the exact sum."""
    t = new_tensor(count, group, window)
    t.copy_(torch.arange(count, dtype=torch.float32) % 1024 + rank)
    dist.all_reduce(t, group=group)
    want = (torch.arange(count, dtype=torch.float32) % 1024) * n + n * (n - 1) / 2
    return int((t != want).sum().item())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-b", "--begin", default="4K", help="smallest size in bytes (4K)")
    parser.add_argument("-e", "--end", default="256M", help="largest size in bytes (256M)")
    parser.add_argument("-f", "--factor", type=int, default=4, help="size step factor (4)")
    parser.add_argument("--seconds", type=float, default=0.5, help="timed seconds per row and backend")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--window", action="store_true",
                        help="chorus's tensors in shared windows (chorus.torch.empty)")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    chorus_group = dist.new_group(backend="chorus")
    gloo_group = dist.group.WORLD
    rank, n = dist.get_rank(), dist.get_world_size()
    factor = 2 * (n - 1) / n
    if rank == 0:
        print(f"# torch {torch.__version__}, {n} ranks, float32 SUM in place, "
              f"chorus transport {chorus_group.transport}"
              f"{', chorus tensors in windows' if args.window else ''}", flush=True)
        print(f"{'size':>10} {'gloo us':>11} {'gloo busbw':>11} {'chorus us':>11} "
              f"{'chorus busbw':>13} {'chorus/gloo':>12} {'#wrong':>7}", flush=True)
    size = parse_size(args.begin)
    end = parse_size(args.end)
    while size <= end:
        count = size // 4
        rows = {}
        for name, group in (("gloo", gloo_group), ("chorus", chorus_group)):
            tensor = new_tensor(count, group, args.window and name == "chorus")
            tensor.fill_(1)
            for _ in range(args.warmup):
                dist.all_reduce(tensor, group=group)
            probe = timed(group, tensor, 1, gloo_group)
            iters = torch.tensor([max(3, min(2000, int(args.seconds / max(probe, 1e-7))))])
            dist.broadcast(iters, src=0, group=gloo_group)  # every rank runs as many calls
            rows[name] = timed(group, tensor, int(iters.item()), gloo_group)
        wrong = check(gloo_group, count, n, rank) + \
            check(chorus_group, count, n, rank, args.window)
        wrong_all = torch.tensor([wrong])
        dist.all_reduce(wrong_all, group=gloo_group)
        if rank == 0:
            g, c = rows["gloo"], rows["chorus"]
            print(f"{human(size):>10} {g * 1e6:11.1f} {factor * size / g / 1e9:11.3f} "
                  f"{c * 1e6:11.1f} {factor * size / c / 1e9:13.3f} {g / c:12.2f} "
                  f"{int(wrong_all.item()):7d}", flush=True)
        del tensor
        size *= args.factor
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
