"""pip install --no-build-isolation of a clean copy of the source tree into a
virtual environment with the system's packages (numpy, torch), the tools on
its PATH, a wheel that installs without a compiler, and pip uninstall
leaving nothing behind (pyproject.toml, setup.py).

The copy's CMake build directory lies where this build's lies in the source
tree, so that ccache (CMakeLists.txt, CHORUS_CCACHE) finds this build's
objects (in the cache directory the build used, CHORUS_CCACHE_DIR): the test
compiles only what differs, and reads the cache without writing to it. Each
test removes its directory (copy, build, environments) when it ends."""

import os
import pathlib
import shutil
import subprocess
import zipfile

import pytest

from conftest import env_var, python

EXACT_ALLREDUCE = (
    "import numpy as np, chorus\n"
    "with chorus.init() as comm:\n"
    "    x = np.arange(1000, dtype=np.int64) * (comm.rank + 1)\n"
    "    y = comm.allreduce(x)\n"
    "    expect = np.arange(1000, dtype=np.int64) * sum(range(1, comm.size + 1))\n"
    "    assert (y == expect).all() and y.dtype == np.int64, y\n"
    "    print('allreduce exact', comm.rank, comm.size, chorus.__file__)\n")


def copy_source(dest):
    """The source tree without build directories: git's tracked and
    untracked-but-not-ignored files where it is a git checkout."""
    src = pathlib.Path(env_var("CHORUS_SOURCE"))
    listed = subprocess.run(["git", "-C", str(src), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True)
    if listed.returncode == 0:
        for rel in filter(None, listed.stdout.decode().split("\0")):
            if (src / rel).is_file():  # not a file deleted from the work tree
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src / rel, dest / rel)
    else:
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("build*", "__pycache__", ".git"))
    assert (dest / "pyproject.toml").is_file()


def venv(path):
    subprocess.run([python(), "-m", "venv", "--system-site-packages", str(path)], check=True,
                   capture_output=True)
    return path / "bin" / "python"


def site_packages(py):
    return pathlib.Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                       capture_output=True, text=True, check=True).stdout.strip())


def run(cmd, env, cwd, timeout=900):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=str(cwd),
                          timeout=timeout)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc


def environment(venv_dir, **extra):
    """The environment of a shell with venv_dir activated: its bin/ first on
    PATH, no build tree on PYTHONPATH, pip offline and without its cache."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PATH=f"{venv_dir / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
               VIRTUAL_ENV=str(venv_dir), PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", CCACHE_READONLY="1", CCACHE_NOSTATS="1")
    if os.environ.get("CHORUS_CCACHE_DIR"):
        env["CCACHE_DIR"] = os.environ["CHORUS_CCACHE_DIR"]
    env.update(extra)
    return env


def chorus_left(site, bindir):
    return sorted([p.name for p in site.iterdir() if p.name.lower().startswith("chorus")] +
                  [p.name for p in bindir.iterdir() if p.name.startswith("chorus")])


@pytest.fixture
def scratch(tmp_path):
    """tmp_path, removed when the test ends (it holds a build and two
    environments)."""
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_pip_install_wheel_and_uninstall(scratch):
    tmp_path = scratch
    src = tmp_path / "src"
    copy_source(src)
    # The copy's build directory at the place this build has in its source tree.
    rel = os.path.relpath(env_var("CHORUS_BUILD"), env_var("CHORUS_SOURCE"))
    build = src / (rel if not rel.startswith("..") else "build-python")
    torch = env_var("CHORUS_TORCH_BACKEND") == "1"

    v1 = tmp_path / "venv"
    py1 = venv(v1)
    env1 = environment(v1, CHORUS_BUILD_DIR=str(build))
    run([py1, "-m", "pip", "install", "--no-build-isolation", str(src)], env1, tmp_path)
    site1 = site_packages(py1)
    assert (site1 / "chorus" / "__init__.py").is_file()

    # Imports from the environment, not the build tree; the versions agree.
    imports = "import chorus" + (", chorus.torch" if torch else "") + "; print(chorus.__file__, chorus.__version__)"
    out = run([py1, "-c", imports], env1, tmp_path).stdout.split()
    assert out == [str(site1 / "chorus" / "__init__.py"), env_var("CHORUS_VERSION")], out
    version = run(["chorus-run", "--version"], env1, tmp_path).stdout.strip()
    assert version == f"chorus-run {env_var('CHORUS_VERSION')}", version

    # The tools on PATH: chorus-run starts ranks that import the installed package.
    proc = run(["chorus-run", "-n", "2", "python", "-c", EXACT_ALLREDUCE], env1, tmp_path, timeout=300)
    for r in range(2):
        assert f"[{r}] allreduce exact {r} 2 {site1 / 'chorus' / '__init__.py'}" in proc.stdout, proc.stdout
    script = tmp_path / "allreduce.py"
    script.write_text(EXACT_ALLREDUCE)
    proc = run([py1, "-m", "chorus.run", "-n", "2", script], env1, tmp_path, timeout=300)
    assert proc.stdout.count("allreduce exact") == 2, proc.stdout
    assert "chorus-verify" in run(["chorus-verify", "--version"], env1, tmp_path).stdout
    assert "chorus-perf" in run(["chorus-perf", "--help"], env1, tmp_path).stdout
    # chorus-sim --plot finds its gnuplot script in the package.
    run(["chorus-sim", "allreduce", "--ranks", "8", "-b", "8", "-e", "1M", "-f", "64", "--alpha", "2us",
         "--beta", "10GB/s", "--plot", tmp_path / "sim.svg"], env1, tmp_path)
    assert "<svg" in (tmp_path / "sim.svg").read_text()

    # A wheel (the same build directory, built already), installed into a
    # second environment with nothing on PATH but that environment: no
    # compiler, no cmake.
    wheels = tmp_path / "wheels"
    run([py1, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", wheels, str(src)], env1, tmp_path)
    (wheel,) = wheels.glob("chorus-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for tool in ["chorus-run", "chorus-perf", "chorus-sim", "chorus-verify", "chorus-soak"]:
        assert f"chorus/bin/{tool}" in names, names
    assert any(n.startswith("chorus/_chorus.") for n in names), names
    assert any(n.startswith("chorus/torch/_backend.") for n in names) == torch, names
    v2 = tmp_path / "venv2"
    py2 = venv(v2)
    env2 = environment(v2, PATH=str(v2 / "bin"))
    assert shutil.which("c++", path=env2["PATH"]) is None and shutil.which("cmake", path=env2["PATH"]) is None
    run([py2, "-m", "pip", "install", wheel], env2, tmp_path)
    site2 = site_packages(py2)
    run([py2, "-c", imports], env2, tmp_path)
    proc = run([v2 / "bin" / "chorus-run", "-n", "2", py2, "-c", EXACT_ALLREDUCE], env2, tmp_path, timeout=300)
    assert proc.stdout.count("allreduce exact") == 2 and str(site2) in proc.stdout, proc.stdout

    # pip uninstall leaves no file of chorus in either environment.
    for py, site, venv_dir, env in [(py1, site1, v1, env1), (py2, site2, v2, env2)]:
        assert chorus_left(site, venv_dir / "bin")
        run([py, "-m", "pip", "uninstall", "-y", "chorus"], env, tmp_path)
        assert chorus_left(site, venv_dir / "bin") == [], chorus_left(site, venv_dir / "bin")
        # (A chorus elsewhere on the system's path may still import, from there.)
        where = run([py, "-c", "import importlib.util as u; s = u.find_spec('chorus'); print(s and s.origin)"],
                    env, tmp_path).stdout
        assert str(venv_dir) not in where, where


def test_pip_install_without_torch(scratch):
    """With torch hidden while it builds, pip installs the numpy binding
    alone, and `import chorus.torch` says why it has no backend."""
    tmp_path = scratch
    src = tmp_path / "src"
    copy_source(src)
    rel = os.path.relpath(env_var("CHORUS_BUILD"), env_var("CHORUS_SOURCE"))
    build = src / (rel if not rel.startswith("..") else "build-python")
    hidden = tmp_path / "hidden" / "torch"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('torch is hidden from this test')\n")
    v = tmp_path / "venv"
    py = venv(v)
    env = environment(v, CHORUS_BUILD_DIR=str(build))
    proc = run([py, "-m", "pip", "install", "-v", "--no-build-isolation", str(src)],
               dict(env, PYTHONPATH=str(hidden.parent)), tmp_path)
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "chorus: no torch found" in said and "the package gets the numpy binding alone" in said, said
    site = site_packages(py)
    assert not list((site / "chorus" / "torch").glob("_backend*"))
    run([py, "-c", "import chorus, numpy; assert chorus.__version__"], env, tmp_path)
    if subprocess.run([python(), "-c", "import torch"], capture_output=True).returncode == 0:
        proc = subprocess.run([str(py), "-c", "import chorus.torch"], capture_output=True, text=True, env=env,
                              cwd=str(tmp_path))
        assert proc.returncode != 0 and "built without its torch backend" in proc.stderr, proc.stderr
    run([py, "-m", "pip", "uninstall", "-y", "chorus"], env, tmp_path)
    assert chorus_left(site, v / "bin") == []
