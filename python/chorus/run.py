"""``python -m chorus.run -n 4 script.py [args...]``: chorus-run from Python.

The same as ``chorus-run -n 4 ...`` (its options, output and exit status),
except that a program that is a ``.py`` file runs under this interpreter
(``sys.executable``), as torchrun runs its scripts: ``python -m chorus.run
-n 4 train.py`` is ``chorus-run -n 4 <python> train.py``.
"""

import sys

from chorus._tools import exec_tool

# chorus-run's options that take their value as the next argument
# (tools/chorus_run.cc, takes_value); the program is the first argument
# after these options that does not start with '-', or the one after "--".
_TAKES_VALUE = {"-n", "--nranks", "--transport", "--store", "--grace"}


def chorus_run_args(args, python=sys.executable):
    """chorus-run's arguments for `args`, with a .py program run by `python`."""
    args = list(args)
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if len(a) < 2 or not a.startswith("-"):
            break
        i += 2 if a in _TAKES_VALUE else 1
    if i < len(args) and args[i].endswith(".py"):
        args.insert(i, python)
    return args


def main():
    exec_tool("chorus-run", chorus_run_args(sys.argv[1:]))


if __name__ == "__main__":
    main()
