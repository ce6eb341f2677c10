"""Run an experiment's cases and shape the output like the seeds' tables.

An experiment module defines ``NAME``, ``TITLE``, ``SEED`` (the seed file it
reproduces), ``TABLE`` (metric rows to print), ``cases(quick, kernel)`` returning
``[(case name, params, Scenario)]``, ``metrics(name, result) -> dict`` and
``claims(cases) -> [(claim, held)]``: the seed's qualitative findings, checked.
A module that is not an rx-engine run defines ``run_case(name, params, spec) -> metrics``
(including ``packets``, ``cpu_softirq``, ``cpu_util``) and its ``cases`` return its own
specs instead of Scenarios.
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


def kernels_of(cases) -> list[str]:
    """The kernel versions the cases run (an experiment with its own runner names its
    kernel in the case's params)."""
    named = (str(params["kernel"]) if "kernel" in params else
             getattr(getattr(sc, "host", None), "kernel", None) for _, params, sc in cases)
    return sorted({k for k in named if k})


def run_experiment(module, quick: bool = False, kernel: str | None = None,
                   progress=None) -> dict:
    cases = module.cases(quick, kernel)
    kernels = kernels_of(cases)
    out = []
    for i, (name, params, sc) in enumerate(cases):
        if progress:
            progress(i, len(cases), name)
        if hasattr(module, "run_case"):  # an experiment with its own runner
            m = module.run_case(name, params, sc)
        else:
            res = simulate(sc)
            extra = getattr(module, "extra_metrics", None)
            # the experiment's own metrics win over the common per-CPU lists
            m = {**common_metrics(res), **module.metrics(name, res),
                 **(extra(name, sc) if extra else {})}
        out.append({"name": name, "params": params, "metrics": m})
    claims = [{"claim": c, "held": bool(ok)} for c, ok in module.claims(out)]
    title = module.TITLE + (f" (kernel{'s' if len(kernels) > 1 else ''} "
                            f"{', '.join(kernels)})" if kernels else "")
    return {"experiment": module.NAME, "title": title, "kernels": kernels,
            "seed_file": module.SEED,
            "quick": quick, "cases": out, "claims": claims, "table_metrics": module.TABLE}


def get(name: str):
    from rxlab.repro import EXPERIMENTS

    if name not in EXPERIMENTS:
        raise UsageError(f"unknown experiment {name!r}; built-in: {', '.join(sorted(EXPERIMENTS))}")
    return EXPERIMENTS[name]
