"""The comparison: per metric, each configuration's mean and interval, and its
difference against the first configuration (``rxlab.stats``)."""

from __future__ import annotations

import math
from collections.abc import Callable

from rxlab import stats


def _soft(d: dict) -> list[float]:
    return [c["util"]["softirq"] for c in d.get("cpus", [])]


def _lat(which: str, q: str) -> Callable[[dict], float | None]:
    def get(d: dict) -> float | None:
        lat = d["latency_ns"].get(which) or {}
        # no packet reached the socket or the application: no latency to compare
        return lat.get(q) if lat.get("samples", 0) else None
    return get


# (key, label, kind, value of one run); kind: rate, count, time, fraction
BASE_METRICS: list[tuple[str, str, str, Callable[[dict], float | None]]] = [
    ("delivered_pps", "delivered rate", "rate", lambda d: d["throughput"]["delivered_pps"]),
    ("dropped", "drops, all reasons", "count", lambda d: d["packets"]["dropped"]),
]
LATER_METRICS: list[tuple[str, str, str, Callable[[dict], float | None]]] = [
    ("latency_socket_p50_ns", "latency to socket p50", "time", _lat("to_socket", "p50")),
    ("latency_socket_p99_ns", "latency to socket p99", "time", _lat("to_socket", "p99")),
    ("latency_socket_p999_ns", "latency to socket p99.9", "time", _lat("to_socket", "p999")),
    ("latency_app_p50_ns", "latency to app p50", "time", _lat("to_app", "p50")),
    ("latency_app_p99_ns", "latency to app p99", "time", _lat("to_app", "p99")),
    ("latency_app_p999_ns", "latency to app p99.9", "time", _lat("to_app", "p999")),
    ("softirq_util_max", "softirq, busiest CPU", "fraction",
     lambda d: max(_soft(d), default=0.0)),
    ("softirq_util_mean", "softirq, mean of CPUs", "fraction",
     lambda d: sum(_soft(d)) / len(_soft(d)) if _soft(d) else 0.0),
    ("reordered_packets", "reordered packets", "count",
     lambda d: d.get("reordered_packets", 0)),
]


def metrics_for(runs: list[dict]) -> list[tuple[str, str, str, Callable]]:
    """The metrics, with a row per drop reason that any run counts."""
    reasons = sorted({r for d in runs for r, n in d["packets"]["dropped_by_reason"].items()
                      if n})
    drops = [(f"drop_{r}", f"drops: {r}", "count",
              (lambda d, r=r: d["packets"]["dropped_by_reason"].get(r, 0))) for r in reasons]
    return BASE_METRICS + drops + LATER_METRICS


def _num(x: float) -> float | None:
    """JSON has no NaN: an undefined number is null."""
    return None if x is None or math.isnan(x) else x


def _interval_json(iv: stats.Interval) -> dict:
    return {"estimate": _num(iv.estimate), "ci95": _num(iv.half), "low": _num(iv.low),
            "high": _num(iv.high), "df": _num(iv.df), "p": _num(iv.p),
            "significant": iv.significant, "method": iv.method}


def compare(configs, results: dict[str, list[dict]]) -> dict:
    """The comparison as a JSON-able mapping (numbers finite or null)."""
    all_runs = [d for c in configs for d in results[c.name]]
    first = configs[0]
    paired = all(c.seeds == first.seeds for c in configs)
    rows = []
    for key, label, kind, get in metrics_for(all_runs):
        vals = {c.name: [get(d) for d in results[c.name]] for c in configs}
        if any(v is None for vs in vals.values() for v in vs):
            per, diffs = _partial(configs, vals)
        else:
            per = {c.name: stats.mean_interval([float(v) for v in vals[c.name]])
                   for c in configs}
            a = [float(v) for v in vals[first.name]]
            diffs = {c.name: stats.difference([float(v) for v in vals[c.name]], a, paired)
                     for c in configs[1:]}
        rows.append({
            "key": key, "label": label, "kind": kind,
            "values": {n: [_num(None if v is None else float(v)) for v in vs]
                       for n, vs in vals.items()},
            "mean": {n: _interval_json(iv) for n, iv in per.items()},
            "diff": {n: _interval_json(iv) for n, iv in diffs.items()},
        })
    return {
        "baseline": first.name, "confidence": stats.CONFIDENCE, "paired": paired,
        "difference_method": "paired t (same seeds)" if paired else "Welch t",
        "configurations": [{"name": c.name, "source": c.source, "overrides": c.overrides,
                            "seeds": c.seeds, "scenario": c.scenario.name,
                            "kernel": c.scenario.host.kernel,
                            "duration_s": c.scenario.duration} for c in configs],
        "metrics": rows,
    }


def _partial(configs, vals: dict[str, list]) -> tuple[dict, dict]:
    """A metric some runs do not have (no packet delivered): intervals over the runs that
    have it, and a Welch difference (the seeds no longer pair up)."""
    nan = stats.Interval(math.nan, math.nan, math.nan, math.nan, "t")
    have = {n: [float(v) for v in vs if v is not None] for n, vs in vals.items()}
    per = {n: stats.mean_interval(xs) if xs else nan for n, xs in have.items()}
    a = have[configs[0].name]
    diffs = {}
    for c in configs[1:]:
        b = have[c.name]
        diffs[c.name] = (stats.welch_difference(b, a) if len(a) > 1 and len(b) > 1 else
                         stats.Interval(math.nan, math.nan, math.nan, math.nan, "Welch t"))
    return per, diffs
