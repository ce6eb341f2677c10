"""benchmarks/record.py: a recorded run is one dated line with its tree and machine, and
the history prints every line of each kind."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def rec(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_record", ROOT / "benchmarks/record.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "results")
    return mod


def test_record_appends_a_dated_line(rec):
    path = rec.record("bench", {"engine_pps": 9.0e6, "engine_pps_arfs": None})
    rec.record("bench", {"engine_pps": 9.5e6}, tree="abc1234")
    lines = [json.loads(s) for s in path.read_text().splitlines()]
    assert [ln["figures"]["engine_pps"] for ln in lines] == [9.0e6, 9.5e6]
    assert lines[1]["tree"] == "abc1234" and lines[0]["tree"]  # git describe, or 'unknown'
    assert lines[0]["machine"]["cpus"] >= 1 and len(lines[0]["recorded_utc"]) == 16


def test_history_prints_each_run(rec, capsys):
    rec.record("interleave", {"old_tree": "old1", "scenarios": {
        "arfs": {"old_min": 1000.0, "new_min": 900.0}}}, tree="new1")
    assert rec.main(["interleave"]) == 0
    out = capsys.readouterr().out
    assert "1 recorded runs" in out and "new1 |" in out and "arfs 1000.0 -> 900.0" in out


def test_unknown_kind_is_refused(rec, capsys):
    assert rec.main(["benchx"]) == 2
    assert "'benchx' is not a results kind" in capsys.readouterr().err
    with pytest.raises(ValueError):
        rec.record("benchx", {})


def test_committed_results_parse(rec):
    """Every committed line has the fields the history reads."""
    for kind in rec.KINDS:
        for line in (ROOT / "benchmarks/results" / f"{kind}.jsonl").read_text().splitlines():
            r = json.loads(line)
            assert {"recorded_utc", "tree", "machine", "figures"} <= r.keys(), (kind, r)
