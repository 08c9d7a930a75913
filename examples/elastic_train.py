"""Elastic data-parallel training with the numpy binding: a rank dies, the
others go on, and a new process joins later.

    chorus-run -n 4 --elastic --replace 1 /usr/bin/python3 examples/elastic_train.py \\
        --kill-rank 3 --kill-at 10 --join-at 20

A linear model is trained by SGD on a fixed synthetic data set. Each step
takes the next global batch (the same on any number of ranks), every rank
computes the gradient of its shard of it, and an AllReduce sums them; so the
parameters follow the same path whatever the number of ranks, and a run
with a failure ends where a run without one does (up to rounding).

At step --kill-at, rank --kill-rank kills itself (SIGKILL). The survivors'
AllReduce raises; they shrink the communicator, agree on the last step
every one of them finished (a survivor whose update went through rolls it
back), re-shard the batch over the survivors and go on. At step --join-at
they grow the communicator by one: the process that chorus-run --replace
started joins (chorus.join(), since CHORUS_JOIN_GENERATION is set for it),
receives the step and the parameters from rank 0, and training goes on at
the original size.

Rank 0 prints the loss of every step and one line per event with the time
it cost; --log FILE writes the curve as CSV (step, loss, ranks, seconds),
--out FILE the final parameters (numpy .npy).
"""

import argparse
import os
import signal
import sys
import time

import numpy as np

import chorus

SAMPLES, FEATURES = 4096, 32


def data():
    """The data set and the true weights: the same in every process."""
    rng = np.random.default_rng(1234)
    x = rng.standard_normal((SAMPLES, FEATURES))
    w_true = rng.standard_normal(FEATURES)
    y = x @ w_true + 0.01 * rng.standard_normal(SAMPLES)
    return x, y


def batch_indices(step, batch):
    """The global batch of a step: the same whatever the number of ranks."""
    start = (step * batch) % SAMPLES
    return (np.arange(batch) + start) % SAMPLES


def shard_gradient(w, x, y, idx, rank, size, batch):
    """This rank's part of the batch's gradient and squared error (summed over ranks
    they make the full batch's mean-squared-error gradient and loss)."""
    mine = np.array_split(idx, size)[rank]
    err = x[mine] @ w - y[mine]
    grad = (2.0 / batch) * (x[mine].T @ err)
    out = np.empty(FEATURES + 1)
    out[:FEATURES] = grad
    out[FEATURES] = (err @ err) / batch
    return out


def reference(args):
    """The same schedule on one process, without chorus: what every run must end at."""
    x, y = data()
    w = np.zeros(FEATURES)
    for step in range(args.steps):
        g = shard_gradient(w, x, y, batch_indices(step, args.batch), 0, 1, args.batch)
        w = w - args.lr * g[:FEATURES]
    return w


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--kill-rank", type=int, default=-1, help="the rank that dies (-1: none)")
    parser.add_argument("--kill-at", type=int, default=-1, help="the step at which it dies")
    parser.add_argument("--join-at", type=int, default=-1,
                        help="the step at which the survivors grow by one (-1: never)")
    parser.add_argument("--log", help="write the loss curve here (CSV)")
    parser.add_argument("--out", help="write the final parameters here (.npy)")
    parser.add_argument("--reference", action="store_true",
                        help="run the schedule on this process alone, without chorus")
    args = parser.parse_args()
    if args.reference:
        w = reference(args)
        if args.out:
            np.save(args.out, w)
        return

    x, y = data()
    joiner = bool(os.environ.get("CHORUS_JOIN_GENERATION"))
    w = np.zeros(FEATURES)
    step = 0
    if joiner:
        comm = chorus.join()
        # The members send where they are.
        state = comm.broadcast(np.zeros(FEATURES + 1), root=0)
        step, w = int(state[FEATURES]), state[:FEATURES].copy()
    else:
        comm = chorus.init()
    grown = joiner
    curve = []
    events = []
    prev_w = w.copy()
    while step < args.steps:
        if not grown and step == args.join_at:
            t0 = time.perf_counter()
            comm = comm.grow(1)
            state = np.empty(FEATURES + 1)
            state[:FEATURES], state[FEATURES] = w, step
            comm.broadcast(state, root=0)
            events.append(f"join at step {step}: grow to {comm.size} ranks and the state "
                          f"sent in {1e3 * (time.perf_counter() - t0):.1f} ms")
            grown = True
        if step == args.kill_at and comm.rank == args.kill_rank and not joiner:
            os.kill(os.getpid(), signal.SIGKILL)
        t_step = time.perf_counter()
        try:
            g = shard_gradient(w, x, y, batch_indices(step, args.batch), comm.rank, comm.size,
                               args.batch)
            g = comm.allreduce(g)
        except chorus.Error as e:
            t0 = time.perf_counter()
            comm = comm.shrink()
            # The last step every survivor finished: a survivor ahead rolls back.
            agreed = int(comm.allreduce(np.array([step], np.int64), op="min")[0])
            if agreed < step:
                w, step = prev_w, agreed
            events.append(f"failure at step {step} ({type(e).__name__}): shrunk to "
                          f"{comm.size} ranks in {1e3 * (time.perf_counter() - t0):.1f} ms")
            continue
        prev_w = w
        w = w - args.lr * g[:FEATURES]
        curve.append((step, g[FEATURES], comm.size, time.perf_counter() - t_step))
        if comm.rank == 0:
            print(f"step {step:3d} loss {g[FEATURES]:.6f} ranks {comm.size}", flush=True)
        step += 1

    if comm.rank == 0:
        for e in events:
            print("EVENT " + e, flush=True)
        if args.log:
            with open(args.log, "w") as f:
                f.write("step,loss,ranks,seconds\n")
                for s, loss, n, t in curve:
                    f.write(f"{s},{loss:.9g},{n},{t:.6f}\n")
        if args.out:
            np.save(args.out, w)
        print(f"elastic_train done: {args.steps} steps, {comm.size} ranks at the end", flush=True)
    comm.close()


if __name__ == "__main__":
    sys.exit(main())
