"""cmake --install puts the package where the interpreter looks for the
prefix (python/CMakeLists.txt), from where it imports and runs; the versions
agree; a build without torch is the numpy binding alone."""

import os
import pathlib
import re
import subprocess

import pytest

from conftest import env_var, python


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


def cmake_install(tmp_path, *args, env=None):
    proc = subprocess.run(["cmake", "--install", env_var("CHORUS_BUILD"), *args],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, f"cmake --install failed:\n{proc.stdout}{proc.stderr}"


def check_package(site, cwd):
    """The package under `site` imports from there and runs."""
    for f in ["chorus/__init__.py", "chorus/torch/__init__.py"]:
        assert (site / f).is_file(), f
    assert list((site / "chorus").glob("_chorus*.so")), "no numpy extension installed"
    torch = env_var("CHORUS_TORCH_BACKEND") == "1"
    if torch:
        assert list((site / "chorus" / "torch").glob("_backend*.so")), "no torch extension installed"
    script = (
        "import numpy as np, chorus\n"
        f"assert chorus.__file__.startswith({str(site)!r}), chorus.__file__\n"
        f"comm = chorus.init(rank=0, world_size=1, store='file://{cwd}/store')\n"
        "assert (comm.allreduce(np.arange(4)) == np.arange(4)).all()\n"
        "comm.close()\n"
        + ("import torch.distributed as dist, chorus.torch\n"
           "assert 'CHORUS' in dist.Backend._plugins\n" if torch else "")
        + "print('installed OK')\n")
    proc = subprocess.run([python(), "-c", script], capture_output=True, text=True,
                          env=clean_env(PYTHONPATH=str(site)), cwd=str(cwd), timeout=120)
    assert proc.returncode == 0 and "installed OK" in proc.stdout, proc.stdout + proc.stderr


def test_installed_package_imports_and_runs(tmp_path):
    """--prefix P: the package lies in P/<the configured directory>."""
    prefix = tmp_path / "prefix"
    cmake_install(tmp_path, "--prefix", str(prefix))
    site = prefix / env_var("CHORUS_PYTHON_DIR")
    check_package(site, tmp_path)


def test_default_prefix_is_on_the_interpreters_path(tmp_path):
    """A DESTDIR install with the configured prefix puts the package in a
    directory that the interpreter searches (when that prefix is one of the
    interpreter's: /usr/local, CMake's default, on Debian)."""
    prefix = env_var("CHORUS_INSTALL_PREFIX")
    known = subprocess.run(
        [python(), "-c", "import sys, sysconfig\n"
         "names = sysconfig.get_scheme_names()\n"
         "print('\\n'.join(sysconfig.get_path('data', s) for s in "
         "('posix_local', 'deb_system', 'posix_prefix') if s in names))"],
        capture_output=True, text=True, env=clean_env(), check=True).stdout.split()
    if os.path.normpath(prefix) not in map(os.path.normpath, known):
        pytest.skip(f"the build's prefix {prefix} is none of {python()}'s ({', '.join(known)})")
    dest = tmp_path / "dest"
    cmake_install(tmp_path, env=clean_env(DESTDIR=str(dest)))
    python_dir = pathlib.Path(prefix) / env_var("CHORUS_PYTHON_DIR")
    path = subprocess.run([python(), "-c", "import sys; print('\\n'.join(sys.path))"],
                          capture_output=True, text=True, env=clean_env(), cwd=str(tmp_path),
                          check=True).stdout.split("\n")
    assert str(python_dir) in path, f"{python_dir} is not on {python()}'s sys.path {path}"
    # DESTDIR prefixes the absolute install path.
    check_package(pathlib.Path(str(dest) + str(python_dir)), tmp_path)


def test_versions_agree(tmp_path):
    """chorus.__version__, chorus-run --version and the CMake package's
    version are CMakeLists.txt's project(VERSION)."""
    version = env_var("CHORUS_VERSION")
    run = subprocess.run([env_var("CHORUS_RUN"), "--version"], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == f"chorus-run {version}", run.stdout + run.stderr
    py = subprocess.run([python(), "-c", "import chorus; print(chorus.__version__)"],
                        capture_output=True, text=True)
    assert py.returncode == 0 and py.stdout.strip() == version, py.stdout + py.stderr
    config = pathlib.Path(env_var("CHORUS_BUILD")) / "chorusConfigVersion.cmake"
    assert f'set(PACKAGE_VERSION "{version}")' in config.read_text()
    source = pathlib.Path(env_var("CHORUS_SOURCE"))
    assert re.search(rf"project\(chorus VERSION {re.escape(version)}\b",
                     (source / "CMakeLists.txt").read_text())


def words(text):
    """CMake's messages, with its line wrapping undone."""
    return " ".join(text.split())


def configure(tmp_path, name, *args, env):
    return subprocess.run(
        ["cmake", "-S", env_var("CHORUS_SOURCE"), "-B", str(tmp_path / name), "-G", "Ninja",
         "-DCHORUS_BUILD_TESTS=OFF", "-DCHORUS_BUILD_BENCH=OFF", f"-DPython3_EXECUTABLE={python()}",
         *args], capture_output=True, text=True, env=env, timeout=300)


def test_without_torch_the_numpy_binding_alone(tmp_path):
    """With torch hidden from the interpreter (a torch package on PYTHONPATH
    whose import fails, as a missing one does), CMake says so and builds the
    numpy binding alone; CHORUS_BUILD_TORCH=ON then fails naming torch, and
    OFF leaves it out without looking."""
    hidden = tmp_path / "hidden" / "torch"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('torch is hidden from this test')\n")
    env = clean_env(PYTHONPATH=str(hidden.parent))

    auto = configure(tmp_path, "auto", env=env)
    assert auto.returncode == 0, auto.stdout + auto.stderr
    said = words(auto.stderr)
    assert "chorus: no torch found" in said and "building the numpy binding alone" in said, said
    ninja = (tmp_path / "auto" / "build.ninja").read_text()
    assert "src/numpy_binding/module.cc" in ninja and "src/torch_backend/" not in ninja
    assert "CHORUS_TORCH_BACKEND:INTERNAL=OFF" in (tmp_path / "auto" / "CMakeCache.txt").read_text()

    on = configure(tmp_path, "on", "-DCHORUS_BUILD_TORCH=ON", env=env)
    said = words(on.stderr)
    assert on.returncode != 0 and "CHORUS_BUILD_TORCH=ON, but" in said, on.stdout + on.stderr
    assert "cannot import torch.distributed" in said, said

    off = configure(tmp_path, "off", "-DCHORUS_BUILD_TORCH=OFF", env=clean_env())
    assert off.returncode == 0, off.stdout + off.stderr
    assert "CHORUS_BUILD_TORCH=OFF: building the numpy binding alone" in off.stdout
    assert "src/torch_backend/" not in (tmp_path / "off" / "build.ninja").read_text()

    bad = configure(tmp_path, "bad", "-DCHORUS_BUILD_TORCH=maybe", env=clean_env())
    assert bad.returncode != 0, bad.stdout + bad.stderr
    assert "CHORUS_BUILD_TORCH must be AUTO, ON or OFF, not 'maybe'" in words(bad.stderr), bad.stderr
