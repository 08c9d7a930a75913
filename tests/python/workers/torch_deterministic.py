"""One rank of the torch backend's deterministic check (run under chorus-run
with CHORUS_DETERMINISTIC=1, which the backend's communicator reads).

The contributions of workers/numpy_deterministic.py (two ranks of a
permutation hold them, the others zeros), as tensors of every floating dtype
torch has: all_reduce must be the exact sum rounded once (checked as there),
and reduce_scatter and reduce must give the same bits. Prints
"torch_deterministic OK <digest>", a hash of the result bits, which the test
compares between jobs of other sizes, transports and algorithms (CHORUS_ALGO).
"""

import hashlib
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

import chorus.torch  # noqa: F401  (registers "chorus")
from numpy_deterministic import K, check_exact, wide

DTYPES = [(torch.float16, np.float16), (torch.bfloat16, None), (torch.float32, np.float32),
          (torch.float64, np.float64)]


def bits(t):
    return t.contiguous().view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]).numpy().tobytes()


def main():
    assert os.environ.get("CHORUS_DETERMINISTIC") == "1", "run with CHORUS_DETERMINISTIC=1"
    dist.init_process_group("chorus")
    rank, n = dist.get_rank(), dist.get_world_size()
    holders = [(j * (n - 1) + n // 2) % n for j in range(K)]
    digest = hashlib.sha256()
    count = 1031 * 12
    for tdtype, ndtype in DTYPES:
        source = ndtype or np.float32
        contributions = [wide(source, count, j, 7) for j in range(K)]
        tensors = [torch.from_numpy(c.copy()).to(tdtype) for c in contributions]
        x = torch.zeros(count, dtype=tdtype)
        for j in range(K):
            if holders[j] == rank:
                x = tensors[j].clone()
        total = x.clone()
        dist.all_reduce(total)
        if ndtype is not None:
            check_exact(total.numpy(), contributions, ndtype, f"all_reduce {tdtype}")
        digest.update(bits(total))
        k = count // n
        out = torch.empty(k, dtype=tdtype)
        dist.reduce_scatter(out, list(x[:k * n].chunk(n)))
        if bits(out) != bits(total[rank * k:(rank + 1) * k]):
            raise AssertionError(f"reduce_scatter {tdtype}: not the all_reduce's bits")
        y = x.clone()
        dist.reduce(y, dst=n - 1)
        if rank == n - 1 and bits(y) != bits(total):
            raise AssertionError(f"reduce {tdtype}: not the all_reduce's bits")
    dist.destroy_process_group()
    print(f"torch_deterministic OK {digest.hexdigest()}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
