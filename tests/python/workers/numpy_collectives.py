"""One rank of the numpy binding's collective grid (run under chorus-run).

Every collective and every dtype, out of place, with out= and in place,
blocking and asynchronous, each output element compared with the exact
result computed here. Prints "numpy_collectives OK <calls>" at the end.
"""

import sys

import numpy as np

import chorus
from refs import BITWISE_OPS, NUMPY_DTYPES, OPS, check_equal, data, reduce_ref

COUNTS = [0, 1, 7, 1031, 65537]


class Grid:
    def __init__(self, comm):
        self.comm = comm
        self.rank = comm.rank
        self.n = comm.size
        self.calls = 0

    def everyone(self, count, dtype, op="sum", salt=0):
        return [data(r, count, dtype, op, salt) for r in range(self.n)]

    def ops(self, dtype):
        return OPS + (BITWISE_OPS if np.dtype(dtype).kind in "iu" else [])

    def allreduce(self, dtype, count):
        comm = self.comm
        if np.dtype(dtype).kind == "f" and count > 0:
            try:
                comm.allreduce(np.ones(count, dtype), "bxor")
            except ValueError as e:
                assert "integer types only" in str(e), str(e)
            else:
                raise AssertionError(f"allreduce bxor of {np.dtype(dtype)} was accepted")
        for op in self.ops(dtype):
            inputs = self.everyone(count, dtype, op)
            want = reduce_ref(inputs, op, dtype)
            x = inputs[self.rank].copy()
            what = f"allreduce {op} {np.dtype(dtype)} x{count}"
            got = comm.allreduce(x, op)
            check_equal(got, want, what + " (new array)")
            check_equal(x, inputs[self.rank], what + " (x untouched)")
            out = np.full(count, 99, dtype)
            assert comm.allreduce(x, op=op, out=out) is out
            check_equal(out, want, what + " (out=)")
            assert comm.allreduce(x, op, out=x) is x
            check_equal(x, want, what + " (in place)")
            self.calls += 3

    def allgather(self, dtype, count):
        comm = self.comm
        inputs = self.everyone(count, dtype, salt=1)
        want = np.stack(inputs)
        what = f"allgather {np.dtype(dtype)} x{count}"
        got = comm.allgather(inputs[self.rank])
        check_equal(got, want, what + " (new array)")
        out = np.zeros((self.n, count), dtype)
        out[self.rank] = inputs[self.rank]
        assert comm.allgather(out[self.rank], out=out) is out
        check_equal(out, want, what + " (in place)")
        self.calls += 2

    def reduce_scatter(self, dtype, count):
        comm = self.comm
        for op in self.ops(dtype):
            inputs = self.everyone(count * self.n, dtype, op, salt=2)
            full = reduce_ref(inputs, op, dtype)
            want = full[self.rank * count:(self.rank + 1) * count]
            what = f"reduce_scatter {op} {np.dtype(dtype)} x{count}"
            x = inputs[self.rank].copy()
            check_equal(comm.reduce_scatter(x, op), want, what + " (new array)")
            check_equal(x, inputs[self.rank], what + " (x untouched)")
            mine = x[self.rank * count:(self.rank + 1) * count]
            assert comm.reduce_scatter(x, op, out=mine) is mine
            check_equal(mine, want, what + " (in place)")
            self.calls += 2

    def broadcast(self, dtype, count):
        comm = self.comm
        for root in range(self.n):
            inputs = self.everyone(count, dtype, salt=3 + root)
            x = inputs[root].copy() if self.rank == root else np.zeros(count, dtype)
            assert comm.broadcast(x, root=root) is x
            check_equal(x, inputs[root], f"broadcast root {root} {np.dtype(dtype)} x{count}")
            self.calls += 1

    def reduce(self, dtype, count):
        comm = self.comm
        for root in range(self.n):
            for op in ["sum", "max", "avg"]:
                inputs = self.everyone(count, dtype, op, salt=root)
                what = f"reduce {op} root {root} {np.dtype(dtype)} x{count}"
                x = inputs[self.rank].copy()
                got = comm.reduce(x, root, op)
                if self.rank == root:
                    check_equal(got, reduce_ref(inputs, op, dtype), what)
                else:
                    assert got is None, what + ": a non-root gets None"
                check_equal(x, inputs[self.rank], what + " (x untouched)")
                assert (comm.reduce(x, root=root, op=op, out=x) is x) == (self.rank == root)
                want = reduce_ref(inputs, op, dtype) if self.rank == root else inputs[self.rank]
                check_equal(x, want, what + " (in place)")
                self.calls += 2

    def alltoall(self, dtype, count):
        comm = self.comm
        # Rank r's block j (for rank j) has salt 10 * r + j.
        blocks = [[data(r, count, dtype, salt=10 * r + j) for j in range(self.n)]
                  for r in range(self.n)]
        x = np.concatenate(blocks[self.rank]) if count else np.zeros(0, dtype)
        want = np.concatenate([blocks[j][self.rank] for j in range(self.n)]) if count \
            else np.zeros(0, dtype)
        what = f"alltoall {np.dtype(dtype)} x{count}"
        check_equal(comm.alltoall(x), want, what + " (new array)")
        out = np.zeros_like(x)
        assert comm.alltoall(x, out=out) is out
        check_equal(out, want, what + " (out=)")
        self.calls += 2

    def gather_scatter(self, dtype, count):
        comm = self.comm
        for root in range(self.n):
            inputs = self.everyone(count, dtype, salt=20 + root)
            what = f"gather root {root} {np.dtype(dtype)} x{count}"
            got = comm.gather(inputs[self.rank], root)
            if self.rank == root:
                check_equal(got, np.stack(inputs), what)
            else:
                assert got is None, what + ": a non-root gets None"
            # Scatter back what the root gathered: rank j gets block j.
            whole = np.concatenate(inputs) if self.rank == root else None
            what = f"scatter root {root} {np.dtype(dtype)} x{count}"
            if self.rank == root:
                check_equal(comm.scatter(whole, root=root), inputs[self.rank], what)
                mine = whole[self.rank * count:(self.rank + 1) * count]
                assert comm.scatter(whole, root=root, out=mine) is mine, what + " (in place)"
                check_equal(mine, inputs[self.rank], what + " (in place)")
            else:
                out = np.zeros(count, dtype)
                assert comm.scatter(None, root=root, out=out) is out
                check_equal(out, inputs[self.rank], what)
                out = np.zeros(count, dtype)
                assert comm.scatter(None, root, out=out) is out
                check_equal(out, inputs[self.rank], what + " (again)")
            self.calls += 3

    def point_to_point(self, dtype, count):
        if self.n == 1:
            return
        comm = self.comm
        nxt = (self.rank + 1) % self.n
        prev = (self.rank - 1) % self.n
        what = f"send/recv {np.dtype(dtype)} x{count}"
        # Around the ring, the send asynchronous so that no rank waits on another's send.
        w = comm.send(data(self.rank, count, dtype, salt=4), nxt, async_op=True)
        y = np.zeros(count, dtype)
        assert comm.recv(y, prev) is y
        assert w.wait() is None
        check_equal(y, data(prev, count, dtype, salt=4), what + " (ring)")
        # Blocking both ways between ranks 0 and 1.
        if self.rank in (0, 1):
            peer = 1 - self.rank
            y = np.zeros(count, dtype)
            if self.rank == 0:
                comm.send(data(0, count, dtype, salt=5), peer)
                comm.recv(y, peer)
            else:
                comm.recv(y, peer)
                comm.send(data(1, count, dtype, salt=5), peer)
            check_equal(y, data(peer, count, dtype, salt=5), what + " (0 <-> 1)")
        # From any rank: every other rank sends rank 0 one message.
        if self.rank == 0:
            senders = set()
            for _ in range(self.n - 1):
                y = np.zeros(count, dtype)
                sender = comm.recv_any(y)
                check_equal(y, data(sender, count, dtype, salt=6), what + f" (recv_any: {sender})")
                senders.add(sender)
            assert senders == set(range(1, self.n)), senders
        else:
            comm.send(data(self.rank, count, dtype, salt=6), 0)
        self.calls += 4

    def asynchronous(self, dtype, count):
        """Several calls in flight at once, waited in turn or polled with done()."""
        comm = self.comm
        sums = self.everyone(count, dtype, "sum", salt=6)
        maxes = self.everyone(count, dtype, "max", salt=7)
        rs = self.everyone(count * self.n, dtype, "sum", salt=8)
        w1 = comm.allreduce(sums[self.rank], async_op=True)
        w2 = comm.allgather(maxes[self.rank], async_op=True)
        w3 = comm.reduce_scatter(rs[self.rank], async_op=True)
        w4 = comm.allreduce(maxes[self.rank], op=chorus.ReduceOp.MAX, async_op=True)
        w5 = comm.barrier(async_op=True)
        x = sums[0].copy() if self.rank == 0 else np.zeros(count, dtype)
        w6 = comm.broadcast(x, 0, async_op=True)
        while not w6.done():
            pass
        check_equal(w6.wait(), sums[0], "async broadcast")
        assert w6.wait() is x
        check_equal(w3.wait(), reduce_ref(rs, "sum", dtype)[self.rank * count:(self.rank + 1) * count],
                    "async reduce_scatter")
        check_equal(w1.wait(), reduce_ref(sums, "sum", dtype), "async allreduce")
        check_equal(w2.wait(), np.stack(maxes), "async allgather")
        check_equal(w4.wait(), reduce_ref(maxes, "max", dtype), "async allreduce max")
        assert w5.wait() is None and w5.done()
        self.calls += 6


def shapes_and_buffers(comm):
    """Shapes beyond 1-D, and buffers that are not numpy arrays."""
    n, rank = comm.size, comm.rank
    x = np.arange(6, dtype=np.float32).reshape(2, 3) + rank
    got = comm.allgather(x)
    check_equal(got, np.stack([np.arange(6, dtype=np.float32).reshape(2, 3) + r for r in range(n)]),
                "allgather 2x3")
    y = np.arange(n * 2 * 3, dtype=np.int64).reshape(n * 2, 3) * (rank + 1)
    want = np.arange(n * 2 * 3, dtype=np.int64).reshape(n * 2, 3) * sum(range(1, n + 1))
    check_equal(comm.reduce_scatter(y), want[rank * 2:(rank + 1) * 2], "reduce_scatter (2n, 3)")
    base = np.arange(n * 2 * 3, dtype=np.int64).reshape(n * 2, 3)
    want = np.concatenate([base[rank * 2:(rank + 1) * 2] * (j + 1) for j in range(n)])
    check_equal(comm.alltoall(y), want, "alltoall (2n, 3)")
    scalar = np.float64(rank + 0.5)
    check_equal(comm.allreduce(scalar), np.float64(sum(r + 0.5 for r in range(n))), "0-d allreduce")
    b = bytearray([rank + 1] * 5)
    check_equal(comm.allreduce(b), np.full(5, sum(range(1, n + 1)), np.uint8), "bytearray")
    comm.allreduce(b, op="max", out=b)
    check_equal(np.frombuffer(b, np.uint8), np.full(5, n, np.uint8), "bytearray in place")
    m = memoryview(np.full(4, rank, np.int32))
    check_equal(comm.allreduce(m, "min"), np.zeros(4, np.int32), "memoryview")
    # Named algorithms and a per-call timeout.
    v = np.arange(100, dtype=np.float32) * (rank + 1)
    for algorithm in ["ring", "bidir_ring"]:
        check_equal(comm.allreduce(v, algorithm=algorithm, timeout=60),
                    np.arange(100, dtype=np.float32) * sum(range(1, n + 1)),
                    f"allreduce algorithm={algorithm}")
    comm.barrier(timeout=60)


def main():
    with chorus.init() as comm:
        assert 0 <= comm.rank < comm.size
        grid = Grid(comm)
        for dtype in NUMPY_DTYPES:
            for count in COUNTS:
                grid.allreduce(dtype, count)
                grid.allgather(dtype, count)
                grid.reduce_scatter(dtype, count)
                grid.broadcast(dtype, count)
                grid.reduce(dtype, count)
                grid.alltoall(dtype, count)
                grid.gather_scatter(dtype, count)
                grid.point_to_point(dtype, count)
                grid.asynchronous(dtype, count)
        shapes_and_buffers(comm)
        comm.barrier()
        print(f"numpy_collectives OK rank {comm.rank} of {comm.size} calls {grid.calls}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
