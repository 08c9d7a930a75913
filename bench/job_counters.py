#!/usr/bin/env python3
"""One chorus-perf row in fresh jobs, with what the OS counts for each job.

For each of --jobs fresh jobs (N = 2 by default): the row's out-of-place
time, the host's steal time over the job (from /proc/stat), and perf stat's
software counters of the job (context switches, CPU migrations, page faults,
task clock). Where a row is bimodal between jobs, this tells whether the slow
jobs fault more pages, migrate more, sleep more or lose the CPU to the host.

  /usr/bin/python3 bench/job_counters.py [--perf build/tools/chorus-perf] \
      [--size 8M] [--algo ring] [--buffers user] [--ranks 2] [--jobs 12]
"""
import argparse
import pathlib
import subprocess


def cpu_times():
    """(steal, total) jiffies of the host so far."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]), sum(int(x) for x in fields[1:9])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perf", default="build/tools/chorus-perf")
    ap.add_argument("--size", default="8M")
    ap.add_argument("--algo", default="auto")
    ap.add_argument("--buffers", default="user")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=12)
    a = ap.parse_args()
    # perf stat comes with Debian's linux-perf, which the build does not need.
    root = pathlib.Path(__file__).resolve().parent.parent
    subprocess.run([str(root / "scripts" / "install-deps.sh"), "linux-perf"], check=True)
    events = ["context-switches", "cpu-migrations", "page-faults", "task-clock"]
    print(f"# allreduce float32 sum, N={a.ranks} shm, {a.size}, {a.buffers} buffers, "
          f"algorithm {a.algo}: out-of-place time (us) and counters per job")
    for job in range(a.jobs):
        s0, t0 = cpu_times()
        out = subprocess.run(
            ["perf", "stat", "-x,", "-e", ",".join(events), a.perf, "allreduce", "--ranks",
             str(a.ranks), "--transport", "shm", "-b", a.size, "-e", a.size, "-n", "50", "-w", "10",
             "-c", "0", "--buffers", a.buffers, "-a", a.algo],
            capture_output=True, text=True, check=True)
        s1, t1 = cpu_times()
        row = next(l for l in out.stdout.splitlines() if l.strip() and not l.startswith("#"))
        counters = {}
        for line in out.stderr.splitlines():
            parts = line.split(",")
            if len(parts) > 3 and parts[2] in events:
                try:
                    counters[parts[2]] = float(parts[0])
                except ValueError:
                    counters[parts[2]] = float("nan")
        steal = 100.0 * (s1 - s0) / max(1, t1 - t0)
        print(f"job {job}: {float(row.split()[5]):9.1f} us  steal {steal:5.1f}%  "
              f"cs {counters.get('context-switches', 0):.0f} "
              f"mig {counters.get('cpu-migrations', 0):.0f} "
              f"pf {counters.get('page-faults', 0):.0f} "
              f"task-clock {counters.get('task-clock', 0):.0f} ms")


if __name__ == "__main__":
    main()
