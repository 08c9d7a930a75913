#!/usr/bin/env python3
"""The progress engine's figures (docs/PERFORMANCE.md, "The progress engine").

Fresh jobs, the two sides of each figure alternating, --rounds times; each
figure is the median over rounds, each round the slowest rank's.

  latency  blocking AllReduce, 8 B to 4 KiB, CHORUS_PROGRESS=thread against
           caller (chorus-perf; its blocking calls are Communicator::run)
  plan     plan.start() + wait() (chorus-perf --plan) against the named
           blocking call, both in thread mode
  overlap  chorus-perf overlap, thread against caller, and thread with the
           progress thread pinned to the other core (CHORUS_PROGRESS_CPU)
  idle     the CPU a process with a communicator and nothing outstanding
           uses over --idle seconds (utime + stime of all its threads, from
           /proc), in thread mode

  /usr/bin/python3 bench/engine.py [--build build] [--rounds 5] [--configs 2:shm,2:tcp]
      [--only latency,plan,overlap,idle]

Prints markdown tables. Run it alone on the host, with a calibration cache of
its own (XDG_CACHE_HOME).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_json import perf_rows  # noqa: E402


def env_with(**kv):
    env = dict(os.environ)
    for k, v in kv.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def perf_times(perf, ranks, transport, extra, env, iters):
    rows = perf_rows(perf, ["allreduce", "--ranks", str(ranks), "--transport", transport,
                            "-b", "8", "-e", "4K", "-f", "8", "-n", str(iters), "-w", "20",
                            "-c", "0"] + extra, env=env)
    return {r["size_B"]: r["out_of_place"]["time_us"] for r in rows}


def table_ratio(title, sides, per_round, note):
    """per_round: list of (dict size->us for side A, dict for side B)."""
    print(f"\n### {title}\n\n{note}\n")
    print(f"| size (B) | {sides[0]} (us) | {sides[1]} (us) | ratio |")
    print("|---:|---:|---:|---:|")
    sizes = sorted(per_round[0][0])
    worst = 0.0
    for b in sizes:
        a = statistics.median(r[0][b] for r in per_round)
        c = statistics.median(r[1][b] for r in per_round)
        worst = max(worst, a / c)
        print(f"| {b} | {a:.2f} | {c:.2f} | {a / c:.3f} |")
    print(f"\nworst ratio: {worst:.3f}")
    return worst


def overlap_row(perf, ranks, transport, env, size, rounds_inner):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([perf, "overlap", "--ranks", str(ranks), "--transport", transport,
                        "-b", size, "-e", size, "-n", str(rounds_inner), "--json", f.name],
                       check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(f.name) as rows:
            return json.load(rows)["rows"][0]


IDLE_SCRIPT = r"""
import os, sys, time
import chorus
comm = chorus.init()
comm.barrier()
def cpu():
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
c0, t0 = cpu(), time.monotonic()
time.sleep(float(sys.argv[1]))
c1, t1 = cpu(), time.monotonic()
comm.barrier()
print("IDLE %.6f" % ((c1 - c0) / (t1 - t0)))
"""


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--configs", default="2:shm,2:tcp")
    ap.add_argument("--overlap-size", default="16M")
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--only", default="latency,plan,overlap,idle")
    a = ap.parse_args()
    perf = os.path.join(a.build, "tools", "chorus-perf")
    run = os.path.join(a.build, "tools", "chorus-run")
    only = set(a.only.split(","))
    configs = [(int(c.split(":")[0]), c.split(":")[1]) for c in a.configs.split(",")]
    thread = env_with(CHORUS_PROGRESS="thread")
    caller = env_with(CHORUS_PROGRESS="caller")
    for ranks, transport in configs:
        print(f"\n## N={ranks} {transport}")
        if "latency" in only:
            rounds = []
            for _ in range(a.rounds):
                t = perf_times(perf, ranks, transport, [], thread, a.iters)
                c = perf_times(perf, ranks, transport, [], caller, a.iters)
                rounds.append((t, c))
            table_ratio("Blocking AllReduce: thread against caller", ("thread", "caller"), rounds,
                        f"medians of {a.rounds} rounds of fresh jobs, -n {a.iters}")
        if "plan" in only and transport == "shm":
            rounds = []
            for _ in range(a.rounds):
                p = perf_times(perf, ranks, transport, ["--plan"], thread, a.iters)
                n = perf_times(perf, ranks, transport, [], thread, a.iters)
                rounds.append((p, n))
            table_ratio("plan.start() + wait() against the named call", ("plan", "named"), rounds,
                        f"medians of {a.rounds} rounds of fresh jobs, -n {a.iters}")
        if "overlap" in only:
            sides = [("caller", caller), ("thread", thread)]
            if (os.cpu_count() or 1) >= 2:
                sides.append(("thread, pinned to CPU 1",
                              env_with(CHORUS_PROGRESS="thread", CHORUS_PROGRESS_CPU="1",
                                       CHORUS_BIND="none")))
            got = {name: [] for name, _ in sides}
            for _ in range(a.rounds):
                for name, env in sides:
                    got[name].append(overlap_row(perf, ranks, transport, env, a.overlap_size, 5))
            print(f"\n### Overlap, {a.overlap_size} AllReduce against as much computation\n")
            print("| progress | A (us) | C (us) | T (us) | T / (A + C) | overlap |")
            print("|---|---:|---:|---:|---:|---:|")
            for name, _ in sides:
                rows = got[name]
                med = lambda k: statistics.median(r[k] for r in rows)  # noqa: E731
                A, C, T = med("allreduce_us"), med("compute_us"), med("total_us")
                print(f"| {name} | {A:.0f} | {C:.0f} | {T:.0f} | {T / (A + C):.3f} | "
                      f"{statistics.median(r['overlap'] for r in rows):.2f} |")
        if "idle" in only:
            out = subprocess.run([run, "-n", str(ranks), "--transport", transport,
                                  "/usr/bin/python3", "-c", IDLE_SCRIPT, str(a.idle)],
                                 check=True, capture_output=True, text=True,
                                 env=dict(thread, PYTHONPATH=os.path.join(a.build, "python"))
                                 ).stdout
            shares = [float(line.split("IDLE")[1]) for line in out.splitlines() if "IDLE" in line]
            print(f"\n### Idle: CPU of a process with a communicator, {a.idle:g} s, nothing "
                  f"outstanding\n\nper rank: " +
                  ", ".join(f"{100 * s:.3f}% of a core" for s in shares))


if __name__ == "__main__":
    main()
