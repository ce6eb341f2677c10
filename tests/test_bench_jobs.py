"""``rxlab run --seeds N --jobs J``: replications in J parallel processes, identical to single
runs; --seeds counts replications and --jobs processes."""

from __future__ import annotations

import json

import pytest

from rxlab.cli.main import main


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_jobs_runs_equal_single_runs(capsys):
    # single runs first: the first one compiles (or loads) the jitted code and fills
    # numba's cache, so the worker processes only load it
    singles = [_json(capsys, ["run", "default", "--duration", "0.01", "--seed", str(seed),
                              "--json"]) for seed in (5, 6, 7)]
    rep = _json(capsys, ["run", "default", "--duration", "0.01", "--seed", "5",
                         "--seeds", "3", "--jobs", "2", "--json"])
    assert rep["replications"] == 3 and rep["seeds"] == [5, 6, 7]
    assert set(rep) >= {"replications", "mean", "ci95", "runs"}
    for run, single in zip(rep["runs"], singles, strict=True):
        assert run == single
    # means and intervals are over the runs
    offered = [r["packets"]["offered"] for r in rep["runs"]]
    assert rep["mean"]["packets.offered"] == pytest.approx(sum(offered) / 3)
    assert len(set(offered)) > 1  # different seeds, different traffic
    assert rep["ci95"]["packets.offered"] > 0
    for key in ("throughput.delivered_pps", "latency_ns.p99", "packets.dropped",
                "cpus.0.util.softirq"):
        assert key in rep["mean"] and key in rep["ci95"]


@pytest.mark.parametrize("argv,flag", [(["--seeds", "2", "--jobs", "0"], "--jobs 0"),
                                       (["--seeds", "0"], "--seeds 0"),
                                       (["--jobs", "2"], "add --seeds N")])
def test_seeds_and_jobs_must_be_positive_counts(capsys, argv, flag):
    assert main(["run", "default", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rxlab: error: --") and flag in err and "\n" not in err
