"""Means, differences and their 95 % Student-t intervals.

A configuration's runs are independent replications (one traffic seed each), so its
mean has the usual t interval with n - 1 degrees of freedom. A difference against the
first configuration is estimated two ways:

* **paired** when both ran the same seeds. A seed fixes the traffic (flows, arrival
  times, sizes) and the cost jitter draws, so runs of two configurations on one seed are
  correlated, while the per-seed differences ``d_s = B_s - A_s`` are independent across
  seeds. The one-sample t interval on the ``d_s`` (n - 1 degrees of freedom) is then
  exact under normality and removes the traffic's variation that both share; Welch's
  interval would treat the two samples as independent and be too wide.
* **Welch** otherwise: unequal variances, Welch-Satterthwaite degrees of freedom.

A difference is marked significant when its 95 % interval excludes 0 (a two-sided test
at 5 %, one per metric and configuration: with many rows, about one in twenty true
nulls is marked by chance).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rxlab.bench.stats import t_cdf, t_quantile

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval half-width (nan: undefined), degrees of freedom and
    two-sided p-value of "the true value is 0" (nan: undefined)."""

    estimate: float
    half: float
    df: float
    p: float
    method: str

    @property
    def low(self) -> float:
        return self.estimate - self.half

    @property
    def high(self) -> float:
        return self.estimate + self.half

    @property
    def significant(self) -> bool:
        """The interval excludes 0."""
        return not math.isnan(self.half) and (self.low > 0 or self.high < 0)


def _mean_var(xs: Sequence[float]) -> tuple[float, float, int]:
    n = len(xs)
    m = math.fsum(xs) / n
    v = math.fsum((x - m) ** 2 for x in xs) / (n - 1) if n > 1 else math.nan
    return m, v, n


def _t_interval(est: float, se: float, df: float, method: str) -> Interval:
    if math.isnan(se) or math.isnan(df) or df <= 0:
        return Interval(est, math.nan, df, math.nan, method)
    if se == 0.0:  # every replication gave the same value: no spread to test against
        return Interval(est, 0.0, df, 1.0 if est == 0 else 0.0, method)
    t = abs(est) / se
    return Interval(est, t_quantile(0.5 + CONFIDENCE / 2, df) * se, df,
                    2.0 * (1.0 - t_cdf(t, df)), method)


def mean_interval(xs: Sequence[float]) -> Interval:
    """The mean of ``xs`` and its 95 % t interval (n - 1 degrees of freedom)."""
    if not xs:
        raise ValueError("mean_interval: no values")
    m, v, n = _mean_var(xs)
    return _t_interval(m, math.sqrt(v / n) if n > 1 else math.nan, n - 1, "t")


def paired_difference(b: Sequence[float], a: Sequence[float]) -> Interval:
    """mean(b - a) over pairs (same seed), paired t interval."""
    if len(a) != len(b):
        raise ValueError("paired_difference: samples of different lengths")
    d = [x - y for x, y in zip(b, a, strict=True)]
    m, v, n = _mean_var(d)
    return _t_interval(m, math.sqrt(v / n) if n > 1 else math.nan, n - 1, "paired t")


def welch_difference(b: Sequence[float], a: Sequence[float]) -> Interval:
    """mean(b) - mean(a), Welch's interval (Welch-Satterthwaite degrees of freedom)."""
    mb, vb, nb = _mean_var(b)
    ma, va, na = _mean_var(a)
    if nb < 2 or na < 2:
        return Interval(mb - ma, math.nan, math.nan, math.nan, "Welch t")
    qb, qa = vb / nb, va / na
    se = math.sqrt(qb + qa)
    den = (qb * qb / (nb - 1) if qb else 0.0) + (qa * qa / (na - 1) if qa else 0.0)
    df = (qb + qa) ** 2 / den if den > 0 else float(nb + na - 2)
    return _t_interval(mb - ma, se, df, "Welch t")


def difference(b: Sequence[float], a: Sequence[float], paired: bool) -> Interval:
    return paired_difference(b, a) if paired else welch_difference(b, a)
