"""Configurations to compare, and their runs: every configuration once per seed.

A configuration is a scenario (file or built-in name) or a variant: the first scenario
with ``--set-variant NAME:PATH=VALUE`` overrides. Runs go to the sweep's local process
pool (``rxlab.parallel.run_local``: a forkserver with the compiled loop loaded,
workers that die with the driver), one task per configuration and seed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from rxlab.errors import UsageError
from rxlab.scenario import Scenario, load_scenario, with_overrides

DEFAULT_SEEDS = 5
MAX_SEEDS = 1000  # per configuration: the interval is tight long before, and each is a run
MAX_SEED = (1 << 64) - 1  # scenario.seed's range
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,39}$")


@dataclass
class Config:
    name: str
    source: str  # the scenario argument, or "variant of <first>"
    scenario: Scenario
    overrides: dict = field(default_factory=dict)  # the variant's --set-variant values
    seeds: list[int] = field(default_factory=list)


def parse_variant(item: str) -> tuple[str, str]:
    """'NAME:PATH=VALUE' -> (NAME, 'PATH=VALUE'); a malformed item is a UsageError."""
    name, sep, rest = item.partition(":")
    if not sep or "=" not in rest or not rest.split("=", 1)[0].strip():
        raise UsageError(f"--set-variant {item[:60]!r}: write NAME:PATH=VALUE, e.g. "
                         "rps-all:kernel.rps_cpus=ffff")
    if not NAME_RE.match(name):
        raise UsageError(f"--set-variant {item[:60]!r}: {name!r} is not a variant name; use "
                         "letters, digits and . _ + - (up to 40), e.g. rps-all")
    return name, rest


def _stem(ref: str) -> str:
    return Path(ref).name.removesuffix(".yaml").removesuffix(".yml") or ref


def build_configs(refs: list[str], variants: list[str], common: dict,
                  seeds: int, first_seed: int | None) -> list[Config]:
    """Configurations in order: the scenarios as given, then the variants (in the order
    their names first appear). ``common`` overrides apply to all, before a variant's."""
    from rxlab.cli.run_cmd import parse_sets

    if seeds < 2:
        raise UsageError(f"--seeds {seeds}: a 95 % interval needs at least 2 seeds "
                         f"(default {DEFAULT_SEEDS})")
    if seeds > MAX_SEEDS:
        raise UsageError(f"--seeds {seeds}: at most {MAX_SEEDS} per configuration (each "
                         "is a whole run); the interval narrows as 1/sqrt(N)")
    if first_seed is not None and not 0 <= first_seed <= MAX_SEED - seeds + 1:
        raise UsageError(f"--seed {first_seed}: seeds run from 0 to 2^64-1, so with --seeds "
                         f"{seeds} the first is at most {MAX_SEED - seeds + 1}")
    groups: dict[str, list[str]] = {}
    for item in variants:
        name, kv = parse_variant(item)
        groups.setdefault(name, []).append(kv)
    refs = refs or ["default"]
    configs: list[Config] = []
    for ref in refs:
        sc = load_scenario(ref)
        if common:
            sc = with_overrides(sc, common)
        configs.append(Config(_stem(ref), ref, sc))
    base = configs[0]
    for name, kvs in groups.items():
        ov = parse_sets(kvs)
        try:
            sc = with_overrides(base.scenario, ov)
        except UsageError as err:
            raise UsageError(f"--set-variant {name}: {err}") from None
        configs.append(Config(name, f"variant of {base.name}", sc, ov))
    if len(configs) < 2:
        raise UsageError("compare: one configuration; give two or more scenarios, or "
                         "variants with --set-variant NAME:PATH=VALUE")
    _unique_names(configs)
    for c in configs:
        start = c.scenario.seed if first_seed is None else first_seed
        if start + seeds - 1 > MAX_SEED:
            raise UsageError(f"{c.name}: seed {start} + {seeds} seeds passes 2^64-1; give "
                             "--seed S with a lower S")
        c.seeds = list(range(start, start + seeds))
    return configs


def _unique_names(configs: list[Config]) -> None:
    """A repeated name gets the first free ``#k``: free of every name given, so a file
    named ``x#2.yaml`` beside two ``x.yaml`` keeps its own figures (x, x#3, x#2)."""
    taken = {c.name for c in configs}
    seen: set[str] = set()
    for c in configs:
        if c.name in seen:
            k = 2
            while f"{c.name}#{k}" in taken:
                k += 1
            c.name = f"{c.name}#{k}"
            taken.add(c.name)
        seen.add(c.name)


def check_memory(configs: list[Config], jobs: int) -> tuple[int, str | None]:
    """Refuse (one line) a configuration over the memory limit before any run; return
    the worker count that fits the limit side by side, and a notice if it is lower."""
    from rxlab.memory_budget import check, format_size, resolve_limit

    need = 0
    for c in configs:
        try:
            need = max(need, check(c.scenario).total)
        except UsageError as err:
            raise UsageError(f"{c.name}: {err}") from None
    limit = resolve_limit(None)
    fit = max(1, limit.nbytes // max(1, need))
    if fit < jobs:
        return fit, (f"{jobs} processes of ~{format_size(need)} each exceed the memory "
                     f"limit {limit.source}; running {fit} at a time")
    return jobs, None


def run_all(configs: list[Config], jobs: int | None, console=None,
            plan=None) -> dict[str, list[dict]]:
    """Every configuration on each of its seeds: {name: [Result.data per seed]}.
    ``plan(done, total)`` after each run: without a bar, the time left is said once
    (rxlab.cli.run_cmd.PlanLine)."""
    from rxlab.parallel import RunError, run_local
    from rxlab.sweep.runner import _Bar, execute_run
    from rxlab.sweep.spec import dump_scenario

    if jobs is not None and jobs < 1:  # before the default: 0 is not 'the default'
        raise UsageError(f"--jobs {jobs}: give a number of processes >= 1")
    jobs = jobs or os.cpu_count() or 1
    jobs, notice = check_memory(configs, jobs)
    if notice and console is not None:
        console.print(f"rxlab: {notice}", highlight=False)
    tasks, where = [], {}
    for ci, c in enumerate(configs):
        base = dump_scenario(c.scenario)
        for si, seed in enumerate(c.seeds):
            rid = f"{ci}.{si}"
            tasks.append({"run_id": rid, "scenario": {**base, "seed": seed}})
            where[rid] = (c.name, si)
    out: dict[str, list] = {c.name: [None] * len(c.seeds) for c in configs}
    bar = _Bar(console, console is not None, len(tasks), 0, f"compare ({jobs} processes)")

    done = [0]

    def on_result(rid: str, res: dict) -> None:
        name, si = where[rid]
        out[name][si] = res["data"]
        bar.advance()
        done[0] += 1
        if plan is not None:
            plan(done[0], len(tasks))

    try:
        with bar:
            run_local(execute_run, [(t["run_id"], t) for t in tasks], jobs, on_result)
    except RunError as e:
        name, si = where[e.run_id]
        seed = next(c.seeds[si] for c in configs if c.name == name)
        if isinstance(e.error, UsageError):
            raise UsageError(f"{name} (seed {seed}): {e.error}") from None
        e.error.add_note(f"in configuration {name}, seed {seed}")
        raise e.error from None
    return out
