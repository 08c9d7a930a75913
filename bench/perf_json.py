"""The rows of one chorus-perf run, read from its --json file: what the bench
scripts (tuner_regret.py, model_fidelity.py) build their tables from."""
import json
import subprocess
import tempfile


def perf_rows(perf, args, env=None):
    """Runs `perf args... --json TMP` (quietly; a failure raises) and returns its rows."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([perf] + list(args) + ["--json", f.name], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(f.name) as rows:
            return json.load(rows)["rows"]
