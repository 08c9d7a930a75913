"""CHORUS_METRICS (docs/OPERATING.md): the file each rank writes parses as
Prometheus text (prometheus_client's parser) and its counters match the calls
made, over shm and tcp; /metrics answers on a loopback port while the job
runs; a malformed value is an error naming the variable."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import free_port, launch, require_ok


def families(text):
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(fams, family, sample, **want):
    return sum(s.value for s in fams[family].samples
               if s.name == sample and all(s.labels.get(k) == v for k, v in want.items()))


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_file_counts_match_the_calls(tmp_path, transport):
    path = tmp_path / "chorus-%r.prom"
    proc = launch(2, "metrics.py", "file", transport=transport,
                  extra_env={"CHORUS_METRICS": str(path), "CHORUS_METRICS_INTERVAL": "0.05"})
    require_ok(proc, 2, "metrics OK")
    for rank in range(2):
        text = (tmp_path / f"chorus-{rank}.prom").read_text()
        fams = families(text)
        r = str(rank)
        assert fams["chorus_calls"].type == "counter"
        assert fams["chorus_call_seconds"].type == "histogram"
        assert value(fams, "chorus_calls", "chorus_calls_total", rank=r,
                     collective="allreduce", transport=transport) == 7, text
        assert value(fams, "chorus_calls", "chorus_calls_total", rank=r,
                     collective="broadcast", transport=transport) == 3, text
        assert value(fams, "chorus_bytes", "chorus_bytes_total", rank=r,
                     collective="allreduce") == 56, text
        # Every series names its algorithm, and the histogram counts every call.
        for s in fams["chorus_calls"].samples:
            assert s.labels["algo"], s
        assert value(fams, "chorus_call_seconds", "chorus_call_seconds_count", rank=r,
                     collective="allreduce") == 7, text
        assert value(fams, "chorus_call_seconds", "chorus_call_seconds_bucket", rank=r,
                     collective="allreduce", le="+Inf") == 7, text
        assert value(fams, "chorus_errors", "chorus_errors_total") == 0, text
        for name in ["chorus_revokes", "chorus_shrinks", "chorus_grows"]:
            assert value(fams, name, name + "_total") == 0, text
        # stragglers() counted each of the 10 collectives' last arriver at most once.
        assert fams["chorus_straggler_last"].type == "counter"
        assert fams["chorus_straggler_late_seconds"].type == "counter"
        assert value(fams, "chorus_straggler_last", "chorus_straggler_last_total", rank=r) <= 10
    # Written through a rename: no temporary file is left.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chorus-0.prom", "chorus-1.prom"]


def test_http_endpoint_answers_while_the_job_runs():
    port = free_port()
    proc = launch(2, "metrics.py", "http", extra_env={"CHORUS_METRICS": f"127.0.0.1:{port}"})
    require_ok(proc, 2, "metrics OK")


@pytest.mark.parametrize("bad", [":http", "host:99999", "127.0.0.1:", "/tmp/dir/"])
def test_malformed_value_names_the_variable(bad):
    proc = launch(2, "metrics.py", "file", extra_env={"CHORUS_METRICS": bad})
    assert proc.returncode != 0
    assert "CHORUS_METRICS" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
