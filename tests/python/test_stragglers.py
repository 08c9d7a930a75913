"""comm.stragglers() (docs/OPERATING.md) over shm and tcp: a rank that sleeps
before each call is named the straggler on every rank, with a lateness near
the delay; without a delay no rank carries such a lateness; with
CHORUS_STRAGGLERS=1 rank 0 prints one summary line per rank at the end."""

import json
import re

import pytest

from conftest import launch

DELAY_MS = 20
CALLS = 20


def reports(proc, n):
    detail = f"\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert proc.returncode == 0, f"chorus-run exited {proc.returncode}{detail}"
    found = {int(m.group(1)): json.loads(m.group(2))
             for m in re.finditer(r"^\[\d+\] stragglers rank (\d+) (.*)$", proc.stdout, re.MULTILINE)}
    assert sorted(found) == list(range(n)), detail
    return found


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_sleeping_rank_is_named_on_every_rank(transport):
    n, slow = 3, 1
    found = reports(launch(n, "stragglers.py", slow, DELAY_MS, CALLS, transport=transport), n)
    for rank, got in found.items():
        report = got["report"]
        named = max(report, key=lambda r: r["last_count"])
        assert named["rank"] == slow, (rank, report)
        assert named["calls"] == CALLS, report
        assert named["last_count"] >= CALLS - 2, report
        # Late by about the delay: at least half of it, whatever the load.
        assert named["mean_late_s"] >= DELAY_MS / 2000, report
        assert named["wait_share"] >= 0.5, report
        assert report == found[0]["report"], "the ranks disagree"
        assert got["verdicts"].count(slow) >= CALLS - 2, got["verdicts"]


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_without_a_delay_no_rank_carries_one(transport):
    found = reports(launch(3, "stragglers.py", -1, 0, CALLS, transport=transport), 3)
    for r in found[0]["report"]:
        assert r["mean_late_s"] < DELAY_MS / 2000, found[0]["report"]
    assert sum(r["wait_share"] for r in found[0]["report"]) <= 1 + 1e-9


def test_chorus_run_prints_a_summary_per_rank():
    proc = launch(3, "stragglers.py", 2, DELAY_MS, CALLS, extra_env={"CHORUS_STRAGGLERS": "1"})
    reports(proc, 3)
    lines = re.findall(r"^\[0\] chorus stragglers: rank (\d) arrived last in (\d+) of (\d+)",
                       proc.stdout + proc.stderr, re.MULTILINE)
    assert sorted(int(r) for r, _, _ in lines) == [0, 1, 2], proc.stdout + proc.stderr
    last = {int(r): int(k) for r, k, _ in lines}
    assert max(last, key=last.get) == 2, lines
