"""The command-line tools from Python: chorus-run, chorus-perf, chorus-sim,
chorus-verify and chorus-soak.

pip install ships the programs inside the package (chorus/bin/, with
chorus-sim's gnuplot script in chorus/share/chorus/); the console scripts of
the same names replace themselves with them. A package installed by
``cmake --install`` has its tools in the prefix's bin/ instead: there they
are found on PATH.
"""

import os
import pathlib
import shutil
import sys

TOOLS = ("chorus-run", "chorus-perf", "chorus-sim", "chorus-verify", "chorus-soak")
_BIN = pathlib.Path(__file__).resolve().parent / "bin"


def _is_program(path):
    """An executable ELF file (not a console script of the same name)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF" and os.access(path, os.X_OK)
    except OSError:
        return False


def find_tool(name):
    """The path of the program `name`: the package's own, else one on PATH."""
    if name not in TOOLS:
        raise ValueError(f"chorus has no tool {name!r}; its tools are {', '.join(TOOLS)}")
    shipped = _BIN / name
    if _is_program(shipped):
        return str(shipped)
    found = shutil.which(name)
    if found and _is_program(found):
        return found
    raise FileNotFoundError(
        f"{name}: not shipped with this chorus package ({_BIN} has no {name}; pip install "
        f"ships it) and no {name} program on PATH (cmake --install puts it in the prefix's bin/)")


def exec_tool(name, args):
    """Replaces this process with the tool `name` given `args`."""
    try:
        path = find_tool(name)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(127)
    os.execv(path, [path, *args])


def chorus_run():
    exec_tool("chorus-run", sys.argv[1:])


def chorus_perf():
    exec_tool("chorus-perf", sys.argv[1:])


def chorus_sim():
    exec_tool("chorus-sim", sys.argv[1:])


def chorus_verify():
    exec_tool("chorus-verify", sys.argv[1:])


def chorus_soak():
    exec_tool("chorus-soak", sys.argv[1:])
