"""Where the compiled loop spends its time, per event kind and per mechanism.

    .venv/bin/python benchmarks/profile.py [SCENARIO ...] [--duration S]

SCENARIO: a built-in or file scenario, or one of the benchmark's own (``flow-limit``,
``reference``, ``arfs``; default: all three). Runs with ``RXLAB_PROFILE=1`` (a separate
compile of the loop, kept in its own cache folder) and prints, per site of
``rxlab.kernel.profile.SITES``: calls, calls per offered packet, cycles per call, cycles
per packet and the share of the loop's cycles. A site's cycles include the sites inside
it (indented); reading the counter adds ~20-40 cycles per call to every site.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ["RXLAB_PROFILE"] = "1"  # before rxlab is imported: the loop is compiled with it

BENCH = ("flow-limit", "reference", "arfs")


def scenario(name: str, duration: float | None):
    from rxlab.bench import scenarios
    from rxlab.scenario import load_scenario

    made = {"flow-limit": lambda: scenarios.flow_limit(False, duration or 1.0),
            "reference": lambda: scenarios.reference(duration or 0.2),
            "arfs": lambda: scenarios.arfs_flow_match(False, duration or 0.3)}
    if name in made:
        return made[name]()
    sc = load_scenario(name)
    return sc.model_copy(update={"duration": duration}) if duration else sc


def profile(sc) -> tuple[list[tuple], int, float]:
    """(rows, offered packets, cycles per ns) of one run of ``sc``."""
    from rxlab.build import build
    from rxlab.engine.cycles import cycles
    from rxlab.kernel.counters import CNT_OFFERED
    from rxlab.kernel.profile import SITES
    from rxlab.simulate import run_model

    m = build(sc)
    c0, t0 = cycles(), time.perf_counter_ns()
    run_model(m)
    ghz = (cycles() - c0) / max(1, time.perf_counter_ns() - t0)
    prof = m.st.prof
    return [(name, inside, int(prof[i, 0]), int(prof[i, 1])) for i, (name, inside)
            in enumerate(SITES)], int(m.st.cnt[CNT_OFFERED]), ghz


def depth(name: str, inside: dict) -> int:
    return 0 if not inside.get(name) else 1 + depth(inside[name], inside)


def print_table(label: str, rows: list[tuple], packets: int, ghz: float) -> None:
    inside = {n: i for n, i, _, _ in rows}
    total = max(1, next(cyc for n, _, _, cyc in rows if n == "run"))
    print(f"\n{label}: {packets:,} offered packets, loop {total / packets:,.0f} cycles "
          f"per packet ({total / packets / ghz:,.0f} ns at {ghz:.2f} cycles/ns)")
    print(f"{'site':26s} {'calls':>12s} {'per pkt':>8s} {'cyc/call':>9s} {'cyc/pkt':>8s} "
          f"{'share':>6s}")

    def show(parent: str) -> None:  # each site, then the sites inside it
        for name, within, calls, cyc in rows:
            if within != parent or not calls:
                continue
            print(f"{'  ' * depth(name, inside) + name:26s} {calls:12,d} "
                  f"{calls / packets:8.3f} {cyc / calls:9,.0f} {cyc / packets:8,.0f} "
                  f"{cyc / total:6.1%}")
            show(name)
    show("")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", nargs="*", default=list(BENCH))
    ap.add_argument("--duration", type=float, help="simulated seconds (default: each "
                    "benchmark scenario's own, or the scenario file's)")
    a = ap.parse_args(argv)
    for name in a.scenario:
        rows, packets, ghz = profile(scenario(name, a.duration))
        print_table(name, rows, packets, ghz)
    return 0


if __name__ == "__main__":
    sys.exit(main())
