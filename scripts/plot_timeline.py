#!/usr/bin/python3
"""Draws a measured and a simulated timeline of one call side by side (PNG).

    scripts/plot_timeline.py --measured DIR [--comm K] [--call N]
                             --simulated SIM.json -o OUT.png

--measured is a CHORUS_TRACE directory (every rank's
chorus-trace-rank<R>-comm<K>.json; docs/PERFORMANCE.md); --call picks the
collective call by its number (default: the last call of the simulated
run's collective and algorithm in the traces). --simulated is `chorus-sim ... --trace SIM.json` of the same
collective, size and algorithm. Each panel has one band per rank with four
lanes, top to bottom: sends, receive-reduces, receives, local copies and
reduces; ops that overlap in a lane are staggered. A bar spans an op from its
start (posted) to its completion, in microseconds from the call's first op. Needs gnuplot
(gnuplot-nox) with the pngcairo terminal.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

# Lanes of a rank's band, top to bottom; ops that overlap within a lane are
# staggered over its three tracks.
LANES = {"send": 0, "recv_reduce": 1, "recv": 2, "copy": 3, "reduce": 3, "divide": 3}
BAND = 5  # lanes per rank, one of them a gap
COLOURS = {"send": 1, "recv": 2, "recv_reduce": 3, "copy": 4, "reduce": 5, "divide": 6}


def fail(msg):
    sys.exit(f"plot_timeline: {msg}")


def load_measured(directory, comm, call, like):
    pattern = re.compile(rf"chorus-trace-rank(\d+)-comm{comm}\.json$")
    files = [f for f in glob.glob(os.path.join(directory, "*.json")) if pattern.search(f)]
    if not files:
        fail(f"no chorus-trace-rank<R>-comm{comm}.json in {directory}")
    events = []
    for f in files:
        with open(f) as fh:
            events += [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    # Collective calls of the simulated call's collective and algorithm.
    collective = [e for e in events if e["cat"] == like["cat"]
                  and e["args"].get("algorithm") == like["args"].get("algorithm")]
    if not collective:
        fail(f"{directory}: the traces hold no {like['cat']} call with algorithm "
             f"{like['args'].get('algorithm')}")
    if call is None:
        call = max(e["args"]["call"] for e in collective)
    chosen = [e for e in collective if e["args"]["call"] == call]
    if not chosen:
        fail(f"{directory}: no collective call {call}")
    return chosen, call


def load_simulated(path):
    with open(path) as fh:
        doc = json.load(fh)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    if not events:
        fail(f"{path}: no events")
    return events


def bars(events):
    """Rows `x_center y x_half y_half colour` for gnuplot's boxxyerror."""
    t0 = min(e["ts"] for e in events)
    rows = []
    track = {}
    for e in sorted(events, key=lambda e: (e["pid"], e["ts"])):
        lane = LANES.get(e["name"], 3)
        k = track.get((e["pid"], lane), 0)
        track[(e["pid"], lane)] = k + 1
        y = e["pid"] * BAND + (3 - lane) + (k % 3) * 0.27 - 0.27  # sends on top
        start, dur = e["ts"] - t0, max(e["dur"], 0.0)
        rows.append(f"{start + dur / 2:.6f} {y:.3f} {dur / 2:.6f} 0.12 {COLOURS.get(e['name'], 6)}")
    return rows, max(e["pid"] for e in events) + 1


def title_of(events, what):
    e = events[0]
    span = max(x["ts"] + x["dur"] for x in events) - min(x["ts"] for x in events)
    return (f"{what}: {e['cat']} ({e['args'].get('algorithm', '')}), "
            f"{span:.1f} us")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", required=True)
    ap.add_argument("--comm", type=int, default=0)
    ap.add_argument("--call", type=int)
    ap.add_argument("--simulated", required=True)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    simulated = load_simulated(args.simulated)
    measured, call = load_measured(args.measured, args.comm, args.call, simulated[0])
    with tempfile.TemporaryDirectory() as tmp:
        panels = []
        for name, events, label in (("measured", measured, f"measured (call {call})"),
                                    ("simulated", simulated, "simulated")):
            rows, nranks = bars(events)
            data = os.path.join(tmp, name + ".dat")
            with open(data, "w") as fh:
                fh.write("\n".join(rows) + "\n")
            panels.append((data, nranks, title_of(events, label)))
        ytics = ", ".join(f'"rank {r}" {r * BAND + 1.5}' for r in range(max(p[1] for p in panels)))
        plot = [
            "set terminal pngcairo size 1400,500 font ',10' noenhanced",
            f"set output '{args.output}'",
            "set multiplot layout 1,2",
            "set xlabel 'microseconds from the first op'",
            f"set ytics ({ytics})",
            "set style fill solid 0.8 noborder",
            "set palette defined (1 '#1f77b4', 2 '#2ca02c', 3 '#d62728', 4 '#7f7f7f', "
            "5 '#ff7f0e', 6 '#9467bd')",
            "set cbrange [1:6]",
            "unset colorbox",
            "set key off",
        ]
        for data, nranks, title in panels:
            plot += [f"set title '{title}'", f"set yrange [-1:{nranks * BAND}]",
                     f"plot '{data}' using 1:2:3:4:5 with boxxyerror fillcolor palette"]
        plot.append("unset multiplot")
        script = os.path.join(tmp, "timeline.gp")
        with open(script, "w") as fh:
            fh.write("\n".join(plot) + "\n")
        p = subprocess.run(["gnuplot", script], capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"gnuplot failed: {p.stderr.strip()}")
    print(f"wrote {args.output} (sends blue, receives green, receive-reduces red, "
          "copies grey, reduces orange)")


if __name__ == "__main__":
    main()
