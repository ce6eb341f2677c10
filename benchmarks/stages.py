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
    .venv/bin/python benchmarks/stages.py --record    # into benchmarks/results/stages.jsonl
"""

from __future__ import annotations

import argparse
import json

from rxlab.bench import scenarios
from rxlab.bench.engine import stage_times
from rxlab.bench.machine import machine
from rxlab.simulate import simulate

SCENARIOS = {
    "flow-limit": lambda: scenarios.flow_limit(False, 10.0),
    "reference": lambda: scenarios.reference(1.0),
    "arfs": lambda: scenarios.arfs_flow_match(False, 2.0),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", nargs="*", help=f"scenarios: {', '.join(SCENARIOS)} (default: all)")
    ap.add_argument("--runs", type=int, default=2, help="runs per scenario; the best is kept")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--record", action="store_true",
                    help="append the rows to benchmarks/results/stages.jsonl")
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
        best = min((stage_times(sc) for _ in range(max(a.runs, 1))), key=lambda r: r["loop_ns"])
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
    if a.record:
        from record import record

        print(f"# recorded in {record('stages', {'runs': a.runs, 'rows': rows})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
