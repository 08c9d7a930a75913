"""One rank of the metrics tests (run under chorus-run with CHORUS_METRICS set).

    metrics.py file    7 AllReduces of 8 B and 3 Broadcasts, then exits: the
                       test reads the file each rank wrote.
    metrics.py http    the same calls, then this rank reads its own /metrics
                       over HTTP while the job runs (port = CHORUS_METRICS's
                       port + rank), parses it as Prometheus text and checks
                       the counters against the calls it made.
Prints "metrics OK rank R" at the end.
"""

import os
import sys
import urllib.request

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

import chorus

ALLREDUCES = 7
BROADCASTS = 3


def samples(text, name):
    """{labels tuple: value} of every sample called `name`."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def total(text, name, **want):
    return sum(v for labels, v in samples(text, name).items()
               if all(dict(labels).get(k) == w for k, w in want.items()))


def main():
    mode = sys.argv[1]
    with chorus.init() as comm:
        x = np.ones(2, dtype=np.float32)  # 8 B
        for _ in range(ALLREDUCES):
            comm.allreduce(x, out=x)
        for _ in range(BROADCASTS):
            comm.broadcast(x, root=0)
        if mode == "http":
            port = int(os.environ["CHORUS_METRICS"].rsplit(":", 1)[1]) + comm.rank
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
                assert r.status == 200, r.status
                assert r.headers["Content-Type"].startswith("text/plain"), r.headers
                text = r.read().decode()
            rank = str(comm.rank)
            got = total(text, "chorus_calls_total", rank=rank, collective="allreduce")
            assert got == ALLREDUCES, (got, text)
            got = total(text, "chorus_calls_total", rank=rank, collective="broadcast")
            assert got == BROADCASTS, (got, text)
            got = total(text, "chorus_bytes_total", rank=rank, collective="allreduce")
            assert got == 8 * ALLREDUCES, (got, text)
            got = total(text, "chorus_call_seconds_count", rank=rank, collective="allreduce")
            assert got == ALLREDUCES, (got, text)
            comm.barrier()  # every rank has read its own before any closes
        else:
            comm.stragglers()  # the file gets the straggler counters too
        print(f"metrics OK rank {comm.rank}")


if __name__ == "__main__":
    sys.exit(main())
