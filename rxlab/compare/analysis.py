"""The comparison: per metric, each configuration's mean and interval, and its
difference against the first configuration (``rxlab.stats``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rxlab import stats


@dataclass(frozen=True)
class Metric:
    """A row of the comparison: a figure of each run, addressed by its path in the run's
    result (``rxlab.metrics.schema``, docs/output.md). ``over`` = "max" or "mean" takes
    that figure over every CPU (``path`` then names CPU 0's, ``cpus.0....``), "per_s" sums
    it over every rx queue per second of traffic (``queues.0....``); a latency percentile
    is absent (None) when no packet got that far."""

    key: str
    label: str
    kind: str  # rate, per_s, count, time, fraction: the unit it is printed in
    path: str
    over: str | None = None

    def get(self, d: dict) -> float | None:
        if self.over == "per_s":
            field = self.path.split(".")[2]  # queues.0.irqs -> irqs
            qs = d.get("queues")
            return sum(q.get(field, 0) for q in qs) / d["duration_s"] if qs else None
        if self.over:
            rest = self.path.split(".")[2:]  # cpus.0.util.softirq -> util.softirq
            vals = [_at(c, rest) for c in d.get("cpus", [])]
            if self.over == "max":
                return max(vals, default=0.0)
            return sum(vals) / len(vals) if vals else 0.0
        parts = self.path.split(".")
        if parts[0] == "latency_ns":
            lat = d["latency_ns"].get(parts[1]) or {}
            # no packet reached the socket or the application: no latency to compare
            return lat.get(parts[2]) if lat.get("samples", 0) else None
        return _at(d, parts)


def _at(d, parts: list[str]):
    for part in parts:
        d = d[int(part)] if isinstance(d, list) else d.get(part, 0)
    return d


BASE_METRICS = [
    Metric("delivered_pps", "delivered rate", "rate", "throughput.delivered_pps"),
    Metric("dropped", "drops, all reasons", "count", "packets.dropped"),
]
LATER_METRICS = [
    Metric("latency_socket_p50_ns", "latency to socket p50", "time", "latency_ns.to_socket.p50"),
    Metric("latency_socket_p99_ns", "latency to socket p99", "time", "latency_ns.to_socket.p99"),
    Metric("latency_socket_p999_ns", "latency to socket p99.9", "time",
           "latency_ns.to_socket.p999"),
    Metric("latency_app_p50_ns", "latency to app p50", "time", "latency_ns.to_app.p50"),
    Metric("latency_app_p99_ns", "latency to app p99", "time", "latency_ns.to_app.p99"),
    Metric("latency_app_p999_ns", "latency to app p99.9", "time", "latency_ns.to_app.p999"),
    Metric("softirq_util_max", "softirq, busiest CPU", "fraction", "cpus.0.util.softirq",
           over="max"),
    Metric("softirq_util_mean", "softirq, mean of CPUs", "fraction", "cpus.0.util.softirq",
           over="mean"),
    Metric("irq_util_mean", "irq, mean of CPUs", "fraction", "cpus.0.util.irq", over="mean"),
    Metric("system_util_mean", "system, mean of CPUs", "fraction", "cpus.0.util.system",
           over="mean"),
    Metric("irqs_per_s", "device interrupts, all queues", "per_s", "queues.0.irqs",
           over="per_s"),
    Metric("reordered_packets", "reordered packets", "count", "reordered_packets"),
]
# a row only when some run's sockets busy-poll (its result then has the field)
BUSY_POLL_METRIC = Metric("busy_poll_pps", "busy-polled packets, all queues", "per_s",
                          "queues.0.busy_poll_packets", over="per_s")


def metrics_for(runs: list[dict]) -> list[Metric]:
    """The metrics, with a row per drop reason that any run counts."""
    reasons = sorted({r for d in runs for r, n in d["packets"]["dropped_by_reason"].items()
                      if n})
    drops = [Metric(f"drop_{r}", f"drops: {r}", "count", f"packets.dropped_by_reason.{r}")
             for r in reasons]
    busy = [BUSY_POLL_METRIC] if any("busy_poll_packets" in q for d in runs
                                     for q in d.get("queues", [])) else []
    return BASE_METRICS + drops + LATER_METRICS + busy


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
    for m in metrics_for(all_runs):
        key, label, kind = m.key, m.label, m.kind
        vals = {c.name: [m.get(d) for d in results[c.name]] for c in configs}
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
