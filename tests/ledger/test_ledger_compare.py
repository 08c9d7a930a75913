"""scripts/ledger-compare on synthetic ledgers: a real loss flags, a wobble
within the rounds' spread does not, and a figure missing from one ledger is
reported. Run by ctest (tests/CMakeLists.txt) through /usr/bin/python3 -m pytest."""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "ledger-compare")


def load_module():
    loader = importlib.machinery.SourceFileLoader("ledger_compare", SCRIPT)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("ledger_compare",
                                                                            loader))
    loader.exec_module(module)
    return module


def record(name, per_round, better="higher"):
    """A figure as bench/ledger.py records a ratio figure: median and spread
    of its per-round values."""
    v = sorted(per_round)
    med = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
    return {"name": name, "unit": "x", "better": better, "value": med,
            "per_round": per_round, "spread": (v[-1] - v[0]) / med}


def ledger(tmp_path, label, figures):
    path = tmp_path / f"{label}.json"
    path.write_text(json.dumps({"commit": label, "figures": figures}))
    return str(path)


def run(old, new):
    p = subprocess.run([sys.executable, SCRIPT, old, new], capture_output=True, text=True)
    return p.returncode, p.stdout


def test_a_real_loss_with_a_small_spread_flags(tmp_path):
    old = ledger(tmp_path, "old", [record("speed", [1.00, 1.01, 0.99, 1.02, 1.00])])
    new = ledger(tmp_path, "new", [record("speed", [0.80, 0.81, 0.79, 0.80, 0.82])])
    code, out = run(old, new)
    assert code == 1, out
    assert "REGRESSED" in out and "speed" in out


def test_a_real_loss_of_a_lower_is_better_figure_flags(tmp_path):
    old = ledger(tmp_path, "old", [record("ms", [10.0, 10.1, 9.9], "lower")])
    new = ledger(tmp_path, "new", [record("ms", [12.0, 12.1, 11.9], "lower")])
    code, out = run(old, new)
    assert code == 1, out
    assert "REGRESSED" in out


def test_a_wobble_within_a_wide_spread_does_not_flag(tmp_path):
    # The rounds of each run scatter by +-30%: a 20% lower median is noise.
    old = ledger(tmp_path, "old", [record("speed", [0.70, 1.00, 1.30, 0.90, 1.10])])
    new = ledger(tmp_path, "new", [record("speed", [0.60, 0.80, 1.05, 0.70, 0.95])])
    code, out = run(old, new)
    assert code == 0, out
    assert "REGRESSED" not in out
    assert "speed" in out  # still printed, with its change


def test_a_gain_is_not_a_regression(tmp_path):
    old = ledger(tmp_path, "old", [record("speed", [1.00, 1.01, 0.99])])
    new = ledger(tmp_path, "new", [record("speed", [1.30, 1.31, 1.29])])
    code, out = run(old, new)
    assert code == 0, out
    assert "improved" in out


def test_a_small_change_within_the_floor_does_not_flag(tmp_path):
    old = ledger(tmp_path, "old", [record("speed", [1.00, 1.00, 1.00])])
    new = ledger(tmp_path, "new", [record("speed", [0.97, 0.97, 0.97])])
    code, out = run(old, new)
    assert code == 0, out


def test_a_figure_in_one_ledger_only_is_reported(tmp_path):
    old = ledger(tmp_path, "old", [record("kept", [1.0, 1.0, 1.0]),
                                   record("dropped", [1.0, 1.0, 1.0])])
    new = ledger(tmp_path, "new", [record("kept", [1.0, 1.0, 1.0]),
                                   record("added", [1.0, 1.0, 1.0])])
    code, out = run(old, new)
    lines = {line.split()[0]: line for line in out.splitlines() if not line.startswith("#")}
    assert "not in NEW" in lines["dropped"]
    assert "not in OLD" in lines["added"]
    assert code == 0, out


def test_a_figure_new_could_not_measure_is_reported_and_fails(tmp_path):
    old = ledger(tmp_path, "old", [record("speed", [1.0, 1.0, 1.0])])
    new = ledger(tmp_path, "new", [{"name": "speed", "unit": "x", "better": "higher",
                                    "missing": "mpirun.openmpi is not installed"}])
    code, out = run(old, new)
    assert code == 1, out
    assert "BROKEN" in out and "mpirun.openmpi is not installed" in out


def test_the_threshold_is_the_larger_spread():
    m = load_module()
    old = {"f": {"name": "f", "better": "higher", "value": 1.0, "spread": 0.10}}
    # 15% worse: beyond the old spread (10%) but within the new one (25%).
    new = {"f": {"name": "f", "better": "higher", "value": 0.85, "spread": 0.25}}
    assert m.compare(old, new)[0][1] == "same"
    new["f"]["spread"] = 0.05
    assert m.compare(old, new)[0][1] == "regressed"


def test_a_figure_missing_in_both_is_reported_with_both_reasons(tmp_path):
    gone = {"name": "overlap", "unit": "x", "better": "higher"}
    old = ledger(tmp_path, "old", [dict(gone, missing="no subcommand yet")])
    new = ledger(tmp_path, "new", [dict(gone, missing="still none")])
    code, out = run(old, new)
    assert code == 0, out
    assert "missing in both" in out and "no subcommand yet" in out and "still none" in out
