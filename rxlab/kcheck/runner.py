"""Run a selection of checks with every safety rule of docs/kernel-check.md in force.

Order: preflight (``CannotRun`` with the reason), the model is loaded first (the numba
compile or cache load happens before anything on the host changes), then under a
machine-wide lock: left-overs of a killed run repaired, sysctl originals saved (also to
a state file), the lab set up, the checks run one by one (an error fails that check
only), and in ``finally``, with signals ignored: child processes killed, BPF references
dropped, sysctls restored, namespaces deleted, the state file removed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from rxlab.host import caps, guard, signals
from rxlab.host.experiment import PROCS
from rxlab.host.lab import Lab
from rxlab.kcheck.checks import (
    CHECKS,
    MUTATIONS,
    NEEDS,
    NEEDS_PROFILE,
    UNAVAILABLE,
    Ctx,
    skipped,
)

ALL = list(CHECKS)


class ModelError(Exception):
    """The simulator could not run the lab's scenarios."""


def warm_model(log: Callable[[str], None]) -> float:
    """Load (or compile, the first time) the simulator before touching the host."""
    from rxlab.kcheck import model
    t = time.monotonic()
    log("loading the model (the first run on a machine compiles it: about a minute and a half)")
    d = model.scenario([model.group("w", [40000, 40001], 10_000)], {"rps_cpus": "3"},
                       duration=0.01)
    model.simulate(d)
    d = model.scenario([model.group("w", [40000, 40001], 10_000)],
                       {"rps_sock_flow_entries": 256, "rps_flow_cnt": 16,
                        "netdev_max_backlog": 64, "flow_limit_cpu_bitmap": "1"},
                       duration=0.01, migrate=[{"at": 0.005, "cpu": 0}])
    model.simulate(d)
    d = model.cpumap_scenario([model.group("w", [40000, 40001], 10_000)], {40000: 1},
                              [0, 1], rps_cpus="3", duration=0.01)
    model.simulate(d)
    return time.monotonic() - t


def run_checks(names: list[str], *, duration: float = 1.0, mutate: set[str] | None = None,
               log: Callable[[str], None] | None = None, profile: dict | None = None,
               repeat: int = 3) -> dict:
    """The report: ``{"checks": [...], "notes": [...], "seconds": s}``.

    Raises ``guard.CannotRun`` (nothing changed) when the machine cannot run them."""
    log = log or (lambda _m: None)
    why = guard.cannot_run()
    if why:
        raise guard.CannotRun(why)
    t0 = time.monotonic()
    notes: list[str] = []
    try:
        secs = warm_model(log)
    except Exception as err:  # noqa: BLE001 - reported as one line, nothing changed yet
        raise ModelError(f"the model failed to run (nothing on the host was changed): "
                         f"{type(err).__name__}: {err}") from err
    notes.append(f"model loaded in {secs:.1f} s")
    results: list[dict] = []
    with guard.run_lock(), signals.exit_on_signals():
        notes += guard.repair_leftovers()
        lab = Lab()
        sysctls = guard.Sysctls()
        guard.save_state(sysctls.orig)
        ctx = Ctx(lab=lab, sysctls=sysctls, duration=duration, mutate=set(mutate or ()),
                  log=log, profile=profile, repeat=repeat)
        try:
            lab.setup()
            for name in names:
                why = why_skipped(name, profile)
                if why:
                    results.append(skipped(name, why))
                    continue
                log(f"{name} ...")
                t = time.monotonic()
                try:
                    r = CHECKS[name](ctx)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except Exception as err:  # noqa: BLE001 - this check fails, others go on
                    r = {"name": name, "status": "ran", "agree": False, "kernel": {},
                         "model": {}, "reason": f"error: {type(err).__name__}: {err}"}
                finally:
                    ctx.close_bpf()
                r["seconds"] = round(time.monotonic() - t, 2)
                results.append(r)
                log(f"{name}: {'agree' if r['agree'] else 'DISAGREE'} ({r['seconds']} s)")
        finally:
            with signals.signals_ignored():
                problems = cleanup(ctx)
            if problems:
                print("rxlab kernel-check: cleanup problems: " + "; ".join(problems),
                      file=sys.stderr)
    skipped_ = [{"name": r["name"], "reason": r["reason"]} for r in results
                if r["status"] == "skipped"]
    return {"checks": results, "skipped": skipped_, "notes": notes,
            "mutations": sorted(mutate or ()),
            "seconds": round(time.monotonic() - t0, 1)}


def why_skipped(name: str, profile: dict | None) -> str | None:
    """Why check ``name`` cannot run here (the kernel lacks a feature it needs, it has
    nothing to check against, or it needs a calibrated profile), else None."""
    missing = caps.probe().missing(NEEDS.get(name, ()))
    if missing:
        return "; ".join(missing)
    if name in UNAVAILABLE:
        why = UNAVAILABLE[name]()
        if why:
            return why
    if name in NEEDS_PROFILE and profile is None:
        return "needs --profile PATH (a profile written by rxlab calibrate)"
    return None


def cleanup(ctx: Ctx) -> list[str]:
    problems: list[str] = []
    steps = [("processes", PROCS.kill_all), ("bpf", ctx.close_bpf)]
    for what, fn in steps:
        try:
            fn()
        except Exception as err:  # noqa: BLE001
            problems.append(f"{what}: {err}")
    problems += ctx.sysctls.restore()
    problems += ctx.lab.teardown()
    if not problems:
        guard.clear_state()
    return problems


def select(only: str | None) -> list[str]:
    if not only:
        return list(ALL)
    names = [n.strip() for n in only.split(",") if n.strip()]
    bad = [n for n in names if n not in CHECKS]
    if bad:
        from rxlab.errors import UsageError
        raise UsageError(f"--only: unknown check {', '.join(bad)}; checks: {', '.join(ALL)}")
    return names


__all__ = ["ALL", "MUTATIONS", "run_checks", "select"]
