"""Independent replications in parallel processes (``rxlab run --jobs N``).

Replication ``i`` is the scenario with seed ``seed + i``: its own traffic, flows and
jitter draws. Each runs in a worker process of the pool every command uses
(``rxlab.parallel``); a run's result is exactly what
``rxlab run --seed seed+i --json`` prints. Key metrics (the numeric leaves of the
sections below) are reported as mean and the half-width of a 95 % Student-t interval
over the replications.
"""

from __future__ import annotations

import os

from rxlab.stats import mean_ci95

# sections of a result whose numeric leaves are summarised
KEY_SECTIONS = ("packets", "throughput", "latency_ns", "reordered_packets", "cpus", "apps")
_SKIP = {"cpu", "app", "samples"}  # identifiers and counts that are not metrics


def _flatten(obj, prefix: str, out: dict) -> None:
    if isinstance(obj, bool):
        return
    if isinstance(obj, int | float):
        out[prefix] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if k not in _SKIP:
                _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}.{i}", out)


def key_metrics(data: dict) -> dict:
    """Dotted path -> number for the key sections of one result dict."""
    out: dict = {}
    for sec in KEY_SECTIONS:
        if sec in data:
            _flatten(data[sec], sec, out)
    return out


def _one(task: tuple) -> dict:
    """One replication, in a worker: (the scenario as a mapping, its seed)."""
    from rxlab.scenario import scenario_from_dict
    from rxlab.simulate import simulate

    scenario_data, seed = task
    sc = scenario_from_dict(scenario_data, scenario_data.get("name", "scenario"))
    return simulate(sc, seed=seed).data


def replicate(sc, n: int, workers: int | None = None) -> dict:
    """Run ``n`` replications of scenario ``sc`` (seeds sc.seed .. sc.seed + n - 1)."""
    if n < 1:
        raise ValueError("replications: n must be >= 1")
    data = sc.model_dump(mode="python", exclude_none=True)
    seeds = [sc.seed + i for i in range(n)]
    workers = max(1, min(n, workers or os.cpu_count() or 1))
    if workers == 1:
        runs = [_one((data, s)) for s in seeds]
    else:
        from rxlab.parallel import run_each

        got: dict = {}
        run_each(_one, [(str(i), (data, s)) for i, s in enumerate(seeds)], workers,
                 got.__setitem__)
        runs = [got[str(i)] for i in range(n)]
    return summarise(runs, workers)


def summarise(runs: list[dict], workers: int = 1) -> dict:
    flat = [key_metrics(r) for r in runs]
    keys = [k for k in flat[0] if all(k in f for f in flat)]
    mean, ci = {}, {}
    for k in keys:
        m, h = mean_ci95([float(f[k]) for f in flat])
        mean[k] = round(m, 6)
        ci[k] = None if h is None else round(h, 6)
    return {"replications": len(runs), "seeds": [r["seed"] for r in runs], "workers": workers,
            "confidence": 0.95, "mean": mean, "ci95": ci, "runs": runs}


# rows of the terminal table (every key is in --json)
TABLE_KEYS = (
    "packets.offered", "packets.delivered", "packets.dropped",
    "throughput.delivered_pps", "latency_ns.p50", "latency_ns.p99", "latency_ns.p999",
    "latency_ns.to_app.mean", "reordered_packets",
)


def print_table(rep: dict, console) -> None:
    """Mean and 95 % CI per metric, each in its own unit (time, rate, percent, count)."""
    from rxlab.report.fit import fmt_metric, print_fitted

    keys = list(TABLE_KEYS)
    keys += [k for k in rep["mean"] if k.startswith("packets.dropped_by_reason.")
             and rep["mean"][k] > 0]
    keys += [k for k in rep["mean"] if k.startswith("cpus.") and k.endswith(".util.idle")]
    rows = []
    for k in keys:
        if k in rep["mean"]:
            h = rep["ci95"][k]
            rows.append([k, fmt_metric(k, rep["mean"][k]),
                         "n/a" if h is None else fmt_metric(k, h, ci=True)])
    print_fitted(console, f"{rep['replications']} replications (seeds {rep['seeds'][0]}.."
                 f"{rep['seeds'][-1]}, {rep['workers']} processes): mean and 95 % CI "
                 "(Student t)", ["metric", "mean", "± 95 % CI"], rows)
