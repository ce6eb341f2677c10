"""Key metrics of a run (one table row) and means with 95 % confidence intervals.

A metric is a named column below, ``drop_<reason>`` for one drop reason, or a dotted
path to a number in the run's result (``latency_ns.to_app.p99``, ``cpus.0.util.softirq``),
checked against the output schema (rxlab.metrics.schema, docs/output.md).
"""

from __future__ import annotations

import math
from typing import Any

from rxlab.errors import UsageError
from rxlab.kernel.drop_reasons import DROP_REASONS
from rxlab.metrics.schema import metric_path_problem
from rxlab.stats import mean_interval

# name -> (description, unit)
METRICS: dict[str, tuple[str, str]] = {
    "offered": ("packets offered", "packets"),
    "delivered": ("packets delivered to sockets", "packets"),
    "dropped": ("packets dropped", "packets"),
    "in_flight": ("packets still queued at the end", "packets"),
    "drop_fraction": ("dropped / offered", ""),
    "offered_pps": ("offered rate", "pps"),
    "delivered_pps": ("delivered rate", "pps"),
    "latency_p50_ns": ("latency to socket, median", "ns"),
    "latency_p99_ns": ("latency to socket, 99th percentile", "ns"),
    "latency_p999_ns": ("latency to socket, 99.9th percentile", "ns"),
    "latency_mean_ns": ("latency to socket, mean", "ns"),
    "reordered_packets": ("packets delivered out of order within a flow", "packets"),
    "softirq_util_mean": ("softirq share of CPU time, mean over CPUs", ""),
    "softirq_util_max": ("softirq share of CPU time, busiest CPU", ""),
    "idle_mean": ("idle share of CPU time, mean over CPUs", ""),
    "time_squeeze": ("softnet time_squeeze, summed over CPUs", "events"),
    "flow_limit_count": ("softnet flow_limit_count, summed over CPUs", "packets"),
    "received_rps": ("softnet received_rps, summed over CPUs", "IPIs"),
    "irqs_per_s": ("device interrupts per second of traffic, all rx queues", "/s"),
}
DEFAULT_METRICS = ["delivered_pps", "drop_fraction", "latency_p99_ns", "softirq_util_max"]
RESULT_TOP = ("packets", "throughput", "cpus", "queues", "apps", "latency_ns",
              "reordered_packets", "config")


def check_metric_name(name: Any, where: str) -> None:
    """A named column, drop_<reason>, or a path to a number in the result's schema."""
    if not isinstance(name, str) or not name:
        raise UsageError(f"{where}: {name!r} is not a metric name")
    if name in METRICS or name.removeprefix("drop_") in DROP_REASONS:
        return
    problem = metric_path_problem(name)
    if problem is None:
        return
    if "." in name or name.split(".")[0] in RESULT_TOP:
        raise UsageError(f"{where}: unknown metric {name!r}: {problem}")
    raise UsageError(f"{where}: unknown metric {name!r}; choose from "
                     + ", ".join(METRICS) + ", drop_<reason>, or a dotted path to a number "
                     "in the result (e.g. latency_ns.to_app.p99; docs/output.md)")


def _path(data: Any, path: str) -> Any:
    node = data
    for part in path.split("."):
        if isinstance(node, list):
            try:
                node = node[int(part)]
            except (ValueError, IndexError):
                return None
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            return None
    return node if isinstance(node, int | float) and not isinstance(node, bool) else None


def key_metrics(data: dict, extra: list[str] = ()) -> dict[str, float | int | None]:
    """The table row's metrics from a run's ``Result.data``."""
    pk, tp, lat = data["packets"], data["throughput"], data["latency_ns"]
    cpus = data.get("cpus", [])
    soft = [c["util"]["softirq"] for c in cpus]
    idle = [c["util"]["idle"] for c in cpus]

    def sn(k):
        return sum(int(c["softnet_stat"].get(k, 0)) for c in cpus)

    row: dict[str, float | int | None] = {
        "offered": pk["offered"], "delivered": pk["delivered"], "dropped": pk["dropped"],
        "in_flight": pk["in_flight"],
        "drop_fraction": pk["dropped"] / pk["offered"] if pk["offered"] else 0.0,
        "offered_pps": tp["offered_pps"], "delivered_pps": tp["delivered_pps"],
        "latency_p50_ns": lat["p50"], "latency_p99_ns": lat["p99"],
        "latency_p999_ns": lat["p999"], "latency_mean_ns": lat["mean"],
        "reordered_packets": data.get("reordered_packets", 0),
        "softirq_util_mean": sum(soft) / len(soft) if soft else 0.0,
        "softirq_util_max": max(soft) if soft else 0.0,
        "idle_mean": sum(idle) / len(idle) if idle else 0.0,
        "time_squeeze": sn("time_squeeze"), "flow_limit_count": sn("flow_limit_count"),
        "received_rps": sn("received_rps"),
        "irqs_per_s": (sum(q.get("irqs", 0) for q in data.get("queues", []))
                       / data["duration_s"] if data.get("duration_s") else None),
    }
    for reason, n in sorted(pk.get("dropped_by_reason", {}).items()):
        row[f"drop_{reason}"] = n
    for name in extra:
        if name not in row:
            row[name] = _path(data, name)
    return row


def mean_ci(values: list[float]) -> tuple[float, float, int]:
    """(mean, 95 % CI half-width, n) over the values that are not None; nan where undefined
    (the interval of rxlab.stats, as compare and reproduce print it)."""
    xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not xs:
        return math.nan, math.nan, 0
    iv = mean_interval(xs)
    return iv.estimate, iv.half, len(xs)
