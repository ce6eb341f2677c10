"""Run an experiment's cases over several traffic seeds and judge the seed's claims.

An experiment module defines ``NAME``, ``TITLE``, ``SEED`` (the seed file it
reproduces), ``TABLE`` (metric rows to print), ``cases(quick, kernel)`` returning
``[(case name, params, Scenario)]``, ``metrics(name, result) -> dict`` and
``claims(cases) -> [Claim]``: the seed's findings, each with the figures that judge it
(:func:`fig`, :func:`true`) and its basis: ``"calibrated"`` when a cost was set from that
very figure of the seed (the claim then restates an input), ``"predicted"`` when the
figure comes out of the model.
A module may define ``seed_table(exp) -> dict``: the seed's whole posted table beside
the model's figures (``exp["seed_table"]``, printed and in ``--json``).
A module that is not an rx-engine run defines ``run_case(name, params, spec) -> metrics``
(including ``packets``, ``cpu_softirq``, ``cpu_util``) and its ``cases`` return its own
specs instead of Scenarios (a dataclass with a ``seed`` field gets one seed per run).

Every case runs once per traffic seed (``seeds`` runs: the case's seed, +1, ...).
``claims`` is evaluated on each seed's cases; each judged figure is reported as its mean
and 95 % Student-t interval over the seeds, and a claim holds only when every figure's
whole interval lies on the claimed side of its bound (a true/false figure: true on every
seed).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field

from rxlab.errors import UsageError
from rxlab.scenario import scenario_from_dict
from rxlab.simulate import simulate
from rxlab.stats import mean_ci95

DEFAULT_SEEDS = 5
BASES = ("calibrated", "predicted")
OPS = ("<", "<=", ">", ">=", "within", "true")


@dataclass(frozen=True)
class Figure:
    """One seed's value of a judged figure and the side the claim puts it on."""

    label: str
    value: float
    op: str
    bound: float | tuple[float, float] | None = None


@dataclass(frozen=True)
class Claim:
    text: str
    basis: str  # "calibrated" | "predicted"
    figures: tuple[Figure, ...]
    calibrated_from: str | None = None  # the cost set from the seed's figure
    notes: tuple[str, ...] = field(default_factory=tuple)


def fig(label: str, value: float, op: str, bound) -> Figure:
    """A numeric figure: the claim says ``value op bound`` (``within``: lo <= v <= hi)."""
    if op not in OPS[:-1]:
        raise ValueError(f"fig: op {op!r}")
    return Figure(label, float(value), op, tuple(bound) if op == "within" else float(bound))


def true(label: str, cond: bool) -> Figure:
    """A yes/no figure: the claim needs it on every seed."""
    return Figure(label, 1.0 if cond else 0.0, "true")


def claim(text: str, basis: str, *figures: Figure, calibrated_from: str | None = None
          ) -> Claim:
    if basis not in BASES:
        raise ValueError(f"claim basis {basis!r}")
    if basis == "calibrated" and not calibrated_from:
        raise ValueError("a calibrated claim names the cost set from the seed's figure")
    return Claim(text, basis, tuple(figures), calibrated_from)


def interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and the 95 % Student-t interval (lo, hi) over the seeds."""
    mean, half = mean_ci95(values)
    if half is None:
        raise ValueError("an interval needs at least 2 seeds")
    return mean, mean - half, mean + half


def judge_figure(values: list[float], op: str, bound) -> dict:
    """Mean, interval and verdict of one figure over the seeds."""
    mean, lo, hi = interval(values)
    if op == "true":
        held = all(v == 1.0 for v in values)
    elif op == "<":
        held = hi < bound
    elif op == "<=":
        held = hi <= bound
    elif op == ">":
        held = lo > bound
    elif op == ">=":
        held = lo >= bound
    else:  # within
        held = bound[0] <= lo and hi <= bound[1]
    return {"mean": _r(mean), "ci95": [_r(lo), _r(hi)], "held": bool(held)}


def judge(per_seed: list[list[Claim]]) -> list[dict]:
    """One claim list per seed (same claims, same figures) -> judged claims."""
    out = []
    for k, first in enumerate(per_seed[0]):
        runs = [claims[k] for claims in per_seed]
        if any(c.text != first.text or len(c.figures) != len(first.figures) for c in runs):
            raise ValueError(f"claim {first.text!r} differs between seeds")
        figures = []
        for j, f in enumerate(first.figures):
            values = [c.figures[j].value for c in runs]
            figures.append({"figure": f.label, "op": f.op,
                            "bound": list(f.bound) if isinstance(f.bound, tuple) else f.bound,
                            **judge_figure(values, f.op, f.bound),
                            "values": [_r(v) for v in values]})
        out.append({"claim": first.text, "basis": first.basis,
                    "calibrated_from": first.calibrated_from, "seeds": len(runs),
                    "held": all(f["held"] for f in figures), "figures": figures})
    return out


def _r(x: float) -> float:
    return float(f"{x:.7g}") if math.isfinite(x) else x


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


def base_seed(spec) -> int:
    return int(getattr(spec, "seed", 0) or 0)


def run_case(module, name: str, params: dict, spec, offset: int) -> dict:
    """One case under traffic seed ``base seed + offset``: the experiment's metrics."""
    if hasattr(module, "run_case"):  # an experiment with its own runner
        if offset and dataclasses.is_dataclass(spec) and hasattr(spec, "seed"):
            spec = dataclasses.replace(spec, seed=spec.seed + offset)
        return module.run_case(name, params, spec)
    if offset:
        from rxlab.scenario import with_overrides

        spec = with_overrides(spec, {"seed": spec.seed + offset})
    res = simulate(spec)
    extra = getattr(module, "extra_metrics", None)
    # the experiment's own metrics win over the common per-CPU lists
    return {**common_metrics(res), **module.metrics(name, res),
            **(extra(name, spec) if extra else {})}


def _pool_task(task: tuple) -> dict:
    """One case on one seed offset, in a worker: (experiment name, quick, kernel, case
    index, seed offset)."""
    name, quick, kernel, index, offset = task
    mod = get(name)
    case, params, spec = mod.cases(quick, kernel)[index]
    return run_case(mod, case, params, spec, offset)


def run_experiment(module, quick: bool = False, kernel: str | None = None,
                   progress=None, seeds: int = DEFAULT_SEEDS, jobs: int = 1) -> dict:
    """Every case under ``seeds`` traffic seeds (``jobs`` > 1: in parallel processes)."""
    if seeds < 2:
        raise UsageError(f"--seeds: {seeds}; a 95 % interval needs at least 2 (default "
                         f"{DEFAULT_SEEDS})")
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: give a number of processes >= 1")
    cases = module.cases(quick, kernel)
    kernels = kernels_of(cases)
    tasks = [(i, s) for s in range(seeds) for i in range(len(cases))]
    results: dict[tuple[int, int], dict] = {}
    if jobs == 1 or getattr(module, "NAME", None) not in _registry():
        for n, (i, s) in enumerate(tasks):
            if progress:
                progress(n, len(tasks), f"{cases[i][0]}, seed +{s}")
            results[i, s] = run_case(module, *cases[i], s)
    else:
        from rxlab.parallel import run_each

        def got(key: str, metrics: dict) -> None:
            i, s = map(int, key.split("."))
            if progress:
                progress(len(results), len(tasks), f"{cases[i][0]}, seed +{s}")
            results[i, s] = metrics

        run_each(_pool_task, [(f"{i}.{s}", (module.NAME, quick, kernel, i, s))
                              for i, s in tasks], jobs, got)
    out = []
    for i, (name, params, spec) in enumerate(cases):
        runs = [results[i, s] for s in range(seeds)]
        out.append({"name": name, "params": params, "metrics": summarise(runs),
                    "ci95": half_widths(runs),
                    "runs": [{"seed": base_seed(spec) + s, "metrics": m}
                             for s, m in enumerate(runs)]})
    per_seed = [module.claims([{"name": c["name"], "params": c["params"],
                                "metrics": c["runs"][s]["metrics"]} for c in out])
                for s in range(seeds)]
    title = module.TITLE + (f" (kernel{'s' if len(kernels) > 1 else ''} "
                            f"{', '.join(kernels)})" if kernels else "")
    exp = {"experiment": module.NAME, "title": title, "kernels": kernels,
           "seed_file": module.SEED, "seeds": seeds,
           "quick": quick, "cases": out, "claims": judge(per_seed),
           "table_metrics": module.TABLE}
    if hasattr(module, "seed_table"):
        exp["seed_table"] = module.seed_table(exp)
    return exp


def _is_num(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def summarise(runs: list):
    """The runs' mean, leaf by leaf (numbers); other leaves kept when the runs agree,
    else listed per run."""
    first = runs[0]
    if all(_is_num(r) for r in runs):
        return _r(math.fsum(runs) / len(runs))
    if isinstance(first, dict) and all(isinstance(r, dict) and r.keys() == first.keys()
                                       for r in runs):
        return {k: summarise([r[k] for r in runs]) for k in first}
    if isinstance(first, list) and all(isinstance(r, list) and len(r) == len(first)
                                       for r in runs):
        return [summarise([r[j] for r in runs]) for j in range(len(first))]
    return first if all(r == first for r in runs) else list(runs)


def half_widths(runs: list[dict]) -> dict:
    """Half-width of the 95 % interval of every top-level numeric metric."""
    out = {}
    for k, v in runs[0].items():
        if _is_num(v) and all(_is_num(r.get(k)) for r in runs):
            out[k] = _r(mean_ci95([float(r[k]) for r in runs])[1])
    return out


def default_jobs(quick: bool) -> int:
    """--quick runs in this process (worker start-up would cost more than it saves)."""
    return 1 if quick else max(1, min(4, os.cpu_count() or 1))


def _registry() -> dict:
    from rxlab.repro import EXPERIMENTS

    return EXPERIMENTS


def get(name: str):
    experiments = _registry()
    if name not in experiments:
        raise UsageError(f"unknown experiment {name!r}; built-in: {', '.join(sorted(experiments))}")
    return experiments[name]
