"""Means and Student-t confidence intervals (no scipy: the t quantile is computed here).

``t_quantile(p, df)`` inverts the Student t CDF by bisection; the CDF uses the
regularised incomplete beta function, evaluated with the continued fraction of
Numerical Recipes (Press et al., sec. 6.4), accurate to ~1e-12 here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


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


def mean_ci95(xs: Sequence[float]) -> tuple[float, float | None]:
    """Sample mean and the half-width of its 95 % Student-t interval (None for n < 2)."""
    n = len(xs)
    if n == 0:
        raise ValueError("mean_ci95: no samples")
    mean = math.fsum(xs) / n
    if n < 2:
        return mean, None
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, t_quantile(0.975, n - 1) * math.sqrt(var / n)
