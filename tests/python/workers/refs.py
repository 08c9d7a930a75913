"""Test data and exact expected results for the Python tests' ranks.

Every element depends on the rank and its index, so that a block put in the
wrong place cannot pass. Values stay small (|v| <= 8, products of factors
from {-2, -1, 1, 2}) so that every sum and product over four ranks is exact
in every dtype, float16 included, and the expected results are computed
exactly here.
"""

import numpy as np

NUMPY_DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64,
                np.float16, np.float32, np.float64]
OPS = ["sum", "prod", "min", "max", "avg"]
# On the integer types only.
BITWISE_OPS = ["band", "bor", "bxor"]


def is_unsigned(dtype):
    return np.dtype(dtype).kind == "u"


def data(rank, count, dtype, op="sum", salt=0):
    """Rank `rank`'s input: `count` elements, unique per (rank, index, salt)."""
    i = np.arange(count, dtype=np.int64)
    if op == "prod":
        k = (rank * 5 + i * 3 + salt) % 4
        v = np.array([1, 2, 1, 2])[k] if is_unsigned(dtype) else np.array([-2, -1, 1, 2])[k]
    else:
        v = (rank * 7 + i * 3 + salt * 11) % 17
        if not is_unsigned(dtype):
            v = v - 8
    return v.astype(dtype)


def reduce_ref(inputs, op, dtype):
    """The exact reduction of the ranks' inputs, as chorus defines it."""
    n = len(inputs)
    dtype = np.dtype(dtype)
    wide = [x.astype(np.float64 if dtype.kind == "f" else np.int64) for x in inputs]
    if op == "sum":
        return np.sum(wide, axis=0).astype(dtype)
    if op == "prod":
        return np.prod(wide, axis=0).astype(dtype)
    if op == "min":
        return np.min(wide, axis=0).astype(dtype)
    if op == "max":
        return np.max(wide, axis=0).astype(dtype)
    if op in BITWISE_OPS:
        fold = {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op]
        return fold.reduce(wide, axis=0).astype(dtype)
    assert op == "avg"
    s = np.sum(wide, axis=0)
    if dtype.kind in "iu":  # integers truncate toward zero
        return (np.sign(s) * (np.abs(s) // n)).astype(dtype)
    if dtype == np.float16:  # through float32, rounded to nearest even once
        return (s.astype(np.float32) / np.float32(n)).astype(np.float16)
    return (s.astype(dtype) / dtype.type(n)).astype(dtype)


def check_equal(got, want, what):
    got = np.asarray(got)
    want = np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        raise AssertionError(f"{what}: got {got.dtype}{got.shape}, want {want.dtype}{want.shape}")
    if not np.array_equal(got, want):
        bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
        j = int(bad[0])
        raise AssertionError(f"{what}: {bad.size} wrong element(s), first at {j}: "
                             f"got {got.reshape(-1)[j]!r}, want {want.reshape(-1)[j]!r}")


def window_maps():
    """This process's mappings of chorus windows (memfd "chorus-window"), as
    (start, end) address pairs."""
    maps = []
    with open("/proc/self/maps") as f:
        for line in f:
            if "chorus-window" in line:
                lo, hi = line.split()[0].split("-")
                maps.append((int(lo, 16), int(hi, 16)))
    return maps


def in_window_map(address, nbytes):
    """Whether [address, address + nbytes) lies inside one window mapping."""
    return any(lo <= address and address + nbytes <= hi for lo, hi in window_maps())
