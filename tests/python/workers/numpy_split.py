"""One rank of the numpy binding's split test (run under chorus-run).

comm.split(color, key=0) and comm.split_by_host(): parity groups, key
reversal, a negative color (None), a child of a child, parent and child
used in turn; each child's membership is checked with an allgather of the
parent ranks, and collectives on it against exact results. Prints
"numpy_split OK" at the end.
"""

import numpy as np

import chorus
from expect import expect
from refs import check_equal


def members(child, parent_rank):
    return [int(v) for v in child.allgather(np.array([parent_rank], np.int32)).ravel()]


def check_child(child, parent_rank, expected, what):
    assert isinstance(child, chorus.Communicator), (what, child)
    assert child.size == len(expected), (what, child.size, expected)
    assert child.rank == expected.index(parent_rank), (what, child.rank, expected)
    assert members(child, parent_rank) == expected, (what, members(child, parent_rank), expected)
    x = np.arange(9, dtype=np.float64) + parent_rank
    check_equal(child.allreduce(x), sum(np.arange(9, dtype=np.float64) + r for r in expected),
                what + ": allreduce")
    y = np.full(3, parent_rank, np.int64) if child.rank == 0 else np.zeros(3, np.int64)
    check_equal(child.broadcast(y, root=0), np.full(3, expected[0], np.int64), what + ": broadcast")
    child.barrier()


def main():
    with chorus.init() as comm:
        n, r = comm.size, comm.rank
        with comm.split(r % 2) as parity:
            check_child(parity, r, [x for x in range(n) if x % 2 == r % 2], "parity")
            # A child of a child, and the parent used in between.
            comm.barrier()
            half = parity.split(0 if parity.rank < parity.size // 2 else 1, key=parity.rank)
            same = [x for x in range(n) if x % 2 == r % 2]
            cut = len(same) // 2
            mine = same.index(r)
            check_child(half, r, [x for i, x in enumerate(same) if (i < cut) == (mine < cut)],
                        "child of a child")
            half.close()
        check_child(comm.split(0, key=-r), r, list(range(n - 1, -1, -1)), "key reversal")
        lonely = comm.split(-1 if r == 0 else 1, key=r)
        if r == 0:
            assert lonely is None, lonely
        else:
            check_child(lonely, r, list(range(1, n)), "negative color")
        local = comm.split_by_host()
        check_child(local, r, list(range(n)), "split_by_host")
        assert local.transport in ("shm", "tcp", "shm+tcp"), local.transport
        expect(TypeError, lambda: comm.split("red"))
        comm.barrier()
    print("numpy_split OK", flush=True)


if __name__ == "__main__":
    main()
