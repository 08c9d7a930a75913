"""Window-backed tensors of the torch backend (run under chorus-run, N = 2 or 3).

gloo is the default group; chorus groups live beside it: one with the
algorithms chorus chooses, and ones made with CHORUS_ALGO=allreduce=one_shot
and =two_shot. chorus.torch.empty gives tensors whose memory lies in a
window of the group's communicator (a chorus-window mapping of
/proc/self/maps); all_reduce on them (and on slices of them) gives the exact
result of every dtype and op, equal to gloo's on ordinary tensors where gloo
has the dtype and op; the other collectives on them too. The memory lives
while a view of the tensor does; a one-sided all_reduce on window tensors
makes no staging window where the same call on ordinary tensors does; over
tcp, and on a group that is not chorus's, the call raises InvalidArgument.
Prints "torch_windows OK" at the end.
"""

import gc
import os
import sys

import torch
import torch.distributed as dist

import chorus
import chorus.torch
from expect import expect
from refs import in_window_map, window_maps
from torch_collectives import DTYPES, OPS, check, data, reduce_ref

COUNTS = [1, 7, 1031, 65537]
# gloo reduces these (no bfloat16, no AVG).
GLOO_DTYPES = [d for d in DTYPES if d != torch.bfloat16]
GLOO_OPS = ["sum", "prod", "min", "max"]


def in_window(t):
    return in_window_map(t.data_ptr(), t.numel() * t.element_size())


def chorus_group(algorithm=None, transport=None):
    """A new chorus group; its communicator reads CHORUS_ALGO and
    CHORUS_TRANSPORT when it is made."""
    saved = {k: os.environ.get(k) for k in ("CHORUS_ALGO", "CHORUS_TRANSPORT")}
    if algorithm:
        os.environ["CHORUS_ALGO"] = f"allreduce={algorithm}"
    if transport:
        os.environ["CHORUS_TRANSPORT"] = transport
    try:
        return dist.new_group(backend="chorus")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def tensors(group):
    """chorus.torch.empty's sizes and dtypes; its tensors lie in windows."""
    for args, shape in [((5,), (5,)), ((2, 3), (2, 3)), (((2, 3),), (2, 3)),
                        ((torch.Size([4, 1]),), (4, 1)), (([],), ()), ((0,), (0,))]:
        t = chorus.torch.empty(*args, group=group)
        assert t.shape == shape and t.dtype == torch.get_default_dtype(), (args, t.shape, t.dtype)
        assert t.device.type == "cpu" and t.is_contiguous() and not t.requires_grad
        if t.numel():
            assert in_window(t), f"chorus.torch.empty{args} is not in a window"
    for dtype in DTYPES + [torch.bool, torch.int16, torch.complex64]:
        t = chorus.torch.empty(3, 5, dtype=dtype, group=group)
        assert t.dtype == dtype and t.shape == (3, 5), (t.dtype, t.shape)
        assert in_window(t), f"chorus.torch.empty of {dtype} is not in a window"


def errors(group, gloo):
    e = expect(chorus.InvalidArgument, lambda: chorus.torch.empty(4),
               "not a chorus process group", "gloo")
    assert isinstance(e, ValueError) and e.code == "invalid_argument", e
    expect(chorus.InvalidArgument, lambda: chorus.torch.empty(4, group=gloo), "gloo")
    expect(chorus.InvalidArgument, lambda: chorus.torch.empty(4, -2, group=group),
           "empty", "negative size -2")
    expect(chorus.InvalidArgument, lambda: chorus.torch.empty(4, dtype="float32", group=group),
           "dtype must be a torch.dtype")
    expect(TypeError, lambda: chorus.torch.empty(2.5, group=group))
    # The group still works.
    t = torch.ones(3)
    dist.all_reduce(t, group=group)
    check(t, torch.full((3,), float(dist.get_world_size())), "all_reduce after the errors")


class Grid:
    """all_reduce on window tensors against the exact results and gloo's."""

    def __init__(self, group, gloo, name):
        self.group = group
        self.gloo = gloo
        self.name = name
        self.rank = dist.get_rank()
        self.n = dist.get_world_size()
        self.calls = 0

    def all_reduce(self, dtype):
        # Slices of one window tensor per dtype, and a fresh one per count.
        pool = chorus.torch.empty(max(COUNTS) + 16, dtype=dtype, group=self.group)
        for count in COUNTS:
            for op, reduce_op in OPS.items():
                inputs = [data(r, count, dtype, op) for r in range(self.n)]
                want = reduce_ref(inputs, op, dtype)
                what = f"{self.name}: all_reduce {op} {dtype} x{count}"
                t = pool[16:16 + count]
                t.copy_(inputs[self.rank])
                dist.all_reduce(t, op=reduce_op, group=self.group)
                check(t, want, what + " (a slice of a window tensor)")
                fresh = chorus.torch.empty(count, dtype=dtype, group=self.group)
                fresh.copy_(inputs[self.rank])
                dist.all_reduce(fresh, op=reduce_op, group=self.group)
                check(fresh, want, what + " (chorus.torch.empty)")
                self.calls += 2
                if dtype in GLOO_DTYPES and op in GLOO_OPS:
                    ordinary = inputs[self.rank].clone()
                    dist.all_reduce(ordinary, op=reduce_op, group=self.gloo)
                    check(fresh, ordinary, what + " against gloo")

    def others(self, dtype, count):
        """The other collectives on window tensors."""
        n, rank, g = self.n, self.rank, self.group
        what = f"{self.name}: {dtype} x{count} in windows"
        everyone = [data(r, count, dtype, salt=1) for r in range(n)]
        gathered = chorus.torch.empty(n * count, dtype=dtype, group=g)
        mine = gathered[rank * count:(rank + 1) * count]
        mine.copy_(everyone[rank])
        dist.all_gather_into_tensor(gathered, mine, group=g)
        check(gathered, torch.cat(everyone), "all_gather_into_tensor (in place) " + what)
        full = [data(r, n * count, dtype, salt=2) for r in range(n)]
        x = chorus.torch.empty(n * count, dtype=dtype, group=g)
        x.copy_(full[rank])
        block = chorus.torch.empty(count, dtype=dtype, group=g)
        dist.reduce_scatter_tensor(block, x, group=g)
        check(block, reduce_ref(full, "sum", dtype)[rank * count:(rank + 1) * count],
              "reduce_scatter_tensor " + what)
        for root in range(n):
            b = chorus.torch.empty(count, dtype=dtype, group=g)
            b.copy_(everyone[root] if rank == root else torch.zeros(count, dtype=dtype))
            dist.broadcast(b, src=root, group=g)
            check(b, everyone[root], f"broadcast root {root} " + what)
        w = dist.all_reduce(x, group=g, async_op=True)
        w.wait()
        check(x, reduce_ref(full, "sum", dtype), "async all_reduce " + what)
        self.calls += 3 + n


def lifetime(group):
    n = dist.get_world_size()
    t = chorus.torch.empty(1031, dtype=torch.int64, group=group)
    view = t[8:]
    del t
    gc.collect()
    view.fill_(dist.get_rank() + 1)
    dist.all_reduce(view, group=group)
    check(view, torch.full((1023,), n * (n + 1) // 2, dtype=torch.int64), "a view after del")

    def mapped():
        return sum(1 for lo, hi in window_maps() if hi - lo == 4096 * 8)

    before = mapped()
    big = chorus.torch.empty(4096 * 7 + 8, dtype=torch.uint8, group=group)
    assert mapped() == before + n, (before, mapped())
    part = big[100:200]
    del big
    gc.collect()
    assert mapped() == before + n, "the window went while a view still used it"
    del part, view
    gc.collect()
    assert mapped() == before, "the window outlived its last tensor"


def no_staging(algorithm):
    """On window tensors, a one-sided all_reduce reads the peers' tensors in
    place: no staging window appears, where one does for ordinary tensors."""
    group = chorus_group(algorithm)
    n, rank = dist.get_world_size(), dist.get_rank()
    count = 300_000  # 1.2 MB of float32; staging windows are powers of two
    nbytes = count * 4
    want = torch.full((count,), float(n * (n + 1) // 2))
    t = chorus.torch.empty(count, group=group)
    t.fill_(rank + 1)
    before = set(window_maps())
    dist.all_reduce(t, group=group)
    added = [hi - lo for lo, hi in set(window_maps()) - before]
    check(t, want, f"{algorithm} on a window tensor")
    assert all(size < nbytes for size in added), \
        f"{algorithm} on a window tensor mapped new windows of {added} bytes"
    ordinary = torch.full((count,), float(rank + 1))
    before = set(window_maps())
    dist.all_reduce(ordinary, group=group)
    added = [hi - lo for lo, hi in set(window_maps()) - before]
    check(ordinary, want, f"{algorithm} on an ordinary tensor")
    assert len([s for s in added if s >= nbytes]) == n, \
        f"{algorithm} on an ordinary tensor staged it in no window: new maps {added}"
    flight = group.flight_record()
    assert f'"algorithm":"{algorithm}"' in flight.replace(" ", ""), flight


def on_tcp():
    group = chorus_group(transport="tcp")
    assert group.transport == "tcp", group.transport
    e = expect(chorus.InvalidArgument, lambda: chorus.torch.empty(4, group=group),
               "window", "share no memory", "tcp")
    assert e.code == "invalid_argument", e
    t = torch.ones(3)
    dist.all_reduce(t, group=group)
    check(t, torch.full((3,), float(dist.get_world_size())), "tcp all_reduce after the error")


def main():
    dist.init_process_group("gloo")
    gloo = dist.group.WORLD
    rank, n = dist.get_rank(), dist.get_world_size()
    group = chorus_group()
    assert group.transport == "shm", group.transport
    tensors(group)
    errors(group, gloo)
    calls = 0
    for algorithm in [None, "one_shot", "two_shot"]:
        g = group if algorithm is None else chorus_group(algorithm)
        grid = Grid(g, gloo, algorithm or "chosen")
        for dtype in DTYPES:
            grid.all_reduce(dtype)
            grid.others(dtype, 1031)
        calls += grid.calls
    lifetime(group)
    for algorithm in ["one_shot", "two_shot"]:
        no_staging(algorithm)
    on_tcp()
    dist.barrier()
    dist.destroy_process_group()
    print(f"torch_windows OK rank {rank} of {n} calls {calls}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
