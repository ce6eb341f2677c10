"""Claims judged on 95 % intervals over traffic seeds, each labelled calibrated or
predicted (rxlab.repro.base)."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy import stats

from rxlab.errors import UsageError
from rxlab.repro import EXPERIMENTS
from rxlab.repro.base import claim, fig, interval, judge, judge_figure, run_experiment, true


def t_interval(xs):
    """Independent reference: scipy's Student-t interval of the mean."""
    m = statistics.fmean(xs)
    return stats.t.interval(0.95, len(xs) - 1, loc=m, scale=stats.sem(xs))


def test_interval_is_the_student_t_interval():
    xs = [3.1, 2.9, 3.4, 3.0, 2.7, 3.3]
    mean, lo, hi = interval(xs)
    ref_lo, ref_hi = t_interval(xs)
    assert math.isclose(mean, statistics.fmean(xs))
    assert math.isclose(lo, ref_lo) and math.isclose(hi, ref_hi)


def test_a_mean_on_the_claimed_side_is_not_enough():
    """The old judgement took one run's figure (or the mean): these seeds average 0.28 > 0
    and the first seed is 0.5 > 0, but the interval reaches below 0: not held."""
    values = [0.5, -0.3, 0.6, 0.4, 0.2]
    assert values[0] > 0 and statistics.fmean(values) > 0
    assert t_interval(values)[0] < 0
    assert not judge_figure(values, ">", 0)["held"]
    assert judge_figure([0.5, 0.45, 0.6, 0.4, 0.52], ">", 0)["held"]


@pytest.mark.parametrize("op,bound,values,held", [
    ("<", 1.0, [0.9, 0.95, 0.92, 0.91, 0.93], True),
    ("<", 1.0, [0.9, 0.99, 0.8, 0.98, 0.97], False),  # mean 0.928, interval to ~1.02
    ("<=", 0.0, [0, 0, 0, 0, 0], True),
    (">=", 0.97, [0.98, 0.99, 0.975, 0.985, 0.99], True),
    ("within", (0.35, 0.65), [0.5, 0.52, 0.48, 0.51, 0.49], True),
    ("within", (0.35, 0.65), [0.6, 0.66, 0.62, 0.64, 0.63], False),  # upper end above 0.65
])
def test_whole_interval_on_the_claimed_side(op, bound, values, held):
    lo, hi = t_interval(values) if len(set(values)) > 1 else (values[0], values[0])
    r = judge_figure(values, op, bound)
    assert r["held"] is held
    assert math.isclose(r["ci95"][0], lo, rel_tol=1e-6, abs_tol=1e-12)
    assert math.isclose(r["ci95"][1], hi, rel_tol=1e-6, abs_tol=1e-12)


def test_a_yes_no_figure_needs_every_seed():
    assert judge_figure([1.0] * 5, "true", None)["held"]
    assert not judge_figure([1.0, 1.0, 0.0, 1.0, 1.0], "true", None)["held"]


def test_judge_carries_basis_and_every_figure():
    def seed(x):
        return [claim("a", "calibrated", fig("f", x, ">", 0), true("g", True),
                      calibrated_from="cost c set from the seed's f"),
                claim("b", "predicted", fig("h", -x, "<", 0))]

    out = judge([seed(x) for x in (1.0, 1.1, 0.9, 1.2, 1.05)])
    assert [(c["claim"], c["basis"], c["seeds"], c["held"]) for c in out] == [
        ("a", "calibrated", 5, True), ("b", "predicted", 5, True)]
    assert out[0]["calibrated_from"] == "cost c set from the seed's f"
    assert [f["figure"] for f in out[0]["figures"]] == ["f", "g"]
    assert out[0]["figures"][0]["values"] == [1.0, 1.1, 0.9, 1.2, 1.05]


def test_claim_basis_is_checked():
    with pytest.raises(ValueError):
        claim("x", "fitted", fig("f", 1, ">", 0))
    with pytest.raises(ValueError):  # a calibrated claim says what was set from the seed
        claim("x", "calibrated", fig("f", 1, ">", 0))


def test_every_experiment_labels_every_claim():
    """All five reproductions: claims() on one seed's cases gives labelled claims. The
    metrics are stand-ins (each metric name read returns 1): only the labels are tested."""
    class Any(dict):
        def __missing__(self, key):
            return Any() if key == "violations_by_kind" else 1.0

        def get(self, key, default=None):
            return self[key]

    for name, mod in EXPERIMENTS.items():
        cases = [{"name": n, "params": p, "metrics": Any(bottleneck="rx-cpu")}
                 for n, p, _ in mod.cases(True, None)]
        out = mod.claims(cases)
        assert out, name
        for c in out:
            assert c.basis in ("calibrated", "predicted"), (name, c.text)
            assert c.figures, (name, c.text)
    calibrated = {n: [c.text for c in m.claims(
        [{"name": cn, "params": p, "metrics": Any(bottleneck="rx-cpu")}
         for cn, p, _ in m.cases(True, None)]) if c.basis == "calibrated"]
        for n, m in EXPERIMENTS.items()}
    # the figures a cost was set from (the profiles' sources say which)
    assert any("826" in t for t in calibrated["rss-rxhash"])
    assert any("halves" in t for t in calibrated["flow-limit"])
    assert any("4.8 Mpps" in t for t in calibrated["cpumap"])
    assert any("64 B" in t for t in calibrated["afxdp-tx-clean"])


def test_fewer_than_two_seeds_is_a_usage_error():
    with pytest.raises(UsageError, match="--seeds"):
        run_experiment(EXPERIMENTS["rss-rxhash"], quick=True, seeds=1)


@pytest.mark.parametrize("args", [["--seeds", "1"], ["--jobs", "0"]])
def test_bad_seeds_or_jobs_exit_2_one_line(capsys, args):
    from rxlab.cli.main import main

    assert main(["reproduce", "flow-limit", "--quick", "--json", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rxlab: error: --"), err


def test_worker_processes_give_the_same_result():
    mod = EXPERIMENTS["flow-limit"]
    one = run_experiment(mod, quick=True, seeds=2, jobs=1)
    two = run_experiment(mod, quick=True, seeds=2, jobs=2)
    assert one == two
    # the seeds really differ: the antagonist's Poisson arrivals change per seed
    runs = one["cases"][1]["runs"]
    assert [r["seed"] for r in runs] == [3, 4]
    assert runs[0]["metrics"] != runs[1]["metrics"]
