"""Sweep files: a base scenario, the overrides to vary, and the seeds; expanded into runs.

A sweep file (YAML)::

    name: backlog-vs-queues
    base: default                  # built-in name, scenario path (relative to this file),
                                   # or an inline scenario mapping
    overrides: {duration: 0.02}    # applied to every run
    grid:                          # every combination (cartesian product)
      kernel.netdev_max_backlog: [300, 1000, 3000]
      nic.queues: [2, 4]
    zip:                           # varied together: lists of one length
      kernel.netdev_budget: [100, 300]
      kernel.dev_weight: [16, 64]
    points:                        # explicit override sets
      - {host.kernel: "5.15"}
      - {host.kernel: "6.19"}
    replications: 3                # seeds seed, seed+1, ... (or `seeds: [7, 11, 13]`)
    metrics: [delivered_pps, drop_fraction, latency_p99_ns]   # summary and plots

The parameter points are grid x zip x points (each factor that is absent counts once);
each point runs once per seed. A run's id is a hash of the base scenario, the run's
parameters and its seed, so the same run has the same id in every sweep that has it.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rxlab.errors import UsageError
from rxlab.inputs import load_yaml
from rxlab.scenario import BUILTIN_DIR, Scenario, scenario_from_dict, validation_message
from rxlab.sweep.metrics import DEFAULT_METRICS, check_metric_name

MAX_RUNS = 100_000  # parameter points x seeds; each run is a process task and a JSON file

SWEEP_KEYS = {
    "name": "a name for the sweep (default: the file's stem)",
    "description": "free text",
    "base": "the base scenario: built-in name, path, or an inline mapping",
    "overrides": "a mapping of dotted path -> value applied to every run",
    "duration": "shortcut for overrides.duration (seconds of traffic per run)",
    "grid": "a mapping of dotted path -> list of values; every combination runs",
    "zip": "a mapping of dotted path -> list of values, all lists one length",
    "points": "a list of mappings of dotted path -> value",
    "replications": "runs per parameter point, seeds seed, seed+1, ...",
    "seed": "the first seed when replications is given (default 1)",
    "seeds": "an explicit list of seeds (instead of replications)",
    "metrics": "metric names for the summary and plots",
}


@dataclass(frozen=True)
class Run:
    """One simulation of the sweep: a parameter point and a seed."""

    run_id: str
    point: int  # index of the parameter point
    params: dict  # dotted path -> value (the varied parameters only)
    seed: int
    rep: int  # index of the seed


@dataclass
class Sweep:
    name: str
    description: str
    source: str  # where the sweep came from (file path or "<mapping>")
    base: dict  # the base scenario after fixed overrides, JSON-able (seed excluded from id)
    base_hash: str
    param_paths: list[str]
    points: list[dict]
    seeds: list[int]
    metrics: list[str]
    runs: list[Run] = field(default_factory=list)

    def scenario_for(self, run: Run) -> dict:
        """The full scenario of one run as a JSON-able mapping (what a worker simulates)."""
        return apply_overrides(self.base, {**run.params, "seed": run.seed})

    def to_json(self) -> dict:
        return {
            "name": self.name, "description": self.description, "source": self.source,
            "base": self.base, "base_hash": self.base_hash, "param_paths": self.param_paths,
            "points": self.points, "seeds": self.seeds, "metrics": self.metrics,
            "runs": [{"run_id": r.run_id, "point": r.point, "params": r.params,
                      "seed": r.seed, "rep": r.rep} for r in self.runs],
        }


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def run_id(base_hash: str, params: dict, seed: int) -> str:
    """The run's key: a hash of its base scenario, parameters and seed."""
    blob = canonical({"base": base_hash, "params": params, "seed": seed})
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def dump_scenario(sc: Scenario) -> dict:
    return sc.model_dump(mode="json", by_alias=True, exclude_none=True)


class _PathError(Exception):
    """A dotted path that does not lead anywhere in the scenario."""


def apply_overrides(data: dict, overrides: dict[str, Any]) -> dict:
    """A copy of a scenario mapping with dotted-path values set (list items by index).

    Like ``rxlab.scenario.with_overrides`` but on a mapping dumped by alias, and a path
    that runs into a scalar or past the end of a list raises ``_PathError``.
    """
    out = copy.deepcopy(data)
    for path, value in overrides.items():
        node: Any = out
        parts = path.split(".")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if isinstance(node, list):
                if not part.lstrip("-").isdigit() or not -len(node) <= int(part) < len(node):
                    where = ".".join(parts[:i]) or "scenario"
                    raise _PathError(f"{where} has {len(node)} items; there is no item {part}")
                key: Any = int(part)
            elif isinstance(node, dict):
                key = part
            else:
                raise _PathError(f"{'.'.join(parts[:i])} is a value, not a mapping")
            if last:
                node[key] = copy.deepcopy(value)
            else:
                if isinstance(node, dict) and (key not in node or node[key] is None):
                    node[key] = {}
                node = node[key]
    return out


def _is_unknown(err: ValidationError, path: str) -> bool:
    """Does pydantic reject a key that lies on ``path`` (a misspelt or made-up path)?"""
    parts = path.split(".")
    for e in err.errors():
        if e["type"] != "extra_forbidden":
            continue
        loc = [str(x) for x in e["loc"] if not str(x).startswith(("function-", "literal[",
                                                                    "dict[", "list["))]
        if loc and loc[-1] in parts:
            return True
    return False


def validate_override(base: dict, path: str, value: Any, where: str) -> dict:
    """Apply one override to the base and validate; one-line errors name ``where``."""
    if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
        raise UsageError(f"{where}: {path!r} is not a dotted scenario path like kernel.dev_weight")
    if path == "seed":
        raise UsageError(f"{where}: seeds come from `replications` or `seeds`, not overrides")
    try:
        data = apply_overrides(base, {path: value})
    except _PathError as e:
        raise UsageError(f"{where}: unknown scenario path ({e})") from None
    try:
        Scenario.model_validate(data)
    except ValidationError as err:
        if _is_unknown(err, path):  # a misspelling names the nearest key; a knob rxlab
            # knows but does not model says so (rxlab.knobs), as a scenario file does
            why = validation_message(err).split(": ", 1)[-1]
            if why.startswith("unknown key"):
                why = "unknown scenario path" + why.removeprefix("unknown key")
            raise UsageError(f"{where}: {why}") from None
        raise UsageError(f"{where}: value {value!r}: {validation_message(err)}") from None
    return data


def _load_base(spec: Any, sweep_dir: Path | None, where: str) -> Scenario:
    if isinstance(spec, dict):
        return scenario_from_dict(spec, f"{where}.base")
    if not isinstance(spec, str) or not spec:
        raise UsageError(f"{where}.base: give a built-in scenario name, a path, or a mapping")
    candidates = []
    if sweep_dir is not None and not Path(spec).is_absolute():
        candidates.append(sweep_dir / spec)
    candidates += [Path(spec), BUILTIN_DIR / f"{spec}.yaml"]
    for p in candidates:
        if p.is_file():
            return scenario_from_dict(load_yaml(p), str(spec))
    raise UsageError(f"{where}.base: {spec!r} is neither a scenario file nor a built-in "
                     "scenario (see `rxlab list`)")


def _values(v: Any, where: str) -> list:
    if not isinstance(v, list):
        raise UsageError(f"{where}: give a list of values, e.g. [500, 1000]; got {v!r}")
    if not v:
        raise UsageError(f"{where}: empty list; give at least one value")
    return v


def _mapping(v: Any, where: str, what: str) -> dict:
    if not isinstance(v, dict):
        raise UsageError(f"{where}: must be a mapping of {what}")
    return v


def parse_sweep(data: Any, source: str = "<mapping>", sweep_dir: Path | None = None) -> Sweep:
    """Validate a sweep mapping and expand it into runs; bad input raises UsageError."""
    if not isinstance(data, dict):
        raise UsageError(f"{source}: the top level must be a mapping (base, grid, ...)")
    try:
        return _parse(data, source, sweep_dir)
    except UsageError as e:
        msg = str(e)
        raise UsageError(msg if msg.startswith(source) else f"{source}: {msg}") from None


def _parse(data: dict, source: str, sweep_dir: Path | None) -> Sweep:
    for k in data:
        if k not in SWEEP_KEYS:
            raise UsageError(f"sweep.{k}: unknown key; sweep files take "
                             + ", ".join(SWEEP_KEYS))
    if "base" not in data:
        raise UsageError("sweep.base: required; name the base scenario (e.g. base: default)")
    base_sc = _load_base(data["base"], sweep_dir, "sweep")
    base = dump_scenario(base_sc)

    fixed = dict(_mapping(data.get("overrides") or {}, "sweep.overrides", "path -> value"))
    if data.get("duration") is not None:
        fixed["duration"] = data["duration"]
    for path, value in fixed.items():
        base = validate_override(base, path, value, f"sweep.overrides.{path}")
    base = dump_scenario(Scenario.model_validate(base))  # normalised (defaults filled in)

    # the parameter factors: grid (product), zip (parallel), points (explicit)
    factors: list[list[dict]] = []
    seen: dict[str, str] = {}

    def claim(path: str, where: str) -> None:
        if path in seen:
            raise UsageError(f"{where}: {path} is varied twice (also in {seen[path]})")
        seen[path] = where

    if "grid" in data:
        grid = _mapping(data["grid"], "sweep.grid", "path -> list of values")
        if not grid:
            raise UsageError("sweep.grid: empty; give at least one path with a list of values")
        axes = []
        for path, vals in grid.items():
            where = f"sweep.grid.{path}"
            vals = _values(vals, where)
            claim(path, "sweep.grid")
            for v in vals:
                validate_override(base, path, v, where)
            axes.append([(path, v) for v in vals])
        _check_count(math.prod(len(a) for a in axes), "sweep.grid: the combinations")
        factors.append([dict(combo) for combo in itertools.product(*axes)])
    if "zip" in data:
        z = _mapping(data["zip"], "sweep.zip", "path -> list of values")
        if not z:
            raise UsageError("sweep.zip: empty; give at least one path with a list of values")
        lengths = {}
        for path, vals in z.items():
            where = f"sweep.zip.{path}"
            lengths[path] = len(_values(vals, where))
            claim(path, "sweep.zip")
            for v in vals:
                validate_override(base, path, v, where)
        if len(set(lengths.values())) > 1:
            desc = ", ".join(f"{p} has {n}" for p, n in lengths.items())
            raise UsageError(f"sweep.zip: lists differ in length ({desc}); zipped lists "
                             "vary together and need one length (use grid for combinations)")
        n = next(iter(lengths.values()))
        factors.append([{p: z[p][i] for p in z} for i in range(n)])
    if "points" in data:
        pts = data["points"]
        if not isinstance(pts, list):
            raise UsageError("sweep.points: must be a list of mappings of path -> value")
        if not pts:
            raise UsageError("sweep.points: empty list; give at least one override mapping")
        paths: list[str] = []
        for i, pt in enumerate(pts):
            _mapping(pt, f"sweep.points[{i}]", "path -> value")
            for path, v in pt.items():
                validate_override(base, path, v, f"sweep.points[{i}].{path}")
                if path not in paths:
                    paths.append(path)
        for p in paths:
            claim(p, "sweep.points")
        factors.append([dict(pt) for pt in pts])

    _check_count(math.prod(len(f) for f in factors), "sweep: grid x zip x points")
    points: list[dict] = [{}]
    for f in factors:
        points = [{**a, **b} for a in points for b in f]
    param_paths = list(seen)
    # every point must make a valid scenario as a whole (cross-checks between fields)
    for i, pt in enumerate(points):
        if len(factors) > 1 or len(pt) > 1:
            try:
                Scenario.model_validate(apply_overrides(base, pt))
            except ValidationError as err:
                desc = ", ".join(f"{k}={v!r}" for k, v in pt.items())
                raise UsageError(f"sweep point {i} ({desc}): {validation_message(err)}") from None

    seeds = _seeds(data, base)
    _check_count(len(points) * len(seeds), f"sweep: {len(points)} points x {len(seeds)} seeds")
    metrics = data.get("metrics", list(DEFAULT_METRICS))
    if not isinstance(metrics, list) or not metrics:
        raise UsageError("sweep.metrics: give a non-empty list of metric names")
    for m in metrics:
        check_metric_name(m, "sweep.metrics")

    base_for_hash = {k: v for k, v in base.items() if k not in ("seed", "description")}
    base_hash = hashlib.sha256(canonical(base_for_hash).encode()).hexdigest()[:16]
    runs = []
    for i, pt in enumerate(points):
        for rep, seed in enumerate(seeds):
            runs.append(Run(run_id(base_hash, pt, seed), i, pt, seed, rep))
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        raise UsageError("sweep: two runs have the same parameters and seed; "
                         "remove the repeated values")
    name = data.get("name") or (Path(source).stem if source != "<mapping>" else "sweep")
    return Sweep(name=str(name), description=str(data.get("description") or ""),
                 source=source, base=base, base_hash=base_hash, param_paths=param_paths,
                 points=points, seeds=seeds, metrics=[str(m) for m in metrics], runs=runs)


def _seeds(data: dict, base: dict) -> list[int]:
    if "seeds" in data and "replications" in data:
        raise UsageError("sweep: give `replications` or `seeds`, not both")
    if "seeds" in data:
        seeds = data["seeds"]
        if not isinstance(seeds, list) or not seeds:
            raise UsageError("sweep.seeds: give a non-empty list of integer seeds")
        for s in seeds:
            if not isinstance(s, int) or isinstance(s, bool) or s < 0:
                raise UsageError(f"sweep.seeds: {s!r} is not an integer >= 0")
        if len(set(seeds)) != len(seeds):
            raise UsageError("sweep.seeds: a seed is listed twice")
        return list(seeds)
    reps = data.get("replications", 1)
    if not isinstance(reps, int) or isinstance(reps, bool) or reps < 1:
        raise UsageError(f"sweep.replications: {reps!r} is not an integer >= 1")
    _check_count(reps, "sweep.replications")
    first = data.get("seed", base.get("seed", 1))
    if not isinstance(first, int) or isinstance(first, bool) or first < 0:
        raise UsageError(f"sweep.seed: {first!r} is not an integer >= 0")
    return [first + i for i in range(reps)]


def _check_count(n: int, what: str) -> None:
    """Refuse a sweep too large to plan before its runs are expanded in memory."""
    if n > MAX_RUNS:
        raise UsageError(f"{what} make {n:,} runs, more than a sweep may have ({MAX_RUNS:,}); "
                         "split it into several sweeps")


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file; bad input raises a one-line UsageError.

    The file is read by ``load_yaml`` (``rxlab.inputs.read_text``: a size limit, UTF-8, no
    devices; nesting and alias expansion bounded)."""
    from rxlab.inputs import load_yaml

    p = Path(path)
    try:
        data = load_yaml(p, "no such sweep file")
    except ValueError as e:  # a date PyYAML resolves but cannot build, e.g. 2001-13-45
        raise UsageError(f"{p}: malformed YAML ({e})") from None
    return parse_sweep(data, str(p), p.parent)
