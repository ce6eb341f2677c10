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


def stage_times(sc: Scenario) -> dict:
    """One run of ``sc``, stage by stage: ns per offered packet of building the model,
    generating the traffic, shaping it, the event loop and assembling the result, and
    calendar events per packet. The calls are ``simulate``'s, in its order, but the
    traffic is generated whole before the loop so that each stage is timed alone (the
    loop then runs on prepared inputs, as the SimPy model does)."""
    import numpy as np

    from rxlab._cache import announce_compile
    from rxlab.build import build
    from rxlab.kernel.rx_loop import feed, feed_end, shape
    from rxlab.kernel.sim import sim_of
    from rxlab.metrics.result import assemble
    from rxlab.simulate import DEFAULT_CHUNK, in_flight
    from rxlab.traffic.stream import PacketStream

    t0 = time.perf_counter()
    m = build(sc)
    t_build = time.perf_counter() - t0
    stream = PacketStream(sc.traffic, m.flows, sc.seed, sc.duration)
    t0 = time.perf_counter()
    chunks = list(stream.chunks(DEFAULT_CHUNK))
    t_gen = time.perf_counter() - t0
    lps = int(round(8000.0 / sc.nic.link_gbps))
    svc = int(round(1e9 / sc.nic.max_pps)) if sc.nic.max_pps else 0
    announce_compile()
    sim = sim_of(m)
    t_shape = t_loop = 0.0
    n = 0
    for ch in chunks:
        k = len(ch)
        n += k
        t_wire = np.empty(k, np.int64)
        t_nic = np.empty(k, np.int64)
        ov = np.empty(k, np.bool_)
        t0 = time.perf_counter()
        shape(ch.t_ns, ch.size, lps, svc, sc.nic.nic_fifo, m.port_state, t_wire, t_nic, ov)
        t_shape += time.perf_counter() - t0
        t0 = time.perf_counter()
        feed(sim, t_wire, t_nic, ch.flow, ch.size, ov)
        t_loop += time.perf_counter() - t0
    end = int(round((sc.duration + sc.drain) * 1e9))
    t0 = time.perf_counter()
    feed_end(sim, end)
    t_loop += time.perf_counter() - t0
    t0 = time.perf_counter()
    assemble(m, in_flight(m))
    t_asm = time.perf_counter() - t0
    events = int(m.ev.n[1])  # every scheduled event has taken one sequence number
    ns = 1e9 / max(n, 1)
    return {
        "scenario": sc.name, "packets": n, "loop_s": t_loop, "cpus": int(m.params.ncpu),
        "build_ns": t_build * ns, "generate_ns": t_gen * ns, "shape_ns": t_shape * ns,
        "loop_ns": t_loop * ns, "assemble_ns": t_asm * ns,
        "events_per_packet": events / max(n, 1), "loop_ns_per_event": t_loop * 1e9 / events,
    }
