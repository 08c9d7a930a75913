"""The torch.distributed backend "chorus": every supported call at N = 2 and
3, the three ways to start (env://, file://, tcp://), DDP against gloo, and
its errors."""

import pytest

from conftest import free_port, launch, require_ok


@pytest.mark.parametrize("n", [2, 3])
def test_collectives(n):
    require_ok(launch(n, "torch_collectives.py", "env"), n, "torch_collectives OK")


def test_init_method_file(tmp_path):
    require_ok(launch(2, "torch_collectives.py", "file", tmp_path / "store"), 2,
               "torch_collectives OK")


def test_init_method_tcp():
    require_ok(launch(3, "torch_collectives.py", "tcp", free_port(), transport="tcp"), 3,
               "torch_collectives OK")


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_matches_gloo(n):
    require_ok(launch(n, "torch_ddp.py"), n, "torch_ddp OK")


def test_errors(tmp_path):
    require_ok(launch(2, "torch_errors.py", tmp_path), 2, "torch_errors OK")


def test_ddp_example_trains(tmp_path):
    """examples/ddp_train.py, as the README runs it: the loss falls."""
    import pathlib
    import re
    import subprocess

    from conftest import _env, python
    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "ddp_train.py"
    proc = subprocess.run([_env("CHORUS_RUN"), "-n", "2", python(), str(example), "--steps", "40"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = re.search(r"^\[0\] chorus, 2 ranks: loss ([0-9.]+) -> ([0-9.]+)", proc.stdout, re.MULTILINE)
    assert m, proc.stdout
    assert float(m.group(2)) < 0.8 * float(m.group(1)), m.group(0)
