"""One rank of the numpy binding's window tests (run under chorus-run).

    numpy_windows.py shm    N = 2 or 3 over shared memory: comm.window() and
                            comm.empty(), and collectives on arrays in them
    numpy_windows.py tcp    over tcp: both raise InvalidArgument, and the
                            communicator keeps working

Over shm: the arrays lie in the windows' memory (their base is the Window,
their addresses in a chorus-window mapping of /proc/self/maps); AllReduce on
them, in place and out of place, with the algorithm chorus chooses and with
one_shot and two_shot, gives the exact result of every dtype and op; the
other collectives on them too; the memory outlives the Python reference to
the Window while an array uses it, and is unmapped once nothing does; a
one-sided AllReduce on window arrays copies nothing into a staging window,
where the same call on ordinary arrays makes one. Prints "numpy_windows OK"
at the end.
"""

import gc
import sys

import numpy as np

import chorus
from expect import expect
from refs import NUMPY_DTYPES, OPS, check_equal, data, in_window_map, reduce_ref, window_maps

COUNTS = [1, 7, 1031, 65537]
ALGORITHMS = [None, "one_shot", "two_shot"]


def window_objects(comm):
    """comm.window(): a buffer of bytes in shared memory."""
    w = comm.window(1000)
    assert isinstance(w, chorus.Window), type(w)
    assert w.nbytes == len(w) == 1000, (w.nbytes, len(w))
    view = memoryview(w)
    assert view.nbytes == 1000 and view.format == "B" and not view.readonly, view
    a = np.frombuffer(w, np.uint8)
    assert a.ctypes.data == w.data_ptr and a.flags.writeable
    assert in_window_map(w.data_ptr, w.nbytes), "the window is not in a chorus-window mapping"
    assert "1000 bytes" in repr(w), repr(w)
    empty = comm.window(0)
    assert empty.nbytes == 0 and memoryview(empty).nbytes == 0
    # The window itself as x and out: in place, over the window's bytes.
    a[:] = comm.rank + 1
    assert comm.allreduce(w, out=w) is w
    check_equal(a, np.full(1000, sum(range(1, comm.size + 1)), np.uint8), "allreduce on a window")


def empty_arrays(comm):
    """comm.empty(): numpy arrays whose memory is a new window."""
    for dtype in NUMPY_DTYPES:
        for spelling in (dtype, np.dtype(dtype), np.dtype(dtype).name):
            a = comm.empty((3, 5), spelling)
            assert a.dtype == np.dtype(dtype) and a.shape == (3, 5), (a.dtype, a.shape)
            assert a.flags.c_contiguous and a.flags.writeable, a.flags
            assert isinstance(a.base, chorus.Window), type(a.base)
            assert a.base.data_ptr == a.ctypes.data and a.base.nbytes == a.nbytes
            assert in_window_map(a.ctypes.data, a.nbytes), f"empty {np.dtype(dtype)}"
    assert comm.empty(4).dtype == np.float64  # numpy's default
    for shape, want in [(7, (7,)), ((), ()), ((0,), (0,)), ((2, 0, 3), (2, 0, 3)),
                        (np.int64(4), (4,)), ([2, 2], (2, 2))]:
        assert comm.empty(shape, np.int32).shape == want, shape


def errors(comm):
    expect(chorus.InvalidArgument, lambda: comm.empty(-1, np.float32), "negative dimension -1")
    expect(chorus.InvalidArgument, lambda: comm.empty((2, -3), np.float32), "negative dimension -3")
    expect(chorus.InvalidArgument, lambda: comm.empty("abc"), "not an int or a sequence")
    expect(chorus.InvalidArgument, lambda: comm.empty((2.5,)), "not an int or a sequence")
    expect(chorus.InvalidArgument, lambda: comm.empty((1 << 40, 1 << 40)), "too large")
    for bad, needle in [(np.int16, "dtype int16"), (np.complex64, "dtype complex64"),
                        (bool, "dtype bool"), ("nonsense", "not a numpy dtype")]:
        e = expect(chorus.InvalidArgument, lambda b=bad: comm.empty(4, b), needle)
        assert isinstance(e, ValueError) and e.code == "invalid_argument", e
    expect(chorus.InvalidArgument, lambda: comm.empty(4, ">f4"), "not in native byte order")
    expect(chorus.InvalidArgument, lambda: comm.window(-1), "negative nbytes -1")
    # None of these broke the communicator (nor made a window: every rank
    # raised before the collective part).
    check_equal(comm.allreduce(np.ones(3, np.int32)), np.full(3, comm.size, np.int32),
                "after the errors")


class Grid:
    """AllReduce on arrays in windows, against the exact results."""

    def __init__(self, comm):
        self.comm = comm
        self.rank = comm.rank
        self.n = comm.size
        self.calls = 0
        biggest = max(COUNTS) * 8
        # Slices of two windows, viewed as each dtype: an array inside a
        # window is a window buffer wherever it starts.
        self.xs = comm.empty(biggest + 64, np.uint8)
        self.outs = comm.empty(biggest + 64, np.uint8)

    def window_array(self, pool, dtype, count, offset):
        itemsize = np.dtype(dtype).itemsize
        return pool[offset:offset + count * itemsize].view(dtype)

    def allreduce(self, dtype, count, algorithm):
        comm = self.comm
        for op in OPS:
            inputs = [data(r, count, dtype, op) for r in range(self.n)]
            want = reduce_ref(inputs, op, dtype)
            what = f"allreduce {op} {np.dtype(dtype)} x{count} algorithm={algorithm}"
            # Out of place: x and out in windows.
            x = self.window_array(self.xs, dtype, count, 0)
            out = self.window_array(self.outs, dtype, count, 64)
            x[:] = inputs[self.rank]
            out[:] = 0
            assert comm.allreduce(x, op, out=out, algorithm=algorithm) is out
            check_equal(out, want, what + " (out of place)")
            check_equal(x, inputs[self.rank], what + " (x untouched)")
            # In place.
            assert comm.allreduce(x, op, out=x, algorithm=algorithm) is x
            check_equal(x, want, what + " (in place)")
            # A fresh array of comm.empty, in place.
            y = comm.empty(count, dtype)
            y[:] = inputs[self.rank]
            comm.allreduce(y, op, out=y, algorithm=algorithm)
            check_equal(y, want, what + " (comm.empty, in place)")
            self.calls += 3

    def mixed(self, dtype, count):
        """x in a window, out an ordinary array (and the reverse): the
        staged path, exact all the same."""
        comm = self.comm
        inputs = [data(r, count, dtype) for r in range(self.n)]
        want = reduce_ref(inputs, "sum", dtype)
        x = self.window_array(self.xs, dtype, count, 0)
        x[:] = inputs[self.rank]
        for algorithm in ALGORITHMS:
            what = f"allreduce {np.dtype(dtype)} x{count} algorithm={algorithm}"
            check_equal(comm.allreduce(x, algorithm=algorithm), want, what + " (new array)")
            out = self.window_array(self.outs, dtype, count, 0)
            check_equal(comm.allreduce(inputs[self.rank], out=out, algorithm=algorithm), want,
                        what + " (ordinary x, out in a window)")
            self.calls += 2

    def others(self, dtype, count):
        """The other collectives on arrays in windows."""
        comm, n, rank = self.comm, self.n, self.rank
        what = f"{np.dtype(dtype)} x{count} in windows"
        mine = data(rank, count, dtype, salt=1)
        everyone = [data(r, count, dtype, salt=1) for r in range(n)]
        gathered = comm.empty((n, count), dtype)
        gathered[rank] = mine
        comm.allgather(gathered[rank], out=gathered)
        check_equal(gathered, np.stack(everyone), "allgather (in place) " + what)
        full = [data(r, count * n, dtype, salt=2) for r in range(n)]
        x = comm.empty(count * n, dtype)
        x[:] = full[rank]
        block = comm.empty(count, dtype)
        comm.reduce_scatter(x, out=block)
        check_equal(block, reduce_ref(full, "sum", dtype)[rank * count:(rank + 1) * count],
                    "reduce_scatter " + what)
        for root in range(n):
            b = comm.empty(count, dtype)
            b[:] = everyone[root] if rank == root else 0
            comm.broadcast(b, root)
            check_equal(b, everyone[root], f"broadcast root {root} " + what)
            r = comm.empty(count, dtype)
            r[:] = everyone[rank]
            comm.reduce(r, root, "max", out=r)
            if rank == root:
                check_equal(r, reduce_ref(everyone, "max", dtype), f"reduce root {root} " + what)
        a = comm.empty(count * n, dtype)
        a[:] = full[rank]
        t = comm.empty(count * n, dtype)
        comm.alltoall(a, out=t)
        want = np.concatenate([full[j][rank * count:(rank + 1) * count] for j in range(n)])
        check_equal(t, want, "alltoall " + what)
        w = comm.allreduce(x, out=x, async_op=True)
        assert w.wait() is x
        check_equal(x, reduce_ref(full, "sum", dtype), "async allreduce (in place) " + what)
        self.calls += 5 + 2 * n


def lifetime(comm):
    """The memory lives while an array uses it, and goes once nothing does."""
    n = comm.size
    w = comm.window(4096 * 3)
    a = np.frombuffer(w, np.float32)
    del w
    gc.collect()
    a[:] = comm.rank + 1
    comm.allreduce(a, out=a)
    check_equal(a, np.full(3 * 1024, n * (n + 1) / 2, np.float32), "frombuffer after del window")

    b = comm.empty(1031, np.int64)
    view = b[8:]
    del b
    gc.collect()
    view[:] = comm.rank + 1
    comm.allreduce(view, out=view, algorithm="one_shot")
    check_equal(view, np.full(1023, n * (n + 1) // 2, np.int64), "a view after del array")

    # A window of an odd size: once its last array is gone, this rank maps
    # none of its parts any more (every rank's part is mapped here).
    odd = 4096 * 7 + 8

    def mapped():
        return sum(1 for lo, hi in window_maps() if hi - lo == 4096 * 8)

    before = mapped()
    c = comm.empty(odd, np.uint8)
    assert mapped() == before + n, (before, mapped())
    d = c[100:200]
    del c
    gc.collect()
    assert mapped() == before + n, "the window went while a view still used it"
    del d, a, view
    gc.collect()
    assert mapped() == before, "the window outlived its last array"
    comm.barrier()


def no_staging(algorithm):
    """A one-sided AllReduce on window arrays reads the peers' arrays in
    place: it makes no staging window, where the same call on ordinary
    arrays makes one at least as large as the data."""
    count = 300_000  # 1.2 MB of float32; window maps are pages, staging a power of two
    nbytes = count * 4
    with chorus.init() as comm:
        n, rank = comm.size, comm.rank
        want = np.full(count, n * (n + 1) / 2, np.float32)
        x = comm.empty(count, np.float32)
        out = comm.empty(count, np.float32)
        x[:] = rank + 1
        before = set(window_maps())
        comm.allreduce(x, out=out, algorithm=algorithm)
        comm.allreduce(x, out=x, algorithm=algorithm)
        added = [hi - lo for lo, hi in set(window_maps()) - before]
        check_equal(out, want, f"{algorithm} on windows (out of place)")
        check_equal(x, want, f"{algorithm} on windows (in place)")
        assert all(size < nbytes for size in added), \
            f"{algorithm} on window arrays mapped new windows of {added} bytes"
        ordinary = np.full(count, rank + 1, np.float32)
        before = set(window_maps())
        comm.allreduce(ordinary, out=ordinary, algorithm=algorithm)
        added = [hi - lo for lo, hi in set(window_maps()) - before]
        check_equal(ordinary, want, f"{algorithm} on ordinary arrays")
        assert len([s for s in added if s >= nbytes]) == n, \
            f"{algorithm} on ordinary arrays staged them in no window: new maps {added}"


def on_tcp(comm):
    for call, needles in [(lambda: comm.window(64), ["window", "share no memory", "tcp"]),
                          (lambda: comm.empty(4, np.float32), ["share no memory", "tcp"])]:
        e = expect(chorus.InvalidArgument, call, *needles)
        assert e.code == "invalid_argument", e
    check_equal(comm.allreduce(np.ones(3, np.int32)), np.full(3, comm.size, np.int32),
                "after the window errors")


def main():
    transport = sys.argv[1]
    if transport == "tcp":
        with chorus.init() as comm:
            on_tcp(comm)
            print(f"numpy_windows OK rank {comm.rank} of {comm.size} (tcp)", flush=True)
        return 0
    with chorus.init() as comm:
        window_objects(comm)
        empty_arrays(comm)
        errors(comm)
        grid = Grid(comm)
        for dtype in NUMPY_DTYPES:
            for count in COUNTS:
                for algorithm in ALGORITHMS:
                    grid.allreduce(dtype, count, algorithm)
            grid.mixed(dtype, 1031)
            grid.others(dtype, 1031)
        lifetime(comm)
        rank, n, calls = comm.rank, comm.size, grid.calls
    for algorithm in ["one_shot", "two_shot"]:
        no_staging(algorithm)
    print(f"numpy_windows OK rank {rank} of {n} calls {calls}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
