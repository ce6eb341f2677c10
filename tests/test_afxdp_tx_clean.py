"""The afxdp-tx-clean reproduction: line-rate arithmetic, the time-driven forwarding run,
the experiment module's interface and the run_case hook of run_experiment."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest

from rxlab.afxdp.forward import (
    ForwardingCosts,
    line_rate_fraction,
    line_rate_pps,
    run_forwarding,
)
from rxlab.errors import UsageError
from rxlab.repro import EXPERIMENTS
from rxlab.repro import afxdp_tx_clean as exp
from rxlab.repro.base import claim, run_experiment, true

# 10G line rates: 14,880,952 pps at 64 B as tabulated in xdp-project/xdp-project
# areas/hints/traits01_bench_kmod.org; the other sizes worked out by hand as
# 10^10 / ((size + 20) * 8) rounded (preamble, SFD and inter-frame gap = 20 bytes)
PUBLISHED_10G = {64: 14_880_952, 128: 8_445_946, 256: 4_528_986, 512: 2_349_624,
                 768: 1_586_294, 1024: 1_197_318, 1514: 814_863, 1518: 812_744}


@pytest.mark.parametrize("size,pps", sorted(PUBLISHED_10G.items()))
def test_line_rate_matches_published_table(size, pps):
    assert line_rate_pps(size) == pps


def test_line_rate_is_exact():
    assert line_rate_fraction(64) == Fraction(10**10, 84 * 8)
    assert line_rate_pps(64, 100_000_000_000) == 148_809_524
    assert line_rate_pps(64, 1_000_000_000) == 1_488_095
    with pytest.raises(UsageError, match="size"):
        line_rate_pps(0)


def test_cpu_capacity_from_the_cited_figure():
    c = ForwardingCosts()
    assert c.pmd_ns == 299.1
    assert round(float(c.capacity_pps())) == 3_343_363  # 1e9 / 299.1
    assert "seed 002" in c.sources["pmd_ns"] and "3,343,188" in c.sources["pmd_ns"]


@pytest.fixture(scope="module")
def short_runs():
    return {(v, s): run_forwarding(s, v, duration_ns=2_000_000)
            for v in ("fixed", "ixgbe-2019") for s in (64, 1514)}


@pytest.mark.parametrize("size", [64, 1514])
def test_fixed_forwards_at_min_of_cpu_and_line(short_runs, size):
    r = short_runs[("fixed", size)]
    expect = min(r.cpu_capacity_pps, r.line_rate_pps)
    assert r.violations == 0 and r.first_violation is None
    assert abs(r.pps - expect) <= 0.02 * expect
    assert r.pps <= r.line_rate_pps
    assert r.tx_corrupted == 0 and r.intact_pps == r.pps


@pytest.mark.parametrize("variant", ["fixed", "ixgbe-2019"])
@pytest.mark.parametrize("size", [64, 1514])
def test_packets_are_conserved(short_runs, variant, size):
    p = short_runs[(variant, size)].packets
    assert p["offered"] == p["delivered"] + p["dropped"] + p["in_flight"]
    assert p["dropped"] == sum(p["dropped_by_reason"].values())


def test_buggy_breaks_the_ring_at_64_bytes(short_runs):
    r = short_runs[("ixgbe-2019", 64)]
    assert r.violations > 0 and r.stale_cleans > 0
    assert "): clean_past_next_to_use: " in r.first_violation
    assert r.violations_by_kind["unwritten_completion"] > 0
    assert r.tx_corrupted > 0 and r.intact_pps < r.pps


def test_cases_and_interface():
    assert EXPERIMENTS["afxdp-tx-clean"] is exp
    cs = exp.cases(True, None)
    names = [n for n, _, _ in cs]
    assert names == [f"{v}/{s}" for v in ("buggy", "fixed") for s in exp.SIZES]
    assert {p["variant"] for _, p, _ in cs} == {"ixgbe-2019", "fixed"}
    assert set(exp.SEED_FIX) == set(exp.SIZES) == set(exp.SEED_NO_FIX)


def test_run_case_shape_matches_other_experiments():
    m = exp.run_case("fixed/512", {}, exp.CaseSpec(512, "fixed", 1_000_000))
    for key in ("invariant_violations", "pps", "line_rate_pps", "packets", "cpu_softirq",
                "cpu_util"):
        assert key in m
    assert set(m["packets"]) == {"offered", "delivered", "dropped", "in_flight",
                                 "dropped_by_reason"}
    assert len(m["cpu_util"]) == len(m["cpu_softirq"]) == 2
    assert all(0 <= x <= 1 for x in m["cpu_util"] + m["cpu_softirq"])
    assert m["line_rate_pps"] == 2_349_624 and m["bottleneck"] == "wire"


def test_run_experiment_uses_run_case():
    calls = []

    def run_case(name, params, spec):
        calls.append((name, spec))
        return {"x": spec.size, "packets": {}, "cpu_softirq": [0.0], "cpu_util": [0.0]}

    specs = [("a", {}, exp.CaseSpec(1, "fixed", 10)), ("b", {}, exp.CaseSpec(2, "fixed", 10))]
    mod = SimpleNamespace(NAME="t", TITLE="t", SEED="s", TABLE=["x"],
                          cases=lambda quick, kernel: specs, run_case=run_case,
                          claims=lambda cases: [claim("ok", "predicted", true("x", True))])
    out = run_experiment(mod, quick=True, seeds=5)
    # every case once per traffic seed, the spec's seed counting up from its own
    assert [(n, s.size, s.seed) for n, s in calls] == [
        (n, size, 2 + k) for k in range(5) for n, size in (("a", 1), ("b", 2))]
    assert [c["metrics"]["x"] for c in out["cases"]] == [1, 2]
    assert [r["seed"] for r in out["cases"][0]["runs"]] == [2, 3, 4, 5, 6]
    (c,) = out["claims"]
    assert (c["claim"], c["basis"], c["held"], c["seeds"]) == ("ok", "predicted", True, 5)
