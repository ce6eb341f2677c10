"""Peak RSS against run length: is memory bounded by flows and queues, not by packets?

Runs the flow-limit scenario (seed 003, antagonist + flow_limit, 520 kpps offered)
lengthened to 10^7, 10^8 (and, with --sizes, 10^9) offered packets, each in a fresh
child process (``python -m rxlab.bench.memory``), and prints a table of peak RSS
(``ru_maxrss``), wall time and simulated packets per second.

Two series settings:

- ``default``: the scenario's 10 ms time-series interval. The per-interval series
  (per-CPU time by category, packets, drops) are O(duration / interval) by design, so
  this row grows with run length by about 1.3 KB per interval for 8 CPUs (arrays plus
  the Python lists of the Result's series).
- ``fixed``: the interval scaled to duration / 1000 (1000 intervals whatever the
  length), which isolates the streaming engine: memory then stays flat.

Usage::

    .venv/bin/python benchmarks/streaming_memory.py                  # 1e7, 1e8
    .venv/bin/python benchmarks/streaming_memory.py --sizes 1e7,1e8,1e9 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from rxlab.bench.machine import machine
from rxlab.bench.memory import measure_in_child

FLOW_LIMIT_PPS = 520_000  # 120k client requests/s + 400 kpps antagonist


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e7,1e8", help="offered packets, comma separated")
    ap.add_argument("--series", default="default,fixed",
                    help="series settings to run: default, fixed or both")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    a = ap.parse_args(argv)
    sizes = [float(x) for x in a.sizes.split(",")]
    modes = [m.strip() for m in a.series.split(",")]
    rows = []
    print(f"# machine: {json.dumps(machine())}", flush=True)
    hdr = (f"| {'packets':>13} | {'series':>8} | {'intervals':>9} | {'wall s':>7} | "
           f"{'sim Mpps':>8} | {'RSS import MB':>13} | {'peak RSS MB':>11} |")
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|", flush=True)
    for n in sizes:
        for mode in modes:
            interval = None
            if mode == "fixed":
                interval = n / FLOW_LIMIT_PPS / 1000
            t0 = time.perf_counter()
            r = measure_in_child(n, interval)
            r["series_mode"] = mode
            r["child_wall_s"] = round(time.perf_counter() - t0, 1)
            rows.append(r)
            print(f"| {r['offered']:>13,} | {mode:>8} | {r['series_intervals']:>9,} | "
                  f"{r['wall_s']:>7.1f} | {r['pps'] / 1e6:>8.2f} | "
                  f"{r['rss_after_import_mb']:>13.0f} | {r['peak_rss_mb']:>11.0f} |",
                  flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": machine(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
