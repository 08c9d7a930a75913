"""Ctrl-C in a blocked call (run under chorus-run -n 2).

Round 0: rank 0 alone starts a job of two ranks whose second never comes;
init() waits for it until Ctrl-C. Round 1: rank 0 blocks in a receive from rank 1, which never sends; a thread
of rank 0 sends it SIGINT, as Ctrl-C does. The call must raise
KeyboardInterrupt from inside the receive and abort the communicator: rank
1, blocked in a receive from rank 0, raises AbortedError naming the
interrupt. Round 2: the same with rank 0 blocked in an AllReduce that rank 1
never joins (rank 1 waits on another communicator meanwhile). Round 3: the
same with rank 0 blocked in comm.window(), a collective rank 1 never joins.

Every call's timeout (120 s) is far beyond the test's: a call that ignored
the signal would end in chorus.TimeoutError instead. The thread that sends
SIGINT is Python code: it runs only because the blocked call released the
GIL (a call that held it would never be interrupted, and time out).
"""

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback

import numpy as np

import chorus
from expect import expect


def interrupted(call):
    """Runs call() while a thread sends this process SIGINT after 0.5 s; the
    KeyboardInterrupt must come from inside the call."""
    sent = {}

    def interrupt():
        time.sleep(0.5)
        sent["at"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    depth = len(traceback.extract_stack())
    try:
        call()
    except KeyboardInterrupt as e:
        latency_ms = (time.monotonic() - sent["at"]) * 1000
        frames = traceback.extract_tb(e.__traceback__)
        # This frame, then the lambda that makes the call: nothing deeper in Python.
        assert len(frames) == 2 and frames[-1].name == "<lambda>", \
            f"KeyboardInterrupt raised outside the call: {frames}"
        print(f"numpy_interrupt: KeyboardInterrupt {latency_ms:.1f} ms after SIGINT", flush=True)
        return
    finally:
        assert len(traceback.extract_stack()) == depth
    raise AssertionError("the call returned")


def main():
    sync = chorus.init()
    assert sync.size == 2, "run with -n 2"
    rank = sync.rank

    # Round 0: a start-up that waits for a rank that never comes. Its own
    # timeout (1 s) ends the start-up left behind soon after.
    if rank == 0:
        lonely = tempfile.mkdtemp(prefix="chorus-interrupt-")
        interrupted(lambda: chorus.init(rank=0, world_size=2, store=f"file://{lonely}/store",
                                        timeout=1.0))

    # Round 1: a blocked receive.
    comm = chorus.init()
    sync.barrier()
    if rank == 0:
        interrupted(lambda: comm.recv(np.zeros(4, np.float32), 1, timeout=120))
        expect(chorus.AbortedError, lambda: comm.barrier(), "KeyboardInterrupt")
    else:
        expect(chorus.AbortedError, lambda: comm.recv(np.zeros(4, np.float32), 0, timeout=120),
               "KeyboardInterrupt")
    comm.close()

    # Round 2: a blocked AllReduce.
    comm = chorus.init()
    sync.barrier()
    if rank == 0:
        interrupted(lambda: comm.allreduce(np.ones(1 << 20, np.float32), timeout=120))
        expect(chorus.AbortedError, lambda: comm.barrier(), "KeyboardInterrupt")
        sync.send(np.ones(1), 1)
    else:
        sync.recv(np.zeros(1), 0, timeout=120)
    comm.close()

    # Round 3: a blocked window creation.
    comm = chorus.init()
    sync.barrier()
    if rank == 0:
        interrupted(lambda: comm.window(1 << 20))
        expect(chorus.AbortedError, lambda: comm.barrier(), "KeyboardInterrupt")
        sync.send(np.ones(1), 1)
    else:
        sync.recv(np.zeros(1), 0, timeout=120)
    comm.close()
    sync.close()
    if rank == 0:
        time.sleep(1.5)  # the start-up of round 0 has given up by now
        shutil.rmtree(lonely, ignore_errors=True)
    print(f"numpy_interrupt OK rank {rank}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
