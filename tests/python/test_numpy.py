"""The numpy binding: every collective and dtype at N = 1..4 over shm and tcp,
the error classes, Ctrl-C, the variables chorus-run exports, and windows
(comm.window, comm.empty) over shm and tcp, comm.split / split_by_host, and
comm.revoke / comm.shrink after a rank is killed, comm.grow / chorus.join, and
examples/elastic_train.py against a reference run."""

import os
import pathlib
import re
import subprocess

import numpy as np
import pytest

from conftest import (env_var, launch, pick_env, python, ranks_reporting, require_ok,
                      require_picked)


@pytest.mark.parametrize("transport", ["shm", "tcp"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_collectives(n, transport):
    require_ok(launch(n, "numpy_collectives.py", transport=transport), n, "numpy_collectives OK")


# A mismatch and a timeout must be raised whichever algorithm runs the call:
# over shm once with a one-sided pick (one_shot) and once with a two-sided one
# (ring), fixed by a tuning file and checked; over tcp every pick is two-sided.
@pytest.mark.parametrize("transport,algorithm", [("shm", "one_shot"), ("shm", "ring"), ("tcp", "ring")])
def test_errors(transport, algorithm):
    proc = launch(2, "numpy_errors.py", transport=transport, extra_env=pick_env(algorithm))
    require_picked(proc, 2, algorithm)
    require_ok(proc, 2, "numpy_errors OK")


# Over shm; the C++ checks run over tcp too (multiprocess_split_tcp_N5).
def test_split():
    require_ok(launch(4, "numpy_split.py", transport="shm"), 4, "numpy_split OK")


# A rank killed: the survivors shrink, then revoke and shrink again. chorus-run
# exits non-zero (a rank died) once the survivors are done.
@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_revoke_and_shrink(transport):
    proc = launch(4, "numpy_shrink.py", transport=transport, grace=60, timeout=300)
    detail = f"\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert ranks_reporting(proc, "numpy_shrink OK") == {0, 1, 2}, detail
    assert "rank 3 was killed by signal 9" in proc.stderr + proc.stdout, detail


# A rank killed, the survivors shrink, and a new process joins by grow.
def test_grow_after_shrink():
    proc = launch(4, "numpy_grow.py", transport="shm", grace=60, timeout=300)
    detail = f"\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    # The joiner prints through rank 0's output.
    assert proc.stdout.count("numpy_grow OK") == 4, detail
    assert "numpy_grow OK rank 3" in proc.stdout, detail


def test_elastic_train_example(tmp_path):
    """examples/elastic_train.py under chorus-run --elastic --replace 1: rank 3
    dies at step 10, the survivors shrink and go on, the replacement joins at
    step 20; the final parameters match the same schedule on one process."""
    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "elastic_train.py"
    cmd = [env_var("CHORUS_RUN"), "-n", "4", "--elastic", "--replace", "1", python(),
           str(example), "--kill-rank", "3", "--kill-at", "10", "--join-at", "20",
           "--out", str(tmp_path / "w.npy")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    detail = f"\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert proc.returncode == 0, f"chorus-run exited {proc.returncode}{detail}"
    assert "EVENT failure at step 10" in proc.stdout, detail
    assert "EVENT join at step 20: grow to 4 ranks" in proc.stdout, detail
    assert "elastic_train done: 30 steps, 4 ranks at the end" in proc.stdout, detail
    ref = subprocess.run([python(), str(example), "--reference", "--out", str(tmp_path / "ref.npy")],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert ref.returncode == 0, ref.stderr
    w, w_ref = np.load(tmp_path / "w.npy"), np.load(tmp_path / "ref.npy")
    rel = np.max(np.abs(w - w_ref)) / np.max(np.abs(w_ref))
    assert rel <= 1e-5, f"final parameters differ from the reference by {rel} (relative){detail}"


@pytest.mark.parametrize("n", [2, 3])
def test_windows(n):
    require_ok(launch(n, "numpy_windows.py", "shm", transport="shm"), n, "numpy_windows OK")


def test_windows_over_tcp_raise():
    require_ok(launch(2, "numpy_windows.py", "tcp", transport="tcp"), 2, "numpy_windows OK")


def test_ctrl_c_aborts_a_blocked_call():
    proc = launch(2, "numpy_interrupt.py", timeout=300)
    require_ok(proc, 2, "numpy_interrupt OK")
    assert re.search(r"KeyboardInterrupt [0-9.]+ ms after SIGINT", proc.stdout), proc.stdout


def test_chorus_run_exports_torch_variables():
    proc = launch(3, "launcher_env.py")
    assert proc.returncode == 0, proc.stderr
    ports = set()
    for rank in range(3):
        m = re.search(rf"^\[{rank}\] ENV (.*)$", proc.stdout, re.MULTILINE)
        assert m, proc.stdout
        env = dict(kv.split("=", 1) for kv in m.group(1).split())
        assert env["RANK"] == env["CHORUS_RANK"] == str(rank), env
        assert env["LOCAL_RANK"] == str(rank), env
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "3", env
        assert env["MASTER_ADDR"] == "127.0.0.1", env
        assert 0 < int(env["MASTER_PORT"]) < 65536, env
        ports.add(env["MASTER_PORT"])
    assert len(ports) == 1, f"the ranks were given different MASTER_PORTs: {ports}"
    assert ranks_reporting(proc, "ENV") == {0, 1, 2}


def test_deterministic_bits_do_not_depend_on_rank_count_or_transport():
    """deterministic=True: every algorithm gives the exact sum rounded once
    (workers/numpy_deterministic.py); the result bits are the same for 2, 3
    and 4 ranks over shm and tcp, and with CHORUS_DETERMINISTIC=1 alone."""
    digests = set()
    for n, transport, how in [(2, "shm", "kw"), (3, "tcp", "kw"), (4, "shm", "kw"), (4, "tcp", "kw"),
                              (3, "shm", "env")]:
        proc = launch(n, "numpy_deterministic.py", how, transport=transport, timeout=600,
                      extra_env={"CHORUS_DETERMINISTIC": "1"} if how == "env" else None)
        require_ok(proc, n, "numpy_deterministic OK")
        digests |= set(re.findall(r"numpy_deterministic OK (\w+)", proc.stdout))
    assert len(digests) == 1, f"the results differ between jobs: {digests}"
