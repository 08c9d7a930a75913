#!/usr/bin/python3
"""docs/PERFORMANCE.md's headline table must be what bench/ledger.py generates
from the latest ledger in bench/ledger/ (the one whose "date" is latest; on
equal dates, the later file name). The table is the lines between

  <!-- BEGIN ledger -->
  <!-- END ledger -->

No timing is asserted: only that the committed table is the latest ledger's.

  check_ledger_table.py [--update] [ROOT]    (ROOT: the source tree, default ../..)
--update rewrites the section from the latest ledger.
"""
import glob
import json
import os
import subprocess
import sys

BEGIN, END = "<!-- BEGIN ledger -->", "<!-- END ledger -->"


def latest(folder):
    best = None
    for path in glob.glob(os.path.join(folder, "*.json")):
        with open(path) as f:
            key = (json.load(f).get("date", ""), os.path.basename(path))
        if best is None or key > best[0]:
            best = (key, path)
    return best[1] if best else None


def main():
    args = sys.argv[1:]
    update = bool(args) and args[0] == "--update"
    if update:
        args = args[1:]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                              "..")
    doc = os.path.join(root, "docs", "PERFORMANCE.md")
    path = latest(os.path.join(root, "bench", "ledger"))
    if path is None:
        print("bench/ledger/ holds no ledger: run make bench and commit its JSON")
        return 1
    generated = subprocess.run([sys.executable, os.path.join(root, "bench", "ledger.py"),
                                "--markdown", path], check=True, capture_output=True,
                               text=True).stdout.rstrip("\n").split("\n")
    with open(doc) as f:
        lines = f.read().split("\n")
    if lines.count(BEGIN) != 1 or lines.count(END) != 1 or lines.index(BEGIN) > lines.index(END):
        print(f"{doc} needs exactly one {BEGIN} ... {END} section")
        return 1
    b, e = lines.index(BEGIN), lines.index(END)
    committed = lines[b + 1:e]
    if update:
        with open(doc, "w") as f:
            f.write("\n".join(lines[:b + 1] + generated + lines[e:]))
        print(f"updated {doc} from {os.path.relpath(path, root)}")
        return 0
    if committed != generated:
        print(f"{doc}: the ledger table differs from what {os.path.relpath(path, root)} "
              "generates:")
        import difflib
        for line in difflib.unified_diff(committed, generated, "PERFORMANCE.md", "generated",
                                         lineterm=""):
            print(line)
        print(f"Regenerate it: {sys.argv[0]} --update")
        return 1
    print(f"{doc}'s ledger table is {os.path.relpath(path, root)}'s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
