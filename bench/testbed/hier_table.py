#!/usr/bin/env python3
"""Tables of bench/testbed/run.sh's `hier` part: AllReduce on 2 hosts x 4
ranks and 4 x 2, the best hierarchical chorus algorithm against the best
flat one, chorus's own pick, Open MPI and Gloo (median out-of-place time
over the rounds), and each host's inter-host bytes for one two-level
AllReduce against 2(H-1)/H M.

    python3 bench/testbed/hier_table.py OUT      (OUT as run.sh's -o)
"""
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from analyze import size_label, table, table_times  # noqa: E402  (the tables look alike)

HIER = ("hier_two_level", "hier_leader")


def chorus_round(paths):
    """{algo: {size: seconds}} and {size: (picked algo, seconds)} of one round."""
    times, auto = {}, {}
    for path in paths:
        rows = json.load(open(path))["rows"]
        last = {}
        for i, r in enumerate(rows):
            last[r["size_B"]] = i
        for i, r in enumerate(rows):
            size, cell = r["size_B"], r["out_of_place"]
            if cell is None:
                continue
            t = cell["time_us"] * 1e-6
            if last[size] == i:  # -a lists auto last: a size's last row is chorus's pick
                auto[size] = (r["algo"], t)
                continue
            times.setdefault(r["algo"], {})[size] = t
    return times, auto


def median_of(rounds, key):
    vals = [r[key] for r in rounds if key in r]
    return statistics.median(vals) if vals else None


def ms(t):
    return f"{t * 1e3:.3f}" if t is not None else "-"


def layout_tables(out, layout):
    rounds = sorted({p.rsplit(".", 2)[-2] for p in glob.glob(f"{out}/hier/{layout}.chorus_*.json")})
    if not rounds:
        return
    per_algo, autos = {}, []
    for rd in rounds:
        times, auto = chorus_round(sorted(glob.glob(f"{out}/hier/{layout}.chorus_*.{rd}.json")))
        for algo, by_size in times.items():
            per_algo.setdefault(algo, []).append(by_size)
        autos.append(auto)
    others = {}
    for system in ("openmpi", "gloo"):
        paths = sorted(glob.glob(f"{out}/hier/{layout}.{system}.*"))
        if paths:
            others[system] = [table_times(p) for p in paths]
    sizes = sorted({s for rs in per_algo.values() for r in rs for s in r})
    h, k = layout.split("x")
    print(f"### AllReduce, {h} hosts x {k} ranks, median of {len(rounds)} rounds (ms)\n")
    rows = []
    for s in sizes:
        med = {a: median_of(rs, s) for a, rs in per_algo.items()}
        flat = {a: t for a, t in med.items() if t is not None and a not in HIER}
        hier = {a: t for a, t in med.items() if t is not None and a in HIER}
        bf = min(flat, key=flat.get) if flat else None
        bh = min(hier, key=hier.get) if hier else None
        picks = [a[s] for a in autos if s in a]
        pick_t = statistics.median(t for _, t in picks) if picks else None
        pick_names = sorted({n for n, _ in picks})
        row = [size_label(s), f"{bf} {ms(flat[bf])}" if bf else "-",
               f"{bh} {ms(hier[bh])}" if bh else "-",
               f"{flat[bf] / hier[bh]:.2f}" if bf and bh else "-",
               f"{'/'.join(pick_names)} {ms(pick_t)}" if picks else "-",
               f"{flat[bf] / pick_t:.2f}" if bf and pick_t else "-"]
        for system in ("openmpi", "gloo"):
            t = median_of(others.get(system, []), s)
            row.append(ms(t))
            row.append(f"{t / hier[bh]:.2f}" if t and bh else "-")
        rows.append(row)
    table(["size", "best flat", "best hier", "best flat / best hier", "chorus pick",
           "best flat / pick", "Open MPI", "/ best hier", "Gloo", "/ best hier"], rows)

    veth = f"{out}/hier/{layout}.veth"
    if os.path.exists(veth):
        hosts = int(h)
        rows = []
        for line in open(veth):
            # HOST BYTES OK rank R: eth0 sent S B, received V B during an AllReduce of M B
            f = line.replace(":", "").split()
            rank, sent, received, m = int(f[4]), int(f[7]), int(f[10]), int(f[-2])
            want = 2 * (hosts - 1) / hosts * m
            rows.append([str(rank), str(sent), f"{sent / want:.3f}", str(received),
                         f"{received / want:.3f}"])
        if rows:
            print(f"Each host's eth0 during one hier_two_level AllReduce of {size_label(m)} "
                  f"(tb_check host-bytes; TCP/IP headers and ACKs included), against "
                  f"2(H-1)/H M = {want:.0f} B:\n")
            table(["host's first rank", "sent B", "/ 2(H-1)/H M", "received B", "/ 2(H-1)/H M"],
                  rows)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build-testbed-bench"
    for layout in ("2x4", "4x2"):
        layout_tables(out, layout)


if __name__ == "__main__":
    main()
