"""rxlab compare: intervals against scipy.stats, the significance mark, the table's
width, strict JSON, and one-line errors for bad input."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from rich.console import Console

from rxlab import stats
from rxlab.cli.main import main
from rxlab.compare.analysis import compare
from rxlab.compare.runner import Config
from rxlab.compare.table import MARK, fmt_interval, print_comparison
from rxlab.scenario import load_scenario

scipy_stats = pytest.importorskip("scipy.stats")


def _samples(seed: int, n: int, shift: float, corr: float):
    rng = np.random.default_rng(seed)
    common = rng.normal(100.0, 10.0, n)  # the traffic a seed shares across configurations
    a = common + rng.normal(0.0, 1.0, n)
    b = corr * common + (1 - corr) * 100.0 + shift + rng.normal(0.0, 2.0, n)
    return a.tolist(), b.tolist()


@pytest.mark.parametrize("seed,n", [(1, 2), (2, 3), (3, 5), (4, 8), (5, 30)])
def test_intervals_match_scipy(seed, n):
    a, b = _samples(seed, n, shift=1.5, corr=0.9)
    # one configuration's mean: one-sample t interval
    iv = stats.mean_interval(b)
    ref = scipy_stats.ttest_1samp(b, 0.0).confidence_interval(0.95)
    assert iv.low == pytest.approx(ref.low, rel=1e-9)
    assert iv.high == pytest.approx(ref.high, rel=1e-9)
    # paired by seed
    iv = stats.paired_difference(b, a)
    res = scipy_stats.ttest_rel(b, a)
    ref = res.confidence_interval(0.95)
    assert (iv.low, iv.high) == pytest.approx((ref.low, ref.high), rel=1e-9, abs=1e-9)
    assert iv.p == pytest.approx(res.pvalue, rel=1e-6, abs=1e-12)
    # Welch
    iv = stats.welch_difference(b, a)
    res = scipy_stats.ttest_ind(b, a, equal_var=False)
    ref = res.confidence_interval(0.95)
    assert (iv.low, iv.high) == pytest.approx((ref.low, ref.high), rel=1e-9, abs=1e-9)
    assert iv.df == pytest.approx(res.df, rel=1e-9)
    assert iv.p == pytest.approx(res.pvalue, rel=1e-6, abs=1e-12)


def test_welch_unequal_sizes_match_scipy():
    rng = np.random.default_rng(7)
    a, b = rng.normal(5, 1, 4).tolist(), rng.normal(6, 3, 9).tolist()
    iv = stats.welch_difference(b, a)
    ref = scipy_stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert (iv.low, iv.high) == pytest.approx((ref.low, ref.high), rel=1e-9)


def test_pairing_narrows_the_interval_when_seeds_share_traffic():
    a, b = _samples(11, 5, shift=1.0, corr=1.0)
    assert stats.paired_difference(b, a).half < stats.welch_difference(b, a).half / 3


def test_significance_mark_flips_with_the_shift():
    rng = np.random.default_rng(3)
    a = rng.normal(1000.0, 5.0, 5)
    noise = rng.normal(0.0, 1.0, 5)
    marks = []
    for shift in (0.0, 0.2, 0.5, 1.0, 2.0, 4.0):
        b = (a + shift + noise).tolist()
        iv = stats.paired_difference(b, a.tolist())
        p = scipy_stats.ttest_rel(b, a).pvalue
        assert iv.significant == (p < 0.05)  # the mark is the 5 % two-sided test
        cell = fmt_interval("count", {"estimate": iv.estimate, "ci95": iv.half,
                                      "significant": iv.significant}, diff=True)
        assert cell.endswith(MARK) == iv.significant
        marks.append(iv.significant)
    assert marks[0] is False and marks[-1] is True
    assert marks == sorted(marks)  # once significant, a larger shift stays so


def test_no_spread_and_no_difference_is_not_significant():
    iv = stats.paired_difference([3.0, 3.0, 3.0], [3.0, 3.0, 3.0])
    assert iv.half == 0 and not iv.significant


# ---------------------------------------------------------------- the comparison ----
def _run(pps: float, p99: float, drops: dict, soft: list[float], samples: int = 10) -> dict:
    return {
        "throughput": {"delivered_pps": pps},
        "packets": {"dropped": sum(drops.values()), "dropped_by_reason": drops},
        "latency_ns": {q: {"p50": p99 / 3, "p99": p99, "p999": p99 * 1.5,
                           "samples": samples} for q in ("to_socket", "to_app")},
        "cpus": [{"util": {"softirq": s}} for s in soft],
        "reordered_packets": 0,
    }


@pytest.fixture(scope="module")
def synthetic():
    sc = load_scenario("default")
    rng = np.random.default_rng(5)
    configs = [Config("base", "default", sc, {}, [1, 2, 3, 4, 5]),
               Config("other", "variant of base", sc, {"kernel.rps_cpus": "f"},
                      [1, 2, 3, 4, 5])]
    base_pps = rng.normal(1e6, 2e4, 5)
    results = {
        "base": [_run(p, 5000 + 10 * i, {"backlog": 100 + i, "ring_full": 0}, [0.2, 0.4])
                 for i, p in enumerate(base_pps)],
        "other": [_run(p + 5e3 + rng.normal(0, 100), 9000 + 7 * i,
                       {"backlog": 100 + i, "ring_full": 0}, [0.3, 0.5])
                  for i, p in enumerate(base_pps)],
    }
    return configs, results, base_pps


def test_comparison_pairs_by_seed_and_matches_scipy(synthetic):
    configs, results, base_pps = synthetic
    cmp = compare(configs, results)
    assert cmp["paired"] and cmp["baseline"] == "base"
    rows = {m["key"]: m for m in cmp["metrics"]}
    # a row per drop reason that some run counts, none for a reason always zero
    assert "drop_backlog" in rows and "drop_ring_full" not in rows
    b = [r["throughput"]["delivered_pps"] for r in results["other"]]
    ref = scipy_stats.ttest_rel(b, list(base_pps)).confidence_interval(0.95)
    d = rows["delivered_pps"]["diff"]["other"]
    assert (d["low"], d["high"]) == pytest.approx((ref.low, ref.high), rel=1e-9)
    assert d["significant"] and d["method"] == "paired t"
    assert not rows["drop_backlog"]["diff"]["other"]["significant"]  # the same drops
    assert rows["softirq_util_max"]["mean"]["other"]["estimate"] == pytest.approx(0.5)
    assert rows["softirq_util_mean"]["mean"]["base"]["estimate"] == pytest.approx(0.3)


def test_different_seeds_use_welch(synthetic):
    configs, results, _ = synthetic
    other = Config("other", "x", configs[1].scenario, {}, [6, 7, 8, 9, 10])
    cmp = compare([configs[0], other], results)
    assert not cmp["paired"]
    assert cmp["metrics"][0]["diff"]["other"]["method"] == "Welch t"


def test_json_is_strict_with_undefined_numbers(synthetic):
    configs, results, _ = synthetic
    res = {k: [dict(r) for r in v] for k, v in results.items()}
    for r in res["other"][:4]:  # no packet reached the app in four runs
        r["latency_ns"] = dict(r["latency_ns"], to_app={"samples": 0})
    cmp = compare(configs, res)
    from rxlab.jsonout import dumps

    def no_constants(x):
        raise AssertionError(f"non-JSON constant {x}")

    back = json.loads(dumps(cmp), parse_constant=no_constants)
    row = next(m for m in back["metrics"] if m["key"] == "latency_app_p99_ns")
    assert row["mean"]["other"]["ci95"] is None and row["diff"]["other"]["ci95"] is None


def _numbers(text: str) -> list[str]:
    return re.findall(r"[+-]?\d[\d,]*(?:\.\d+)?", text)


@pytest.mark.parametrize("width", [80, 100, 140, 250])
def test_table_fits_and_never_cuts_a_number(synthetic, width):
    configs, results, _ = synthetic
    names = ["base", "rps-on-all-cpus", "rps-non-irq", "flow-limit-on"]
    cfgs = [Config(n, "s", configs[0].scenario, {}, [1, 2, 3, 4, 5]) for n in names]
    res = {n: results["base" if i % 2 == 0 else "other"] for i, n in enumerate(names)}
    cmp = compare(cfgs, res)
    con = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    print_comparison(con, cmp)
    text = con.export_text()
    assert max(len(ln) for ln in text.splitlines()) <= width
    # every cell's text appears whole on one line
    for m in cmp["metrics"]:
        for n in names:
            cell = fmt_interval(m["kind"], m["mean"][n])
            assert cell in text, (width, cell)
    assert MARK in text


# ---------------------------------------------------------------- the CLI -----------
def _err(capsys, *argv) -> str:
    code = main(list(argv))
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err)
    return lines[0]


@pytest.mark.parametrize("argv,needle", [
    (["--set-variant", "x:kernel.no_such_knob=1"], "kernel.no_such_knob"),
    (["--set-variant", "x:kernel.no_such_knob=1"], "--set-variant x"),
    (["--set-variant", "rps-all=kernel.rps_cpus=f"], "NAME:PATH=VALUE"),
    (["--set-variant", "rps:kernel.rps_cpus"], "NAME:PATH=VALUE"),
    (["--set-variant", ":kernel.rps_cpus=f"], "not a variant name"),
    (["--set-variant", "rps:kernel.rps_cpus=f", "--seeds", "1"], "--seeds 1"),
    (["--set-variant", "rps:kernel.rps_cpus=zz"], "kernel.rps_cpus"),
    ([], "one configuration"),
    (["--set-variant", "rps:kernel.rps_cpus=f", "--screenshot"], "--out"),
    (["no-such.yaml", "default"], "no such scenario file"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, needle):
    assert needle in _err(capsys, "compare", *argv)


def test_cli_json_runs_and_is_strict(capsys, tmp_path):
    code = main(["compare", "default", "--set-variant", "rps:kernel.rps_cpus=f",
                 "--duration", "0.003", "--seeds", "2", "--jobs", "2", "--json",
                 "--out", str(tmp_path / "c")])
    out = capsys.readouterr().out
    assert code == 0
    back = json.loads(out, parse_constant=lambda x: pytest.fail(f"constant {x}"))
    assert [c["name"] for c in back["configurations"]] == ["default", "rps"]
    assert back["configurations"][1]["seeds"] == [1, 2] and back["paired"]
    assert back["configurations"][1]["overrides"] == {"kernel.rps_cpus": "f"}
    assert json.loads((tmp_path / "c/comparison.json").read_text()) == back
    html = (tmp_path / "c/comparison.html").read_text()
    assert 'id="comparison-table"' in html and "data:image/png;base64," in html
    assert "<script" not in html and "http" not in html.replace("http-equiv", "")
    assert (tmp_path / "c/comparison.png").stat().st_size > 10_000
    assert math.isfinite(back["metrics"][0]["mean"]["rps"]["estimate"])


@pytest.mark.parametrize("argv", [["--help"], ["compare", "--help"]])
def test_help_lists_compare(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0 and "compare" in capsys.readouterr().out


def test_memory_limit_is_checked_before_any_run(capsys):
    line = _err(capsys, "compare", "--set-variant", "rps:kernel.rps_cpus=f",
                "--max-memory", "64MiB")
    assert line.startswith("rxlab: error: default: ") and "--max-memory" in line


def test_every_compared_figure_is_addressed_by_a_path_of_the_output_schema():
    """compare reads each figure at its path in the run's result (docs/output.md): a path
    the schema does not have fails here, not as a KeyError in a user's comparison."""
    from rxlab.compare.analysis import (
        BASE_METRICS,
        BUSY_POLL_METRIC,
        LATER_METRICS,
        metrics_for,
    )
    from rxlab.metrics.schema import metric_path_problem

    run = {"packets": {"dropped_by_reason": {"flow_limit": 3, "ring_full": 0}}}
    rows = metrics_for([run])
    assert [m.key for m in rows if m.key.startswith("drop_")] == ["drop_flow_limit"]
    assert BUSY_POLL_METRIC not in rows  # no socket busy-polled
    busy = {**run, "queues": [{"busy_poll_packets": 5}], "duration_s": 1.0}
    assert metrics_for([run, busy])[-1] == BUSY_POLL_METRIC
    assert BUSY_POLL_METRIC.get(run | {"queues": [{}], "duration_s": 1.0}) == 0
    for m in BASE_METRICS + LATER_METRICS + rows + [BUSY_POLL_METRIC]:
        assert metric_path_problem(m.path) is None, (m.key, m.path)
