"""One rank of the straggler tests (run under chorus-run).

    stragglers.py SLOW DELAY_MS CALLS
After one AllReduce that lines the ranks up (their start-ups differ), rank
SLOW (-1: none) sleeps DELAY_MS before each of CALLS AllReduces of 8 B; then
every rank calls comm.stragglers(CALLS) and prints its report, the flight
record's verdicts and how long its sleeps really lasted (a loaded host
oversleeps) as one line: "stragglers rank R <json>".
"""

import json
import sys
import time

import numpy as np

import chorus


def main():
    slow, delay_ms, calls = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    with chorus.init() as comm:
        x = np.ones(2, dtype=np.float32)
        comm.allreduce(x, out=x)
        slept = []
        for _ in range(calls):
            if comm.rank == slow:
                t0 = time.monotonic()
                time.sleep(delay_ms / 1000)
                slept.append(time.monotonic() - t0)
            comm.allreduce(x, out=x)
        report = comm.stragglers(calls)
        assert [r["rank"] for r in report] == list(range(comm.size)), report
        for r in report:
            assert set(r) == {"rank", "calls", "last_count", "mean_late_s", "p90_late_s",
                              "wait_share", "error_s"}, r
        record = json.loads(comm.flight_record())
        verdicts = [c["last_rank"] for c in record["calls"] if "last_rank" in c]
        print(f"stragglers rank {comm.rank} {json.dumps({'report': report, 'verdicts': verdicts, 'slept_mean_s': sum(slept) / len(slept) if slept else 0})}",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
