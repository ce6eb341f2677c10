"""Event-loop speed of two source trees, timed alternately (old, new, old, new, ...).

    .venv/bin/python benchmarks/interleave.py [--rounds 3] [--record] OLD_TREE NEW_TREE [arfs ...]

Each round runs the loop once per tree, in a fresh process with that tree on PYTHONPATH
(each tree keeps its own compiled loop in numba's cache: compile both first). The loop
is timed in CPU time of its thread (``time.thread_time``), so that other processes on a
shared machine do not count; alternating spreads the machine's drift over both sides.
Prints each tree's event-loop ns per packet per scenario, every round and the minimum.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SCENARIOS = ("flow-limit", "reference", "arfs")


def child(which: list[str]) -> dict:
    """Loop CPU ns per offered packet of each scenario, in this process."""
    import numpy as np

    from rxlab.bench import scenarios
    from rxlab.build import build
    from rxlab.kernel import rx_loop
    from rxlab.kernel.rx_loop import run, shape
    from rxlab.kernel.sim import sim_of
    from rxlab.simulate import DEFAULT_CHUNK, simulate
    from rxlab.traffic.stream import PacketStream

    make = {"flow-limit": lambda: scenarios.flow_limit(False, 3.0),
            "reference": lambda: scenarios.reference(0.3),
            "arfs": lambda: scenarios.arfs_flow_match(False, 0.5)}
    simulate(scenarios.reference(0.01))  # loads (or compiles) the loop: not timed
    out = {}
    for w in which:
        sc = make[w]()
        m = build(sc)
        stream = PacketStream(sc.traffic, m.flows, sc.seed, sc.duration)
        chunks = list(stream.chunks(DEFAULT_CHUNK))
        lps = int(round(8000.0 / sc.nic.link_gbps))
        svc = int(round(1e9 / sc.nic.max_pps)) if sc.nic.max_pps else 0
        sim = sim_of(m)
        cpu, n = 0.0, 0
        for ch in chunks:
            k = len(ch)
            n += k
            t_nic = np.empty(k, np.int64)
            overrun = np.empty(k, np.bool_)
            if hasattr(rx_loop, "feed"):  # trees whose polls take arrivals from the stream
                t_wire = np.empty(k, np.int64)
                shape(ch.t_ns, ch.size, lps, svc, sc.nic.nic_fifo, m.port_state, t_wire,
                      t_nic, overrun)
                c0 = time.thread_time()
                rx_loop.feed(sim, t_wire, t_nic, ch.flow, ch.size, overrun)
            else:
                shape(ch.t_ns, ch.size, lps, svc, sc.nic.nic_fifo, m.port_state, t_nic,
                      overrun)
                c0 = time.thread_time()
                run(sim, t_nic, ch.flow, ch.size, overrun, -1)
            cpu += time.thread_time() - c0
        out[w] = round(cpu / max(n, 1) * 1e9, 1)
    return out


def one(tree: Path, which: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    res = subprocess.run([sys.executable, __file__, "--child", *which], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(sys.argv[2:])))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("which", nargs="*", default=list(SCENARIOS), help=", ".join(SCENARIOS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--record", action="store_true",
                    help="append the figures to benchmarks/results/interleave.jsonl")
    a = ap.parse_args()
    got: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for _ in range(a.rounds):
        for side, tree in (("old", a.old), ("new", a.new)):
            for sc, ns in one(tree.resolve(), a.which).items():
                got[side].setdefault(sc, []).append(ns)
    for sc in got["old"]:
        o, n = got["old"][sc], got["new"][sc]
        print(f"{sc:10s} old min {min(o):7.1f} {o}   new min {min(n):7.1f} {n}")
    if a.record:
        from record import record, tree_of

        figures = {"old_tree": tree_of(a.old), "rounds": a.rounds, "scenarios": {
            sc: {"old_min": min(got["old"][sc]), "new_min": min(got["new"][sc]),
                 "old": got["old"][sc], "new": got["new"][sc]} for sc in got["old"]}}
        print(f"# recorded in {record('interleave', figures, tree_of(a.new))}")


if __name__ == "__main__":
    main()
