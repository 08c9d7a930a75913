#!/usr/bin/env python3
"""Tables of docs/PERFORMANCE.md's "Testbed" section from bench/testbed/run.sh's
results (markdown on stdout).

  analyze.py OUT

Reads what exists of OUT/params.json, cpu.txt, switch.json, ring.json,
sim_switch.json, sim_ring.json, sim_switch_ring_algos.json and compare/.
Times are the out-of-place columns of chorus-perf (the slowest rank's mean
per call); busbw = 2(N-1)/N * M / time as nccl-tests; GB = 1e9 B.

The seed's closed forms (its table of AllReduce costs, alpha and beta only)
are chorus's (src/model/cost_model.h, seed_allreduce_time), asked of
chorus-verify --closed-forms --json: $CHORUS_VERIFY, else
$BUILD_DIR/tools/chorus-verify as run.sh builds it (BUILD_DIR defaults to
build/ of this checkout), else the PATH. alpha and beta come from
chorus-perf's link measurement on the same testbed (ping-pong of 8 B and
4 MiB between ranks 0 and 1, printed in its header); a least-squares fit of
the ring's closed form to the ring's times is printed beside them.
"""
import glob
import json
import math
import os
import shutil
import statistics
import subprocess
import sys


def load(path):
    return json.load(open(path)) if os.path.exists(path) else None


def size_label(b):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"


def approx_sizes(xs):
    """Interpolated sizes, rounded for reading; "none" for no size."""
    def one(x):
        if x >= 1 << 20:
            return f"{x / (1 << 20):.1f} MiB"
        if x >= 1 << 10:
            return f"{x / (1 << 10):.0f} KiB"
        return f"{x:.0f} B"
    return ", ".join(one(x) for x in xs) or "none"


def ms3(t_s):
    """Seconds as milliseconds, about three digits, never in e-notation."""
    x = t_s * 1e3
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def busbw(n, size, t_s):
    return 2 * (n - 1) / n * size / t_s / 1e9


def perf_times(report):
    """{algo: {size: out-of-place seconds}} of a chorus-perf JSON report."""
    out = {}
    for r in report["rows"]:
        if r["out_of_place"]:
            out.setdefault(r["algo"], {})[r["size_B"]] = r["out_of_place"]["time_us"] * 1e-6
    return out


def sim_times(rows):
    out = {}
    for r in rows or []:
        out.setdefault(r["algo"], {})[r["bytes"]] = r["time_s"]
    return out


def chorus_verify():
    """The chorus-verify to ask for the closed forms."""
    if os.environ.get("CHORUS_VERIFY"):
        return os.environ["CHORUS_VERIFY"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build = os.environ.get("BUILD_DIR") or os.path.join(root, "build")
    path = os.path.join(build, "tools", "chorus-verify")
    if os.path.exists(path):
        return path
    found = shutil.which("chorus-verify")
    if found:
        return found
    sys.exit(f"analyze.py: no chorus-verify at {path} nor on the PATH (build it, or name it "
             "with CHORUS_VERIFY)")


def seed_forms(n, sizes, alpha, beta):
    """{algo: {size: seconds, or None where the seed has no figure}}: the seed's
    AllReduce closed forms at N ranks on one port, from chorus-verify."""
    cmd = [chorus_verify(), "--closed-forms", "--json", "allreduce", "--ranks", str(n),
           "--bytes", ",".join(str(s) for s in sizes), "--alpha", repr(alpha),
           "--beta", repr(beta), "--ports", "1"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"analyze.py: {' '.join(cmd)} failed:\n{run.stderr}")
    forms = {}
    for r in json.loads(run.stdout):
        forms.setdefault(r["algo"], {})[r["bytes"]] = r["seed_s"]
    return forms


def crossover(sizes, t_a, t_b):
    """Sizes where t_a - t_b changes sign, interpolated in log(size)."""
    out = []
    for s0, s1 in zip(sizes, sizes[1:]):
        d0, d1 = t_a(s0) - t_b(s0), t_a(s1) - t_b(s1)
        if d0 == 0 or (d0 < 0) != (d1 < 0):
            f = 0 if d0 == d1 else d0 / (d0 - d1)
            out.append(math.exp(math.log(s0) + f * (math.log(s1) - math.log(s0))))
    return out


def fit_ring(times, n):
    """alpha, beta minimising the relative error of the ring's closed form."""
    # t = a * A + b * B(M) with A = 2(N-1), B = 2(N-1)/N M; weights 1/t.
    rows = [(2 * (n - 1) / t, 2 * (n - 1) / n * m / t) for m, t in times.items()]
    saa = sum(a * a for a, _ in rows)
    sab = sum(a * b for a, b in rows)
    sbb = sum(b * b for _, b in rows)
    sa = sum(a for a, _ in rows)
    sb = sum(b for _, b in rows)
    det = saa * sbb - sab * sab
    a = (sa * sbb - sb * sab) / det
    b = (sb * saa - sa * sab) / det
    return a, 1 / b


def table_times(path):
    """{size: seconds} from a perf table (chorus-perf, the compare programs):
    bytes in column 1, the out-of-place time in us in column 6."""
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 8 and not f[0].startswith("#"):
            try:
                out[int(f[0])] = float(f[5]) * 1e-6
            except ValueError:
                pass
    return out


def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()


def main():
    out = sys.argv[1]
    params = load(f"{out}/params.json") or {}
    n = params.get("hosts", 8)
    link = params["rate_bits"] / 8 if "rate_bits" in params else None
    if os.path.exists(f"{out}/machine.txt"):
        print("```\n" + open(f"{out}/machine.txt").read().strip() + "\n```\n")

    if os.path.exists(f"{out}/cpu.txt"):
        print(f"### Which rate: the ring at 64 MiB, {n} hosts x 1 rank, switch\n")
        rows = []
        for line in open(f"{out}/cpu.txt"):
            if line.startswith("#") or not line.strip():
                continue
            rate, bus, lk, pct, cpu, load1 = line.split()
            rows.append([rate, bus, lk, pct + " %", cpu + " %", load1])
        table(["link rate", "ring busbw (GB/s)", "link (GB/s)", "busbw / link",
               "CPUs busy (nice time left out)", "load before"], rows)

    sw = load(f"{out}/switch.json")
    if sw:
        times = perf_times(sw)
        alpha, beta = sw["alpha_us"] * 1e-6, sw["beta_GBps"] * 1e9
        algos = list(times)
        sizes = sorted(times["ring"])
        print(f"### Switch, {n} hosts x 1 rank, {params.get('rate', '?')}: busbw (GB/s) per "
              "algorithm\n")
        rows = [[size_label(s)] + [f"{busbw(n, s, times[a][s]):.3g}" if s in times[a] else "-"
                                   for a in algos] for s in sizes]
        table(["size"] + algos, rows)
        if link:
            big = max(sizes)
            b = busbw(n, big, times["ring"][big])
            print(f"Ring at {size_label(big)}: busbw {b:.4f} GB/s = {100 * b * 1e9 / link:.1f} % "
                  f"of the link's {link / 1e9:.4f} GB/s (TCP/IP over Ethernet framing leaves "
                  f"at most 1448/1514 = 95.6 % for payload).\n")
        fa, fb = fit_ring(times["ring"], n)
        print(f"alpha = {alpha * 1e6:.1f} us, beta = {beta / 1e9:.4f} GB/s (chorus-perf's "
              f"ping-pong, ranks 0 and 1); a least-squares fit of the ring's closed form to "
              f"its times gives alpha = {fa * 1e6:.1f} us, beta = {fb / 1e9:.4f} GB/s.\n")
        simsw = sim_times(load(f"{out}/sim_switch.json"))
        seed = seed_forms(n, sorted(set(sizes) | {1}), alpha, beta)

        def seed_form(a, m):
            return seed.get(a, {}).get(m)
        print("### The seed's cost table against the measured times (switch)\n")
        print("Each cell: measured time / the closed form with the ping-pong's alpha and "
              "beta (ratio measured/form); `sim` where the seed has no closed form for one "
              "port (chorus-sim's prediction instead).\n")
        shown = [s for s in sizes if s in (8, 1 << 10, 32 << 10, 1 << 20, 16 << 20, 64 << 20)]
        rows = []
        for a in algos:
            row = [a]
            for s in shown:
                t = times[a].get(s)
                f = seed_form(a, s)
                tag = ""
                if f is None and s in simsw.get(a, {}):
                    f, tag = simsw[a][s], " sim"
                if t is None:
                    row.append("-")
                elif f is None:
                    row.append(f"{ms3(t)} / -")
                else:
                    row.append(f"{ms3(t)} / {ms3(f)}{tag} ({t / f:.2f})")
            rows.append(row)
        table(["algorithm"] + [size_label(s) + " (ms)" for s in shown], rows)

        print("### Crossovers (switch)\n")
        rows = []
        for a in ("double_binary_tree", "halving_doubling", "recursive_doubling"):
            if a not in times:
                continue
            common = [s for s in sizes if s in times[a]]
            if seed_form(a, 1) is None:
                pred = "no closed form at N = %d" % n
            else:
                pred = approx_sizes(crossover(common, lambda m: seed_form(a, m),
                                              lambda m: seed_form("ring", m)))
            meas = crossover(common, lambda m: times[a][m], lambda m: times["ring"][m])
            rows.append([f"{a} against ring", pred, approx_sizes(meas)])
        table(["pair", "the seed predicts (closed forms)", "measured"], rows)

    rg = load(f"{out}/ring.json")
    if rg:
        rt = perf_times(rg)
        simr = sim_times(load(f"{out}/sim_ring.json"))
        sims = sim_times(load(f"{out}/sim_switch_ring_algos.json"))
        swt = perf_times(sw) if sw else {}
        print(f"### Ring topology, {n} hosts, {params.get('rate', '?')} per link and direction\n")
        rows = []
        for s in sorted(rt["ring"]):
            r, b = rt["ring"][s], rt["bidir_ring"].get(s)
            hd = rt["halving_doubling"].get(s)
            hd_sw = swt.get("halving_doubling", {}).get(s)

            def ms(x):
                return "-" if x is None else f"{x * 1e3:.1f}"

            def ratio(x, y):
                return "-" if x is None or y is None else f"{x / y:.2f}"
            rows.append([size_label(s), ms(r), ms(simr.get("ring", {}).get(s)), ms(b),
                         ms(simr.get("bidir_ring", {}).get(s)), ratio(r, b),
                         ratio(simr.get("ring", {}).get(s), simr.get("bidir_ring", {}).get(s)),
                         ms(hd), ms(simr.get("halving_doubling", {}).get(s)), ms(hd_sw),
                         ms(sims.get("halving_doubling", {}).get(s)), ratio(hd, hd_sw)])
        table(["size", "ring ms", "sim", "bidir_ring ms", "sim", "ring / bidir", "sim",
               "HD on ring ms", "sim", "HD on switch ms", "sim", "HD ring / switch"], rows)

    runs = {}
    for path in sorted(glob.glob(f"{out}/compare/*.*")):
        system = os.path.basename(path).rsplit(".", 1)[0]
        runs.setdefault(system, []).append(table_times(path))
    if runs:
        systems = [s for s in ("chorus", "openmpi", "gloo") if s in runs]
        reps = min(len(v) for v in runs.values())
        print(f"### Side by side, {n} hosts x 1 rank, switch, {params.get('rate', '?')}: busbw "
              f"(GB/s) from the median out-of-place time of {reps} rounds\n")
        rows = []
        for s in sorted({k for r in runs["chorus"] for k in r}):
            med = {}
            for system in systems:
                vals = [r[s] for r in runs[system] if s in r]
                med[system] = statistics.median(vals) if vals else None
            bws = {k: busbw(n, s, v) for k, v in med.items() if v}
            peers = [bws[k] for k in systems[1:] if k in bws]
            ratio = f"{bws['chorus'] / max(peers):.2f}" if "chorus" in bws and peers else "-"
            rows.append([size_label(s)] + [f"{bws[k]:.4f}" if k in bws else "-" for k in systems]
                        + [ratio])
        table(["size"] + systems + ["chorus / best"], rows)


if __name__ == "__main__":
    main()
