"""Run an experiment's cases and shape the output like the seeds' tables.

An experiment module defines ``NAME``, ``TITLE``, ``SEED`` (the seed file it
reproduces), ``TABLE`` (metric rows to print), ``cases(quick, kernel)`` returning
``[(case name, params, Scenario)]``, ``metrics(name, result) -> dict`` and
``claims(cases) -> [(claim, held)]``: the seed's qualitative findings, checked.
"""

from __future__ import annotations

from rxlab.errors import UsageError
from rxlab.scenario import scenario_from_dict
from rxlab.simulate import simulate


def common_metrics(res) -> dict:
    d = res.data
    return {
        "packets": d["packets"],
        "cpu_softirq": [c["util"]["softirq"] for c in d["cpus"]],
        "cpu_util": [round(1.0 - c["util"]["idle"], 6) for c in d["cpus"]],
    }


def make(data: dict, name: str):
    return scenario_from_dict(data, f"experiment {name}")


def run_experiment(module, quick: bool = False, kernel: str | None = None,
                   progress=None) -> dict:
    cases = module.cases(quick, kernel)
    out = []
    for i, (name, params, sc) in enumerate(cases):
        if progress:
            progress(i, len(cases), name)
        res = simulate(sc)
        out.append({"name": name, "params": params,
                    "metrics": {**module.metrics(name, res), **common_metrics(res)}})
    claims = [{"claim": c, "held": bool(ok)} for c, ok in module.claims(out)]
    return {"experiment": module.NAME, "title": module.TITLE, "seed_file": module.SEED,
            "quick": quick, "cases": out, "claims": claims, "table_metrics": module.TABLE}


def get(name: str):
    from rxlab.repro import EXPERIMENTS

    if name not in EXPERIMENTS:
        raise UsageError(f"unknown experiment {name!r}; built-in: {', '.join(sorted(EXPERIMENTS))}")
    return EXPERIMENTS[name]
