"""Ordinary least squares with standard errors (numpy only)."""

from __future__ import annotations

import math

import numpy as np


def ols(columns: dict[str, list[float]], y: list[float]) -> dict:
    """y = sum_k beta_k * x_k (no implicit intercept: pass a column of ones or of run
    lengths). Returns {"coef": {k: b}, "se": {k: se}, "n", "dof", "sigma", "r2"}; the
    standard errors are sqrt(diag(s^2 (X'X)^-1)) with s^2 = RSS / (n - p)."""
    names = list(columns)
    x = np.array([columns[k] for k in names], dtype=float).T
    yy = np.asarray(y, dtype=float)
    n, p = x.shape
    if n <= p:
        raise ValueError(f"{n} runs cannot fit {p} parameters")
    # columns differ by orders of magnitude (seconds, packets, filters x packets): solve
    # on unit-norm columns so that the covariance is not lost to rounding
    norm = np.linalg.norm(x, axis=0)
    norm[norm == 0] = 1.0
    xs = x / norm
    beta_s, *_ = np.linalg.lstsq(xs, yy, rcond=None)
    beta = beta_s / norm
    resid = yy - x @ beta
    dof = n - p
    s2 = float(resid @ resid) / dof
    cov = s2 * np.linalg.pinv(xs.T @ xs) / np.outer(norm, norm)
    tss = float(((yy - yy.mean()) ** 2).sum())
    return {"coef": {k: float(b) for k, b in zip(names, beta, strict=True)},
            "se": {k: math.sqrt(max(0.0, float(cov[i, i]))) for i, k in enumerate(names)},
            "n": n, "dof": dof, "sigma": math.sqrt(s2),
            "r2": 1.0 - float(resid @ resid) / tss if tss > 0 else 1.0}


def spread(values: list[float]) -> dict:
    """Mean, sample standard deviation, min and max of repeated measurements."""
    v = np.asarray(values, dtype=float)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
            "min": float(v.min()), "max": float(v.max()), "n": len(v)}


def within(model: float, kernel: dict, tol: float) -> bool:
    """The model agrees when it lies in the kernel's range over the repetitions widened
    by ``tol`` of the kernel's mean on both sides."""
    m = abs(kernel["mean"])
    return kernel["min"] - tol * m <= model <= kernel["max"] + tol * m
