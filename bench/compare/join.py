#!/usr/bin/env python3
"""Joins the sweeps of run.sh into one table: per size, each system's busbw
from its median out-of-place time over the repeated runs (busbw =
2(N-1)/N * bytes / time, as nccl-tests), and chorus / best peer (the ratio
of the busbws, i.e. the best peer's time over chorus's).

  join.py [--stream GBPS] TITLE DIR N SYSTEM... (files DIR/SYSTEM.1,
  DIR/SYSTEM.2, ...; the systems whose names start with "chorus" are
  chorus's, each compared with the best of the others)

Rows are the sizes chorus ran; a system without a row at that size prints "-".
With --stream (STREAM copy, GB/s, measured in the same run), each chorus
system also gets the share of the memory-traffic floor it reaches: the floor
is 2 N M bytes (every input read once, every output written once) at the
copy rate, and the share is floor time / measured time.
Then the median 8-byte out-of-place time of each system, in microseconds.
"""
import glob
import statistics
import sys


def rows(path):
    """size -> (out-of-place time_us,) of one sweep."""
    out = {}
    for line in open(path):
        f = line.split()
        if not f or f[0].startswith("#") or len(f) < 8:
            continue
        try:
            out[int(f[0])] = (float(f[5]),)
        except ValueError:
            continue
    return out


def main():
    args = sys.argv[1:]
    stream = None
    if args and args[0] == "--stream":
        stream = float(args[1])
        args = args[2:]
    title, folder, n, systems = args[0], args[1], int(args[2]), args[3:]
    ours = [s for s in systems if s.startswith("chorus")]
    others = [s for s in systems if not s.startswith("chorus")]
    runs = {s: [rows(p) for p in sorted(glob.glob(f"{folder}/{s}.*"))] for s in systems}

    def median(system, size, field):
        vals = [r[size][field] for r in runs[system] if size in r]
        return statistics.median(vals) if vals else None

    sizes = sorted({k for r in runs[systems[0]] for k in r})
    reps = min(len(v) for v in runs.values())
    print(f"# {title}; median of {reps} runs per system")
    if stream:
        print(f"# STREAM copy {stream:.2f} GB/s in this run; floor = 2 N M / that rate")
    head = f"{'size(B)':>12}" + "".join(f" {s:>14}" for s in systems)
    head += "".join(f" {s + '/best':>20}" for s in ours)
    if stream:
        head += "".join(f" {s + ' %floor':>20}" for s in ours)
    print(head)
    for size in sizes:
        times = {s: median(s, size, 0) for s in systems}
        bw = {s: None if t is None or t <= 0 else 2 * (n - 1) / n * size / t / 1e3
              for s, t in times.items()}
        peers = [bw[s] for s in others if bw[s] is not None]
        line = f"{size:>12}" + "".join(f" {'-' if bw[s] is None else f'{bw[s]:.4g}':>14}" for s in systems)
        for s in ours:
            ok = bw[s] is not None and peers and max(peers) > 0
            line += f" {bw[s] / max(peers):20.2f}" if ok else f" {'-':>20}"
        if stream:
            floor_us = 2 * n * size / (stream * 1e9) * 1e6
            for s in ours:
                t = times[s]
                line += f" {100 * floor_us / t:20.1f}" if t else f" {'-':>20}"
        print(line)
    for s in systems:
        t = median(s, 8, 0)
        if t is not None:
            print(f"#   8-byte time {s:<14} {t:10.2f} us (median)")


if __name__ == "__main__":
    main()
