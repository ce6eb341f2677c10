"""``rxlab bench [--json] [--quick]``: speed and memory, side by side with SimPy and C."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "bench", help="benchmark: simulated packets/s, vs a SimPy model and C Toeplitz",
        description="Time rxlab (simulated packets per second, compile excluded) against a "
                    "SimPy model of the same RSS + RPS + backlog scenario fed identical "
                    "inputs, Toeplitz hashing against table-driven C compiled now, and "
                    "measure peak RSS. See docs/performance.md.")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--quick", action="store_true",
                   help="shorter runs (seconds instead of about half a minute)")
    p.add_argument("--skip-arfs", action="store_true",
                   help="do not time the arfs-flow-match scenario")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    import importlib.util

    from rxlab.bench.runner import print_text, run_bench
    from rxlab.errors import UsageError

    if importlib.util.find_spec("simpy") is None:
        raise UsageError("bench: the SimPy comparison needs simpy; "
                         "pip install 'simpy>=4.1' (it is in rxlab's [test] extra)")

    if args.json:
        res = run_bench(args.quick, skip_arfs=args.skip_arfs)
        from rxlab.jsonout import dumps

        print(dumps(res, indent=1, sort_keys=True))
        return 0
    from rxlab.report.tables import make_console

    console = make_console()
    with console.status("benchmarking") as status:
        res = run_bench(args.quick, log=lambda msg: status.update(f"benchmarking: {msg}"),
                        skip_arfs=args.skip_arfs)
    print_text(res, console)
    sys.stdout.flush()
    return 0
