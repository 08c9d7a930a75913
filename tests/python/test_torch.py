"""The torch.distributed backend "chorus": every supported call at N = 2 and
3, the ways to start (env://, file://, tcp://, torchrun), DDP against gloo,
window-backed tensors against gloo, the example, errors, and the shrink recipe."""

import pathlib
import re
import subprocess

import pytest

from conftest import (WORKERS, env_var, free_port, launch, pick_env, python, ranks_reporting,
                      require_ok, require_picked)


@pytest.mark.parametrize("n", [2, 3])
def test_collectives(n):
    require_ok(launch(n, "torch_collectives.py", "env"), n, "torch_collectives OK")


def test_init_method_file(tmp_path):
    require_ok(launch(2, "torch_collectives.py", "file", tmp_path / "store"), 2,
               "torch_collectives OK")


def test_init_method_tcp():
    require_ok(launch(3, "torch_collectives.py", "tcp", free_port(), transport="tcp"), 3,
               "torch_collectives OK")


def test_under_torchrun():
    """torchrun of torch 1.13 on Python 3.11 needs --redirects and --tee
    (without them its agent fails before starting any worker)."""
    proc = subprocess.run([python(), "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
                           "--redirects", "2", "--tee", "2",
                           str(WORKERS / "torch_collectives.py"), "torchrun"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ok = set(re.findall(r"torch_collectives OK rank (\d) of 2", proc.stdout))
    assert ok == {"0", "1"}, proc.stdout + proc.stderr


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_matches_gloo(n):
    require_ok(launch(n, "torch_ddp.py"), n, "torch_ddp OK")


def test_calls_gloo_serves():
    """all_reduce_coalesced, all_gather_coalesced, monitored_barrier and a
    sparse all_reduce, each against gloo's result."""
    require_ok(launch(4, "torch_completeness.py"), 4, "torch_completeness OK")


def test_profiler_sees_the_calls():
    """torch.profiler records "chorus:all_reduce" with its input shape, and a
    DDP step's AllReduces (tests/python/workers/torch_profiler.py)."""
    require_ok(launch(2, "torch_profiler.py"), 2, "torch_profiler OK")


def test_new_group_derives_from_the_default_group():
    require_ok(launch(4, "torch_subgroups.py"), 4, "torch_subgroups OK")


@pytest.mark.parametrize("n", [2, 3])
def test_window_tensors(n):
    require_ok(launch(n, "torch_windows.py"), n, "torch_windows OK")


# Over shm, once with a one-sided AllReduce pick (one_shot) and once with a
# two-sided one (ring), fixed by a tuning file and checked.
@pytest.mark.parametrize("algorithm", ["one_shot", "ring"])
def test_errors(tmp_path, algorithm):
    proc = launch(2, "torch_errors.py", tmp_path, extra_env=pick_env(algorithm))
    require_picked(proc, 2, algorithm)
    require_ok(proc, 2, "torch_errors OK")


def test_shrink_default_group_after_a_kill():
    """chorus.torch.shrink_default_group: the recipe for torch 1.13 (a new
    default group built on the shrunk communicator), then DDP goes on."""
    proc = launch(4, "torch_elastic.py", grace=60, timeout=300)
    detail = f"\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert ranks_reporting(proc, "torch_elastic OK") == {0, 1, 2}, detail


def test_ddp_example_trains():
    """examples/ddp_train.py, as the README runs it: the loss falls."""
    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "ddp_train.py"
    proc = subprocess.run([env_var("CHORUS_RUN"), "-n", "2", python(), str(example), "--steps", "40"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = re.search(r"^\[0\] chorus, 2 ranks: loss ([0-9.]+) -> ([0-9.]+)", proc.stdout, re.MULTILINE)
    assert m, proc.stdout
    assert float(m.group(2)) < 0.8 * float(m.group(1)), m.group(0)


def test_deterministic_all_reduce_bits_do_not_depend_on_the_job():
    """CHORUS_DETERMINISTIC=1 under torch.distributed: all_reduce is the exact
    sum rounded once (workers/torch_deterministic.py), and its bits are the
    same at 2, 3 and 4 ranks, over shm and tcp, whichever algorithm
    CHORUS_ALGO names."""
    digests = set()
    algos = {"ring": "allreduce=ring,reduce_scatter=ring,reduce=binomial",
             "other": "allreduce=halving_doubling,reduce_scatter=recursive_halving,"
                      "reduce=pipelined_chain"}
    for n, transport, algo in [(2, "shm", None), (3, "tcp", "ring"), (4, "shm", "other"),
                               (4, "tcp", None)]:
        env = {"CHORUS_DETERMINISTIC": "1"}
        if algo:
            env["CHORUS_ALGO"] = algos[algo]
        proc = launch(n, "torch_deterministic.py", transport=transport, timeout=600, extra_env=env)
        require_ok(proc, n, "torch_deterministic OK")
        digests |= set(re.findall(r"torch_deterministic OK (\w+)", proc.stdout))
    assert len(digests) == 1, f"the results differ between jobs: {digests}"
