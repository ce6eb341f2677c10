"""A sweep says which plots it did not draw and why (a metric zero in every run), from
``write_plots`` up to the command's output."""

from __future__ import annotations

import pytest
import yaml

from rxlab.cli.main import main

pytest.importorskip("matplotlib")
pytest.importorskip("pyarrow")

QUEUES = "nic.queues"


def _rows():
    from rxlab.sweep import store

    recs = [{"run_id": f"p{q}s{s}", "point": i, "seed": s, "rep": s - 1,
             "params": {QUEUES: q},
             "metrics": {"delivered_pps": 1000.0 * q + s, "drop_fraction": 0.0},
             "wall_s": 0.1, "worker": "w"}
            for i, q in enumerate([1, 2, 4]) for s in (1, 2)]
    return store.rows_from_records(recs, [QUEUES])


def test_write_plots_returns_what_it_skipped(tmp_path, monkeypatch):
    from rxlab.sweep import plots

    monkeypatch.setattr(plots, "_png", lambda fig: b"png")  # no rendering needed here
    skipped: list[str] = []
    paths = plots.write_plots(tmp_path, _rows(), [QUEUES], ["delivered_pps", "drop_fraction"],
                              skipped)
    assert [p.name for p in paths] == ["delivered_pps_vs_nic.queues.png"]
    assert len(skipped) == 1 and skipped[0].startswith("drop_fraction:")


def test_the_sweep_command_prints_the_plots_it_skipped(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({
        "name": "skips", "base": "default", "duration": 0.003,
        "grid": {QUEUES: [2, 4]}, "metrics": ["delivered_pps", "drop_fraction"]}))
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--jobs", "1", "-q"]) == 0
    out = capsys.readouterr().out
    line = [ln for ln in out.splitlines() if ln.startswith("not plotted: ")]
    assert line and "drop_fraction" in line[0] and "delivered_pps" not in line[0]
    assert (tmp_path / "o" / "plots" / "delivered_pps_vs_nic.queues.png").is_file()
