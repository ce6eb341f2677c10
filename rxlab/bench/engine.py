"""Simulated packets per second of ``rxlab.simulate`` (numba compile excluded).

The timed call is the whole public API, ``simulate(scenario)``: compiling the scenario,
generating and shaping the traffic, the event loop, assembling the result and the
conservation check. A short warm-up run first loads (or compiles) the jitted code; the
figure is the best of a few runs, because the machine is shared and the best run is the
one least disturbed by other work.
"""

from __future__ import annotations

import time

from rxlab.scenario import Scenario


def time_simulate(sc: Scenario, runs: int = 3, warmup: Scenario | None = None) -> dict:
    from rxlab.simulate import simulate

    t0 = time.perf_counter()
    simulate(warmup or sc)
    warm_s = time.perf_counter() - t0
    best, walls, offered = float("inf"), [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        res = simulate(sc)
        wall = time.perf_counter() - t0
        walls.append(round(wall, 4))
        offered = res.data["packets"]["offered"]
        best = min(best, wall)
    return {
        "scenario": sc.name,
        "duration_s": sc.duration,
        "packets": offered,
        "pps": offered / best,
        "best_wall_s": round(best, 4),
        "walls_s": walls,
        "warmup_s": round(warm_s, 3),
    }
