"""Where a run's time goes: ns per packet in each stage of ``rxlab.simulate``.

Times the stages of ``simulate()`` one by one on the benchmark's scenarios: building
the model (``rxlab.build``), generating the traffic (``PacketStream.chunks``), wire and
NIC shaping (``rx_loop.shape``), the jitted event loop (``rx_loop.run``) and assembling
the result; and counts calendar events per packet. This is the table "Where the time
goes" of docs/performance.md. A short run first loads the jitted code (or compiles it:
not timed); each scenario then runs ``--runs`` times and the best run is printed.

Usage::

    .venv/bin/python benchmarks/stages.py                       # all three, 2 runs each
    .venv/bin/python benchmarks/stages.py arfs --runs 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from rxlab.bench import scenarios
from rxlab.bench.machine import machine
from rxlab.build import build
from rxlab.kernel.rx_loop import run, shape
from rxlab.kernel.sim import sim_of
from rxlab.metrics.result import assemble
from rxlab.simulate import DEFAULT_CHUNK, in_flight, simulate
from rxlab.traffic.stream import PacketStream

SCENARIOS = {
    "flow-limit": lambda: scenarios.flow_limit(False, 10.0),
    "reference": lambda: scenarios.reference(1.0),
    "arfs": lambda: scenarios.arfs_flow_match(False, 2.0),
}


def stages(sc) -> dict:
    """One run of ``sc``, stage by stage (the same calls, in the same order, as
    ``simulate``; the traffic is generated whole before the loop so that each stage is
    timed alone)."""
    t0 = time.perf_counter()
    m = build(sc)
    t_build = time.perf_counter() - t0
    stream = PacketStream(sc.traffic, m.flows, sc.seed, sc.duration)
    t0 = time.perf_counter()
    chunks = list(stream.chunks(DEFAULT_CHUNK))
    t_gen = time.perf_counter() - t0
    lps = int(round(8000.0 / sc.nic.link_gbps))
    svc = int(round(1e9 / sc.nic.max_pps)) if sc.nic.max_pps else 0
    sim = sim_of(m)
    t_shape = t_loop = 0.0
    n = 0
    for ch in chunks:
        k = len(ch)
        n += k
        t_nic = np.empty(k, np.int64)
        ov = np.empty(k, np.bool_)
        t0 = time.perf_counter()
        shape(ch.t_ns, ch.size, lps, svc, sc.nic.nic_fifo, m.port_state, t_nic, ov)
        t_shape += time.perf_counter() - t0
        t0 = time.perf_counter()
        run(sim, t_nic, ch.flow, ch.size, ov, -1)
        t_loop += time.perf_counter() - t0
    end = int(round((sc.duration + sc.drain) * 1e9))
    t0 = time.perf_counter()
    run(sim, np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.int32),
        np.empty(0, np.bool_), end)
    t_loop += time.perf_counter() - t0
    t0 = time.perf_counter()
    assemble(m, in_flight(m))
    t_asm = time.perf_counter() - t0
    events = int(m.ev.n[1])  # every scheduled event has taken one sequence number
    ns = 1e9 / max(n, 1)
    return {
        "scenario": sc.name, "packets": n, "cpus": int(m.params.ncpu),
        "build_ns": t_build * ns, "generate_ns": t_gen * ns, "shape_ns": t_shape * ns,
        "loop_ns": t_loop * ns, "assemble_ns": t_asm * ns,
        "events_per_packet": events / max(n, 1), "loop_ns_per_event": t_loop * 1e9 / events,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", nargs="*", help=f"scenarios: {', '.join(SCENARIOS)} (default: all)")
    ap.add_argument("--runs", type=int, default=2, help="runs per scenario; the best is kept")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    a = ap.parse_args(argv)
    bad = [w for w in a.which if w not in SCENARIOS]
    if bad:
        ap.error(f"unknown scenario {bad[0]!r}: choose from {', '.join(SCENARIOS)}")
    simulate(scenarios.reference(0.01))  # loads (or compiles) the jitted code: not timed
    print(f"# machine: {json.dumps(machine())}", flush=True)
    cols = ("scenario", "CPUs", "packets", "events/pkt", "build", "generate", "shape",
            "loop", "assemble", "total", "loop ns/event")
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---:" for _ in cols) + "|", flush=True)
    rows = []
    for w in a.which or list(SCENARIOS):
        sc = SCENARIOS[w]()
        if sc is None:
            print(f"| {w}: not available |")
            continue
        best = min((stages(sc) for _ in range(max(a.runs, 1))), key=lambda r: r["loop_ns"])
        best["total_ns"] = sum(best[k] for k in ("build_ns", "generate_ns", "shape_ns",
                                                 "loop_ns", "assemble_ns"))
        rows.append(best)
        r = best
        print(f"| {r['scenario']} | {r['cpus']} | {r['packets']:,} | "
              f"{r['events_per_packet']:.2f} | {r['build_ns']:.1f} | {r['generate_ns']:.1f} | "
              f"{r['shape_ns']:.1f} | {r['loop_ns']:.1f} | {r['assemble_ns']:.1f} | "
              f"{r['total_ns']:.1f} | {r['loop_ns_per_event']:.1f} |", flush=True)
    print("(ns per offered packet unless marked; best of the runs by loop time)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"machine": machine(), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
