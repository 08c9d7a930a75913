"""`cmake --install build --prefix P` puts the package under
P/lib/python3/dist-packages/chorus/, from where it imports and runs."""

import os
import pathlib
import subprocess

from conftest import env_var, python


def test_installed_package_imports_and_runs(tmp_path):
    prefix = tmp_path / "prefix"
    install = subprocess.run(["cmake", "--install", env_var("CHORUS_BUILD"), "--prefix", str(prefix)],
                             capture_output=True, text=True)
    assert install.returncode == 0, f"cmake --install failed:\n{install.stdout}{install.stderr}"
    site = prefix / "lib" / "python3" / "dist-packages"
    for f in ["chorus/__init__.py", "chorus/torch/__init__.py"]:
        assert (site / f).is_file(), f
    assert list((site / "chorus").glob("_chorus*.so")), "no numpy extension installed"
    assert list((site / "chorus" / "torch").glob("_backend*.so")), "no torch extension installed"
    script = (
        "import numpy as np, torch.distributed as dist, chorus, chorus.torch\n"
        f"assert chorus.__file__.startswith({str(site)!r}), chorus.__file__\n"
        f"comm = chorus.init(rank=0, world_size=1, store='file://{tmp_path}/store')\n"
        "assert (comm.allreduce(np.arange(4)) == np.arange(4)).all()\n"
        "comm.close()\n"
        "assert 'CHORUS' in dist.Backend._plugins\n"
        "print('installed OK')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    proc = subprocess.run([python(), "-c", script], capture_output=True, text=True, env=env,
                          cwd=str(pathlib.Path(tmp_path)), timeout=120)
    assert proc.returncode == 0 and "installed OK" in proc.stdout, proc.stdout + proc.stderr
