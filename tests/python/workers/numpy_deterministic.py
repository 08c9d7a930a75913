"""One rank of the deterministic reductions' check (run under chorus-run).

Two contributions (seeded, the same in every job) lie on two ranks of a
permutation of the job's ranks; the other ranks hold zeros. With
deterministic=True, every algorithm named below and the automatic choice
must give the same bits for allreduce, reduce_scatter and reduce, and those
bits must be the exact sum (fractions.Fraction) rounded once wherever every
contribution lies on its block's fixed point, and within the documented
bound elsewhere (docs/ALGORITHMS.md, "Deterministic reductions").

With the argument "env", the calls do not ask for it: CHORUS_DETERMINISTIC=1
does. Prints "numpy_deterministic OK <digest>": a hash of the result bits, which
the test compares between jobs of other sizes and transports.
"""

import hashlib
import sys
from fractions import Fraction

import numpy as np

import chorus

ALGOS = {
    "allreduce": [None, "ring", "bidir_ring", "halving_doubling", "recursive_doubling",
                  "double_binary_tree", "reduce_broadcast", "one_shot", "two_shot"],
    "reduce_scatter": [None, "ring", "bidir_ring", "recursive_halving"],
    "reduce": [None, "binomial", "pipelined_chain"],
}
# (significand bits with the implicit one, lowest normal exponent, highest exponent)
FORMATS = {np.float16: (11, -14, 15), np.float32: (24, -126, 127), np.float64: (53, -1022, 1023)}
# Fraction bits of the fixed point below the block's largest exponent (exact_sum.h).
FIXED = {np.float32: 45, np.float64: 91}
BLOCK = 64
K = 2  # contributions
# "env": the calls leave deterministic at False and CHORUS_DETERMINISTIC=1 asks for it.
DET = sys.argv[1:] != ["env"]


def wide(dtype, count, which, seed):
    """Contribution `which`: the whole finite range, subnormals, +-0, values that
    cancel the other contribution's, and the largest finite values."""
    rng = np.random.default_rng(seed)
    bits_t = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}[dtype]
    nbits = np.dtype(bits_t).itemsize * 8
    base = rng.integers(0, 2**nbits - 1, size=(K, count), dtype=bits_t, endpoint=True)
    x = base.view(dtype).copy()
    x[~np.isfinite(x)] = 0
    kind = rng.integers(0, 100, size=count)
    x[:, kind < 5] = 0
    x[0, (kind >= 5) & (kind < 8)] *= -1  # -0 and negated values
    cancel = (kind >= 8) & (kind < 14)
    x[1, cancel] = -x[0, cancel]
    big = (kind >= 14) & (kind < 16)
    x[0, big] = np.finfo(dtype).max * np.where(rng.integers(0, 2, size=count) == 1, 1, -1)[big]
    x[1, big] = -np.sign(x[0, big]) * np.abs(x[1, big])
    narrow = kind >= 80  # a few binades: exactly summable
    x[:, narrow] = (rng.random((K, count)) - 0.5)[:, narrow] * 2.0 ** rng.integers(-8, 8)
    return x[which].astype(dtype)


def round_once(fr, dtype):
    """fr rounded to dtype, to nearest, ties to even (infinity past the largest)."""
    p, emin, emax = FORMATS[dtype]
    if fr == 0:
        return dtype(0)
    a = abs(fr)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = max(e, emin) - (p - 1)
    scaled = a / Fraction(2) ** q
    n = scaled.numerator // scaled.denominator
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    value = Fraction(n) * Fraction(2) ** q
    if value >= Fraction(2) ** (emax + 1):
        return dtype(np.inf if fr > 0 else -np.inf)
    return dtype(float(value) if fr > 0 else -float(value))


def check_exact(result, contributions, dtype, what, divisor=1):
    """Every element against the exact sum: equal bits where every contribution
    lies on the block's fixed point, within K grid steps plus half an ulp elsewhere."""
    n = len(result)
    for i in range(0, n, max(1, n // 3000)):
        b0 = i // BLOCK * BLOCK
        block = np.abs(np.concatenate([c[b0:b0 + BLOCK] for c in contributions]).astype(np.float64))
        exact = sum(Fraction(float(c[i])) for c in contributions) / divisor
        want = round_once(exact, dtype)
        if dtype == np.float16:
            on_grid, grid = True, None
        else:
            top = float(block.max())
            p, emin, _ = FORMATS[dtype]
            emax = max(int(np.floor(np.log2(top))) if top > 0 else emin, emin)
            grid = Fraction(2) ** (emax - FIXED[dtype])
            on_grid = all((Fraction(float(c[i])) / grid).denominator == 1 for c in contributions)
        got = result[i]
        if on_grid:
            if got.tobytes() != want.tobytes() and not (exact == 0 and got == 0 and not np.signbit(got)):
                raise AssertionError(f"{what}: element {i} is {got!r}, the exact sum rounded once is {want!r}")
        elif np.isfinite(got):
            # One ulp of the result (at least the smallest subnormal).
            mag = abs(float(got))
            e = max(int(np.floor(np.log2(mag))) if mag > 0 else emin, emin)
            ulp = Fraction(2) ** (e - (p - 1))
            bound = K * grid / 2 / divisor + ulp / 2
            if abs(Fraction(float(got)) - exact) > bound:
                raise AssertionError(f"{what}: element {i} is {got!r}, {float(abs(Fraction(float(got)) - exact))} "
                                     f"from the exact sum, beyond the bound {float(bound)}")


def main():
    comm = chorus.init()
    rank, n = comm.rank, comm.size
    if n < 2:
        raise SystemExit("numpy_deterministic needs at least 2 ranks")
    # Two distinct ranks of a permutation that depends on n.
    holders = [(j * (n - 1) + n // 2) % n for j in range(K)]
    digest = hashlib.sha256()
    for dtype, count in [(np.float16, 1031), (np.float32, 10007), (np.float64, 1031)]:
        contributions = [wide(dtype, count * 12, j, 7) for j in range(K)]
        # Each rank's x: the contribution it holds, or zeros.
        x = np.zeros(count * 12, dtype)
        for j in range(K):
            if holders[j] == rank:
                x = contributions[j].copy()
        total = count * 12
        # allreduce
        ref = None
        for algo in ALGOS["allreduce"]:
            if algo in ("one_shot", "two_shot") and comm.transport != "shm":
                continue  # these need shared windows
            got = comm.allreduce(x, "sum", algorithm=algo, deterministic=DET)
            if ref is None:
                ref = got
                check_exact(got, contributions, dtype, f"allreduce {np.dtype(dtype)}")
            elif got.tobytes() != ref.tobytes():
                raise AssertionError(f"allreduce {np.dtype(dtype)}: algorithm {algo} differs from the automatic choice")
        digest.update(ref.tobytes())
        # avg, automatic only: the exact sum divided by n, rounded once.
        if dtype == np.float32:
            avg = comm.allreduce(x[:4096], "avg", deterministic=DET)
            check_exact(avg, [c[:4096] for c in contributions], dtype, "allreduce avg", divisor=n)
        # reduce_scatter of the same vector: rank r's block of it.
        k = total // n
        part = ref[rank * k:(rank + 1) * k]
        for algo in ALGOS["reduce_scatter"]:
            got = comm.reduce_scatter(x[:k * n], "sum", algorithm=algo, deterministic=DET)
            if got.tobytes() != part.tobytes():
                raise AssertionError(f"reduce_scatter {np.dtype(dtype)} {algo}: not the allreduce's bits")
        # reduce to the last rank
        for algo in ALGOS["reduce"]:
            got = comm.reduce(x, n - 1, "sum", algorithm=algo, deterministic=DET)
            if rank == n - 1 and got.tobytes() != ref.tobytes():
                raise AssertionError(f"reduce {np.dtype(dtype)} {algo}: not the allreduce's bits")
    # Infinities and NaNs as IEEE sums.
    specials = np.array([[np.inf, np.inf, np.nan, 3e38], [1, -np.inf, 1, 3e38]], np.float32)
    y = np.zeros(4, np.float32)
    for j in range(K):
        if holders[j] == rank:
            y = specials[j].copy()
    got = comm.allreduce(y, "sum", deterministic=DET)
    assert got[0] == np.inf and np.isnan(got[1]) and np.isnan(got[2]) and got[3] == np.inf, got
    # Rank order and count do not show: the digest is the same in every job.
    comm.close()
    print(f"numpy_deterministic OK {digest.hexdigest()}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
