"""Shared helpers of the Python package's tests.

ctest runs each test_*.py with Debian's interpreter and sets:
  PYTHONPATH     the build tree's python/ (import chorus, chorus.torch)
  CHORUS_RUN     the chorus-run launcher
  CHORUS_PYTHON  the interpreter the ranks run (/usr/bin/python3)
  CHORUS_BUILD   the build directory (for the install test)
Ranks are scripts under workers/, started by chorus-run.
"""

import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest

WORKERS = pathlib.Path(__file__).resolve().parent / "workers"
# Tuning files that fix the tuner's AllReduce pick at N = 2 (tests/support/picks/).
PICKS = pathlib.Path(__file__).resolve().parents[1] / "support" / "picks"


def env_var(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run these tests through ctest (make test)")
    return value


def python():
    return os.environ.get("CHORUS_PYTHON", sys.executable)


def launch(n, worker, *args, transport=None, timeout=600, extra_env=None, grace=None):
    """Runs `chorus-run -n N [--transport T] [--grace G] python workers/<worker> args...`."""
    cmd = [env_var("CHORUS_RUN"), "-n", str(n)]
    if transport:
        cmd += ["--transport", transport]
    if grace is not None:
        cmd += ["--grace", str(grace)]
    cmd += [python(), str(WORKERS / worker), *map(str, args)]
    env = dict(os.environ)
    env.update(extra_env or {})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def ranks_reporting(proc, marker):
    """The ranks whose output has a line "[r] <marker> ..."."""
    return {int(m.group(1)) for m in re.finditer(r"^\[(\d+)\] " + re.escape(marker), proc.stdout,
                                                  re.MULTILINE)}


def require_ok(proc, n, marker):
    """Every one of the n ranks printed its OK line and chorus-run exited 0."""
    detail = f"\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert proc.returncode == 0, f"chorus-run exited {proc.returncode}{detail}"
    assert ranks_reporting(proc, marker) == set(range(n)), f"not every rank reported {marker!r}{detail}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pick_env(algorithm):
    """The environment that makes the tuner pick `algorithm` for AllReduce at
    N = 2 (a tuning file's rule), with the tuner's choices logged."""
    path = PICKS / f"allreduce_{algorithm}.json"
    assert path.is_file(), path
    return {"CHORUS_TUNING_FILE": str(path), "CHORUS_DEBUG": "TUNING"}


def require_picked(proc, n, algorithm):
    """Every rank's AllReduces went to `algorithm` by the tuning file's rule
    (pick_env), and no AllReduce to another."""
    detail = f"\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    text = proc.stdout + proc.stderr
    picks = re.findall(r"^\[(\d+)\] .*tuning allreduce .*-> (?:measured rule )?(\w+)$", text, re.MULTILINE)
    assert {int(r) for r, a in picks if a == algorithm} == set(range(n)), \
        f"not every rank picked {algorithm} for allreduce{detail}"
    assert all(a == algorithm for _, a in picks), f"an allreduce went to another algorithm: {picks}{detail}"
