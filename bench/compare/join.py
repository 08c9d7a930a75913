#!/usr/bin/env python3
"""Joins the sweeps of run.sh into one table: per size, each system's busbw
from its median out-of-place time over the repeated runs (busbw =
2(N-1)/N * bytes / time, as nccl-tests), and chorus / best peer (the ratio
of the busbws, i.e. the best peer's time over chorus's).

  join.py TITLE DIR N SYSTEM... (files DIR/SYSTEM.1, DIR/SYSTEM.2, ...; the
  first SYSTEM is chorus)

Rows are the sizes chorus ran; a system without a row at that size prints "-".
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
    title, folder, n, systems = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    runs = {s: [rows(p) for p in sorted(glob.glob(f"{folder}/{s}.*"))] for s in systems}

    def median(system, size, field):
        vals = [r[size][field] for r in runs[system] if size in r]
        return statistics.median(vals) if vals else None

    sizes = sorted({k for r in runs[systems[0]] for k in r})
    reps = min(len(v) for v in runs.values())
    print(f"# {title}; median of {reps} runs per system")
    print(f"{'size(B)':>12}" + "".join(f" {s.split('_')[0]:>10}" for s in systems) + f" {'chorus/best':>12}")
    for size in sizes:
        times = [median(s, size, 0) for s in systems]
        bw = [None if t is None or t <= 0 else 2 * (n - 1) / n * size / t / 1e3 for t in times]
        peers = [b for b in bw[1:] if b is not None]
        ratio = f"{bw[0] / max(peers):12.2f}" if bw[0] is not None and peers and max(peers) > 0 else f"{'-':>12}"
        print(f"{size:>12}" + "".join(f" {'-' if b is None else f'{b:.4g}':>10}" for b in bw) + f" {ratio}")
    for s in systems:
        t = median(s, 8, 0)
        if t is not None:
            print(f"#   8-byte time {s.split('_')[0]:<8} {t:10.2f} us (median)")


if __name__ == "__main__":
    main()
