"""Means, differences and their 95 % Student-t intervals: the one implementation that
``run --seeds``, ``compare``, ``reproduce``, ``tune`` and ``sweep`` print.

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

``t_quantile(p, df)`` inverts the Student t CDF by bisection; the CDF uses the
regularised incomplete beta function, evaluated with the continued fraction of
Numerical Recipes (Press et al., sec. 6.4), accurate to ~1e-12 here (no scipy at run
time: it is a test dependency only, which checks these against it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def _betacf(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    bt = math.exp(lbt + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return bt * _betacf(a, b, x) / a
    return 1.0 - bt * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    x = df / (df + t * t)
    tail = 0.5 * betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Quantile of Student's t with ``df`` degrees of freedom (0 < p < 1)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError("t_quantile: need 0 < p < 1 and df > 0")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)



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


def mean_ci95(xs: Sequence[float]) -> tuple[float, float | None]:
    """Sample mean and the half-width of its 95 % t interval (None for n < 2)."""
    iv = mean_interval(xs)
    return iv.estimate, None if math.isnan(iv.half) else iv.half
