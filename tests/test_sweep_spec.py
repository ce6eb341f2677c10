"""Sweep files: expansion into runs, run ids, and one-line errors (no simulation here)."""

from __future__ import annotations

import math

import pytest
import yaml

from rxlab.cli.main import main
from rxlab.errors import UsageError
from rxlab.scenario import BUILTIN_DIR
from rxlab.sweep.metrics import key_metrics, mean_ci
from rxlab.sweep.spec import load_sweep, parse_sweep


def sweep(**kw) -> dict:
    return {"base": "default", "duration": 0.005, **kw}


def test_grid_times_seeds_and_stable_ids():
    s = parse_sweep(sweep(grid={"kernel.netdev_max_backlog": [300, 1000],
                                "nic.queues": [1, 2, 4]}, replications=2))
    assert len(s.points) == 6 and s.seeds == [1, 2] and len(s.runs) == 12
    assert s.param_paths == ["kernel.netdev_max_backlog", "nic.queues"]
    assert {tuple(p.values()) for p in s.points} == {(b, q) for b in (300, 1000)
                                                     for q in (1, 2, 4)}
    ids = [r.run_id for r in s.runs]
    assert len(set(ids)) == 12
    again = parse_sweep(sweep(grid={"nic.queues": [1, 2, 4],
                                    "kernel.netdev_max_backlog": [300, 1000]}, replications=2))
    assert set(r.run_id for r in again.runs) == set(ids)  # key order does not matter
    other_base = parse_sweep(sweep(grid={"kernel.netdev_max_backlog": [300, 1000],
                                         "nic.queues": [1, 2, 4]}, replications=2,
                                   duration=0.006))
    assert not set(r.run_id for r in other_base.runs) & set(ids)
    run = s.runs[3]
    sc = s.scenario_for(run)
    assert sc["seed"] == run.seed and sc["duration"] == 0.005
    assert sc["nic"]["queues"] == run.params["nic.queues"]


def test_zip_points_seeds_and_inline_base(tmp_path):
    scen = yaml.safe_load((BUILTIN_DIR / "default.yaml").read_text())
    s = parse_sweep({"base": scen, "zip": {"kernel.netdev_budget": [100, 300],
                                          "kernel.dev_weight": [16, 64]},
                     "points": [{"host.kernel": "5.15"}, {"host.kernel": "6.19"}],
                     "seeds": [7, 11]})
    assert len(s.points) == 4 and len(s.runs) == 8 and s.seeds == [7, 11]
    assert s.points[0] == {"kernel.netdev_budget": 100, "kernel.dev_weight": 16,
                           "host.kernel": "5.15"}
    # a base path is taken relative to the sweep file
    (tmp_path / "sc").mkdir()
    (tmp_path / "sc" / "mine.yaml").write_text(yaml.safe_dump(scen))
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({"base": "sc/mine.yaml", "replications": 3, "seed": 5}))
    s2 = load_sweep(f)
    assert s2.name == "s" and s2.seeds == [5, 6, 7] and s2.points == [{}]


BAD = [
    ({"grid": {"kernel.netdev_max_backlg": [1, 2]}},
     "sweep.grid.kernel.netdev_max_backlg: unknown scenario path"),
    ({"grid": {"kernel.nosuch.deeper": [1]}}, "sweep.grid.kernel.nosuch.deeper: unknown"),
    ({"grid": {"apps.3.cpus": [0]}}, "sweep.grid.apps.3.cpus: unknown scenario path"),
    ({"grid": {"duration.x": [1]}}, "sweep.grid.duration.x: unknown scenario path"),
    ({"grid": {}}, "sweep.grid: empty"),
    ({"grid": {"nic.queues": []}}, "sweep.grid.nic.queues: empty list"),
    ({"grid": {"nic.queues": 4}}, "sweep.grid.nic.queues: give a list of values"),
    ({"zip": {"nic.queues": [1, 2], "kernel.dev_weight": [1, 2, 3]}},
     "sweep.zip: lists differ in length (nic.queues has 2, kernel.dev_weight has 3)"),
    ({"points": []}, "sweep.points: empty list"),
    ({"grid": {"nic.queues": [0]}}, "sweep.grid.nic.queues: value 0: nic.queues:"),
    ({"grid": {"seed": [1, 2]}}, "seeds come from `replications` or `seeds`"),
    ({"grid": {"nic.queues": [1]}, "zip": {"nic.queues": [2]}}, "varied twice"),
    ({"gird": {"nic.queues": [1]}}, "sweep.gird: unknown key"),
    ({"replications": 0}, "sweep.replications: 0 is not an integer >= 1"),
    ({"seeds": [1, 1]}, "sweep.seeds: a seed is listed twice"),
    ({"metrics": ["nonsense"]}, "sweep.metrics: unknown metric 'nonsense'"),
    # dotted paths are checked against the output schema (docs/output.md)
    ({"metrics": ["latency_ns.to_ap.p99"]}, "did you mean 'latency_ns.to_app'?"),
    ({"metrics": ["cpus.x.util.softirq"]}, "cpus is a list: give an index, e.g. cpus.0"),
    ({"metrics": ["latency_ns.to_app"]}, "not a number but a section; name a figure in "
                                         "it, e.g. latency_ns.to_app.p50"),
    ({"metrics": ["drop_bogus"]}, "sweep.metrics: unknown metric 'drop_bogus'"),
    ({"base": "no-such-scenario"}, "sweep.base: 'no-such-scenario' is neither"),
]


@pytest.mark.parametrize("extra,message", BAD, ids=[m.split(":")[0] + str(i)
                                                    for i, (_, m) in enumerate(BAD)])
def test_bad_sweep_files_one_line_exit_2(tmp_path, capsys, extra, message):
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(sweep(**extra), sort_keys=False))
    with pytest.raises(UsageError) as ei:
        load_sweep(f)
    assert message in str(ei.value) and "\n" not in str(ei.value)
    assert main(["sweep", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"rxlab: error: {f}: ")
    assert message in err
    assert not (tmp_path / "out").exists()


def test_missing_base_and_malformed_files(tmp_path, capsys):
    f = tmp_path / "nobase.yaml"
    f.write_text("grid: {nic.queues: [1]}\n")
    assert main(["sweep", str(f)]) == 2
    assert "sweep.base: required" in capsys.readouterr().err
    f.write_text("grid: [\n")
    assert main(["sweep", str(f)]) == 2
    assert "malformed YAML" in capsys.readouterr().err
    assert main(["sweep", str(tmp_path / "absent.yaml")]) == 2
    assert "no such sweep file" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "not a sweep output folder" in capsys.readouterr().err


def test_sweep_interval_is_the_one_compare_and_reproduce_print():
    from rxlab.compare.analysis import stats
    from rxlab.repro.base import interval

    mean, ci, n = mean_ci([1.0, 2.0, 3.0])
    assert (mean, n) == (2.0, 3) and abs(ci - 4.302653 / math.sqrt(3)) < 1e-6
    xs = [float(x * x % 7) for x in range(36)]  # 35 df: between rows of a t table
    m, ci, n = mean_ci([*xs, None, math.nan])
    iv = stats.mean_interval(xs)
    assert n == 36 and (m, ci) == (iv.estimate, iv.half)
    assert interval(xs) == (iv.estimate, iv.low, iv.high)
    mean, ci, n = mean_ci([5])
    assert mean == 5 and math.isnan(ci) and n == 1


def test_key_metrics_from_result_data():
    data = {"packets": {"offered": 100, "delivered": 90, "dropped": 10, "in_flight": 0,
                        "dropped_by_reason": {"backlog": 10, "ring_full": 0}},
            "throughput": {"offered_pps": 1e4, "delivered_pps": 9e3},
            "latency_ns": {"p50": 1.0, "p99": 2.0, "p999": 3.0, "mean": 1.5,
                           "to_app": {"p99": 7.0}},
            "reordered_packets": 0,
            "cpus": [{"util": {"softirq": 0.2, "idle": 0.7},
                      "softnet_stat": {"time_squeeze": 1, "flow_limit_count": 0}},
                     {"util": {"softirq": 0.4, "idle": 0.5},
                      "softnet_stat": {"time_squeeze": 2, "flow_limit_count": 3}}]}
    m = key_metrics(data, ["latency_ns.to_app.p99", "cpus.1.util.softirq", "cpus.9.x"])
    assert m["drop_fraction"] == 0.1 and m["drop_backlog"] == 10
    assert m["softirq_util_max"] == 0.4 and abs(m["softirq_util_mean"] - 0.3) < 1e-12
    assert m["time_squeeze"] == 3 and m["flow_limit_count"] == 3
    assert m["latency_ns.to_app.p99"] == 7.0 and m["cpus.1.util.softirq"] == 0.4
    assert m["cpus.9.x"] is None


@pytest.mark.parametrize("name", ["latency_ns.to_app.p99", "cpus.3.util.softirq",
                                  "cpus.0.softnet_stat.time_squeeze", "xdp.pass",
                                  "flows_by_group.clients.delivered", "drop_flow_limit",
                                  "packets.dropped_by_reason.backlog", "config.hz"])
def test_metric_paths_the_schema_has_are_accepted(name):
    from rxlab.sweep.metrics import check_metric_name

    check_metric_name(name, "sweep.metrics")
