"""One rank of the torch backend's tests (run under chorus-run, N = 2 or 3).

    torch_collectives.py env            init_process_group("chorus") from env://
    torch_collectives.py torchrun       the same under torchrun, a few calls only
    torch_collectives.py file PATH      ... init_method="file://PATH"
    torch_collectives.py tcp PORT       ... init_method="tcp://127.0.0.1:PORT"

Every supported call, with every dtype chorus has, against results computed
here; async_op=True and futures; non-contiguous tensors. Prints
"torch_collectives OK" at the end.
"""

import functools
import os
import sys

import torch
import torch.distributed as dist

import chorus.torch  # noqa: F401  (registers "chorus")

DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]
OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
# On the integer types only.
BITWISE = {"band": dist.ReduceOp.BAND, "bor": dist.ReduceOp.BOR, "bxor": dist.ReduceOp.BXOR}
COUNTS = [0, 1, 7, 1031]


def data(rank, count, dtype, op="sum", salt=0):
    """As refs.data: small values, unique per (rank, index, salt), exact sums."""
    i = torch.arange(count, dtype=torch.int64)
    if op == "prod":
        k = (rank * 5 + i * 3 + salt) % 4
        table = torch.tensor([1, 2, 1, 2]) if dtype == torch.uint8 else torch.tensor([-2, -1, 1, 2])
        v = table[k]
    else:
        v = (rank * 7 + i * 3 + salt * 11) % 17
        if dtype != torch.uint8:
            v = v - 8
    return v.to(dtype)


def reduce_ref(inputs, op, dtype):
    n = len(inputs)
    floating = dtype.is_floating_point
    wide = torch.stack([x.to(torch.float64 if floating else torch.int64) for x in inputs])
    if op == "sum":
        return wide.sum(0).to(dtype)
    if op == "prod":
        return wide.prod(0).to(dtype)
    if op == "min":
        return wide.min(0).values.to(dtype)
    if op == "max":
        return wide.max(0).values.to(dtype)
    if op in BITWISE:
        fold = {"band": torch.bitwise_and, "bor": torch.bitwise_or, "bxor": torch.bitwise_xor}[op]
        return functools.reduce(fold, wide.unbind(0)).to(dtype)
    s = wide.sum(0)
    if not floating:
        return (s.sign() * (s.abs() // n)).to(dtype)
    if dtype in (torch.float16, torch.bfloat16):  # through float32, rounded once
        return (s.to(torch.float32) / n).to(dtype)
    return (s.to(dtype) / n).to(dtype)


def check(got, want, what):
    if got.dtype != want.dtype or got.shape != want.shape:
        raise AssertionError(f"{what}: got {got.dtype}{tuple(got.shape)}, "
                             f"want {want.dtype}{tuple(want.shape)}")
    if not torch.equal(got, want):
        bad = (got.reshape(-1) != want.reshape(-1)).nonzero().reshape(-1)
        j = int(bad[0])
        raise AssertionError(f"{what}: {bad.numel()} wrong, first at {j}: "
                             f"got {got.reshape(-1)[j].item()}, want {want.reshape(-1)[j].item()}")


class Suite:
    def __init__(self):
        self.rank = dist.get_rank()
        self.n = dist.get_world_size()
        self.calls = 0

    def everyone(self, count, dtype, op="sum", salt=0):
        return [data(r, count, dtype, op, salt) for r in range(self.n)]

    def all_reduce(self, dtype, count):
        ops = dict(OPS) if dtype.is_floating_point else {**OPS, **BITWISE}
        if dtype.is_floating_point and count > 0:
            t = torch.ones(count, dtype=dtype)
            try:
                dist.all_reduce(t, op=dist.ReduceOp.BAND)
            except RuntimeError as e:
                assert "integer types only" in str(e), str(e)
            else:
                raise AssertionError(f"all_reduce BAND of {dtype} was accepted")
        for name, op in ops.items():
            inputs = self.everyone(count, dtype, name)
            t = inputs[self.rank].clone()
            dist.all_reduce(t, op=op)
            check(t, reduce_ref(inputs, name, dtype), f"all_reduce {name} {dtype} x{count}")
            # Asynchronous, through the work and through its future.
            t = inputs[self.rank].clone()
            work = dist.all_reduce(t, op=op, async_op=True)
            value = work.get_future().wait()
            work.wait()
            assert work.is_completed()
            check(t, reduce_ref(inputs, name, dtype), f"async all_reduce {name} {dtype}")
            check(value[0], t, "all_reduce future value")
            self.calls += 2

    def all_reduce_coalesced(self, dtype, count):
        """Tensors of two sizes, one of them non-contiguous, reduced in one call."""
        for name in ["sum", "max"]:
            a = self.everyone(count, dtype, name, salt=50)
            b = self.everyone(2 * (count + 3), dtype, name, salt=51)
            ta = a[self.rank].clone()
            tb = b[self.rank].clone().reshape(2, -1).t()
            # torch returns the Work's future here, not the Work.
            future = dist.all_reduce_coalesced([ta, tb], op=OPS[name], async_op=True)
            value = future.wait()
            check(ta, reduce_ref(a, name, dtype), f"all_reduce_coalesced {name} {dtype} x{count}")
            check(tb, reduce_ref(b, name, dtype).reshape(2, -1).t(),
                  f"all_reduce_coalesced non-contiguous {name} {dtype} x{count}")
            assert len(value) == 2, value
            check(value[0], ta, "all_reduce_coalesced future value 0")
            check(value[1], tb, "all_reduce_coalesced future value 1")
            self.calls += 1

    def broadcast(self, dtype, count):
        for root in range(self.n):
            inputs = self.everyone(count, dtype, salt=root + 1)
            t = inputs[root].clone() if self.rank == root else torch.zeros(count, dtype=dtype)
            dist.broadcast(t, src=root)
            check(t, inputs[root], f"broadcast root {root} {dtype} x{count}")
            self.calls += 1

    def reduce(self, dtype, count):
        for root in range(self.n):
            for name in ["sum", "max"]:
                inputs = self.everyone(count, dtype, name, salt=root)
                t = inputs[self.rank].clone()
                dist.reduce(t, dst=root, op=OPS[name])
                if self.rank == root:
                    check(t, reduce_ref(inputs, name, dtype), f"reduce {name} root {root} {dtype}")
                self.calls += 1

    def all_gather(self, dtype, count):
        inputs = self.everyone(count, dtype, salt=5)
        mine = inputs[self.rank]
        # Separate output tensors (copied into) and views of one buffer (written directly).
        outs = [torch.full((count,), 3, dtype=dtype) for _ in range(self.n)]
        dist.all_gather(outs, mine)
        for j in range(self.n):
            check(outs[j], inputs[j], f"all_gather list {dtype} x{count} block {j}")
        joined = torch.zeros(self.n * count, dtype=dtype)
        dist.all_gather(list(joined.chunk(self.n)) if count else
                        [torch.zeros(0, dtype=dtype) for _ in range(self.n)], mine)
        if count:
            check(joined, torch.cat(inputs), f"all_gather views {dtype} x{count}")
        out = torch.zeros(self.n * count, dtype=dtype)
        dist.all_gather_into_tensor(out, mine)
        check(out, torch.cat(inputs), f"all_gather_into_tensor {dtype} x{count}")
        self.calls += 3

    def reduce_scatter(self, dtype, count):
        for name in ["sum", "min", "avg"]:
            inputs = self.everyone(count * self.n, dtype, name, salt=6)
            want = reduce_ref(inputs, name, dtype)[self.rank * count:(self.rank + 1) * count]
            out = torch.zeros(count, dtype=dtype)
            dist.reduce_scatter_tensor(out, inputs[self.rank].clone(), op=OPS[name])
            check(out, want, f"reduce_scatter_tensor {name} {dtype} x{count}")
            out = torch.zeros(count, dtype=dtype)
            pieces = [p.clone() for p in inputs[self.rank].split(count)] if count else \
                [torch.zeros(0, dtype=dtype) for _ in range(self.n)]
            dist.reduce_scatter(out, pieces, op=OPS[name])
            check(out, want, f"reduce_scatter list {name} {dtype} x{count}")
            self.calls += 2

    def all_to_all(self, dtype, count):
        n, rank = self.n, self.rank
        # Even split: rank r's block j has salt 10 r + j.
        blocks = [[data(r, count, dtype, salt=10 * r + j) for j in range(n)] for r in range(n)]
        out = torch.zeros(n * count, dtype=dtype)
        dist.all_to_all_single(out, torch.cat(blocks[rank]))
        check(out, torch.cat([blocks[j][rank] for j in range(n)]), f"all_to_all_single {dtype} x{count}")
        # Uneven: rank r sends r + j + (count % 3) rows of 2 to rank j.
        rows = [[r + j + count % 3 for j in range(n)] for r in range(n)]
        sends = [[data(r, rows[r][j] * 2, dtype, salt=r * n + j).reshape(-1, 2) for j in range(n)]
                 for r in range(n)]
        out = torch.zeros(sum(rows[j][rank] for j in range(n)), 2, dtype=dtype)
        dist.all_to_all_single(out, torch.cat(sends[rank]),
                               output_split_sizes=[rows[j][rank] for j in range(n)],
                               input_split_sizes=rows[rank])
        check(out, torch.cat([sends[j][rank] for j in range(n)]), f"all_to_all_single uneven {dtype}")
        # Lists of tensors of different sizes.
        outs = [torch.zeros(rows[j][rank], 2, dtype=dtype) for j in range(n)]
        dist.all_to_all(outs, sends[rank])
        for j in range(n):
            check(outs[j], sends[j][rank], f"all_to_all list {dtype} from {j}")
        self.calls += 3

    def gather_scatter(self, dtype, count):
        for root in range(self.n):
            inputs = self.everyone(count, dtype, salt=20 + root)
            outs = [torch.zeros(count, dtype=dtype) for _ in range(self.n)] \
                if self.rank == root else None
            dist.gather(inputs[self.rank], outs, dst=root)
            if self.rank == root:
                for j in range(self.n):
                    check(outs[j], inputs[j], f"gather root {root} {dtype} from {j}")
            t = torch.zeros(count, dtype=dtype)
            dist.scatter(t, inputs if self.rank == root else None, src=root)
            check(t, inputs[self.rank], f"scatter root {root} {dtype}")
            self.calls += 2

    def point_to_point(self, dtype, count):
        nxt, prev = (self.rank + 1) % self.n, (self.rank - 1) % self.n
        req = dist.isend(data(self.rank, count, dtype, salt=30), nxt)
        t = torch.zeros(count, dtype=dtype)
        dist.recv(t, prev)
        req.wait()
        check(t, data(prev, count, dtype, salt=30), f"isend/recv ring {dtype}")
        t = torch.zeros(count, dtype=dtype)
        req = dist.irecv(t, prev)
        dist.send(data(self.rank, count, dtype, salt=31), nxt)
        req.wait()
        check(t, data(prev, count, dtype, salt=31), f"send/irecv ring {dtype}")
        self.calls += 4

    def asynchronous(self, dtype, count):
        """Several calls in flight, waited out of order."""
        a = self.everyone(count, dtype, salt=40)
        b = self.everyone(count, dtype, salt=41)
        ta, tb = a[self.rank].clone(), b[self.rank].clone()
        outs = [torch.zeros(count, dtype=dtype) for _ in range(self.n)]
        w1 = dist.all_reduce(ta, async_op=True)
        w2 = dist.all_gather(outs, b[self.rank], async_op=True)
        w3 = dist.broadcast(tb, src=self.n - 1, async_op=True)
        w4 = dist.barrier(async_op=True)
        w3.wait()
        w4.wait()
        w1.wait()
        w2.wait()
        check(ta, reduce_ref(a, "sum", dtype), "async all_reduce")
        check(tb, b[self.n - 1], "async broadcast")
        for j in range(self.n):
            check(outs[j], b[j], "async all_gather")
        self.calls += 4


def other_tensors(suite):
    """Non-contiguous tensors; dtypes moved as bytes; a subgroup."""
    n, rank = suite.n, suite.rank
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) * (rank + 1)
    t = base.t()  # non-contiguous: reduced through a copy, written back
    assert not t.is_contiguous()
    dist.all_reduce(t)
    check(t, torch.arange(12, dtype=torch.float32).reshape(3, 4).t() * sum(range(1, n + 1)),
          "all_reduce non-contiguous")
    for dtype in [torch.bool, torch.int16, torch.complex64]:
        src = (torch.arange(6) % 2 == 0) if dtype == torch.bool else (torch.arange(6) + 1).to(dtype)
        t = src.clone() if rank == 0 else torch.zeros(6, dtype=dtype)
        dist.broadcast(t, src=0)
        check(t, src, f"broadcast {dtype}")
        outs = [torch.zeros(6, dtype=dtype) for _ in range(n)]
        dist.all_gather(outs, src)
        for o in outs:
            check(o, src, f"all_gather {dtype}")
    dist.barrier()
    if n >= 3:
        group = dist.new_group([0, 2], backend="chorus")
        if rank in (0, 2):
            t = torch.full((5,), rank + 1, dtype=torch.int64)
            dist.all_reduce(t, group=group)
            check(t, torch.full((5,), 4, dtype=torch.int64), "all_reduce in the group of ranks 0, 2")
            dist.broadcast(t, src=2, group=group)
        dist.barrier()


def main():
    how = sys.argv[1]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if how in ("env", "torchrun"):
        dist.init_process_group("chorus")
    elif how == "file":
        dist.init_process_group("chorus", init_method=f"file://{sys.argv[2]}", rank=rank,
                                world_size=world)
    elif how == "tcp":
        dist.init_process_group("chorus", init_method=f"tcp://127.0.0.1:{sys.argv[2]}", rank=rank,
                                world_size=world)
    else:
        raise SystemExit(f"unknown start-up {how!r}")
    assert dist.get_backend() == "chorus"
    assert dist.get_rank() == rank and dist.get_world_size() == world
    suite = Suite()
    if how == "env":
        for dtype in DTYPES:
            for count in COUNTS:
                suite.all_reduce(dtype, count)
                suite.all_reduce_coalesced(dtype, count)
                suite.broadcast(dtype, count)
                suite.reduce(dtype, count)
                suite.all_gather(dtype, count)
                suite.reduce_scatter(dtype, count)
                suite.all_to_all(dtype, count)
                suite.gather_scatter(dtype, count)
                suite.point_to_point(dtype, count)
                suite.asynchronous(dtype, count)
        other_tensors(suite)
    else:  # the other start-ups: a few calls show the group works
        suite.all_reduce(torch.float32, 1031)
        suite.all_gather(torch.int64, 7)
        suite.point_to_point(torch.float32, 7)
    dist.barrier()
    dist.destroy_process_group()
    print(f"torch_collectives OK rank {rank} of {world} calls {suite.calls}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
