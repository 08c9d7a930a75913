#!/usr/bin/python3
"""The benchmark ledger: every figure chorus promises, measured in one run.

Each figure is measured against its anchor in the same run (Open MPI, MPICH,
gloo, the host's STREAM copy, a fresh start of the same ranks, the best
algorithm, ...), in rounds that take turns (figure, anchor, figure, anchor,
...), with fresh jobs where the figure is about jobs. A figure is one entry
of FIGURES (see `figure` below): adding one is adding an entry.

  make bench [QUICK=1]                     (the Makefile holds the lock, see below)
  /usr/bin/python3 bench/ledger.py [--quick] [--only REGEX] [--out FILE] [--rounds R]
  /usr/bin/python3 bench/ledger.py --list
  /usr/bin/python3 bench/ledger.py --markdown LEDGER.json   (docs/PERFORMANCE.md's table)
  /usr/bin/python3 bench/ledger.py --table LEDGER.json      (the table a run prints)

It writes bench/ledger/<commit>.json, <commit> being the 12-digit short hash
of HEAD (with "-dirty" when the tree has changes), and prints a table: per
figure its value, its anchor, the spread of the rounds, the target where
the project set one, and whether it is met. A figure that cannot be
measured (a peer is not installed, a subcommand does not exist, a job
failed) is recorded as missing with the reason, never left out.

No two benchmarks may run at once on a host: run it under
`flock /tmp/chorus-bench.lock` (make bench does). The binaries come from
BUILD_DIR (default build/); the MPI peers and the STREAM copy are compiled
into BUILD_DIR/ledger-peers/ with each MPI's own mpicxx. Every job gets a
calibration cache of the run's own (XDG_CACHE_HOME in a temporary directory,
removed at the end), so the user's cache is neither read nor written.

Statistics. Each round gives the figure's value and its anchor's. A ratio
figure's value is the median over rounds of the per-round ratio; an absolute
one's the median of its values; a stability figure's the max/min over its
jobs. The spread is the relative range of the per-round figures,
(max - min) / median (for max/min figures: how far the max/min of the first
half of the jobs is from the second half's, over the value);
scripts/ledger-compare flags a regression only where a change exceeds it.
"""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "compare"))
from perf_json import perf_rows  # noqa: E402
from join import rows as sweep_rows  # noqa: E402  (bench/compare/join.py: an MPI sweep's rows)

PYTHON = "/usr/bin/python3"  # numpy and torch load there only


class Missing(Exception):
    """A figure that cannot be measured here; the text says why."""


# ---------------------------------------------------------------------------
# The registry.

FIGURES = []


def figure(name, unit, what, anchor, quick, measure, stat="anchor/value", better="higher",
           target=None, group=None, anchor_unit="us"):
    """Registers a figure.

    name     unique, stable across runs (ledger-compare matches on it)
    unit     what the value is counted in
    what     one line: what is measured and how
    anchor   what it is measured against, in the same run
    quick    whether `make bench QUICK=1` runs it too
    measure  ctx -> [(value, anchor value)] per round (anchor value None where
             the figure is absolute); raises Missing with a reason
    stat     "anchor/value" (median of per-round anchor/value: a speed ratio
             from two times), "value/anchor", "value" (median of values),
             "max/min" (over the rounds, each round a fresh job)
    better   "higher" or "lower": which way a change is an improvement
    target   None, or (op, bound, text): op "<=" or ">=", bound a number or a
             function of the figure's record (e.g. of its anchor's max/min)
    anchor_unit  what the anchor's own values are counted in ("us": a time)
    """
    assert all(f["name"] != name for f in FIGURES), name
    FIGURES.append(dict(name=name, unit=unit, what=what, anchor=anchor, quick=quick,
                        measure=measure, stat=stat, better=better, target=target,
                        group=group or name.split(" ")[0], anchor_unit=anchor_unit))


# ---------------------------------------------------------------------------
# The run's context: paths, the rounds, shared measurements.

class Context:
    def __init__(self, args):
        self.quick = args.quick
        self.rounds = args.rounds or 3
        self.build = os.path.abspath(os.environ.get("BUILD_DIR", os.path.join(ROOT, "build")))
        self.perf = os.path.join(self.build, "tools", "chorus-perf")
        self.run = os.path.join(self.build, "tools", "chorus-run")
        self.sim = os.path.join(self.build, "tools", "chorus-sim")
        self.peers = os.path.join(self.build, "ledger-peers")
        self.scratch = tempfile.mkdtemp(prefix="chorus-ledger-")
        self.env = dict(os.environ, XDG_CACHE_HOME=os.path.join(self.scratch, "cache"),
                        PYTHONPATH=os.path.join(self.build, "python"),
                        PYTHONDONTWRITEBYTECODE="1")
        for k in ("CHORUS_ALGO", "CHORUS_TUNING_FILE", "CHORUS_TUNER", "CHORUS_TRANSPORT"):
            self.env.pop(k, None)
        self.memo = {}
        self.verbose = args.verbose

    def once(self, key, fn):
        """fn() the first time `key` is asked for; the same result (or Missing) after."""
        if key not in self.memo:
            try:
                self.memo[key] = ("ok", fn())
            except Missing as e:
                self.memo[key] = ("missing", str(e))
            except Exception as e:  # noqa: BLE001  (recorded as the figures' reason)
                self.memo[key] = ("missing", f"{type(e).__name__}: {short(str(e))}")
        kind, value = self.memo[key]
        if kind == "missing":
            raise Missing(value)
        return value

    def need(self, path, what):
        if not os.access(path, os.X_OK):
            raise Missing(f"{what} is not built ({os.path.relpath(path, ROOT)})")
        return path

    def note(self, text):
        if self.verbose:
            print(f"  .. {text}", file=sys.stderr, flush=True)

    def close(self):
        shutil.rmtree(self.scratch, ignore_errors=True)


def short(text, limit=300):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def run(cmd, env, timeout=600, check=True):
    """Runs cmd; its stdout. A failure raises Missing with the tail of stderr."""
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Missing(f"{os.path.basename(cmd[0])} ran past {timeout} s") from None
    except FileNotFoundError:
        raise Missing(f"{cmd[0]} is not installed") from None
    if check and p.returncode != 0:
        raise Missing(f"{' '.join(os.path.basename(c) for c in cmd[:3])}... exited "
                      f"{p.returncode}: {short(p.stderr[-600:] or p.stdout[-600:])}")
    return p.stdout


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def size_name(nbytes):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def sweep_sizes(lo, hi, factor):
    out, s = [], parse_size(lo)
    while s <= parse_size(hi):
        out.append(s)
        s *= factor
    return out


# ---------------------------------------------------------------------------
# The peers: MPI sweeps (bench/compare/mpi_allreduce.cc) and STREAM copy.

def peer(ctx, name):
    """Path of a compiled peer (openmpi, mpich, stream), compiled once per run."""
    def build():
        os.makedirs(ctx.peers, exist_ok=True)
        compare = os.path.join(HERE, "compare")
        how = {"openmpi": (["mpicxx.openmpi", "-O2"], "mpi_allreduce.cc", []),
               "mpich": (["mpicxx.mpich", "-O2"], "mpi_allreduce.cc", []),
               "stream": (["g++", "-O3", "-march=native"], "stream_copy.cc", ["-pthread"])}[name]
        out = os.path.join(ctx.peers, name)
        if not shutil.which(how[0][0]):
            raise Missing(f"{how[0][0]} is not installed (scripts/install-deps.sh openmpi-bin "
                          "libopenmpi-dev mpich libmpich-dev)")
        run(how[0] + ["-std=c++20", "-o", out, os.path.join(compare, how[1])] + how[2], ctx.env)
        return out
    return ctx.once(("peer", name), build)


def mpi_cmd(ctx, system, n, transport, sweep):
    exe = peer(ctx, system)
    if system == "openmpi":
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        btl = ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"] \
            if transport == "tcp" else ["--mca", "btl", "vader,self"]
        return ["mpirun.openmpi"] + root + ["--oversubscribe", "-np", str(n)] + btl + [exe] + sweep
    if transport == "tcp":
        raise Missing("MPICH runs over shared memory only in this ledger")
    return ["mpirun.mpich", "-np", str(n), exe] + sweep


def mpi_times(ctx, system, n, transport, sweep):
    """{size: out-of-place us} of one MPI job."""
    out = run(mpi_cmd(ctx, system, n, transport, sweep), ctx.env)
    path = os.path.join(ctx.scratch, "mpi.txt")
    with open(path, "w") as f:
        f.write(out)
    rows = sweep_rows(path)
    if not rows:
        raise Missing(f"{system} printed no rows: {short(out[-300:])}")
    return {size: t[0] for size, t in rows.items()}


def chorus_times(ctx, n, transport, sweep, extra=()):
    """{size: out-of-place us} of one chorus-perf job (its automatic pick)."""
    ctx.need(ctx.perf, "chorus-perf")
    try:
        rows = perf_rows(ctx.perf, ["allreduce", "--ranks", str(n), "--transport", transport,
                                    "-c", "0"] + sweep + list(extra), ctx.env)
    except subprocess.CalledProcessError as e:
        raise Missing(f"chorus-perf exited {e.returncode}") from None
    return {r["size_B"]: r["out_of_place"]["time_us"] for r in rows if r["out_of_place"]}


def stream_rate(ctx):
    """GB/s of the host's STREAM copy on 2 threads (best of its repetitions)."""
    out = run([peer(ctx, "stream"), "--threads", "2", "--bytes", str(128 << 20), "--reps", "5"],
              ctx.env)
    m = re.search(r"best ([0-9.]+) GB/s", out)
    if not m:
        raise Missing(f"stream_copy printed no rate: {short(out)}")
    return float(m.group(1))


# ---------------------------------------------------------------------------
# AllReduce against Open MPI and MPICH, and against the STREAM copy.

# (n, transport) -> sweeps (each one job per system and round): small sizes
# with many calls, large ones with few.
SWEEPS_FULL = {
    (2, "shm"): [("8", "32K", 8, 300, 30), ("512K", "256M", 8, 5, 2)],
    (4, "shm"): [("8", "32K", 8, 100, 10), ("512K", "256M", 8, 3, 1)],
    (2, "tcp"): [("8", "32K", 8, 200, 20), ("1M", "16M", 4, 5, 2)],
}
SWEEPS_QUICK = {
    (2, "shm"): [("8", "32K", 64, 200, 20), ("4M", "256M", 64, 3, 1)],
    (4, "shm"): [("8", "512", 64, 200, 20)],
    (2, "tcp"): [("8", "4K", 8, 200, 20)],
}


def sweep_args(lo, hi, factor, iters, warmup):
    return ["-b", lo, "-e", hi, "-f", str(factor), "-n", str(iters), "-w", str(warmup)]


def allreduce_rounds(ctx, n, transport):
    """Per round {system: {size: us}}, systems taking turns; shm rounds also
    measure the STREAM copy ("stream": GB/s)."""
    def measure():
        sweeps = (SWEEPS_QUICK if ctx.quick else SWEEPS_FULL)[(n, transport)]
        # MPICH only in the full ledger: its ranks poll, and on 2 busy cores its
        # small sizes alone take longer than the quick ledger has.
        systems = ["chorus", "openmpi"] + (["mpich"] if transport == "shm" and not ctx.quick
                                           else [])
        # One unrecorded job first: the run's calibration cache learns this N and link.
        for lo, hi, factor, iters, warm in sweeps:
            chorus_times(ctx, n, transport, sweep_args(lo, hi, factor, iters, warm))
        rounds = []
        for r in range(ctx.rounds):
            got = {}
            for system in systems:
                times = {}
                for lo, hi, factor, iters, warm in sweeps:
                    sweep = sweep_args(lo, hi, factor, iters, warm)
                    try:
                        times.update(chorus_times(ctx, n, transport, sweep) if system == "chorus"
                                     else mpi_times(ctx, system, n, transport, sweep))
                    except Missing as e:
                        times = e
                        break
                got[system] = times
            if transport == "shm" and n == 2:
                try:
                    got["stream"] = stream_rate(ctx)
                except Missing as e:
                    got["stream"] = e
            ctx.note(f"allreduce N={n} {transport}: round {r + 1} of {ctx.rounds}")
            rounds.append(got)
        return rounds
    return ctx.once(("allreduce", n, transport), measure)


def pairs(rounds, system, anchor, size):
    out = []
    for got in rounds:
        for key in (system, anchor):
            if isinstance(got.get(key), Missing):
                raise got[key]
        a, b = got[system], got[anchor]
        if size not in a or size not in b:
            raise Missing(f"no row at {size} B in a round")
        out.append((a[size], b[size]))
    return out


def register_allreduce():
    peers = {"openmpi": "Open MPI", "mpich": "MPICH"}
    full_sizes = {key: sorted({s for lo, hi, f, _, _ in sw for s in sweep_sizes(lo, hi, f)})
                  for key, sw in SWEEPS_FULL.items()}
    quick_sizes = {key: sorted({s for lo, hi, f, _, _ in sw for s in sweep_sizes(lo, hi, f)})
                   for key, sw in SWEEPS_QUICK.items()}
    for (n, transport), sizes in full_sizes.items():
        where = f"{transport} N={n}" + (" (oversubscribed)" if n > os.cpu_count() else "")
        for system, label in peers.items():
            if system == "mpich" and transport == "tcp":
                continue
            for size in sizes:
                target = None
                if transport == "tcp" and system == "openmpi" and size <= 4096:
                    target = (">=", 1.0, ">= 1.0x Open MPI's tcp (issue 40)")
                if transport == "shm" and n == 4 and system == "openmpi" and size <= 512:
                    target = (">=", 1.0, ">= 1.0x Open MPI --oversubscribe (issue 40)")
                figure(f"allreduce {transport} N={n} {size_name(size)} vs {label}",
                       unit=f"x {label}",
                       what=f"AllReduce float32 sum, {where}, out of place; "
                            f"{label}'s time / chorus's (chorus-perf, auto pick)",
                       anchor=f"{label} (bench/compare/mpi_allreduce.cc)",
                       quick=system == "openmpi" and size in quick_sizes.get((n, transport), []),
                       measure=lambda ctx, n=n, t=transport, s=system, m=size:
                           pairs(allreduce_rounds(ctx, n, t), "chorus", s, m),
                       target=target, group="allreduce")

    def floor_share(ctx):
        out = []
        m = 256 << 20
        for got in allreduce_rounds(ctx, 2, "shm"):
            for key in ("chorus", "stream"):
                if isinstance(got.get(key), Missing):
                    raise got[key]
            if m not in got["chorus"]:
                raise Missing("no 256 MiB row in a round")
            floor_us = 2 * 2 * m / (got["stream"] * 1e9) * 1e6
            out.append((got["chorus"][m], floor_us))
        return out
    figure("allreduce shm N=2 256 MiB vs STREAM copy", unit="share of the floor",
           what="the memory-traffic floor (2 N M bytes at the host's STREAM copy rate, "
                "measured in the same round) over chorus's 256 MiB time",
           anchor="STREAM copy, 2 threads (bench/compare/stream_copy.cc)", quick=True,
           measure=floor_share, group="allreduce", anchor_unit="us (the floor's time)")

    def stream_control(ctx):
        out = []
        for got in allreduce_rounds(ctx, 2, "shm"):
            if isinstance(got.get("stream"), Missing):
                raise got["stream"]
            out.append((got["stream"], None))
        return out
    figure("host STREAM copy", unit="GB/s",
           what="the host's STREAM copy on 2 threads, once per AllReduce round: a control "
                "that shows a slow or bimodal host", anchor="none (a control itself)",
           quick=True, measure=stream_control, stat="value", group="host", anchor_unit="")


# ---------------------------------------------------------------------------
# Stability over fresh jobs against Open MPI's.

def stability_jobs(ctx):
    def measure():
        import stability
        jobs = 6 if ctx.quick else 10
        sizes = ["64K", "8M"]
        a = types.SimpleNamespace(transport="shm", ranks=2, mpi=peer(ctx, "openmpi"), iters=50)
        got = {(s, k): [] for s in sizes for k in ("chorus", "openmpi")}
        chorus_times(ctx, 2, "shm", ["-b", "64K", "-e", "8M", "-f", "128", "-n", "20"])
        for j in range(jobs):
            for s in sizes:
                t = chorus_times(ctx, 2, "shm", ["-b", s, "-e", s, "-n", "50", "-w", "10"])
                got[(s, "chorus")].append(t[parse_size(s)])
                got[(s, "openmpi")].append(stability.mpi_time(a, s))
            ctx.note(f"stability: job {j + 1} of {jobs}")
        return got
    return ctx.once("stability", measure)


def register_stability():
    for s in ("64K", "8M"):
        def measure(ctx, s=s):
            got = stability_jobs(ctx)
            return list(zip(got[(s, "chorus")], got[(s, "openmpi")]))
        figure(f"stability shm N=2 {size_name(parse_size(s))}", unit="max/min over jobs",
               what=f"AllReduce {s} shm N=2: max/min of the per-job mean time over fresh "
                    "chorus-perf jobs (10; 6 in the quick ledger), jobs taking turns with "
                    "Open MPI's", anchor="Open MPI's max/min over its jobs in the same run",
               quick=True, measure=measure, stat="max/min", better="lower",
               target=("<=", lambda rec: max(1.5, rec["anchor_value"]),
                       "<= max(1.5, Open MPI's max/min) (issue 40)"), group="stability",
               anchor_unit="max/min")


# ---------------------------------------------------------------------------
# torch: all_reduce and the DDP step against gloo.

def torch_job(ctx, script, args):
    ctx.need(ctx.run, "chorus-run")
    if not os.path.exists(os.path.join(ctx.build, "python", "chorus", "torch")):
        raise Missing("the torch backend is not built (build/python/chorus/torch)")
    return run([ctx.run, "-n", "2", PYTHON, os.path.join(HERE, "torch", script)] + args,
               ctx.env, timeout=900)


def torch_allreduce_rounds(ctx):
    def measure():
        lo, hi, factor = ("4K", "1M", "256") if ctx.quick else ("4K", "16M", "16")
        rounds = []
        for r in range(ctx.rounds):
            out = torch_job(ctx, "allreduce.py", ["-b", lo, "-e", hi, "-f", factor,
                                                  "--seconds", "0.2"])
            got = {}
            for line in out.splitlines():
                f = line.split("] ", 1)[-1].split()
                # size unit gloo_us gloo_busbw chorus_us chorus_busbw ratio wrong
                if len(f) == 8 and f[1] in ("B", "KiB", "MiB", "GiB"):
                    if int(f[7]) != 0:
                        raise Missing(f"torch all_reduce: {f[7]} wrong elements at {f[0]} {f[1]}")
                    got[f"{f[0]} {f[1]}"] = (float(f[4]), float(f[2]))
            if not got:
                raise Missing(f"bench/torch/allreduce.py printed no rows: {short(out[-300:])}")
            rounds.append(got)
            ctx.note(f"torch all_reduce: round {r + 1}")
        return rounds
    return ctx.once("torch_allreduce", measure)


def ddp_rounds(ctx):
    def measure():
        rounds = []
        for r in range(2 if ctx.quick else ctx.rounds):
            out = torch_job(ctx, "ddp.py", ["--rounds", "1", "--steps", "3" if ctx.quick else "6"])
            t = dict(re.findall(r"(gloo|chorus): median step\s+([0-9.]+) ms", out))
            if set(t) != {"gloo", "chorus"}:
                raise Missing(f"bench/torch/ddp.py printed no step times: {short(out[-300:])}")
            rounds.append((float(t["chorus"]), float(t["gloo"])))
            ctx.note(f"ddp: round {r + 1}")
        return rounds
    return ctx.once("ddp", measure)


def register_torch():
    for size, quick in (("4 KiB", True), ("64 KiB", False), ("1 MiB", True), ("16 MiB", False)):
        def measure(ctx, size=size):
            rounds = torch_allreduce_rounds(ctx)
            if any(size not in got for got in rounds):
                raise Missing(f"no {size} row")
            return [got[size] for got in rounds]
        figure(f"torch all_reduce N=2 {size} vs gloo", unit="x gloo",
               what=f"torch.distributed all_reduce of {size} float32 in place, 2 ranks "
                    "(bench/torch/allreduce.py, a fresh job per round): gloo's time / chorus's",
               anchor="gloo in the same processes", quick=quick, measure=measure, group="torch")
    figure("torch DDP step N=2 vs gloo", unit="x gloo",
           what="DistributedDataParallel step of a 25M-parameter MLP, 2 ranks "
                "(bench/torch/ddp.py, a fresh job per round): gloo's median step / chorus's",
           anchor="gloo in the same processes", quick=True, measure=ddp_rounds, group="torch",
           anchor_unit="ms")


# ---------------------------------------------------------------------------
# The tuner: regret, the cost of learning, the model's error.

def regret_rounds(ctx, ranks, transport, launcher=None):
    def measure():
        rounds = []
        e = "1M" if ctx.quick else "16M"
        for r in range(2 if ctx.quick else 3):
            cmd = [PYTHON, os.path.join(HERE, "tuner_regret.py"), "--perf", ctx.perf,
                   "--ranks", ranks, "--transport", transport, "-b", "8", "-e", e, "-f", "16",
                   "--trials", "1", "--jobs", "2", "--reps", "2", "--min-time", "3"]
            if launcher:
                cmd += ["--launcher", launcher]
            out = run(cmd, ctx.env, timeout=1800)
            m = re.search(r"worst regret \(jobs \[[0-9, ]*\]\): ([0-9.]+|nan)", out)
            if not m:
                raise Missing(f"tuner_regret.py printed no worst regret: {short(out[-300:])}")
            rounds.append((float(m.group(1)), 1.0))
            ctx.note(f"regret N={ranks} {transport}: round {r + 1}")
        return rounds
    return ctx.once(("regret", ranks, transport, launcher), measure)


def learning_cost(ctx, first):
    """8 B, N=2 shm, out of place: the default tuner's mean per call over 30-call
    jobs (no warm-up: every call counts) against the best algorithm forced in
    jobs taking turns with them. first: each job the first of a fresh cache;
    else the jobs follow a 300-call learning job in their cache. A round's
    value and anchor are the medians of its 3 jobs of each, so that one
    hiccup in a 30-call job does not decide the round."""
    def measure():
        ctx.need(ctx.perf, "chorus-perf")
        forced = "recursive_doubling"
        args = ["allreduce", "--ranks", "2", "--transport", "shm", "-b", "8", "-e", "8",
                "-c", "0", "-w", "0", "--min-time", "0", "-n", "30"]
        rounds = []
        for r in range(ctx.rounds):
            cache = tempfile.mkdtemp(dir=ctx.scratch)
            env = dict(ctx.env, XDG_CACHE_HOME=cache)
            if not first:
                perf_rows(ctx.perf, args[:-2] + ["-n", "300"], env)
            auto, best = [], []
            for _ in range(3):
                if first:
                    shutil.rmtree(cache, ignore_errors=True)
                    os.makedirs(cache)
                auto.append(perf_rows(ctx.perf, args + ["-a", "auto"], env)[0])
                best.append(perf_rows(ctx.perf, args + ["-a", forced], env)[0])
            rounds.append((statistics.median(x["out_of_place"]["time_us"] for x in auto),
                           statistics.median(x["out_of_place"]["time_us"] for x in best)))
            shutil.rmtree(cache, ignore_errors=True)
        return rounds
    return ctx.once(("learning", first), measure)


def model_error_rounds(ctx):
    def measure():
        rounds = []
        for r in range(2 if ctx.quick else 3):
            path = os.path.join(ctx.scratch, "fidelity.json")
            run([PYTHON, os.path.join(HERE, "model_fidelity.py"), "--perf", ctx.perf, "--ranks",
                 "2", "--transport", "shm", "-e", "1M" if ctx.quick else "64M", "--reps",
                 "1" if ctx.quick else "2", "--json", path], dict(ctx.env), timeout=1800)
            with open(path) as f:
                rounds.append((json.load(f)["median_abs_err_pct"], None))
            ctx.note(f"model error: round {r + 1}")
        return rounds
    return ctx.once("model_error", measure)


def register_tuner():
    for ranks, transport, quick in (("2", "shm", True), ("4", "shm", False), ("2", "tcp", False)):
        figure(f"tuner regret {transport} N={ranks}", unit="x best",
               what=f"learned tuner's worst regret over sizes 8 B-16 MiB (1 MiB quick), "
                    f"{transport} N={ranks}: pick's time / best algorithm's in the trial's "
                    "-a all runs, job 2 from a fresh cache (bench/tuner_regret.py, one trial "
                    "per round)", anchor="best algorithm, same trial", quick=quick,
               measure=lambda ctx, r=ranks, t=transport: regret_rounds(ctx, r, t),
               stat="value", better="lower", group="tuner", anchor_unit="x")
    figure("tuner learning cost, later jobs, 8 B", unit="x forced",
           what="default tuner, N=2 shm 8 B out of place: mean per call of 30-call jobs "
                "(no warm-up) after a 300-call learning job in the same fresh cache, against "
                "recursive_doubling forced in 30-call jobs (per round the median of 3 jobs of "
                "each)", anchor="recursive_doubling forced",
           quick=True, measure=lambda ctx: learning_cost(ctx, False), stat="value/anchor",
           better="lower", target=("<=", 1.10, "<= 1.10x the best from the second job (issue 40)"),
           group="tuner")
    figure("tuner learning cost, first job, 8 B", unit="x forced",
           what="as above, each job the first of a fresh cache",
           anchor="recursive_doubling forced", quick=True,
           measure=lambda ctx: learning_cost(ctx, True), stat="value/anchor", better="lower",
           target=("<=", 2.0, "<= 2x the best in the first job (issue 40)"), group="tuner")
    figure("model median error shm N=2", unit="% |error|",
           what="machine model fitted by a separate calibration run: median |measured - "
                "predicted| / measured over every algorithm and size of -a all "
                "(bench/model_fidelity.py, 16 B-64 MiB; 1 MiB quick)",
           anchor="measured times in the same run", quick=True, measure=model_error_rounds,
           stat="value", better="lower", group="tuner", anchor_unit="")


# ---------------------------------------------------------------------------
# The simulator as the command line runs it.

TIMED = r"""
import resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
dt = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(p.returncode, dt, rss, p.stderr[-300:].replace("\n", " "))
"""


def sim_rounds(ctx, args):
    """Per round (wall s, peak RSS MB) of one chorus-sim command, each in a fresh
    process whose only child it is (so RUSAGE_CHILDREN's peak is its)."""
    def measure():
        ctx.need(ctx.sim, "chorus-sim")
        rounds = []
        for _ in range(2 if ctx.quick else 3):
            out = run([PYTHON, "-c", TIMED, ctx.sim] + args, ctx.env, timeout=900)
            code, wall, rss, err = out.split(" ", 3) if out.count(" ") >= 3 else (out.split() + [""])[:4]
            if int(code) != 0:
                raise Missing(f"chorus-sim {' '.join(args)} exited {code}: {err.strip()}")
            rounds.append((float(wall), int(rss) / 1024))
        return rounds
    return ctx.once(("sim", tuple(args)), measure)


LINK = ["--alpha", "2us", "--beta", "25GB/s"]  # docs/ALGORITHMS.md's scale example


def register_sim():
    cases = [("ring 1024 ranks", ["allreduce", "--ranks", "1024", "--bytes", "64M", "--algo",
                                  "ring", "--topology", "switch"] + LINK, 1.0, 200.0, True),
             ("halving_doubling 65536 ranks", ["allreduce", "--ranks", "65536", "--bytes", "64M",
                                               "--algo", "halving_doubling", "--topology",
                                               "switch"] + LINK, 1.0, None, True)]
    for label, args, wall, mem, quick in cases:
        cmd = "chorus-sim " + " ".join(args)
        figure(f"sim {label} wall", unit="s", what=f"wall time of `{cmd}`, a fresh process "
               "per round", anchor="none (absolute; the target is the bound)", quick=quick,
               measure=lambda ctx, a=args: [(w, None) for w, _ in sim_rounds(ctx, a)],
               stat="value", better="lower", anchor_unit="",
               target=("<=", wall, f"< {wall:g} s (issue 40)"), group="sim")
        figure(f"sim {label} peak memory", unit="MB",
               what=f"peak resident memory of `{cmd}` (getrusage of the child)",
               anchor="none (absolute)", quick=quick,
               measure=lambda ctx, a=args: [(m, None) for _, m in sim_rounds(ctx, a)],
               stat="value", better="lower", anchor_unit="",
               target=("<=", mem, f"< {mem:g} MB (issue 40)") if mem else None, group="sim")


# ---------------------------------------------------------------------------
# Shrink against a fresh start; the deterministic mode; start-up; overlap.

def shrink_rounds(ctx, ranks, testbed=None):
    def measure():
        import shrink
        ctx.need(ctx.run, "chorus-run")
        args = types.SimpleNamespace(testbed=testbed, chorus_run=ctx.run,
                                     transport=None if testbed else "shm")
        rounds = []
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(ctx.env)
        try:
            for r in range(3 if ctx.quick or testbed else 5):
                try:
                    rounds.append(shrink.job(args, "shrink", ranks))
                except SystemExit as e:
                    raise Missing(f"bench/shrink.py: {short(str(e))}") from None
                ctx.note(f"shrink N={ranks}: job {r + 1}")
        finally:
            os.environ.clear()
            os.environ.update(saved)
        return rounds
    return ctx.once(("shrink", ranks, testbed), measure)


def register_shrink():
    for ranks, quick in ((4, False), (8, True)):
        target_ms = ("<=", 10.0, "<= 10 ms median, never above 20 ms (issue 40)") \
            if ranks == 8 else None
        figure(f"shrink shm N={ranks}", unit="ms",
               what=f"Communicator.shrink after a SIGKILL, {ranks} ranks over shm: last "
                    "survivor seeing the failure to the last one returning (bench/shrink.py, "
                    "a fresh job per round)",
               anchor="a fresh chorus.init() of the survivors in the same job", quick=quick,
               measure=lambda ctx, n=ranks: shrink_rounds(ctx, n), stat="value",
               better="lower", target=target_ms, group="shrink", anchor_unit="ms")
        figure(f"shrink shm N={ranks} vs fresh start", unit="x faster",
               what="the fresh start's time / the shrink's, per job",
               anchor="a fresh chorus.init() of the survivors in the same job", quick=quick,
               measure=lambda ctx, n=ranks: shrink_rounds(ctx, n),
               target=(">=", 3.0, ">= 3x faster than a fresh start (issue 40)"), group="shrink",
               anchor_unit="ms")


def deterministic_rounds(ctx):
    def measure():
        rounds = []
        for _ in range(ctx.rounds):
            got = {}
            for det in (False, True):
                extra = ["--deterministic"] if det else []
                t = chorus_times(ctx, 2, "shm", ["-b", "8", "-e", "8", "-n", "500", "-w", "50"],
                                 extra)
                t.update(chorus_times(ctx, 2, "shm", ["-b", "16M", "-e", "16M", "-n", "10",
                                                      "-w", "3"], extra))
                got[det] = t
            rounds.append(got)
        return rounds
    return ctx.once("deterministic", measure)


def register_deterministic():
    for size, quick in ((8, True), (16 << 20, True)):
        figure(f"deterministic shm N=2 {size_name(size)}", unit="x default",
               what=f"AllReduce float32 {size_name(size)}, shm N=2: --deterministic's time / "
                    "the default mode's, jobs taking turns", anchor="the default mode (auto pick)",
               quick=quick,
               measure=lambda ctx, s=size: [(g[True][s], g[False][s])
                                            for g in deterministic_rounds(ctx)],
               stat="value/anchor", better="lower", group="deterministic")


STARTUP_RANK = r"""
import sys, time
import numpy as np
if sys.argv[1] == "chorus":
    import chorus
    comm = chorus.init()
    comm.allreduce(np.ones(1, np.float32))
print("FIRST", time.monotonic(), flush=True)
"""


def startup_rounds(ctx):
    def measure():
        ctx.need(ctx.run, "chorus-run")
        rounds = []

        def job(what):
            t0 = time.monotonic()
            out = run([ctx.run, "-n", "8", PYTHON, "-c", STARTUP_RANK, what], ctx.env, timeout=300)
            ends = [float(x) for x in re.findall(r"FIRST ([0-9.]+)", out)]
            if len(ends) != 8:
                raise Missing(f"{len(ends)} of 8 ranks reported: {short(out[-300:])}")
            return (max(ends) - t0) * 1e3
        for _ in range(ctx.rounds):
            rounds.append((job("chorus"), job("none")))
        return rounds
    return ctx.once("startup", measure)


def register_startup():
    figure("start-up N=8 to the first call", unit="ms",
           what="chorus-run -n 8 of Python ranks that import numpy and chorus, chorus.init() "
                "and make one AllReduce: from the launch to the last rank's return (shm, "
                "the run's calibration cache warm)",
           anchor="the same launch of ranks that import numpy only (the processes' own cost)",
           quick=True, measure=startup_rounds, stat="value", better="lower", group="startup",
           anchor_unit="ms")


OVERLAP_BYTES = 4 << 20


def overlap_job(ctx, progress):
    """One chorus-perf overlap job at 4 MiB, shm N=2: its (overlap, T / (A + C))."""
    ctx.need(ctx.perf, "chorus-perf")
    out = os.path.join(ctx.scratch, "overlap.json")
    env = dict(ctx.env, CHORUS_PROGRESS=progress)
    run([ctx.perf, "overlap", "--ranks", "2", "--transport", "shm", "-b", str(OVERLAP_BYTES),
         "-e", str(OVERLAP_BYTES), "-n", "5", "-w", "3", "--json", out], env)
    with open(out) as f:
        rows = json.load(f)["rows"]
    if not rows:
        raise Missing("chorus-perf overlap printed no row")
    r = rows[0]
    return r["overlap"], r["total_us"] / (r["allreduce_us"] + r["compute_us"])


def overlap_rounds(ctx):
    """Per round: {progress mode: (overlap, T / (A + C))}, the modes' jobs taking turns."""
    def measure():
        rounds = []
        for _ in range(ctx.rounds):
            rounds.append({mode: overlap_job(ctx, mode) for mode in ("thread", "caller")})
        return rounds
    return ctx.once("overlap", measure)


def register_overlap():
    figure("overlap N=2 shm 4 MiB", unit="overlap (1 full, 0 none)",
           what="chorus-perf overlap: (A + C - T) / min(A, C), an AllReduce_async against a "
                "compute loop of the same length with no chorus call until wait(), "
                "CHORUS_PROGRESS=thread (on 2 cores there is no spare core to overlap on)",
           anchor="the same jobs with CHORUS_PROGRESS=caller", quick=True,
           measure=lambda ctx: [(g["thread"][0], g["caller"][0]) for g in overlap_rounds(ctx)],
           stat="value", group="overlap", anchor_unit="overlap")
    figure("overlap N=2 shm 4 MiB time vs sequential", unit="x (A + C)",
           what="chorus-perf overlap: T / (A + C), CHORUS_PROGRESS=thread: what the progress "
                "thread costs where no core is spare",
           anchor="the same jobs with CHORUS_PROGRESS=caller", quick=True,
           measure=lambda ctx: [(g["thread"][1], g["caller"][1]) for g in overlap_rounds(ctx)],
           stat="value", better="lower", group="overlap", anchor_unit="x (A + C)",
           target=("<=", 1.05, "T <= A + C + 5% on 2 cores (issue 39)"))


# ---------------------------------------------------------------------------
# The testbed (network namespaces; root; the full ledger only).

def testbed(ctx, *args, check=True):
    return run([os.path.join(ROOT, "scripts", "testbed")] + list(args), ctx.env, check=check)


def testbed_up(ctx, name, hosts, rate):
    if os.geteuid() != 0:
        raise Missing("the testbed needs root")
    testbed(ctx, "down", "--name", name, check=False)
    testbed(ctx, "up", "--name", name, "--hosts", str(hosts), "--rate", rate)


def testbed_ring(ctx):
    def measure():
        name, rate_bits = "ledger", 1e9
        testbed_up(ctx, name, 8, "1gbit")
        try:
            rounds = []
            for _ in range(3):
                path = os.path.join(ctx.scratch, "ring.json")
                testbed(ctx, "run", "--name", name, "--", ctx.perf, "allreduce", "-b", "64M",
                        "-e", "64M", "-a", "ring", "-n", "3", "-w", "1", "--json", path)
                with open(path) as f:
                    bus = json.load(f)["rows"][0]["out_of_place"]["busbw_GBps"]
                rounds.append((bus, rate_bits / 8e9))
            return rounds
        finally:
            testbed(ctx, "down", "--name", name, check=False)
    return ctx.once("testbed_ring", measure)


HIER_SIZES = ("64K", "4M")


def testbed_hier(ctx, layout):
    def measure():
        h, k = (int(x) for x in layout.split("x"))
        name = "ledger"
        testbed_up(ctx, name, h, "500mbit")
        algos = "ring,halving_doubling,recursive_doubling,hier_two_level,hier_leader"
        try:
            rounds = {s: [] for s in HIER_SIZES}
            for _ in range(3):
                for s in HIER_SIZES:
                    path = os.path.join(ctx.scratch, "hier.json")
                    testbed(ctx, "run", "--name", name, "--ranks-per-host", str(k), "--",
                            ctx.perf, "allreduce", "-b", s, "-e", s, "-a", algos, "-n", "4",
                            "-w", "1", "--json", path)
                    with open(path) as f:
                        rows = json.load(f)["rows"]
                    t = {r["algo"]: r["out_of_place"]["time_us"] for r in rows
                         if r["out_of_place"]}
                    hier = min(v for a, v in t.items() if a.startswith("hier_"))
                    flat = min(v for a, v in t.items() if not a.startswith("hier_"))
                    rounds[s].append((hier, flat))
            return rounds
        finally:
            testbed(ctx, "down", "--name", name, check=False)
    return ctx.once(("testbed_hier", layout), measure)


def testbed_regret(ctx, layout):
    def measure():
        h, k = (int(x) for x in layout.split("x"))
        name = "ledger"
        testbed_up(ctx, name, h, "500mbit")
        try:
            launcher = (f"{os.path.join(ROOT, 'scripts', 'testbed')} run --name {name} "
                        f"--ranks-per-host {k} --")
            out = run([PYTHON, os.path.join(HERE, "tuner_regret.py"), "--perf", ctx.perf,
                       "--launcher", launcher, "--ranks", "0", "-b", "8", "-e", "4M", "-f", "64",
                       "--trials", "1", "--jobs", "2", "--reps", "1", "-n", "5",
                       "--min-time", "0"], ctx.env, timeout=600)
            m = re.search(r"worst regret \(jobs \[[0-9, ]*\]\): ([0-9.]+|nan)", out)
            if not m:
                raise Missing(f"tuner_regret.py printed no worst regret: {short(out[-300:])}")
            return [(float(m.group(1)), 1.0)]
        finally:
            testbed(ctx, "down", "--name", name, check=False)
    return ctx.once(("testbed_regret", layout), measure)


def testbed_shrink(ctx):
    def measure():
        name = "ledger"
        testbed_up(ctx, name, 8, "1gbit")
        try:
            return shrink_rounds(ctx, 8, testbed=name)
        finally:
            testbed(ctx, "down", "--name", name, check=False)
    return ctx.once("testbed_shrink", measure)


def register_testbed():
    figure("testbed ring % of link", unit="share of the link",
           what="ring AllReduce of 64 MiB on 8 hosts x 1 rank, switch at 1 gbit/s: busbw / "
                "the link's rate (scripts/testbed)", anchor="the link rate (1 gbit/s)",
           quick=False, measure=testbed_ring, stat="value/anchor", group="testbed",
           anchor_unit="GB/s")
    for layout in ("2x4", "4x2"):
        for s in HIER_SIZES:
            figure(f"testbed {layout} {size_name(parse_size(s))} hier vs best flat",
                   unit="x best flat",
                   what=f"AllReduce {s} on {layout} hosts x ranks at 500 mbit/s: the best flat "
                        "algorithm's time / the best hier_ algorithm's",
                   anchor="the best flat algorithm, same job", quick=False,
                   measure=lambda ctx, lay=layout, s=s: testbed_hier(ctx, lay)[s],
                   group="testbed")
        figure(f"tuner regret testbed {layout}", unit="x best",
               what=f"learned tuner's worst regret, 8 B-4 MiB, on {layout} hosts x ranks at "
                    "500 mbit/s, job 2 from a fresh cache, hier_ and flat algorithms both "
                    "eligible (bench/tuner_regret.py --launcher)",
               anchor="best algorithm, same trial", quick=False,
               measure=lambda ctx, lay=layout: testbed_regret(ctx, lay), stat="value",
               better="lower", target=("<=", 1.10, "<= 1.10 from the second job (issue 40)"),
               group="testbed", anchor_unit="x")
    figure("shrink testbed 8 hosts", unit="ms",
           what="Communicator.shrink after a SIGKILL, 8 hosts x 1 rank over tcp at 1 gbit/s "
                "(bench/shrink.py --testbed)",
           anchor="a fresh chorus.init() of the survivors in the same job", quick=False,
           measure=testbed_shrink, stat="value", better="lower", group="testbed",
           anchor_unit="ms")
    figure("shrink testbed 8 hosts vs fresh start", unit="x faster",
           what="the fresh start's time / the shrink's, per job",
           anchor="a fresh chorus.init() of the survivors in the same job", quick=False,
           measure=testbed_shrink, target=(">=", 3.0, ">= 3x faster than a fresh start "
                                            "(issue 40)"), group="testbed", anchor_unit="ms")


register_allreduce()
register_stability()
register_torch()
register_tuner()
register_sim()
register_shrink()
register_deterministic()
register_startup()
register_overlap()
register_testbed()


# ---------------------------------------------------------------------------
# Statistics and the record of one figure.

def summarize(fig, rounds):
    """The ledger record of a figure from its rounds [(value, anchor)]."""
    values = [v for v, _ in rounds]
    anchors = [a for _, a in rounds]
    rec = {k: fig[k] for k in ("name", "unit", "what", "anchor", "anchor_unit", "better",
                               "group")}
    rec["statistic"] = fig["stat"]
    rec["rounds"] = [{"value": v, "anchor": a} for v, a in rounds]
    have_anchor = all(a is not None for a in anchors)
    if fig["stat"] == "max/min":
        rec["value"] = max(values) / min(values)
        rec["anchor_value"] = max(anchors) / min(anchors) if have_anchor else None
        half = len(values) // 2
        if half >= 2:
            a, b = values[:half], values[half:]
            rec["spread"] = abs(max(a) / min(a) - max(b) / min(b)) / rec["value"]
        else:
            rec["spread"] = None
        per_round = values
    else:
        if fig["stat"] == "anchor/value":
            per_round = [a / v for v, a in rounds]
        elif fig["stat"] == "value/anchor":
            per_round = [v / a for v, a in rounds]
        else:
            per_round = values
        rec["per_round"] = per_round
        rec["value"] = statistics.median(per_round)
        rec["anchor_value"] = statistics.median(anchors) if have_anchor else None
        med = rec["value"]
        # One round has no spread to tell (None; ledger-compare then uses its floor).
        rec["spread"] = ((max(per_round) - min(per_round)) / abs(med)
                         if med and len(per_round) > 1 else None)
        rec["min"], rec["max"] = min(per_round), max(per_round)
    if fig["stat"] != "value" and fig["stat"] != "max/min":
        rec["value_median"] = statistics.median(values)
    rec["n_rounds"] = len(per_round)
    rec["target"] = None
    rec["met"] = None
    if fig["target"]:
        op, bound, text = fig["target"]
        b = bound(rec) if callable(bound) else bound
        rec["target"] = {"op": op, "bound": b, "text": text}
        rec["met"] = bool(rec["value"] <= b if op == "<=" else rec["value"] >= b)
        if fig["name"].startswith("shrink shm N=8") and fig["stat"] == "value":
            rec["met"] = rec["met"] and max(values) <= 20.0
    return rec


def measure_all(ctx, figures, budget=None):
    """Records of `figures`, in order. Past `budget` seconds from the start, the
    figures not begun are recorded as missing (the run's time bound holds)."""
    records = []
    start = time.monotonic()
    for fig in figures:
        t0 = time.monotonic()
        load0 = os.getloadavg()[0]
        if ctx.verbose:
            print(f"-- {fig['name']}", file=sys.stderr, flush=True)
        try:
            if budget is not None and t0 - start > budget:
                raise Missing(f"not begun: the run had used its {budget / 60:.0f} minutes")
            rounds = fig["measure"](ctx)
            if not rounds:
                raise Missing("no rounds")
            rec = summarize(fig, rounds)
        except Exception as e:  # noqa: BLE001  (any failure is recorded, never skipped)
            rec = {k: fig[k] for k in ("name", "unit", "what", "anchor", "anchor_unit", "better",
                               "group")}
            rec["missing"] = str(e) if isinstance(e, Missing) else \
                f"{type(e).__name__}: {short(str(e))}"
            rec["target"] = ({"op": fig["target"][0], "bound": None, "text": fig["target"][2]}
                             if fig["target"] else None)
            rec["met"] = None
        rec["seconds"] = round(time.monotonic() - t0, 1)
        rec["loadavg"] = round(load0, 2)  # the host's 1-minute load as the figure began
        records.append(rec)
    return records


# ---------------------------------------------------------------------------
# Output: the run's table, and the Markdown of docs/PERFORMANCE.md.

def fmt(x):
    if x is None:
        return "-"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def verdict(rec):
    if rec.get("missing"):
        return "missing"
    if rec["met"] is None:
        return ""
    return "met" if rec["met"] else "NOT met"


def row_cells(rec):
    if rec.get("missing"):
        return [rec["name"], "-", rec["unit"], rec["anchor"], "-", "-",
                rec["target"]["text"] if rec.get("target") else "", "missing: " + rec["missing"]]
    spread = "-" if rec.get("spread") is None else f"{100 * rec['spread']:.0f}%"
    anchor = fmt(rec.get("anchor_value"))
    if rec.get("anchor_value") is not None and rec.get("anchor_unit"):
        anchor += " " + rec["anchor_unit"]
    return [rec["name"], fmt(rec["value"]), rec["unit"], rec["anchor"], anchor, spread,
            rec["target"]["text"] if rec.get("target") else "", verdict(rec)]


def print_table(ledger, out=sys.stdout):
    head = ["figure", "value", "unit", "anchor", "anchor value", "spread", "target", ""]
    rows = [row_cells(r) for r in ledger["figures"]]
    for r in rows:
        r[3] = r[3][:40]
        r[6] = r[6][:40]
    width = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    print(f"# ledger {ledger['commit']} ({'quick' if ledger['quick'] else 'full'}), "
          f"{ledger['date']}, {ledger['host']['nproc']} cores, {ledger['host']['cpu']}", file=out)
    for r in [head] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, width)).rstrip(), file=out)


def markdown(ledger):
    """docs/PERFORMANCE.md's headline table of a ledger (deterministic: only the
    ledger's content enters)."""
    host = ledger["host"]
    lines = [f"Ledger `bench/ledger/{ledger['file']}`: commit {ledger['commit']}, "
             f"{ledger['date']}, {'quick' if ledger['quick'] else 'full'} run "
             f"(`make bench{' QUICK=1' if ledger['quick'] else ''}`, "
             f"{ledger['wall_s'] / 60:.1f} min), {host['nproc']} cores ({host['cpu']}), "
             f"load average {host['loadavg_start']:.1f} at the start and "
             f"{host['loadavg_end']:.1f} at the end, "
             f"{ledger['rounds']} rounds per figure unless the figure says otherwise. "
             "Value: the median over rounds of the per-round figure (ratios are >1 where "
             "chorus is faster, unless the unit says otherwise); spread: (max - min) / "
             "median of the per-round figures.",
             "",
             "| figure | value | unit | anchor | anchor value | spread | target | |",
             "|---|---|---|---|---|---|---|---|"]
    for rec in ledger["figures"]:
        cells = row_cells(rec)
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def host_facts():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(),
            "loadavg_start": os.getloadavg()[0]}


def commit_id():
    def git(*a):
        return subprocess.run(["git", "-C", ROOT] + list(a), capture_output=True,
                              text=True).stdout.strip()
    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/ledger")
    return head + ("-dirty" if dirty else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the subset (make bench QUICK=1)")
    ap.add_argument("--rounds", type=int, help="rounds per figure where the figure does not "
                    "say otherwise (default 3)")
    ap.add_argument("--only", help="only the figures whose name matches this regex")
    ap.add_argument("--out", help="the ledger file (default bench/ledger/<commit>.json)")
    ap.add_argument("--list", action="store_true", help="list the figures and exit")
    ap.add_argument("--markdown", metavar="LEDGER", help="print LEDGER's Markdown table")
    ap.add_argument("--table", metavar="LEDGER", help="print LEDGER's table")
    ap.add_argument("--budget", type=float, help="minutes after which the figures not begun "
                    "are recorded as missing (default 9 quick, 55 full)")
    ap.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    a = ap.parse_args()
    if a.markdown or a.table:
        with open(a.markdown or a.table) as f:
            ledger = json.load(f)
        if a.markdown:
            print(markdown(ledger))
        else:
            print_table(ledger)
        return 0
    figures = [f for f in FIGURES if (f["quick"] or not a.quick)
               and (not a.only or re.search(a.only, f["name"]))]
    if a.list:
        for f in figures:
            print(f"{'quick' if f['quick'] else 'full '}  {f['name']}  [{f['unit']}; anchor: "
                  f"{f['anchor']}]")
        return 0
    commit = commit_id()
    out = a.out or os.path.join(HERE, "ledger", f"{commit}.json")
    ctx = Context(a)
    start = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    host = host_facts()
    try:
        budget = a.budget if a.budget is not None else (9 if a.quick else 55)
        records = measure_all(ctx, figures, budget * 60)
    finally:
        ctx.close()
    host["loadavg_end"] = os.getloadavg()[0]
    ledger = {"commit": commit, "commit_form": "12-digit short hash of HEAD (-dirty: changes "
              "outside bench/ledger)", "file": os.path.basename(out), "date": date,
              "quick": a.quick, "rounds": ctx.rounds, "only": a.only, "host": host,
              "wall_s": round(time.monotonic() - start, 1),
              "children_cpu_s": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
                                      + resource.getrusage(resource.RUSAGE_CHILDREN).ru_stime, 1),
              "figures": records}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(ledger, f, indent=1)
        f.write("\n")
    print_table(ledger)
    print(f"# wrote {os.path.relpath(out)} in {ledger['wall_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
