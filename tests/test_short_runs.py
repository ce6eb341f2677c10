"""A run shorter than one metrics interval (a short capture) reports CPU load over its
own span, not diluted by the idle rest of the interval."""

from __future__ import annotations

import pytest

from rxlab.simulate import simulate


def _busy(res) -> float:
    return sum(1.0 - c["util"]["idle"] for c in res.data["cpus"])


def test_load_of_a_short_run_is_measured_over_its_span():
    long = simulate("default", duration=0.05, overrides={"drain": 0.0})
    short = simulate("default", duration=0.002, overrides={"drain": 0.0})
    assert short.data["config"]["interval_s"] == pytest.approx(0.01)  # one interval > run
    # same offered rate: the same load within the noise of 2 ms of Poisson traffic
    assert _busy(short) == pytest.approx(_busy(long), rel=0.25)
